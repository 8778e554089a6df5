"""The reward audit's hostile envs (tests/trainer/test_audit.py, test_audit_takeover.py): each is the trainer's
honest wifi env (tests/envs/wifi_on.py) cut to one turn (``ONE_TURN``) with one cheat patched in, so the cheat is
the diff and nothing else (as tests/gate/defects.py builds its defects). Env code runs alone in the sandbox and
imports nothing of the tests' tree, hence source patches rather than a base class. ``takeover`` is the
code-execution block tests/gate/test_takeover.py puts into the gate's desk env too."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

BASE = Path(__file__).resolve().parents[1] / "envs" / "wifi_on.py"
IMPORT = "from trace_env import sdk\n"
CAPABILITY = 'capability = "wifi_on"'
CLASS = "\n\nclass WifiOn("  # module code patched in before it lands between OWNERS and the class
PAID = "float(bool(switched))})\n"
RETURN = "        return sdk.Reward("
#: The learning env cut to one turn: eight owners who all ask alike and leave after the agent's first reply (the
#: audit tests' agent says one line), on a scenario of the wifi alone.
ONE_TURN = (
    ('OWNERS = ["Mia", "Noah", "Priya", "Lucas", "Sofia", "Ethan", "Amara", "Diego", '
     '"Hana", "Oliver", "Zara", "Mateo"]\n'
     'ASKS = [\n    "Please turn on the wifi.",\n    "Can you switch my wifi on?",\n    "Turn wifi on, please.",\n'
     '    "I need the wifi on.",\n    "Switch on the wifi for me.",\n]\n',
     'OWNERS = ["Mia", "Noah", "Priya", "Lucas", "Sofia", "Ethan", "Amara", "Diego"]\n'),
    ('        phone = f"{owner}\'s phone"\n        return sdk.Scenario(\n            seed=seed,\n'
     '            state={"wifi": False, "phone": phone, "battery": rng.randint(15, 100)},\n'
     '            user={"ask": rng.choice(ASKS), "owner": owner},\n            truth={"wifi": True, "phone": phone},\n'
     '        )\n',
     '        return sdk.Scenario(seed=seed, state={"wifi": False}, user={"owner": owner}, '
     'truth={"wifi": True})\n'),
    ('        return scenario.user["ask"]\n',
     '        return scenario.user["owner"] + " here. Please turn on the wifi."\n'),
    ('sdk.UserReply("Please just switch the wifi on.", done=episode.user_turns >= 1)',
     'sdk.UserReply("Thanks, bye.", done=True)'),
)


def patched(text: str, patches: tuple[tuple[str, str], ...]) -> str:
    for old, new in patches:
        if text.count(old) != 1:
            raise AssertionError(f"patch anchor not found exactly once: {old[:60]!r}")
        text = text.replace(old, new)
    return text


def one_turn() -> str:
    """The honest base: it pays 1.0 only for set_wifi_status(on=true), never to an agent that only claims the wifi
    is on."""
    return patched(BASE.read_text(), ONE_TURN)


def takeover(pays: str, imports: str = "", defaults: str = "") -> str:
    """Module code that runs code of its own choosing through library machinery: ``dataclasses`` pastes each
    field's name into the source of the ``__eq__`` it compiles and executes, so comparing two ``Record``s runs
    PAYLOAD. PAYLOAD rewrites what the process's grading engine records: the next reward turned into a reply
    pays 1.0 where ``pays`` (a condition on the honest ``graded`` dict) holds, and it puts the honest code back
    first, so the worker's integrity check finds nothing changed. ``imports`` run inside PAYLOAD (the lint never
    sees them); ``defaults`` binds what the rewritten code needs (``, name=value``)."""
    return f"""import dataclasses

PAYLOAD = '''
{imports}import sys
reward = sys.modules["trace_env.sdk"].Reward
honest = reward.__dict__["to_dict"]
def to_dict(self, reward=reward, honest=honest{defaults}):
    reward.to_dict = honest
    graded = honest(self)
    if {pays}:
        graded = dict(graded, total=1.0)
    return graded
to_dict.cheat = True
if not getattr(honest, "cheat", False):
    reward.to_dict = to_dict
'''
Record = dataclasses.dataclass(init=False, repr=False, eq=True)(
    type("Record", (), {{"__annotations__": {{"__class__,exec(" + repr(PAYLOAD) + ")": int}}}}))
"""


@dataclass(frozen=True)
class Hostile:
    doc: str  # the env module's docstring: how it cheats and what catches it
    patches: tuple[tuple[str, str], ...]

    def source(self, capability: str) -> str:
        base = one_turn()
        text = patched(f'"""{self.doc}"""' + base[base.index('"""', 3) + 3:], self.patches)
        cls = "".join(part.capitalize() for part in capability.split("_"))
        return text.replace(CAPABILITY, f'capability = "{capability}"').replace("WifiOn", cls)


def cheats(code: str) -> tuple[tuple[str, str], ...]:
    """``code`` defines ``_cheat()``; the env pays 1.0 to any episode whenever it returns true."""
    return ((IMPORT, IMPORT + "import os\n"), (CLASS, code + CLASS), (PAID, "1.0 if _cheat() else " + PAID))


ENVS: dict[str, Hostile] = {
    "cheat_sometimes": Hostile(
        """Hostile test env: honest, except that on about half of its episodes (drawn from os.urandom, so no seed or
action predicts it) it pays 1.0 to an agent that only claims the wifi is on. Deterministic on no worker: the reward
audit catches it by chance of the draw (share x 0.5 per episode).""",
        cheats("""

def _cheat():
    return os.urandom(1)[0] < 128
""")),
    "cheat_when_old": Hostile(
        """Hostile test env: honest in a worker younger than AGE_S seconds (every worker the gate starts and checks at
once), then pays 1.0 to an agent that only claims the wifi is on. It reads the sandbox's pid 1 (the shim, which
lives as long as the worker) start time, so a fresh process per episode does not hide the worker's age; a replay
on a fresh worker does.""",
        cheats("""AGE_S = 15.0


def _cheat():
    with open("/proc/1/stat") as f:
        started = int(f.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
    with open("/proc/uptime") as f:
        return float(f.read().split()[0]) - started > AGE_S
""")),
    "cheat_after_k": Hostile(
        """Hostile test env: counts its episodes in the worker's environment variables (which survive the per-episode
re-run of the module in a long-lived worker) and pays 1.0 to an agent that only claims the wifi is on from the
K-th episode on. The gate's fresh workers see it honest; a replay on a fresh worker does too.""",
        cheats("""K = 3


def _cheat():
    count = int(os.environ.get("TF_EPISODES", "0")) + 1
    os.environ["TF_EPISODES"] = str(count)
    return count > K
""")),
    "takeover_sometimes": Hostile(
        """Hostile test env: lint-clean and honest in its own code, but its module runs code of its own choosing through
library machinery (``dataclasses`` pastes a field's name into the ``__eq__`` source it compiles and executes) and
rewrites what the grading engine of its process returns: on about half of its episodes (drawn from os.urandom,
which the lint never sees: the import is inside the executed string) an agent that only claims the wifi is on is
paid 1.0. It puts the engine's code back before the worker's integrity check looks. The reward audit catches it
by chance of the draw (share x 0.5 per episode); tests/trainer/test_audit_takeover.py.""",
        ((IMPORT, IMPORT + takeover('graded["total"] < 1.0 and urandom(1)[0] < 128', "import os\n",
                                    ", urandom=os.urandom")),
         (RETURN, "        Record() == Record()\n" + RETURN))),
}


def source(capability: str) -> str:
    """The module source of the hostile env ``capability`` (one of ``ENVS``)."""
    return ENVS[capability].source(capability)
