"""A plumbing env for trainer integrations: two turns, and a reward a random tiny model varies on.

The agent talks, the user answers once, the agent talks again. The reward is the share of vowels among the
characters of the agent's words, so the random text of an untrained tiny model gets different rewards within a
group (GRPO has an advantage to follow) while every episode is multi-turn (env tokens between turns).
"""

from trace_env import sdk


class Vowels(sdk.TaskEnv):
    capability = "vowels"
    target = "toolsandbox"
    description = "Say something with many vowels, twice."
    tool_names = ["get_wifi_status"]
    max_steps = 2

    def generate(self, seed):
        rng = self.rng(seed)
        return sdk.Scenario(seed=seed, state={}, user={"name": rng.choice(["Ada", "Bo", "Cy"])}, truth={})

    def system_prompt(self, scenario):
        return "Talk to the user."

    def first_user_message(self, scenario):
        return f"Hi, I am {scenario.user['name']}."

    def user_reply(self, episode, agent_text):
        return sdk.UserReply("Tell me more.", done=episode.user_turns >= 1)

    @sdk.tool
    def get_wifi_status(self, state):
        return {"wifi": True}

    def evaluate(self, episode):
        said = " ".join(m.get("content") or "" for m in episode.messages if m["role"] == "assistant").lower()
        return sdk.Reward(components={"vowels": sum(c in "aeiou" for c in said) / max(1, len(said))})

    def reference_solution(self, scenario):
        return [sdk.say("aeiou"), sdk.say("eau")]

    def capability_skipping_solution(self, scenario):
        return [sdk.say("x"), sdk.say("x")]


ENV = Vowels
