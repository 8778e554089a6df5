"""Docker sandboxes do not share per-user kernel budgets, and nothing they can read names the host's paths.

Real containers: one sandbox takes every inotify instance its uid may have while a second one, opened beside
it, must still be able to create one (on a shared uid the second gets EMFILE for as long as the first holds
them); and the files a sandboxed process can read about itself and PID 1 must not name host directories.
"""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from _sbx import TEST_LIMITS, backend_reason, construct

pytestmark = pytest.mark.skipif(backend_reason("docker") is not None,
                                reason=f"docker unavailable: {backend_reason('docker')}")

#: Takes inotify instances until the kernel refuses, from several processes (RLIMIT_NOFILE is per process, the
#: inotify budget per user), reports how many and when, then holds them.
_HOG = r"""
import ctypes, json, os, time
libc = ctypes.CDLL(None, use_errno=True)
held, errno_ = [], 0
for _ in range(8):
    r, w = os.pipe()
    if os.fork() == 0:
        os.close(r)
        n = 0
        while True:
            fd = libc.inotify_init()
            if fd < 0:
                os.write(w, json.dumps([n, ctypes.get_errno()]).encode()); os.close(w)
                break
            n += 1
        time.sleep(3600)
    os.close(w)
    n, errno_ = json.loads(os.read(r, 100)); os.close(r)
    held.append(n)
    if errno_ == 24 and n < 200:  # EMFILE before this process's own fd limit: the user's budget is spent
        break
print(json.dumps({"held": sum(held), "errno": errno_, "spent_at": time.time()}), flush=True)
time.sleep(float(os.environ.get("HOLD_S", "12")))
print(json.dumps({"still_holding_at": time.time()}))
"""

_ONE = r"""
import ctypes, json, time
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init()
print(json.dumps({"fd": fd, "errno": ctypes.get_errno(), "at": time.time()}))
"""


def test_one_sandbox_exhausting_inotify_leaves_another_able_to_create_them() -> None:
    hog, other = construct("docker", TEST_LIMITS), construct("docker", TEST_LIMITS)
    try:
        hog.open()
        other.open()
        result: dict[str, object] = {}
        thread = threading.Thread(target=lambda: result.update(r=hog.exec(["python", "-c", _HOG], timeout_s=40)))
        thread.start()
        time.sleep(6)  # the hog has spent its budget long before (asserted below from its own timestamps)
        probe = other.exec(["python", "-c", _ONE], timeout_s=20)
        thread.join(60)
        run = result["r"]
        lines = [json.loads(line) for line in run.stdout.splitlines()]  # type: ignore[attr-defined]
        spent, held = lines[0], lines[-1]
        assert spent["errno"] == 24 and spent["held"] > 0, f"the hog did not exhaust its inotify budget: {run}"
        mine = json.loads(probe.stdout)
        assert spent["spent_at"] < mine["at"] < held["still_holding_at"], (spent, mine, held)
        assert mine["fd"] >= 0, f"the second sandbox got errno {mine['errno']} while the first held {spent['held']} instances"
    finally:
        hog.close()
        other.close()


def test_two_docker_sandboxes_run_as_distinct_non_root_uids() -> None:
    a, b = construct("docker", TEST_LIMITS), construct("docker", TEST_LIMITS)
    try:
        a.open()
        b.open()
        ids = [int(s.exec(["python", "-c", "import os; print(os.getuid())"]).stdout) for s in (a, b)]
        assert ids[0] != ids[1] and 0 not in ids and 65534 not in ids
    finally:
        a.close()
        b.close()


def test_no_environment_a_sandbox_can_read_names_a_host_path() -> None:
    """PID 1's environment (Docker's PATH with the image's interpreter prefix, HOSTNAME) and an exec's."""
    import sys

    from sandbox.runtime import runtime_root

    host_paths = [os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "/var/lib/docker",
                  str(runtime_root()), os.path.realpath(sys.base_prefix)]
    box = construct("docker", TEST_LIMITS)
    try:
        box.open()
        code = ("import sys\nfor p in ('/proc/1/environ', '/proc/self/environ', '/proc/1/cmdline'):\n"
                " sys.stdout.write(open(p, 'rb').read().decode(errors='replace') + '\\n')\n")
        run = box.exec(["python", "-c", code])
        assert run.exit_code == 0, run.stderr
        seen = run.stdout
        assert "PYTHONPATH=/sandbox/runtime" in seen  # the exec's own environment was read
        assert not [p for p in host_paths if p in seen], seen
    finally:
        box.close()
