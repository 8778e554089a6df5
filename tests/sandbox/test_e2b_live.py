"""Live E2B check: runs only with E2B_API_KEY set (creates a real remote sandbox, costs credits).

The contract tests in test_interface.py exercise the e2b backend against a local fake of envd on
every run; this one confirms the same calls against the real service.
"""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.skipif(
    not os.environ.get("E2B_API_KEY") or os.environ.get("E2B_DEBUG", "").lower() == "true",
    reason="E2B_API_KEY not set (live E2B test needs an account; the fake-envd contract tests ran instead)",
)


def test_live_e2b_round_trip() -> None:
    from sandbox.e2b_backend import E2BSandbox

    with E2BSandbox() as sb:
        sb.put_files({"hello.py": "import sys; print('hi', sys.stdin.read())"})
        r = sb.exec(["python", "hello.py"], stdin=b"there", timeout_s=60)
        assert r.exit_code == 0 and r.stdout == "hi there\n", r
        r = sb.exec(["python", "-c", "import time; time.sleep(30)"], timeout_s=2)
        assert r.timed_out
        r = sb.exec(["python", "-c", "print('x' * 100000)"], output_cap=1000)
        assert r.truncated and len(r.stdout) == 1000
