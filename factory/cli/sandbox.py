"""``factory sandbox``: what the sandbox can do on this host, its Docker image, its leftovers, a command inside it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Callable, Optional

import typer
from rich.table import Table

from factory.cli.common import JsonOption, SandboxOption, check_backend, console, emit_json, errors, fail, print_sandbox, safe
from sandbox import SandboxError, open_sandbox
from sandbox import image as sandbox_image
from sandbox import leftovers
from sandbox.status import SandboxStatus, sandbox_status
from schemas.errors import one_line
from schemas.files import reason

app = typer.Typer(help="Inspect and prepare the sandbox that runs env code.", no_args_is_help=True)


@app.command("status")
def status(as_json: JsonOption = False) -> None:
    """Say which sandbox backends work here (or why not) and which aggregate limits this host holds.

    Exits 1 when no isolating backend is usable (`--sandbox auto` would refuse to run env code).

    Examples:
      factory sandbox status
      factory sandbox status --json
    """
    report = sandbox_status()
    if as_json:
        emit_json(report)
    else:
        _print_status(report)
    if report.auto is None:
        raise typer.Exit(1)


def _print_status(report: SandboxStatus) -> None:
    table = Table(title="sandbox backends")
    table.add_column("backend", no_wrap=True)
    table.add_column("usable", no_wrap=True)
    table.add_column("detail")
    for b in report.backends:
        if not b.usable:
            detail = safe(b.reason)
        elif not b.isolated:
            detail = "[bold red]NO isolation[/]: explicit opt-in only, never picked by auto"
        elif b.name == report.auto:
            detail = "picked by --sandbox auto"
        else:
            detail = ""
        if b.name == "docker" and b.usable:
            detail = f"{detail}; " if detail else ""
            detail += f"image {safe(report.docker_image)}"
        table.add_row(b.name, "[green]yes[/]" if b.usable else "[red]no[/]", detail)
    console.print(table)
    lim = report.limits
    limits = Table(title="aggregate limits on this host", show_header=False)
    limits.add_column("what", no_wrap=True)
    limits.add_column("state", overflow="fold")
    limits.add_row("cgroups", f"v{lim.cgroup_version} (memory, pids, cpu)" if lim.cgroup_version else "[red]none usable[/]")
    limits.add_row("seccomp", f"filter compiled: {safe(lim.seccomp_filter)}" if lim.seccomp_filter
                   else f"[red]no filter[/]: {safe(lim.seccomp_reason)}")
    limits.add_row("running as", "root: a private uid and a size-capped work dir per sandbox" if lim.root
                   else "not root: no cgroups, no work dir size cap")
    if lim.bwrap_checked and lim.bwrap_warning is None:
        limits.add_row("bwrap sandbox", "[green]every limit holds[/]")
    elif lim.bwrap_warning is not None:
        limits.add_row("bwrap sandbox", f"[bold red]WARNING:[/] {safe(lim.bwrap_warning)}")
    console.print(limits)
    if report.auto is None:
        errors.print("[bold red]no isolating backend is usable:[/] install bubblewrap or Docker "
                     "(scripts/sandbox-services.sh does both)", highlight=False)


@app.command("build-image")
def build_image(
    tag: Annotated[str, typer.Option("--tag", help="Image tag (default: $TRACE_SANDBOX_IMAGE or the docker backend's).")]
    = sandbox_image.DEFAULT_TAG,
    source: Annotated[str, typer.Option("--source", help="host: offline, from this interpreter; registry: FROM python:3.11-slim.")]
    = "host",
    verify: Annotated[bool, typer.Option("--verify/--no-verify", help="Run the image the way the sandbox does after the build.")]
    = True,
    if_missing: Annotated[bool, typer.Option("--if-missing", help="Do nothing when the image already exists.")] = False,
    rootfs: Annotated[Optional[Path], typer.Option("--rootfs", help="Only write the root filesystem tar here (no Docker needed).")]
    = None,
    as_json: JsonOption = False,
) -> None:
    """Build the Docker image the docker backend runs, offline from this host's interpreter.

    The project's own code is not baked in (it is shipped into every sandbox), so only a new interpreter or new runtime dependencies need a rebuild.

    Examples:
      factory sandbox build-image
      factory sandbox build-image --if-missing --tag trace-factory-sandbox:py311
      factory sandbox build-image --rootfs /tmp/rootfs.tar
    """
    if source not in ("host", "registry"):
        fail(f"--source {source!r}: choose host (offline, from this interpreter) or registry (python:3.11-slim)")
    if rootfs is not None:
        from factory.cli.paths import PathProblem, preflight_file

        try:
            preflight_file(rootfs, "--rootfs", "pass --rootfs with a path in a writable folder")
        except PathProblem as exc:
            fail(str(exc))
        with _Progress(as_json) as step:
            step(f"writing the root filesystem to {rootfs}")
            try:
                stats = _write_rootfs(rootfs)
            except OSError as exc:
                fail(f"cannot write the root filesystem tar to {rootfs}: {reason(exc)}", 1)
        if as_json:
            emit_json({"rootfs": str(rootfs), **stats.model_dump()})
        else:
            console.print(f"wrote {safe(rootfs)}: {stats.size_mb} MB, {stats.files:,} files, {stats.libs} shared libs, "
                          f"{len(stats.distributions)} distributions", highlight=False, soft_wrap=True)
        return
    if if_missing and sandbox_image.image_exists(tag):
        if as_json:
            emit_json({"tag": tag, "built": False, "reason": "present"})
        else:
            console.print(f"image {safe(tag)} present; nothing to build", highlight=False)
        return
    with _Progress(as_json) as step:
        try:
            result = sandbox_image.build(tag, source, verify, progress=step)  # type: ignore[arg-type]
        except Exception as exc:  # noqa: BLE001 - docker SDK missing, daemon down, build or verify failed: one line
            fail(f"image build failed: {_one_line(exc)} (is dockerd running? scripts/sandbox-services.sh starts it)", 1)
    if as_json:
        emit_json(result)
        return
    line = f"built {safe(tag)} ({result.image_id.removeprefix('sha256:')[:12]}) from "
    line += "the host interpreter" if result.source == "host" else "python:3.11-slim"
    line += f" in {result.seconds:.1f}s"
    if result.rootfs is not None:
        r = result.rootfs
        line += f": {r.size_mb} MB, {r.files:,} files, {r.libs} shared libs, {len(r.distributions)} distributions"
    if result.verified is not None:
        line += f"; verified: {safe(result.verified)}"
    console.print(line, highlight=False, soft_wrap=True)


def _write_rootfs(path: Path) -> Any:
    """The tar through a temporary file renamed at the end: a stop or a full disk leaves no half tar behind."""
    import os
    import secrets

    # named before it is made: a stop at any moment, even while the file is being created, finds it to remove
    temporary = str(path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        stats = sandbox_image.build_rootfs_tar(Path(temporary))
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # an ordinary file, not mkstemp's 0600
        os.replace(temporary, path)
        return stats
    finally:
        if os.path.lexists(temporary):
            os.unlink(temporary)


class _Progress:
    """A spinner on a terminal, a line per step otherwise (CI logs), nothing with --json."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.status: Any = None

    def __enter__(self) -> Callable[[str], None]:
        if not self.quiet and errors.is_terminal:
            self.status = errors.status("starting")
            self.status.__enter__()
        return self.step

    def step(self, message: str) -> None:
        if self.quiet:
            return
        if self.status is not None:
            self.status.update(safe(message))
        else:
            errors.print(f"... {safe(message)}", highlight=False, soft_wrap=True)

    def __exit__(self, *exc: object) -> None:
        if self.status is not None:
            self.status.__exit__(None, None, None)


@app.command("reap")
def reap(as_json: JsonOption = False) -> None:
    """Remove now what sandboxes of dead processes left behind (containers, volumes, cgroups, work dirs).

    Sandboxes of live processes (other users' runs, a training job) are never touched. Every `factory` command already does the lease-based part as it starts; this reports that too and also sweeps Docker by label. Exits 1 when something it found could not be removed (each named, with why; its lease is kept, so the next reap tries again), 0 when everything found was removed.

    Examples:
      factory sandbox reap
      factory sandbox reap --json
    """
    removed, left, docker_note = leftovers.reap_all()
    removed = leftovers.reaped_at_start() + removed
    if as_json:
        emit_json({"count": len(removed), "removed": removed, "left": left, "docker": docker_note})
    else:
        if not removed and not left:
            console.print("nothing left behind by dead processes")
        elif removed:
            console.print(f"removed {len(removed)} leftover{'s' if len(removed) != 1 else ''} of dead processes:")
            for item in removed:
                console.print(f"  {safe(item)}", highlight=False, soft_wrap=True)
        if docker_note:
            errors.print(f"note: {safe(docker_note)}", highlight=False, soft_wrap=True)
    if left:
        things = f"{len(left)} leftover{'s' if len(left) != 1 else ''}"
        fail(f"could not remove {things} of dead processes: {'; '.join(left)}; fix that and run `factory sandbox reap` again", 1)


@app.command("exec")
def exec_command(
    command: Annotated[list[str], typer.Argument(help="The command and its arguments (after --).")],
    backend: SandboxOption = "auto",
    timeout: Annotated[float, typer.Option("--timeout", min=0.1, help="Wall-clock limit in seconds.")] = 60.0,
    as_json: JsonOption = False,
) -> None:
    """Run one command in a fresh sandbox and show what it printed: what env code sees.

    Exits with the command's exit code (1 if the sandbox killed it).

    Examples:
      factory sandbox exec -- python -c "import os; print(os.getuid(), os.listdir('/'))"
      factory sandbox exec --sandbox docker --json -- python -c "import os; print(os.environ)"
    """
    check_backend(backend)
    try:
        with open_sandbox(backend) as sb:
            if not as_json:
                print_sandbox(sb.backend, sb.warning)
            result = sb.exec(list(command), timeout_s=timeout)
    except (SandboxError, ValueError) as exc:
        fail(_one_line(exc), 1)
    if as_json:
        emit_json(result)
    else:
        console.print(safe(result.stdout), end="", highlight=False, soft_wrap=True)
        errors.print(safe(result.stderr), end="", highlight=False, soft_wrap=True)
        if result.killed_reason and result.exit_code is None:
            errors.print(f"[bold red]killed:[/] {safe(result.killed_reason)}", highlight=False)
    raise typer.Exit(result.exit_code if result.exit_code is not None else 1)


def _one_line(exc: BaseException) -> str:
    text = one_line(exc)  # the whole message on one line (schemas.errors), never just its first line
    return f"{type(exc).__name__}: {text}"[:400] if not isinstance(exc, SandboxError) else text[:400]

