"""The issue's bar, through the live τ² MCP servers: scripted:gold passes every airline and retail task of the
current task files, its gold replays hash as τ²-bench's did, and scripted:empty passes no task that needs a write.

Time budget: the two gold rollouts (164 episodes plus one gold replay per task) dominate, about a minute on
two idle cores; the empty rollouts reuse the gold replays through a shared cache.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from env_registry.targets.catalog import open_backend, resolve_target
from env_registry.targets.dbhash import AIRLINE, DBShape
from env_registry.targets.runner import GoldCache
from env_registry.targets.tasks import load_tasks
from factory.rollout.engine import Rollout, RolloutConfig
from factory.rollout.store import RolloutStore
from tests.targets.helpers import TAU2, requires_servers, shared_json

pytestmark = [requires_servers, pytest.mark.slow]
DOMAINS = ["airline", "retail"]


@pytest.fixture(scope="module")
def gold_cache() -> GoldCache:
    return GoldCache()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, gold_cache: GoldCache) -> dict[tuple[str, str], tuple[object, Path]]:
    out = {}
    for domain in DOMAINS:
        for policy in ("scripted:gold", "scripted:empty"):
            folder = tmp_path_factory.mktemp(f"{domain}-{policy.split(':')[1]}")
            config = RolloutConfig(target=f"tau2-{domain}", backend="mcp", policy=policy, out=folder, concurrency=4)
            out[(domain, policy)] = (Rollout(config, gold_cache=gold_cache).run(), folder)
    return out


def _gold(domain: str) -> dict:
    return shared_json(domain, "gold_hashes.json")


@pytest.mark.parametrize("domain", DOMAINS)
def test_gold_passes_every_task(runs, domain: str) -> None:
    summary, _ = runs[(domain, "scripted:gold")]
    tasks = load_tasks(TAU2 / domain / "tasks.json")
    assert (summary.tasks, summary.episodes, summary.errors) == (len(tasks), len(tasks), 0)
    assert summary.passed == len(tasks) and summary.pass_rate == 1.0 and summary.mean_reward == 1.0
    erring = sorted((tid for tid, g in _gold(domain)["tasks"]["tasks.json"].items() if g.get("errors")), key=int)
    assert list(summary.gold_errors) == erring  # the summary names the tasks whose gold actions err (retail: 15)
    to_judge = [t for t in tasks if t.evaluation_criteria.nl_assertions and "NL_ASSERTION" in t.reward_basis]
    assert summary.not_fully_judged == len(to_judge) and summary.not_judged_parts == ({"NL_ASSERTION": len(to_judge)} if to_judge else {})


@pytest.mark.parametrize("domain", DOMAINS)
def test_gold_replays_hash_as_tau2_did(runs, domain: str) -> None:
    """Every gold replay, computed here through the MCP server, equals the end-state hash τ²-bench 1.0.1 computed."""
    _, folder = runs[(domain, "scripted:gold")]
    expected = _gold(domain)["tasks"]["tasks.json"]
    trajectories = RolloutStore.load(folder)
    assert len(trajectories) == len(expected)
    for trajectory in trajectories:
        db = trajectory.metadata["reward_detail"]["db"]
        assert db["gold_hash"] == expected[trajectory.task_id]["final_hash"] == db["final_hash"], trajectory.task_id
        assert len(db["gold_errors"]) == len(expected[trajectory.task_id].get("errors", []))


def test_release_gold_actions_need_the_float_coercion() -> None:
    """The first release's airline tasks that send certificates of whole dollars (``50``, which τ²'s models
    store as ``50.0``): their replays match τ²'s hashes only with the type coercion."""
    release = load_tasks(TAU2 / "airline" / "tasks_release_2025-06-10.json")
    changed = [t for t in release if any(a.name == "send_certificate" and isinstance(a.arguments.get("amount"), int) for a in t.gold_actions)]
    assert len(changed) == 3
    expected = _gold("airline")["tasks"]["tasks_release_2025-06-10.json"]
    backend = open_backend(resolve_target("tau2-airline", backend="mcp"))
    try:
        for task in changed:
            assert backend.replay(task.gold_actions).hash == expected[task.id]["final_hash"], task.id
        backend.shape = DBShape(optional_null=AIRLINE.optional_null)  # the same, less the number coercion
        assert all(backend.replay(task.gold_actions).hash != expected[task.id]["final_hash"] for task in changed)
    finally:
        backend.close()


@pytest.mark.parametrize("domain", DOMAINS)
def test_empty_passes_no_task_that_needs_a_write(runs, domain: str) -> None:
    summary, folder = runs[(domain, "scripted:empty")]
    gold = _gold(domain)
    tasks = {t.id: t for t in load_tasks(TAU2 / domain / "tasks.json")}
    needs_write = {tid for tid, g in gold["tasks"]["tasks.json"].items() if g["final_hash"] != gold["initial_hash"]}
    passed = {t.task_id for t in RolloutStore.load(folder) if t.success}
    assert needs_write and not passed & needs_write
    must_say = {tid for tid, t in tasks.items() if "COMMUNICATE" in t.reward_basis and t.evaluation_criteria.communicate_info}
    assert passed == set(tasks) - needs_write - must_say  # doing nothing passes exactly the tasks that ask for nothing
    assert summary.errors == 0 and summary.passed == len(passed)
