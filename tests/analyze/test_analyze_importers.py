"""Importers read files in the exact shapes τ²-bench and τ-bench write, and reject bad ones with a clear
message naming the file, the record and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from factory.analyze.calls import agent_calls
from factory.analyze.errors import TrajectoryFormatError
from factory.analyze.errors import AnalyzeInputError
from factory.analyze.importers import load_trajectories, write_jsonl
from factory.analyze.tasks import embedded_task, load_tasks

NOW = "2025-06-10T12:00:00.000000"


def tau2_message(role, content=None, turn=0, **extra):
    message = {"role": role, "content": content, "turn_idx": turn, "timestamp": NOW}
    if role in ("assistant", "user"):
        message.update({"tool_calls": None, "cost": 0.0 if role == "assistant" else None, "usage": None, "raw_data": None})
    message.update(extra)
    return message


def tau2_simulation(sim_id: str, task_id: str, trial: int, reward: float, cancel: bool) -> dict:
    messages = [
        tau2_message("assistant", "Hi! How can I help you today?", 0),
        tau2_message("user", "I want to cancel reservation EHGLP3. My user id is emma_kim_9957.", 1),
        tau2_message("assistant", None, 2, tool_calls=[
            {"id": "call_a1", "name": "get_reservation_details", "arguments": {"reservation_id": "EHGLP3"}, "requestor": "assistant"}
        ]),
        {"id": "call_a1", "role": "tool", "content": '{"reservation_id": "EHGLP3", "insurance": "no"}', "requestor": "assistant", "error": False, "turn_idx": 3, "timestamp": NOW},
    ]  # fmt: skip
    if cancel:
        messages += [
            tau2_message("assistant", None, 4, tool_calls=[
                {"id": "call_a2", "name": "cancel_reservation", "arguments": {"reservation_id": "EHGLP3"}, "requestor": "assistant"}
            ]),
            {"id": "call_a2", "role": "tool", "content": "Error: reservation cannot be cancelled", "requestor": "assistant", "error": True, "turn_idx": 5, "timestamp": NOW},
        ]  # fmt: skip
    messages += [tau2_message("assistant", "I'm sorry, this reservation cannot be cancelled.", 6), tau2_message("user", "###STOP###", 7)]
    return {
        "id": sim_id, "task_id": task_id, "timestamp": NOW, "start_time": NOW, "end_time": NOW, "duration": 12.5,
        "termination_reason": "user_stop", "agent_cost": 0.01, "user_cost": 0.002,
        "reward_info": {
            "reward": reward,
            "db_check": {"db_match": reward == 1.0, "db_reward": reward},
            "env_assertions": None, "action_checks": None, "nl_assertions": None,
            "communicate_checks": [], "reward_basis": ["DB", "COMMUNICATE"],
            "reward_breakdown": {"DB": reward, "COMMUNICATE": 1.0}, "info": None,
        },
        "messages": messages, "trial": trial, "seed": 300 + trial,
    }  # fmt: skip


TASK0 = {
    "id": "0",
    "description": {"purpose": "refuse an ineligible cancellation", "relevant_policies": None, "notes": None},
    "user_scenario": {"persona": None, "instructions": {"task_instructions": "...", "domain": "airline", "reason_for_call": "cancel EHGLP3", "known_info": "You are Emma Kim.", "unknown_info": None}},
    "initial_state": None,
    "evaluation_criteria": {"actions": [{"action_id": "0_0", "name": "get_reservation_details", "arguments": {"reservation_id": "EHGLP3"}, "info": None}], "communicate_info": [], "nl_assertions": ["Agent refuses."], "reward_basis": ["DB", "COMMUNICATE"]},
    "annotations": None,
}  # fmt: skip


def tau2_results(simulations: list[dict]) -> dict:
    return {
        "timestamp": NOW,
        "info": {
            "git_commit": "37199f36", "num_trials": 2, "max_steps": 200, "max_errors": 10,
            "user_info": {"implementation": "user_simulator", "llm": "gpt-4.1", "llm_args": {"temperature": 0.0}, "global_simulation_guidelines": "..."},
            "agent_info": {"implementation": "llm_agent", "llm": "gpt-4.1-mini", "llm_args": {"temperature": 0.0}},
            "environment_info": {"domain_name": "airline", "policy": "# Airline policy ...", "tool_defs": None},
            "seed": 300,
        },
        "tasks": [TASK0],
        "simulations": simulations,
    }  # fmt: skip


@pytest.fixture
def tau2_file(tmp_path: Path) -> Path:
    path = tmp_path / "gpt-4.1-mini_airline.json"
    sims = [tau2_simulation("0b2f-1", "0", 0, 1.0, cancel=False), tau2_simulation("0b2f-2", "0", 1, 0.0, cancel=True)]
    path.write_text(json.dumps(tau2_results(sims)))
    return path


def test_tau2_results_file(tau2_file: Path):
    result = load_trajectories([tau2_file])
    ok, bad = result.trajectories
    # ids always name their source file, even when only one file is read
    label = "gpt-4.1-mini_airline"
    assert (ok.id, ok.task_id, ok.target, ok.success, ok.reward, ok.source) == (f"{label}:0#0", "0", "tau2-airline", True, 1.0, "tau2")
    assert (bad.id, bad.success, bad.reward) == (f"{label}:0#1", False, 0.0)
    task = embedded_task(bad)
    assert [(a.name, a.arguments) for a in task.gold_actions] == [("get_reservation_details", {"reservation_id": "EHGLP3"})]
    assert task.instructions["reason_for_call"] == "cancel EHGLP3" and task.origin == str(tau2_file)
    assert bad.metadata["agent_llm"] == "gpt-4.1-mini" and bad.metadata["termination_reason"] == "user_stop"
    assert bad.metadata["source_file"] == str(tau2_file) and bad.metadata["record"] == "simulations[1]"
    assert bad.metadata["reward_detail"] == {"breakdown": {"DB": 0.0, "COMMUNICATE": 1.0}, "db_match": False}
    calls = agent_calls(bad)
    assert [(c.name, c.arguments, c.error) for c in calls] == [
        ("get_reservation_details", {"reservation_id": "EHGLP3"}, False),
        ("cancel_reservation", {"reservation_id": "EHGLP3"}, True),
    ]
    tool = bad.messages[3]
    assert (tool.role, tool.tool_call_id, tool.name) == ("tool", "call_a1", "get_reservation_details")


def test_tau2_dir_format_and_single_simulation(tmp_path: Path):
    folder = tmp_path / "run"
    (folder / "simulations").mkdir(parents=True)
    meta = tau2_results([])
    del meta["simulations"]
    meta["simulation_index"] = [{"id": "s1", "task_id": "0", "trial": 0, "reward": 0.0}]
    (folder / "results.json").write_text(json.dumps(meta))
    (folder / "simulations" / "s1.json").write_text(json.dumps(tau2_simulation("s1", "0", 0, 0.0, cancel=True)))
    (traj,) = load_trajectories([folder]).trajectories
    assert traj.target == "tau2-airline" and not traj.success and embedded_task(traj) is not None
    assert traj.id == "run:0#0"
    (single,) = load_trajectories([folder / "simulations" / "s1.json"]).trajectories
    assert single.id == "s1:0#0" and single.target == "tau2"


def test_tau2_multi_tool_message_is_flattened(tmp_path: Path):
    sim = tau2_simulation("m1", "0", 0, 1.0, cancel=False)
    sim["messages"][2]["tool_calls"].append({"id": "call_a9", "name": "get_user_details", "arguments": {"user_id": "emma_kim_9957"}, "requestor": "assistant"})
    sim["messages"][3] = {"role": "tool", "tool_messages": [
        {"id": "call_a1", "role": "tool", "content": "{}", "requestor": "assistant", "error": False},
        {"id": "call_a9", "role": "tool", "content": "Error: user not found", "requestor": "assistant", "error": True},
    ]}  # fmt: skip
    path = tmp_path / "r.json"
    path.write_text(json.dumps(tau2_results([sim])))
    (traj,) = load_trajectories([path]).trajectories
    calls = agent_calls(traj)
    assert [(c.name, c.error) for c in calls] == [("get_reservation_details", False), ("get_user_details", True)]


TAU_BENCH_TOOL_CALLING = [
    {
        "task_id": 3,
        "reward": 0.0,
        "info": {
            "task": {"user_id": "omar_davis_3817", "actions": [
                {"name": "get_user_details", "kwargs": {"user_id": "omar_davis_3817"}},
                {"name": "cancel_pending_order", "kwargs": {"order_id": "#W2575533", "reason": "no longer needed"}},
            ], "instruction": "You are Omar ...", "outputs": []},
            "source": "user", "user_cost": 0.01,
            "reward_info": {"reward": 0.0, "info": {"r_actions": False, "gt_data_hash": "abc"}, "actions": []},
        },
        "traj": [
            {"role": "system", "content": "# Retail agent policy ..."},
            {"role": "user", "content": "Hi, cancel my order #W2575533"},
            {"content": None, "role": "assistant", "tool_calls": [{"function": {"arguments": "{\"user_id\": \"omar_davis_3817\"}", "name": "get_user_details"}, "id": "call_x1", "type": "function"}], "function_call": None},
            {"role": "tool", "tool_call_id": "call_x1", "name": "get_user_details", "content": "{\"user_id\": \"omar_davis_3817\"}"},
            {"content": "Done! Anything else?", "role": "assistant", "tool_calls": None, "function_call": None},
            {"role": "user", "content": "###STOP###"},
        ],
        "trial": 0,
    },
    {"task_id": 4, "reward": 0.0, "info": {"error": "litellm.APIError", "traceback": "..."}, "traj": [], "trial": 0},
]  # fmt: skip

TAU_BENCH_REACT = [
    {
        "task_id": 7, "reward": 1.0, "trial": 1,
        "info": {"task": {"user_id": "u", "actions": [{"name": "get_order_details", "kwargs": {"order_id": "#W1"}}], "instruction": "", "outputs": []}},
        "traj": [
            {"role": "system", "content": "policy"},
            {"role": "user", "content": "where is order #W1?"},
            {"role": "assistant", "content": "Thought:\nlook it up\nAction:\n{\"name\": \"get_order_details\", \"arguments\": {\"order_id\": \"#W1\"}}"},
            {"role": "user", "content": "API output: {\"order_id\": \"#W1\", \"status\": \"delivered\"}"},
            {"role": "assistant", "content": "Thought:\nanswer\nAction:\n{\"name\": \"respond\", \"arguments\": {\"content\": \"It was delivered.\"}}"},
            {"role": "user", "content": "###STOP###"},
        ],
    }
]  # fmt: skip


def test_tau_bench_tool_calling_file(tmp_path: Path):
    path = tmp_path / "tool-calling-gpt-4o-0.0_range_0--1.json"
    path.write_text(json.dumps(TAU_BENCH_TOOL_CALLING))
    result = load_trajectories([path])
    (traj,) = result.trajectories
    assert len(result.skipped) == 1 and "run errored" in result.skipped[0]
    label = "tool-calling-gpt-4o-0.0_range_0--1"
    assert (traj.id, traj.task_id, traj.target, traj.success, traj.source) == (f"{label}:3#0", "3", "tau-bench-retail", False, "tau-bench")
    task = embedded_task(traj)
    assert (task.gold_actions[1].name, task.gold_actions[1].arguments) == ("cancel_pending_order", {"order_id": "#W2575533", "reason": "no longer needed"})
    assert task.user_id == "omar_davis_3817" and task.instructions == {"instruction": "You are Omar ..."}
    (call,) = agent_calls(traj)
    assert (call.name, call.arguments, call.result) == ("get_user_details", {"user_id": "omar_davis_3817"}, '{"user_id": "omar_davis_3817"}')
    # τ-bench's own tools: it has `think`, and no get_item_details
    assert "think" in traj.metadata["tools"] and "get_item_details" not in traj.metadata["tools"]


def test_tau_bench_react_file(tmp_path: Path):
    path = tmp_path / "react.json"
    path.write_text(json.dumps(TAU_BENCH_REACT))
    (traj,) = load_trajectories([path]).trajectories
    (call,) = agent_calls(traj)
    assert (call.name, call.arguments, call.result) == ("get_order_details", {"order_id": "#W1"}, '{"order_id": "#W1", "status": "delivered"}')
    assert traj.success and traj.messages[-2].content == "It was delivered."


def test_our_jsonl_roundtrip_and_id_clashes(tmp_path: Path, tau2_file: Path):
    trajectories = load_trajectories([tau2_file]).trajectories
    write_jsonl(trajectories, tmp_path / "a.jsonl")
    write_jsonl(trajectories, tmp_path / "b.jsonl")
    loaded = load_trajectories([tmp_path / "a.jsonl", tmp_path / "b.jsonl"]).trajectories
    assert [t.id for t in loaded] == ["a:gpt-4.1-mini_airline:0#0", "a:gpt-4.1-mini_airline:0#1", "b:gpt-4.1-mini_airline:0#0", "b:gpt-4.1-mini_airline:0#1"]
    assert loaded[0].metadata["source_file"] == str(tmp_path / "a.jsonl")
    assert loaded[1].messages == trajectories[1].messages


def test_jsonl_records_may_hold_unicode_line_separators(tmp_path: Path, tau2_file: Path):
    """JSON leaves U+2028, U+0085 and \\x1c unescaped inside strings; only \\n ends a JSON Lines record."""
    trajectories = load_trajectories([tau2_file]).trajectories
    last = trajectories[0].messages[-1].model_copy(update={"content": "one\u2028two\x85three\x1cfour"})
    trajectories[0] = trajectories[0].model_copy(update={"messages": [*trajectories[0].messages[:-1], last]})
    write_jsonl(trajectories, tmp_path / "odd.jsonl")
    (tmp_path / "crlf.jsonl").write_bytes((tmp_path / "odd.jsonl").read_bytes().replace(b"\n", b"\r\n"))
    for name in ("odd.jsonl", "crlf.jsonl"):
        loaded = load_trajectories([tmp_path / name]).trajectories
        assert len(loaded) == 2 and loaded[0].messages[-1].content == "one\u2028two\x85three\x1cfour"


def test_ids_tell_files_with_the_same_name_apart(tmp_path: Path, tau2_file: Path):
    (tmp_path / "run1").mkdir()
    (tmp_path / "run2").mkdir()
    for run in ("run1", "run2"):
        (tmp_path / run / "results.json").write_text(tau2_file.read_text())
    loaded = load_trajectories([tmp_path / "run1" / "results.json", tmp_path / "run2" / "results.json"]).trajectories
    assert [t.id for t in loaded] == ["run1/results:0#0", "run1/results:0#1", "run2/results:0#0", "run2/results:0#1"]


@pytest.mark.parametrize(("reward", "problem"), [("NaN", "nan is not a finite number"), ("Infinity", "inf is not a finite number"), (1.5, "1.5 is out of range")])
def test_a_bad_reward_is_one_line_naming_file_record_and_field(tmp_path: Path, reward, problem):
    sims = [tau2_simulation("ok", "0", 0, 1.0, False), tau2_simulation("odd", "0", 1, 0.0, False)]
    text = json.dumps(tau2_results(sims)).replace('"reward": 0.0,', f'"reward": {json.dumps(reward) if isinstance(reward, float) else reward},', 1)
    path = tmp_path / "results.json"
    path.write_text(text)
    with pytest.raises(TrajectoryFormatError) as info:
        load_trajectories([path])
    assert str(info.value) == f"{path}: simulations[1] (id 'odd'): field reward_info.reward: {problem}; a reward must be between 0 and 1"
    jsonl = tmp_path / "ours.jsonl"
    jsonl.write_text('{"id": "a", "target": "t", "task_id": "1", "messages": [], "reward": NaN, "success": false}\n')
    with pytest.raises(TrajectoryFormatError, match=r"ours\.jsonl: line 1 \(id 'a'\): field reward: nan is not a finite number"):
        load_trajectories([jsonl])


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{\"simulations\": [", r"bad\.json: not valid JSON \(Expecting value at line 1 column 18\)"),
        ("42", r"bad\.json: unrecognised JSON int"),
        ("[1, 2]", r"bad\.json: record \[0\]: unrecognised JSON list"),
    ],
)
def test_corrupt_files_name_the_file(tmp_path: Path, content: str, expected: str):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(TrajectoryFormatError, match=expected):
        load_trajectories([path])


def test_bad_records_name_record_and_field(tmp_path: Path):
    sims = [tau2_simulation("ok", "0", 0, 1.0, False), tau2_simulation("broken", "0", 1, 0.0, True)]
    sims[1]["messages"][2]["tool_calls"][0]["arguments"] = "reservation EHGLP3"
    path = tmp_path / "results.json"
    path.write_text(json.dumps(tau2_results(sims)))
    with pytest.raises(TrajectoryFormatError) as info:
        load_trajectories([path])
    assert str(info.value) == (
        f"{path}: simulations[1] (id 'broken'): messages[2].tool_calls[0].arguments: Input should be a valid dictionary"
        " (got 'reservation EHGLP3')"
    )

    runs = json.loads(json.dumps(TAU_BENCH_TOOL_CALLING))
    runs[0]["traj"][2]["role"] = "robot"
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps(runs))
    with pytest.raises(TrajectoryFormatError, match=r"bench\.json: record \[0\] \(task_id 3\): traj\[2\]\.role: Input should be"):
        load_trajectories([bench])

    jsonl = tmp_path / "ours.jsonl"
    jsonl.write_text('{"id": "a", "target": "t", "task_id": "1", "messages": [], "reward": 1.5, "success": true}\n')
    with pytest.raises(TrajectoryFormatError, match=r"ours\.jsonl: line 1 \(id 'a'\): field reward: 1\.5 is out of range"):
        load_trajectories([jsonl])
    jsonl.write_text("\n{oops\n")
    with pytest.raises(TrajectoryFormatError, match=r"ours\.jsonl: line 2: not valid JSON"):
        load_trajectories([jsonl])


def test_missing_file(tmp_path: Path):
    with pytest.raises(TrajectoryFormatError, match="nope.json: no such file"):
        load_trajectories([tmp_path / "nope.json"])


def test_tasks_file_loading(task_files, tmp_path: Path):
    index = load_tasks(task_files)
    assert len(index) == 164
    assert [a.name for a in index.lookup("retail", "10").gold_actions][-1] == "transfer_to_human_agents"
    assert index.lookup("airline", "0").gold_actions == []  # a refusal task: no gold action at all
    assert index.lookup("airline", "0").user_id == "emma_kim_9957"
    bad = tmp_path / "tasks.json"
    bad.write_text('[{"id": "1", "evaluation_criteria": {"actions": [{"arguments": {}}]}}]')
    with pytest.raises(AnalyzeInputError, match=r"tasks\.json: task '1': field evaluation_criteria\.actions: malformed"):
        load_tasks([bad])
