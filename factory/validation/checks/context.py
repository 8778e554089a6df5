"""What every check shares: the lanes of workers, one survey of the seeds, and everything observed on the way.

Checks never call a worker directly: they go through :class:`CheckContext`, which spreads batches over the
lanes (:mod:`factory.validation.lanes`), validates what comes back (it is hostile), bounds-checks every reward
on the env's declared range and times every generate, reset and step it sees (so ``reward_bounds`` and
``budget`` judge everything the gate ran, not a sample of their own), and turns a call that hangs into
:class:`BudgetExceeded`, which ends the gate with the budget verdict.

The seeds are drawn on every run (``run_seed``, reported, repeats a run) like training's: half from the
windows training walks (consecutive seeds near each window's start and across all of it), half at random from a
large range (:func:`draw_seeds`);
the wording of the probes varies too (:attr:`CheckContext.rng`): no fixed window an env could be fitted to.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable

from pydantic import TypeAdapter

from factory.validation.checks.seeds import SMALL_OFFSET, TRAINING_BLOCK, draw_seeds, training_windows, window_spans
from factory.validation.envclock import EnvClock, MachineStarved, timed_call
from factory.validation.lanes import Kept, Lanes
from sandbox import WorkerFailure, WorkerTimeout
from schemas.validation import Counterexample, EpisodeSummary, SeedSurvey, ValidationConfig

WORKER_FAILURES = WorkerFailure  # the root of WorkerError, WorkerTimeout and WorkerCrashed
BATCH = 16
FIRST_CHUNK = 4
NO_SEEDS = "generate() or a solution failed on (almost) every seed: see interface and robustness"
MIN_HASH_SEEDS = 4
"""Distinct hash seeds the determinism seeds are played under (the lanes' and the fresh workers'; each drawn
as every training worker's is): an env whose output follows the order of a set of three strings agrees
across k of them with chance about (1/3)^(k-1), so four leave ~4% where two left a third."""
_SURVEYS = TypeAdapter(list[SeedSurvey])
_EPISODES = TypeAdapter(list[EpisodeSummary])


class BudgetExceeded(Exception):
    """The env is too slow to validate: a call hung, or timings are far over budget. Ends the gate."""

    def __init__(self, message: str, counterexample: Counterexample | None = None, figure: str = "") -> None:
        super().__init__(message)
        self.counterexample = counterexample
        self.figure = figure


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
        return Counterexample(seed=self.seed, actions=self.actions, detail=f"{self.kind} took {self.ms:.0f} ms")


class CheckContext:
    """The lanes, the env's load info, the thresholds, the seeds, the survey, and what every episode showed."""

    def __init__(self, lanes: Lanes, config: ValidationConfig, run_seed: int, fresh: Callable[[], Any] | None = None) -> None:
        self.lanes = lanes
        self.fresh_env = fresh or (lambda: (_ for _ in ()).throw(RuntimeError("this gate has no fresh worker")))
        self.fresh_runs: dict[tuple[int, str], Any] = {}  # (seed, what) -> determinism's replay in the fresh worker
        self.config = config
        self.info = lanes.main.info
        self.run_seed = run_seed
        self.rng = random.Random(f"trace-gate-wording:{run_seed}")
        c = config
        count = max(c.solvability_seeds, c.necessity_seeds, c.diversity_seeds, c.determinism_seeds, c.sensitivity_seeds,
                    c.grpo_seeds, c.exploit_seeds + c.exploit_confirm_seeds, c.truth_seeds, c.paraphrase_seeds)
        self.seeds = draw_seeds(run_seed, c.first_seed, count)
        self.index = {seed: i for i, seed in enumerate(self.seeds)}
        declared = self.info.get("reward_range")
        self.low, self.high = (declared if isinstance(declared, list) and len(declared) == 2 and declared[0] < declared[1] else (0.0, 1.0))
        self.surveys: dict[int, SeedSurvey] = {}
        self.surveyed_by: dict[int, Any] = {}  # seed -> the worker its survey ran on
        self.episodes_run = 0
        self.bad_reward: Finding | None = None
        self.env_error: Finding | None = None
        self.timings: dict[str, list[Timing]] = {"generate": [], "reset": [], "step": []}
        self.rewards: list[float] = []
        self.starved: str | None = None  # set when the machine gave the env no CPU for too long (the gate stops)
        spares = max(0, MIN_HASH_SEEDS - 1 - lanes.wanted) if fresh is not None else 0
        self.spares = [Kept(lanes.opener) for _ in range(spares)]  # opened now, in the background

    def extend_seeds(self, count: int) -> None:
        """Draw seeds up to ``count`` (the same run's draw, longer: the seeds so far are its prefix)."""
        if count > len(self.seeds):
            self.seeds = draw_seeds(self.run_seed, self.config.first_seed, count)
            self.index = {seed: i for i, seed in enumerate(self.seeds)}

    def fresh_workers(self, hash_seeds: int) -> list[Any]:
        """The fresh worker and as many spare fresh workers (opened as training opens one) as it takes for
        the lanes and these to hold ``hash_seeds`` workers; a spare that failed to open is left out."""
        workers = [self.fresh_env()]
        for kept in self.spares[: max(0, hash_seeds - 1 - len(self.lanes.ready()))]:
            try:
                workers.append(kept.get())
            except Exception:  # noqa: BLE001 - a spare is extra evidence; the fresh worker's verdict stands without it
                continue
        return workers

    def close(self) -> None:
        """Close the spare workers (the gate closes the lanes and the fresh worker)."""
        for kept in self.spares:
            kept.close()

    @property
    def env(self) -> Any:
        return self.lanes.main

    @env.setter
    def env(self, value: Any) -> None:
        self.lanes.main = value

    # --- rewards on the declared range ---------------------------------------------------------------
    def norm(self, reward: float) -> float:
        """A reward as a share of the declared range (0 the lowest, 1 the highest); NaN stays NaN."""
        if not isinstance(reward, (int, float)) or not math.isfinite(reward):
            return math.nan
        return (reward - self.low) / (self.high - self.low)

    def clipped(self, reward: float) -> float:
        """:meth:`norm` clipped to [0, 1] (what a trainer makes of an out-of-range reward); NaN is 0."""
        share = self.norm(reward)
        return 0.0 if math.isnan(share) else min(1.0, max(0.0, share))

    def reward_is_bad(self, reward: Any) -> bool:
        return not isinstance(reward, (int, float)) or not math.isfinite(reward) or not self.low <= reward <= self.high

    # --- the survey ---------------------------------------------------------------------------------
    def survey(self, count: int) -> list[SeedSurvey]:
        """The first ``count`` seeds, surveyed once (see ``trace_env.gate_probe.survey``) and kept. The first
        chunk is small, short and on lane 0 alone, so an env that is slow on every seed fails fast; the
        rest is spread over the lanes. More seeds than drawn so far are drawn first (:meth:`extend_seeds`)."""
        self.extend_seeds(count)
        wanted = self.seeds[:count]
        while True:
            todo = [s for s in wanted if s not in self.surveys]
            if not todo:
                return [self.surveys[s] for s in wanted]
            first = not self.surveys
            size = FIRST_CHUNK if first else self._chunk(len(todo))
            chunks = [todo[:size]] if first else [todo[i:i + size] for i in range(0, len(todo), size)]
            calls = [("survey", self._survey_params(chunk, 1.0 if first else 5.0), self.config.rpc_timeout_s) for chunk in chunks]
            answers = self.map(calls, seed=todo[0])
            for answer in answers:
                rows = _SURVEYS.validate_python(answer)
                if not rows:
                    raise ValueError("the worker returned an empty survey")
                for row in rows:
                    if row.seed in self.index and row.seed not in self.surveys:
                        self.surveys[row.seed] = row
                        self._observe_survey(row)
            self.check_hard_budget()

    def _survey_params(self, chunk: list[int], deadline_s: float) -> dict[str, Any]:
        c = self.config
        return {"seeds": chunk, "deadline_s": deadline_s,
                "parrot": [s for s in chunk if self.index[s] < c.leak_seeds],
                "masked": [s for s in chunk if self.index[s] < c.diversity_seeds],
                "world": [s for s in chunk if self.index[s] < c.world_seeds]}

    def _chunk(self, count: int) -> int:
        lanes = max(1, len(self.lanes.envs))
        return max(1, min(BATCH, math.ceil(count / lanes)))

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

    def play(self, seed: int, turns: list[Any], templates: bool = False, where: str = "an episode", **extra: Any) -> EpisodeSummary:
        return self.play_many([(seed, turns)], templates, where, **extra)[0]

    def play_many(self, items: list[tuple[int, list[Any]]], templates: bool = False, where: str = "an episode",
                  **extra: Any) -> list[EpisodeSummary]:
        """Episodes in batches over the lanes; each one observed (reward, timings, errors), in the order asked.
        ``extra`` goes with every episode (``with_messages``, ``truth_check``)."""
        if not items:
            return []
        size = self._chunk(len(items))
        chunks = [items[i:i + size] for i in range(0, len(items), size)]
        calls = []
        for chunk in chunks:
            params = {"episodes": [{"seed": s, "turns": t, "templates": templates, **extra} for s, t in chunk],
                      "with_messages": bool(extra.get("with_messages"))}
            calls.append(("episodes", params, min(self.config.rpc_timeout_s * 2, sum(self.episode_timeout(len(t)) for _, t in chunk))))
        out: list[EpisodeSummary] = []
        for chunk, answer in zip(chunks, self.map(calls, seed=items[0][0], actions=items[0][1])):
            results = _EPISODES.validate_python(answer)
            if len(results) != len(chunk):
                raise ValueError(f"asked for {len(chunk)} episodes, the worker returned {len(results)}")
            for (seed, turns), result in zip(chunk, results):
                self.episodes_run += 1
                self._observe(seed, result.actions if result.actions is not None else turns, result, where)
                out.append(result)
        return out

    def messages(self, seed: int, actions: list[Any]) -> tuple[EpisodeSummary, list[dict[str, Any]]]:
        """Replay resolved actions on lane 0 with the transcript: (summary, messages)."""
        answer = self.call("episode", {"seed": seed, "turns": actions, "with_messages": True}, self.episode_timeout(len(actions)),
                           seed=seed, actions=actions)
        summary = EpisodeSummary.model_validate(answer)
        messages = answer.get("messages") if isinstance(answer, dict) else None
        return summary, [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []

    def _observe(self, seed: int, actions: list[Any], result: EpisodeSummary, where: str) -> None:
        if self.reward_is_bad(result.reward):
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
                    f"one step took {ms:.0f} ms, over {self.config.budget_max_factor:g}x the step budget of "
                    f"{self.config.step_budget_ms:.0f} ms (confirmed by replaying it)",
                    Counterexample(seed=seed, actions=replay, detail=f"step {index + 1} took {ms:.0f} ms"),
                    figure=f"step: max {ms:.0f} ms",
                )

    def reward_range(self) -> tuple[float, float]:
        return (min(self.rewards), max(self.rewards)) if self.rewards else (float("nan"), float("nan"))

    def retime(self, timing: Timing) -> float:
        """Measure a slow call once more: a stray pause is not a slow env."""
        if timing.kind == "generate":
            return float(self.call("generate", {"seed": timing.seed}, self.config.rpc_timeout_s, seed=timing.seed)["generate_ms"])
        params = {"seed": timing.seed, "turns": timing.actions, "with_messages": False}
        result = EpisodeSummary.model_validate(
            self.call("episode", params, self.episode_timeout(len(timing.actions)), seed=timing.seed, actions=timing.actions)
        )
        if timing.kind == "reset":
            return result.reset_ms
        return result.step_ms[-1] if len(result.step_ms) == len(timing.actions) else timing.ms

    # --- calls ---------------------------------------------------------------------------------------
    def fresh_call(self, run: Callable[[], Any], seed: int | None = None, actions: list[Any] | None = None) -> Any:
        """A call on the fresh worker (reset and step, as training): a hang is a budget verdict here too, in the
        env's own time (the gate opens its workers with :func:`~factory.validation.envclock.wall_limit` of wall time)."""
        limit = self.config.rpc_timeout_s
        try:
            answer, why = timed_call(self.fresh_env().worker, lambda _: run(), limit, self.config.starved_wait_s)
            detail = f"killed after {limit:.1f} s of its own time"
        except WorkerTimeout as exc:
            why, detail = "hang", str(exc)[:300]
        if why is None:
            return answer
        if why == "starved":
            raise MachineStarved(self._starved("reset or step", limit))
        raise BudgetExceeded(
            f"a reset or step did not finish within {limit:.1f} s of the env's own time in a fresh worker: the env hangs",
            Counterexample(seed=seed, actions=list(actions or []), detail=detail),
            figure=f"step > {limit:.1f} s",
        )

    def call(self, method: str, params: dict[str, Any], timeout_s: float, seed: int | None = None, actions: list[Any] | None = None) -> Any:
        return self.call_worker(self.env.worker, method, params, timeout_s, seed, actions)

    def map(self, calls: list[tuple[str, dict[str, Any], float]], seed: int | None = None, actions: list[Any] | None = None) -> list[Any]:
        """Calls spread over the lanes, answers in the order asked."""
        def invoke(worker: Any, method: str, params: dict[str, Any], timeout: float) -> Any:
            if method == "survey":  # which worker saw each seed first (determinism replays it under another hash seed)
                self.surveyed_by.update((int(s), worker) for s in params.get("seeds", []))
            return self.call_worker(worker, method, params, timeout, seed, actions)

        return self.lanes.map(calls, invoke)

    def call_worker(
        self, worker: Any, method: str, params: dict[str, Any], timeout_s: float, seed: int | None = None, actions: list[Any] | None = None
    ) -> Any:
        """A call with ``timeout_s`` of the env's own time (:mod:`factory.validation.envclock`): a hang is a budget
        verdict; a worker the machine gives no CPU is :class:`MachineStarved`, never the env's failure."""
        wait, clocked = self.config.starved_wait_s, EnvClock.of(worker) is not None
        try:
            answer, why = timed_call(worker, lambda limit: worker.call(method, params, timeout_s=limit), timeout_s, wait)
        except WorkerTimeout as exc:
            if clocked:  # past even the starved wait, and no sample said the env used its time
                raise MachineStarved(self._starved(method, timeout_s)) from exc
            why = "hang"
            detail = str(exc)[:300]
        else:
            if why is None:
                return answer
            detail = f"killed after {timeout_s:.1f} s of its own time" if why == "hang" else ""
        if why == "starved":
            raise MachineStarved(self._starved(method, timeout_s))
        raise BudgetExceeded(
            f"{method} did not finish within {timeout_s:.1f} s of the env's own time (CPU or sleep, not waiting for a CPU): "
            "the env hangs or is far too slow",
            Counterexample(seed=seed, actions=list(actions or []), detail=detail),
            figure=f"{method} > {timeout_s:.1f} s",
        )

    def _starved(self, method: str, timeout_s: float) -> str:
        return (f"machine starved: the env's worker got no CPU (or was stopped) for {self.config.starved_wait_s:.0f} s past "
                f"the {timeout_s:.1f} s a {method} call may take; the env was not judged: rerun on a less loaded machine "
                "or with --set starved_wait_s=N")

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
                    f"{kind} takes {median:.0f} ms (median of {len(values)}), budget {self.budget_of(kind):.0f} ms",
                    slowest.counterexample(),
                    figure=f"{kind}: median {median:.0f} ms, max {slowest.ms:.0f} ms",
                )
