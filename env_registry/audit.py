"""Host side: the reward audit. A share of the episodes an env plays is replayed, action for action, in a FRESH
worker (a new sandbox that has run no episode); any reward, ending or observation that differs stops the caller
with one line naming the env, the seed, both rewards and a command that reproduces the fresh side.

Why: an env is deterministic by contract (seed plus actions), and the gate certifies it on fresh-ish workers. An
env that tells a long-lived training worker from the gate's (by worker age, episode count, state it hid in the
process, or by chance on a few episodes) pays one thing to training and another to a fresh worker. Training's
pool (``trainer.envpool``), ``factory eval --env`` (through the same pool) and every ``gym.make`` env audit
themselves here. The episodes audited are drawn on the host after each episode has ended, from a generator the
env cannot see, so the env cannot tell which of its episodes will be checked.

Detection: with share ``s`` and an env that cheats on a fraction ``f`` of its episodes, each episode is caught
with probability ``s*f``, so P(caught within n episodes) = 1 - (1 - s*f)^n (:func:`detection_probability`).
With the default share 0.25, an env that cheats on 5% of its episodes is caught within 239 episodes with 95%
probability (under 8 iterations of training's default 4 x 8 episodes); one that cheats on every episode once its
worker is old is caught within 11 of those episodes (:func:`episodes_to_catch`).

A pure function of the seed (an env that pays differently on training's seed range but the same on every
worker) replays identically: that is the gate's to catch, by drawing its seeds as training does.

Reproduce: ``python -m env_registry.audit FILE`` replays the recorded episode on a fresh worker and prints the
reward recorded in the run beside the fresh one (exit 1 when they differ).
"""

from __future__ import annotations

import json
import math
import os
import random
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from schemas.errors import FactoryError

SHARE_ENV_VAR = "TRACE_FACTORY_AUDIT_SHARE"
"""Audit share of ``gym.make`` envs when the ``audit=`` kwarg is not given (0 turns it off)."""
DEFAULT_SHARE = 0.25
"""The default share of episodes replayed on a fresh worker (training, ``factory eval --env``, ``gym.make``)."""
REPLAY_TRIES = 2
"""Fresh workers an audited episode is replayed on before a failed replay counts as a mismatch (a host's passing
fault gets a second worker; an env that fails on every fresh worker fails on both)."""


def detection_probability(share: float, cheat_fraction: float, episodes: int) -> float:
    """P(an env that cheats on ``cheat_fraction`` of its episodes is caught within ``episodes`` episodes)."""
    return 1.0 - (1.0 - share * cheat_fraction) ** episodes


def episodes_to_catch(share: float, cheat_fraction: float, confidence: float = 0.95) -> int:
    """The fewest episodes after which such an env is caught with probability ``confidence``."""
    p = share * cheat_fraction
    if p <= 0:
        raise ValueError("an audit share or cheat fraction of 0 never catches anything")
    if p >= 1:
        return 1
    return math.ceil(math.log(1 - confidence) / math.log(1 - p))


def share_from_env(value: float | None) -> float:
    """``value``, else ``$TRACE_FACTORY_AUDIT_SHARE``, else :data:`DEFAULT_SHARE`; always in [0, 1]."""
    if value is None:
        raw = os.environ.get(SHARE_ENV_VAR, "").strip()
        try:
            value = float(raw) if raw else DEFAULT_SHARE
        except ValueError:
            raise ValueError(f"{SHARE_ENV_VAR} must be a number from 0 to 1, got {raw!r}") from None
    if isinstance(value, bool) or not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"the audit share must be a number from 0 to 1 (0 turns the audit off), got {value!r}")
    return float(value)


@dataclass
class Step:
    """What one step answered: the parts a deterministic env must reproduce."""

    observation: str
    reward: float
    terminated: bool
    truncated: bool


@dataclass
class Episode:
    """One played episode: enough to replay it and to judge the replay. ``cut`` is true when the caller ended it
    from outside (``TraceEnv.truncate``) after the recorded actions."""

    seed: int
    first_observation: str
    actions: list[Any] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    cut: bool = False

    @property
    def reward(self) -> float | None:
        return self.steps[-1].reward if self.steps else None


def replay(env: Any, episode: Episode) -> Episode:
    """``episode`` played again on ``env`` (a Gymnasium-style env on a fresh worker); closes ``env``."""
    try:
        first, _ = env.reset(seed=int(episode.seed))
        fresh = Episode(episode.seed, str(first), list(episode.actions), cut=episode.cut)
        last = len(episode.actions) - 1
        for index, action in enumerate(episode.actions):
            if episode.cut and index == last:
                observation, reward, terminated, truncated, _ = env.unwrapped.truncate()
            else:
                observation, reward, terminated, truncated, _ = env.step(action)
            fresh.steps.append(Step(str(observation), float(reward), bool(terminated), bool(truncated)))
            if terminated or truncated:
                break
        return fresh
    finally:
        env.close()


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def difference(recorded: Episode, fresh: Episode) -> str | None:
    """The first thing the fresh replay answered differently, in words; None when it reproduced the episode."""
    if recorded.first_observation != fresh.first_observation:
        return "the first observation differs"
    for index, (a, b) in enumerate(zip(recorded.steps, fresh.steps), start=1):
        if not _same(a.reward, b.reward):
            return f"step {index}'s reward differs"
        if (a.terminated, a.truncated) != (b.terminated, b.truncated):
            return f"step {index} ended differently (terminated/truncated {a.terminated}/{a.truncated} vs {b.terminated}/{b.truncated})"
        if a.observation != b.observation:
            return f"step {index}'s observation differs"
    if len(recorded.steps) != len(fresh.steps):
        return f"the episode lasted {len(recorded.steps)} steps in the run but {len(fresh.steps)} on a fresh worker"
    return None


class AuditMismatch(FactoryError):
    """A replay on a fresh worker did not reproduce an episode: the env does not pay what it pays a fresh worker."""

    def __init__(self, message: str, seed: int, recorded: float | None, fresh: float | None, file: Path | None) -> None:
        super().__init__(message)
        self.seed, self.recorded, self.fresh, self.file = seed, recorded, fresh, file


def _reward(value: float | None) -> str:
    return "no reward" if value is None else f"{value:g}"


class Auditor:
    """Replays a ``share`` of the episodes :meth:`offer` is given on fresh envs from ``make_fresh``.

    ``background``: replays run on one thread of their own, concurrently with the caller's work, and
    :meth:`check` reports a mismatch (waiting for pending replays when asked); otherwise :meth:`offer` replays
    at once and raises. ``identity`` (env id, registry, capability, version, sandbox, max_steps) goes into the
    reproduction file written to ``folder``. A replay that fails (the fresh worker died, timed out or could not
    start) is counted in ``errors`` and tried once more on another fresh worker; when that fails too, the episode
    the run played is one no fresh worker reproduces, which is a mismatch: an env that ends its own process
    whenever it is a fresh worker's first episode (what every replay is) would otherwise escape every audit.
    """

    def __init__(self, make_fresh: Callable[[], Any], share: float, identity: dict[str, Any],
                 folder: str | Path | None = None, background: bool = True, rng: random.Random | None = None) -> None:
        self.make_fresh, self.share, self.identity = make_fresh, share_from_env(share), dict(identity)
        self.folder = Path(folder) if folder is not None else None
        self.rng = rng or random.Random(int.from_bytes(os.urandom(8), "big"))
        self.background = background
        self.offered = self.audited = self.errors = 0
        self.seconds = 0.0
        self.first_error: str | None = None
        self.mismatch: AuditMismatch | None = None
        self._pending: list[Future[None]] = []
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None

    @property
    def env_id(self) -> str:
        return str(self.identity.get("env_id", "the env"))

    def offer(self, episode: Episode) -> None:
        """An episode the caller has finished; it is replayed with probability ``share``."""
        if self.share <= 0 or not episode.steps:
            return
        self.offered += 1
        if self.rng.random() >= self.share:
            return
        if not self.background:
            self._audit(episode)
            self.check()
            return
        with self._lock:
            if self._executor is None:  # one thread: it starts and closes every fresh worker it uses
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="trace-audit")
            self._pending = [f for f in self._pending if not f.done()]
            self._pending.append(self._executor.submit(self._audit, episode))

    def _audit(self, episode: Episode) -> None:
        if self.mismatch is not None:  # the verdict is in: no more replays
            return
        fresh, failure = None, ""
        for _ in range(REPLAY_TRIES):
            fresh, failure = self._replay(episode)
            if fresh is not None:
                break
        with self._lock:
            self.audited += 1
        if fresh is None:  # no fresh worker reproduced the episode the run played
            fresh = Episode(episode.seed, "", list(episode.actions), cut=episode.cut)
            problem = f"the replay failed on {REPLAY_TRIES} fresh workers: {failure}"
        else:
            problem = difference(episode, fresh)
        if problem is not None:
            found = self._mismatch(episode, fresh, problem)
            with self._lock:
                self.mismatch = self.mismatch or found

    def _replay(self, episode: Episode) -> tuple[Episode | None, str]:
        """One replay on a new fresh worker: the episode, or None and why it failed (counted in ``errors``)."""
        started = time.perf_counter()
        try:
            return replay(self.make_fresh(), episode), ""
        except Exception as exc:  # noqa: BLE001 - the fresh worker failed: tried again, then a mismatch
            failure = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
            with self._lock:
                self.errors += 1
                self.first_error = self.first_error or failure
            return None, failure
        finally:
            with self._lock:
                self.seconds += time.perf_counter() - started

    def _mismatch(self, episode: Episode, fresh: Episode, problem: str) -> AuditMismatch:
        file = self._write(episode, fresh, problem)
        how = f"python -m env_registry.audit {file}" if file is not None else "(the episode could not be written)"
        why = ("the env's rewards depend on more than its seed and actions, so they cannot be trusted for training"
               if fresh.steps else "an env whose episodes no fresh worker replays cannot be trusted for training (if "
               "the sandbox itself fails, 'factory sandbox status' says so)")
        line = (f"reward audit: {self.env_id} seed {episode.seed} paid {_reward(episode.reward)} in this run but "
                f"{_reward(fresh.reward)} when replayed action for action on a fresh worker ({problem}); {why}; "
                f"reproduce: {how}")
        return AuditMismatch(line, episode.seed, episode.reward, fresh.reward, file)

    def _write(self, episode: Episode, fresh: Episode, problem: str) -> Path | None:
        folder = self.folder or Path(tempfile.gettempdir()) / "trace-factory-audit"
        data = {**self.identity, "seed": episode.seed, "difference": problem,
                "recorded": asdict(episode), "fresh": asdict(fresh)}
        try:
            from env_registry.hosted import action_to_json

            data["recorded"]["actions"] = data["fresh"]["actions"] = [action_to_json(a) for a in episode.actions]
            folder.mkdir(parents=True, exist_ok=True)
            handle, name = tempfile.mkstemp(prefix=f"audit-seed{episode.seed}-", suffix=".json", dir=folder)
            with os.fdopen(handle, "w") as out:
                json.dump(data, out, indent=1, default=str)
            return Path(name)
        except (OSError, TypeError, ValueError):
            return None

    def check(self, wait: bool = False) -> None:
        """Raise the first mismatch found; ``wait``: after every pending replay has ended."""
        if wait:
            with self._lock:
                pending = list(self._pending)
            for future in pending:
                if self.mismatch is not None:
                    break
                future.result()
        if self.mismatch is not None:
            raise self.mismatch

    def close(self) -> None:
        """Stop taking replays; a replay under way ends (its worker closes) before this returns."""
        if self._executor is not None:
            for future in self._pending:
                future.cancel()
            self._executor.shutdown(wait=True)
            self._executor = None


def reproduce(path: str | Path) -> int:
    """Replay an audit file's episode on a fresh worker; print the recorded and fresh rewards. 0: they agree."""
    import gymnasium as gym

    from env_registry.registration import register_all

    data = json.loads(Path(path).read_text())
    if data.get("registry"):
        register_all(data["registry"], repoint=True)
    kwargs: dict[str, Any] = {"disable_env_checker": True, "audit": 0.0}
    if data.get("max_steps"):
        kwargs["max_steps"] = int(data["max_steps"])
    if data.get("sandbox"):
        kwargs["sandbox"] = data["sandbox"]
    recorded = data["recorded"]
    episode = Episode(int(recorded["seed"]), recorded["first_observation"], recorded["actions"],
                      [Step(**s) for s in recorded["steps"]], bool(recorded.get("cut")))
    fresh = replay(gym.make(data["env_id"], **kwargs), episode)
    problem = difference(episode, fresh)
    print(f"{data['env_id']} seed {episode.seed}: recorded reward {_reward(episode.reward)}, fresh worker "
          f"{_reward(fresh.reward)}: " + (problem or "the fresh worker reproduces the recorded episode"))
    return 0 if problem is None else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python -m env_registry.audit AUDIT_FILE.json", file=sys.stderr)
        sys.exit(2)
    sys.exit(reproduce(sys.argv[1]))
