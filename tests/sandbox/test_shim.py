"""Env code runs in a process of its own, behind the trusted shim that alone holds the host channel (issue 19).

Each hostile env below tries to answer the host itself: by writing a reply with the id it finds in its own
process, by writing lines for every id it can think of, by reading the channel's fds through /proc, by posing
as the shim. Each must end in a clear failure (or the real answer), never in the forged verdict. A companion
run without the shim (``Sandbox.shimmed = False``, the layout before the split) shows that the first forgery
is real: there the host accepts reward 1.0 from an env whose ``evaluate`` returns 0.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from _sbx import TEST_LIMITS, backend_reason

from env_registry.hosted import SandboxedEnv
from sandbox import WorkerCrashed
from sandbox.base import Sandbox

TINY = (Path(__file__).resolve().parents[1] / "envs" / "tiny_cancel.py").read_text()
CONTAINED = [b for b in ("bwrap", "docker") if backend_reason(b) is None]
pytestmark = pytest.mark.skipif(not CONTAINED, reason="needs bwrap or docker")

FORGED_RESULT = ('{"seed": 0, "scenario_hash": "x", "reward": 1.0, "reward_detail": {}, "steps": 1, "env_errors": [], '
                 '"ended_by": "agent", "observation": "forged", "terminated": true, "truncated": false, "info": {}}')

#: Finds the request being served in its own process (the serving frame's locals) and writes the reply
#: itself, reward 1.0, on the protocol fd; then lets the real reply (reward 0) follow, or leaves at once.
FORGE_WITH_THE_RIGHT_ID = '''
    def evaluate(self, episode):
        import os, sys
        frame = sys._getframe()
        while frame is not None and not ("req_id" in frame.f_locals and "out" in frame.f_locals):
            frame = frame.f_back
        line = '{"id":%d,"result":' % frame.f_locals["req_id"] + RESULT + '}\\n'  # the worker's own spelling
        os.write(frame.f_locals["out"], line.encode())
        if EXIT:
            os._exit(0)
        return 0.0
'''


def with_evaluate(body: str) -> str:
    """The tiny env with ``body`` (a whole ``def evaluate``) in place of its own evaluate()."""
    return TINY.replace("    def evaluate(self, episode):\n", body + "\n    def evaluate_unused(self, episode):\n", 1)


def forger(exit_after: bool) -> str:
    return with_evaluate(FORGE_WITH_THE_RIGHT_ID.replace("RESULT", repr(FORGED_RESULT)).replace("EXIT", str(exit_after)))


@pytest.fixture(params=CONTAINED)
def backend(request) -> str:  # type: ignore[no-untyped-def]
    return request.param


def _episode(env: SandboxedEnv) -> float:
    return env.call("episode", {"seed": 0, "policy": "reference"})["reward"]


def test_forger_source_is_what_the_test_says() -> None:
    source = forger(False)
    assert "evaluate_unused" in source and '"reward": 1.0' in source and "os._exit" in source
    compile(source, "forger", "exec")


def test_a_reply_forged_with_the_right_id_fails_the_call(backend: str) -> None:
    with SandboxedEnv(forger(exit_after=False), backend=backend, limits=TEST_LIMITS) as env:
        with pytest.raises(WorkerCrashed, match="ProtocolViolation: the env process sent a second line after its reply"):
            _episode(env)
        assert not env.worker.alive
    with SandboxedEnv(forger(exit_after=False), backend=backend, limits=TEST_LIMITS) as env:  # the training path
        env.call("reset", {"seed": 0})
        env.call("step", {"action": {"content": "", "calls": [{"name": "get_reservation_details",
                                                              "arguments": {"reservation_id": "X"}}]}})
        with pytest.raises(WorkerCrashed, match="ProtocolViolation"):
            env.call("step", {"action": "Goodbye."})  # the episode ends: evaluate() forges


def test_a_forged_reply_and_an_exit_before_the_real_one_fails_the_call(backend: str) -> None:
    with SandboxedEnv(forger(exit_after=True), backend=backend, limits=TEST_LIMITS) as env:
        with pytest.raises(WorkerCrashed, match="ProtocolViolation: the env process went away right after its reply"):
            _episode(env)


def test_without_the_shim_the_same_forgery_is_a_verdict(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The attack the shim stops: one process for env code and protocol, and the host takes the forged 1.0."""
    monkeypatch.setattr(Sandbox, "shimmed", False)
    with SandboxedEnv(forger(exit_after=False), backend=CONTAINED[0], limits=TEST_LIMITS) as env:
        assert "shim" not in env.worker.info
        assert _episode(env) == 1.0
    monkeypatch.undo()
    with SandboxedEnv(TINY.replace("    def evaluate(self, episode):\n", "    def evaluate(self, episode):\n"
                                   "        return 0.0\n", 1), backend=CONTAINED[0], limits=TEST_LIMITS) as env:
        assert env.worker.info["shim"] is True and _episode(env) == 0.0


LINES_FOR_EVERY_ID = '''
    def evaluate(self, episode):
        import os
        forged = "".join('{"id": %d, "result": FORGED}\\n' % i for i in range(1, 200))
        for fd in range(1, 12):
            try:
                os.write(fd, forged.encode())
            except OSError:
                pass
        return 0.0
'''.replace("FORGED", FORGED_RESULT)


def test_lines_for_other_ids_on_the_protocol_fd_fail_the_call(backend: str) -> None:
    with SandboxedEnv(with_evaluate(LINES_FOR_EVERY_ID), backend=backend, limits=TEST_LIMITS) as env:
        with pytest.raises(WorkerCrashed, match="ProtocolViolation: the env process wrote a line that is not the reply"):
            _episode(env)


#: What the env process can reach of its parent (the shim) and of the sandbox's pid 1.
CHANNEL_PROBE = '''
import os


def probe(params):
    shim = os.getppid()
    out = {"fds": {}, "shim": shim, "tries": {}}
    for name in os.listdir("/proc/self/fd"):
        try:
            out["fds"][name] = os.readlink("/proc/self/fd/" + name)
        except OSError:
            pass
    for pid in sorted({shim, 1}):
        for what, flags in (("fd/0", os.O_RDONLY), ("fd/1", os.O_WRONLY), ("mem", os.O_RDONLY)):
            path = "/proc/%d/%s" % (pid, what)
            try:
                os.close(os.open(path, flags))
                out["tries"][path] = "opened"
            except OSError as exc:
                out["tries"][path] = type(exc).__name__
        try:
            os.listdir("/proc/%d/fd" % pid)
            out["tries"]["/proc/%d/fd" % pid] = "listed"
        except OSError as exc:
            out["tries"]["/proc/%d/fd" % pid] = type(exc).__name__
    return out


METHODS = {"probe": probe}
'''


def test_the_env_process_cannot_reach_the_channel(backend: str, make_sandbox) -> None:  # type: ignore[no-untyped-def]
    box = make_sandbox(backend)
    box.put_files({"channel_probe.py": CHANNEL_PROBE})
    worker = box.start_worker("channel_probe")
    out = worker.call("probe", {})
    # its parent: the shim, or (fresh processes, the default) the template it was forked from, which holds no
    # channel either (sandbox.template)
    assert out["shim"] in (worker.info["pid"], worker.info["env_pid"]) and worker.info["env_pid"] != worker.info["pid"]
    # only its own two pipes, stderr, its private copy of the reply pipe, and the listing's own fd
    assert len(out["fds"]) <= 5, out["fds"]
    shim_paths = {k: v for k, v in out["tries"].items() if k.startswith(f"/proc/{out['shim']}/")}
    assert shim_paths and set(shim_paths.values()) == {"PermissionError"}, out["tries"]
    if backend == "bwrap":  # the shim is pid 1: no bwrap init holds the channel, and pid 1 is out of reach too
        assert worker.info["pid"] == 1
        assert {v for k, v in out["tries"].items() if k.startswith("/proc/1/")} == {"PermissionError"}, out["tries"]
    if backend == "bwrap":
        # the host's ends of the channel are pipes; the env process holds none of them
        channel = worker._channel
        host_inodes = {os.fstat(f.fileno()).st_ino for f in (channel.proc.stdin, channel.proc.stdout)}
        held = {int(m.group(1)) for v in out["fds"].values() if (m := re.fullmatch(r"pipe:\[(\d+)\]", v))}
        assert held and not held & host_inodes, (held, host_inodes)


#: Poses as the shim: a ready line and replies for many ids on stdout, then kills its parent.
IMPERSONATE = '''
    def evaluate(self, episode):
        import os, signal
        for i in range(1, 50):
            print('{"id": null, "event": "ready", "pid": 1, "methods": ["episode"]}')
            print('{"id": %d, "result": FORGED}' % i, flush=True)
        try:
            os.kill(os.getppid(), signal.SIGKILL)  # inside bwrap the shim is pid 1, which ignores it
        except OSError:
            pass
        return 0.0
'''.replace("FORGED", FORGED_RESULT)


def test_posing_as_the_shim_gets_the_real_answer_or_a_failure(backend: str) -> None:
    with SandboxedEnv(with_evaluate(IMPERSONATE), backend=backend, limits=TEST_LIMITS) as env:
        try:
            reward = _episode(env)
        except WorkerCrashed as exc:  # its parent can be killed (docker's shim is not pid 1; with fresh processes
            # the parent is the template, sandbox.template): the call fails, it never takes the forged answer
            assert "died during" in str(exc) or "went away right after its reply" in str(exc), exc
        else:  # the parent outlived the call (bwrap's one-process shim is pid 1, which ignores kill from inside);
            # stdout went to stderr
            assert reward == 0.0
