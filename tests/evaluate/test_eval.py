"""``factory eval`` end to end on the real τ² MCP servers with the tiny model and a real PEFT adapter.

Each arm must behave exactly like the policy it claims to be: the base arm like ``factory rollout`` with
the plain model, the adapter arm like ``factory rollout`` with ``hf:MODEL@ADAPTER``, and the routed arm, on
each task, like whichever of those its recorded decision picked. All of it from one base model load.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from factory.cli import app
from factory.rollout.store import RolloutStore
from tests.evaluate.conftest import CAPABILITY
from tests.targets.helpers import requires_servers

pytestmark = requires_servers
runner = CliRunner()
LIMITS = ["--max-steps", "2", "--max-tokens", "12"]
AIRLINE = ["0", "3"]


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def messages(folder: Path) -> dict[str, list[dict]]:
    return {t.task_id: [m.model_dump() for m in t.messages] for t in RolloutStore.load(folder)}


@pytest.fixture(scope="module")
def evaluated(tiny_path: Path, adapters_dir: Path, gated_registry: Path, tmp_path_factory, monkeypatch_module) -> tuple[Path, dict, int]:
    """One evaluation of every arm on two airline tasks and one retail task; counts base model loads."""
    from transformers import AutoModelForCausalLM

    loads = []
    original = AutoModelForCausalLM.from_pretrained.__func__

    def counting(cls, *args, **kwargs):  # type: ignore[no-untyped-def]
        loads.append(args[0] if args else kwargs.get("pretrained_model_name_or_path"))
        return original(cls, *args, **kwargs)

    monkeypatch_module.setattr(AutoModelForCausalLM, "from_pretrained", classmethod(counting))
    out = tmp_path_factory.mktemp("eval") / "out"
    result = invoke("eval", "--target", "tau2-airline", "--target", "tau2-retail", "--task-ids", "tau2-airline:" + ",".join(AIRLINE),
                    "--task-ids", "tau2-retail:0", "--adapters", adapters_dir, "--registry", gated_registry, *LIMITS,
                    "--out", out, "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    return out, json.loads(result.stdout), len(loads)


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@pytest.mark.slow
def test_every_arm_runs_on_one_model_load_and_reports_the_papers_overall(evaluated) -> None:
    out, report, loads = evaluated
    assert loads == 1  # base arm, adapter arm, routed arm and the router: one from_pretrained
    assert [a["arm"] for a in report["arms"]] == ["base", f"adapter:{CAPABILITY}", "routed"]
    assert report["toolsandbox"]["available"] is False and "ToolSandbox was not evaluated" in report["toolsandbox"]["note"]
    for arm in report["arms"]:
        folder = Path(arm["folder"])
        trajectories = [t for target in ("tau2-airline", "tau2-retail") for t in RolloutStore.load(folder / target)]
        assert sorted((t.target, t.task_id) for t in trajectories) == [("tau2-airline", "0"), ("tau2-airline", "3"), ("tau2-retail", "0")]
        scored = [t for t in trajectories if not any(k in t.metadata for k in ("infrastructure_error", "agent_error", "internal_error"))]
        passed = sum(t.success for t in scored)
        assert (arm["passed"], arm["scored"]) == (passed, len(scored))  # overall: solved over the union of both domains' tasks
        assert arm["pass_rate"] == pytest.approx(passed / len(scored), abs=1e-4)
        by_domain = {d["target"]: d for d in arm["domains"]}
        assert by_domain["tau2-airline"]["tasks"] == 2 and by_domain["tau2-retail"]["tasks"] == 1
    assert (out / "pass_rates.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((out / "results.json").read_text())["arms"] == report["arms"]
    routed = [out / "arms" / "routed" / t / "trajectories.jsonl" for t in ("tau2-airline", "tau2-retail")]
    analysed = invoke("analyze", *routed, "--out", out / "analysis", "--bootstrap", "0", "--json")  # kept for factory analyze
    assert analysed.exit_code == 0, analysed.output
    assert json.loads(analysed.stdout)["n_trajectories"] == 3


@pytest.mark.slow
def test_arms_behave_exactly_like_the_policies_they_stand_for(evaluated, tiny_path: Path, adapters_dir: Path, tmp_path: Path) -> None:
    out, report, _ = evaluated
    reference = {}
    for name, spec in (("base", f"hf:{tiny_path}"), ("adapter", f"hf:{tiny_path}@{adapters_dir / CAPABILITY}")):
        result = invoke("rollout", "--target", "tau2-airline", "--task-ids", ",".join(AIRLINE), "--policy", spec, *LIMITS,
                        "--out", tmp_path / name, "--json")  # fmt: skip
        assert result.exit_code == 0, result.output
        reference[name] = messages(tmp_path / name)
    arms = {"base": messages(out / "arms" / "base" / "tau2-airline"), "adapter": messages(out / "arms" / f"adapter-{CAPABILITY}" / "tau2-airline")}
    assert arms["base"] == reference["base"]  # adapters disabled = the plain model, byte for byte
    assert arms["adapter"] == reference["adapter"]  # the switched adapter = PeftModel.from_pretrained of that folder
    assert arms["base"] != arms["adapter"]  # and the adapter does change what the agent says

    decisions = [json.loads(line) for line in (out / "arms" / "routed" / "decisions.jsonl").read_text().splitlines()]
    assert sorted((d["target"], d["task_id"]) for d in decisions) == [("tau2-airline", "0"), ("tau2-airline", "3"), ("tau2-retail", "0")]
    routed = {**{("tau2-airline", k): v for k, v in messages(out / "arms" / "routed" / "tau2-airline").items()},
              ("tau2-retail", "0"): messages(out / "arms" / "routed" / "tau2-retail")["0"]}  # fmt: skip
    for d in decisions:
        arm = "base" if d["choice"] is None else f"adapter-{d['choice']}"
        expected = messages(out / "arms" / arm / d["target"])[d["task_id"]]
        assert routed[(d["target"], d["task_id"])] == expected, d
        assert abs(sum(d["probabilities"].values()) - 1.0) < 1e-6
    routes = report["arms"][2]["routes"]
    assert sum(routes.values()) == 3 and set(routes) <= {CAPABILITY, "(base)"}


@pytest.mark.slow
def test_table_fits_80_columns_and_a_second_run_resumes(evaluated, adapters_dir: Path, gated_registry: Path) -> None:
    out, report, _ = evaluated
    before = {p: p.read_text() for p in sorted((out / "arms").rglob("trajectories.jsonl"))}
    args = ["eval", "--target", "tau2-airline", "--target", "tau2-retail", "--task-ids", "tau2-airline:" + ",".join(AIRLINE),
            "--task-ids", "tau2-retail:0", "--adapters", adapters_dir, "--registry", gated_registry, *LIMITS, "--out", out]  # fmt: skip
    result = runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert {p: p.read_text() for p in before} == before  # nothing ran again: every episode was kept
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    table = "\n".join(lines)
    assert "adapter:precondition_verification" in table and "overall" in table and "ToolSandbox" in table
    for arm in report["arms"]:
        assert f"{arm['passed']}/{arm['scored']}" in table

    changed = runner.invoke(app, [str(a) for a in args[:-2]] + ["--max-steps", "3", "--out", str(out)])
    assert changed.exit_code == 2 and "other settings (max_steps changed)" in changed.output and "--fresh" in changed.output
    assert len(changed.output.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args, message",
    [
        (["--target", "toolbox"], "cannot be evaluated; choose tau2-airline, tau2-retail, toolsandbox"),
        (["--target", "tau2-airline", "--arms", "routed"], "need adapters"),
        (["--target", "tau2-airline", "--arms", "base,everything"], "arms"),
        (["--target", "tau2-airline", "--task-ids", "tau2-retail:1"], "is not one of the --target values"),
        (["--target", "tau2-airline", "--arms", "base", "--engine", "server"], "needs base_url"),
    ],
)
def test_bad_requests_get_one_line(args: list[str], message: str, tmp_path: Path) -> None:
    result = runner.invoke(app, ["eval", *args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert message in result.output and len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_an_adapter_keeps_its_training_prompt_and_an_override_is_one_warning_line(tiny_path: Path, adapters_dir: Path, tmp_path: Path) -> None:
    """An adapter recorded as trained on compact tools (trained_prompt.json): ``--schema-tools`` shows it JSON
    schemas and says so in one warning line; without the flag nothing is said; a damaged record is one error line."""
    import shutil

    from env_registry.conversation import PROMPT_FILE, TrainedPrompt, write_trained_prompt

    adapter = tmp_path / CAPABILITY
    shutil.copytree(adapters_dir / CAPABILITY, adapter)
    write_trained_prompt(adapter, TrainedPrompt(compact_tools=True))
    common = ["eval", "--target", "tau2-airline", "--task-ids", "0", "--adapter", f"{CAPABILITY}={adapter}", "--arms", "adapters",
              "--model", tiny_path, "--max-steps", "1", "--max-tokens", "4"]  # fmt: skip
    overridden = invoke(*common, "--schema-tools", "--out", tmp_path / "overridden")
    assert overridden.exit_code == 0, overridden.output
    warnings = [line for line in overridden.output.splitlines() if line.startswith("warning:")]
    assert warnings == [f"warning: adapter {CAPABILITY} is shown its tools as JSON schemas but was trained on compact signatures: "
                        "it runs on a prompt it was not trained on"]
    kept = invoke(*common, "--out", tmp_path / "kept")
    assert kept.exit_code == 0 and "warning:" not in kept.output, kept.output
    (adapter / PROMPT_FILE).write_text("{}")
    damaged = invoke(*common, "--out", tmp_path / "damaged")
    assert damaged.exit_code == 2 and PROMPT_FILE in damaged.output and len(damaged.output.strip().splitlines()) == 1, damaged.output
