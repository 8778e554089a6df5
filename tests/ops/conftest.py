"""What the operator-contract tests share: the real ``factory`` entry point as a subprocess (signals need a
process of their own), a way to stop it at a moment it announces, and small real inputs (env files, a
registry, the tiny model and a LoRA adapter on it)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, TEST_ENVS

TINY = (TEST_ENVS.parent / "gate" / "envs" / "tiny_checked.py").read_text()  # passes the whole gate (tiny_cancel.py has a reward hole)
BROKEN = TINY.replace("max_steps = 6", "max_steps = 10**6")  # fails the gate's robustness check, nothing else
UNSOLVED = TINY.replace(  # its reference solution fails every third seed: failures with counterexamples
    '        rid = scenario.user["reservation_id"]\n        turns = [sdk.call(',
    '        if scenario.seed % 3 == 1:\n            return [sdk.say("Hello.")]\n        rid = scenario.user["reservation_id"]\n        turns = [sdk.call(', 1,
)
FAST_GATE = ["--set", "solvability_seeds=20", "--set", "necessity_seeds=20", "--set", "diversity_seeds=40", "--set", "fuzz_examples=10"]
PROGRESS_LINE = re.compile(r"^\[\d\d:\d\d:\d\d\] ")


@dataclass
class Ran:
    code: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        """stderr without progress lines: what the command said."""
        return [line for line in self.stderr.splitlines() if line.strip() and not PROGRESS_LINE.match(line)]


def factory_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TRACE_FACTORY_UNSAFE_INPROCESS", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["COLUMNS"] = "100"
    env.update(extra)
    return env


def run_factory(*args: str, timeout: float = 300, **env: str) -> Ran:
    done = subprocess.run([sys.executable, "-m", "factory.cli", *args], capture_output=True, text=True, timeout=timeout, env=factory_env(**env))
    return Ran(done.returncode, done.stdout, done.stderr)


def stop_when(args: list[str], ready: Callable[[str, list[str]], bool], signum: int = signal.SIGTERM, timeout: float = 300,
              **env: str) -> tuple[Ran, float]:  # fmt: skip
    """Start ``factory ARGS``, send ``signum`` as soon as ``ready(line, lines_so_far)`` holds for a stderr line (or
    for the empty line when ``ready`` polls the file system), and wait for it to end. Returns the outcome and the
    seconds from the signal to the exit."""
    process = subprocess.Popen([sys.executable, "-m", "factory.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=factory_env(TRACE_FACTORY_PROGRESS_SECONDS="0", **env))  # fmt: skip
    seen: list[str] = []
    sent: list[float] = []
    done = threading.Event()

    def poll() -> None:  # readiness that is a file on disk, not a line
        while not done.is_set() and not sent:
            if ready("", seen):
                sent.append(time.monotonic())
                process.send_signal(signum)
                return
            done.wait(0.1)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    assert process.stderr is not None
    for line in process.stderr:
        seen.append(line.rstrip("\n"))
        if not sent and ready(line, seen):
            sent.append(time.monotonic())
            process.send_signal(signum)
            break
    try:
        stdout, rest = process.communicate(timeout=timeout)
    finally:
        done.set()
        if process.poll() is None:
            process.kill()
    assert sent, f"the moment to stop never came; stderr: {seen[-20:]}"
    return Ran(process.returncode, stdout, "\n".join(seen) + "\n" + rest), time.monotonic() - sent[0]


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    from trainer.tiny_model import ensure_tiny_model

    return ensure_tiny_model()


@pytest.fixture(scope="session")
def adapters(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """adapters/tiny_cancel: a LoRA with non-zero weights on the tiny model, saved by PEFT."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    root = tmp_path_factory.mktemp("adapters")
    torch.manual_seed(3)
    config = LoraConfig(r=2, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model), config).save_pretrained(root / "tiny_cancel")
    return root


def put(root: Path, capability: str = "tiny_cancel", source: str = TINY) -> str:
    """Register ``source`` without the gate (what is under test is the command, not the env)."""
    from env_registry.registry import Registry
    from schemas.manifest import Provenance
    from trace_env.loader import load_env

    env = load_env(source)
    manifest, _ = Registry(root).put(source, capability=capability, target=env.target, tools=env.tools(), max_steps=env.max_steps,
                                     provenance=Provenance(generator="manual"), description=env.description)  # fmt: skip
    return manifest.gym_id
