"""Abuse suite: what hostile env code tries, and proof that each real backend contains it.

Every probe runs real attack code inside the sandbox and checks the outcome on the host side too
(a file that must not appear, a connection the host server must not see, a process that must not
be alive). The unsafe backend is run for the probes it is *expected to fail*, and the test asserts
that the attack there indeed succeeds: that proves each probe can detect a leak, so a passing
probe on bwrap/docker means something. (test_probe_catches_a_bwrap_without_net_namespace does the
same against a deliberately weakened bwrap.)
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from _sbx import REAL_BACKENDS, TEST_LIMITS, backend_reason

PROJECT_DIR = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CONTAINED = ("bwrap", "docker")


@pytest.fixture(params=REAL_BACKENDS)
def backend(request) -> str:  # type: ignore[no-untyped-def]
    reason = backend_reason(request.param)
    if reason is not None:
        pytest.skip(f"{request.param} unavailable: {reason}")
    return request.param


@pytest.fixture
def sb(backend, shared_sandboxes):  # type: ignore[no-untyped-def]
    box = shared_sandboxes(backend)
    yield box
    # every attack must leave the sandbox usable
    r = box.exec(["python", "-c", "print('alive')"], timeout_s=20)
    assert r.stdout == "alive\n", r


def only_contained(backend: str) -> None:
    if backend not in CONTAINED:
        pytest.skip("unsafe-subprocess is not expected to contain this and running it unsandboxed would harm the host")


def run_probe(sb, code: str, *args: str, timeout_s: float = 15) -> dict:  # type: ignore[no-untyped-def]
    r = sb.exec(["python", "-c", code, *args], timeout_s=timeout_s)
    assert r.exit_code == 0 and not r.timed_out, r
    return json.loads(r.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------------------------------
# network


class _Listener:
    """A TCP server on the host's loopback that records every connection it accepts."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            try:
                conn.sendall(b"host-secret-banner\n")
            finally:
                conn.close()

    def close(self) -> None:
        self._stop.set()
        self.thread.join(2)
        self.sock.close()


NET_PROBE = """
import json, socket, sys
port = int(sys.argv[1])
out = {}
try:
    s = socket.create_connection(("127.0.0.1", port), timeout=3)
    out["loopback"] = "CONNECTED:" + s.recv(100).decode(errors="replace")
except OSError as e:
    out["loopback"] = "BLOCKED:" + type(e).__name__
print(json.dumps(out))
"""

EXTERNAL_PROBE = """
import json, socket
out = {}
try:
    socket.getaddrinfo("pypi.org", 443)
    out["dns"] = "RESOLVED"
except OSError as e:
    out["dns"] = "BLOCKED:" + type(e).__name__
# A UDP connect() only asks the kernel for a route: no packet is sent.
try:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.connect(("192.0.2.1", 53))
    out["route"] = "ROUTE:" + u.getsockname()[0]
except OSError as e:
    out["route"] = "BLOCKED:" + type(e).__name__
try:
    ifaces = [name for _, name in socket.if_nameindex()]
except OSError:
    ifaces = []
out["ifaces"] = ifaces
print(json.dumps(out))
"""


def test_network_loopback(backend, sb) -> None:  # type: ignore[no-untyped-def]
    srv = _Listener()
    try:
        out = run_probe(sb, NET_PROBE, str(srv.port))
    finally:
        srv.close()
    if backend in CONTAINED:
        assert out["loopback"].startswith("BLOCKED"), out
        assert srv.accepted == 0
    else:  # expected leak: proves the probe detects one
        assert out["loopback"] == "CONNECTED:host-secret-banner\n", out
        assert srv.accepted >= 1


def test_network_external_and_dns(backend, sb) -> None:  # type: ignore[no-untyped-def]
    only_contained(backend)
    out = run_probe(sb, EXTERNAL_PROBE)
    assert out["dns"].startswith("BLOCKED"), out
    assert out["route"].startswith("BLOCKED"), out
    assert set(out["ifaces"]) <= {"lo"}, out


def test_probe_catches_a_bwrap_without_net_namespace(make_sandbox, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Break one flag on purpose (no --unshare-net) and check the network probe notices."""
    from sandbox.bwrap import BwrapSandbox

    box = make_sandbox("bwrap")
    real = BwrapSandbox.bwrap_argv

    def leaky(self, argv, **kw):  # type: ignore[no-untyped-def]
        args = real(self, argv, **kw)
        i = args.index("--unshare-all")
        return [*args[:i], "--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-uts",
                "--unshare-cgroup-try", *args[i + 1:]]

    monkeypatch.setattr(BwrapSandbox, "bwrap_argv", leaky)
    srv = _Listener()
    try:
        out = run_probe(box, NET_PROBE, str(srv.port))
    finally:
        srv.close()
    assert out["loopback"].startswith("CONNECTED"), out
    assert srv.accepted >= 1


# --------------------------------------------------------------------------------------------------
# filesystem

WRITE_PROBE = """
import json, sys
out = {}
for p in sys.argv[1:]:
    try:
        with open(p, "w") as f:
            f.write("pwned")
        out[p] = "WROTE"
    except OSError as e:
        out[p] = "DENIED:" + type(e).__name__
print(json.dumps(out))
"""


def test_writes_outside_workdir(backend, sb, tmp_path) -> None:  # type: ignore[no-untyped-def]
    tag = uuid.uuid4().hex[:10]
    outside_tmp = tmp_path / f"probe-{tag}"
    if backend in CONTAINED:
        targets = [f"/usr/probe-{tag}", f"/etc/probe-{tag}", f"/home/probe-{tag}", f"/root/probe-{tag}",
                   str(PROJECT_DIR / f"probe-{tag}"), str(HERE / f"probe-{tag}"), str(outside_tmp)]
    else:  # never let the unsandboxed backend write into system dirs: a tmp dir proves the point
        targets = [str(outside_tmp)]
    try:
        out = run_probe(sb, WRITE_PROBE, *targets)
        on_host = [t for t in targets if os.path.exists(t)]
        if backend in CONTAINED:
            assert on_host == [], f"sandbox wrote onto the host: {on_host}"
            for sysdir in ("/usr", "/etc"):
                assert out[f"{sysdir}/probe-{tag}"].startswith("DENIED"), out
        else:
            assert out[str(outside_tmp)] == "WROTE" and on_host == [str(outside_tmp)]
    finally:
        for t in targets:
            try:
                os.unlink(t)
            except OSError:
                pass


READ_PROBE = """
import json, os, sys
out = {}
for p in sys.argv[1:]:
    try:
        if os.path.isdir(p):
            out[p] = "LISTED:%d" % len(os.listdir(p))
        else:
            with open(p, "rb") as f:
                out[p] = "READ:" + f.read(200).decode(errors="replace")
    except OSError as e:
        out[p] = "DENIED:" + type(e).__name__
print(json.dumps(out))
"""


def test_reading_host_files(backend, sb, tmp_path) -> None:  # type: ignore[no-untyped-def]
    tag = uuid.uuid4().hex
    in_tree = HERE / f".sentinel-{tag}.txt"
    outside = tmp_path / f"sentinel-{tag}.txt"
    in_tree.write_text(f"SENTINEL-{tag}")
    outside.write_text(f"SENTINEL-{tag}")
    os.chmod(outside, 0o644)
    targets = [str(in_tree), str(outside), "/etc/shadow", str(PROJECT_DIR / ".git"), str(PROJECT_DIR / "tests"),
               str(PROJECT_DIR / "pyproject.toml"), "/root", os.path.expanduser("~/.bashrc"), "/var/run/docker.sock"]
    try:
        out = run_probe(sb, READ_PROBE, *targets)
    finally:
        in_tree.unlink()
    leaked = {k: v for k, v in out.items() if not v.startswith("DENIED")}
    if backend in CONTAINED:
        # /root exists inside only as a skeleton holding the interpreter prefix path: see below
        leaked = {k: v for k, v in leaked.items() if k != "/root"}
        assert leaked == {}, leaked
        assert all(f"SENTINEL-{tag}" not in v for v in out.values())
    else:  # the unsafe backend reads whatever the host user can: the probe sees it
        assert out[str(in_tree)] == f"READ:SENTINEL-{tag}"
        assert out[str(outside)] == f"READ:SENTINEL-{tag}"
        if os.geteuid() == 0:
            assert out["/etc/shadow"].startswith("READ:")


def test_root_skeleton_holds_only_the_interpreter(backend, sb) -> None:  # type: ignore[no-untyped-def]
    """The interpreter prefix may live under /root (pyenv); nothing else of the host's home may."""
    only_contained(backend)
    out = run_probe(sb, "import os, json; print(json.dumps({'l': sorted(os.listdir('/root')) if os.path.isdir('/root') else []}))")
    prefix_parts = Path(sys.base_prefix).parts
    allowed = {prefix_parts[2]} if len(prefix_parts) > 2 and prefix_parts[1] == "root" else set()
    try:
        host_home = set(os.listdir("/root"))
    except OSError:
        host_home = set()
    assert (set(out["l"]) & host_home) - allowed == set(), out


SECRET_PROBE = """
import json, os
needle = "sk-sentinel-"
out = {"environ": [k for k, v in os.environ.items() if needle in v], "proc": []}
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    try:
        with open("/proc/%s/environ" % pid, "rb") as f:
            if needle.encode() in f.read():
                out["proc"].append(int(pid))
    except OSError:
        pass
print(json.dumps(out))
"""


def test_secrets_not_visible(backend, sb, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    secret = f"sk-sentinel-{uuid.uuid4().hex}"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    # A host process holding the secret in its environment, like an agent or trainer would.
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                              env={**os.environ, "OPENAI_API_KEY": secret})
    try:
        out = run_probe(sb, SECRET_PROBE)
    finally:
        holder.kill()
        holder.wait()
    assert out["environ"] == [], out  # no backend passes the parent's environment through
    if backend in CONTAINED:
        assert out["proc"] == [], out
    else:
        assert out["proc"], "the unsafe backend should see host processes' environments"


# --------------------------------------------------------------------------------------------------
# resources

FORK_BOMB = """
import json, os, sys, time
marker = sys.argv[1]
r, w = os.pipe()
bomber = os.fork()
if bomber == 0:
    os.close(r)
    failures = 0
    deadline = time.time() + 2.5
    while time.time() < deadline:
        try:
            if os.fork() == 0:
                deadline = time.time() + 2.5  # every child bombs on
        except OSError:
            failures += 1
            if failures == 1:
                os.write(w, b"E")
            time.sleep(0.01)
    time.sleep(30)
    os._exit(0)
os.close(w)
peak = 0
end = time.time() + 3
while time.time() < end:
    n = sum(1 for p in os.listdir("/proc") if p.isdigit())
    peak = max(peak, n)
    time.sleep(0.05)
os.set_blocking(r, False)
try:
    hit_limit = os.read(r, 1) == b"E"
except BlockingIOError:
    hit_limit = False
print(json.dumps({"peak": peak, "hit_limit": hit_limit}))
sys.stdout.flush()
os._exit(0)
"""


def _host_procs(marker: str) -> list[str]:
    r = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True)
    return [line for line in r.stdout.splitlines() if "pgrep" not in line]


def test_fork_bomb_contained(backend, sb) -> None:  # type: ignore[no-untyped-def]
    only_contained(backend)
    marker = f"bomb-{uuid.uuid4().hex}"
    t0 = time.monotonic()
    r = sb.exec(["python", "-c", FORK_BOMB, marker], timeout_s=15)
    elapsed = time.monotonic() - t0
    assert elapsed < 15 + 5, elapsed
    assert r.exit_code == 0, r
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["hit_limit"], out  # fork() failed: a limit stopped it
    assert out["peak"] <= TEST_LIMITS.max_processes + 2, out
    assert _host_procs(marker) == []  # nothing left behind, the moment exec returned
    assert subprocess.run(["true"]).returncode == 0  # the host can still fork


def test_memory_bomb(backend, sb) -> None:  # type: ignore[no-untyped-def]
    only_contained(backend)
    t0 = time.monotonic()
    r = sb.exec(["python", "-c", "x = bytearray(8 << 30); print('ALLOCATED', len(x))"], timeout_s=20)
    assert time.monotonic() - t0 < 20
    assert "ALLOCATED" not in r.stdout
    assert r.exit_code != 0
    assert "MemoryError" in r.stderr or r.killed_reason == "signal:SIGKILL", r


def test_infinite_loop_killed(backend, sb) -> None:  # type: ignore[no-untyped-def]
    only_contained(backend)
    t0 = time.monotonic()
    r = sb.exec(["python", "-c", "while True: pass"], timeout_s=1.5)
    assert r.timed_out and r.killed_reason == "timeout" and r.exit_code is None
    assert time.monotonic() - t0 < 1.5 + 3


def test_output_flood_capped(backend, sb) -> None:  # type: ignore[no-untyped-def]
    only_contained(backend)
    cap = 64 * 1024
    code = "import sys\nb = b'x' * (1 << 20)\nfor _ in range(200):\n    sys.stdout.buffer.write(b)\n"
    t0 = time.monotonic()
    r = sb.exec(["python", "-c", code], timeout_s=10, output_cap=cap)
    assert time.monotonic() - t0 < 10
    assert r.truncated and len(r.stdout) <= cap
    assert r.killed_reason == "output_cap" or r.exit_code == 0


ORPHAN_PROBE = """
import os, sys
marker = sys.argv[1]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(1000)", marker])
    os._exit(0)
os.wait()
print("daemon started")
"""


def test_no_process_outlives_the_job(backend, sb) -> None:  # type: ignore[no-untyped-def]
    marker = f"orphan-{uuid.uuid4().hex}"
    r = sb.exec(["python", "-c", ORPHAN_PROBE, marker], timeout_s=15)
    assert r.exit_code == 0 and "daemon started" in r.stdout, r
    alive = _host_procs(marker)  # checked the moment exec returns: no grace period
    if backend in CONTAINED:
        assert alive == [], alive
    else:  # the unsafe backend leaves it running: the probe sees it (then we clean up)
        assert alive, "expected the unsandboxed daemon to survive"
        for line in alive:
            try:
                os.kill(int(line.split()[0]), 9)
            except OSError:
                pass


def test_worker_orphans_die_with_close(backend, make_sandbox) -> None:  # type: ignore[no-untyped-def]
    only_contained(backend)
    box = make_sandbox(backend)
    marker = f"wk-orphan-{uuid.uuid4().hex}"
    box.put_files({"orphan_handler.py": (
        "import os, sys\n"
        "def spawn(p):\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        f"        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(1000)', '{marker}'])\n"
        "    return 'ok'\n"
        "METHODS = {'spawn': spawn}\n")})
    w = box.start_worker("orphan_handler")
    assert w.call("spawn", {}) == "ok"
    time.sleep(0.2)
    box.close()
    assert _host_procs(marker) == []


def test_job_dies_with_its_host_process(backend) -> None:  # type: ignore[no-untyped-def]
    """If the trusted process dies mid-exec (crash, kill -9), the sandboxed job must not live on."""
    only_contained(backend)
    marker = f"hostdeath-{uuid.uuid4().hex}"
    code = (
        "import os, threading\n"
        "from sandbox import open_sandbox\n"
        f"sb = open_sandbox({backend!r})\n"
        "threading.Timer(1.5, lambda: os._exit(0)).start()\n"
        f"sb.exec(['python', '-c', 'import time; time.sleep(1000)', {marker!r}])\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=PROJECT_DIR, timeout=60)
    if backend == "docker":  # the container outlives a SIGKILLed client; prune() is the cleanup path
        from sandbox.docker_backend import prune

        prune()
    deadline = time.monotonic() + 5
    while _host_procs(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _host_procs(marker) == []
