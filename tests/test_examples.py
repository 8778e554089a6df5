"""The example envs in examples/envs/ (what the README points users to) pass the full validation gate."""

from __future__ import annotations

from pathlib import Path

import pytest

import factory
from sandbox import available_backends

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples" / "envs").glob("*.py"))
BACKEND = "bwrap" if available_backends().get("bwrap") is None else "docker"


@pytest.mark.slow
@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_env_passes_the_gate(path: Path) -> None:
    source = path.read_text()
    assert "from trace_env.kits import" in source  # examples show the kits, not a hand-written world
    report = factory.validate(source, backend=BACKEND)
    assert report.passed, [(c.name, c.figure, c.message) for c in report.failures()]
    assert report.env_info["capability"] == path.stem
