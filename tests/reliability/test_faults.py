"""Issue 14 item 3: faults end in one clear line, before the long work where possible, and never cost the verdict.

Unwritable places (read-only, a file in the way, a full disk; the registry, the build folder, the LLM cache,
HOME, the report path) are found before the gate runs; a disk that fills up after the gate costs the file, not
the verdict; bad input files and absurd actions never raise.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import factory.build
import factory.validation.gate
from factory.testing.llm_server import ScriptedLLMServer
from sandbox import available_backends
from tests.conftest import TEST_ENVS
from tests.reliability.conftest import CAN_MOUNT, FAST_GATE, fill, one_line, put, tmpfs

BACKEND = "bwrap" if available_backends().get("bwrap") is None else "docker"
BLUEPRINT = ["build", "-c", "permission_error_recovery", "--sandbox", BACKEND]


@pytest.fixture
def gate_watch(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records every gate run, so a test can show that a fault was caught before any."""
    runs: list[str] = []
    real = factory.validation.gate.validate_source

    def watched(source, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003
        runs.append(source[:20])
        return real(source, *args, **kwargs)

    monkeypatch.setattr(factory.validation.gate, "validate_source", watched)
    monkeypatch.setattr(factory.build, "validate_source", watched)
    return runs


@contextlib.contextmanager
def disk(tmp_path: Path) -> Iterator[tuple[Path, bool]]:
    """A folder on a real 4 MiB file system (``True``), or a plain folder (``False``) where this process may not mount."""
    if CAN_MOUNT:
        with tmpfs(tmp_path / "disk", "4m") as folder:
            yield folder, True
    else:
        (tmp_path / "disk").mkdir()
        yield tmp_path / "disk", False


@pytest.mark.parametrize("fault", ["read-only", "a file in the way", "full disk"])
def test_an_unwritable_registry_is_refused_before_the_gate(tmp_path: Path, readonly_dir: Path, factory_main, gate_watch, fault: str) -> None:
    with contextlib.ExitStack() as stack:
        if fault == "read-only":
            registry, words = readonly_dir / "registry", "is on a read-only file system"
        elif fault == "a file in the way":
            (tmp_path / "blocker").write_text("")
            registry, words = tmp_path / "blocker" / "registry", "is a file"
        else:
            folder, real = stack.enter_context(disk(tmp_path))
            if not real:
                pytest.skip("needs root and mount for a real full disk")
            fill(folder)
            registry, words = folder / "registry", "bytes free on its device"
        result = factory_main(*BLUEPRINT, "--registry", str(registry))
    line = one_line(result.stderr)
    assert result.code == 2 and str(registry) in line and words in line and "--registry" in line
    assert gate_watch == [] and result.stdout == ""


def test_an_unwritable_home_is_refused_before_the_gate(readonly_dir: Path, factory_main, gate_watch, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRACE_FACTORY_REGISTRY")
    monkeypatch.setenv("HOME", str(readonly_dir))
    result = factory_main(*BLUEPRINT)
    line = one_line(result.stderr)
    assert result.code == 2 and f"{readonly_dir}/.cache/trace-factory/envs" in line and "TRACE_FACTORY_REGISTRY" in line
    assert gate_watch == []


@pytest.mark.parametrize("place", ["build folder", "LLM response cache"])
def test_unwritable_build_folder_or_cache_is_refused_before_any_llm_call(
    tmp_path: Path, readonly_dir: Path, factory_main, monkeypatch: pytest.MonkeyPatch, place: str,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    monkeypatch.setenv("TRACE_FACTORY_CACHE", str((readonly_dir if place != "build folder" else tmp_path) / "cache"))
    build_dir = (readonly_dir if place == "build folder" else tmp_path) / "builds"
    with ScriptedLLMServer([]) as server:
        result = factory_main("build", "-c", "tiny_cancel", "--description", "Cancels refundable bookings.", "--target",
                              "tau2-airline", "--llm", "openai:gpt-4.1", "--llm-base-url", server.openai_base_url,
                              "--build-dir", str(build_dir))
        assert server.requests == []
    line = one_line(result.stderr)
    assert result.code == 2 and place in line and "read-only" in line


@pytest.mark.parametrize("fault", ["read-only", "a folder"])
def test_a_bad_report_path_is_refused_before_the_gate(tmp_path: Path, readonly_dir: Path, factory_main, gate_watch, fault: str) -> None:
    report = readonly_dir / "report.json" if fault == "read-only" else tmp_path
    result = factory_main("validate", str(TEST_ENVS / "tiny_cancel.py"), "--report", str(report))
    line = one_line(result.stderr)
    assert result.code == 2 and str(report.parent if fault == "read-only" else report) in line
    assert ("read-only" if fault == "read-only" else "is a folder") in line
    assert gate_watch == []


def _fill_after_gate(monkeypatch: pytest.MonkeyPatch, folder: Path | None, inject: tuple[object, str] | None) -> None:
    """The disk fills up while the gate runs: for real (a tmpfs) or, without mount rights, an ENOSPC injected."""
    real = factory.validation.gate.validate_source

    def then_fill(*args, **kwargs):  # noqa: ANN002, ANN003
        report = real(*args, **kwargs)
        if folder is not None:
            fill(folder)
        return report

    monkeypatch.setattr(factory.validation.gate, "validate_source", then_fill)
    monkeypatch.setattr(factory.build, "validate_source", then_fill)
    if folder is None and inject is not None:
        owner, name = inject

        def no_space(*args, **kwargs):  # noqa: ANN002, ANN003
            raise OSError(errno.ENOSPC, "No space left on device", str(args[0] if args else ""))

        monkeypatch.setattr(owner, name, no_space)


def test_the_verdict_is_printed_when_the_report_write_fails(tmp_path: Path, factory_main, monkeypatch: pytest.MonkeyPatch) -> None:
    import factory.cli.validate as validate_module

    with disk(tmp_path) as (folder, real):
        _fill_after_gate(monkeypatch, folder if real else None, (validate_module, "write_atomic"))
        report = folder / "out" / "report.json"
        checked = TEST_ENVS.parent / "gate" / "envs" / "tiny_checked.py"  # a tiny env that passes the gate
        result = factory_main("validate", str(checked), "--sandbox", BACKEND, "--report", str(report), *FAST_GATE)
        leftovers = sorted(p.name for p in report.parent.iterdir()) if report.parent.exists() else []
    assert result.code == 1
    assert "validation of" in result.stdout and "PASSED" in result.stdout  # the verdict survived the full disk
    progress = re.compile(r"^\[\d\d:\d\d:\d\d\] validating ")  # a slow machine also logs progress lines
    lines = [line for line in result.stderr.splitlines() if line.strip() and not progress.match(line)]
    assert len(lines) == 2 and lines[0].startswith("sandbox:") and "Traceback" not in result.stderr
    assert "the report was not written" in lines[1] and "no space left on the device" in lines[1] and "report.json" in lines[1]
    assert leftovers == []  # no half-written report, no temporary file


def test_a_registry_that_fills_during_the_gate_keeps_the_verdict(tmp_path: Path, factory_main, monkeypatch: pytest.MonkeyPatch) -> None:
    from env_registry.registry import Registry

    with disk(tmp_path) as (folder, real):
        registry = folder / "registry"
        _fill_after_gate(monkeypatch, folder if real else None, (Registry, "_write_version"))
        result = factory_main(*BLUEPRINT, "--registry", str(registry), "--json", *FAST_GATE)
        data = json.loads(result.stdout)
        assert result.code == 1
        assert data["validation"] == "passed" and data["registered"] is False
        assert "passed the gate but could not be registered" in data["error"] and "no space left" in data["error"]
        assert not registry.exists() or [p.name for p in registry.rglob("*")] == [".lock"]  # no partial version


def test_a_read_only_registry_fails_remove_in_one_line(tmp_path: Path, factory_main) -> None:
    if not CAN_MOUNT:
        pytest.skip("needs root and mount for a read-only file system that root cannot write")
    with tmpfs(tmp_path / "ro", "1m") as folder:
        put(folder / "registry")
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        result = factory_main("envs", "remove", "tiny_cancel", "--registry", str(folder / "registry"))
        listed = factory_main("envs", "list", "--json", "--registry", str(folder / "registry"))
    line = one_line(result.stderr)
    assert result.code == 1 and "read-only file system" in line and str(folder / "registry") in line
    assert listed.code == 0 and json.loads(listed.stdout)[0]["status"] == "ok"  # reading needs no write


@pytest.mark.parametrize("kind", ["binary", "folder", "fifo", "missing", "nested", "not json"])
def test_a_bad_report_input_is_one_line(tmp_path: Path, factory_main, gate_watch, kind: str) -> None:
    path = tmp_path / "capabilities.json"
    expected = {"binary": "not UTF-8 text (byte 0xff", "folder": "is a folder", "fifo": "FIFO", "missing": "no such file or folder",
                "nested": "not a capabilities.json", "not json": "not a capabilities.json"}[kind]
    if kind == "binary":
        path.write_bytes(b"\xff\xfe\x00{")
    elif kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "nested":
        path.write_text("[" * 5000)
    elif kind == "not json":
        path.write_text("capabilities: yes")
    result = factory_main("build", "--all", "--report", str(path))
    line = one_line(result.stderr)
    assert result.code == 2 and f"--report {path}" in line and expected in line
    assert gate_watch == []


@pytest.mark.parametrize("kind", ["binary", "folder", "huge"])
def test_a_bad_env_file_is_one_line(tmp_path: Path, factory_main, gate_watch, kind: str) -> None:
    path = tmp_path / "env.py"
    if kind == "binary":
        path.write_bytes(b"\x89PNG\r\n\x1a\n\xff")
    elif kind == "folder":
        path.mkdir()
    else:
        path.write_text("#" * (2 << 20))
    expected = {"binary": "not UTF-8", "folder": "is a folder", "huge": "over the 1,048,576-byte limit"}[kind]
    for args in (["validate", str(path)], ["build", "--from-file", str(path)]):
        result = factory_main(*args)
        line = one_line(result.stderr)
        assert result.code == 2 and expected in line and str(path) in line
    assert gate_watch == []


def test_deeply_nested_actions_never_raise_in_a_sandboxed_env(tmp_path: Path) -> None:
    """The README promises a bad action never raises: '[' * 5000 as text, in a tool call, and as a Python object."""
    import gymnasium as gym

    import env_registry
    from env_registry.registration import register_all

    root = tmp_path / "registry"
    put(root)
    register_all(root)
    assert env_registry  # imported for its registration side effect
    env = gym.make("trace/tiny_cancel-v0", sandbox=BACKEND, registry_root=str(root))
    try:
        env.reset(seed=3)
        observation, *_ = env.step("[" * 5000)  # plain text to the simulated user
        assert observation.startswith("[user]")
        env.reset(seed=3)
        observation, *_ = env.step("<tool_call>" + "[" * 5000 + "</tool_call>")
        assert "nested more than 64 levels" in observation
        deep: list[object] = []
        cursor = deep
        for _ in range(5000):
            cursor.append([])
            cursor = cursor[0]  # type: ignore[assignment]
        observation, *_ = env.step({"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "x", "arguments": {"a": deep}}}]})
        assert "could not be encoded as JSON (RecursionError)" in observation
        cyclic: dict[str, object] = {}
        cyclic["self"] = cyclic
        observation, *_ = env.step(cyclic)
        assert "could not be encoded as JSON (ValueError)" in observation
    finally:
        env.close()


@pytest.mark.parametrize(
    "raised, words, code",
    [
        (PermissionError(errno.EACCES, "Permission denied", "/srv/envs/x"), "error: /srv/envs/x: permission denied; fix its permissions", 1),
        (OSError(errno.EIO, "Input/output error", "/srv/envs/y"), "error: /srv/envs/y: input/output error from the device", 1),
        (RuntimeError("surprise\nsecond line"), "internal error: RuntimeError: surprise second line (a bug: rerun with TRACE_FACTORY_DEBUG=1", 1),  # whole, on one line
        (KeyboardInterrupt(), None, 130),  # Ctrl-C: the conventional status, no traceback, no noise
    ],
)
def test_whatever_escapes_a_command_is_one_line_at_the_boundary(
    factory_main, monkeypatch: pytest.MonkeyPatch, raised: BaseException, words: str | None, code: int,
) -> None:
    from env_registry.registry import Registry

    def explode(self):  # noqa: ANN001, ANN202
        raise raised

    monkeypatch.setattr(Registry, "entries", explode)
    outcome = factory_main("envs", "list")
    assert outcome.code == code
    assert (words in one_line(outcome.stderr)) if words else "Traceback" not in outcome.stderr
