"""The generate → validate → repair loop, with every attempt kept on disk.

Each attempt writes ``attempt-<n>/{prompt.md, reply.md, env.py, report.json}`` under the build directory, and
the loop writes ``summary.json`` at the end, so a user can always see why a build failed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

from pydantic import BaseModel, Field

from llm_clients import LLMClient, LLMError
from factory.synthesis.extract import NoCodeError, extract_env_code
from factory.synthesis.prompts import SYSTEM_PROMPT, generation_prompt, prompt_hash, repair_prompt
from factory.validation.gate import Gate, validate_source
from schemas.capability import Capability
from schemas.target import TargetProfile
from schemas.validation import ValidationConfig, ValidationReport

MAX_REPLY_TOKENS = 16_000


class AttemptRecord(BaseModel):
    number: int
    code_found: bool
    passed: bool
    failed_checks: list[str] = Field(default_factory=list)
    problem: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    cached: bool = False
    seconds: float


class SynthesisResult(BaseModel):
    capability: str
    target: str
    model: str
    passed: bool
    attempts: list[AttemptRecord]
    prompt_hash: str
    build_dir: str
    source: str | None = Field(None, description="the passing module, when one passed")
    report: ValidationReport | None = Field(None, description="the last validation report")
    error: str | None = None
    seconds: float


AttemptCallback = Callable[[int, str], None]
"""Called with (attempt number, phase) where phase is 'generating' or 'validating'."""


def synthesize(
    capability: Capability,
    profile: TargetProfile,
    llm: LLMClient,
    build_dir: Path,
    max_attempts: int = 5,
    gate: Gate | None = None,
    on_attempt: AttemptCallback | None = None,
) -> SynthesisResult:
    """Ask ``llm`` for an env until one passes the gate or ``max_attempts`` run out. Never raises for bad replies."""
    gate = gate or Gate()
    config = gate.config or ValidationConfig()
    started = time.perf_counter()
    build_dir.mkdir(parents=True, exist_ok=True)
    first_prompt = generation_prompt(capability, profile, config)
    conversation: list[dict[str, str]] = [{"role": "user", "content": first_prompt}]
    attempts: list[AttemptRecord] = []
    report: ValidationReport | None = None
    error: str | None = None
    notify = on_attempt or (lambda number, phase: None)

    for number in range(1, max_attempts + 1):
        attempt_started = time.perf_counter()
        folder = build_dir / f"attempt-{number}"
        folder.mkdir(exist_ok=True)
        (folder / "prompt.md").write_text(_render_conversation(conversation), encoding="utf-8")
        notify(number, "generating")
        try:
            response = llm.complete(conversation, system=SYSTEM_PROMPT, max_tokens=MAX_REPLY_TOKENS, temperature=0.2)
        except LLMError as exc:
            error = f"the LLM call failed on attempt {number}: {exc}"
            (folder / "error.txt").write_text(error + "\n", encoding="utf-8")
            break
        (folder / "reply.md").write_text(response.text, encoding="utf-8")
        record = AttemptRecord(
            number=number, code_found=False, passed=False, input_tokens=response.input_tokens,
            output_tokens=response.output_tokens, cost_usd=response.cost_usd, cached=response.cached, seconds=0.0,
        )
        try:
            source = extract_env_code(response.text)
        except NoCodeError as exc:
            record.problem = str(exc)
            feedback = repair_prompt(None, str(exc))
        else:
            record.code_found = True
            (folder / "env.py").write_text(source, encoding="utf-8")
            notify(number, "validating")
            report = validate_source(source, gate)
            (folder / "report.json").write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
            identity_problem = _identity_problem(report, capability.name, profile.id)
            record.failed_checks = [c.name for c in report.failures() if not c.skipped]
            record.passed = report.passed and identity_problem is None
            record.problem = identity_problem
            if record.passed:
                record.seconds = round(time.perf_counter() - attempt_started, 3)
                attempts.append(record)
                return _result(capability, profile, llm, True, attempts, first_prompt, build_dir, source, report, None, started)
            feedback = repair_prompt(report, identity_problem)
        record.seconds = round(time.perf_counter() - attempt_started, 3)
        attempts.append(record)
        # The repair round shows the model its last reply and what the gate found; earlier rounds are dropped
        # so the context stays the size of one attempt.
        conversation = [conversation[0], {"role": "assistant", "content": response.text}, {"role": "user", "content": feedback}]

    if error is None:
        error = _failure_summary(attempts)
    return _result(capability, profile, llm, False, attempts, first_prompt, build_dir, None, report, error, started)


def _failure_summary(attempts: list[AttemptRecord]) -> str:
    """Why no attempt passed, in one line: no code at all is the model's failure to answer, not a failed gate."""
    with_code = [a for a in attempts if a.code_found]
    if not with_code:
        last = attempts[-1].problem if attempts else None
        return f"none of the {len(attempts)} replies held env code" + (f" (last: {last})" if last else "")
    last = with_code[-1]
    why = ", ".join(last.failed_checks) or last.problem or "see its report"
    skipped = len(attempts) - len(with_code)
    return (
        f"no env passed the validation gate in {len(attempts)} attempt(s)"
        + (f" ({skipped} of them without code)" if skipped else "")
        + f"; attempt {last.number} failed: {why}"
    )


def _identity_problem(report: ValidationReport, capability: str, target: str) -> str | None:
    if report.capability is None:
        return None  # the env did not load; the failed checks already say why
    if report.capability != capability or report.target != target:
        return (
            f"the env declares capability={report.capability!r}, target={report.target!r}; "
            f"it must declare capability={capability!r}, target={target!r}"
        )
    return None


def _render_conversation(messages: list[dict[str, str]]) -> str:
    return "\n\n".join(f"# {m['role']}\n\n{m['content']}" for m in [{"role": "system", "content": SYSTEM_PROMPT}, *messages])


def _result(
    capability: Capability,
    profile: TargetProfile,
    llm: LLMClient,
    passed: bool,
    attempts: list[AttemptRecord],
    first_prompt: str,
    build_dir: Path,
    source: str | None,
    report: ValidationReport | None,
    error: str | None,
    started: float,
) -> SynthesisResult:
    result = SynthesisResult(
        capability=capability.name,
        target=profile.id,
        model=llm.describe(),
        passed=passed,
        attempts=attempts,
        prompt_hash=prompt_hash(first_prompt),
        build_dir=str(build_dir),
        source=source,
        report=report,
        error=error,
        seconds=round(time.perf_counter() - started, 3),
    )
    summary = result.model_dump(mode="json", exclude={"source", "report"})
    (build_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return result
