"""Run the validation gate on one env source: static analysis, then every check inside one sandbox.

The gate never raises for a bad env. Every exception inside a check becomes a failed check with a
message; a worker that dies is restarted for the next check; a call that hangs, or timings far over
budget, end the gate at once with the budget verdict (the checks not run are reported as skipped).
"""

from __future__ import annotations

import hashlib
import time
from typing import Any, Callable

from env_registry.hosted import HANDLER, SandboxedEnv
from factory.validation.calibration import CalibrationConfig, Policy, run_calibration
from factory.validation.checks import HASH_SEEDS, SANDBOX_CHECKS, WORKER_FAILURES, BudgetExceeded, CheckContext
from factory.validation.static import check_source
from factory.validation.static import summary as static_summary
from sandbox import AUTO_ORDER, SandboxLimits, available_backends
from schemas.validation import CheckResult, Counterexample, ValidationConfig, ValidationReport

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


def validate_source(
    source: str,
    config: ValidationConfig | None = None,
    backend: str = "auto",
    limits: SandboxLimits | None = None,
    progress: ProgressCallback | None = None,
    calibration_policy: Policy | None = None,
    calibration: CalibrationConfig | None = None,
) -> ValidationReport:
    """Validate env source. Never raises for a bad env: every defect becomes a failed check.

    With ``calibration_policy`` the optional calibration check runs too (it is reported, never required).
    """
    config = config or ValidationConfig()
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
    if findings:
        skip_rest("the static check failed")
    else:
        began = time.perf_counter()
        notify("interface", None)
        try:
            hosted: SandboxedEnv | None = _open(source, backend_name, limits, config)
        except WORKER_FAILURES as exc:
            hosted = None
            record(CheckResult(name="interface", passed=False, figure="did not load", message=f"env failed to load: {exc}"[:1000]), began)
            skip_rest("the env did not load")
        if hosted is not None:
            backend_name = hosted.backend
            warning = getattr(hosted.sandbox, "warning", None) or (
                "UNSANDBOXED: env code ran with the unsafe-subprocess backend" if getattr(hosted.sandbox, "unsafe", False) else None
            )
            env_info = dict(hosted.info)
            capability, target = env_info.get("capability"), env_info.get("target")
            try:
                hosted = _run_checks(hosted, source, config, limits, backend_name, record, notify, skip_rest)
                if calibration_policy is not None and hosted is not None:
                    began = time.perf_counter()
                    notify("calibration", None)
                    try:
                        result = run_calibration(hosted, calibration_policy, calibration, config.first_seed)
                    except Exception as exc:  # advisory: a failing policy or env never takes the verdict down
                        result = CheckResult(name="calibration", passed=False, required=False, message=f"{type(exc).__name__}: {exc}"[:500])
                    record(result, began)
            finally:
                if hosted is not None:
                    hosted.close()
    checks = [results[name] for name in CHECK_NAMES if name in results] + [r for n, r in results.items() if n not in CHECK_NAMES]
    passed = all(c.passed and not c.skipped for c in checks if c.required)
    return ValidationReport(
        capability=capability,
        target=target,
        env_info=env_info,
        source_sha256=hashlib.sha256(source.encode()).hexdigest(),
        backend=backend_name,
        backend_warning=warning,
        passed=passed,
        status="passed" if passed else "failed",
        checks=checks,
        config=config,
        seconds=round(time.perf_counter() - started, 3),
    )


def _open(source: str, backend: str, limits: SandboxLimits | None, config: ValidationConfig) -> SandboxedEnv:
    return SandboxedEnv(source, backend=backend, limits=limits, load_timeout_s=config.load_timeout_s,
                        rpc_timeout_s=config.rpc_timeout_s, hash_seed=HASH_SEEDS[0])


def _run_checks(
    hosted: SandboxedEnv,
    source: str,
    config: ValidationConfig,
    limits: SandboxLimits | None,
    backend: str,
    record: Callable[[CheckResult, float | None], None],
    notify: ProgressCallback,
    skip_rest: Callable[[str], None],
) -> SandboxedEnv | None:
    def open_peer(hash_seed: int) -> Any:
        worker = ctx.env.sandbox.start_worker(HANDLER, hash_seed=hash_seed)
        try:
            worker.call("load", {"source": source}, timeout_s=config.load_timeout_s)
        except BaseException:
            worker.close()
            raise
        return worker

    ctx = CheckContext(hosted, config, open_peer)
    for index, (name, check) in enumerate(SANDBOX_CHECKS):
        began = time.perf_counter()
        if index:  # interface was announced before loading
            notify(name, None)
        try:
            result = check(ctx)
        except BudgetExceeded as exc:
            if name != "budget":
                record(CheckResult(name=name, passed=False, skipped=True, message="interrupted: the env is over its time budget (see budget)"), began)
            record(CheckResult(name="budget", passed=False, figure=exc.figure or "over budget", message=str(exc),
                               counterexample=exc.counterexample, seeds=len(ctx.surveys)), began)
            skip_rest("the env is over its time budget (see budget)")
            return ctx.env
        except WORKER_FAILURES as exc:
            result = CheckResult(
                name=name, passed=False, figure="env failed inside the sandbox",
                message=f"{type(exc).__name__}: {exc}"[:500],
                counterexample=Counterexample(detail=str(exc)[:500]),
            )
            if not ctx.env.worker.alive:  # a crashed worker cannot serve the next checks
                ctx.env.close()
                try:
                    ctx.env = _open(source, backend, limits, config)
                except WORKER_FAILURES as again:
                    record(result, began)
                    skip_rest(f"the worker died and could not be restarted: {again}"[:300])
                    return None
        except Exception as exc:  # what came back from the sandbox is hostile: unusable data is the env's defect
            result = CheckResult(
                name=name, passed=False, figure="unusable result from the env",
                message=f"the gate could not use what the env returned: {type(exc).__name__}: {exc}"[:500],
            )
        record(result, began)
    return ctx.env
