"""The trainer's learning-test env: the reward needs one specific tool call, set_wifi_status(on=true).

Short prompts (two tools), a terminal tool and a user who asks again when the agent only talks keep episodes
cheap enough for a tiny model to learn the call on two CPU cores; the scenario (who, which phone, how
they ask) varies with the seed, but the right action does not, so the gate rejects it (diversity, grpo_signal):
the trainer tests register it unvalidated on purpose.
"""

from trace_env import sdk

OWNERS = ["Mia", "Noah", "Priya", "Lucas", "Sofia", "Ethan", "Amara", "Diego", "Hana", "Oliver", "Zara", "Mateo"]
ASKS = [
    "Please turn on the wifi.",
    "Can you switch my wifi on?",
    "Turn wifi on, please.",
    "I need the wifi on.",
    "Switch on the wifi for me.",
]


class WifiOn(sdk.TaskEnv):
    capability = "wifi_on"
    target = "toolsandbox"
    description = "Switch the phone's wifi on when the user asks for it."
    tool_names = ["get_wifi_status", "set_wifi_status"]
    max_steps = 3
    terminal_tools = frozenset({"set_wifi_status"})
    write_tools = frozenset({"set_wifi_status"})

    def generate(self, seed):
        rng = self.rng(seed)
        owner = rng.choice(OWNERS)
        phone = f"{owner}'s phone"
        return sdk.Scenario(
            seed=seed,
            state={"wifi": False, "phone": phone, "battery": rng.randint(15, 100)},
            user={"ask": rng.choice(ASKS), "owner": owner},
            truth={"wifi": True, "phone": phone},
        )

    def system_prompt(self, scenario):
        return "You operate the user's phone with tools."

    def first_user_message(self, scenario):
        return scenario.user["ask"]

    def user_reply(self, episode, agent_text):
        return sdk.UserReply("Please just switch the wifi on.", done=episode.user_turns >= 1)

    @sdk.tool
    def get_wifi_status(self, state):
        return {"wifi": state["wifi"]}

    @sdk.tool
    def set_wifi_status(self, state, on):
        state["wifi"] = bool(on)
        return {"wifi": state["wifi"]}

    def evaluate(self, episode):
        switched = episode.called("set_wifi_status", on=True) and episode.state["wifi"]
        return sdk.Reward(components={"wifi_on": float(bool(switched))})

    def reference_solution(self, scenario):
        return [sdk.call("set_wifi_status", on=True)]

    def capability_skipping_solution(self, scenario):
        return [sdk.say("Your wifi is on now.")]


ENV = WifiOn
