"""Spec parsing, the price table and structured (JSON) replies."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from llm_clients import (
    LLMConfigError,
    LLMSpec,
    MalformedReplyError,
    RetryPolicy,
    complete_structured,
    cost_usd,
    extract_json,
    make_client,
    parse_llm_spec,
    price_for,
)
from factory.testing.llm_server import ScriptedLLMServer


@pytest.mark.parametrize(
    ("spec", "base_url", "expected"),
    [
        ("openai:gpt-4.1", None, ("openai", "gpt-4.1", None)),
        ("anthropic:claude-sonnet-4-5", None, ("anthropic", "claude-sonnet-4-5", None)),
        ("claude-haiku-4-5", None, ("anthropic", "claude-haiku-4-5", None)),
        ("gpt-4o-mini", None, ("openai", "gpt-4o-mini", None)),
        ("vllm:Qwen/Qwen3-8B", None, ("openai-compatible", "Qwen/Qwen3-8B", "http://127.0.0.1:8000/v1")),
        ("ollama:llama3.1:8b", None, ("openai-compatible", "llama3.1:8b", "http://127.0.0.1:11434/v1")),
        ("sglang:m", "http://gpu-box:30000/v1", ("openai-compatible", "m", "http://gpu-box:30000/v1")),
        ("Qwen/Qwen3-8B", "http://127.0.0.1:9000/v1", ("openai-compatible", "Qwen/Qwen3-8B", "http://127.0.0.1:9000/v1")),
        ("openai:gpt-4.1", "https://proxy.example/v1", ("openai", "gpt-4.1", "https://proxy.example/v1")),
    ],
)
def test_parse_llm_spec(spec, base_url, expected):
    parsed = parse_llm_spec(spec, base_url=base_url, env={})
    assert (parsed.provider, parsed.model, parsed.base_url) == expected


def test_env_vars_stand_in_for_flags():
    env = {"TRACE_LLM": "compat:my-model", "TRACE_LLM_BASE_URL": "http://127.0.0.1:1234/v1"}
    assert parse_llm_spec(env=env) == LLMSpec(provider="openai-compatible", model="my-model", base_url="http://127.0.0.1:1234/v1")
    assert parse_llm_spec("openai:gpt-4.1", env=env).base_url == "http://127.0.0.1:1234/v1"


@pytest.mark.parametrize(
    ("spec", "base_url", "message"),
    [
        (None, None, "no LLM configured"),
        ("bogus:model", None, "unknown LLM provider 'bogus'"),
        ("openai:", None, "names no model"),
        ("compat:m", None, "needs --llm-base-url"),
        ("openai:gpt-4.1", "localhost:8000", "must start with http"),
    ],
)
def test_bad_specs(spec, base_url, message):
    with pytest.raises(LLMConfigError, match=message):
        parse_llm_spec(spec, base_url=base_url, env={})


def test_missing_keys_are_named():
    with pytest.raises(LLMConfigError, match="OPENAI_API_KEY"):
        make_client(LLMSpec(provider="openai", model="gpt-4.1"), env={}, cache=None)
    with pytest.raises(LLMConfigError, match="ANTHROPIC_API_KEY"):
        make_client(LLMSpec(provider="anthropic", model="claude-sonnet-4-5"), env={}, cache=None)
    local = make_client(LLMSpec(provider="openai-compatible", model="m", base_url="http://127.0.0.1:1/v1"), env={}, cache=None)
    assert local.describe() == "openai-compatible:m"


def test_price_table_resolves_snapshots_by_longest_prefix():
    assert price_for("gpt-4.1-2025-04-14") == price_for("gpt-4.1")
    assert price_for("gpt-4.1-mini-2025-04-14") == price_for("gpt-4.1-mini") != price_for("gpt-4.1")
    assert price_for("claude-sonnet-4-5-20250929") == (3.0, 15.0)
    assert price_for("openai/gpt-4o") == price_for("gpt-4o")
    assert price_for("gpt-4.10") is None and price_for("Qwen/Qwen3-8B") is None
    assert cost_usd("gpt-4.1", 1_000_000, 1_000_000) == pytest.approx(10.0)
    assert cost_usd("unknown", 10, 10) is None and cost_usd("gpt-4.1", None, 10) is None


def test_extract_json_variants():
    assert extract_json('{"a": 1}') == {"a": 1}
    assert extract_json('Here you go:\n```json\n{"a": [1, 2]}\n```\nThanks') == {"a": [1, 2]}
    assert extract_json('prefix {"a": {"b": 2}} suffix') == {"a": {"b": 2}}
    with pytest.raises(ValueError, match="not JSON"):
        extract_json("no json here")


class _Answer(BaseModel):
    value: int


def test_structured_reply_is_reasked_until_valid():
    script = ["I think it's five", '{"value": "five"}', '{"value": 5}']
    with ScriptedLLMServer(script) as server:
        client = make_client(LLMSpec(provider="openai-compatible", model="m", base_url=server.openai_base_url), env={}, cache=None, retry=RetryPolicy(max_retries=0))
        answer, responses = complete_structured(client, [{"role": "user", "content": "give value"}], _Answer, max_attempts=3)
    assert answer.value == 5 and len(responses) == 3
    feedback = server.requests[2].body["messages"]
    assert feedback[-2] == {"role": "assistant", "content": '{"value": "five"}'}
    assert "value: Input should be a valid integer" in feedback[-1]["content"]


def test_structured_reply_gives_up_with_reason():
    with ScriptedLLMServer(["nope", "still nope"]) as server:
        client = make_client(LLMSpec(provider="openai-compatible", model="m", base_url=server.openai_base_url), env={}, cache=None)
        with pytest.raises(MalformedReplyError, match="no valid reply after 2 attempts: reply is not JSON"):
            complete_structured(client, [{"role": "user", "content": "x"}], _Answer, max_attempts=2)
