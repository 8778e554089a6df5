"""Stage 3, build: one validated env per planned capability, registered in the run's registry.

Without ``build.llm`` each capability's built-in blueprint goes through the gate; with it, the env is
synthesised and repaired until it passes (``factory build --llm``). A capability whose env fails is left
out (the report says why); the stage fails only when none passes. ``build/<capability>.json`` keeps each
result, so a resumed stage does not run the gate again for what it already registered.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from factory.pipeline.config import PipelineConfig
from factory.pipeline.handoffs import AnalyzeOutput, BuildOutput, BuiltEnv, PlannedCapability
from factory.pipeline.stages.base import Stage, StageContext, StageError
from factory.pipeline.state import Handoff
from schemas.files import read_state, write_atomic
from schemas.validation import ValidationConfig


def reduced_gate(gate: dict[str, Any]) -> dict[str, str]:
    """Gate settings that differ from the defaults, in words ("solvability_seeds 8 (default 100)")."""
    defaults = ValidationConfig()
    return {key: f"{value} (default {getattr(defaults, key)})" for key, value in sorted(gate.items()) if getattr(defaults, key) != value}


class BuildStage(Stage):
    name = "build"
    needs = {"analyze": ("plan",)}

    def section(self, config: PipelineConfig) -> Any:
        return {"build": config.build.model_dump(), "registry": str(config.registry_path().resolve())}

    def run(self, ctx: StageContext) -> Handoff:
        from env_registry.registry import Registry
        from factory.build import BuildError, BuildResult
        from llm_clients.errors import LLMError

        plan = ctx.read(AnalyzeOutput).plan
        registry = Registry(ctx.config.registry_path())
        envs: dict[str, BuiltEnv] = {}
        results: dict[str, dict[str, Any]] = {}
        for done, item in enumerate(plan):
            ctx.progress("build (gate in the sandbox)", done, len(plan))
            record = ctx.folder / f"{item.name}.json"
            fix = f"remove it to build {item.name} again"
            result = read_state(record, BuildResult, fix) if ctx.resume and record.exists() else None  # damaged: exit 2, said
            if result is None or not self._still_registered(result, registry):
                try:
                    result = self._build(ctx, item)
                except (BuildError, LLMError) as exc:  # no blueprint and no LLM, or the LLM failed: this one only
                    results[item.name] = {"registered": False, "gym_id": None, "validation": "not run", "seconds": 0.0, "error": str(exc)}
                    ctx.note(f"build: {item.name} was not built ({exc}); it is left out")
                    continue
                write_atomic(record, result.model_dump_json(indent=2) + "\n")  # a stop mid-write leaves no half record
            results[item.name] = {"registered": result.registered, "gym_id": result.gym_id, "validation": result.validation,
                                     "seconds": result.seconds, "error": result.error or _first_failure(result)}  # fmt: skip
            if result.registered and result.gym_id is not None and result.version is not None:
                stored = registry.get(result.capability, result.version)
                envs[item.name] = BuiltEnv(gym_id=result.gym_id, version=result.version, target=stored.manifest.target,
                                           source_sha256=stored.manifest.source_sha256)  # fmt: skip
            else:
                ctx.note(f"build: {item.name} did not pass the gate ({results[item.name]['error']}); it is left out")
        ctx.progress("build (gate in the sandbox)", len(plan), len(plan))
        if not envs:
            first = next(iter(results.values()))
            raise StageError(f"no env was built ({first['error']}); see {ctx.folder}")
        info = {"results": results, "gate": reduced_gate(ctx.config.build.gate), "generator": ctx.config.build.llm or "blueprint",
                "registry": str(registry.root)}  # fmt: skip
        return BuildOutput(envs=envs).handoff(info=info)

    def _build(self, ctx: StageContext, item: PlannedCapability) -> Any:
        from factory.build import build_from_blueprint, build_with_llm
        from factory.validation.gate import Gate
        from schemas.capability import Capability

        b, registry = ctx.config.build, ctx.config.registry_path()
        gate = Gate(config=b.gate_config(), backend=ctx.config.sandbox)
        if b.llm is None:
            return build_from_blueprint(item.name, registry_root=registry, gate=gate)
        from llm_clients.spec import make_client, parse_llm_spec

        client = make_client(parse_llm_spec(b.llm, base_url=b.base_url))
        capability = Capability(name=item.name, description=item.description)
        return build_with_llm(capability, item.target, client, registry_root=registry, build_root=ctx.folder / "attempts",
                              max_attempts=b.max_attempts, gate=gate)  # fmt: skip

    @staticmethod
    def _still_registered(result: Any, registry: Any) -> bool:
        if not result.registered or result.version is None:
            return False
        try:
            registry.get(result.capability, result.version)
        except Exception:  # noqa: BLE001 - removed or tampered since: build it again
            return False
        return True

    def check(self, handoff: Handoff, run_dir: Path) -> str | None:
        """Every env the stage registered is still in the registry, unchanged (the registry verifies its hash)."""
        from env_registry.registry import Registry, RegistryError

        root = handoff.info.get("registry")
        registry = Registry(root) if root else Registry()
        try:
            envs = BuildOutput.model_validate(handoff.value).envs
        except ValidationError:
            return "its record in pipeline.json is not a build output"
        for name, env in envs.items():
            try:
                stored = registry.get(name, env.version)
            except RegistryError:
                return f"{env.gym_id} is no longer in {registry.root}"
            if stored.manifest.source_sha256 != env.source_sha256:
                return f"{env.gym_id} changed in the registry"
        return None


def _first_failure(result: Any) -> str | None:
    report = result.report
    if report is None or result.registered:
        return None
    failed = [c for c in report.checks if c.required and not c.passed]
    return f"{failed[0].name}: {failed[0].message}" if failed else result.validation
