"""No state crosses an episode, and the gate's episodes are training's (issue 32, items 2 and 3).

Every episode and every other call runs in a process forked from a clean template (``sandbox.template``), with
the writable folders emptied before it. Each env below keeps a memory of earlier episodes where re-executing the
env module cannot reach (an SDK dataclass field's attribute, an ABC registry, ``os.environ``, files in /tmp and
HOME, threads and the process's age, the names on its call stack), marks it from a call only the gate makes
(``reference_solution``) too, and pays 1.0 once the memory says "not the first" (the stack: "not the gate").
Played in real bwrap workers opened with training's constructor, in training's order (reset, step) and in the
gate's (generate, a solution, then ``episode``), the memory and the reward of episode 1 and episode N are the
same in both. The control runs the same envs with one process per worker (``Sandbox.fresh_processes = False``,
the layout before): there each memory is real and changes the reward, so these envs test what they claim.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from env_registry.hosted import SandboxedEnv, SandboxedRunner
from sandbox import available_backends
from sandbox.base import Sandbox

SANDBOXED = [name for name in ("bwrap", "docker") if available_backends().get(name) is None]
pytestmark = pytest.mark.skipif(not SANDBOXED, reason=f"no sandbox backend available: {available_backends()}")
BACKEND = SANDBOXED[0] if SANDBOXED else "bwrap"

BASE = (Path(__file__).resolve().parent / "envs" / "remembering.py").read_text()
HOOK = re.compile(r"# --- the hook \(replaced by the tests\) ---\n.*# --- end of the hook ---\n", re.S)
REFUSE = "I'm sorry, I can't cancel that reservation."
SEED = 0  # refundable: refusing it pays little honestly
AGE_S = 1.5

#: What each env remembers, and when it pays 1.0 (default: a count above 1).
HOOKS = {
    "sdk_field_attribute": '''
def remembered():
    field = sdk.ToolRecord.__dataclass_fields__["step"]  # a slot of a shared dataclass Field
    seen = field.hash if type(field.hash) is int else 0
    field.hash = seen + 1
    return str(seen + 1)
''',
    "abc_registry": '''
KINDS = (sdk.Turn, sdk.ToolRecord, sdk.Scenario, sdk.Episode, sdk.Reward, sdk.ToolError, sdk.TaskEnv)


def remembered():
    seen = sum(issubclass(kind, numbers.Number) for kind in KINDS)
    numbers.Number.register(KINDS[seen % len(KINDS)])
    return str(seen + 1)
''',
    "environment": '''
def remembered():
    seen = int(os.environ.get("EPISODES_SEEN", "0")) + 1
    os.environ["EPISODES_SEEN"] = str(seen)
    return str(seen)
''',
    "files_in_tmp_and_home": '''
def remembered():
    seen = 0
    for path in ("/tmp/episodes_seen", os.path.expanduser("~/.episodes_seen")):
        try:
            with open(path) as handle:
                seen = max(seen, int(handle.read() or 0))
        except (OSError, ValueError):
            pass
    for path in ("/tmp/episodes_seen", os.path.expanduser("~/.episodes_seen")):
        with open(path, "w") as handle:
            handle.write(str(seen + 1))
    return str(seen + 1)
''',
    "episodes_in_this_process": '''
def remembered():
    alive = [t for t in threading.enumerate() if t.name == "episodes-seen"]
    threading.Thread(target=time.sleep, args=(600,), name="episodes-seen", daemon=True).start()
    return str(len(alive) + 1)
''',
    "process_age": '''
def remembered():
    with open("/proc/self/stat") as handle:
        started = int(handle.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
    with open("/proc/uptime") as handle:
        age = float(handle.read().split()[0]) - started
    return "old" if age > AGE_S else "young"


def lenient(memory):
    return memory == "old"
'''.replace("AGE_S", str(AGE_S)),
    "call_stack": '''
def remembered():
    frame, names = sys._getframe(1), []
    while frame is not None:
        if not frame.f_code.co_filename.startswith("<env"):
            names.append(frame.f_code.co_name)
        frame = frame.f_back
    return "/".join(names)


def lenient(memory):
    return "play" not in memory.split("/")  # the gate's probe is not on the stack: training, so pay
''',
}


def source(name: str) -> str:
    hook = HOOKS[name]
    if "def lenient" not in hook:
        hook += '\n\ndef lenient(memory):\n    return memory != "1"\n'
    text, count = HOOK.subn(lambda _: hook.strip() + "\n", BASE)
    assert count == 1
    return text.replace("    def reference_solution(self, scenario):\n",
                        "    def reference_solution(self, scenario):\n        remembered()  # the gate's mark\n", 1)


def training(env: SandboxedEnv) -> tuple[float, str]:
    """One episode as training plays it: reset, a step that ends it."""
    runner = SandboxedRunner(env)
    runner.reset(SEED)
    result = runner.step(REFUSE)
    assert result.terminated
    return float(result.reward), result.info["reward_detail"]["notes"]["memory"]


def gate(env: SandboxedEnv) -> tuple[float, str]:
    """One episode as the gate plays it, after the calls only the gate makes."""
    env.call("generate", {"seed": SEED})
    for which in ("reference", "skipping"):
        env.call("solution", {"seed": SEED, "which": which})
    played = env.call("episode", {"seed": SEED, "turns": [REFUSE]})
    return float(played["reward"]), played["reward_detail"]["notes"]["memory"]


def episodes(name: str, play) -> list[tuple[float, str]]:  # type: ignore[no-untyped-def]
    """Episodes 1 and 3 of one worker (the age env waits between them)."""
    with SandboxedEnv(source(name), backend=BACKEND) as env:
        first = play(env)
        play(env)
        if name == "process_age":
            time.sleep(AGE_S + 0.3)
        return [first, play(env)]


@pytest.mark.parametrize("name", sorted(HOOKS))
def test_no_memory_crosses_an_episode_and_the_gate_is_training(name: str) -> None:
    trained, gated = episodes(name, training), episodes(name, gate)
    assert trained[0] == trained[1], f"training: episode 1 and 3 differ: {trained}"
    assert gated[0] == gated[1], f"gate: episode 1 and 3 differ: {gated}"
    assert trained == gated, f"training {trained} != gate {gated}"
    if name != "call_stack":
        assert trained[0][1] in ("1", "young") and trained[0][0] < 1.0, trained  # the honest reward


@pytest.mark.parametrize("name", sorted(HOOKS))
def test_with_one_process_per_worker_the_memory_pays(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The control (the layout before): the same envs remember, and it changes the reward."""
    monkeypatch.setattr(Sandbox, "fresh_processes", False)
    trained, gated = episodes(name, training), episodes(name, gate)
    if name == "call_stack":
        assert trained[0][0] == 1.0 and gated[0][0] < 1.0 and trained[0][1] != gated[0][1], (trained, gated)
    elif name == "process_age":  # the worker itself may be that old already at its first episode on a slow host
        assert trained[1] == (1.0, "old") and gated[1] == (1.0, "old"), (trained, gated)
    else:
        assert trained[0][0] < 1.0 and trained[1][0] == 1.0 and trained[0][1] != trained[1][1], trained
        assert gated[0] != trained[0] or gated[1] != trained[1], (trained, gated)


def test_a_stack_above_the_env_is_the_same_for_gate_and_training() -> None:
    """The frames above the env's ``evaluate`` are the worker's loop and the handler's ``step``, and nothing of
    the gate's probes (``episode``, ``play``, ``survey``) in either."""
    trained, gated = episodes("call_stack", training)[0][1], episodes("call_stack", gate)[0][1]
    assert trained == gated
    names = trained.split("/")
    assert "step" in names and "serve" in names and not {"play", "episode", "survey", "survey_seed"} & set(names), names
