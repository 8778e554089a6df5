"""The ToolSandbox target's host side, against a fake worker built on our own phone kit (CI cannot install
Apple's package; tests/targets/test_toolsandbox_real.py runs the real one): the rollout engine, policies and
users over the worker protocol, the skip count, a dying worker, the missing-package message, the eval's
similarity and perfect figures with intervals, and their table, chart and JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from env_registry.targets.catalog import resolve_target
from env_registry.targets.mcp import parse_server
from env_registry.targets.toolsandbox import WORKER_FILE
from env_registry.targets.toolsandbox_runner import ToolSandboxRunner
from env_registry.targets.toolsandbox_users import LLMSandboxUser, user_prompt
from factory.cli import app
from llm_clients import make_client, parse_llm_spec
from factory.rollout.engine import Rollout, RolloutConfig
from factory.rollout.policies import Policy
from factory.rollout.store import RolloutStore
from factory.testing.llm_server import ScriptedLLMServer

FAKE = f"{sys.executable} {Path(__file__).resolve().parent / 'fake_toolsandbox_worker.py'}"
SKIP_REASON = "need RapidAPI over the network (set RAPID_API_KEY to run them)"
runner = CliRunner()


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAPID_API_KEY", raising=False)


def rollout(tmp_path: Path, policy: str | Policy, **kwargs: Any) -> tuple[Any, list[Any]]:
    spec = policy if isinstance(policy, str) else policy.spec
    config = RolloutConfig(target="toolsandbox", server=FAKE, policy=spec, out=tmp_path / "run", concurrency=2, **kwargs)
    summary = Rollout(config, policy=None if isinstance(policy, str) else policy).run()
    return summary, RolloutStore.load(tmp_path / "run")


def test_gold_reaches_every_milestone_and_the_network_scenario_is_skipped_and_counted(tmp_path: Path) -> None:
    summary, episodes = rollout(tmp_path, "scripted:gold", task_ids=None)
    by_task = {t.task_id: t for t in episodes}
    assert set(by_task) == {"wifi_on_fake", "text_fake", "crash_fake"}  # the augmented one is not a base scenario
    assert summary.skipped == {SKIP_REASON: 1}
    text = by_task["text_fake"]
    assert text.reward == 1.0 and text.success and text.metadata["reward_detail"]["evaluator"] == "toolsandbox"
    assert text.metadata["reward_detail"]["perfect"] is True and not by_task["wifi_on_fake"].metadata["reward_detail"].get("error")
    names = [c.function.name for m in text.messages if m.role == "assistant" for c in m.tool_calls or []]
    assert names == ["set_cellular_service_status", "search_contacts", "send_message_with_phone_number"]
    assert text.metadata["termination_reason"] == "user_stop"  # the scripted user ended it after the confirmation
    crashed = by_task["crash_fake"]  # the worker died at the first turn: an error, not a failure, and the others went on
    assert "infrastructure_error" in crashed.metadata and "exited (3)" in crashed.metadata["infrastructure_error"]
    assert (summary.passed, summary.failed, summary.errors) == (2, 0, 1)


def test_empty_policy_scores_what_the_evaluator_says_and_reruns_resume(tmp_path: Path) -> None:
    summary, episodes = rollout(tmp_path, "scripted:empty", task_ids=["wifi_on_fake", "text_fake"])
    assert [t.reward for t in episodes] == [0.0, 0.0] and summary.passed == 0 and summary.mean_reward == 0.0
    assert all(t.metadata["termination_reason"] == "agent_stop" and len(t.messages) == 2 for t in episodes)
    again, _ = rollout(tmp_path, "scripted:empty", task_ids=["wifi_on_fake", "text_fake"])
    assert again.resumed == 2 and again.ran == 0


class AskThenAct(Policy):
    """Asks the user a question, then turns wifi on, says so, and stops."""

    spec = "test:ask-then-act"

    def start(self, task: Any, tools: list[dict[str, Any]], seed: int) -> Any:
        script = iter(["Which setting do you mean?", {"role": "assistant", "content": None, "tool_calls": [
            {"type": "function", "function": {"name": "set_wifi_status", "arguments": json.dumps({"on": True})}}]},
            "Done: wifi is on now. ###STOP###"])  # fmt: skip
        return lambda messages: next(script)


def test_scripted_user_answers_a_question_with_its_task_and_a_partial_run_scores_partially(tmp_path: Path) -> None:
    summary, (episode,) = rollout(tmp_path, AskThenAct(), task_ids=["wifi_on_fake"])
    said = [(m.role, m.content) for m in episode.messages if m.content]
    assert ("user", "You want your wifi on.") in said  # the scripted user answered the question with its task
    assert said[-1] == ("assistant", "Done: wifi is on now.") and episode.metadata["termination_reason"] == "agent_stop"
    assert episode.reward == 1.0
    summary, (episode,) = rollout(tmp_path / "b", AskThenAct(), task_ids=["text_fake"])
    assert episode.reward == 0.0 and any(getattr(m, "error", False) for m in episode.messages if m.role == "tool")  # set_wifi_status is not offered there


def test_augmented_ids_load_the_augmented_scenarios_and_skipped_ids_are_refused(tmp_path: Path) -> None:
    summary, (episode,) = rollout(tmp_path, "scripted:gold", task_ids=["wifi_on_fake_3_distraction_tools"])
    assert episode.success
    result = runner.invoke(app, ["rollout", "--target", "toolsandbox", "--server", FAKE, "--policy", "scripted:gold",
                                 "--task-ids", "weather_fake", "--out", str(tmp_path / "x")])  # fmt: skip
    assert result.exit_code == 2 and "weather_fake need RapidAPI" in result.output and len(result.output.strip().splitlines()) == 1


def test_without_the_package_the_command_says_how_to_install_it_in_one_line(tmp_path: Path) -> None:
    worker = f"{sys.executable} -S {WORKER_FILE}"  # -S: no site-packages, so no ToolSandbox whatever is installed
    result = runner.invoke(app, ["rollout", "--target", "toolsandbox", "--server", worker, "--policy", "scripted:gold", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert "cannot import ToolSandbox" in result.output and "README" in result.output and len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "o" / "trajectories.jsonl").exists()


def test_llm_user_reads_toolsandbox_view_and_ends_with_its_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = resolve_target("toolsandbox", server=parse_server(FAKE))
    replies = ["The wifi, please.", '<tool_call>{"name": "end_conversation", "arguments": {}}</tool_call>']
    with ScriptedLLMServer(list(replies)) as server:
        monkeypatch.setenv("TRACE_LLM_BASE_URL", server.openai_base_url)
        client = make_client(parse_llm_spec("compat:user-model"), cache=False)
        episode = ToolSandboxRunner(spec, user=lambda task: LLMSandboxUser(client))
        try:
            episode.reset(0, task_id="wifi_on_fake")
            first = episode.step("Which setting do you mean?")
            assert not first.terminated and first.observation == "[user] The wifi, please."
            last = episode.step("I cannot do that.")
        finally:
            episode.close()
        requests = server.requests
    assert last.terminated and last.info["termination_reason"] == "user_stop" and last.reward == 0.0
    system = requests[0].body["messages"][0]["content"]
    assert "Your task: You want your wifi on." in system and '"name": "end_conversation"' in system


def test_user_prompt_alternates_roles_starting_with_user() -> None:
    system, dialogue = user_prompt(
        [{"role": "system", "content": "S"}, {"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"},
         {"role": "user", "content": "q"}], [{"type": "function", "function": {"name": "end_conversation"}}])  # fmt: skip
    assert system.startswith("S") and "end_conversation" in system
    assert [m["role"] for m in dialogue] == ["user", "assistant", "user"] and dialogue[1]["content"] == "a\n\nb"


def test_eval_reports_similarity_and_perfect_with_intervals_in_table_json_and_chart(tmp_path: Path) -> None:
    from factory.evaluate.charts import pass_rate_chart
    from factory.evaluate.render import columns, markdown, rows
    from factory.evaluate.schema import EvalReport
    from factory.evaluate.scores import arm_result, wilson

    gold, gold_runs = rollout(tmp_path / "g", "scripted:gold", task_ids=["wifi_on_fake", "text_fake"])
    empty, empty_runs = rollout(tmp_path / "e", "scripted:empty", task_ids=["wifi_on_fake", "text_fake"])
    from factory.rollout.summary import RolloutSummary

    tau2 = RolloutSummary(target="tau2-airline", policy="p", user="scripted", out="o", tasks=4, trials=1, episodes=4, passed=1, failed=3,
                          errors=0, pass_rate=0.25, mean_reward=0.25)  # fmt: skip
    arms = [arm_result("base", "base", "p", "f", [tau2, empty], trajectories={"toolsandbox": empty_runs}),
            arm_result("routed", "routed", "p", "f", [tau2, gold], trajectories={"toolsandbox": gold_runs})]  # fmt: skip
    assert arms[1].pass_rate == 0.25 and arms[1].scored == 4  # ToolSandbox stays out of the τ² overall
    sandbox = arms[1].domains[1]
    assert sandbox.mean_similarity == 1.0 and sandbox.similarity_ci == [1.0, 1.0] and sandbox.perfect_ci == wilson(2, 2)
    report = EvalReport(out=str(tmp_path), model="m", engine="hf", targets=["tau2-airline", "toolsandbox"], arms=arms)
    assert columns(report) == ["arm", "airline", "overall", "Δ base", "similarity", "perfect", "Δ sim"]
    routed = rows(report)[1]
    assert routed["similarity"] == "1.000 [1.00–1.00]" and routed["perfect"].startswith("2/2 [") and routed["Δ sim"] == "+1.000"
    assert "| routed |" in markdown(report) and "ToolSandbox was not evaluated" not in markdown(report)
    chart = pass_rate_chart(report, tmp_path / "chart.png")
    assert chart.stat().st_size > 5000
    assert json.loads(report.model_dump_json())["arms"][0]["domains"][1]["perfect_ci"] == wilson(0, 2)


def test_intervals_are_right() -> None:
    from factory.evaluate.scores import bootstrap_mean, wilson

    assert wilson(19, 129) == [0.0964, 0.2186]  # 19 of 129 perfect (the paper's base model): Wilson 95%, by hand
    assert wilson(0, 0) is None and bootstrap_mean([]) is None
    low, high = bootstrap_mean([0.0] * 50 + [1.0] * 50)
    assert 0.39 <= low < 0.5 < high <= 0.61
