"""Run the validation gate on one env source: static analysis, then every check inside sandboxes.

The checks run on lanes of sandbox workers (:mod:`factory.validation.lanes`), one per core, each started
exactly as training starts an env worker, plus one fresh worker driven only through ``reset`` and ``step``
for the determinism check; results do not depend on how many lanes there are. The seeds are drawn at random
on every run from ``run_seed`` (reported; ``--set run_seed=N`` repeats a run).

The gate never raises for a bad env. Every exception inside a check becomes a failed check with a
message; a worker that dies is restarted for the next check; a call that hangs (in the env's own time:
:mod:`factory.validation.envclock`), or timings far over budget, end the gate at once with the budget verdict
(the checks not run are reported as skipped); a machine that gives the env no CPU ends it with status
``starved`` and no verdict. A figure whose interval straddles its threshold makes its check inconclusive
(:mod:`factory.validation.thresholds`); the report's status is then ``inconclusive`` unless a check failed. Every
counterexample is replayed before it is reported, and says whether it reproduced.
"""

from __future__ import annotations

import hashlib
import math
import secrets
import time
from dataclasses import dataclass
from typing import Any, Callable

from env_registry.hosted import SandboxedEnv
from env_registry.policy import Policy
from factory.validation.calibration import CalibrationConfig, run_calibration
from factory.validation.envclock import wall_limit
from factory.validation.checks import SANDBOX_CHECKS, WORKER_FAILURES, BudgetExceeded, CheckContext, MachineStarved
from factory.validation.lanes import Kept, Lanes, default_lanes, opener
from factory.validation.static import check_source
from factory.validation.static import summary as static_summary
from sandbox import AUTO_ORDER, SandboxLimits, available_backends
from schemas.validation import CheckResult, Counterexample, EpisodeSummary, ValidationConfig, ValidationReport

ProgressCallback = Callable[[str, CheckResult | None], None]
"""Called with (check name, None) when a check starts and (check name, result) when it ends."""

CHECK_NAMES = ["static"] + [name for name, _ in SANDBOX_CHECKS]


def resolve_backend(backend: str) -> str:
    """The backend ``auto`` will pick here (the first of AUTO_ORDER whose probe passes), so the report names
    the sandbox the env really ran in, even when it failed to load; the name given otherwise."""
    if backend != "auto":
        return backend
    usable = available_backends()
    return next((name for name in AUTO_ORDER if usable.get(name) is None), backend)


@dataclass(frozen=True)
class Gate:
    """How the gate runs, as one object handed from the CLI through build and synthesis: its thresholds
    (``config``), the sandbox (``backend``, ``limits``), who hears about each check (``progress``) and the
    optional calibration (a ``calibration_policy`` with its ``calibration`` settings; reported, never required)."""

    config: ValidationConfig | None = None
    backend: str = "auto"
    limits: SandboxLimits | None = None
    progress: ProgressCallback | None = None
    calibration_policy: Policy | None = None
    calibration: CalibrationConfig | None = None


def validate_source(source: str, gate: Gate | None = None) -> ValidationReport:
    """Validate env source. Never raises for a bad env: every defect becomes a failed check."""
    gate = gate or Gate()
    config, backend, limits = gate.config or ValidationConfig(), gate.backend, gate.limits
    progress, calibration_policy, calibration = gate.progress, gate.calibration_policy, gate.calibration
    run_seed = config.run_seed if config.run_seed is not None else secrets.randbelow(2**31)
    notify = progress or (lambda name, result: None)
    started = time.perf_counter()
    results: dict[str, CheckResult] = {}

    def record(result: CheckResult, began: float | None = None) -> None:
        if began is not None:
            result.seconds = round(time.perf_counter() - began, 3)
        results[result.name] = result
        notify(result.name, result)

    def skip_rest(reason: str) -> None:
        for name in CHECK_NAMES:
            if name not in results:
                record(CheckResult(name=name, passed=False, skipped=True, message=f"not run: {reason}"))

    began = time.perf_counter()
    notify("static", None)
    findings = check_source(source)
    figure, message = static_summary(findings)
    record(CheckResult(name="static", passed=not findings, figure=figure, message=message), began)
    backend_name, warning = resolve_backend(backend), None
    capability = target = None
    env_info = None
    lanes_used, worker_cpu = 1, None
    starved: str | None = None
    if findings:
        skip_rest("the static check failed")
    else:
        began = time.perf_counter()
        notify("interface", None)
        # Calls the checks make have their own limits in the env's own time (CheckContext.call_worker); the wall
        # limit a worker is opened with only bounds a call on a starved machine (envclock.wall_limit).
        open_env = opener(source, backend_name, limits, config.load_timeout_s, wall_limit(config.rpc_timeout_s, config.starved_wait_s))
        try:
            main: SandboxedEnv | None = open_env()
        except WORKER_FAILURES as exc:
            main = None
            record(CheckResult(name="interface", passed=False, figure="did not load", message=f"env failed to load: {exc}"[:1000]), began)
            skip_rest("the env did not load")
        if main is not None:
            backend_name = main.backend
            warning = getattr(main.sandbox, "warning", None) or (
                "UNSANDBOXED: env code ran with the unsafe-subprocess backend" if getattr(main.sandbox, "unsafe", False) else None
            )
            env_info = dict(main.info)
            capability, target = env_info.get("capability"), env_info.get("target")
            lanes = Lanes(open_env, main, default_lanes(config.workers))
            fresh = Kept(open_env)
            ctx = CheckContext(lanes, config, run_seed, fresh=fresh.get)
            try:
                alive = _run_checks(ctx, open_env, record, notify, skip_rest)
                starved = ctx.starved
                lanes_used = len(lanes.envs)
                worker_cpu = _usage(lanes.envs + [k.env for k in [fresh, *ctx.spares] if k.env is not None])
                if alive:
                    _recheck(ctx, results)
                if calibration_policy is not None and alive:
                    began = time.perf_counter()
                    notify("calibration", None)
                    try:
                        result = run_calibration(ctx.env, calibration_policy, calibration, ctx.seeds[0])
                    except Exception as exc:  # advisory: a failing policy or env never takes the verdict down
                        result = CheckResult(name="calibration", passed=False, required=False, message=f"{type(exc).__name__}: {exc}"[:500])
                    record(result, began)
            finally:
                ctx.close()
                fresh.close()
                lanes.close()
                ctx.env.close()
    checks = [results[name] for name in CHECK_NAMES if name in results] + [r for n, r in results.items() if n not in CHECK_NAMES]
    passed = all(c.passed and not c.skipped for c in checks if c.required)
    unsure = any(c.inconclusive for c in checks if c.required)
    decisive = any(not c.passed and not c.skipped and not c.inconclusive for c in checks if c.required)
    status = "passed" if passed else "starved" if starved else "inconclusive" if unsure and not decisive else "failed"
    return ValidationReport(
        capability=capability,
        target=target,
        env_info=env_info,
        source_sha256=hashlib.sha256(source.encode()).hexdigest(),
        backend=backend_name,
        backend_warning=warning,
        passed=passed,
        status=status,
        starved=starved,
        checks=checks,
        config=config,
        seconds=round(time.perf_counter() - started, 3),
        run_seed=run_seed,
        off_target=bool(env_info and env_info.get("tool_domain")),
        workers=lanes_used,
        worker_cpu_s=worker_cpu,
    )


def _usage(envs: list[SandboxedEnv]) -> float | None:
    """CPU seconds the workers used, summed (None when one cannot say)."""
    total = 0.0
    for env in envs:
        try:
            answer = env.call("usage", {}, timeout_s=5)
            total += float(answer["cpu_s"])
        except Exception:  # a dead or hostile worker: the figure is a courtesy
            return None
    return round(total, 3)


def _run_checks(
    ctx: CheckContext,
    open_env: Callable[[], SandboxedEnv],
    record: Callable[[CheckResult, float | None], None],
    notify: ProgressCallback,
    skip_rest: Callable[[str], None],
) -> bool:
    """Every sandbox check in order; False when the gate had to stop (budget, or a worker that cannot be
    restarted)."""
    for index, (name, check) in enumerate(SANDBOX_CHECKS):
        began = time.perf_counter()
        if index:  # interface was announced before loading
            notify(name, None)
        try:
            result = check(ctx)
        except MachineStarved as exc:  # the machine, not the env: no verdict on it
            ctx.starved = str(exc)
            record(CheckResult(name=name, passed=False, skipped=True, message=str(exc)), began)
            skip_rest("the machine is starved (see the report's starved line)")
            return False
        except BudgetExceeded as exc:
            if name != "budget":
                record(CheckResult(name=name, passed=False, skipped=True, message="interrupted: the env is over its time budget (see budget)"), began)
            record(CheckResult(name="budget", passed=False, figure=exc.figure or "over budget", message=str(exc),
                               counterexample=exc.counterexample, seeds=len(ctx.surveys)), began)
            skip_rest("the env is over its time budget (see budget)")
            return False
        except WORKER_FAILURES as exc:
            result = CheckResult(
                name=name, passed=False, figure="env failed inside the sandbox",
                message=f"{type(exc).__name__}: {exc}"[:500],
                counterexample=Counterexample(detail=str(exc)[:500]),
            )
            ctx.lanes.replace_dead()
            if not ctx.env.worker.alive:  # a crashed worker cannot serve the next checks
                ctx.env.close()
                try:
                    ctx.env = open_env()
                except WORKER_FAILURES as again:
                    record(result, began)
                    skip_rest(f"the worker died and could not be restarted: {again}"[:300])
                    return False
        except Exception as exc:  # what came back from the sandbox is hostile: unusable data is the env's defect
            result = CheckResult(
                name=name, passed=False, figure="unusable result from the env",
                message=f"the gate could not use what the env returned: {type(exc).__name__}: {exc}"[:500],
            )
        record(result, began)
    return True


def _recheck(ctx: CheckContext, results: dict[str, CheckResult]) -> None:
    """Replay every counterexample that names a seed, actions and the reward they got, on lane 0, before it
    is reported: ``reproduced`` says whether the same reward came back (a counterexample that does not
    reproduce says so in its detail rather than pass for a proof)."""
    for result in results.values():
        example = result.counterexample
        if result.passed or example is None or example.reproduced is not None or example.seed is None or not example.actions:
            continue
        if example.reward is None or not math.isfinite(example.reward):
            continue
        try:
            answer = ctx.call("episode", {"seed": example.seed, "turns": example.actions, "with_messages": False},
                              ctx.episode_timeout(len(example.actions)), seed=example.seed)
            again = EpisodeSummary.model_validate(answer)
        except Exception:  # a courtesy: the verdict stands
            continue
        example.reproduced = math.isclose(again.reward, example.reward, rel_tol=0, abs_tol=1e-9)
        if not example.reproduced:
            example.detail = f"{example.detail} (did not reproduce on replay: reward {again.reward!r})"[:1000]
