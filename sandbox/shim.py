"""The trusted shim: ``python -m sandbox.shim HANDLER [--unchecked] [--hash-seed N]``. Runs INSIDE the sandbox.

Env code must not be able to answer the host's calls itself, so it never shares a process with the code that
speaks to the host. The shim alone holds the host channel (its stdin and stdout) and runs no env code: it
forks the env process (which runs :func:`sandbox.worker.main` with ``--shimmed PID``) on two private pipes and
relays, for each host request:

- the request, under a fresh random id (the env process never sees the host's ids), one at a time;
- exactly one reply: a line that begins ``{"id":<that id>,``. Then the shim sends ``{"sync":S}`` (S random)
  and the next line must echo it, so a reply env code wrote on the pipe itself shows up as a second line. A
  line for another id, a second line, or the env process dying before the echo ends the worker with a fatal
  ``ProtocolViolation`` (the host reports a crash with that message): a clear failure, never a verdict;
- that reply, under the host's id. What it holds is the env process's answer, which the host validates by
  shape (:mod:`sandbox.replies`, :mod:`schemas.wire`) as it always did.

The env process inherits none of the shim's channel fds: only the two pipes, as its stdin and stdout, and
stderr (which the host reads as budgeted noise, never as protocol). The shim makes itself non-dumpable, so a
process of the same uid cannot open ``/proc/<shim>/fd/*``, read its memory or trace it; under bwrap it is
the sandbox's pid 1 (no other process inside holds the channel, and init ignores kill from inside).

On Docker (as root, local daemon) ``--fifo-dir DIR`` moves the host channel off the attach stream, whose every
byte dockerd and containerd-shim relay: the shim reads a FIFO name on stdin (the attach stream, which only it
reads) and speaks the protocol over ``DIR/<name>.in`` and ``.out`` (:mod:`sandbox.docker_fifo`).

If the env process dies during a call, the shim exits with its status, so the host sees what it saw before
the split: a worker that died during the call, with its exit code and stderr.

By default there is not one env process but one per episode (:mod:`sandbox.template`): the shim forks a clean
template process at start, and a new env process from it for every ``reset`` (serving that episode's ``step``
and ``truncate``) and for every other call (ended after its reply). A one-call process may ask for episodes of
its own (``{"sub": ...}`` lines, answered on its stdin): each ``reset`` there is a fresh process too, so the
gate's probes play episodes exactly as training does; and one-shot calls (``generate``, a solution,
``derive_truth``, ...: ``relay.ONE_SHOT_CALLS``), each in a fresh process ended after its reply, so the process
that computes the gate's figures runs no env code (``trace_env.gate_remote``). A fatal error in a sub-call's
answer (the integrity check's) is the answer to the host's call, as if that process had met it itself. ``usage`` is answered here (the CPU of every process).
``--one-process`` keeps the single env process (the layout before; the benchmark and the control tests).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from sandbox.relay import (EPISODE_CALLS, ONE_SHOT_CALLS, SUB_CALLS, EnvProcess, Lines, ProtocolViolation, _encode, _rest_error,
                           _scan, _send)

#: How long a process that closed its end of the pipe gets to exit before it is killed.
_EXIT_GRACE_S = 2.0
USAGE = "usage: python -m sandbox.shim HANDLER_MODULE [--unchecked] [--one-process] [--scratch] [--fifo-dir DIR] [--hash-seed N]"
#: The work dir inside every sandbox (sandbox.runtime.INSIDE_WORK; the shim imports nothing host-side).
INSIDE_WORK = "/sandbox/work"

def _error(req_id: Any, kind: str, message: str, fatal: bool = False) -> bytes:
    err: dict[str, Any] = {"type": kind, "message": message, "traceback": ""}
    if fatal:
        err["fatal"] = True
    return _encode({"id": req_id, "error": err}) + b"\n"


def _prctl(option: int, value: int) -> bool:
    try:
        import ctypes

        return ctypes.CDLL(None).prctl(option, value, 0, 0, 0) == 0
    except Exception:  # noqa: BLE001 - not Linux, or no libc: the sandbox still holds, the shim is weaker
        return False


class Shim:
    """The relay between the host channel (``host_in``, ``host_out``) and the env processes.

    ``fresh`` (the default): a template process (:mod:`sandbox.template`) that runs no env code, and a new
    process forked from it for every episode (each ``reset``) and every other call; ``fresh=False``: one env
    process for the worker's life (the layout before, kept for the benchmark and to show what the fresh
    processes stop). ``scratch``: the writable folders emptied before each new process (inside a sandbox only).
    """

    current: EnvProcess | None = None  # the one-call process at work (fresh mode)

    def __init__(self, handler: str, checked: bool, host_in: int, host_out: int, fresh: bool = True,
                 scratch: tuple[str, ...] = ()) -> None:
        self.host, self.host_out = Lines(host_in, max_line=1 << 30), host_out
        self.handler, self.checked, self.fresh = handler, checked, fresh
        self.procs: dict[int, EnvProcess] = {}  # live env processes by pid
        self.dead: EnvProcess | None = None  # the process whose death ended a call
        self.fatal: bytes | None = None  # a sub-call's fatal error (integrity): the answer to the call that made it
        self.episode: EnvProcess | None = None  # the host's running episode (fresh mode)
        self.sub: EnvProcess | None = None  # the episode a one-call process is playing through sub-calls
        self.scratch = [(d, frozenset(os.listdir(d)) if d == os.getcwd() else frozenset()) for d in scratch
                        if os.path.isdir(d)]
        self.template: Any = None
        self.first: EnvProcess | None = None
        if fresh:
            from sandbox import template

            self.template = template.Template(handler, checked, _max_fd())
            return
        req_r, to_env = os.pipe()
        from_env, rep_w = os.pipe()
        shim = os.getpid()
        # A fork, not a new interpreter: this process imported nothing of env code, holds no secret, and its
        # string hashing is already the one asked for. The child keeps only the two pipes (as 0 and 1) and stderr.
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.dup2(req_r, 0)
                os.dup2(rep_w, 1)
                os.closerange(3, _max_fd())
                from sandbox import worker

                code = worker.main([handler, *([] if checked else ["--unchecked"]), "--shimmed", str(shim)])
            finally:
                os._exit(code)
        os.close(req_r)
        os.close(rep_w)
        self.first = self.procs[pid] = EnvProcess(pid, to_env, from_env)

    # -- the env processes -----------------------------------------------------------------------------
    def reap(self) -> None:
        """Collect exited children (orphans of env code re-parent here), noting env processes' status."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            proc = self.procs.get(pid)
            if proc is not None:
                proc.status = status

    def exit_code(self, proc: EnvProcess | None) -> int:
        """An env process's exit code (128+N for signal N), waiting a moment for it to finish exiting."""
        if proc is None or proc.pid is None:
            return 1
        if self.template is not None and proc.status is None:  # the template's child: it knows the status
            from sandbox import template

            try:
                deadline = _monotonic() + _EXIT_GRACE_S
                while proc.status is None and _monotonic() < deadline:
                    proc.status = self.template.status(proc.pid, wait=False)
                    if proc.status is None:
                        _sleep(0.005)
                if proc.status is None:  # it closed the pipe but lives on: it is ended here
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.status = self.template.status(proc.pid, wait=True)
            except (template.TemplateDied, ProcessLookupError):
                return 128 + signal.SIGKILL
            if proc.status is None:
                return 128 + signal.SIGKILL
        deadline = _monotonic() + _EXIT_GRACE_S
        while proc.status is None and _monotonic() < deadline:
            self.reap()
            if proc.status is None:
                _sleep(0.005)
        if proc.status is None:  # it closed the pipe but lives on: it is ended here
            self.end(proc, wait=True)
            return 128 + signal.SIGKILL
        if os.WIFSIGNALED(proc.status):
            return 128 + os.WTERMSIG(proc.status)
        return os.waitstatus_to_exitcode(proc.status)

    def end(self, proc: EnvProcess | None, wait: bool = False) -> None:
        """Kill an env process (collected by :meth:`reap`, or here with ``wait``)."""
        if proc is None:
            return
        if proc.pid is not None and proc.status is None:
            try:
                os.kill(proc.pid, signal.SIGKILL)
                if wait and self.template is None:
                    _, proc.status = os.waitpid(proc.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        proc.close()
        self.procs.pop(proc.pid or -1, None)

    def kill(self) -> None:
        for proc in list(self.procs.values()):
            self.end(proc, wait=True)
        if self.template is not None:
            try:
                os.kill(self.template.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def spawn(self) -> EnvProcess:
        """A new env process forked from the template, after what earlier ones left running is ended and the
        writable folders are emptied (unless the host's episode is running: its files are its own)."""
        from sandbox import template

        keep = {p.pid for p in (self.episode, self.current, self.sub) if p is not None}
        keep.add(self.template.pid)
        for _ in range(3):
            strays = [pid for pid in template.children() if pid not in keep]
            if not strays:
                break
            for pid in strays:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            _sleep(0.001)
            self.reap()
        if self.episode is None:
            for directory, names in self.scratch:
                template.wipe(directory, names)
        req_r, to_env = os.pipe()
        from_env, rep_w = os.pipe()
        try:
            self.template.fork(req_r, rep_w)
        except template.TemplateDied as exc:
            raise ProtocolViolation(str(exc)) from None
        finally:
            os.close(req_r)
            os.close(rep_w)
        # its ready line is read with its first reply (EnvProcess.call): one round trip less per process
        return EnvProcess(None, to_env, from_env)

    # -- start and relay -------------------------------------------------------------------------------
    def start(self) -> int | None:
        """Relay the ready line (with the shim's facts added); an exit code if the start failed."""
        if self.template is not None:
            ready = self.template.ready
            if ready.get("event") != "ready":
                _send(self.host_out, _encode({"id": None, "error": ready.get("error") or {
                    "type": "EnvProcessFailed", "message": "the template process did not start", "traceback": ""}}) + b"\n")
                return 1
            ready = {"id": None, **ready, "pid": os.getpid(), "env_pid": self.template.pid, "shim": True}
            _send(self.host_out, _encode(ready) + b"\n")
            return None
        assert self.first is not None
        line = self.first.line()
        if line is None:
            code = self.exit_code(self.first)
            _send(self.host_out, _error(None, "EnvProcessDied", f"the env process exited (code {code}) before it was ready"))
            return 1
        try:
            ready, _ = _scan(line.decode("utf-8", "replace"), 0)
        except (ValueError, StopIteration):
            ready = None
        if not isinstance(ready, dict) or ready.get("event") != "ready":
            err = ready.get("error") if isinstance(ready, dict) else None
            _send(self.host_out, _encode({"id": None, "error": err if isinstance(err, dict) else {
                "type": "EnvProcessFailed", "message": "the env process did not start", "traceback": ""}}) + b"\n")
            return 1
        ready.update(pid=os.getpid(), env_pid=self.first.pid, shim=True)
        _send(self.host_out, _encode(ready) + b"\n")
        return None

    def serve(self) -> int:
        """Relay host requests until the host closes the channel; the exit code of the shim."""
        while True:
            raw = self.host.next()
            if raw is None:
                return 0
            if not raw.strip():
                continue
            try:
                host_id, request = self._request(raw)
            except ValueError as exc:
                _send(self.host_out, _error(None, "BadRequest", str(exc)))
                continue
            try:
                reply = self.route(request)
            except ProtocolViolation as exc:
                _send(self.host_out, _error(host_id, "ProtocolViolation", str(exc), fatal=True))
                return 3
            if reply is None:  # an env process died during the call: exit as it did
                return self.exit_code(self.dead)
            _send(self.host_out, b'{"id":' + _encode(host_id) + b"," + reply + b"\n")
            self.reap()

    def route(self, request: dict[str, Any]) -> bytes | None:
        """Where a host request runs: the one env process; or (fresh) the running episode's process for its
        steps, a new process for each ``reset`` (the episode's), and a new one for any other call, ended after it."""
        method, params = request.get("method"), request.get("params", {})
        if not self.fresh:
            return self._on(self.first, method, params)
        if method == "usage":
            from sandbox import template

            try:  # the env processes are the template's children: its figure holds theirs
                spent = _cpu_s() + self.template.cpu_s()
            except template.TemplateDied as exc:
                raise ProtocolViolation(str(exc)) from None
            return b'"result":' + _encode({"cpu_s": round(spent, 3)}) + b"}"
        if method in EPISODE_CALLS and self.episode is not None:
            return self._on(self.episode, method, params)
        if method in ("reset", "load"):
            self.end(self.episode)
            self.episode = None
        if method == "load" and isinstance(params, dict) and isinstance(params.get("source"), str):
            from sandbox import template

            try:
                prepared = self.template.prepare(params)
            except template.TemplateDied as exc:
                raise ProtocolViolation(str(exc)) from None
            if "error" in prepared:
                return b'"error":' + _encode(prepared["error"]) + b"}"
        proc = self.spawn()
        if method == "reset":
            self.episode = proc
            return self._on(proc, method, params)
        self.current = proc
        try:
            reply = self._on(proc, method, params, sub=self._sub_call)
            return reply if reply is None or self.fatal is None else self.fatal
        finally:
            self.fatal = None
            self.current = None
            if self.dead is not self.sub:
                self.end(self.sub)
            self.sub = None
            if self.dead is not proc:
                self.end(proc)

    def _on(self, proc: EnvProcess | None, method: Any, params: Any, sub: Any = None) -> bytes | None:
        assert proc is not None
        reply = proc.call(method, params, sub)
        if proc.pid is not None:
            self.procs[proc.pid] = proc
        if reply is None and self.dead is None:
            self.dead = proc
        return reply

    def _sub_call(self, line: bytes) -> bytes | None:
        """A sub-call of the one-call process: ``reset`` starts a fresh episode process for it (ending the
        last), the rest go to that process. The answer's rest (after the opening brace), or None if it died."""
        try:
            asked, _ = _scan(line.decode("utf-8", "replace"), 0)
        except (ValueError, StopIteration):
            asked = None
        if not isinstance(asked, dict) or asked.get("sub") not in SUB_CALLS | ONE_SHOT_CALLS:
            return _rest_error("BadRequest", "a sub-call must name reset, step, truncate, record or a one-shot call")
        method, params = asked["sub"], asked.get("params", {})
        if self.fatal is not None:  # the call ends with that error: nothing more is started for it
            return self.fatal
        if method in ONE_SHOT_CALLS:  # a fresh process of its own, ended after its reply; the episode's lives on
            proc = self.spawn()
            try:
                return self._fatal(self._on(proc, method, params))
            finally:
                if self.dead is not proc:
                    self.end(proc)
        if method == "reset":
            self.end(self.sub)
            self.sub = None
            self.sub = self.spawn()
        elif self.sub is None:
            return _rest_error("RuntimeError", f"call 'reset' before '{method}'")
        return self._fatal(self._on(self.sub, method, params))

    def _fatal(self, answer: bytes | None) -> bytes | None:
        """A sub-call's answer, noting a fatal error (the integrity check's): it becomes the reply to the host's
        call, as if the process that made the sub-call had met it itself."""
        if answer is not None and answer.startswith(b'"error":') and b'"fatal"' in answer:
            try:
                error = _scan("{" + answer.decode("utf-8", "replace"), 0)[0].get("error")
            except (ValueError, StopIteration, AttributeError):
                error = None
            if isinstance(error, dict) and error.get("fatal") is True:
                self.fatal = answer
        return answer

    @staticmethod
    def _request(raw: bytes) -> tuple[Any, dict[str, Any]]:
        try:
            req, end = _scan(raw.decode("utf-8"), 0)
        except (ValueError, StopIteration, UnicodeDecodeError):
            raise ValueError("a request line that is not JSON") from None
        if type(req) is not dict or type(req.get("id")) not in (int, str):
            raise ValueError("a request must be a JSON object with an integer or string id")
        return req["id"], req


def _cpu_s() -> float:
    """CPU seconds of this worker: the shim and every env process it collected."""
    import resource

    own, done = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + done.ru_utime + done.ru_stime


def _max_fd() -> int:
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft if 0 < soft < 1 << 20 else 1 << 16


def _monotonic() -> float:
    import time

    return time.monotonic()


def _sleep(seconds: float) -> None:
    import time

    time.sleep(seconds)


def _open_fifos(directory: str, attach_out: int) -> tuple[int, int]:
    """The request and reply FIFOs whose name the host sent as the first line on stdin (the attach stream,
    which only this process reads); (request fd, reply fd). The attach stdout is let go: stderr stays there."""
    line = Lines(0, max_line=64).next() or b""
    name = line.decode("ascii", "replace").strip()
    if len(name) != 32 or any(c not in "0123456789abcdef" for c in name):
        raise ValueError("the host sent no channel name")
    reply = os.open(f"{directory}/{name}.out", os.O_WRONLY | os.O_CLOEXEC)  # the host holds it open: no wait
    request = os.open(f"{directory}/{name}.in", os.O_RDONLY | os.O_CLOEXEC)
    os.close(attach_out)
    return request, reply


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) >= 2 and args[-2] == "--hash-seed" and args[-1].isdigit():
        # string hashing is fixed when the interpreter starts, and the env process is a fork of this one
        if os.environ.get("PYTHONHASHSEED") != args[-1]:
            os.execve(sys.executable, [sys.executable, "-m", "sandbox.shim", *args],
                      dict(os.environ, PYTHONHASHSEED=args[-1]))
        args = args[:-2]
    checked = "--unchecked" not in args
    fresh = "--one-process" not in args
    scratch = "--scratch" in args and os.getcwd() == INSIDE_WORK  # never on a host's own /tmp
    args = [a for a in args if a not in ("--unchecked", "--one-process", "--scratch")]
    fifo_dir = None
    if "--fifo-dir" in args[:-1]:
        at = args.index("--fifo-dir")
        fifo_dir = args[at + 1]
        del args[at:at + 2]
    host_in, host_out = 0, os.dup(1)  # the channel to the host: nothing else in this process may write there
    os.dup2(2, 1)
    if len(args) != 1:
        _send(host_out, _error(None, "UsageError", USAGE))
        return 2
    if fifo_dir is not None:  # Docker: the protocol runs over two FIFOs, past the daemon's relay
        try:
            host_in, host_out = _open_fifos(fifo_dir, host_out)
        except (OSError, ValueError) as exc:
            _send(host_out, _error(None, "ChannelError", f"cannot open the worker's FIFOs: {exc}"))
            return 2
    _prctl(4, 0)  # PR_SET_DUMPABLE 0: no /proc/<shim>/fd, mem or ptrace for the env process (same uid)
    _prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: orphans of env code re-parent here, inside the worker's tree
    try:
        shim = Shim(args[0], checked, host_in=host_in, host_out=host_out, fresh=fresh,
                    scratch=("/tmp", "/dev/shm", INSIDE_WORK) if scratch else ())
    except Exception as exc:  # noqa: BLE001 - the template process did not start
        _send(host_out, _error(None, "EnvProcessFailed", f"the template process did not start: {exc}"))
        return 1
    try:
        failed = shim.start()
        return failed if failed is not None else shim.serve()
    finally:
        shim.kill()


if __name__ == "__main__":
    os._exit(main())
