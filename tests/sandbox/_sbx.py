"""Helpers shared by the sandbox tests (backend list, limits, construction)."""

from __future__ import annotations

import sys
import tempfile


import sandbox
from sandbox import Sandbox, SandboxLimits, available_backends

REAL_BACKENDS = ("bwrap", "docker", "unsafe-subprocess")
ALL_UNDER_TEST = (*REAL_BACKENDS, "e2b-fake")

#: Small limits keep the abuse suite fast on 2 cores.
TEST_LIMITS = SandboxLimits(cpu_seconds=20, memory_mb=512, file_size_mb=16, max_processes=32,
                            wall_timeout_s=20, output_cap_bytes=64 * 1024)

_avail: dict[str, str | None] | None = None


def backend_reason(name: str) -> str | None:
    """None if the backend can run here, else why not (from available_backends())."""
    global _avail
    if name == "e2b-fake":
        try:
            import e2b  # noqa: F401
        except ImportError:
            return "e2b SDK not installed (pip install e2b)"
        return None
    if _avail is None:
        _avail = available_backends()
    return _avail[name]


class _FakeE2B:
    def __init__(self) -> None:
        from fake_e2b import FakeEnvd

        self.dir = tempfile.mkdtemp(prefix="fake-e2b-")
        self.envd = FakeEnvd(self.dir).start_server()
        self.n = 0


def construct(name: str, limits: SandboxLimits, fake: _FakeE2B | None = None) -> Sandbox:
    if name == "e2b-fake":
        from sandbox.e2b_backend import E2BSandbox

        assert fake is not None
        fake.n += 1
        return E2BSandbox(limits, root=f"{fake.dir}/sbx{fake.n}", python=sys.executable)
    return sandbox.construct(name, limits)


