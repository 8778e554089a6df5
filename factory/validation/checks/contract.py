"""Checks of the env's contract: what it declares when loaded, whether its tools are the target's (or, on a
tool domain of its own, what its methods take and return), and whether its world behaves like the target's."""

from __future__ import annotations

import math
from typing import Any

import jsonschema

from factory.validation.checks.context import CheckContext
from schemas.names import capability_problem
from schemas.targets import load_target
from schemas.tools import interface_diff, strip_free_text
from schemas.validation import CheckResult, Counterexample

REQUIRED_INFO = ("capability", "target", "tools", "max_steps", "tool_names")


def declared_range_problem(value: Any) -> str | None:
    if isinstance(value, list) and len(value) == 2 and all(isinstance(x, float) and math.isfinite(x) for x in value) and value[0] < value[1]:
        return None
    return f"reward_range must be two finite numbers, lowest first (e.g. (-1.0, 1.0)), not {value!r}"


def check_interface(ctx: CheckContext) -> CheckResult:
    missing = [key for key in REQUIRED_INFO if not ctx.info.get(key)]
    problems = [f"missing {key}" for key in missing]
    own = ctx.info.get("tool_domain")
    if not missing:
        if problem := capability_problem(ctx.info["capability"]):  # the registry, gym ids and adapters use it as a name
            problems.append(f"capability {problem}")
    if not missing and not own:
        try:
            profile = load_target(ctx.info["target"])
        except KeyError as exc:
            problems.append(str(exc).strip('"') + "; an env on tools of its own declares tool_domain and tool_schemas")
        else:
            unknown = [n for n in ctx.info["tool_names"] if n not in profile.tool_names]
            if unknown:
                problems.append(f"tools not in target {profile.id}: {', '.join(unknown)}")
    if not missing and (not isinstance(ctx.info.get("max_steps"), int) or ctx.info["max_steps"] < 1):
        problems.append(f"max_steps must be a positive integer, not {ctx.info.get('max_steps')!r}")
    range_problem = declared_range_problem(ctx.info.get("reward_range"))
    if range_problem:
        problems.append(range_problem)
    counterexample = None
    rows = ctx.survey(1)
    if rows[0].error is not None:
        problems.append(f"seed {rows[0].seed}: {rows[0].error}")
        counterexample = Counterexample(seed=rows[0].seed, detail=rows[0].error)
    where = f"off-target: tool domain {own!r}" if own else f"target {ctx.info.get('target')}"
    return CheckResult(
        name="interface",
        passed=not problems,
        figure=f"{len(REQUIRED_INFO) - len(missing)}/{len(REQUIRED_INFO)} contract members ({where}; rewards in "
        f"[{ctx.low:g}, {ctx.high:g}]); generate and both solutions ran",
        message="; ".join(problems),
        counterexample=counterexample,
        seeds=1,
        episodes=2,
        data={"off_target": bool(own), "reward_range": [ctx.low, ctx.high]},
    )


def _descriptions(schema: dict[str, Any]) -> dict[str, str]:
    """Every description of a tool schema by where it sits: the tool's, and each parameter's."""
    function = schema.get("function", {})
    out = {"": str(function.get("description", ""))}
    properties = (function.get("parameters") or {}).get("properties") or {}
    for key, value in properties.items() if isinstance(properties, dict) else []:
        if isinstance(value, dict) and "description" in value:
            out[key] = str(value["description"])
    return out


def _own_schema_problems(schema: dict[str, Any], signature: Any) -> list[str]:
    """An own-domain tool: a valid JSON Schema whose properties are the method's parameters, required
    exactly where the method has no default; ``returns``, when declared, a valid JSON Schema."""
    function = schema.get("function") if isinstance(schema.get("function"), dict) else {}
    name = str(function.get("name", "?"))
    parameters = function.get("parameters") or {"type": "object", "properties": {}}
    problems = []
    for what, value in (("parameters", parameters), ("returns", function.get("returns"))):
        if value is None:
            continue
        try:
            jsonschema.Draft202012Validator.check_schema(value)
        except jsonschema.SchemaError as exc:
            problems.append(f"{name}: {what} is not a valid JSON Schema: {exc.message}")
    if signature is None:
        return problems + [f"{name}: no @sdk.tool method implements it"]
    declared = set((parameters.get("properties") or {}) if isinstance(parameters, dict) else {})
    required = set(parameters.get("required") or []) if isinstance(parameters, dict) else set()
    takes, needs = set(signature["names"]), set(signature["required"])
    if declared - takes and not signature["extra"]:
        problems.append(f"{name}: the schema declares {sorted(declared - takes)} but the method does not take them")
    if takes - declared:
        problems.append(f"{name}: the method takes {sorted(takes - declared)} but the schema does not declare them")
    if needs != required & takes:
        problems.append(f"{name}: required in the schema {sorted(required)}, without a default in the method {sorted(needs)}")
    return problems


def check_schema_fidelity(ctx: CheckContext) -> CheckResult:
    """On the target's tools: every schema equals the target's, descriptions included (a description of
    another version misleads the agent). On a tool domain of its own: every declared schema matches its
    method's parameters, and results match a declared ``returns`` schema. Either way every reference call
    validates."""
    own = ctx.info.get("tool_domain")
    problems: list[str] = []
    if own:
        signatures = ctx.info.get("signatures") or {}
        for schema in ctx.info["tools"]:
            name = str(schema.get("function", {}).get("name", "?"))
            problems.extend(_own_schema_problems(schema, signatures.get(name)))
    else:
        profile = load_target(ctx.info["target"])
        for schema in ctx.info["tools"]:
            name = schema.get("function", {}).get("name", "?")
            if name not in profile.tool_names:
                problems.append(f"{name}: not a tool of {profile.id}")
                continue
            target = profile.tool(name).model_dump(mode="json", exclude_none=True)
            diffs = interface_diff(strip_free_text(schema), strip_free_text(target))
            problems.extend(f"{name}{d}" for d in diffs[:3])
            mine, theirs = _descriptions(schema), _descriptions(target)
            changed = [where or "the tool" for where in theirs if mine.get(where) != theirs[where]]
            if changed and not diffs:
                problems.append(f"{name}: the description of {', '.join(changed[:3])} differs from the target's (keep the "
                                "target's wording: do not override tools())")
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
    returns = {s["function"]["name"]: s["function"]["returns"] for s in ctx.info["tools"] if own and isinstance(s["function"].get("returns"), dict)}
    if returns and rows and not problems:
        problem = _returns_problem(ctx, rows[:3], returns)
        if problem:
            problems.append(problem[0])
            counterexample = problem[1]
    where = f"off-target (own tool domain {own!r}): schemas checked against the tool methods" if own else "compared with the target's"
    return CheckResult(
        name="schema_fidelity",
        passed=not problems,
        figure=f"{len(ctx.info['tools'])} tools {where}, {checked_calls} reference calls validated",
        message="; ".join(problems[:5]),
        counterexample=counterexample,
        seeds=len(rows),
        data={"off_target": bool(own)},
    )


def _returns_problem(ctx: CheckContext, rows: list[Any], returns: dict[str, dict[str, Any]]) -> tuple[str, Counterexample] | None:
    import json

    for row in rows:
        _, messages = ctx.messages(row.seed, row.reference.turns)
        for message in messages:
            schema = returns.get(str(message.get("name"))) if message.get("role") == "tool" else None
            if schema is None or str(message.get("content", "")).startswith("Error"):
                continue
            try:
                value = json.loads(str(message.get("content")))
            except ValueError:
                value = message.get("content")
            errors = list(jsonschema.Draft202012Validator(schema).iter_errors(value))
            if errors:
                return (f"{message.get('name')} returned a value its declared returns schema refuses: {errors[0].message}",
                        Counterexample(seed=row.seed, actions=row.reference.turns, detail=str(message.get("content"))[:300]))
    return None


def check_world_fidelity(ctx: CheckContext) -> CheckResult:
    """Beyond parameters, using the target's world kit: the scenario's state keeps the world's invariants
    (no booking on a flight that does not exist), and the reference's tool calls, replayed with the kit's
    own functions on a copy of the start state, give results of the same shape and leave the same state (a
    tool that skips part of what the target does, or returns more than it, shows)."""
    rows = [r for r in ctx.generated(min(ctx.config.world_seeds, len(ctx.seeds))) if r.world is not None]
    statuses = {r.seed: r.world.kit.get("status", "?") for r in rows}  # type: ignore[union-attr]
    problems, counterexample, failing = [], None, []
    for row in rows:
        world = row.world
        assert world is not None
        if world.invariants:
            failing.append(row.seed)
            if not problems:
                problems.append(f"the scenario of seed {row.seed} breaks the world's invariants: {'; '.join(world.invariants)}")
                counterexample = Counterexample(seed=row.seed, detail=world.invariants[0])
        if world.kit.get("status") == "differs":
            failing.append(row.seed)
            if not problems:
                problems.append(f"seed {row.seed}: {world.kit.get('detail')}: tools must behave as the target's (inherit the kit's)")
                counterexample = Counterexample(seed=row.seed, actions=row.reference.turns, detail=str(world.kit.get("detail"))[:300])  # type: ignore[union-attr]
    same = sum(1 for s in statuses.values() if s == "same")
    other = sorted({str(r.world.kit.get("detail") or r.world.kit.get("status")) for r in rows if statuses[r.seed] in ("not_comparable", "no_kit")})  # type: ignore[union-attr]
    if ctx.info.get("tool_domain"):
        figure = f"off-target (own tool domain {ctx.info['tool_domain']!r}): {len(rows)} scenarios checked, no kit to compare"
    elif same:
        figure = f"{same}/{len(rows)} reference episodes replay identically with the kit's tools; invariants held on {len(rows) - len(set(failing))}"
    else:
        figure = f"world of the env's own ({other[0][:100] if other else 'no kit'}): invariants checked on {len(rows)} scenarios"
    return CheckResult(name="world_fidelity", passed=not problems, figure=figure, message="; ".join(problems),
                       counterexample=counterexample, seeds=len(rows), failing_seeds=sorted(set(failing)),
                       data={"kit_same": same, "compared": len(rows)})
