"""An LLM-labeled analysis end to end: the real ``openai`` SDK against a scripted loopback server that plays
discovery and labeling, including a malformed reply that must be re-asked, then a rerun served from cache."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from factory.cli.analyze import analyze_command
from factory.analyze.importers import write_jsonl
from factory.testing.llm_server import RecordedRequest, ScriptedLLMServer, ScriptedReply
from schemas.capability import CapabilityReport

app = typer.Typer()
app.command("analyze")(analyze_command)


@app.callback()
def _root() -> None:
    """test app"""


NEW = "refund_eligibility_checking"


class AnalystScript:
    """Discovery proposes a new capability; labeling marks it LACKING exactly on failures. The first labeling
    request gets prose instead of JSON, so the labeler has to re-ask."""

    def __init__(self, outcomes: dict[str, bool]) -> None:
        self.outcomes = outcomes
        self.lock = threading.Lock()
        self.sent_garbage = False
        self.discovery_calls = 0
        self.retries_seen = 0

    def __call__(self, request: RecordedRequest) -> ScriptedReply:
        text = request.prompt_text()
        if "Your reply was invalid" in text:
            self.retries_seen += 1
        if "propose the capabilities" in text:
            self.discovery_calls += 1
            failures = re.findall(r"### Trajectory (\S+) \(task \S+, FAILURE", text)
            return ScriptedReply(text="```json\n" + json.dumps({"capabilities": [
                {"name": NEW, "description": "Checks refund eligibility before acting.", "example_failure_ids": failures[:2] + ["not-a-real-id"]},
                {"name": "precondition_verification", "description": "dup of a seed", "example_failure_ids": failures[:1]},
            ]}) + "\n```", input_tokens=3000, output_tokens=200)  # fmt: skip
        with self.lock:
            if not self.sent_garbage:
                self.sent_garbage = True
                return ScriptedReply(text="Sure! Here are my labels: all good.")
        prompt = next(m["content"] for m in request.body["messages"] if m["role"] == "user")  # the original, even on a retry
        ids = re.findall(r"### Trajectory (\S+) \(task", prompt)
        section = prompt.split("## Capabilities", 1)[1].split("## Trajectories", 1)[0]
        caps = re.findall(r"^- ([a-z][a-z0-9_]+): ", section, flags=re.MULTILINE)
        labels = []
        for tid in ids:
            for cap in caps:
                if cap == NEW:
                    label = "PRESENT" if self.outcomes[tid] else "LACKING"
                else:
                    label = "NA"
                labels.append({"trajectory_id": tid, "capability": cap, "label": label, "reason": "scripted"})
        return ScriptedReply(text=json.dumps({"labels": labels}), input_tokens=2000, output_tokens=400, delay_s=0.05)


@pytest.fixture
def small_set(injected_cases, tmp_path: Path) -> tuple[Path, dict[str, bool]]:
    chosen = [c.trajectory for c in injected_cases if c.trajectory.metadata["domain"] == "retail"][:16]
    assert {t.success for t in chosen} == {True, False}
    path = tmp_path / "small.jsonl"
    write_jsonl(chosen, path)
    return path, {f"small:{t.id}": t.success for t in chosen}  # imported ids name their file


def test_llm_labeled_run_end_to_end_and_cached_rerun(small_set, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path, outcomes = small_set
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    script = AnalystScript(outcomes)
    runner = CliRunner()
    with ScriptedLLMServer(script) as server:
        args = ["analyze", str(path), "--llm", "openai:gpt-4.1", "--llm-base-url", server.openai_base_url,
                "--runs", "3", "--min-runs", "2", "--batch-size", "5", "--concurrency", "4", "--bootstrap", "100"]  # fmt: skip
        first = runner.invoke(app, [*args, "--out", str(tmp_path / "a")])
        assert first.exit_code == 0, first.output
        requests_after_first = len(server.requests)
        assert 1 <= server.max_in_flight <= 4  # --concurrency 4
        second = runner.invoke(app, [*args, "--out", str(tmp_path / "b"), "--json"])
        assert second.exit_code == 0, second.output
        assert len(server.requests) == requests_after_first  # everything came from the cache

    # 1 discovery + 3 runs x ceil(16 / 5) = 12 labeling calls + 1 re-ask after the malformed reply
    assert requests_after_first == 1 + 12 + 1
    assert script.discovery_calls == 1 and script.retries_seen == 1
    report = CapabilityReport.model_validate_json((tmp_path / "a" / "capabilities.json").read_text())
    assert report.labeler == "openai:gpt-4.1" and report.discovery == "catalogue+llm"
    names = [f.name for f in report.candidates]
    assert names[:7] == [
        "precondition_verification", "structured_data_reasoning", "tool_calling_precision", "multi_step_task_completion",
        "permission_error_recovery", "datetime_reasoning", "escalation_judgment",
    ] and names[7] == NEW  # fmt: skip
    assert not report.deterministic and report.runs == 3
    (selected,) = report.capabilities
    assert selected.name == NEW and selected.stats.selected_runs == 3
    assert selected.stats.er_success == 0.0 and selected.stats.er_failure == 1.0 and selected.stats.coverage == 1.0
    assert "not-a-real-id" not in selected.example_failure_ids and all(not outcomes[i] for i in selected.example_failure_ids)
    usage = report.llm_usage
    assert usage["calls"] == 14 and usage["cached_calls"] == 0 and usage["cost_usd"] > 0
    rerun = CapabilityReport.model_validate_json(second.stdout)
    assert rerun.llm_usage["cached_calls"] == rerun.llm_usage["calls"] == 14 and rerun.llm_usage["cost_usd"] == 0.0
    assert [f.stats.model_dump() for f in rerun.candidates] == [f.stats.model_dump() for f in report.candidates]


def test_llm_failure_is_one_line_exit_1(small_set, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path, _ = small_set
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with ScriptedLLMServer([ScriptedReply(status=401, text="invalid api key")] * 5) as server:
        result = CliRunner().invoke(app, ["analyze", str(path), "--llm", "openai:gpt-4.1", "--llm-base-url", server.openai_base_url, "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert result.stderr.strip().startswith("error: LLM call failed:") and "401" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
