"""Build the Docker image ``trace-factory-serve:py311`` for ``factory serve`` - offline, like the sandbox image.

The same recipe as :mod:`sandbox.image` (no registry is reachable on CI): a root filesystem assembled from this
host's interpreter, ``docker import``-ed. It holds the interpreter and its stdlib, the project's packages
(``/opt/trace-factory/src``), every distribution ``factory serve`` imports plus the requirement closure of the
core dependencies and ``openenv-core`` (``/opt/trace-factory/site-packages``), ``bwrap`` and the shared libraries
``ldd`` says all of them need, and the compiled seccomp filter. Build it from the interpreter that has the
``openenv`` extra (``.venv-openenv/bin/python -m factory.cli serve --build-image``).

Env code still runs in a sandbox inside the container: the bwrap backend (``TRACE_FACTORY_SANDBOX=bwrap`` is
baked in, never the unsafe one), which needs namespaces the default Docker profile denies, hence
``RUN_FLAGS``. The registry is mounted read-only at ``/registry``. The image is labelled with a hash of
what went in (sources, distributions, interpreter), so ``--if-missing`` rebuilds only when one changed.
Host side.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel

from sandbox import syscalls
from sandbox.distributions import distribution_closure
from sandbox.image import _ldd, _RootfsTar, add_stdlib, begin_rootfs

DEFAULT_TAG = "trace-factory-serve:py311"
LABEL = "trace-factory.serve-image"
SRC = "/opt/trace-factory/src"
SITE = "/opt/trace-factory/site-packages"
RUNTIME_DIR = "/var/lib/trace-factory/runtime"
REPO = Path(__file__).resolve().parents[1]
#: The project's packages (pyproject's ``packages.find``); the layering test names the same set.
PACKAGES = ("schemas", "sandbox", "llm_clients", "factory", "env_registry", "trace_env", "trainer", "router", "fuzz",
            "integrations")
#: Required by what ``factory serve`` and the bwrap sandbox's runtime layer import; closed over their requirements.
ROOTS = ("pydantic", "jsonschema", "gymnasium", "numpy", "filelock", "typer", "rich", "openenv-core", "fastapi",
         "uvicorn", "websockets", "httptools", "uvloop", "wsproto")
#: Host programs the sandbox runs besides the interpreter.
TOOLS = ("true",)
#: The ``docker run`` flags the image needs: bwrap makes namespaces (user, pid, mount, net) inside the container.
RUN_FLAGS = ("--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
             "--security-opt", "systempaths=unconfined", "--cap-add", "SYS_ADMIN")

# Imports everything a served session touches, then names the top-level modules loaded (run by this interpreter).
_PROBE = """
import json, sys
import factory.cli, factory.cli.serve, factory.serve, env_registry, gymnasium, uvicorn, fastapi
import sandbox.bwrap, sandbox.runtime, sandbox.status
import uvicorn.loops.auto, uvicorn.protocols.http.auto, uvicorn.protocols.websockets.auto, uvicorn.lifespan.on
import uvicorn.protocols.http.h11_impl, uvicorn.protocols.websockets.websockets_impl
factory.serve.make_app("trace/probe-v0", max_sessions=1)
print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))
"""

Progress = Callable[[str], None]


class ServeImageBuild(BaseModel):
    """One build (``factory serve --build-image --json`` prints it)."""

    tag: str
    built: bool
    image_id: str = ""
    content_hash: str
    seconds: float = 0.0
    size_mb: float = 0.0
    files: int = 0
    distributions: list[str] = []


def _quiet(message: str) -> None:
    pass


def _imported_distributions() -> set[str]:
    """Distributions of every module a served session imports, found by importing them in a child process."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["?"])[-1]
        raise RuntimeError(f"this interpreter cannot import what factory serve needs ({tail}); build it from the "
                           "interpreter with the openenv extra (.venv-openenv/bin/python)")
    top = json.loads(out.stdout.strip().splitlines()[-1])
    mapping = metadata.packages_distributions()
    return {dist for name in top for dist in mapping.get(name, ())}


def distributions() -> list[metadata.Distribution]:
    """The requirement closure of ``ROOTS`` and of every distribution ``factory serve`` imports (not ours)."""
    names = _imported_distributions() - {"trace-factory"}
    return sorted((d for d in distribution_closure(ROOTS + tuple(sorted(names))) if d.metadata["Name"] != "trace-factory"),
                  key=lambda d: d.metadata["Name"].lower())


def _sources() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (REPO / package).rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and p.suffix in (".py", ".json", ".txt", ".typed"))


def content_hash(dists: list[metadata.Distribution]) -> str:
    """What the image is made of: the interpreter, the distributions (name==version) and the sources' bytes."""
    h = hashlib.sha256(f"{sys.version}\n{os.path.realpath(sys.base_prefix)}\n".encode())
    for d in dists:
        h.update(f"{d.metadata['Name']}=={d.version}\n".encode())
    for p in _sources():
        h.update(str(p.relative_to(REPO)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def _seccomp_filter() -> tuple[str, bytes] | None:
    """(name, bytes) of the compiled syscall filter, so the container needs no libseccomp binding."""
    with tempfile.TemporaryDirectory(prefix="trace-seccomp-") as tmp:
        path, _ = syscalls.bpf_file(tmp)
        return (os.path.basename(path), Path(path).read_bytes()) if path else None


def build_rootfs_tar(out: Path, dists: list[metadata.Distribution]) -> int:
    """Write the root filesystem to ``out``; returns the number of files."""
    prefix = os.path.realpath(sys.base_prefix)
    major_minor = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    exe = os.path.realpath(os.path.join(prefix, "bin", major_minor))
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise RuntimeError("bwrap is not installed here; the served sessions' sandbox needs it (apt-get install bubblewrap)")
    tools = [os.path.realpath(t) for t in filter(None, map(shutil.which, TOOLS))]  # the bwrap probe runs `true`
    elfs: list[str] = [exe, os.path.realpath(bwrap), *tools]
    with open(out, "wb") as fh:
        t = _RootfsTar(fh)
        begin_rootfs(t, ("/usr/bin", "/usr/lib", "/etc", "/proc", "/sys", "/dev", "/usr/local/bin", "/registry",
                         "/root"))
        t.dir(RUNTIME_DIR, 0o755)
        t.host(exe)
        t.host(bwrap)
        for tool in tools:
            t.host(tool)
        if os.path.realpath(bwrap) != "/usr/bin/bwrap":
            t.symlink("/usr/bin/bwrap", os.path.realpath(bwrap))
        for name in ("python", "python3"):  # the bwrap sandbox runs `python` from the prefix's bin
            t.symlink(f"/usr/local/bin/{name}", exe)
            t.symlink(os.path.join(prefix, "bin", name), os.path.basename(exe))  # relative: bwrap moves the prefix
        count = add_stdlib(t, prefix, elfs)
        for dist in dists:  # at their path relative to their site-packages, all in one folder
            for f in dist.files or []:
                rel = str(f)
                full = os.path.realpath(dist.locate_file(f))
                if rel.startswith("..") or "__pycache__" in rel or not os.path.isfile(full):
                    continue
                with open(full, "rb") as src:
                    t.data(f"{SITE}/{rel}", src.read(), 0o755 if os.access(full, os.X_OK) else 0o644)
                count += 1
                if ".so" in os.path.basename(full):
                    elfs.append(full)
        for p in _sources():
            t.data(f"{SRC}/{p.relative_to(REPO)}", p.read_bytes())
            count += 1
        bpf = _seccomp_filter()
        if bpf is not None:
            t.data(f"{RUNTIME_DIR}/seccomp/{bpf[0]}", bpf[1])
        for lib in sorted(_ldd(elfs)):
            t.host(lib)
        t.close()
    return count


def _client(timeout: int = 300):  # type: ignore[no-untyped-def]
    from sandbox.docker_container import docker_sdk

    return docker_sdk().from_env(timeout=timeout)


def present_hash(tag: str) -> str | None:
    """The content hash the image ``tag`` was built from; None where it is missing (or docker is)."""
    try:
        return (_client(30).images.get(tag).labels or {}).get(LABEL)
    except Exception:  # noqa: BLE001 - missing image, no daemon: both mean "build it"
        return None


def _remove_untagged(client: Any, image_id: str | None) -> None:
    """The image a rebuild replaced, once no tag names it: each is as big as the new one (about 750 MB), and
    every source change rebuilds. Left alone where a container still uses it, or another tag names it."""
    if image_id is None:
        return
    try:
        if not client.images.get(image_id).tags:
            client.images.remove(image_id)
    except Exception:  # noqa: BLE001 - in use, or already gone: nothing to reclaim now
        return


def build(tag: str = DEFAULT_TAG, if_missing: bool = False, progress: Progress = _quiet) -> ServeImageBuild:
    """Build the image (``if_missing``: only where no image of the same content hash has that tag)."""
    progress("finding what factory serve imports")
    dists = distributions()
    names = [f"{d.metadata['Name']}=={d.version}" for d in dists]
    digest = content_hash(dists)
    if if_missing and present_hash(tag) == digest:
        return ServeImageBuild(tag=tag, built=False, image_id=_client(30).images.get(tag).id, content_hash=digest,
                               distributions=names)
    t0 = time.monotonic()
    client = _client()
    prefix = os.path.realpath(sys.base_prefix)
    with tempfile.TemporaryDirectory(prefix="trace-serve-image-") as tmp:
        tar_path = Path(tmp) / "rootfs.tar"
        progress(f"assembling the root filesystem ({len(dists)} distributions)")
        files = build_rootfs_tar(tar_path, dists)
        size_mb = round(tar_path.stat().st_size / 1e6, 1)
        progress(f"importing it into docker ({size_mb} MB, {files} files)")
        repo, _, version = tag.rpartition(":")
        repo, version = (repo, version) if repo else (tag, "latest")
        changes = [
            f"ENV PATH={prefix}/bin:/usr/local/bin:/usr/bin:/bin",
            "ENV LANG=C.UTF-8",
            f"ENV PYTHONPATH={SRC}:{SITE}",
            "ENV TRACE_FACTORY_SANDBOX=bwrap",
            f"ENV TRACE_SANDBOX_RUNTIME_DIR={RUNTIME_DIR}",
            "ENV TRACE_FACTORY_REGISTRY=/registry",
            "ENV HOME=/root",
            "WORKDIR /root",
            "EXPOSE 8000",
            'ENTRYPOINT ["python", "-m", "factory.cli", "serve", "--host", "0.0.0.0", "--port", "8000"]',
            f"LABEL {LABEL}={digest}",
        ]
        try:
            replaced = client.images.get(tag).id
        except Exception:  # noqa: BLE001 - no image of that tag yet
            replaced = None
        client.api.import_image(src=str(tar_path), repository=repo, tag=version, changes=changes)
    _remove_untagged(client, replaced)
    return ServeImageBuild(tag=tag, built=True, image_id=client.images.get(tag).id, content_hash=digest,
                           seconds=round(time.monotonic() - t0, 1), size_mb=size_mb, files=files, distributions=names)


def run_command(tag: str = DEFAULT_TAG, env: str = "trace/NAME-v0", port: int = 8000,
                registry: str = "~/.cache/trace-factory/envs") -> list[str]:
    """The ``docker run`` line that serves ``env`` from the image (the README shows the same)."""
    return ["docker", "run", "--rm", "-p", f"{port}:8000", *RUN_FLAGS, "-v", f"{registry}:/registry:ro", tag, env]
