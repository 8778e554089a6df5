"""The real openai / anthropic SDKs against a scripted loopback server: retries, timeouts, cache, costs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_clients import (
    LLMRequestError,
    LLMServerError,
    LLMSpec,
    LLMTimeoutError,
    ResponseCache,
    RetryPolicy,
    make_client,
)
from factory.testing.llm_server import ScriptedLLMServer, ScriptedReply

FAST = RetryPolicy(max_retries=3, base_delay_s=0.01, max_delay_s=0.05)
HI = [{"role": "user", "content": "hi"}]
KEYS = {"OPENAI_API_KEY": "test-key", "ANTHROPIC_API_KEY": "test-key"}


def openai_client(server, model="gpt-4.1", *, cache=None, retry=FAST, timeout_s=5.0):
    spec = LLMSpec(provider="openai", model=model, base_url=server.openai_base_url)
    return make_client(spec, env=KEYS, cache=cache, retry=retry, timeout_s=timeout_s)


def test_rate_limit_then_success_is_retried():
    with ScriptedLLMServer([ScriptedReply(status=429, text="slow down"), "hello"]) as server:
        client = openai_client(server)
        response = client.complete(HI, system="be brief")
    assert response.text == "hello" and not response.cached
    assert len(server.requests) == 2
    assert client.usage.retries == 1 and client.usage.calls == 1
    body = server.requests[-1].body
    assert body["messages"][0] == {"role": "system", "content": "be brief"}
    assert body["max_completion_tokens"] == 1024 and body["temperature"] == 0.0


def test_server_error_then_success_is_retried():
    with ScriptedLLMServer([ScriptedReply(status=500), ScriptedReply(status=503), "fine"]) as server:
        client = openai_client(server)
        assert client.complete(HI).text == "fine"
    assert len(server.requests) == 3 and client.usage.retries == 2


def test_retries_give_up_with_the_transient_error():
    with ScriptedLLMServer([ScriptedReply(status=500)] * 3) as server:
        client = openai_client(server, retry=RetryPolicy(max_retries=2, base_delay_s=0.01))
        with pytest.raises(LLMServerError, match="gave up after 3 attempts"):
            client.complete(HI)
    assert len(server.requests) == 3


def test_client_error_is_not_retried():
    with ScriptedLLMServer([ScriptedReply(status=400, text="bad request"), "never"]) as server:
        client = openai_client(server)
        with pytest.raises(LLMRequestError) as info:
            client.complete(HI)
    assert info.value.status == 400 and len(server.requests) == 1


def test_timeout_is_retried_then_raised():
    stall = ScriptedReply(text="late", delay_s=1.5)
    with ScriptedLLMServer([stall, stall]) as server:
        client = openai_client(server, retry=RetryPolicy(max_retries=1, base_delay_s=0.01), timeout_s=0.3)
        with pytest.raises(LLMTimeoutError):
            client.complete(HI)
    assert len(server.requests) == 2


def test_timeout_then_success():
    with ScriptedLLMServer([ScriptedReply(text="late", delay_s=1.5), "on time"]) as server:
        client = openai_client(server, timeout_s=0.3)
        assert client.complete(HI).text == "on time"


def test_cache_hit_on_rerun_sends_no_request(tmp_path: Path):
    cache_dir = tmp_path / "llm-cache"
    with ScriptedLLMServer([ScriptedReply(text="first answer", input_tokens=1000, output_tokens=500)]) as server:
        first = openai_client(server, cache=ResponseCache(cache_dir)).complete(HI, temperature=0.5)
        again_client = openai_client(server, cache=ResponseCache(cache_dir))  # a fresh process would do the same
        again = again_client.complete(HI, temperature=0.5)
        assert len(server.requests) == 1
        assert first.cost_usd == pytest.approx((1000 * 2.0 + 500 * 8.0) / 1e6)
        assert again.text == "first answer" and again.cached and again.cost_usd == 0.0
        assert again_client.usage.cached_calls == 1 and again_client.usage.cost_usd == 0.0
        # different parameters are a different request: it reaches the (now exhausted) server
        with pytest.raises(LLMServerError):
            openai_client(server, cache=ResponseCache(cache_dir), retry=RetryPolicy(max_retries=0)).complete(HI, temperature=0.9)
    entries = list(cache_dir.rglob("*.json"))
    assert len(entries) == 1 and not list(cache_dir.rglob(".tmp-*"))
    assert json.loads(entries[0].read_text())["response"]["text"] == "first answer"


def test_default_cache_dir_follows_env(isolated_llm_env: Path):
    with ScriptedLLMServer(["cached"]) as server:
        openai_client(server, cache=True).complete(HI)
        assert openai_client(server, cache=True).complete(HI).cached
    assert list((isolated_llm_env / "llm").rglob("*.json"))


def test_unknown_model_has_no_cost():
    with ScriptedLLMServer(["x"]) as server:
        client = openai_client(server, model="my-finetune")
        assert client.complete(HI).cost_usd is None
    assert client.usage.cost_usd is None and client.usage.input_tokens > 0


def test_openai_compatible_server_gets_max_tokens_and_no_price():
    with ScriptedLLMServer(["local"]) as server:
        spec = LLMSpec(provider="openai-compatible", model="Qwen/Qwen3-8B", base_url=server.openai_base_url)
        client = make_client(spec, env={}, cache=None, retry=FAST)
        response = client.complete(HI, max_tokens=64, temperature=None)
    body = server.requests[0].body
    assert body["max_tokens"] == 64 and "max_completion_tokens" not in body and "temperature" not in body
    assert response.cost_usd is None and client.describe() == "openai-compatible:Qwen/Qwen3-8B"


def test_anthropic_sdk_against_scripted_messages_endpoint():
    script = [ScriptedReply(status=529, text="overloaded"), ScriptedReply(text="bonjour", input_tokens=200, output_tokens=100)]
    with ScriptedLLMServer(script) as server:
        spec = LLMSpec(provider="anthropic", model="claude-haiku-4-5", base_url=server.anthropic_base_url)
        client = make_client(spec, env=KEYS, cache=None, retry=FAST)
        response = client.complete([{"role": "system", "content": "extra rule"}, *HI], system="be brief", max_tokens=50)
    assert response.text == "bonjour"
    assert response.cost_usd == pytest.approx((200 * 1.0 + 100 * 5.0) / 1e6)
    assert [r.path for r in server.requests] == ["/v1/messages", "/v1/messages"]
    body = server.requests[-1].body
    assert body["system"] == "be brief\n\nextra rule"
    assert body["messages"] == HI and body["max_tokens"] == 50
    assert server.requests[-1].headers.get("authorization") == "Bearer test-key" or server.requests[-1].headers.get("x-api-key") == "test-key"


def test_retry_delay_is_exponential_capped_and_honours_retry_after():
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=5.0)
    assert 1.0 <= policy.delay(0) <= 1.25
    assert 4.0 <= policy.delay(2) <= 5.0
    assert policy.delay(10) <= 5.0 * 1.25
    assert policy.delay(0, retry_after=3.0) == 3.0
    assert policy.delay(0, retry_after=60.0) == 5.0


def test_corrupt_cache_entry_is_a_miss(tmp_path: Path):
    cache = ResponseCache(tmp_path)
    with ScriptedLLMServer(["one", "two"]) as server:
        openai_client(server, cache=cache).complete(HI)
        entry = next(tmp_path.rglob("*.json"))
        entry.write_text("{ not json")
        assert openai_client(server, cache=cache).complete(HI).text == "two"
    assert len(server.requests) == 2
