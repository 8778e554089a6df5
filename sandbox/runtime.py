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
    "trace_env": None, "sandbox": ("shim.py", "relay.py", "template.py", "worker.py", "integrity.py", "handlers/")}
TRUSTED_PACKAGES: tuple[str, ...] = tuple(SHIPPED)
_SUFFIXES = (".py", ".json")
_STUB_INIT = b'"""Inside a sandbox this package holds only the worker protocol (sandbox.worker)."""\n'

SANDBOX_UID = 65534
SANDBOX_GID = 65534
#: Where a backend that controls the file system layout puts the work dir and the runtime, inside.
INSIDE_WORK = "/sandbox/work"
INSIDE_RUNTIME = "/sandbox/runtime"
#: Where bwrap (as root) shows the interpreter: its prefix, with only SITE_DISTRIBUTIONS in site-packages.
INSIDE_PYTHON = "/sandbox/python"
#: Third-party distributions the inside half imports (the handler validates tool arguments with jsonschema);
#: with their requirements, the only packages a bwrap sandbox sees. Env code itself may import none of them.
SITE_DISTRIBUTIONS = ("jsonschema",)

PASSWD = "nobody:x:65534:65534:sandbox:/sandbox/work:/usr/sbin/nologin\n"
GROUP = "nogroup:x:65534:\n"

_lock = threading.Lock()
_cache: dict[str, Path] = {}
PYC_LAYOUT = "pyc1"
"""Marks copies that ship compiled bytecode (:func:`compile_tree`); a copy made before has a name without it."""


def compile_tree(root: Path) -> None:
    """Byte-compile every module under ``root`` with this interpreter (the one a bwrap sandbox runs), before the
    copy is marked complete: the copy is read-only inside, so without these every worker start compiled the
    SDK, kits and jsonschema from source again (~0.4 s of CPU each). Only the host writes them, from the
    trusted sources beside them; a file that does not compile is left to fail inside, as before."""
    import compileall

    compileall.compile_dir(str(root), quiet=2, workers=1)


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
    """Where host-side runtime copies, the seccomp filter and the leases live (``$TRACE_SANDBOX_RUNTIME_DIR``,
    default ``<TMPDIR>/trace-factory-runtime``). The sandbox uid never needs to reach it: a bwrap launcher opens
    what the sandbox sees as root and hands it over as file descriptors."""
    base = os.environ.get("TRACE_SANDBOX_RUNTIME_DIR") or os.path.join(tempfile.gettempdir(), "trace-factory-runtime")
    p = Path(base)
    p.mkdir(parents=True, exist_ok=True)
    try:
        os.chmod(p, 0o755)
    except OSError:
        pass
    return p


def reachable_by_others(path: str | Path) -> bool:
    """Can a uid that is neither owner nor group traverse every directory down to ``path``?"""
    p = Path(path)
    for anc in [p, *p.parents]:
        try:
            if not os.stat(anc).st_mode & 0o001:
                return False
        except OSError:
            return False
    return True


class NoReachableDir(RuntimeError):
    """No directory for sandbox roots that the sandbox's own uid can traverse; the message says what to set."""


def sandbox_parent_dir(candidates: list[str] | None = None) -> Path:
    """Where a bwrap sandbox's root dir goes when each sandbox runs as its own uid: bwrap, as that uid, must
    traverse every directory down to it. ``TMPDIR`` if that uid can (``mktemp -d`` and many CI runners make it
    0700); else ``/tmp``, then ``/var/tmp``; else :class:`NoReachableDir` naming what to set."""
    tmpdir = tempfile.gettempdir()
    for candidate in candidates if candidates is not None else [tmpdir, "/tmp", "/var/tmp"]:
        if os.path.isdir(candidate) and reachable_by_others(candidate):
            return Path(candidate)
    raise NoReachableDir(f"no directory for sandboxes that the sandbox's user can traverse: TMPDIR={tmpdir} "
                         "is private and /tmp and /var/tmp are not usable; set TMPDIR to a directory every user "
                         "may traverse (mode 1777 or 0755 down from /, e.g. TMPDIR=/var/tmp)")


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
        final = root / f"{digest}-{PYC_LAYOUT}"
        if not (final / ".complete").exists():
            tmp = Path(tempfile.mkdtemp(prefix=f".{digest}-", dir=root))
            for rel, data in files.items():
                dest = tmp / "python" / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(data)
            (tmp / "python").mkdir(exist_ok=True)
            compile_tree(tmp / "python")
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


def interpreter_prefix() -> str:
    """The running interpreter's installation (a virtualenv's base), as bwrap shows it at INSIDE_PYTHON."""
    return os.path.realpath(sys.base_prefix)


def site_dirs(prefix: str) -> list[str]:
    """The interpreter's package dirs below ``prefix``, relative to it (``lib/python3.11/site-packages``...)."""
    import site
    import sysconfig

    dirs = [*site.getsitepackages(), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    dirs += [os.path.join(prefix, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}", "site-packages")]
    out: list[str] = []
    for d in dirs:
        real = os.path.realpath(d)
        if real.startswith(prefix.rstrip("/") + "/"):
            rel = os.path.relpath(real, prefix)
            if rel not in out:
                out.append(rel)
    return out


def site_layer() -> Path:
    """An overlay layer that replaces the interpreter's package dirs (opaque) with one holding only
    SITE_DISTRIBUTIONS and their requirements, copied once; content-addressed by their names and versions.

    Needs root (the ``trusted.overlay.opaque`` attribute); OSError where it cannot be made."""
    from sandbox.distributions import distribution_closure

    prefix = interpreter_prefix()
    rels = site_dirs(prefix)
    dists = sorted(distribution_closure(SITE_DISTRIBUTIONS), key=lambda d: d.metadata["Name"].lower())
    key = hashlib.sha256(repr([prefix, rels, [(d.metadata["Name"], d.version) for d in dists]]).encode()).hexdigest()[:16]
    root = runtime_root()
    final = root / f"site-{key}-{PYC_LAYOUT}"
    if (final / ".complete").exists():
        return final
    tmp = Path(tempfile.mkdtemp(prefix=f".site-{key}-", dir=root))
    try:
        for rel in rels:
            (tmp / rel).mkdir(parents=True, exist_ok=True)
            os.setxattr(tmp / rel, "trusted.overlay.opaque", b"y")
        target = tmp / rels[0]
        for dist in dists:
            for entry in dist.files or []:
                source = Path(dist.locate_file(entry))
                if source.is_file() and "__pycache__" not in entry.parts and not str(entry).startswith(".."):
                    dest = target / entry
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(source, dest)
        compile_tree(target)
        for dirpath, _, filenames in os.walk(tmp):
            os.chmod(dirpath, 0o755)
            for fn in filenames:
                os.chmod(os.path.join(dirpath, fn), 0o644)
        (tmp / ".complete").write_text(key)
        try:
            os.rename(tmp, final)
        except OSError:  # another process won the race; theirs is identical
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def empty_dir() -> Path:
    """An empty directory: the second layer of an overlay that has only one (overlayfs needs two)."""
    path = runtime_root() / "empty"
    path.mkdir(mode=0o755, exist_ok=True)
    return path
