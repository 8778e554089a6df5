"""The toolsandbox target against Apple's real ToolSandbox package, installed locally (never in CI).

The gold and empty policies run on a handful of base scenarios through ``factory rollout``'s engine; then
each scenario is played again by ToolSandbox's own ``Scenario.play_and_evaluate``, with ToolSandbox roles
that behave as those policies do (the reference agent, or an agent that ends at once; the scripted user),
and ToolSandbox's own evaluator must give the same similarity and the same perfect count
(``TOOLSANDBOX_REAL_ALL=1``: on every runnable base scenario instead of six). Also: the base scenarios are
counted and the RapidAPI ones skipped as the README says, and agent input never reaches ToolSandbox's
execution console except as JSON values of allowed tools.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("tool_sandbox") is None, reason="Apple's ToolSandbox is not installed (see README, 'ToolSandbox')"
)

SCENARIOS = [
    "cellular_off",  # one setting, one message
    "send_message_with_contact_content_cellular_off",  # a state dependency, a search, an addition
    "find_days_till_holiday_wifi_off",  # values filled from earlier tool results; guardrails on the order
    "remove_contact_by_phone_no_remove_contact_insufficient_information",  # insufficient information
    "search_message_with_recency_oldest",  # a milestone the reference cannot reach (search criteria left open)
    "turn_on_location_low_battery_mode_implicit",  # low battery mode blocks the radio
]
ALL = os.environ.get("TOOLSANDBOX_REAL_ALL") == "1"  # every runnable base scenario (about 4 min per policy on 2 cores)


def play_in_toolsandbox(name: str, policy: str, out: Path) -> float:
    """ToolSandbox's own play and evaluation of one scenario, with roles that act as our policy and user do."""
    from openai.types.chat.chat_completion_message_tool_call import ChatCompletionMessageToolCall, Function
    from tool_sandbox.common.execution_context import DatabaseNamespace, RoleType, get_current_context
    from tool_sandbox.common.message_conversion import Message, openai_tool_call_to_python_code
    from tool_sandbox.roles.base_role import BaseRole
    from tool_sandbox.roles.execution_environment import ExecutionEnvironment
    from tool_sandbox.tools.user_tools import end_conversation

    from env_registry.targets.toolsandbox_worker import load_scenarios, milestone_action, reference_order

    scenario = load_scenarios(False)[name]
    task_text = scenario.starting_context.get_database(DatabaseNamespace.SANDBOX, get_all_history_snapshots=True).filter(
        (scenario.starting_context.get_database(DatabaseNamespace.SANDBOX, get_all_history_snapshots=True)["recipient"] == RoleType.USER)
    )["content"][-1]

    class Agent(BaseRole):
        role_type = RoleType.AGENT

        def __init__(self) -> None:
            self.plan, self.traces, self.pending, self.turn = reference_order(scenario), {}, None, 0

        def respond(self, ending_index: int | None = None) -> None:
            messages = self.filter_messages(self.get_messages(ending_index=ending_index))
            if messages[-1].sender == RoleType.SYSTEM:
                return
            if self.pending is not None:
                tail = []
                for message in reversed(messages):
                    if message.sender != RoleType.EXECUTION_ENVIRONMENT:
                        break
                    tail = list(message.tool_trace or []) + tail
                self.traces[self.pending], self.pending = tail, None
            action = None
            while policy == "gold" and self.plan and action is None:
                index = self.plan.pop(0)
                action = milestone_action(scenario, index, self.traces, get_current_context())
            if action is None:  # our runner ends the episode when the agent stops; here the same end, from the agent's side
                end_conversation()
                return
            self.turn += 1
            if action.get("tool_calls"):
                self.pending = index
                tools = self.get_available_tools()
                sent = []
                for i, call in enumerate(action["tool_calls"]):
                    tool_call = ChatCompletionMessageToolCall(id=f"t{self.turn}_{i}", type="function",
                                                              function=Function(name=call["name"], arguments=json.dumps(call["arguments"])))
                    sent.append(Message(sender=RoleType.AGENT, recipient=RoleType.EXECUTION_ENVIRONMENT,
                                        content=openai_tool_call_to_python_code(tool_call, set(tools), execution_facing_tool_name=None),
                                        openai_tool_call_id=tool_call.id, openai_function_name=call["name"]))  # fmt: skip
                self.add_messages(sent)
            else:
                self.add_messages([Message(sender=RoleType.AGENT, recipient=RoleType.USER, content=action["content"])])

    class User(BaseRole):
        role_type = RoleType.USER

        def __init__(self) -> None:
            self.answers = 0

        def respond(self, ending_index: int | None = None) -> None:
            messages = self.filter_messages(self.get_messages(ending_index=ending_index))
            if messages[-1].sender == RoleType.SYSTEM:
                return
            if "?" in messages[-1].content and self.answers < 2:
                from tool_sandbox.scenarios.user_simulator_few_shot_examples import USER_INSTRUCTION

                self.answers += 1
                self.add_messages([Message(sender=RoleType.USER, recipient=RoleType.AGENT, content=task_text.removeprefix(USER_INSTRUCTION).strip())])
            else:
                self.add_messages([Message(sender=RoleType.USER, recipient=RoleType.EXECUTION_ENVIRONMENT, content="end_conversation()")])

    roles = {RoleType.AGENT: Agent(), RoleType.USER: User(), RoleType.EXECUTION_ENVIRONMENT: ExecutionEnvironment()}
    result = scenario.play_and_evaluate(roles=roles, output_directory=out, scenario_name=name)
    return float(result.evaluation_result.similarity)


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["gold", "empty"])
def test_similarity_and_perfect_count_equal_toolsandbox_own_evaluation(policy: str, tmp_path: Path) -> None:
    from factory.rollout.engine import Rollout, RolloutConfig
    from factory.rollout.store import RolloutStore

    config = RolloutConfig(target="toolsandbox", policy=f"scripted:{policy}", out=tmp_path / "run", task_ids=None if ALL else SCENARIOS, concurrency=2)
    summary = Rollout(config).run()
    ours = {t.task_id: t for t in RolloutStore.load(tmp_path / "run")}
    names = sorted(ours) if ALL else SCENARIOS
    theirs = {name: play_in_toolsandbox(name, policy, tmp_path / "toolsandbox") for name in names}
    assert summary.errors == 0 and len(ours) == len(names)
    for name in names:
        assert ours[name].reward == pytest.approx(theirs[name], abs=1e-6), name
    perfect = sum(value >= 1 - 1e-9 for value in theirs.values())
    assert summary.passed == perfect and summary.mean_reward == pytest.approx(sum(theirs.values()) / len(names), abs=1e-4)
    if ALL:
        return
    if policy == "gold":  # the reference reaches every milestone but where a milestone leaves the call's arguments open
        assert perfect == len(SCENARIOS) - 1 and theirs["search_message_with_recency_oldest"] < 1
    else:
        assert perfect < len(SCENARIOS) and theirs["cellular_off"] == 0.0


def test_base_scenarios_are_counted_and_only_the_rapid_api_ones_are_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    from env_registry.targets import toolsandbox

    monkeypatch.delenv("RAPID_API_KEY", raising=False)
    monkeypatch.setattr(toolsandbox, "_LISTINGS", {})
    found = toolsandbox.listing(None, False)
    base = [t for t in found.tasks if not getattr(t, "augmented", False)]
    runnable, skipped = toolsandbox.runnable_tasks(None)
    assert len(found.tasks) == len(base) == 129  # the four base modules build no augmented scenario
    assert not any(toolsandbox.AUGMENTED.search(t.id) for t in base)
    assert skipped == {toolsandbox.skip_reason(found): 38} and len(found.needs_network) == 38
    assert len(runnable) == 91 and not {t.id for t in runnable} & set(found.needs_network)
    rapid = importlib.import_module("tool_sandbox.tools.rapid_api_search_tools")  # the tools that call RapidAPI
    assert all(tools and all(callable(getattr(rapid, tool, None)) for tool in tools) for tools in found.needs_network.values())

    monkeypatch.setenv("RAPID_API_KEY", "unused")  # a key makes them runnable: nothing is skipped then
    monkeypatch.setattr(toolsandbox, "_LISTINGS", {})
    runnable, skipped = toolsandbox.runnable_tasks(None)
    assert len(runnable) == 129 and skipped == {}


def test_agent_input_reaches_the_console_only_as_json_values_of_allowed_tools(tmp_path: Path) -> None:
    from env_registry.targets.catalog import resolve_target
    from env_registry.targets.toolsandbox_runner import ToolSandboxRunner

    marker = tmp_path / "pwned"
    episode = ToolSandboxRunner(resolve_target("toolsandbox"))
    try:
        episode.reset(0, task_id="cellular_off")
        hostile = {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"x = open({str(marker)!r}, 'w')\nx", "type": "function", "function": {"name": "set_cellular_service_status", "arguments": '{"on": false}'}},
            {"type": "function", "function": {"name": "open", "arguments": json.dumps({"file": str(marker), "mode": "w"})}},
            {"type": "function", "function": {"name": "remove_contact", "arguments": '{"person_id": "x"}'}},
            {"type": "function", "function": {"name": "set_cellular_service_status", "arguments": '{"on": NaN}'}},
        ]}  # fmt: skip
        result = episode.step(hostile)
    finally:
        episode.close()
    assert not marker.exists()
    tools = [m for m in result.info["new_messages"] if m["role"] == "tool"]
    assert [m["error"] for m in tools] == [False, True, True, True], tools
    assert "not available" in tools[1]["content"] and "not available" in tools[2]["content"]
    assert [m["tool_call_id"] for m in tools] == ["call_1_0", "call_1_1", "call_1_2", "call_1_3"]  # our ids, never the agent's
