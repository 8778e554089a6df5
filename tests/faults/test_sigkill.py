"""Fault injection: `factory build`, and a process holding a gym env, killed with SIGKILL at several points,
on bwrap and on Docker. After the next `factory` command: no partial registry version, no container or
process of ours running, no temp folder or lease left (issue 14, "Done when").

Every assertion is scoped to what this test created: the killed process gets its own temp dir (``TMPDIR``:
bwrap roots live there and appear in bwrap's command line), its own runtime dir (leases) and registry; the
containers, cgroups and dirs it opened are read from its leases before the kill. Other engineers' sandboxes
on this machine are never looked at.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from env_registry.registry import Registry
from factory.testing.llm_server import ScriptedLLMServer
from sandbox import available_backends
from tests.faults.leftover_probes import mounts_under, sandbox_cgroups
from trace_env.loader import load_env

REPO = Path(__file__).resolve().parents[2]
TINY = (REPO / "tests" / "envs" / "tiny_cancel.py").read_text()
BACKENDS = [b for b in ("bwrap", "docker") if available_backends().get(b) is None]
FAST = ["--set", "solvability_seeds=8", "--set", "necessity_seeds=8", "--set", "diversity_seeds=12",
        "--set", "fuzz_examples=5", "--set", "grpo_seeds=3"]
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not BACKENDS, reason="needs bwrap or docker")]


class Scene:
    """A private TMPDIR, runtime dir and registry, and the environment every process of the test gets."""

    def __init__(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="trace-fault-", dir="/tmp"))
        os.chmod(self.tmp, 0o755)  # bwrap's sandbox uid traverses it to reach the work dir
        self.runtime = self.tmp / "runtime"
        self.registry = self.tmp / "registry"
        self.env = {
            **{k: v for k, v in os.environ.items() if k != "TRACE_FACTORY_UNSAFE_INPROCESS"},
            "TMPDIR": str(self.tmp), "TRACE_SANDBOX_RUNTIME_DIR": str(self.runtime),
            "TRACE_FACTORY_REGISTRY": str(self.registry), "TRACE_FACTORY_CACHE": str(self.tmp / "cache"),
            "TRACE_FACTORY_BUILDS": str(self.tmp / "builds"), "OPENAI_API_KEY": "sk-test-not-real",
            "PYTHONPATH": str(REPO),
        }

    def leases(self) -> list[dict]:
        found = []
        for path in (self.runtime / "leases").glob("*.json"):
            try:
                found.append(json.loads(path.read_text()))
            except (OSError, ValueError):
                continue
        return found

    def factory(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "factory.cli", *args], env=self.env, cwd=REPO,
                              capture_output=True, text=True, timeout=timeout)


def wait_for(condition, timeout: float, process: subprocess.Popen) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        if process.poll() is not None:
            return False
        time.sleep(0.02)
    return False


def kill_and_check(scene: Scene, process: subprocess.Popen, seen: list[dict]) -> dict:
    """SIGKILL ``process``, run the next command, and check that nothing of ours is left."""
    seen = seen + [d for d in scene.leases() if d not in seen]
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    after_kill = _ours_running(scene, seen)
    nxt = scene.factory("envs", "list", "--json")
    assert "Traceback" not in nxt.stderr, nxt.stderr
    left = {
        "leases": [d["name"] for d in scene.leases()],
        "processes": _processes(scene),
        "containers": _containers(seen),
        "cgroups": sandbox_cgroups([lease["name"] for lease in seen]),  # found by name: a lease may not list them yet
        "volumes": _volumes(seen),  # Docker work volumes and the workers' FIFO (channels) volumes
        "dirs": sorted(p.name for p in scene.tmp.glob("trace-sbx-*")) + sorted(p.name for p in scene.tmp.glob("trace-unsafe-*")),
        "mounts": mounts_under(scene.tmp),
    }
    assert left == {"leases": [], "processes": [], "containers": [], "cgroups": [], "volumes": [], "dirs": [],
                    "mounts": []}, left
    _no_partial_version(scene.registry)
    return {"sandboxes": len(seen), "running_right_after_kill": after_kill}


def _processes(scene: Scene) -> list[str]:
    r = subprocess.run(["pgrep", "-af", str(scene.tmp)], capture_output=True, text=True)
    return [line for line in r.stdout.splitlines() if "pgrep" not in line]


def _containers(leases: list[dict]) -> list[str]:
    names = [d["container"] for d in leases if d.get("container")]
    if not names:
        return []
    r = subprocess.run(["docker", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True)
    return sorted(set(names) & set(r.stdout.split()))


def _volumes(leases: list[dict]) -> list[str]:
    names = {n for d in leases if d.get("volume") for n in (d["volume"], f"{d['volume']}-channels")}
    if not names:
        return []
    r = subprocess.run(["docker", "volume", "ls", "--format", "{{.Name}}"], capture_output=True, text=True)
    return sorted(names & set(r.stdout.split()))


def _ours_running(scene: Scene, leases: list[dict]) -> int:
    return len(_processes(scene)) + len(_containers(leases))


def _no_partial_version(root: Path) -> None:
    """Every version a reader can see is whole: it loads, with its manifest and source."""
    registry = Registry(root)
    for capability in registry.capabilities():
        for version in registry.versions(capability):
            stored = registry.get(capability, version)
            assert stored.source and stored.manifest.version == version


KILL_POINTS = {
    "sandbox opened": lambda scene, t0: bool(scene.leases()),
    "mid-gate": lambda scene, t0: bool(scene.leases()) and time.monotonic() - t0 > 2.0,
    "registering": lambda scene, t0: scene.registry.exists() and any(
        p.is_dir() for p in scene.registry.iterdir()),  # a staging or capability dir (not the lock file)
}


@pytest.fixture
def scene():  # type: ignore[no-untyped-def]
    made = Scene()
    yield made
    shutil.rmtree(made.tmp, ignore_errors=True)


@pytest.mark.parametrize("point", list(KILL_POINTS))
@pytest.mark.parametrize("backend", BACKENDS)
def test_build_killed_leaves_nothing_behind(scene: Scene, backend: str, point: str) -> None:
    fenced = f"Here it is.\n\n```python\n{TINY}```\n"
    with ScriptedLLMServer(lambda request: fenced) as server:
        process = subprocess.Popen(
            [sys.executable, "-m", "factory.cli", "build", "-c", "tiny_cancel", "--description", "Cancel only refundable reservations.",
             "--target", "tau2-airline", "--llm", "openai:gpt-4.1", "--llm-base-url", server.openai_base_url,
             "--sandbox", backend, "--json", *FAST],
            env=scene.env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        seen: list[dict] = []
        started = [0.0]

        def reached() -> bool:
            for lease in scene.leases():
                if lease not in seen:
                    seen.append(lease)
                    started[0] = started[0] or time.monotonic()
            return KILL_POINTS[point](scene, started[0] or time.monotonic())

        hit = wait_for(reached, 180, process)
        if not hit:  # the build finished first: then it must have closed everything by itself
            process.wait(timeout=60)
        result = kill_and_check(scene, process, seen)
    print(f"\nFIGURE sigkill build [{backend}] at {point}: reached={hit}, {result}")
    assert seen, "the build never opened a sandbox: the kill point was not reached"


HOLDER = """
import time, gymnasium as gym, env_registry
env = gym.make("trace/tiny_cancel-v0")
env.reset(seed=1)
print("ready", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_process_holding_a_gym_env_killed_leaves_nothing_behind(scene: Scene, backend: str) -> None:
    env = load_env(TINY)
    Registry(scene.registry).put(TINY, capability=env.capability, target=env.target, tools=env.tools(), max_steps=env.max_steps)
    process = subprocess.Popen([sys.executable, "-c", HOLDER], env={**scene.env, "TRACE_FACTORY_SANDBOX": backend},
                               cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"
    seen = scene.leases()
    assert len(seen) == 1 and seen[0]["backend"] == backend
    result = kill_and_check(scene, process, seen)
    print(f"\nFIGURE sigkill gym holder [{backend}]: {result}")
