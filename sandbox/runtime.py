"""The trusted runtime shipped into every sandbox: the inside half of the project, nothing else.

Workers inside a sandbox import ``trace_env`` (the SDK, kits and episode engine) and the worker protocol
``sandbox.worker``; they must not see the repository (``.git``, tests, docs), the host-side packages or
anything else of the host. So instead of binding the source tree we copy just those files into a
content-addressed, read-only directory (host side) or tar (Docker, E2B). Code changes need no image rebuild.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import os
import shutil
import sys
import tarfile
import tempfile
import threading
from pathlib import Path

#: What of this project runs inside the sandbox: package -> the files shipped (None: all of it).
#: Of ``sandbox`` only the shim, the worker protocol and test handlers go in, under a stub ``__init__`` so the
#: host-side backends (and pydantic, which they import) stay out of the worker.
SHIPPED: dict[str, tuple[str, ...] | None] = {
    "trace_env": None, "sandbox": ("shim.py", "worker.py", "integrity.py", "handlers/")}
TRUSTED_PACKAGES: tuple[str, ...] = tuple(SHIPPED)
_SUFFIXES = (".py", ".json")
_STUB_INIT = b'"""Inside a sandbox this package holds only the worker protocol (sandbox.worker)."""\n'

SANDBOX_UID = 65534
SANDBOX_GID = 65534
#: Where a backend that controls the file system layout puts the work dir and the runtime, inside.
INSIDE_WORK = "/sandbox/work"
INSIDE_RUNTIME = "/sandbox/runtime"

PASSWD = "nobody:x:65534:65534:sandbox:/sandbox/work:/usr/sbin/nologin\n"
GROUP = "nogroup:x:65534:\n"

_lock = threading.Lock()
_cache: dict[str, Path] = {}


def package_dirs(packages: tuple[str, ...] = TRUSTED_PACKAGES) -> dict[str, Path]:
    """name -> directory of each trusted package that exists (skipping ones not written yet)."""
    found: dict[str, Path] = {}
    for name in packages:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            continue
        for loc in spec.submodule_search_locations:
            if os.path.isdir(loc):
                found[name] = Path(loc)
                break
    return found


def runtime_files(packages: tuple[str, ...] = TRUSTED_PACKAGES) -> dict[str, bytes]:
    """Relative path (e.g. ``trace_env/sdk.py``) -> content, for every shipped file."""
    files: dict[str, bytes] = {}
    for name, root in package_dirs(packages).items():
        only = SHIPPED.get(name)
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
            for fn in sorted(filenames):
                if not fn.endswith(_SUFFIXES):
                    continue
                full = Path(dirpath) / fn
                inner = full.relative_to(root).as_posix()
                if only is not None and not any(inner == o or (o.endswith("/") and inner.startswith(o)) for o in only):
                    continue
                try:
                    files[f"{name}/{inner}"] = full.read_bytes()
                except OSError:
                    continue
        if only is not None:
            files[f"{name}/__init__.py"] = _STUB_INIT
    return files


def content_hash(files: dict[str, bytes]) -> str:
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(rel.encode() + b"\0" + hashlib.sha256(files[rel]).digest())
    return h.hexdigest()[:16]


def runtime_tar(files: dict[str, bytes], uid: int = 0, gid: int = 0) -> bytes:
    """A tar of the runtime files (root-owned, world-readable: the sandbox user cannot change them)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        dirs: set[str] = set()
        for rel in sorted(files):
            parts = rel.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    ti = tarfile.TarInfo(d)
                    ti.type, ti.mode, ti.uid, ti.gid = tarfile.DIRTYPE, 0o755, uid, gid
                    tar.addfile(ti)
            data = files[rel]
            ti = tarfile.TarInfo(rel)
            ti.size, ti.mode, ti.uid, ti.gid = len(data), 0o644, uid, gid
            tar.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def runtime_root() -> Path:
    """Where host-side runtime copies live: a world-traversable place (the sandbox uid reads it)."""
    base = os.environ.get("TRACE_SANDBOX_RUNTIME_DIR") or os.path.join(tempfile.gettempdir(), "trace-factory-runtime")
    p = Path(base)
    p.mkdir(parents=True, exist_ok=True)
    try:
        os.chmod(p, 0o755)
    except OSError:
        pass
    return p


def host_runtime() -> Path:
    """A read-only-by-convention directory with ``python/`` (PYTHONPATH) and ``etc/`` (passwd, group).

    Content-addressed: a code change produces a new directory, so a running sandbox never sees
    files change under it, and concurrent processes agree on the result (atomic rename).
    """
    files = runtime_files()
    digest = content_hash(files)
    with _lock:
        cached = _cache.get(digest)
        if cached is not None and cached.is_dir():
            return cached
        root = runtime_root()
        final = root / digest
        if not (final / ".complete").exists():
            tmp = Path(tempfile.mkdtemp(prefix=f".{digest}-", dir=root))
            for rel, data in files.items():
                dest = tmp / "python" / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(data)
            (tmp / "python").mkdir(exist_ok=True)
            (tmp / "etc").mkdir()
            (tmp / "etc" / "passwd").write_text(PASSWD)
            (tmp / "etc" / "group").write_text(GROUP)
            (tmp / ".complete").write_text(digest)
            for dirpath, dirnames, filenames in os.walk(tmp):
                os.chmod(dirpath, 0o755)
                for fn in filenames:
                    os.chmod(os.path.join(dirpath, fn), 0o644)
            try:
                os.rename(tmp, final)
            except OSError:  # another process won the race; theirs is identical
                shutil.rmtree(tmp, ignore_errors=True)
        _cache[digest] = final
        return final


def interpreter_paths() -> list[str]:
    """Directories that make up the running interpreter: prefixes and site-packages.

    Bound read-only at the same paths inside the bwrap sandbox so that ``python`` resolves its
    prefix exactly as on the host (no relocation surprises, compiled extensions keep working).
    """
    import site
    import sysconfig

    cands = [sys.base_prefix, sys.prefix, sys.exec_prefix, sys.base_exec_prefix]
    try:
        cands += site.getsitepackages()
    except AttributeError:  # pragma: no cover - old virtualenv
        pass
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            cands.append(sysconfig.get_paths()[key])
        except KeyError:
            pass
    cands.append(os.path.dirname(os.path.realpath(sys.executable)))
    out: list[str] = []
    for c in cands:
        if not c:
            continue
        c = os.path.realpath(c)
        if not os.path.isdir(c) or c in ("/", "/usr"):
            continue
        out.append(c)
    # keep only outermost dirs (a prefix already covers its site-packages)
    out = sorted(set(out), key=len)
    result: list[str] = []
    for c in out:
        if not any(c == r or c.startswith(r.rstrip("/") + "/") for r in result):
            result.append(c)
    return result


def python_bin_dirs() -> list[str]:
    dirs = []
    for d in (os.path.join(sys.prefix, "bin"), os.path.join(sys.base_prefix, "bin"),
              os.path.dirname(os.path.realpath(sys.executable))):
        if os.path.isdir(d) and d not in dirs:
            dirs.append(d)
    return dirs


def search_path() -> str:
    """``PATH`` for a sandboxed process on this host's interpreter: its bin dirs, then the system's."""
    return ":".join([*python_bin_dirs(), "/usr/local/bin", "/usr/bin", "/bin"])
