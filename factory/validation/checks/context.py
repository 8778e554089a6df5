"""What every check shares: the hosted env, one survey of the seeds, and everything observed on the way.

Checks never call the worker directly: they go through :class:`CheckContext`, which validates what comes
back (it is hostile), bounds-checks every reward and times every generate, reset and step it sees (so
``reward_bounds`` and ``budget`` judge everything the gate ran, not a sample of their own), and turns a
call that hangs into :class:`BudgetExceeded`, which ends the gate with the budget verdict.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample, Unsatisfiable
from pydantic import TypeAdapter

from env_registry.hosted import SandboxedEnv
from sandbox import WorkerFailure, WorkerTimeout
from schemas.validation import Counterexample, EpisodeSummary, SeedSurvey, ValidationConfig

WORKER_FAILURES = WorkerFailure  # the root of WorkerError, WorkerTimeout and WorkerCrashed
BATCH = 16
NO_SEEDS = "generate() or a solution failed on (almost) every seed: see interface and robustness"
_SURVEYS = TypeAdapter(list[SeedSurvey])
_EPISODES = TypeAdapter(list[EpisodeSummary])


class BudgetExceeded(Exception):
    """The env is too slow to validate: a call hung, or timings are far over budget. Ends the gate."""

    def __init__(self, message: str, counterexample: Counterexample | None = None, figure: str = "") -> None:
        super().__init__(message)
        self.counterexample = counterexample
        self.figure = figure


def reward_is_bad(reward: Any) -> bool:
    return not isinstance(reward, (int, float)) or not math.isfinite(reward) or not 0.0 <= reward <= 1.0


@dataclass
class Finding:
    """The first time something went wrong anywhere in the gate: which seed, which actions, what."""

    seed: int
    actions: list[Any]
    detail: str
    where: str


@dataclass
class Timing:
    ms: float
    seed: int
    actions: list[Any] = field(default_factory=list)  # for steps: the turns up to and including the timed one
    kind: str = "step"

    def counterexample(self) -> Counterexample:
        return Counterexample(seed=self.seed, actions=self.actions, detail=f"{self.kind} took {self.ms:.0f} ms CPU")


class CheckContext:
    """The hosted env, its load info, the thresholds, the survey, and what every episode showed."""

    def __init__(self, env: SandboxedEnv, config: ValidationConfig, open_peer: Callable[[int], Any] | None = None) -> None:
        self.env = env
        self.open_peer = open_peer  # a second worker on the same source with another PYTHONHASHSEED
        self.config = config
        self.info = env.info
        c = config
        self.seeds = list(range(c.first_seed, c.first_seed + max(c.solvability_seeds, c.necessity_seeds, c.diversity_seeds,
                                                                  c.determinism_seeds, c.sensitivity_seeds, c.grpo_seeds)))
        self.surveys: dict[int, SeedSurvey] = {}
        self.episodes_run = 0
        self.bad_reward: Finding | None = None
        self.env_error: Finding | None = None
        self.timings: dict[str, list[Timing]] = {"generate": [], "reset": [], "step": []}
        self.rewards: list[float] = []

    # --- the survey ---------------------------------------------------------------------------------
    def survey(self, count: int) -> list[SeedSurvey]:
        """The first ``count`` seeds, surveyed once (see ``trace_env.gate_probe.survey``) and kept."""
        wanted = self.seeds[:count]
        while len(self.surveys) < len(wanted):
            first = not self.surveys
            todo = [s for s in wanted if s not in self.surveys][: 4 if first else BATCH]
            # The first chunk is small and short, so an env that is slow on every seed fails fast.
            done = len(self.surveys)
            params = {"seeds": todo, "parrot_seeds": max(0, self.config.leak_seeds - done),
                      "masked_seeds": max(0, self.config.diversity_seeds - done), "deadline_s": 1.0 if first else 5.0}
            rows = _SURVEYS.validate_python(self.call("survey", params, self.config.rpc_timeout_s, seed=todo[0]))
            if not rows:
                raise ValueError("the worker returned an empty survey")
            for row in rows:
                self.surveys[row.seed] = row
                self._observe_survey(row)
            self.check_hard_budget()
        return [self.surveys[s] for s in wanted]

    def generated(self, count: int) -> list[SeedSurvey]:
        """The surveyed seeds among the first ``count`` whose scenario and solutions could be made."""
        return [r for r in self.survey(count) if r.error is None and r.reference is not None and r.skipping is not None]

    def _observe_survey(self, row: SeedSurvey) -> None:
        if row.error is not None:
            if self.env_error is None:
                self.env_error = Finding(row.seed, [], row.error, "generate or a solution")
            return
        self.timings["generate"].append(Timing(row.generate_ms, row.seed, kind="generate"))
        for which in ("reference", "skipping", "parrot"):
            run = getattr(row, which)
            if run is not None:
                self.episodes_run += 1
                turns = run.turns if which != "parrot" else [{"content": row.first_message, "calls": []}]
                self._observe(row.seed, turns, run, "the first-message-only agent" if which == "parrot" else f"the {which} solution")

    # --- episodes ------------------------------------------------------------------------------------
    def episode_timeout(self, turns: int) -> float:
        c = self.config
        allowance = (c.reset_budget_ms + (turns + 1) * c.step_budget_ms) * c.budget_max_factor / 1000
        return min(c.rpc_timeout_s, max(5.0, 2 * allowance))

    def play(self, seed: int, turns: list[Any], templates: bool = False, where: str = "an episode") -> EpisodeSummary:
        return self.play_many([(seed, turns)], templates, where)[0]

    def play_many(self, items: list[tuple[int, list[Any]]], templates: bool = False, where: str = "an episode") -> list[EpisodeSummary]:
        """Episodes in batches of :data:`BATCH` per round trip; each one observed (reward, timings, errors)."""
        out: list[EpisodeSummary] = []
        for start in range(0, len(items), BATCH):
            chunk = items[start:start + BATCH]
            params = {"episodes": [{"seed": s, "turns": t, "templates": templates} for s, t in chunk]}
            timeout = min(self.config.rpc_timeout_s * 2, sum(self.episode_timeout(len(t)) for _, t in chunk))
            results = _EPISODES.validate_python(self.call("episodes", params, timeout, seed=chunk[0][0], actions=chunk[0][1]))
            if len(results) != len(chunk):
                raise ValueError(f"asked for {len(chunk)} episodes, the worker returned {len(results)}")
            for (seed, turns), result in zip(chunk, results):
                self.episodes_run += 1
                self._observe(seed, result.actions if result.actions is not None else turns, result, where)
                out.append(result)
        return out

    def _observe(self, seed: int, actions: list[Any], result: EpisodeSummary, where: str) -> None:
        if reward_is_bad(result.reward):
            if self.bad_reward is None:
                self.bad_reward = Finding(seed, actions[: result.steps], f"reward={result.reward!r}", where)
        else:
            self.rewards.append(result.reward)
        if result.env_errors and self.env_error is None:
            first = result.env_errors[0]
            self.env_error = Finding(seed, actions[: result.steps], f"{first.get('where')}: {first.get('error')}", where)
        self.timings["reset"].append(Timing(result.reset_ms, seed, kind="reset"))
        for index, ms in enumerate(result.step_ms):
            self.timings["step"].append(Timing(ms, seed, actions[: index + 1]))
            if ms > self.config.step_budget_ms * self.config.budget_max_factor and self.retime(self.timings["step"][-1]) > ms / 2:
                alone = Timing(ms, seed, actions[index: index + 1])  # the slow turn on its own, if it is slow alone
                replay = actions[: index + 1] if index == 0 or self.retime(alone) <= ms / 2 else alone.actions
                raise BudgetExceeded(
                    f"one step took {ms:.0f} ms CPU, over {self.config.budget_max_factor:g}x the step budget of "
                    f"{self.config.step_budget_ms:.0f} ms (confirmed by replaying it)",
                    Counterexample(seed=seed, actions=replay, detail=f"step {index + 1} took {ms:.0f} ms CPU"),
                    figure=f"step: max {ms:.0f} ms",
                )

    def reward_range(self) -> tuple[float, float]:
        return (min(self.rewards), max(self.rewards)) if self.rewards else (float("nan"), float("nan"))

    def retime(self, timing: Timing) -> float:
        """Measure a slow call once more (CPU ms): a stray pause is not a slow env."""
        if timing.kind == "generate":
            return float(self.call("generate", {"seed": timing.seed}, self.config.rpc_timeout_s, seed=timing.seed)["generate_ms"])
        params = {"seed": timing.seed, "turns": timing.actions, "with_messages": False}
        result = EpisodeSummary.model_validate(
            self.call("episode", params, self.episode_timeout(len(timing.actions)), seed=timing.seed, actions=timing.actions)
        )
        if timing.kind == "reset":
            return result.reset_ms
        return result.step_ms[-1] if len(result.step_ms) == len(timing.actions) else timing.ms

    def call(self, method: str, params: dict[str, Any], timeout_s: float, seed: int | None = None, actions: list[Any] | None = None) -> Any:
        return self.call_worker(self.env.worker, method, params, timeout_s, seed, actions)

    def call_worker(
        self, worker: Any, method: str, params: dict[str, Any], timeout_s: float, seed: int | None = None, actions: list[Any] | None = None
    ) -> Any:
        try:
            return worker.call(method, params, timeout_s=timeout_s)
        except WorkerTimeout as exc:
            raise BudgetExceeded(
                f"{method} did not finish within {timeout_s:.1f} s: the env hangs or is far too slow",
                Counterexample(seed=seed, actions=list(actions or []), detail=str(exc)[:300]),
                figure=f"{method} > {timeout_s:.1f} s",
            ) from exc

    # --- budget ---------------------------------------------------------------------------------------
    def budget_figures(self) -> dict[str, tuple[float, float, Timing | None]]:
        """kind -> (95th percentile, max, the slowest timing) over everything observed so far."""
        out: dict[str, tuple[float, float, Timing | None]] = {}
        for kind, items in self.timings.items():
            values = [t.ms for t in items]
            if not values:
                out[kind] = (0.0, 0.0, None)
                continue
            p95 = statistics.quantiles(values, n=20, method="inclusive")[-1] if len(values) > 1 else values[0]
            slowest = max(items, key=lambda t: t.ms)
            out[kind] = (p95, slowest.ms, slowest)
        return out

    def budget_of(self, kind: str) -> float:
        return self.config.step_budget_ms if kind == "step" else self.config.reset_budget_ms

    def check_hard_budget(self) -> None:
        """Stop the gate at once when timings are clearly over budget (every later check would crawl)."""
        for kind, items in self.timings.items():
            if not items:
                continue
            values = [t.ms for t in items]
            slowest = max(items, key=lambda t: t.ms)
            median = statistics.median(values)
            if median > self.budget_of(kind) or slowest.ms > self.budget_of(kind) * self.config.budget_max_factor * 4:
                raise BudgetExceeded(
                    f"{kind} takes {median:.0f} ms CPU (median of {len(values)}), budget {self.budget_of(kind):.0f} ms",
                    slowest.counterexample(),
                    figure=f"{kind}: median {median:.0f} ms, max {slowest.ms:.0f} ms",
                )

    # --- fuzzing ---------------------------------------------------------------------------------------
    def hypothesis_settings(self, examples: int | None = None) -> settings:
        return settings(
            max_examples=examples or self.config.fuzz_examples,
            deadline=None,
            database=None,
            derandomize=True,  # the same env gets the same verdict on every run
            suppress_health_check=list(HealthCheck),
            phases=[Phase.generate],
        )

    def find(self, strategy: st.SearchStrategy[tuple[int, list[Any]]], is_failure: Callable[[Any], bool], examples: int | None = None) -> Any | None:
        """The first ``(seed, turns)`` Hypothesis generates that fails, minimised; None when none fails.

        Hypothesis searches; the minimising is ours (:func:`minimise`): its shrinker replays thousands of
        nested action sequences on the host, tens of seconds where dropping turns and calls one at a time
        finds the same short counterexample in a few episodes. A slow, hung or dead worker ends the search
        at once (it must not be replayed) and is raised when Hypothesis is done.
        """
        stopped: list[BaseException] = []

        def condition(value: Any) -> bool:
            if stopped:
                return False
            try:
                return bool(is_failure(value))
            except (BudgetExceeded, WORKER_FAILURES) as exc:
                stopped.append(exc)
                return False

        try:
            found = find(strategy, condition, settings=self.hypothesis_settings(examples))
        except (NoSuchExample, Unsatisfiable):
            found = None
        if stopped:
            raise stopped[0]
        return None if found is None else minimise(found, is_failure)


def minimise(case: tuple[int, list[Any]], is_failure: Callable[[Any], bool], budget: int = 40) -> tuple[int, list[Any]]:
    """Drop turns, then calls, one at a time while the case still fails (at most ``budget`` episodes)."""
    seed, turns = case[0], list(case[1])
    tries = 0
    index = len(turns) - 1
    while index >= 0 and tries < budget:
        candidate = turns[:index] + turns[index + 1:]
        tries += 1
        if candidate and is_failure((seed, candidate)):
            turns = candidate
        index -= 1
    for index, turn in enumerate(list(turns)):
        calls = turn.get("calls") if isinstance(turn, dict) else None
        while isinstance(calls, list) and len(calls) > 1 and tries < budget:
            candidate = turns[:index] + [{**turn, "calls": calls[1:]}] + turns[index + 1:]
            tries += 1
            if not is_failure((seed, candidate)):
                break
            turns, turn, calls = candidate, candidate[index], calls[1:]
    return seed, turns


def seed_strategy() -> st.SearchStrategy[int]:
    return st.integers(min_value=0, max_value=2**31 - 1)
