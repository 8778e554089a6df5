"""A Docker worker's protocol runs over two FIFOs past the daemon's relay, and env code reaches neither (issue 19).

The host makes the FIFOs in a root-owned, unlistable directory (a Docker volume of the sandbox's own) mounted read-only in the container, sends their
random name to the shim on the attach stream, and unlinks them once the shim is ready. These tests check what
that promises: the channel in use is the FIFO one; after start no name is left; env code cannot list the
directory, create anything in it, guess its way in, or hold a FIFO end; a second worker of the same sandbox
(env code already loaded) cannot open the FIFOs of a worker starting beside it; a shim that dies is a crash,
before and after its ready line; and the results are the same as over the attach stream.
"""

from __future__ import annotations

import os

import pytest
from _sbx import backend_reason

from sandbox import WorkerCrashed
from sandbox.docker_fifo import INSIDE_CHANNELS, FifoChannel

pytestmark = [
    pytest.mark.skipif(backend_reason("docker") is not None, reason=f"docker unavailable: {backend_reason('docker')}"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the FIFO channel needs root on the host (else the attach stream)"),
]

#: What env code in the sandbox can do to the channel directory, and which of its fds point there.
FIFO_PROBE = '''
import os

DIR = "%s"


def probe(params):
    out = {"fds": [], "tries": {}}
    for name in os.listdir("/proc/self/fd"):
        try:
            out["fds"].append(os.readlink("/proc/self/fd/" + name))
        except OSError:
            pass
    for what, action in (("list", lambda: os.listdir(DIR)),
                         ("create", lambda: os.close(os.open(DIR + "/x", os.O_CREAT | os.O_WRONLY, 0o600))),
                         ("mkfifo", lambda: os.mkfifo(DIR + "/y")),
                         ("guess", lambda: os.close(os.open(DIR + "/" + "0" * 32 + ".out", os.O_WRONLY | os.O_NONBLOCK)))):
        try:
            action()
            out["tries"][what] = "done"
        except OSError as exc:
            out["tries"][what] = type(exc).__name__
    return out


def watch(params):
    """Poll the directory for names while another worker starts (it must never see one)."""
    import time
    seen = set()
    deadline = time.monotonic() + params["seconds"]
    while time.monotonic() < deadline:
        try:
            seen.update(os.listdir(DIR))
        except OSError as exc:
            return {"error": type(exc).__name__, "seen": sorted(seen)}
    return {"error": None, "seen": sorted(seen)}


METHODS = {"probe": probe, "watch": watch}
''' % INSIDE_CHANNELS


def test_the_protocol_runs_over_fifos_that_env_code_cannot_reach(make_sandbox) -> None:  # type: ignore[no-untyped-def]
    box = make_sandbox("docker")
    assert box._channels is not None and oct(box._channels.stat().st_mode & 0o777) == "0o711"
    box.put_files({"fifo_probe.py": FIFO_PROBE})
    worker = box.start_worker("fifo_probe")
    assert isinstance(worker._channel, FifoChannel)
    assert os.listdir(box._channels) == []  # both names unlinked once the shim was ready
    out = worker.call("probe", {})
    assert not [fd for fd in out["fds"] if INSIDE_CHANNELS in fd], out["fds"]  # the env process holds no end
    assert out["tries"]["list"] == "PermissionError", out
    for what in ("create", "mkfifo"):  # read-only mount of a root-owned directory
        assert out["tries"][what] in ("PermissionError", "OSError"), out
    assert out["tries"]["guess"] in ("FileNotFoundError", "PermissionError"), out
    assert worker.call("probe", {})["tries"] == out["tries"]  # the channel still answers, call after call


def test_a_loaded_worker_cannot_see_the_fifos_of_a_worker_starting_beside_it(make_sandbox) -> None:  # type: ignore[no-untyped-def]
    import threading

    box = make_sandbox("docker")
    box.put_files({"fifo_probe.py": FIFO_PROBE})
    spy = box.start_worker("fifo_probe")
    seen: dict = {}
    watcher = threading.Thread(target=lambda: seen.update(spy.call("watch", {"seconds": 3.0}, timeout_s=30)))
    watcher.start()
    others = [box.start_worker("sandbox.handlers.echo") for _ in range(3)]
    watcher.join()
    assert seen == {"error": "PermissionError", "seen": []}, seen
    assert [w.call("echo", {"n": i}) for i, w in enumerate(others)] == [{"n": 0}, {"n": 1}, {"n": 2}]


def test_a_shim_that_dies_is_a_crash_not_a_hang(make_sandbox) -> None:  # type: ignore[no-untyped-def]
    box = make_sandbox("docker")
    worker = box.start_worker("sandbox.handlers.echo")
    with pytest.raises(WorkerCrashed, match="died during"):
        worker.call("crash", {"code": 7}, timeout_s=30)
    worker.restart()  # a fresh worker gets fresh FIFOs
    assert worker.call("echo", {"a": [1, "b"]}) == {"a": [1, "b"]}
    assert os.listdir(box._channels) == []


def test_a_shim_that_never_gets_its_channel_fails_to_start(make_sandbox, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from sandbox import docker_fifo

    box = make_sandbox("docker")
    monkeypatch.setattr(docker_fifo.FifoChannel, "start", lambda self: self.sock.sendall(b"not-a-name\n"))
    with pytest.raises(WorkerCrashed) as caught:
        box.start_worker("sandbox.handlers.echo", startup_timeout_s=30)
    assert "no channel name" in str(caught.value), caught.value


def test_same_results_as_over_the_attach_stream(make_sandbox) -> None:  # type: ignore[no-untyped-def]
    fifo_box = make_sandbox("docker")
    attach_box = make_sandbox("docker")
    channels, attach_box._channels = attach_box._channels, None  # the attach stream, as where no FIFOs can be made
    try:
        payload = {"s": "é\u202e" * 50, "n": list(range(100)), "big": "x" * 200_000}
        fifo, attach = fifo_box.start_worker("sandbox.handlers.echo"), attach_box.start_worker("sandbox.handlers.echo")
        assert isinstance(fifo._channel, FifoChannel) and not isinstance(attach._channel, FifoChannel)
        assert fifo.call("echo", payload) == attach.call("echo", payload) == payload
    finally:
        attach_box._channels = channels


def _volume(client, name: str):  # type: ignore[no-untyped-def]
    import docker

    try:
        return client.volumes.get(name)
    except docker.errors.NotFound:
        return None


def test_the_channel_volume_goes_with_its_sandbox(make_sandbox) -> None:  # type: ignore[no-untyped-def]
    from sandbox.docker_container import LABEL, channels_volume

    box = make_sandbox("docker")
    client, name = box.client, channels_volume(box.name)
    volume = _volume(client, name)
    assert volume is not None and volume.attrs["Mountpoint"] == str(box._channels)
    assert volume.attrs["Labels"][LABEL] == "channels" and volume.attrs["Labels"][f"{LABEL}.owner"]
    box.start_worker("sandbox.handlers.echo")
    import docker

    fresh = docker.from_env()
    try:
        box.close()
        assert _volume(fresh, name) is None and not box._channels.exists()
    finally:
        fresh.close()


def test_a_dead_owners_fifo_volume_goes_with_its_container(make_sandbox) -> None:  # type: ignore[no-untyped-def]
    import subprocess
    import sys
    from pathlib import Path

    import docker

    from sandbox.docker_backend import prune
    from sandbox.docker_container import channels_volume

    code = ("import os\nfrom sandbox import open_sandbox\nsb = open_sandbox('docker')\n"
            "sb.start_worker('sandbox.handlers.echo')\nprint(sb.name, flush=True)\nos._exit(0)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[2])
    name = out.stdout.strip().splitlines()[-1]
    client = docker.from_env()
    try:
        assert _volume(client, channels_volume(name)) is not None, out.stderr  # the owner died without closing
        client.api.remove_container(name, force=True)  # as if killed between the container and its volumes
        prune()
        assert _volume(client, channels_volume(name)) is None and _volume(client, name) is None
    finally:
        client.close()
