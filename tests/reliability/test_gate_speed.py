"""What makes the gate's fresh process per episode cheaper must not change what it measures or keeps apart.

- the sandbox runtime copies ship bytecode compiled by the host (a worker start imports, it does not compile);
- a worker's ``usage`` counts the CPU of its episode processes (the template's children, not the shim's);
- the template builds the shipped targets' tool validators before it forks (no env code involved);
- the gate's episode record leaves the scenario out unless asked, and the probe's process generates it only if read.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from env_registry.hosted import SandboxedEnv, SandboxedRunner
from sandbox import available_backends, runtime

SANDBOXED = [name for name in ("bwrap", "docker") if available_backends().get(name) is None]
TINY = (Path(__file__).resolve().parents[1] / "gate" / "envs" / "tiny_checked.py").read_text()
#: generate() spends about 0.1 s of CPU: three resets are three fresh processes that each spend it.
BUSY = TINY.replace("        rng = self.rng(seed)\n",
                    "        spin = 0\n        for i in range(1_500_000):\n            spin += i\n        rng = self.rng(seed)\n", 1)


def test_the_runtime_copy_ships_bytecode_for_every_module() -> None:
    root = runtime.host_runtime() / "python"
    sources = sorted(root.rglob("*.py"))
    assert sources and root.name == "python" and runtime.PYC_LAYOUT in root.parent.name
    compiled = {p.name.split(".")[0] for p in root.rglob("__pycache__/*.pyc")}
    missing = [str(p.relative_to(root)) for p in sources if p.stem not in compiled]
    assert not missing, f"no bytecode for {missing[:5]}"


@pytest.mark.skipif(not SANDBOXED, reason=f"no sandbox backend available: {available_backends()}")
def test_usage_counts_the_cpu_of_every_episode_process() -> None:
    with SandboxedEnv(BUSY, backend=SANDBOXED[0]) as env:
        runner = SandboxedRunner(env)
        runner.reset(0)
        before = float(env.worker.call("usage", {}, timeout_s=10)["cpu_s"])
        for seed in (1, 2, 3):
            runner.reset(seed)
        runner.reset(4)  # the third busy process is collected when the next one starts
        after = float(env.worker.call("usage", {}, timeout_s=10)["cpu_s"])
    assert after - before >= 0.15, (before, after)


def test_the_template_builds_the_shipped_targets_validators_without_env_code() -> None:
    from trace_env import engine, targets

    engine._VALIDATORS.clear()
    engine.warm_shipped_targets()
    wanted = {engine.canonical_json(t["function"].get("parameters", {}))
              for target in targets.builtin_target_ids() for t in targets._profile(target)["tools"]}
    assert wanted and wanted <= set(engine._VALIDATORS)


def test_the_gate_record_leaves_the_scenario_out_and_reads_it_only_when_asked() -> None:
    from trace_env import gate_calls, handler

    handler.load({"source": TINY})
    handler.reset({"seed": 3})
    full, slim = handler.record({}), handler.record({"with_scenario": False})
    assert "scenario" in full and "scenario" not in slim and slim["state"] == full["state"]
    later = gate_calls._Generated(3)
    assert later._made is None
    assert later.truth == full["scenario"]["truth"] and later.user == full["scenario"]["user"]
