"""``factory build --from-file PATH``: a user's own env module is registered once it passes the gate (issue 15 item 5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandbox import available_backends
from tests.conftest import TEST_ENVS
from tests.reliability.conftest import FAST_GATE, TINY, one_line

CHECKED = (TEST_ENVS.parent / "gate" / "envs" / "tiny_checked.py").read_text()  # tiny_cancel.py has a reward hole the gate finds

BACKEND = "bwrap" if available_backends().get("bwrap") is None else "docker"


@pytest.fixture
def module(tmp_path: Path) -> Path:
    path = tmp_path / "my_env.py"
    path.write_text(CHECKED)
    return path


def test_a_passing_file_is_registered_with_file_provenance(module: Path, registry_root: Path, factory_main) -> None:
    outcome = factory_main("build", "--from-file", str(module), "--capability", "tiny_cancel", "--sandbox", BACKEND, "--json", *FAST_GATE)
    assert outcome.code == 0, outcome.stderr
    data = json.loads(outcome.stdout)
    assert data["registered"] and data["gym_id"] == "trace/tiny_cancel-v0" and data["generator"] == "file"
    assert data["validation"] == "passed" and data["report"]["passed"] is True
    manifest = json.loads((registry_root / "tiny_cancel" / "v0" / "manifest.json").read_text())
    assert manifest["provenance"]["generator"] == "file" and manifest["provenance"]["file"] == str(module.resolve())
    assert (registry_root / "tiny_cancel" / "v0" / "env.py").read_text() == CHECKED
    shown = factory_main("envs", "show", "tiny_cancel")
    assert shown.code == 0 and f"file ({module.resolve()})" in shown.stdout.replace("\n", "").replace("│", "").replace("  ", "")


def test_a_file_that_fails_the_gate_is_not_registered(tmp_path: Path, registry_root: Path, factory_main) -> None:
    path = tmp_path / "sneaky.py"
    path.write_text("import os\n" + TINY)  # the static check refuses it at once
    outcome = factory_main("build", "--from-file", str(path), "--sandbox", BACKEND)
    assert outcome.code == 1
    assert "validation of sneaky.py" in outcome.stdout and "import of 'os' is not allowed" in outcome.stdout
    assert "tiny_cancel: not registered - the env failed validation" in outcome.stdout  # named as the module declares
    assert not registry_root.exists() or not any(registry_root.iterdir())


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--capability", "something_else"], "declares capability 'tiny_cancel', not 'something_else'"),
        (["--target", "tau2-retail"], "declares target 'tau2-airline', not 'tau2-retail'"),
        (["--target", "mars"], "unknown target 'mars'"),
        (["--llm", "openai:gpt-4.1"], "cannot be combined with --llm"),
        (["--all"], "cannot be combined with --all"),
    ],
)
def test_a_mismatched_request_is_refused_before_the_gate(module: Path, registry_root: Path, factory_main, extra: list[str], words: str) -> None:
    outcome = factory_main("build", "--from-file", str(module), *extra)
    line = one_line(outcome.stderr)
    assert outcome.code == 2 and words in line, line
