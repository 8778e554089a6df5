"""``unsafe-subprocess``: a plain child process in a temp dir, with rlimits. NOT a sandbox.

For development machines where neither Docker nor bubblewrap is available, and only on explicit
opt-in (``auto`` never picks it). The code it runs can read host files, the parent's environment
through /proc, reach the network and the Docker socket, and leave daemons behind. It warns loudly
on construction and sets ``unsafe = True`` so every report can say isolation was off.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from sandbox import leftovers, runtime
from sandbox._proc import ProcessChannel, ProcessSet, run_job, set_rlimits, spawn
from sandbox.base import (
    Channel,
    ExecResult,
    Sandbox,
    SandboxLimits,
    as_bytes,
    check_argv,
    default_cap,
    default_timeout,
    host_env_allowlist,
    normalize_relpath,
)

WARNING = (
    "WARNING: unsafe-subprocess backend: untrusted code runs UNSANDBOXED on this machine "
    "(host files, environment via /proc, network and processes are all reachable). "
    "Use it only for code you trust; install bubblewrap or Docker for real isolation."
)


class UnsafeSubprocessSandbox(Sandbox):
    backend = "unsafe-subprocess"
    unsafe = True

    def __init__(self, limits: SandboxLimits | None = None):
        super().__init__(limits)
        print(WARNING, file=sys.stderr, flush=True)
        self._root: Path | None = None
        self._procs = ProcessSet()

    @property
    def workdir(self) -> str:
        if self._root is None:
            return "<not open>"
        return str(self._root / "work")

    @property
    def host_workdir(self) -> Path:
        return Path(self.workdir)

    def open(self) -> None:
        if self._opened:
            return
        self._rt = runtime.host_runtime()
        root = Path(tempfile.gettempdir()) / f"trace-unsafe-{uuid.uuid4().hex[:12]}"
        self._lease = leftovers.Lease(root.name, self.backend, root=str(root))  # named before it exists, as bwrap does
        root.mkdir(mode=0o700)
        self._root = root
        (self._root / "work").mkdir()
        self._opened = True

    def _teardown(self) -> None:
        self._procs.kill_all()
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
        if getattr(self, "_lease", None) is not None:
            self._lease.release()

    def _env(self) -> dict[str, str]:
        return host_env_allowlist(self.workdir, str(self._rt / "python"), runtime.search_path())

    def _launch(self, argv: list[str], stdin: bool) -> subprocess.Popen:
        self._check_open()
        limits = self.limits
        if argv and argv[0] in ("python", "python3"):
            argv = [sys.executable, *argv[1:]]
        proc = spawn(argv, cwd=self.workdir, env=self._env(), preexec_fn=lambda: set_rlimits(limits), stdin=stdin)
        self._procs.add(proc)
        return proc

    def put_files(self, files: dict[str, bytes | str]) -> None:
        self._check_open()
        for rel, data in files.items():
            dest = Path(self.workdir) / normalize_relpath(rel)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(as_bytes(data))

    def exec(
        self,
        argv: list[str],
        timeout_s: float | None = None,
        output_cap: int | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        started = time.monotonic()
        proc = self._launch(check_argv(argv), stdin=stdin is not None)
        try:
            return run_job(
                proc, stdin_data=stdin, timeout_s=default_timeout(self.limits, timeout_s),
                output_cap=default_cap(self.limits, output_cap), started=started,
            )
        finally:
            self._procs.discard(proc)

    def _spawn_worker(self, argv: list[str]) -> Channel:
        return ProcessChannel(self._launch(argv, stdin=True))
