"""The menu: descriptions, adapters and one successful reference trajectory per capability, played in the
sandbox (never in this process)."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from env_registry.registry import Registry
from router.errors import DemoError, RouterError
from router.evaluate import read_labels
from router.menu import build_menu, load_menu, save_menu
from schemas.capability import CapabilityReport
from tests.router.helpers import CAPABILITIES, variant_source


def test_each_demo_is_a_successful_reference_episode_from_the_sandbox(menu, gated_registry: Path) -> None:
    assert menu.capabilities == list(CAPABILITIES)
    for option in menu.options:
        demo = option.demo
        assert demo.gym_id == f"trace/{option.capability}-v0" and demo.reward >= 0.99
        assert [m.role for m in demo.messages[:3]] == ["system", "user", "assistant"]
        assert demo.messages[2].tool_calls[0].function.name == "get_reservation_details"
        assert option.description == CAPABILITIES[option.capability]  # from the env's manifest
        assert {t["function"]["name"] for t in demo.tools} == {"get_reservation_details", "cancel_reservation"}
    # env code never ran here: none of these envs was ever loaded as a module of this process (under the loader's
    # content name or the in-process runner's name; other tests in the same run may load other envs on purpose)
    for capability in CAPABILITIES:
        stored = Registry(gated_registry).get(capability)
        names = {f"trace_env_{hashlib.sha256(stored.source.encode()).hexdigest()[:12]}", f"trace_env_{capability}_v0"}
        assert not names & set(sys.modules), capability


def test_descriptions_from_the_analysis_win_and_order_the_menu(gated_registry: Path, adapter_dirs) -> None:
    report = CapabilityReport.model_validate(
        {
            "labeler": "offline", "runs": 1, "delta": 0.2, "coverage_threshold": 0.1, "min_runs": 1,
            "n_trajectories": 0, "n_successes": 0, "n_failures": 0,
            "capabilities": [{"name": "permission_error_recovery", "description": "Reads refusals and changes course.",
                              "stats": {"capability": "permission_error_recovery", "er_success": 0.0, "er_failure": 0.5, "gap": 0.5, "coverage": 0.3}}],
        }
    )  # fmt: skip
    menu = build_menu(adapters=adapter_dirs, report=report, registry=Registry(gated_registry))
    assert menu.capabilities[0] == "permission_error_recovery"  # the analysis' order first, then by name
    assert menu.capabilities[1:] == sorted(c for c in CAPABILITIES if c != "permission_error_recovery")
    assert menu.options[0].description == "Reads refusals and changes course."
    assert menu.adapters() == {k: str(v) for k, v in adapter_dirs.items()}


def test_a_reference_solution_that_fails_is_reported_by_env(tmp_path: Path) -> None:
    broken = variant_source("tiny_broken", "Never checks first.").replace(
        'turns = [sdk.call("get_reservation_details", reservation_id=rid)]', "turns = []"
    )
    registry = Registry(tmp_path)
    tools = [{"type": "function", "function": {"name": "get_reservation_details", "parameters": {"type": "object"}}}]
    # registered without the gate (which would refuse it), as an older or hand-placed env might be
    registry.put(broken, capability="tiny_broken", target="tau2-airline", tools=tools, max_steps=6, description="Never checks first.")
    with pytest.raises(DemoError, match=r"trace/tiny_broken-v0: its reference solution never reached reward 0.99 .*factory build tiny_broken"):
        build_menu(registry=registry)


def test_a_capability_without_an_env_says_how_to_build_it(gated_registry: Path) -> None:
    with pytest.raises(RouterError, match="no env registered for capability 'datetime_reasoning'.*factory build datetime_reasoning"):
        build_menu(registry=Registry(gated_registry), capabilities=["datetime_reasoning"])


def test_a_saved_menu_round_trips_and_a_corrupt_one_is_one_line(menu, tmp_path: Path) -> None:
    path = save_menu(menu, tmp_path / "menu.json")
    assert load_menu(path) == menu
    path.write_text('{"options": []}')
    with pytest.raises(RouterError, match="not a routing menu .*options"):
        load_menu(path)


def test_bad_label_files_name_the_line(tmp_path: Path) -> None:
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"run": 0, "trajectory_id": "a", "capability": "x_y", "label": "LACKING"}\n{"run": 0, "trajectory_id": "b"}\n')
    with pytest.raises(RouterError, match="line 2 is not a label"):
        read_labels(labels)
    labels.write_text('{"run": 1, "trajectory_id": "a", "capability": "x_y", "label": "LACKING"}\n')
    path, runs = read_labels(tmp_path)
    assert path == labels and len(runs) == 1 and runs[0][0].trajectory_id == "a"
