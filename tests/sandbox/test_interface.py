"""The Sandbox/Worker contract, checked the same way on every backend (E2B through its fake)."""

from __future__ import annotations

import io
import json
import sys
import threading
import time
from pathlib import Path

import pytest
from _sbx import ALL_UNDER_TEST, TEST_LIMITS, backend_reason

import sandbox
from sandbox import (
    SandboxError,
    SandboxLimits,
    SandboxUnavailable,
    WorkerCrashed,
    WorkerError,
    WorkerTimeout,
    available_backends,
    open_sandbox,
)
from sandbox.worker import serve

PY = "python"


@pytest.fixture(params=ALL_UNDER_TEST)
def sb(request, shared_sandboxes):  # type: ignore[no-untyped-def]
    return shared_sandboxes(request.param)


# -- files and exec ---------------------------------------------------------------------------------


def test_put_files_exec_round_trip(sb) -> None:  # type: ignore[no-untyped-def]
    sb.put_files({"pkg/data.bin": b"\x00\x01binary", "pkg/hello.py": "print('héllo', open('pkg/data.bin','rb').read())"})
    r = sb.exec([PY, "pkg/hello.py"])
    assert r.exit_code == 0, r
    assert r.stdout == "héllo b'\\x00\\x01binary'\n"
    assert not r.timed_out and not r.truncated and r.killed_reason is None
    # overwrite in place
    sb.put_files({"pkg/data.bin": b"v2"})
    assert "b'v2'" in sb.exec([PY, "pkg/hello.py"]).stdout


def test_put_files_rejects_escaping_paths(sb) -> None:  # type: ignore[no-untyped-def]
    for bad in ("../evil.py", "/etc/evil", "a/../../evil", ""):
        with pytest.raises(SandboxError):
            sb.put_files({bad: "x"})


def test_bad_argv_is_rejected(sb) -> None:  # type: ignore[no-untyped-def]
    for bad in ([], "python -c pass", [PY, 3]):
        with pytest.raises(SandboxError):
            sb.exec(bad)  # type: ignore[arg-type]


def test_exit_codes_stderr_and_stdin(sb) -> None:  # type: ignore[no-untyped-def]
    r = sb.exec([PY, "-c", "import sys; sys.stderr.write('oops'); sys.exit(7)"])
    assert r.exit_code == 7 and r.stderr == "oops" and not r.timed_out
    r = sb.exec([PY, "-c", "import sys; print(sys.stdin.read()[::-1])"], stdin=b"abc")
    assert r.exit_code == 0 and r.stdout == "cba\n"
    r = sb.exec([PY, "-c", "raise SystemExit(0)"])
    assert r.exit_code == 0


def test_environment_is_cleared_and_cwd_is_workdir(sb) -> None:  # type: ignore[no-untyped-def]
    r = sb.exec([PY, "-c", "import os, json; print(json.dumps({'env': dict(os.environ), 'cwd': os.getcwd()}))"])
    data = json.loads(r.stdout)
    allowed = {"PATH", "HOME", "PYTHONPATH", "LANG", "PYTHONDONTWRITEBYTECODE", "PWD", "HOSTNAME",
               "LD_LIBRARY_PATH"}  # bwrap as root: the interpreter is moved to /sandbox/python, its RUNPATH is not
    assert set(data["env"]) <= allowed, data["env"]
    assert data["env"]["HOME"] == sb.workdir
    assert data["cwd"] == sb.workdir


def test_timeout_flag(sb) -> None:  # type: ignore[no-untyped-def]
    t0 = time.monotonic()
    r = sb.exec([PY, "-c", "import time; print('start', flush=True); time.sleep(60)"], timeout_s=1.0)
    assert r.timed_out and r.killed_reason == "timeout" and r.exit_code is None
    assert r.stdout == "start\n"
    assert time.monotonic() - t0 < 6
    assert sb.exec([PY, "-c", "print(1)"]).stdout == "1\n"  # the sandbox is still usable


def test_truncation_flag(sb) -> None:  # type: ignore[no-untyped-def]
    r = sb.exec([PY, "-c", "print('x' * 100_000)"], output_cap=10_000)
    assert r.truncated and len(r.stdout) == 10_000
    r = sb.exec([PY, "-c", "print('x' * 9_000)"], output_cap=10_000)
    assert not r.truncated and r.exit_code == 0


def test_trusted_runtime_importable_repo_not_visible(sb) -> None:  # type: ignore[no-untyped-def]
    code = (
        "import json, os, sys\n"
        "import sandbox.worker, trace_env.sdk, trace_env.engine, jsonschema\n"
        "rt = os.environ['PYTHONPATH']\n"
        "names = sorted(os.listdir(rt))\n"
        "files = [f for d, _, fs in os.walk(rt) for f in fs]\n"
        "hosts = {}\n"
        "for host_side in ('env_registry', 'schemas', 'factory', 'sandbox.base'):\n"
        "    try:\n        __import__(host_side); hosts[host_side] = 'importable'\n"
        "    except ImportError:\n        hosts[host_side] = 'absent'\n"
        "print(json.dumps({'names': names, 'exts': sorted({os.path.splitext(f)[1] for f in files}), 'hosts': hosts}))\n"
    )
    r = sb.exec([PY, "-c", code])
    assert r.exit_code == 0, r.stderr[-2000:]
    data = json.loads(r.stdout)
    assert set(data["names"]) == {"sandbox", "trace_env"}  # the inside half of the project, nothing else
    assert set(data["exts"]) <= {".py", ".json", ".pyc"}  # sources, profiles, and the bytecode compiled from those sources
    if sb.backend in ("bwrap", "docker"):  # the unsafe backend and the local E2B fake run on the host itself
        assert set(data["hosts"].values()) == {"absent"}, data["hosts"]  # host-side code never ships into a sandbox


# -- workers ------------------------------------------------------------------------------------------


def test_worker_call_error_timeout_crash_restart(sb) -> None:  # type: ignore[no-untyped-def]
    w = sb.start_worker("sandbox.handlers.echo")
    try:
        assert w.alive and w.info["handler"] == "sandbox.handlers.echo"
        assert w.call("echo", {"a": [1, 2], "s": "é"}) == {"a": [1, 2], "s": "é"}
        assert w.call("noisy", {}) == {"ok": True}  # stray prints go to stderr, not the protocol
        assert sb.exec([PY, "-c", "print('exec beside a worker')"]).exit_code == 0
        assert w.call("echo", {"survived": "exec"}) == {"survived": "exec"}  # execs never reap workers
        with pytest.raises(WorkerError) as ei:
            w.call("raise", {"message": "boom"})
        assert ei.value.type == "ValueError" and ei.value.message == "boom"
        assert "raise_" in (ei.value.traceback or "")
        with pytest.raises(WorkerError) as ei:
            w.call("nope", {})
        assert ei.value.type == "MethodNotFound"
        assert w.call("echo", {"after": "errors"}) == {"after": "errors"}

        t0 = time.monotonic()
        with pytest.raises(WorkerTimeout):
            w.call("sleep", {"seconds": 30}, timeout_s=0.5)
        assert time.monotonic() - t0 < 5
        assert not w.alive
        with pytest.raises(WorkerCrashed):
            w.call("echo", {})
        w.restart()
        assert w.call("echo", {"x": 1}) == {"x": 1}

        with pytest.raises(WorkerCrashed) as ei:
            w.call("crash", {"message": "dying-now-123", "code": 3})
        assert "dying-now-123" in ei.value.stderr_tail
        assert not w.alive
        w.restart()
        assert w.call("echo", {"y": 2}) == {"y": 2}
    finally:
        w.close()


def test_worker_bad_handler_fails_at_start(sb) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(WorkerCrashed) as ei:
        sb.start_worker("no_such_handler_module_xyz")
    assert "ModuleNotFoundError" in str(ei.value)


# -- isolation between sandboxes ----------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["bwrap", "docker", "e2b-fake"])
def test_concurrent_sandboxes_do_not_see_each_other(backend, make_sandbox) -> None:  # type: ignore[no-untyped-def]
    a, b = make_sandbox(backend), make_sandbox(backend)
    a.put_files({"secret.txt": "only-for-a"})
    b.put_files({"mine.txt": "b"})
    other_paths = [f"{a.workdir}/secret.txt"]
    if hasattr(a, "host_workdir"):
        other_paths.append(str(a.host_workdir / "secret.txt"))
    code = (
        "import json, os, sys\n"
        "res = {}\n"
        "for p in sys.argv[1:]:\n"
        "    try:\n        res[p] = open(p).read()\n"
        "    except OSError as e:\n        res[p] = type(e).__name__\n"
        "res['own'] = sorted(os.listdir('.'))\n"
        "print(json.dumps(res))\n"
    )
    results = {}

    def run(name, box):  # type: ignore[no-untyped-def]
        results[name] = box.exec([PY, "-c", code, *other_paths])

    threads = [threading.Thread(target=run, args=(n, x)) for n, x in (("a", a), ("b", b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    seen_by_b = json.loads(results["b"].stdout)
    if backend == "e2b-fake":  # separate VMs in real E2B; the fake shares one host, so only own dir
        assert seen_by_b["own"] == ["mine.txt"]
        return
    assert all(v != "only-for-a" for k, v in seen_by_b.items() if k != "own"), seen_by_b
    assert seen_by_b["own"] == ["mine.txt"]
    assert json.loads(results["a"].stdout)[f"{a.workdir}/secret.txt"] == "only-for-a"


@pytest.mark.parametrize("backend", ["bwrap", "docker", "unsafe-subprocess"])
def test_close_kills_workers_and_removes_workdir(backend, make_sandbox) -> None:  # type: ignore[no-untyped-def]
    box = make_sandbox(backend)
    box.put_files({"f.txt": "x"})
    w = box.start_worker("sandbox.handlers.echo")
    assert w.call("echo", {"k": 1}) == {"k": 1}
    host_dir = getattr(box, "host_workdir", None)
    box.close()
    assert not w.alive
    with pytest.raises(WorkerCrashed):
        w.call("echo", {})
    if host_dir is not None:
        assert not Path(host_dir).exists()
    if backend == "docker":
        import docker

        with pytest.raises(docker.errors.NotFound):
            box.client.containers.get(box.name)
    with pytest.raises(SandboxError):
        box.exec([PY, "-c", "1"])


# -- selection --------------------------------------------------------------------------------------------


def test_available_backends_reports_every_backend() -> None:
    avail = available_backends()
    assert set(avail) == {"bwrap", "docker", "e2b", "unsafe-subprocess"}
    assert avail["unsafe-subprocess"] is None
    for reason in avail.values():
        assert reason is None or (isinstance(reason, str) and "\n" not in reason)
        assert reason is None or not reason.startswith("probe failed"), reason  # every probe answers, none crashes


def test_auto_picks_a_real_sandbox_and_says_why() -> None:
    avail = available_backends()
    if avail["docker"] is not None and avail["bwrap"] is not None:
        pytest.skip(f"no real backend here: {avail}")
    with open_sandbox("auto", TEST_LIMITS) as box:
        expected = "docker" if avail["docker"] is None else "bwrap"
        assert box.backend == expected
        assert box.selection_reason.startswith(f"auto: {expected}")
        assert not box.unsafe


def test_auto_never_falls_back_to_unsafe(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(sandbox, "_probe", lambda name, refresh=False: None if name == "unsafe-subprocess" else "nope")
    with pytest.raises(SandboxUnavailable) as ei:
        open_sandbox("auto")
    msg = str(ei.value)
    assert "bubblewrap" in msg and "--sandbox unsafe-subprocess" in msg


def test_unknown_backend_is_an_error() -> None:
    with pytest.raises(ValueError):
        open_sandbox("chroot")


def test_unsafe_backend_warns_and_is_marked(capfd) -> None:  # type: ignore[no-untyped-def]
    with open_sandbox("unsafe-subprocess", TEST_LIMITS) as box:
        assert box.unsafe is True
        assert box.selection_reason == "backend 'unsafe-subprocess' requested explicitly"
    err = capfd.readouterr().err
    assert "WARNING: unsafe-subprocess backend: untrusted code runs UNSANDBOXED" in err


def test_limits_model_validates() -> None:
    with pytest.raises(Exception):
        SandboxLimits(memory_mb=0)
    assert SandboxLimits().model_dump() == {
        "cpu_seconds": 30, "memory_mb": 1024, "file_size_mb": 64, "max_processes": 64,
        "wall_timeout_s": 60, "output_cap_bytes": 1_000_000, "cpu_quota": 1.0, "workdir_mb": 256,
        "workdir_inodes": 10_000, "shm_mb": 16, "tmpfs_inodes": 10_000, "open_files": 256,
        "reply_max_bytes": 32 * 1024 * 1024,
        "unsolicited_output_bytes": 1024 * 1024,
    }


# -- the worker loop itself (in-process) ---------------------------------------------------------------------


def _run_worker(lines: list[str], methods) -> list[dict]:  # type: ignore[no-untyped-def]
    out = io.StringIO()
    serve(methods, io.StringIO("".join(lines)), out)
    return [json.loads(x) for x in out.getvalue().splitlines()]


def test_worker_loop_survives_bad_input() -> None:
    class Weird:
        def __str__(self) -> str:
            return "weird!"

    def boom(p):  # type: ignore[no-untyped-def]
        raise KeyError("k")

    def leave(p):  # type: ignore[no-untyped-def]
        raise SystemExit(3)

    def circular(p):  # type: ignore[no-untyped-def]
        a: list = []
        a.append(a)
        return a

    methods = {"ok": lambda p: {"v": Weird()}, "boom": boom, "leave": leave, "circular": circular}
    msgs = _run_worker([
        "not json\n", "[1,2]\n", '{"id": 1}\n', '{"id": 2, "method": "ok", "params": []}\n',
        '{"id": 3, "method": "ok"}\n', '{"id": 4, "method": "boom", "params": {}}\n',
        '{"id": 5, "method": "leave", "params": {}}\n', '{"id": 6, "method": "circular"}\n',
        "\n", '{"id": "s", "method": "missing"}\n', '{"id": 7, "method": "ok", "params": null}\n',
    ], methods)
    assert msgs[0]["event"] == "ready"
    by = msgs[1:]
    assert by[0]["id"] is None and by[0]["error"]["type"] == "BadRequest"
    assert by[1]["id"] is None and by[1]["error"]["type"] == "BadRequest"
    assert by[2]["id"] == 1 and by[2]["error"]["type"] == "BadRequest"
    assert by[3]["id"] == 2 and by[3]["error"]["type"] == "BadRequest"
    assert by[4] == {"id": 3, "result": {"v": "weird!"}}
    assert by[5]["id"] == 4 and by[5]["error"]["type"] == "KeyError" and "Traceback" in by[5]["error"]["traceback"]
    assert by[6]["id"] == 5 and by[6]["error"]["type"] == "SystemExit"
    assert by[7]["id"] == 6 and by[7]["error"]["type"] == "SerializationError"
    assert by[8]["id"] == "s" and by[8]["error"]["type"] == "MethodNotFound"
    assert by[9] == {"id": 7, "result": {"v": "weird!"}}


def test_worker_module_reports_import_failure() -> None:
    import subprocess

    r = subprocess.run([sys.executable, "-m", "sandbox.worker", "no_such_mod_abc"], capture_output=True,
                       text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert r.returncode == 1
    msg = json.loads(r.stdout.splitlines()[0])
    assert msg["id"] is None and msg["error"]["type"] == "ModuleNotFoundError"


def test_e2b_backend_reports_missing_key(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    if backend_reason("e2b-fake") is not None:
        pytest.skip("e2b SDK not installed")
    from sandbox import e2b_backend

    monkeypatch.delenv("E2B_API_KEY", raising=False)
    monkeypatch.setenv("E2B_DEBUG", "false")
    assert "E2B_API_KEY" in (e2b_backend.probe() or "")
