"""The ``factory serve`` Docker image (``factory serve --build-image``, built offline): OpenEnv's own client, two
sessions at once against the container, gets what gym.make gives on the same seeds and turns; env code runs in
the bwrap sandbox inside the container, the registry is mounted read-only.

The build runs in the ``.venv-openenv`` interpreter (it has the openenv extra) and is skipped when an image of the
same sources already has the tag (``--if-missing``). The container uses the host's network: this CI's dockerd
runs without a bridge (scripts/sandbox-services.sh), so ``-p`` publishing is not available here.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from factory.serve_image import DEFAULT_TAG, RUN_FLAGS
from tests.conftest import REPO_ROOT
from tests.integrations.test_openenv import PYTHON, client_gets_what_gym_gives, wait_healthy


def _docker_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


pytestmark = [
    pytest.mark.skipif(PYTHON is None, reason="no OpenEnv interpreter: run `bash scripts/setup.sh --dev` (makes .venv-openenv)"),
    pytest.mark.skipif(not _docker_answers(), reason="no docker daemon answers (scripts/sandbox-services.sh starts one)"),
]
TAG = os.environ.get("TRACE_SERVE_IMAGE", DEFAULT_TAG)
CHILD_ENV = {**{k: v for k, v in os.environ.items() if k != "TRACE_FACTORY_UNSAFE_INPROCESS"}, "PYTHONPATH": str(REPO_ROOT)}


@pytest.fixture(scope="module")
def image() -> str:
    assert PYTHON is not None
    result = subprocess.run([PYTHON, "-m", "factory.cli", "serve", "--build-image", "--if-missing", "--tag", TAG, "--json"],
                            capture_output=True, text=True, timeout=600, env=CHILD_ENV, cwd=REPO_ROOT)
    if result.returncode != 0:
        pytest.skip(" ".join(result.stderr.split())[-300:] or f"serve image build exited {result.returncode}")
    return TAG


@pytest.fixture
def served(image: str, tiny_id: str, integration_registry: Path) -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    name = f"trace-serve-test-{os.getpid()}-{port}"
    run = ["docker", "run", "-d", "--rm", "--name", name, "--network", "host", *RUN_FLAGS,
           "-v", f"{integration_registry}:/registry:ro", image, tiny_id, "--port", str(port), "--max-sessions", "2"]
    started = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert started.returncode == 0, started.stderr
    url = f"http://127.0.0.1:{port}"

    def logs() -> str:
        shown = subprocess.run(["docker", "logs", name], capture_output=True, text=True, timeout=30)
        return shown.stdout + shown.stderr

    try:
        wait_healthy(url, "the serve container", logs)
        yield url
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, timeout=60)


def test_the_serve_image_gives_openenvs_client_what_gym_make_gives(served: str, tiny_id: str) -> None:
    client_gets_what_gym_gives(served, tiny_id, CHILD_ENV)
