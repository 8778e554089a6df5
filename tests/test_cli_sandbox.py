"""``factory sandbox``: status agrees with the real probes and the host, reap removes (and reports) a dead
process's leftovers, build-image and exec keep the one-line error convention, exec shows what env code sees."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from factory.cli import app
from sandbox import AUTO_ORDER, REGISTRY, available_backends, cgroups, construct, leftovers

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()


def usable(backend: str) -> bool:
    return available_backends()[backend] is None  # probes are cached per process


def invoke(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args))


def factory(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real entry point (main(): reaps at start, one-line usage errors), as a user runs it."""
    full = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([sys.executable, "-m", "factory.cli", *args], cwd=REPO, env=full, capture_output=True,
                          text=True, timeout=300)


def one_line_error(result, code: int, message: str) -> None:  # type: ignore[no-untyped-def]
    assert result.exit_code == code, result.output
    assert message in result.output and "Traceback" not in result.output
    assert len([line for line in result.output.splitlines() if line.strip()]) == 1, result.output


def test_status_json_agrees_with_the_probes_and_the_host() -> None:
    result = invoke("sandbox", "status", "--json")
    data = json.loads(result.stdout)
    reasons = available_backends()
    assert [b["name"] for b in data["backends"]] == list(REGISTRY)
    for b in data["backends"]:
        assert b["usable"] == (reasons[b["name"]] is None) and b["reason"] == reasons[b["name"]]
        assert b["isolated"] == (not REGISTRY[b["name"]].load().unsafe)
        assert b["auto"] == (b["name"] in AUTO_ORDER)
    assert data["auto"] == next((n for n in AUTO_ORDER if reasons[n] is None), None)
    assert result.exit_code == (0 if data["auto"] else 1)
    limits = data["limits"]
    assert limits["cgroup_version"] == cgroups.version() and limits["root"] == (os.geteuid() == 0)
    assert (limits["seccomp_filter"] is None) == (limits["seccomp_reason"] is not None)
    if limits["seccomp_filter"]:
        assert Path(limits["seccomp_filter"]).stat().st_size > 0
    assert limits["bwrap_checked"] == usable("bwrap")
    if usable("bwrap"):
        with construct("bwrap") as sb:  # what a sandbox opened here says it could not set
            assert limits["bwrap_warning"] == sb.warning


def test_status_without_any_backend_says_why_and_exits_1(tmp_path: Path) -> None:
    """No bwrap on PATH, no docker daemon at DOCKER_HOST: a real host where nothing can run env code."""
    bare = factory("sandbox", "status", env={"PATH": str(tmp_path), "DOCKER_HOST": f"unix://{tmp_path}/none.sock"})
    assert bare.returncode == 1, bare.stdout + bare.stderr
    assert "bwrap not installed" in bare.stdout and "docker daemon not reachable" in bare.stdout
    assert "no isolating backend is usable" in bare.stderr and "Traceback" not in bare.stderr
    assert max(len(line) for line in bare.stdout.splitlines()) <= 80


def _left_behind(root: Path, runtime: Path) -> Path:
    """A process that opened a sandbox (its root dir, its lease) and died without closing it."""
    (root / "work").mkdir(parents=True)
    (root / "work" / "file").write_text("left behind")
    code = f"from sandbox import leftovers; leftovers.Lease({root.name!r}, 'bwrap', root={str(root)!r})"
    env = {**os.environ, "PYTHONPATH": str(REPO), "TRACE_SANDBOX_RUNTIME_DIR": str(runtime)}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)
    return root


def test_reap_removes_and_counts_a_dead_process_leftovers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the real entry point, whose start already reaps: the command still reports what went."""
    runtime = tmp_path / "runtime"
    monkeypatch.setenv("TRACE_SANDBOX_RUNTIME_DIR", str(runtime))
    dead = _left_behind(tmp_path / "trace-sbx-clidead", runtime)
    live = tmp_path / "trace-sbx-clilive"
    live.mkdir()
    lease = leftovers.Lease(live.name, "bwrap", root=str(live))  # this process: alive
    try:
        ran = factory("sandbox", "reap", "--json", env={"TRACE_SANDBOX_RUNTIME_DIR": str(runtime)})
        assert ran.returncode == 0, ran.stderr
        report = json.loads(ran.stdout)
        assert f"work dir {dead}" in report["removed"] and report["count"] == len(report["removed"])
        assert not dead.exists() and live.exists()
        again = _left_behind(tmp_path / "trace-sbx-clidead2", runtime)
        human = invoke("sandbox", "reap")  # in this process nothing was reaped at start: the command does it
        assert human.exit_code == 0 and f"work dir {again}" in human.output and "leftover" in human.output
        assert not again.exists() and live.exists()
    finally:
        lease.release()


def test_build_image_bad_input_is_one_line(tmp_path: Path) -> None:
    one_line_error(invoke("sandbox", "build-image", "--source", "ftp"), 2, "--source 'ftp': choose host")
    missing_dir = tmp_path / "no" / "such" / "dir" / "rootfs.tar"
    result = invoke("sandbox", "build-image", "--rootfs", str(missing_dir), "--json")
    one_line_error(result, 1, f"cannot write the root filesystem tar to {missing_dir}")


def test_build_image_if_missing_leaves_a_present_image_alone() -> None:
    if not usable("docker"):
        pytest.skip(f"docker backend unavailable here: {available_backends()['docker']}")
    result = invoke("sandbox", "build-image", "--if-missing", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["built"] is False


def test_exec_shows_what_env_code_sees_and_passes_its_exit_code() -> None:
    if not usable("bwrap"):
        pytest.skip(f"bwrap unavailable here: {available_backends()['bwrap']}")
    code = "import os, sys; print(os.getuid(), os.getcwd()); print('\\x1b]52;c;aGk=\\x07[/]forged'); sys.exit(3)"
    shown = invoke("sandbox", "exec", "--sandbox", "bwrap", "--", "python", "-c", code)
    assert shown.exit_code == 3, shown.output
    assert "65534 /sandbox/work" in shown.output and "sandbox: bwrap" in shown.output
    assert "\x1b" not in shown.output and "[/]forged" in shown.output  # control sequences never reach the terminal
    as_json = json.loads(invoke("sandbox", "exec", "--sandbox", "bwrap", "--json", "--", "sh", "-c", "exit 4").stdout)
    assert as_json["exit_code"] == 4 and as_json["timed_out"] is False
    one_line_error(invoke("sandbox", "exec", "--sandbox", "vm", "--", "true"), 2, "--sandbox 'vm' is not a backend")
