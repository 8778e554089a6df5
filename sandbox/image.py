"""Build the Docker image ``trace-factory-sandbox:py311`` - offline, from the host interpreter.

CI machines cannot reach Docker Hub, so the default build assembles a root filesystem from what
is already here: the running CPython install (stdlib, without tests/tk/idle/static lib), the
site-packages of the runtime dependencies (pydantic, jsonschema, gymnasium, numpy and everything
they require), the shared libraries ``ldd`` says they need, the dynamic loader and
``/etc/ld.so.cache``. The interpreter keeps its host path (no relocation issues with RPATHs),
``/usr/local/bin/python`` points at it. The tar is ``docker import``-ed with the image config.

Where a registry is reachable, ``--source registry`` builds the same contract from
``python:3.11-slim`` with a Dockerfile instead.

The project's own packages are NOT baked in: the docker backend ships them into a read-only
volume at open, so code changes need no rebuild. Host side; the command line is
``factory sandbox build-image`` (:mod:`factory.cli.sandbox`).
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Literal

from pydantic import BaseModel

from sandbox.distributions import distribution_closure
from sandbox.docker_container import DEFAULT_IMAGE, docker_sdk

#: The tag the docker backend runs ($TRACE_SANDBOX_IMAGE, else trace-factory-sandbox:py311).
DEFAULT_TAG = DEFAULT_IMAGE
LABEL = "trace-factory.sandbox-image"

#: Distributions the sandboxed runtime imports; their requirements are added recursively.
ROOT_DISTRIBUTIONS = (
    "pydantic", "pydantic_core", "jsonschema", "referencing", "rpds-py", "attrs",
    "jsonschema-specifications", "typing_extensions", "annotated-types", "typing-inspection",
    "gymnasium", "numpy", "cloudpickle", "farama-notifications", "filelock",
)

_STDLIB_SKIP = {"site-packages", "dist-packages", "test", "tests", "idlelib", "tkinter", "turtledemo",
                "ensurepip", "lib2to3", "pydoc_data", "__phello__"}

DOCKERFILE = """\
FROM python:3.11-slim
RUN pip install --no-cache-dir "pydantic>=2.7,<3" "jsonschema>=4.21,<5" "gymnasium>=1.0,<2" "numpy>=1.26" \\
        "filelock>=3.13" \\
 && mkdir -p /sandbox/work /sandbox/runtime \\
 && chown 65534:65534 /sandbox/work
ENV LANG=C.UTF-8 PATH=/usr/local/bin:/usr/bin:/bin
WORKDIR /sandbox/work
USER 65534:65534
LABEL trace-factory.sandbox-image=registry
CMD ["python3"]
"""




class _RootfsTar:
    """Adds host files to a tar at their own paths, tracking parents and symlinks."""

    def __init__(self, fileobj) -> None:  # type: ignore[no-untyped-def]
        self.tar = tarfile.open(fileobj=fileobj, mode="w")
        self.names: set[str] = set()

    def _dirs(self, arc: str) -> None:
        parts = arc.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            self.dir("/" + "/".join(parts[:i]))

    def dir(self, path: str, mode: int = 0o755, uid: int = 0) -> None:
        arc = path.strip("/")
        if not arc or arc in self.names:
            return
        self._dirs(arc)
        ti = tarfile.TarInfo(arc)
        ti.type, ti.mode, ti.uid, ti.gid = tarfile.DIRTYPE, mode, uid, uid
        self.tar.addfile(ti)
        self.names.add(arc)

    def data(self, path: str, data: bytes, mode: int = 0o644) -> None:
        arc = path.strip("/")
        if arc in self.names:
            return
        self._dirs(arc)
        ti = tarfile.TarInfo(arc)
        ti.size, ti.mode = len(data), mode
        self.tar.addfile(ti, io.BytesIO(data))
        self.names.add(arc)

    def symlink(self, path: str, target: str) -> None:
        arc = path.strip("/")
        if arc in self.names:
            return
        self._dirs(arc)
        ti = tarfile.TarInfo(arc)
        ti.type, ti.linkname, ti.mode = tarfile.SYMTYPE, target, 0o777
        self.tar.addfile(ti)
        self.names.add(arc)

    def host(self, path: str) -> None:
        """Add a host file (following intermediate symlinks, keeping the final one as a link)."""
        p = os.path.abspath(path)
        if p.strip("/") in self.names:
            return
        parent_real = os.path.realpath(os.path.dirname(p))
        if parent_real != os.path.dirname(p):  # e.g. /lib -> usr/lib on merged-/usr hosts
            self.host(os.path.join(parent_real, os.path.basename(p)))
            return
        if os.path.islink(p):
            target = os.readlink(p)
            self.symlink(p, target)
            self.host(os.path.join(os.path.dirname(p), target) if not target.startswith("/") else target)
            return
        if os.path.isdir(p):
            self.dir(p, os.stat(p).st_mode & 0o7777)
            return
        st = os.stat(p)
        arc = p.strip("/")
        self._dirs(arc)
        ti = tarfile.TarInfo(arc)
        ti.size, ti.mode, ti.mtime = st.st_size, st.st_mode & 0o7777, int(st.st_mtime)
        with open(p, "rb") as f:
            self.tar.addfile(ti, f)
        self.names.add(arc)

    def close(self) -> None:
        self.tar.close()


def _ldd(paths: list[str]) -> set[str]:
    libs: set[str] = set()
    for i in range(0, len(paths), 200):
        out = subprocess.run(["ldd", *paths[i:i + 200]], capture_output=True, text=True).stdout
        for line in out.splitlines():
            m = re.search(r"=>\s+(/\S+)", line) or re.match(r"\s+(/\S+)\s+\(0x", line)
            if m:
                libs.add(m.group(1))
    return libs


def _skip_pyc(name: str) -> bool:
    return ".opt-" in name


def begin_rootfs(t: _RootfsTar, dirs: tuple[str, ...]) -> None:
    """The skeleton every image built from this host starts with (the sandbox image and ``factory serve``'s):
    the host's merged-/usr links, ``dirs``, a sticky ``/tmp``, the sandbox's user and group, the loader cache."""
    for top in ("/bin", "/sbin", "/lib", "/lib64"):
        if os.path.islink(top):
            t.symlink(top, os.readlink(top))
    for d in dirs:
        t.dir(d)
    t.dir("/tmp", 0o1777)
    from sandbox.runtime import GROUP, PASSWD

    t.data("/etc/passwd", PASSWD.encode())
    t.data("/etc/group", GROUP.encode())
    if os.path.exists("/etc/ld.so.cache"):
        t.host("/etc/ld.so.cache")


def add_stdlib(t: _RootfsTar, prefix: str, elfs: list[str]) -> int:
    """The interpreter's shared library and its stdlib (without tests, tk, idle, the static library); the
    extension modules are appended to ``elfs`` for ``ldd``. Returns the number of stdlib files."""
    for lib in Path(prefix, "lib").glob("libpython*.so*"):
        t.host(str(lib))
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    count = 0
    for dirpath, dirnames, filenames in os.walk(stdlib):
        if os.path.relpath(dirpath, stdlib) == ".":
            dirnames[:] = [d for d in dirnames if d not in _STDLIB_SKIP and not d.startswith("config-")]
        dirnames[:] = [d for d in dirnames if d not in ("test", "tests")]
        for fn in filenames:
            if _skip_pyc(fn) or fn.endswith((".a", ".exe")) or fn.startswith(("_tkinter", "_test", "xxlimited")):
                continue
            full = os.path.join(dirpath, fn)
            t.host(full)
            count += 1
            if fn.endswith(".so"):
                elfs.append(full)
    return count


class RootfsStats(BaseModel):
    """What went into a root filesystem tar built from the host interpreter."""

    files: int
    distributions: list[str]
    libs: int
    prefix: str
    size_mb: float


class ImageBuild(BaseModel):
    """The result of one image build (``factory sandbox build-image --json`` prints it)."""

    tag: str
    image_id: str
    source: Literal["host", "registry"]
    seconds: float
    rootfs: RootfsStats | None = None
    verified: str | None = None


Progress = Callable[[str], None]


def build_rootfs_tar(out: Path) -> RootfsStats:
    """Write the root filesystem tar to ``out``."""
    prefix = os.path.realpath(sys.base_prefix)
    exe = os.path.realpath(sys.executable)
    if not exe.startswith(prefix + "/"):
        exe = os.path.realpath(os.path.join(prefix, "bin", f"python{sys.version_info[0]}.{sys.version_info[1]}"))
    elfs: list[str] = [exe]
    with open(out, "wb") as fh:
        t = _RootfsTar(fh)
        begin_rootfs(t, ("/usr/bin", "/usr/lib", "/etc", "/proc", "/sys", "/dev", "/sandbox/runtime", "/usr/local/bin"))
        t.dir("/sandbox/work", 0o755, uid=65534)
        # interpreter
        t.host(exe)
        bindir = os.path.join(prefix, "bin")
        for name in ("python", "python3", f"python{sys.version_info[0]}.{sys.version_info[1]}"):
            p = os.path.join(bindir, name)
            if os.path.lexists(p) and os.path.realpath(p) == exe:
                t.host(p)
        t.symlink("/usr/local/bin/python", exe)
        t.symlink("/usr/local/bin/python3", exe)
        count = add_stdlib(t, prefix, elfs)
        # site-packages of the runtime distributions
        dists = distribution_closure(ROOT_DISTRIBUTIONS)
        for dist in dists:
            for f in dist.files or []:
                full = os.path.realpath(dist.locate_file(f))
                if not os.path.isfile(full) or _skip_pyc(full):
                    continue
                if "/tests/" in full and not full.endswith(".py"):
                    continue
                t.host(full)
                count += 1
                if ".so" in os.path.basename(full):
                    elfs.append(full)
        # shared libraries (and the loader) they need
        libs = _ldd(elfs)
        for lib in sorted(libs):
            t.host(lib)
        t.close()
    return RootfsStats(files=count, distributions=sorted(d.metadata["Name"] for d in dists), libs=len(libs),
                       prefix=prefix, size_mb=round(out.stat().st_size / 1e6, 1))


def _client(timeout: int = 300) -> Any:
    return docker_sdk().from_env(timeout=timeout)


def image_exists(tag: str = DEFAULT_TAG) -> bool:
    try:
        _client(timeout=30).images.get(tag)
        return True
    except Exception:  # noqa: BLE001
        return False


def _quiet(message: str) -> None:
    pass


def build_from_host(tag: str = DEFAULT_TAG, progress: Progress = _quiet) -> tuple[str, RootfsStats]:
    """Assemble the rootfs from the host interpreter and ``docker import`` it. Returns (image id, rootfs stats)."""
    prefix = os.path.realpath(sys.base_prefix)
    client = _client()
    with tempfile.TemporaryDirectory(prefix="trace-image-") as tmp:
        tar_path = Path(tmp) / "rootfs.tar"
        progress("assembling the root filesystem from the host interpreter")
        stats = build_rootfs_tar(tar_path)
        progress(f"importing the root filesystem into docker ({stats.size_mb} MB, {stats.files} files)")
        repo, _, tg = tag.rpartition(":")
        if not repo:
            repo, tg = tag, "latest"
        changes = [
            f"ENV PATH={prefix}/bin:/usr/local/bin:/usr/bin:/bin",
            "ENV LANG=C.UTF-8",
            "WORKDIR /sandbox/work",
            "USER 65534:65534",
            'CMD ["python3"]',
            f"LABEL {LABEL}=host-{sys.version_info[0]}.{sys.version_info[1]}",
        ]
        client.api.import_image(src=str(tar_path), repository=repo, tag=tg, changes=changes)
    return client.images.get(tag).id, stats


def build_from_registry(tag: str = DEFAULT_TAG, progress: Progress = _quiet) -> str:
    """Build from ``python:3.11-slim`` (needs a reachable registry and PyPI). Returns the image id."""
    client = _client()
    progress("building from python:3.11-slim")
    img, logs = client.images.build(fileobj=io.BytesIO(DOCKERFILE.encode()), tag=tag, rm=True, pull=True)
    for chunk in logs:
        line = str(chunk.get("stream", "")).strip()
        if line:
            progress(line)
    return img.id


def verify(tag: str = DEFAULT_TAG) -> str:
    """Run the image the way the sandbox does and import the runtime deps; returns the output."""
    client = _client()
    out = client.containers.run(
        tag, ["python", "-c", "import pydantic, jsonschema, gymnasium, numpy, filelock, sys; print(sys.version.split()[0], 'ok')"],
        remove=True, network_mode="none", read_only=True, cap_drop=["ALL"], security_opt=["no-new-privileges"],
        user="65534:65534",
    )
    return out.decode().strip()


def build(tag: str = DEFAULT_TAG, source: Literal["host", "registry"] = "host", check: bool = True,
          progress: Progress = _quiet) -> ImageBuild:
    """Build the image from ``source``, then (``check``) run it the way the sandbox does."""
    t0 = time.monotonic()
    stats: RootfsStats | None = None
    if source == "registry":
        image_id = build_from_registry(tag, progress)
    else:
        image_id, stats = build_from_host(tag, progress)
    verified = None
    if check:
        progress("verifying: importing the runtime dependencies inside the image")
        verified = verify(tag)
    return ImageBuild(tag=tag, image_id=image_id, source=source, seconds=round(time.monotonic() - t0, 1),
                      rootfs=stats, verified=verified)
