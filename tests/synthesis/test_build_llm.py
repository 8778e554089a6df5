"""`factory build --llm`: the real openai and anthropic SDKs against a scripted loopback server.

The scripted model writes a small env (tests/gate/envs/tiny_checked.py) in several states of brokenness; the loop
must validate each in the sandbox, feed the failures back, and register only a passing env.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from factory.cli import app
from factory.testing.llm_server import ScriptedLLMServer, ScriptedReply
from factory.synthesis.extract import NoCodeError, extract_env_code
from sandbox import available_backends
from tests.conftest import TEST_ENVS

BACKEND = "bwrap" if available_backends().get("bwrap") is None else "docker"
TINY = (TEST_ENVS.parent / "gate" / "envs" / "tiny_checked.py").read_text()  # tiny_cancel.py has a reward hole the gate finds
SYNTAX_ERROR = TINY.replace("def evaluate(self, episode):", "def evaluate(self, episode:", 1)
SCHEMA_MISMATCH = TINY.replace(
    "    def evaluate(self, episode):",
    "    def tools(self):\n        schemas = super().tools()\n"
    "        schemas[1]['function']['parameters']['properties']['reservation_id']['type'] = 'integer'\n"
    "        return schemas\n\n    def evaluate(self, episode):",
)
FAST = ["--set", "solvability_seeds=30", "--set", "necessity_seeds=30", "--set", "diversity_seeds=60", "--set", "fuzz_examples=15"]
runner = CliRunner()


def fenced(code: str, prose: str = "Here is the environment.") -> str:
    return f"{prose}\n\n```python\n{code}```\n\nIt validates the reservation first."


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TRACE_FACTORY_REGISTRY", str(tmp_path / "registry"))
    monkeypatch.setenv("TRACE_FACTORY_CACHE", str(tmp_path / "llm-cache"))
    monkeypatch.setenv("TRACE_FACTORY_BUILDS", str(tmp_path / "builds"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-real")
    for name in ("TRACE_LLM", "TRACE_LLM_BASE_URL", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def build(server: ScriptedLLMServer, *extra: str, provider: str = "openai"):
    base = server.openai_base_url if provider == "openai" else server.anthropic_base_url
    model = "openai:gpt-4.1" if provider == "openai" else "anthropic:claude-opus-4-5"
    args = ["build", "-c", "tiny_cancel", "--description", "Cancels only refundable reservations, after checking.",
            "--target", "tau2-airline", "--llm", model, "--llm-base-url", base, "--sandbox", BACKEND, *FAST, *extra]
    return runner.invoke(app, args)


def test_syntax_error_then_schema_mismatch_then_valid_registers_after_three_attempts(isolated: Path) -> None:
    with ScriptedLLMServer([fenced(SYNTAX_ERROR), fenced(SCHEMA_MISMATCH), fenced(TINY)]) as server:
        result = build(server, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["registered"] and data["gym_id"] == "trace/tiny_cancel-v0"
    assert data["attempts"] == 3 and data["generator"] == "llm" and data["model"] == "openai:gpt-4.1"
    failed = [a["failed_checks"] for a in data["attempt_log"]]
    assert failed[0] == ["static"] and "schema_fidelity" in failed[1] and failed[2] == []
    assert data["input_tokens"] > 0 and data["output_tokens"] > 0
    # the repair prompts carried the gate's findings back to the model
    assert "static" in server.requests[1].prompt_text() and "syntax error" in server.requests[1].prompt_text()
    assert "schema_fidelity" in server.requests[2].prompt_text() and "reservation_id" in server.requests[2].prompt_text()
    build_dir = Path(data["build_dir"])
    for n in (1, 2, 3):
        assert {p.name for p in (build_dir / f"attempt-{n}").iterdir()} == {"prompt.md", "reply.md", "env.py", "report.json"}
    assert json.loads((build_dir / "attempt-2" / "report.json").read_text())["passed"] is False
    assert json.loads((build_dir / "summary.json").read_text())["passed"] is True
    manifest = json.loads((isolated / "registry" / "tiny_cancel" / "v0" / "manifest.json").read_text())
    assert manifest["provenance"]["generator"] == "llm" and manifest["provenance"]["attempts"] == 3
    assert manifest["provenance"]["prompt_hash"] and manifest["validation"] == "passed"


def test_reply_without_code_becomes_a_repair_round(isolated: Path) -> None:
    with ScriptedLLMServer(["I would design the environment around refunds, but here is only my plan.", fenced(TINY)]) as server:
        result = build(server, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["attempts"] == 2 and data["attempt_log"][0]["code_found"] is False
    assert "no Python code block" in server.requests[1].prompt_text()


def test_rate_limit_and_server_error_are_retried(isolated: Path) -> None:
    script = [ScriptedReply(status=429, headers={"retry-after": "0"}), ScriptedReply(status=500, text="boom"), fenced(TINY)]
    with ScriptedLLMServer(script) as server:
        result = build(server, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["attempts"] == 1
    assert len(server.requests) == 3


def test_timeout_is_retried(isolated: Path) -> None:
    with ScriptedLLMServer([ScriptedReply(text=fenced(TINY), delay_s=4), fenced(TINY)]) as server:
        result = build(server, "--json", "--llm-timeout", "1")
    assert result.exit_code == 0, result.output
    assert len(server.requests) == 2


def test_rerun_is_served_from_cache(isolated: Path) -> None:
    with ScriptedLLMServer([fenced(TINY)]) as server:
        assert build(server, "--json").exit_code == 0
        again = build(server, "--json")
    assert again.exit_code == 0, again.output
    assert len(server.requests) == 1


def test_model_that_never_gets_it_right_fails_cleanly(isolated: Path) -> None:
    with ScriptedLLMServer(lambda request: fenced(SCHEMA_MISMATCH)) as server:
        result = build(server, "--max-attempts", "2")
    assert result.exit_code == 1
    assert "not registered" in result.output and "no env passed the validation gate in 2 attempt(s)" in result.output
    assert "Traceback" not in result.output
    assert not (isolated / "registry" / "tiny_cancel").exists()
    attempts = sorted(p.name for p in next((isolated / "builds").iterdir()).iterdir() if p.is_dir())
    assert attempts == ["attempt-1", "attempt-2"]


def test_anthropic_sdk_end_to_end(isolated: Path) -> None:
    with ScriptedLLMServer([fenced(SCHEMA_MISMATCH), fenced(TINY)]) as server:
        result = build(server, "--json", provider="anthropic")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["attempts"] == 2 and data["model"] == "anthropic:claude-opus-4-5"
    assert all(r.path.endswith("/v1/messages") for r in server.requests)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    "args, message",
    [
        (["-c", "telepathy", "--llm", "openai:gpt-4.1"], "unknown capability 'telepathy': describe it with --description"),
        (["-c", "telepathy"], "no built-in blueprint for 'telepathy' and no LLM configured"),
        (["-c", "telepathy", "--description", "x"], "needs an LLM to write its env: pass --llm"),
        (["-c", "precondition_verification", "--llm", "openai:gpt-4.1", "--target", "mars"], "unknown target 'mars'"),
        (["-c", "precondition_verification", "--llm", "martian:big"], "unknown LLM provider 'martian'"),
        (["--all", "--llm", "openai:gpt-4.1"], "--all with --llm builds the capabilities of --report"),
        (["-c", "refund_rules", "--report", "/no/such/capabilities.json"], "no such file"),
    ],
)
def test_bad_flags_get_one_line_errors(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["build", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert len([line for line in result.output.splitlines() if line.strip()]) == 1


def test_unreachable_base_url_is_reported_before_building() -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    result = runner.invoke(app, ["build", "-c", "precondition_verification", "--llm", "vllm:qwen", "--llm-base-url", url])
    assert result.exit_code == 2
    assert f"cannot reach the LLM server at {url}" in result.output and "fix --llm-base-url" in result.output


@pytest.mark.parametrize(
    "reply",
    [
        "```python\nfrom env_registry import sdk\nclass A(sdk.TaskEnv):\n    pass\n```",
        "Sure!\n```py\nx = 1\n```\nand the env:\n```python\nfrom env_registry import sdk\nclass A(sdk.TaskEnv):\n    capability = 'a'\n```\nDone.",
        "```python\nfrom env_registry import sdk\nclass A(sdk.TaskEnv):\n    capability = 'a'\n",  # cut off mid-reply
        "from env_registry import sdk\nclass A(sdk.TaskEnv):\n    pass\n",
    ],
)
def test_code_extraction(reply: str) -> None:
    code = extract_env_code(reply)
    assert "class A(sdk.TaskEnv)" in code and "```" not in code and "x = 1" not in code


@pytest.mark.parametrize("reply", ["", "I cannot do that.", "```python\nprint('hi')\n```"])
def test_code_extraction_refuses_replies_without_an_env(reply: str) -> None:
    with pytest.raises(NoCodeError):
        extract_env_code(reply)
