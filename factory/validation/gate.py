"""Run the validation gate on one env source: static analysis, then every check inside one sandbox."""

from __future__ import annotations

import hashlib
import time
from typing import Callable

from env_registry.hosted import SandboxedEnv
from factory.validation.calibration import CalibrationConfig, Policy, run_calibration
from factory.validation.checks import SANDBOX_CHECKS, WORKER_FAILURES, CheckContext
from factory.validation.static import check_source
from sandbox import SandboxLimits
from schemas.validation import CheckResult, Counterexample, ValidationConfig, ValidationReport

ProgressCallback = Callable[[str, CheckResult | None], None]
"""Called with (check name, None) when a check starts and (check name, result) when it ends."""

CHECK_NAMES = ["static"] + [name for name, _ in SANDBOX_CHECKS]


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
    checks: list[CheckResult] = []

    def record(result: CheckResult, began: float) -> None:
        result.seconds = round(time.perf_counter() - began, 3)
        checks.append(result)
        notify(result.name, result)

    began = time.perf_counter()
    notify("static", None)
    findings = check_source(source)
    record(
        CheckResult(
            name="static",
            passed=not findings,
            figure=f"{len(findings)} forbidden constructs",
            message="; ".join(f"line {f.line}: {f.message}" for f in findings[:5]),
        ),
        began,
    )
    backend_name, warning = backend, None
    capability = target = None
    env_info = None
    if findings:
        for name, _ in SANDBOX_CHECKS:
            checks.append(CheckResult(name=name, passed=False, skipped=True, message="not run: the static check failed"))
    else:
        hosted: SandboxedEnv | None = None
        began = time.perf_counter()
        notify("interface", None)
        try:
            hosted = SandboxedEnv(source, backend=backend, limits=limits, load_timeout_s=config.load_timeout_s, rpc_timeout_s=config.rpc_timeout_s)
        except WORKER_FAILURES as exc:
            record(CheckResult(name="interface", passed=False, figure="did not load", message=f"env failed to load: {exc}"), began)
            for name, _ in SANDBOX_CHECKS[1:]:
                checks.append(CheckResult(name=name, passed=False, skipped=True, message="not run: the env did not load"))
        if hosted is not None:
            backend_name = hosted.backend
            warning = getattr(hosted.sandbox, "warning", None) or (
                "UNSANDBOXED: env code ran with the unsafe-subprocess backend" if getattr(hosted.sandbox, "unsafe", False) else None
            )
            env_info = dict(hosted.info)
            capability, target = env_info.get("capability"), env_info.get("target")
            try:
                hosted = _run_checks(hosted, source, config, limits, backend, record, notify)
                if calibration_policy is not None:
                    began = time.perf_counter()
                    notify("calibration", None)
                    try:
                        result = run_calibration(hosted, calibration_policy, calibration, config.first_seed)
                    except WORKER_FAILURES as exc:
                        result = CheckResult(name="calibration", passed=False, required=False, message=f"{type(exc).__name__}: {exc}"[:500])
                    record(result, began)
            finally:
                hosted.close()
    passed = all(c.passed for c in checks if c.required)
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


def _run_checks(
    hosted: SandboxedEnv,
    source: str,
    config: ValidationConfig,
    limits: SandboxLimits | None,
    backend: str,
    record: Callable[[CheckResult, float], None],
    notify: ProgressCallback,
) -> SandboxedEnv:
    ctx = CheckContext(hosted, config)
    for index, (name, check) in enumerate(SANDBOX_CHECKS):
        began = time.perf_counter()
        if index:  # interface was announced before loading
            notify(name, None)
        try:
            result = check(ctx)
        except WORKER_FAILURES as exc:
            result = CheckResult(
                name=name, passed=False, figure="env failed inside the sandbox",
                message=f"{type(exc).__name__}: {exc}"[:500],
                counterexample=Counterexample(detail=str(exc)[:500]),
            )
            if not hosted.worker.alive:  # a hung or crashed worker cannot serve the next checks
                hosted.close()
                hosted = SandboxedEnv(source, backend=backend, limits=limits, load_timeout_s=config.load_timeout_s, rpc_timeout_s=config.rpc_timeout_s)
                ctx = CheckContext(hosted, config)
        record(result, began)
    return hosted
