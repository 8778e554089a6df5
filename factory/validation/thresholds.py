"""Every threshold the gate compares a figure with, in one table, and the error rate its decisions keep.

The values live in :class:`~schemas.validation.ValidationConfig` (``--set KEY=VALUE`` overrides them); this
table says, for each, which figure it bounds, on which side, which seed count caps the figure, and how it is
decided (:mod:`factory.validation.stats`): from a confidence interval, so a verdict is a property of the env,
not of the draw. The stated error rates (README, "Gate verdicts and their error rates"):

- a figure whose interval lies beyond its threshold fails; the chance that happens to an env whose true figure
  is within the threshold is at most ``ALPHA`` (each look at ``ALPHA / MAX_LOOKS``, one-sided, Bonferroni);
- a figure whose interval lies within its threshold passes; the chance that happens to an env whose true figure
  is beyond it is at most ``ALPHA`` too;
- a figure whose interval still straddles the threshold after the check's cap of seeds is *inconclusive*, with
  the figure, its interval, the threshold and the ``--set`` that draws more seeds;
- two edge rules need no interval: a threshold of "every seed" (solvability) fails on one failing seed and
  passes on none; a "may match on few seeds" figure with no seed against it (an exploit that never matched)
  passes: bounding a share below 0.10 at this error rate takes 42 seeds with none against it, more than an
  exploit is played on, and nothing counts against the env.

Shares of seeds use exact (conservative) Clopper-Pearson bounds; a mean reward ratio uses Student's t with the
delta method, whose rate is approximate (tests/gate/test_stats.py checks it by simulation).

A check compares several figures (the exploit search one per exploit): its own chance of a wrong verdict is at
most ``ALPHA`` times the figures it decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from factory.validation.stats import Decision, Side, decide_ratio, decide_share, passable_looks
from schemas.validation import CheckResult, ValidationConfig

ALPHA = 0.05
"""Chance of a wrong pass, and of a wrong fail, per decided figure, over all its looks."""
MORE_LOOKS = 3
"""Further looks the exploit search takes at a figure still inconclusive after its own rounds, each on as many new
seeds again as the exploits concerned have (until they have ``max_seeds``)."""
MAX_LOOKS = 4
"""Looks a sequential decision may take: necessity and GRPO signal look at their seeds and at twice as many up to
three times, sensitivity at four times as many up to twice (a look on fewer seeds than an all-pass needs to clear
its threshold is moved up to that many: ``passable``); the exploit search decides after its rounds of seeds
and takes up to ``MORE_LOOKS`` more."""
ALPHA_PER_LOOK = ALPHA / MAX_LOOKS


@dataclass(frozen=True)
class Threshold:
    field: str  # the ValidationConfig field holding the value
    side: Side  # "max": the figure may be at most the value; "min": at least
    seeds_field: str  # the ValidationConfig field that caps the seeds behind the figure (named in "rerun with")
    label: str  # how the figure reads in a report


THRESHOLDS: dict[str, Threshold] = {t.field: t for t in [
    Threshold("solvability_min_share", "min", "solvability_seeds", "share of seeds the reference solves"),
    Threshold("necessity_min_share", "min", "necessity_seeds", "share of seeds the skipping agent fails"),
    Threshold("sensitivity_min_share", "min", "sensitivity_seeds", "share of seeds the mutant falls"),
    Threshold("exploit_max_share", "max", "max_seeds", "mean reward share"),
    Threshold("exploit_max_match_share", "max", "max_seeds", "match share"),
    Threshold("grpo_min_informative_share", "min", "grpo_seeds", "informative group share"),
    Threshold("grpo_max_success_share", "max", "grpo_seeds", "success share"),
]}


def _threshold(config: ValidationConfig, name: str) -> tuple[Threshold, float]:
    entry = THRESHOLDS[name]
    return entry, float(getattr(config, entry.field))


def judge_share(config: ValidationConfig, name: str, k: int, n: int, label: str | None = None) -> Decision:
    """``k`` of ``n`` seeds against the named threshold (see the module docstring for the rules)."""
    entry, value = _threshold(config, name)
    if entry.side == "max" and k == 0 and n > 0:  # nothing against it: passes (no interval bounds it below a small share)
        decision = decide_share(0, n, value, "max", ALPHA_PER_LOOK, label or entry.label)
        return Decision("pass", decision.estimate, decision.low, decision.high, value, "max", n, decision.label)
    return decide_share(k, n, value, entry.side, ALPHA_PER_LOOK, label or entry.label)


def passable(config: ValidationConfig, name: str, schedule: Sequence[int]) -> list[int]:
    """The looks of a ``min``-side sequential test, none before the first at which the figure could pass
    (:func:`~factory.validation.stats.passable_looks`)."""
    entry, value = _threshold(config, name)
    return passable_looks(schedule, value, ALPHA_PER_LOOK) if entry.side == "min" else list(schedule)


def judge_ratio(config: ValidationConfig, name: str, numerators: Sequence[float], denominators: Sequence[float],
                label: str | None = None) -> Decision:
    """mean(numerators) / mean(denominators), paired by seed, against the named threshold."""
    entry, value = _threshold(config, name)
    return decide_ratio(numerators, denominators, value, entry.side, ALPHA_PER_LOOK, label or entry.label)


def rerun_hint(config: ValidationConfig, name: str) -> str:
    """The ``--set`` that gives an inconclusive figure more seeds (four times the setting: its cap grows with it)."""
    entry = THRESHOLDS[name]
    now = int(getattr(config, entry.seeds_field))
    return f"rerun with --set {entry.seeds_field}={max(4 * now, now + 16)}"


def inconclusive_message(config: ValidationConfig, name: str, decision: Decision, what: str) -> str:
    """One line: ``inconclusive: <what>: share 0.49 [0.41, 0.57] against at most 0.50; rerun with --set ...``."""
    return f"inconclusive: {what}: {decision.text()} after {decision.n} seeds; {rerun_hint(config, name)}"


def settle(result: CheckResult, config: ValidationConfig, decided: Sequence[tuple[str, str, Decision]]) -> CheckResult:
    """Record every decided figure (``(threshold name, what, decision)``) on the result, and turn a result that
    failed nothing into *inconclusive* when a figure still straddles its threshold (the message says which)."""
    for name, what, decision in decided:
        result.intervals[what] = {**decision.as_data(), "threshold_name": name}
    unsure = [(name, what, d) for name, what, d in decided if d.inconclusive]
    if result.passed and unsure:
        result.passed, result.inconclusive = False, True
        result.message = "; ".join(inconclusive_message(config, name, d, what) for name, what, d in unsure[:3])
    return result
