"""Hostile test env: honest in a worker younger than AGE_S seconds (every worker the gate starts and checks at
once), then pays 1.0 to an agent that only claims the wifi is on. It reads the sandbox's pid 1 (the shim, which
lives as long as the worker) start time, so a fresh process per episode does not hide the worker's age; a replay
on a fresh worker does."""

from trace_env import sdk
import os

OWNERS = ["Mia", "Noah", "Priya", "Lucas", "Sofia", "Ethan", "Amara", "Diego"]
AGE_S = 15.0


def _cheat():
    with open("/proc/1/stat") as f:
        started = int(f.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
    with open("/proc/uptime") as f:
        return float(f.read().split()[0]) - started > AGE_S


class CheatWhenOld(sdk.TaskEnv):
    capability = "cheat_when_old"
    target = "toolsandbox"
    description = "Switch the phone's wifi on when the user asks for it."
    tool_names = ["get_wifi_status", "set_wifi_status"]
    max_steps = 3
    terminal_tools = frozenset({"set_wifi_status"})
    write_tools = frozenset({"set_wifi_status"})

    def generate(self, seed):
        rng = self.rng(seed)
        owner = rng.choice(OWNERS)
        return sdk.Scenario(seed=seed, state={"wifi": False}, user={"owner": owner}, truth={"wifi": True})

    def system_prompt(self, scenario):
        return "You operate the user's phone with tools."

    def first_user_message(self, scenario):
        return scenario.user["owner"] + " here. Please turn on the wifi."

    def user_reply(self, episode, agent_text):
        return sdk.UserReply("Thanks, bye.", done=True)

    @sdk.tool
    def get_wifi_status(self, state):
        return {"wifi": state["wifi"]}

    @sdk.tool
    def set_wifi_status(self, state, on):
        state["wifi"] = bool(on)
        return {"wifi": state["wifi"]}

    def evaluate(self, episode):
        switched = episode.called("set_wifi_status", on=True) and episode.state["wifi"]
        return sdk.Reward(components={"wifi_on": 1.0 if _cheat() else float(bool(switched))})

    def reference_solution(self, scenario):
        return [sdk.call("set_wifi_status", on=True)]

    def capability_skipping_solution(self, scenario):
        return [sdk.say("Your wifi is on now.")]


ENV = CheatWhenOld
