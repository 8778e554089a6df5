"""The LLM judge of τ² natural-language assertions (retail's ``NL_ASSERTION`` basis), through llm_clients.

It sees what τ²'s judge sees - the conversation as ``role: content`` lines - and answers one verdict per
assertion as JSON; malformed replies are re-asked (``complete_structured``). A judge that still fails
reports an error, which the reward lists as not judged, never as pass or fail.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

JUDGE_SYSTEM = """You grade a customer-service conversation against a list of expected outcomes.
Each expected outcome is a statement about what the agent did or said. Decide for each one, separately,
whether the conversation shows that the agent met it. Judge only from the conversation.

Answer with one JSON object and nothing else:
{"results": [{"expectedOutcome": "<the outcome, copied>", "reasoning": "<one or two sentences>", "metExpectation": true or false}]}
Give exactly one result per expected outcome, in the order given."""


class Verdict(BaseModel):
    expectedOutcome: str = ""
    reasoning: str = ""
    metExpectation: bool


class Verdicts(BaseModel):
    results: list[Verdict] = Field(default_factory=list)


def transcript(messages: list[dict[str, Any]]) -> str:
    """The conversation as the judge reads it (system prompt left out: it is the agent's, not the dialogue)."""
    lines = []
    for message in messages:
        if message.get("role") == "system":
            continue
        content = message.get("content") or ""
        if message.get("tool_calls"):
            calls = ", ".join(f"{c['function']['name']}({c['function'].get('arguments', '')})" for c in message["tool_calls"])
            content = (content + "\n" if content else "") + f"[tool calls] {calls}"
        lines.append(f"{message.get('role')}: {content}")
    return "\n".join(lines)


class NLJudge:
    """Callable ``judge(messages, assertions) -> {"checks", "judge", "error"?}`` over an ``LLMClient``."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def describe(self) -> str:
        return self.client.describe()

    def __call__(self, messages: list[dict[str, Any]], assertions: list[str]) -> dict[str, Any]:
        from llm_clients import LLMError, complete_structured

        def same_count(value: Verdicts) -> None:
            if len(value.results) != len(assertions):
                raise ValueError(f"expected {len(assertions)} results (one per outcome), got {len(value.results)}")

        prompt = f"Conversation:\n{transcript(messages)}\n\nExpected outcomes:\n" + "\n".join(
            f"{i + 1}. {a}" for i, a in enumerate(assertions)
        )
        try:
            value, _ = complete_structured(
                self.client, [{"role": "user", "content": prompt}], Verdicts, system=JUDGE_SYSTEM, check=same_count
            )
        except LLMError as exc:
            return {"checks": [], "judge": self.describe(), "error": str(exc)[:300]}
        checks = [
            {"nl_assertion": assertion, "met": verdict.metExpectation, "justification": verdict.reasoning}
            for assertion, verdict in zip(assertions, value.results)
        ]
        return {"checks": checks, "judge": f"LLM judge {self.describe()}, one verdict per assertion"}
