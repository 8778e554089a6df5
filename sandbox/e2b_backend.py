"""E2B backend: the same interface on an ``e2b.Sandbox`` (a Firecracker micro-VM run by E2B).

Isolation is E2B's (a separate VM); on top of it each command runs with a cleared environment,
rlimits (``ulimit``) and an in-VM ``timeout -s KILL`` so a lost connection cannot leave a job
running forever. Files go through ``files.write_files``, commands through ``commands.run``
(background handle, output consumed by a reader thread, killed from the caller's thread), and
the persistent worker is a background command with stdin open.

Configuration (arguments or environment):
``E2B_API_KEY`` (live use), ``TRACE_E2B_TEMPLATE`` (a template with Python 3.11 + pydantic,
jsonschema, gymnasium, numpy for workers; default E2B's base template), ``TRACE_E2B_ROOT``
(directory inside the VM, default ``/home/user/trace``), ``TRACE_E2B_PYTHON`` (default
``python3``). With ``E2B_DEBUG=true`` the SDK talks to a local envd at ``E2B_SANDBOX_URL``
(default ``http://localhost:49983``) - which is how the contract tests run against a fake.

Not contained per exec (unlike bwrap/docker): processes a command daemonises survive until the
sandbox is closed, when the whole VM is destroyed.
"""

from __future__ import annotations

import os
import shlex
import threading
import time
from typing import Any

from sandbox import runtime
from sandbox.base import (
    Channel,
    ExecResult,
    OutputCapture,
    Sandbox,
    SandboxError,
    SandboxLimits,
    SandboxUnavailable,
    as_bytes,
    check_argv,
    default_cap,
    default_timeout,
    normalize_relpath,
)


def _e2b():  # type: ignore[no-untyped-def]
    try:
        import e2b
    except ImportError as e:  # pragma: no cover - depends on the install
        raise SandboxUnavailable("e2b SDK not installed: pip install 'trace-factory[e2b]'") from e
    return e2b


class E2BSandbox(Sandbox):
    backend = "e2b"

    def __init__(
        self,
        limits: SandboxLimits | None = None,
        *,
        template: str | None = None,
        root: str | None = None,
        python: str | None = None,
        sandbox_timeout_s: int = 3600,
    ):
        super().__init__(limits)
        self._e2b = _e2b()
        self.template = template or os.environ.get("TRACE_E2B_TEMPLATE") or None
        self.root = (root or os.environ.get("TRACE_E2B_ROOT") or "/home/user/trace").rstrip("/")
        self.python = python or os.environ.get("TRACE_E2B_PYTHON") or "python3"
        self.sandbox_timeout_s = sandbox_timeout_s
        self.sbx: Any = None
        self.debug = os.environ.get("E2B_DEBUG", "false").lower() == "true"

    @property
    def workdir(self) -> str:
        return f"{self.root}/work"

    @property
    def runtime_dir(self) -> str:
        return f"{self.root}/runtime"

    # -- lifecycle -----------------------------------------------------------------------------------
    def open(self) -> None:
        if self._opened:
            return
        if not self.debug and not os.environ.get("E2B_API_KEY"):
            raise SandboxUnavailable("E2B_API_KEY is not set")
        try:
            kwargs: dict[str, Any] = {"timeout": self.sandbox_timeout_s}
            if self.template:
                kwargs["template"] = self.template
            self.sbx = self._e2b.Sandbox.create(**kwargs)
        except Exception as e:  # noqa: BLE001
            raise SandboxUnavailable(f"could not create an E2B sandbox: {e}") from e
        self._opened = True
        try:
            self._run_simple(f"mkdir -p {shlex.quote(self.workdir)} {shlex.quote(self.runtime_dir)}")
            files = runtime.runtime_files()
            entries = [{"path": f"{self.runtime_dir}/{rel}", "data": data} for rel, data in files.items()]
            if entries:
                self.sbx.files.write_files(entries)
            self._run_simple(f"chmod -R a-w {shlex.quote(self.runtime_dir)}")
        except Exception:
            self.close()
            raise

    def _teardown(self) -> None:
        if self.sbx is None:
            return
        if self.debug:  # a debug envd outlives us: clean our directory ourselves
            try:
                self._run_simple(f"chmod -R u+w {shlex.quote(self.root)}; rm -rf {shlex.quote(self.root)}")
            except Exception:  # noqa: BLE001
                pass
        try:
            self.sbx.kill()
        except Exception:  # noqa: BLE001
            pass

    def _run_simple(self, cmd: str) -> None:
        res = self.sbx.commands.run(cmd, timeout=60)
        if res.exit_code != 0:
            raise SandboxError(f"e2b setup command failed ({res.exit_code}): {res.stderr[-300:]}")

    # -- command construction --------------------------------------------------------------------------
    def _shell(self, argv: list[str], timeout_s: float | None) -> str:
        lim = self.limits
        if argv and argv[0] in ("python", "python3"):
            argv = [self.python, *argv[1:]]
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": self.workdir,
            "PYTHONPATH": self.runtime_dir,
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        ulimits = (
            f"ulimit -t {lim.cpu_seconds} -v {lim.memory_mb * 1024} -f {lim.file_size_mb * 1024} "
            f"-u {lim.max_processes} -c 0"
        )
        guard = f"timeout -s KILL {int(timeout_s) + 1} " if timeout_s else ""
        envs = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        return f"cd {shlex.quote(self.workdir)} && {ulimits} && exec {guard}env -i {envs} {shlex.join(argv)}"

    # -- interface -------------------------------------------------------------------------------------
    def put_files(self, files: dict[str, bytes | str]) -> None:
        self._check_open()
        entries = [{"path": f"{self.workdir}/{normalize_relpath(rel)}", "data": as_bytes(data)} for rel, data in files.items()]
        if entries:
            self.sbx.files.write_files(entries)

    def exec(
        self,
        argv: list[str],
        timeout_s: float | None = None,
        output_cap: int | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        self._check_open()
        timeout = default_timeout(self.limits, timeout_s)
        cap = default_cap(self.limits, output_cap)
        out, err = OutputCapture(cap), OutputCapture(cap)
        started = time.monotonic()
        handle = self.sbx.commands.run(
            self._shell(check_argv(argv), timeout), background=True, stdin=stdin is not None,
            timeout=timeout + 30, retain_output=False,
        )
        done = threading.Event()
        state: dict[str, Any] = {"over": False, "error": None}

        def pump() -> None:
            try:
                for o, e, _ in handle:
                    if o is not None and out.feed(o.encode()):
                        state["over"] = True
                        break
                    if e is not None and err.feed(e.encode()):
                        state["over"] = True
                        break
            except Exception as ex:  # noqa: BLE001 - reported below
                state["error"] = ex
            finally:
                done.set()

        t = threading.Thread(target=pump, daemon=True, name="sandbox-e2b-exec")
        t.start()
        if stdin is not None:
            try:
                handle.send_stdin(stdin)
                handle.close_stdin()
            except Exception:  # noqa: BLE001 - the process may already be gone
                pass
        finished = done.wait(timeout)
        killed: str | None = None
        if not finished:
            killed = "timeout"
        elif state["over"]:
            killed = "output_cap"
        if killed:
            try:
                handle.kill()
            except Exception:  # noqa: BLE001
                pass
            done.wait(5)
            try:
                handle.disconnect()
            except Exception:  # noqa: BLE001
                pass
        code: int | None = None
        if not killed:
            code = _exit_code(handle)
        return ExecResult(
            exit_code=code,
            stdout=out.text(),
            stderr=err.text(),
            timed_out=killed == "timeout",
            truncated=out.truncated or err.truncated,
            duration_s=round(time.monotonic() - started, 6),
            killed_reason=killed,
        )

    def _spawn_worker(self, argv: list[str]) -> Channel:
        self._check_open()
        handle = self.sbx.commands.run(
            self._shell(argv, None), background=True, stdin=True, timeout=0,
            retain_output=False,
        )
        return _E2BChannel(handle)


def _exit_code(handle: Any) -> int | None:
    e2b = _e2b()
    try:
        return int(handle.wait().exit_code)
    except e2b.CommandExitException as ex:
        return int(ex.exit_code)
    except Exception:  # noqa: BLE001
        return None


class _E2BChannel(Channel):
    def __init__(self, handle: Any):
        super().__init__()
        self.handle = handle
        self._dead = False

    def start(self) -> None:
        threading.Thread(target=self._pump, daemon=True, name="sandbox-e2b-worker").start()

    def _pump(self) -> None:
        try:
            for o, e, _ in self.handle:
                if o is not None:
                    self.on_stdout(o.encode())
                elif e is not None:
                    self.on_stderr(e.encode())
        except Exception:  # noqa: BLE001
            pass
        finally:
            self.on_eof()

    def write(self, data: bytes) -> None:
        try:
            self.handle.send_stdin(data)
        except Exception as e:  # noqa: BLE001
            raise OSError(str(e)) from e

    def kill(self) -> None:
        if self._dead:
            return
        self._dead = True
        try:
            self.handle.kill()
        except Exception:  # noqa: BLE001
            pass
        try:
            self.handle.disconnect()
        except Exception:  # noqa: BLE001
            pass

    def exit_code(self, wait_s: float = 0.0) -> int | None:
        return _exit_code(self.handle) if not self._dead else None


def probe(refresh: bool = False) -> str | None:
    """None if an E2B sandbox can be created (API key or debug envd configured), else why not.

    Nothing is cached, so ``refresh`` (part of every backend's probe signature) changes nothing here."""
    try:
        _e2b()
    except SandboxUnavailable as e:
        return str(e)
    if os.environ.get("E2B_DEBUG", "false").lower() == "true":
        return None
    if not os.environ.get("E2B_API_KEY"):
        return "E2B_API_KEY is not set (or E2B_DEBUG=true with a local envd)"
    return None
