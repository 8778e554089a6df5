"""Checks of the env's contract: what it declares when loaded, and whether its tools are the target's."""

from __future__ import annotations

import jsonschema

from factory.validation.checks.context import CheckContext
from schemas.names import capability_problem
from schemas.targets import load_target
from schemas.tools import interface_diff, strip_free_text
from schemas.validation import CheckResult, Counterexample

REQUIRED_INFO = ("capability", "target", "tools", "max_steps", "tool_names")


def check_interface(ctx: CheckContext) -> CheckResult:
    missing = [key for key in REQUIRED_INFO if not ctx.info.get(key)]
    problems = [f"missing {key}" for key in missing]
    if not missing:
        if problem := capability_problem(ctx.info["capability"]):  # the registry, gym ids and adapters use it as a name
            problems.append(f"capability {problem}")
        try:
            profile = load_target(ctx.info["target"])
        except KeyError as exc:
            problems.append(str(exc).strip('"'))
        else:
            unknown = [n for n in ctx.info["tool_names"] if n not in profile.tool_names]
            if unknown:
                problems.append(f"tools not in target {profile.id}: {', '.join(unknown)}")
        if not isinstance(ctx.info.get("max_steps"), int) or ctx.info["max_steps"] < 1:
            problems.append(f"max_steps must be a positive integer, not {ctx.info.get('max_steps')!r}")
    counterexample = None
    rows = ctx.survey(1)
    if rows[0].error is not None:
        problems.append(f"seed {rows[0].seed}: {rows[0].error}")
        counterexample = Counterexample(seed=rows[0].seed, detail=rows[0].error)
    return CheckResult(
        name="interface",
        passed=not problems,
        figure=f"{len(REQUIRED_INFO) - len(missing)}/{len(REQUIRED_INFO)} contract members; generate and both solutions ran",
        message="; ".join(problems),
        counterexample=counterexample,
        seeds=1,
        episodes=2,
    )


def check_schema_fidelity(ctx: CheckContext) -> CheckResult:
    profile = load_target(ctx.info["target"])
    problems: list[str] = []
    for schema in ctx.info["tools"]:
        name = schema.get("function", {}).get("name", "?")
        if name not in profile.tool_names:
            problems.append(f"{name}: not a tool of {profile.id}")
            continue
        diffs = interface_diff(strip_free_text(schema), profile.tool(name).interface())
        problems.extend(f"{name}{d}" for d in diffs[:3])
    validators = {s["function"]["name"]: jsonschema.Draft202012Validator(s["function"].get("parameters", {})) for s in ctx.info["tools"]}
    counterexample = None
    checked_calls = 0
    rows = [r for r in ctx.survey(min(20, len(ctx.seeds))) if r.reference is not None]
    for row in rows:
        for turn in row.reference.turns:  # type: ignore[union-attr]
            for call in (turn.get("calls") or []) if isinstance(turn, dict) else []:
                if not isinstance(call, dict):
                    continue
                checked_calls += 1
                validator = validators.get(str(call.get("name")))
                errors = list(validator.iter_errors(call.get("arguments", {}))) if validator else ["unknown tool"]
                if errors and counterexample is None:
                    message = errors[0] if isinstance(errors[0], str) else errors[0].message
                    problems.append(f"reference call {call.get('name')} does not validate: {message}")
                    counterexample = Counterexample(seed=row.seed, actions=[turn], detail=str(message))
    return CheckResult(
        name="schema_fidelity",
        passed=not problems,
        figure=f"{len(ctx.info['tools'])} tools compared, {checked_calls} reference calls validated",
        message="; ".join(problems[:5]),
        counterexample=counterexample,
        seeds=len(rows),
    )
