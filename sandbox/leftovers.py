"""Nothing a sandbox creates outlives its owner, even after ``kill -9``. Host side.

Every sandbox, as it opens, writes a *lease*: a small JSON file naming its owner (host, pid and the pid's
start time, so a recycled pid is not mistaken for the owner) and everything it is about to create: the
bwrap root dir and its tmpfs work dir mount, its cgroup dirs, the Docker container and volume. ``close()``
removes the resources, then the lease. :func:`reap` sweeps the leases of owners that are gone and removes
what they name; it costs one ``listdir`` when there is nothing to do, and imports the Docker SDK only when
a dead lease names a container. It runs once per process: at the start of every ``factory`` command and
before a process opens its first sandboxed env.

Leases live in ``<runtime root>/leases`` (``$TRACE_SANDBOX_RUNTIME_DIR``, default
``/tmp/trace-factory-runtime``): processes that share that directory reap each other's leftovers.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from sandbox.owners import owner_alive, owner_id

_MNT_DETACH = 2
_lock = threading.Lock()
_reaped = False
_reaped_at_start: list[str] = []
#: Temporary runtime copies (``.<digest>-*``) older than this are debris of a killed copy.
RUNTIME_DEBRIS_AGE_S = 600


def lease_dir() -> Path:
    base = os.environ.get("TRACE_SANDBOX_RUNTIME_DIR") or os.path.join(tempfile.gettempdir(), "trace-factory-runtime")
    return Path(base) / "leases"


class Lease:
    """The record of one open sandbox. ``update`` adds resources as they are created."""

    def __init__(self, name: str, backend: str, **resources: Any) -> None:
        self.path = lease_dir() / f"{name}.json"
        self.data: dict[str, Any] = {"owner": owner_id(), "backend": backend, "name": name, **resources}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.chmod(self.path.parent, 0o755)
        except OSError:
            pass
        self._write()

    def update(self, **resources: Any) -> None:
        self.data.update(resources)
        self._write()

    def _write(self) -> None:
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.data))
        os.replace(tmp, self.path)

    def release(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass


def reap_once() -> list[str]:
    """:func:`reap`, the first time this is called in a process (later calls cost nothing)."""
    global _reaped
    with _lock:
        if _reaped:
            return []
        _reaped = True
    try:
        removed = reap()
    except Exception:  # noqa: BLE001 - cleanup of others' debris must never break this process's work
        return []
    _reaped_at_start.extend(removed)
    return removed


def reaped_at_start() -> list[str]:
    """What :func:`reap_once` removed in this process (every ``factory`` command reaps as it starts, so
    ``factory sandbox reap`` reports this too)."""
    return list(_reaped_at_start)


def reap_all() -> tuple[list[str], list[str], str | None]:
    """:func:`reap`, then Docker sandboxes of dead owners whose lease is gone (found by label, where a daemon
    answers). Returns (a line per thing removed, a line per thing found and not removed, with why; why Docker
    was not swept or None)."""
    left: list[str] = []
    removed = reap(left)
    try:
        from sandbox.docker_container import prune

        removed += prune(left)
    except Exception as exc:  # noqa: BLE001 - no SDK or no daemon: nothing of ours can be running there
        from schemas.errors import one_line

        return removed, left, f"docker not swept: {type(exc).__name__}: {one_line(exc)[:300]}"
    return removed, left, None


def reap(left: list[str] | None = None) -> list[str]:
    """Remove what sandboxes of dead owners left behind; returns a line per thing removed. What was found and
    could not be removed goes to ``left`` (a line each, with why), and its lease is kept: the next reap tries
    again, and ``factory sandbox reap`` can say so (exit 1) instead of reporting a clean sweep."""
    removed: list[str] = []
    directory = lease_dir()
    try:
        names = [n for n in os.listdir(directory) if n.endswith(".json")]
    except OSError:
        names = []
    for name in names:
        path = directory / name
        try:
            if path.stat().st_uid != os.geteuid():
                continue  # another user's lease is not ours to act on
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or owner_alive(str(data.get("owner", ""))):
            continue
        missed: list[str] = []
        removed += release_resources(data, missed)
        if missed:
            (left if left is not None else []).extend(missed)
            continue  # the lease stays, naming what is still there
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            (left if left is not None else []).append(f"lease {path} ({_why(exc)})")
    removed += _runtime_debris(directory.parent, left)
    return removed


def release_resources(data: dict[str, Any], left: list[str] | None = None) -> list[str]:
    """Kill and remove everything a lease names (also what ``close()`` does, in the same order); returns a line
    per thing removed, and puts a line per thing still there afterwards (with why) into ``left``.

    Only what a sandbox can have created is touched, whatever the lease says: cgroups named
    ``trace-factory/trace-sbx-*``, a ``trace-sbx-*/work`` mount, a ``trace-sbx-*``/``trace-unsafe-*``
    dir, a ``trace-sbx-*`` container and volume.
    """
    removed: list[str] = []
    missed = left if left is not None else []
    cgroup_dirs = [d for d in data.get("cgroups") or [] if isinstance(d, str) and _is_sandbox_cgroup(d)]
    if cgroup_dirs:
        from sandbox.cgroups import Cgroup

        Cgroup(int(data.get("cgroup_version") or 1), cgroup_dirs).remove()
        still = [d for d in cgroup_dirs if os.path.isdir(d)]
        if still:
            missed.append(f"cgroup {still[0]} (processes in it did not exit)")
        else:
            removed.append(f"cgroup {os.path.basename(cgroup_dirs[0])}")
    mount = data.get("mount")
    if isinstance(mount, str) and os.path.basename(mount) == "work" and _is_sandbox_name(os.path.dirname(mount)):
        unmount(mount)
        if os.path.ismount(mount):
            missed.append(f"mount {mount} (still mounted: unmount it as root)")
    root = data.get("root")
    if isinstance(root, str) and _is_sandbox_name(root, "trace-sbx-", "trace-unsafe-") and os.path.isdir(root):
        unmount(os.path.join(root, "work"))  # mounted even if the lease never said so: rmtree cannot cross it
        why = _remove_tree(root)
        if why is None:
            removed.append(f"work dir {root}")
        else:
            missed.append(f"work dir {root} ({why})")
    container, volume = data.get("container"), data.get("volume")
    container = container if isinstance(container, str) and _is_sandbox_name(container) else None
    volume = volume if isinstance(volume, str) and _is_sandbox_name(volume) else None
    if container or volume:
        from sandbox.docker_container import remove_container_and_volume

        removed += remove_container_and_volume(container, volume, missed)
    return removed


def _why(exc: OSError) -> str:
    return (exc.strerror or type(exc).__name__).lower()


def _remove_tree(path: str) -> str | None:
    """Remove a folder; None when it is gone, else why it is (partly) still there."""
    failed: list[tuple[str, BaseException]] = []
    shutil.rmtree(path, onerror=lambda function, name, info: failed.append((name, info[1])))
    if not os.path.lexists(path):
        return None
    name, first = next(((n, e) for n, e in failed if isinstance(e, OSError)), ("", None))
    return f"{_why(first)}: {name}" if isinstance(first, OSError) else "could not be removed"


def _is_sandbox_name(path: str, *prefixes: str) -> bool:
    return os.path.basename(path.rstrip("/")).startswith(prefixes or ("trace-sbx-",))


def _is_sandbox_cgroup(path: str) -> bool:
    real = os.path.realpath(path)
    return (real.startswith("/sys/fs/cgroup/") and _is_sandbox_name(real)
            and os.path.basename(os.path.dirname(real)).startswith("trace-factory"))


def unmount(path: str) -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    for _ in range(3):
        if not os.path.ismount(path):
            return
        libc.umount2(path.encode(), _MNT_DETACH)


def _runtime_debris(runtime: Path, left: list[str] | None = None) -> list[str]:
    """Half-written runtime copies (``.<digest>-*``, renamed into place when complete) of killed processes."""
    removed = []
    try:
        entries = list(os.scandir(runtime))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        if entry.name.startswith(".") and entry.is_dir(follow_symlinks=False):
            try:
                if now - entry.stat(follow_symlinks=False).st_mtime <= RUNTIME_DEBRIS_AGE_S:
                    continue
            except OSError:
                continue
            why = _remove_tree(entry.path)
            if why is None:
                removed.append(f"runtime debris {entry.path}")
            elif left is not None:
                left.append(f"runtime debris {entry.path} ({why})")
    return removed

