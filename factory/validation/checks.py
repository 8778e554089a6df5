"""The checks of the validation gate. Each runs the env inside the sandbox, through a :class:`SandboxedEnv`.

Each check returns a :class:`CheckResult` with a figure and, on failure, a counterexample: a seed and the
actions that expose the defect. Where the defect is found by fuzzing, Hypothesis's ``find`` shrinks the
counterexample to a minimal one.
"""

from __future__ import annotations

import json
import math
import random
import statistics
import time
from typing import Any, Callable

import jsonschema
from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample, Unsatisfiable

from env_registry.hosted import SandboxedEnv
from fuzz.policies import mixture_rollout
from fuzz.strategies import action_sequences
from fuzz.strategies import turn as agent_turn
from schemas.targets import load_target
from schemas.tools import interface_diff, strip_free_text
from schemas.validation import CheckResult, Counterexample, ValidationConfig
from sandbox import WorkerError, WorkerFailure

REQUIRED_INFO = ("capability", "target", "tools", "max_steps", "tool_names")
WORKER_FAILURES = WorkerFailure  # the root of WorkerError, WorkerTimeout and WorkerCrashed


class CheckContext:
    """What every check needs: the hosted env, its load info, the thresholds, and a cache of episodes."""

    def __init__(self, env: SandboxedEnv, config: ValidationConfig) -> None:
        self.env = env
        self.config = config
        self.info = env.info
        self._solutions: dict[tuple[str, int], list[Any]] = {}
        self._rewards: dict[tuple[str, int], float] = {}
        self.first_env_error: tuple[int, list[Any], list[dict[str, str]]] | None = None

    @property
    def seeds(self) -> range:
        return range(self.config.first_seed, self.config.first_seed + max(self.config.solvability_seeds, self.config.necessity_seeds))

    def episode(self, seed: int, actions: list[Any], with_messages: bool = False) -> dict[str, Any]:
        result = self.env.call("episode", {"seed": seed, "turns": actions, "with_messages": with_messages})
        if result["env_errors"] and self.first_env_error is None:
            self.first_env_error = (seed, actions, result["env_errors"])  # any check's episodes count for robustness
        return result

    def solution(self, which: str, seed: int) -> list[Any]:
        key = (which, seed)
        if key not in self._solutions:
            self._solutions[key] = self.env.call("solution", {"seed": seed, "which": which})
        return self._solutions[key]

    def solution_reward(self, which: str, seed: int) -> float:
        key = (which, seed)
        if key not in self._rewards:
            self._rewards[key] = self.env.call("episode", {"seed": seed, "policy": which, "with_messages": False})["reward"]
        return self._rewards[key]

    def hypothesis_settings(self, examples: int | None = None) -> settings:
        return settings(
            max_examples=examples or self.config.fuzz_examples,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.generate, Phase.shrink],
        )


def _find_counterexample(
    strategy: st.SearchStrategy[Any], is_failure: Callable[[Any], bool], ctx: CheckContext, examples: int | None = None
) -> Any | None:
    """The smallest generated value that fails, or None when Hypothesis finds none."""
    try:
        return find(strategy, is_failure, settings=ctx.hypothesis_settings(examples))
    except (NoSuchExample, Unsatisfiable):
        return None
    except BaseExceptionGroup as group:  # Hypothesis groups distinct errors; a dead worker is the one that matters
        worker_failure = next((e for e in group.exceptions if isinstance(e, WORKER_FAILURES)), None)
        if worker_failure is not None:
            raise worker_failure from group
        raise


def _seed_strategy(ctx: CheckContext) -> st.SearchStrategy[int]:
    return st.integers(min_value=0, max_value=2**31 - 1)


# --- the checks -----------------------------------------------------------------------------------


def check_interface(ctx: CheckContext) -> CheckResult:
    missing = [key for key in REQUIRED_INFO if not ctx.info.get(key)]
    problems = [f"missing {key}" for key in missing]
    if not missing:
        try:
            profile = load_target(ctx.info["target"])
        except KeyError as exc:
            problems.append(str(exc).strip('"'))
        else:
            unknown = [n for n in ctx.info["tool_names"] if n not in profile.tool_names]
            if unknown:
                problems.append(f"tools not in target {profile.id}: {', '.join(unknown)}")
        for which in ("reference", "skipping"):
            try:
                ctx.solution(which, ctx.config.first_seed)
            except WorkerError as exc:
                problems.append(f"{which} solution failed: {exc}")
    return CheckResult(
        name="interface",
        passed=not problems,
        figure=f"{len(REQUIRED_INFO) - len(missing)}/{len(REQUIRED_INFO)} contract members",
        message="; ".join(problems),
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
    for seed in list(ctx.seeds)[:20]:
        for turn in ctx.solution("reference", seed):
            for call in (turn.get("calls") or []) if isinstance(turn, dict) else []:
                checked_calls += 1
                validator = validators.get(call["name"])
                errors = list(validator.iter_errors(call.get("arguments", {}))) if validator else ["unknown tool"]
                if errors and counterexample is None:
                    message = errors[0] if isinstance(errors[0], str) else errors[0].message
                    problems.append(f"reference call {call['name']} does not validate: {message}")
                    counterexample = Counterexample(seed=seed, actions=[turn], detail=str(message))
    return CheckResult(
        name="schema_fidelity",
        passed=not problems,
        figure=f"{len(ctx.info['tools'])} tools compared, {checked_calls} reference calls validated",
        message="; ".join(problems[:5]),
        counterexample=counterexample,
    )


def check_determinism(ctx: CheckContext) -> CheckResult:
    for seed in (ctx.config.first_seed, ctx.config.first_seed + 1):
        first, second = ctx.env.call("generate", {"seed": seed}), ctx.env.call("generate", {"seed": seed})
        if first["fingerprint"] != second["fingerprint"]:
            return CheckResult(
                name="determinism", passed=False, figure="scenario hash differs between two generate() calls",
                message=f"generate({seed}) is not deterministic: use only self.rng(seed) for randomness",
                counterexample=Counterexample(seed=seed, detail="generate(seed) twice gave different scenarios"),
            )
    tools = ctx.info["tools"]

    def differs(case: tuple[int, list[Any]]) -> bool:
        seed, actions = case
        return ctx.episode(seed, actions, True) != ctx.episode(seed, actions, True)

    strategy = st.tuples(_seed_strategy(ctx), action_sequences(tools, max_turns=6))
    bad = _find_counterexample(strategy, differs, ctx, examples=max(10, ctx.config.fuzz_examples // 3))
    if bad is None:
        reference_seed = ctx.config.first_seed
        reference = ctx.solution("reference", reference_seed)
        if differs((reference_seed, reference)):
            bad = (reference_seed, reference)
    return CheckResult(
        name="determinism",
        passed=bad is None,
        figure="identical scenario hashes and transcripts" if bad is None else "transcripts differ for the same seed and actions",
        message="" if bad is None else "the same seed and actions gave different transcripts or rewards",
        counterexample=None if bad is None else Counterexample(seed=bad[0], actions=bad[1]),
    )


def check_diversity(ctx: CheckContext) -> CheckResult:
    seeds = range(ctx.config.first_seed, ctx.config.first_seed + ctx.config.diversity_seeds)
    generated = [ctx.env.call("generate", {"seed": s}) for s in seeds]
    hashes = {g["fingerprint"] for g in generated}
    truths = {json.dumps(g["truth"], sort_keys=True, default=str) for g in generated}
    share = len(hashes) / len(generated)
    passed = share >= ctx.config.diversity_min_share and len(truths) > 1
    message = ""
    if share < ctx.config.diversity_min_share:
        message = f"only {len(hashes)}/{len(generated)} distinct scenarios; vary records, ids, amounts and phrasing by seed"
    elif len(truths) <= 1:
        message = "the ground truth is the same for every seed"
    return CheckResult(
        name="diversity",
        passed=passed,
        figure=f"{len(hashes)}/{len(generated)} distinct scenarios, {len(truths)} distinct ground truths",
        message=message,
    )


def _reward_is_bad(reward: Any) -> bool:
    return not isinstance(reward, (int, float)) or not math.isfinite(reward) or not 0.0 <= reward <= 1.0


def check_reward_bounds(ctx: CheckContext) -> CheckResult:
    tools = ctx.info["tools"]
    observed: list[float] = []

    def out_of_bounds(case: tuple[int, list[Any]]) -> bool:
        reward = ctx.episode(case[0], case[1])["reward"]
        observed.append(reward if isinstance(reward, (int, float)) else float("nan"))
        return _reward_is_bad(reward)

    for seed in list(ctx.seeds)[:10]:
        for which in ("reference", "skipping"):
            reward = ctx.solution_reward(which, seed)
            if _reward_is_bad(reward):
                return CheckResult(
                    name="reward_bounds", passed=False, figure=f"reward {reward!r}",
                    message=f"{which} solution got reward {reward!r}, outside [0, 1]",
                    counterexample=Counterexample(seed=seed, actions=ctx.solution(which, seed)),
                )
    bad = _find_counterexample(st.tuples(_seed_strategy(ctx), action_sequences(tools)), out_of_bounds, ctx)
    finite = [r for r in observed if math.isfinite(r)]
    figure = f"{len(observed)} fuzzed episodes, rewards in [{min(finite):.3f}, {max(finite):.3f}]" if finite else f"{len(observed)} fuzzed episodes"
    if bad is None:
        return CheckResult(name="reward_bounds", passed=True, figure=figure)
    reward = ctx.episode(bad[0], bad[1])["reward"]
    return CheckResult(
        name="reward_bounds", passed=False, figure=figure,
        message=f"reward {reward!r} is outside [0, 1] or not finite",
        counterexample=Counterexample(seed=bad[0], actions=bad[1], detail=f"reward={reward!r}"),
    )


def _share_check(ctx: CheckContext, name: str, which: str, seeds: int, ok: Callable[[float], bool], min_share: float, wanted: str) -> CheckResult:
    seed_list = list(range(ctx.config.first_seed, ctx.config.first_seed + seeds))
    rewards = [ctx.solution_reward(which, s) for s in seed_list]
    good = [ok(r) for r in rewards]
    share = sum(good) / len(rewards)
    passed = share >= min_share
    worst_seed = next((s for s, g in zip(seed_list, good) if not g), None)
    return CheckResult(
        name=name,
        passed=passed,
        figure=f"{sum(good)}/{len(rewards)} seeds {wanted} (need {min_share:.0%}); mean reward {statistics.fmean(rewards):.3f}",
        message="" if passed else f"the {which} solution scores {wanted} on only {share:.0%} of seeds",
        counterexample=None if passed or worst_seed is None else Counterexample(
            seed=worst_seed, actions=ctx.solution(which, worst_seed), detail=f"reward={rewards[seed_list.index(worst_seed)]!r}"
        ),
    )


def check_solvability(ctx: CheckContext) -> CheckResult:
    c = ctx.config
    return _share_check(ctx, "solvability", "reference", c.solvability_seeds, lambda r: r >= c.solvability_min_reward,
                        c.solvability_min_share, f">= {c.solvability_min_reward}")


def check_necessity(ctx: CheckContext) -> CheckResult:
    c = ctx.config
    return _share_check(ctx, "capability_necessity", "skipping", c.necessity_seeds, lambda r: r <= c.necessity_max_reward,
                        c.necessity_min_share, f"<= {c.necessity_max_reward}")


def check_grpo_signal(ctx: CheckContext) -> CheckResult:
    """K stochastic-mixture rollouts per seed; a seed is informative when its group's rewards vary."""
    c = ctx.config
    informative = 0
    flat_seed: int | None = None
    spreads = []
    for seed in range(c.first_seed, c.first_seed + c.grpo_seeds):
        reference, skipping = ctx.solution("reference", seed), ctx.solution("skipping", seed)
        rewards: list[float] = []
        for k in range(c.grpo_group_size):
            # Member k of the group has its own seeded mixing weights, so the check replays exactly.
            actions = mixture_rollout(reference, skipping, random.Random(seed * 1000 + k))
            rewards.append(ctx.episode(seed, actions)["reward"])
        spread = statistics.pstdev(rewards)
        spreads.append(spread)
        if spread > 1e-9:
            informative += 1
        elif flat_seed is None:
            flat_seed = seed
    share = informative / c.grpo_seeds
    passed = share >= c.grpo_min_informative_share
    return CheckResult(
        name="grpo_signal",
        passed=passed,
        figure=f"{informative}/{c.grpo_seeds} groups (K={c.grpo_group_size}) with reward variance; mean std {statistics.fmean(spreads):.3f}",
        message="" if passed else "most groups have zero reward variance: make the reward graded (partial credit) so GRPO can learn",
        counterexample=None if passed else Counterexample(seed=flat_seed, detail="every rollout in this group got the same reward"),
    )


def check_robustness(ctx: CheckContext) -> CheckResult:
    """Malformed actions must give error observations, never env errors, and every episode must end."""
    max_steps = int(ctx.info["max_steps"])
    if max_steps > ctx.config.max_steps_limit:
        return CheckResult(
            name="robustness", passed=False, figure=f"max_steps={max_steps}",
            message=f"max_steps {max_steps} exceeds the limit {ctx.config.max_steps_limit}: episodes must end",
        )

    def crashes(case: tuple[int, list[Any]]) -> bool:
        result = ctx.episode(case[0], case[1])
        return bool(result["env_errors"])

    tools = ctx.info["tools"]
    garbage = st.tuples(_seed_strategy(ctx), st.lists(agent_turn(tools), min_size=1, max_size=6))
    bad = _find_counterexample(garbage, crashes, ctx, examples=2 * ctx.config.fuzz_examples)
    if bad is None and ctx.first_env_error is not None:
        bad = ctx.first_env_error[:2]
    if bad is not None:
        errors = ctx.episode(bad[0], bad[1])["env_errors"] or ctx.first_env_error[2]  # type: ignore[index]
        return CheckResult(
            name="robustness", passed=False, figure=f"env error: {errors[0]['where']}",
            message=f"malformed input crashed the env in {errors[0]['where']}: {errors[0]['error']}",
            counterexample=Counterexample(seed=bad[0], actions=bad[1], detail=errors[0]["error"]),
        )
    endless = ["I am still thinking about your request."] * (max_steps + 2)
    result = ctx.episode(ctx.config.first_seed, endless)
    if result["steps"] > max_steps:
        return CheckResult(name="robustness", passed=False, figure=f"{result['steps']} steps",
                           message="an episode ran past max_steps",
                           counterexample=Counterexample(seed=ctx.config.first_seed, actions=endless[:3]))
    return CheckResult(name="robustness", passed=True, figure=f"no env errors under fuzzing; episodes end within {max_steps} steps")


def check_budget(ctx: CheckContext) -> CheckResult:
    """Reset and step latency inside the sandbox, median over a few episodes."""
    c = ctx.config
    resets, steps = [], []
    for seed in range(c.first_seed, c.first_seed + 5):
        started = time.perf_counter()
        ctx.env.call("reset", {"seed": seed})
        resets.append((time.perf_counter() - started) * 1000)
        for turn in ctx.solution("reference", seed)[:4]:
            started = time.perf_counter()
            out = ctx.env.call("step", {"action": turn})
            steps.append((time.perf_counter() - started) * 1000)
            if out["terminated"] or out["truncated"]:
                break
    reset_ms, step_ms = statistics.median(resets), statistics.median(steps) if steps else 0.0
    passed = reset_ms <= c.reset_budget_ms and step_ms <= c.step_budget_ms
    return CheckResult(
        name="budget",
        passed=passed,
        figure=f"median reset {reset_ms:.1f} ms (budget {c.reset_budget_ms:.0f}), step {step_ms:.1f} ms (budget {c.step_budget_ms:.0f})",
        message="" if passed else "reset or step is over its time budget",
    )


SANDBOX_CHECKS: list[tuple[str, Callable[[CheckContext], CheckResult]]] = [
    ("interface", check_interface),
    ("schema_fidelity", check_schema_fidelity),
    ("determinism", check_determinism),
    ("diversity", check_diversity),
    ("reward_bounds", check_reward_bounds),
    ("solvability", check_solvability),
    ("capability_necessity", check_necessity),
    ("grpo_signal", check_grpo_signal),
    ("robustness", check_robustness),
    ("budget", check_budget),
]

