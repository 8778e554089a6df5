"""The gate's statistics: confidence intervals for the figures it compares with thresholds, and the decision.

A figure measured on a random draw of seeds (a share of seeds, a mean reward) is an estimate; comparing the
estimate with a threshold flips the verdict with the draw when the env sits near the line. So every thresholded
figure is decided here from its interval: *fail* when the interval lies wholly on the wrong side of the
threshold, *pass* when it lies wholly on the right side (the threshold itself counts as right, as the point
rule did), and *inconclusive* when it straddles the line after every seed the check may draw (the cap).

Intervals: Clopper-Pearson (exact, conservative) for shares of seeds; Student's t with the delta method for
a ratio of means (an exploit's mean reward over the reference's). Each bound is one-sided at ``alpha``; a check
may look at its figure more than once as it draws more seeds (a sequential test), so each look spends
``alpha / looks`` (Bonferroni): the chance of a wrong pass or a wrong fail over every look stays at most ``alpha``.

Host side, stdlib only (the regularized incomplete beta function is computed here, by Lentz's continued fraction).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, Sequence

Outcome = Literal["pass", "fail", "inconclusive"]
Side = Literal["max", "min"]
"""``max``: the figure may be at most the threshold (an exploit's share); ``min``: at least (solved seeds)."""


# --- special functions ---------------------------------------------------------------------------------------
def _betacf(a: float, b: float, x: float) -> float:
    tiny, eps = 1e-300, 3e-16
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((a + m2 - 1) * (a + m2)), -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def _invert(f, target: float, low: float, high: float) -> float:  # type: ignore[no-untyped-def]
    """x in [low, high] with increasing f(x) = target, by bisection (60 halvings: below 1e-15 of the range)."""
    for _ in range(60):
        mid = (low + high) / 2
        if f(mid) < target:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def beta_ppf(q: float, a: float, b: float) -> float:
    return _invert(lambda x: betainc(a, b, x), q, 0.0, 1.0)


def t_cdf(t: float, df: float) -> float:
    tail = 0.5 * betainc(df / 2, 0.5, df / (df + t * t))
    return 1 - tail if t >= 0 else tail


@lru_cache(maxsize=4096)
def t_ppf(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t with ``df`` degrees of freedom."""
    if q == 0.5:
        return 0.0
    if q < 0.5:
        return -t_ppf(1 - q, df)
    high = 1.0
    while t_cdf(high, df) < q:
        high *= 2
    return _invert(lambda t: t_cdf(t, df), q, 0.0, high)


# --- intervals -----------------------------------------------------------------------------------------------
@lru_cache(maxsize=16384)  # a pure function the exploit search asks again and again for the same counts
def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """Bounds on a share from ``k`` successes in ``n`` trials, each wrong with chance at most ``alpha``."""
    if n <= 0:
        return 0.0, 1.0
    low = 0.0 if k <= 0 else beta_ppf(alpha, k, n - k + 1)
    high = 1.0 if k >= n else beta_ppf(1 - alpha, k + 1, n - k)
    return low, high


def mean_interval(values: Sequence[float], alpha: float) -> tuple[float, float, float]:
    """(mean, low, high): Student's t bounds on a mean, each one-sided at ``alpha``; one value bounds nothing."""
    n = len(values)
    if n == 0:
        return math.nan, -math.inf, math.inf
    mean = statistics.fmean(values)
    if n == 1:
        return mean, -math.inf, math.inf
    half = t_ppf(1 - alpha, n - 1) * statistics.stdev(values) / math.sqrt(n)
    return mean, mean - half, mean + half


def ratio_interval(numerators: Sequence[float], denominators: Sequence[float], alpha: float) -> tuple[float, float, float]:
    """(ratio, low, high) for mean(numerators) / mean(denominators), paired by seed (delta method, t bounds)."""
    n = len(numerators)
    base = statistics.fmean(denominators) if n else 0.0
    if n == 0 or base <= 0:
        return 0.0, -math.inf, math.inf
    ratio = statistics.fmean(numerators) / base
    if n == 1:
        return ratio, -math.inf, math.inf
    residuals = [(x - ratio * y) / base for x, y in zip(numerators, denominators)]
    half = t_ppf(1 - alpha, n - 1) * statistics.stdev(residuals) / math.sqrt(n)
    return ratio, ratio - half, ratio + half


# --- decisions -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Decision:
    """A thresholded figure decided from its interval; ``text()`` is what reports print."""

    outcome: Outcome
    estimate: float
    low: float
    high: float
    threshold: float
    side: Side
    n: int
    label: str = "share"

    @property
    def failed(self) -> bool:
        return self.outcome == "fail"

    @property
    def inconclusive(self) -> bool:
        return self.outcome == "inconclusive"

    def text(self) -> str:
        """e.g. ``share 0.49 [0.41, 0.57] against at most 0.50``."""
        low, high = max(self.low, -9.99), min(self.high, 9.99)
        bound = "at most" if self.side == "max" else "at least"
        return f"{self.label} {self.estimate:.2f} [{low:.2f}, {high:.2f}] against {bound} {self.threshold:.2f}"

    def as_data(self) -> dict[str, object]:
        return {"outcome": self.outcome, "estimate": round(self.estimate, 4), "low": round(max(self.low, -1e9), 4),
                "high": round(min(self.high, 1e9), 4), "threshold": self.threshold, "side": self.side, "n": self.n}


def decide(estimate: float, low: float, high: float, threshold: float, side: Side, n: int, label: str = "share") -> Decision:
    """Fail when the interval is wholly beyond the threshold, pass when wholly within (the threshold is within),
    else inconclusive."""
    if side == "max":
        outcome: Outcome = "fail" if low > threshold else "pass" if high <= threshold else "inconclusive"
    else:
        outcome = "fail" if high < threshold else "pass" if low >= threshold else "inconclusive"
    return Decision(outcome, estimate, low, high, threshold, side, n, label)


def decide_share(k: int, n: int, threshold: float, side: Side, alpha: float, label: str = "share") -> Decision:
    """A share of ``k`` in ``n`` seeds against ``threshold``. A threshold of 1 on a ``min`` side (every seed) or 0 on
    a ``max`` side (no seed) is decided exactly: one seed against it is a proof, none is a pass (an interval never
    reaches the edge)."""
    low, high = clopper_pearson(k, n, alpha)
    estimate = k / n if n else math.nan
    if n and side == "min" and threshold >= 1:
        return Decision("pass" if k >= n else "fail", estimate, low, high, threshold, side, n, label)
    if n and side == "max" and threshold <= 0:
        return Decision("pass" if k <= 0 else "fail", estimate, low, high, threshold, side, n, label)
    return decide(estimate, low, high, threshold, side, n, label)


def decide_ratio(numerators: Sequence[float], denominators: Sequence[float], threshold: float, side: Side, alpha: float,
                 label: str = "mean share") -> Decision:
    ratio, low, high = ratio_interval(numerators, denominators, alpha)
    return decide(ratio, low, high, threshold, side, len(numerators), label)


def looks(first: int, cap: int, factor: int = 2) -> list[int]:
    """The seed counts a sequential test looks at: ``first``, times ``factor`` each look, and the cap."""
    first = max(1, min(first, cap))
    out = [first]
    while out[-1] < cap:
        out.append(min(cap, out[-1] * factor))
    return out


def fewest_to_pass(threshold: float, alpha: float) -> int:
    """The fewest seeds on which a ``min``-side share (k of n, at least ``threshold``) can pass at all: every one a
    success, with its Clopper-Pearson low bound ``alpha ** (1 / n)`` reaching the threshold. A look at fewer seeds
    can only fail or stay inconclusive."""
    if threshold <= 0 or threshold >= 1:
        return 1  # decided exactly (decide_share): one seed can pass
    n = max(1, math.ceil(math.log(alpha) / math.log(threshold)))
    while n > 1 and clopper_pearson(n - 1, n - 1, alpha)[0] >= threshold:
        n -= 1
    while clopper_pearson(n, n, alpha)[0] < threshold:
        n += 1
    return n


def passable_looks(schedule: Sequence[int], threshold: float, alpha: float) -> list[int]:
    """A ``min``-side schedule of looks with each look below :func:`fewest_to_pass` raised to it (capped at the
    last look): a look that could not pass an env that passes every seed only delays the look that can. Never
    more looks than ``schedule``, so the Bonferroni split planned for it still holds."""
    cap = schedule[-1]
    need = fewest_to_pass(threshold, alpha)
    return sorted({min(cap, max(n, need)) for n in schedule})


def sequential(counts: Sequence[tuple[int, int]], threshold: float, side: Side, alpha: float, max_looks: int,
               label: str = "share") -> Decision:
    """Decide a share looked at after each ``(k, n)`` in turn (more seeds each time), each look at
    ``alpha / max_looks``: the first look whose interval clears the threshold decides; the last look otherwise
    (inconclusive if it still straddles). ``counts`` holds at most ``max_looks`` looks."""
    if not counts:
        raise ValueError("a sequential test needs at least one look")
    if len(counts) > max_looks:
        raise ValueError(f"{len(counts)} looks, planned for at most {max_looks}")
    decision = None
    for k, n in counts:
        decision = decide_share(k, n, threshold, side, alpha / max_looks, label)
        if not decision.inconclusive:
            return decision
    assert decision is not None
    return decision
