"""Every shipped blueprint passes the full validation gate on every real sandbox backend available."""

from __future__ import annotations

import pytest

from factory.blueprints import blueprint_names, blueprint_source
from factory.validation.gate import Gate, validate_source
from sandbox import available_backends

BACKENDS = available_backends()


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
@pytest.mark.parametrize("name", blueprint_names())
def test_blueprint_passes_gate(name: str, backend: str) -> None:
    if BACKENDS.get(backend) is not None:
        pytest.skip(f"{backend} unavailable: {BACKENDS[backend]}")
    report = validate_source(blueprint_source(name), Gate(backend=backend))
    assert report.backend == backend
    assert report.passed, [(c.name, c.figure, c.message) for c in report.failures()]
    assert all(not c.skipped for c in report.checks)
