"""What a bwrap sandbox shows of the host: only the packages the inside half imports, no host path in
/proc/self/mountinfo, and a private TMPDIR changes nothing (issues 19 and 23).

Each probe also runs against a bwrap sandbox laid out the way it was before (the interpreter prefix and runtime
bound at their host paths, ``can_stage`` off), to show that the probe does see what it looks for.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from _sbx import TEST_LIMITS, backend_reason

from sandbox import runtime

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(backend_reason("bwrap") is not None or os.geteuid() != 0,
                                reason="needs bwrap as root (the staged layout mounts in the launcher)")

PACKAGES = """
import importlib, json, os, sys
seen = {}
for d in sys.path:
    if os.path.isdir(d) and ("site-packages" in d or "dist-packages" in d):
        seen[d] = sorted(os.listdir(d))
imports = {}
for name in ("jsonschema", "trace_env.sdk", "pydantic", "numpy", "gymnasium", "hypothesis", "torch", "factory",
             "env_registry", "schemas"):
    try:
        importlib.import_module(name)
        imports[name] = "importable"
    except ImportError:
        imports[name] = "absent"
print(json.dumps({"site": seen, "imports": imports, "prefix": sys.prefix}))
"""


def _layout(monkeypatch, staged: bool) -> None:  # type: ignore[no-untyped-def]
    if not staged:
        monkeypatch.setattr("sandbox.bwrap.can_stage", lambda: False)


def test_bwrap_sees_only_the_packages_the_inside_half_imports(make_sandbox, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from sandbox.distributions import distribution_closure

    box = make_sandbox("bwrap")
    data = json.loads(box.exec(["python", "-c", PACKAGES]).stdout)
    allowed = {"jsonschema": "importable", "trace_env.sdk": "importable"}
    assert data["imports"] == {**{k: "absent" for k in data["imports"]}, **allowed}, data["imports"]
    assert data["prefix"] == runtime.INSIDE_PYTHON
    names = {n for listing in data["site"].values() for n in listing}
    wanted = {d.metadata["Name"].lower().replace("-", "_") for d in distribution_closure(runtime.SITE_DISTRIBUTIONS)}
    assert not any(n.endswith(".pth") or "editable" in n for n in names), names  # no editable install, no checkout
    assert {n.split("-")[0].lower() for n in names if n.endswith(".dist-info")} == wanted

    monkeypatch.undo()
    _layout(monkeypatch, staged=False)
    before = json.loads(make_sandbox("bwrap").exec(["python", "-c", PACKAGES]).stdout)
    assert before["imports"]["pydantic"] == "importable"  # the probe sees a host site-packages when there is one


MOUNTINFO = "print(open('/proc/self/mountinfo').read())"
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/dev", "/proc", "/sandbox", "/tmp", "/")


def host_paths(mountinfo: str, extra: list[str]) -> list[str]:
    """Paths in mountinfo (a mount's root, its mount point, its options) that name something of this host."""
    private = [str(REPO), tempfile.gettempdir(), str(runtime.runtime_root()), os.path.expanduser("~"),
               runtime.interpreter_prefix(), *extra]
    found = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) < 10:
            continue
        root, point, options = fields[3], fields[4], fields[-1]
        paths = [root, point] + [p.split("=", 1)[1] for p in options.split(",") if "=/" in p]
        for path in paths:
            for piece in path.split(":"):
                if any(piece == h or piece.startswith(h.rstrip("/") + "/") for h in private if h not in ("/", "/tmp")):
                    found.append(piece)
                elif not (piece.startswith("/proc/self/fd/") or any(
                        piece == s or piece.startswith(s.rstrip("/") + "/") for s in SYSTEM)):
                    found.append(piece)
    return found


def test_mountinfo_names_no_host_path(make_sandbox, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    box = make_sandbox("bwrap")
    text = box.exec(["python", "-c", MOUNTINFO]).stdout
    assert "overlay" in text and "/sandbox/python" in text
    assert host_paths(text, [str(box.host_workdir.parent)]) == [], text

    _layout(monkeypatch, staged=False)
    before = make_sandbox("bwrap")
    assert host_paths(before.exec(["python", "-c", MOUNTINFO]).stdout, [str(before.host_workdir.parent)])


#: Filesystems whose mount root is a path inside themselves (a cgroup, a proc entry), not a file of the host.
PSEUDO = {"proc", "sysfs", "cgroup", "cgroup2", "tmpfs", "devpts", "mqueue"}
#: Where Docker mounts things inside a container: its own paths, not the host's.
DOCKER_SYSTEM = ("/proc", "/dev", "/sys", "/tmp", "/sandbox", "/etc/resolv.conf", "/etc/hostname", "/etc/hosts")


def docker_paths(mountinfo: str, data_root: str) -> tuple[list[str], list[str]]:
    """(paths that name the user's tree, other paths neither under Docker's data root nor a system path) in a
    container's mountinfo: mount roots (of disk filesystems), mount points, sources and options."""
    private = [str(REPO), tempfile.gettempdir(), os.environ.get("TMPDIR", ""), str(runtime.runtime_root()),
               os.path.expanduser("~"), runtime.interpreter_prefix()]
    private = [h.rstrip("/") for h in private if h and h.rstrip("/") not in ("", "/tmp")]
    mine, other = [], []
    for line in mountinfo.splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        dash = fields.index("-")
        root, point, fstype, source, options = fields[3], fields[4], fields[dash + 1], fields[dash + 2], fields[dash + 3]
        paths = ([] if fstype in PSEUDO else [root]) + [point, source]
        paths += [p.split("=", 1)[1] for p in options.split(",") if "=/" in p]
        for piece in (piece for path in paths for piece in path.split(":") if piece.startswith("/")):
            if any(piece == h or piece.startswith(h + "/") for h in private):
                mine.append(piece)
            elif not (piece == "/" or any(piece == s or piece.startswith(s + "/") for s in (*DOCKER_SYSTEM, data_root))):
                other.append(piece)
    return mine, other


@pytest.mark.skipif(backend_reason("docker") is not None, reason=f"docker unavailable: {backend_reason('docker')}")
def test_docker_mountinfo_names_only_dockers_data_root(make_sandbox) -> None:  # type: ignore[no-untyped-def]
    """The workers' FIFO channel directory is a Docker volume: no path of the user's tree (TMPDIR, the runtime
    dir, the checkout, home, the interpreter) shows in the container's mountinfo, only Docker's data root."""
    box = make_sandbox("docker")
    data_root = box.client.info()["DockerRootDir"].rstrip("/")
    text = box.exec(["python", "-c", MOUNTINFO]).stdout
    mine, other = docker_paths(text, data_root)
    assert mine == [] and other == [], (mine, other, text)
    assert f"lowerdir={data_root}/" in text, text  # the probe read the overlay's host paths
    channels = [line.split()[3] for line in text.splitlines() if line.split()[4:5] == ["/sandbox/channels"]]
    assert channels == [f"{data_root}/volumes/{box.name}-channels/_data"], text  # the FIFOs are in use, as root
    lines = [f"1 1 0:1 {runtime.runtime_root()}/docker-channels/x /sandbox/channels ro - ext4 /dev/vda rw",
             f"1 1 0:1 / / ro - overlay overlay rw,lowerdir={REPO}/l:{data_root}/l,upperdir=/elsewhere/u"]
    assert docker_paths("\n".join(lines), data_root) == ([f"{runtime.runtime_root()}/docker-channels/x", f"{REPO}/l"],
                                                          ["/elsewhere/u"])  # the probe sees what it looks for


def test_a_private_tmpdir_changes_nothing(tmp_path: Path) -> None:
    """TMPDIR a directory only its owner may enter (what ``mktemp -d`` makes): sandboxes go where the sandbox's
    uid can reach, and an env worker answers."""
    private = Path(tempfile.mkdtemp(prefix="trace-private-tmpdir-", dir="/tmp"))
    os.chmod(private, 0o700)
    try:
        code = ("from sandbox import open_sandbox\n"
                "with open_sandbox('bwrap') as sb:\n"
                "    assert sb.exec(['python', '-c', 'print(1)']).stdout == '1\\n'\n"
                "    w = sb.start_worker('sandbox.handlers.echo')\n"
                "    print(w.call('echo', {'ok': True}), sb.host_workdir.parent.parent)\n")
        env = {**os.environ, "TMPDIR": str(private), "PYTHONPATH": str(REPO)}
        env.pop("TRACE_SANDBOX_RUNTIME_DIR", None)
        run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr[-2000:]
        assert "{'ok': True}" in run.stdout and str(private) not in run.stdout
        assert not list(private.glob("trace-sbx-*"))  # the roots went elsewhere; the runtime cache may stay
    finally:
        subprocess.run(["rm", "-rf", str(private)], check=False)


def test_no_reachable_directory_is_one_line_that_says_what_to_set(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    with pytest.raises(runtime.NoReachableDir) as info:
        runtime.sandbox_parent_dir([str(private)])
    message = str(info.value)
    assert "\n" not in message and "set TMPDIR to a directory every user may traverse" in message


def test_the_runtime_copy_is_reachable_only_through_the_launcher(make_sandbox) -> None:
    """The sandbox's uid needs nothing under the runtime dir: its layers reach bwrap as file descriptors."""
    box = make_sandbox("bwrap", TEST_LIMITS)
    code = "import os, json; print(json.dumps([os.path.exists(p) for p in %r]))" % [
        str(runtime.runtime_root()), str(box.host_workdir)]
    assert json.loads(box.exec(["python", "-c", code]).stdout) == [False, False]
