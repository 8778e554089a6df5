"""The generation and repair prompts of environment synthesis.

The generation prompt gives the model everything a human author of a blueprint had: the capability and the
failures that revealed it, the target's exact tool schemas and policy, the env contract, the gate's rules,
and a complete blueprint as a worked example. The repair prompt gives back each failed check with its
figure and counterexample, so the model fixes what the gate measured rather than guessing.
"""

from __future__ import annotations

import hashlib
import json

from factory.blueprints import blueprint_names, blueprint_source
from factory.validation.static import ALLOWED_MODULES
from schemas.capability import Capability, CapabilityFinding
from schemas.target import TargetProfile
from schemas.validation import ValidationConfig, ValidationReport

SYSTEM_PROMPT = (
    "You write reinforcement-learning training environments for tool-using LLM agents, as single Python "
    "modules. You answer with exactly one complete module in one ```python fenced block, then stop."
)

EXAMPLE_FOR_TARGET = {
    "tau2-airline": "precondition_verification",
    "tau2-retail": "tool_calling_precision",
    "toolsandbox": "permission_error_recovery",
}

CONTRACT = """\
## The env contract
The module imports only `from env_registry import sdk` and these pure stdlib modules: {modules}.
No file, network, process, clock or introspection access: no `open`, `eval`, `exec`, `compile`, `__import__`,
`globals`, `getattr` with computed names, dunder attributes (`__class__`, `__dict__`, ...), `time`, `os`, `sys`.

It defines exactly one subclass of `sdk.TaskEnv` and ends with `ENV = <ThatClass>`. The class sets:
- `capability = "{capability}"`, `target = "{target}"`, `description` (one paragraph), `tool_names` (a subset
  of the target's tools, including realistic distractors), `max_steps` (at most {max_steps_limit}),
  `write_tools` (state-changing tools), `terminal_tools` (tools whose call ends the episode, if any).
- `generate(self, seed) -> sdk.Scenario(seed=seed, state=..., user=..., truth=..., meta=...)`: all randomness
  from `rng = self.rng(seed)`. `state` is the database the tools act on, in the target's record shapes;
  `user` is what the simulated user wants and knows; `truth` is the ground truth for the reward. Everything
  JSON-serialisable.
- `system_prompt(self, scenario)` and `first_user_message(self, scenario)`. The prompt carries the policy
  rules the capability needs (`self.target_policy()` returns the target's policy summary).
- One method per tool, decorated `@sdk.tool` (method name = tool name), signature `(self, state, <arguments>)`
  with defaults for optional parameters (name the first parameter `db` if a tool has an argument called
  `state`). Arguments arrive already validated against the schema. Return a str or JSON-able value like the
  real target; for a bad request `raise sdk.ToolError("message")` (never any other exception). Tools enforce
  only what the real API enforces.
- `user_reply(self, episode, agent_text) -> sdk.UserReply(text, done=False)`: deterministic; answers from
  `episode.scenario.user`; confirms when asked; `done=True` when the request is settled or after a bounded
  number of turns. `sdk.ScriptedUser(facts=[((triggers...), answer)], ...)` is a ready default.
- `evaluate(self, episode) -> sdk.Reward(components={{name: score in [0,1]}}, weights={{...}}, gates={{...}})`
  computed from `episode.state` (final state) against `episode.scenario.truth`, and from the transcript:
  `episode.tool_log` (records with `name`, `arguments`, `ok`, `result`), `episode.calls(name)`,
  `episode.called(name, **arguments)`, `episode.first_index(...)`, `episode.said(value)` (did the agent tell
  the user this number or text). A gate multiplies: use one for forbidden actions.
- `reference_solution(self, scenario) -> list[sdk.Turn]`: what an agent WITH the capability does, as a fixed
  list of turns (`sdk.call(name, **args)`, `sdk.calls((name, args), ...)`, `sdk.say(text)`); the user is
  deterministic, so a fixed list works.
- `capability_skipping_solution(self, scenario) -> list[sdk.Turn]`: a plausible agent LACKING the capability
  that does the obvious thing without it.
"""

GATE_RULES = """\
## The validation gate your module must pass (run in a sandbox)
- static: only the allowed imports and constructs above.
- schema fidelity: tool schemas come from the target profile unchanged (do not override `tools()`); every
  call in your reference solution must validate against its schema.
- determinism: the same seed and actions give the same scenario and transcript.
- diversity: over {diversity_seeds} seeds at least {diversity_share:.0%} distinct scenarios, and the ground truth
  varies: vary records, ids (in the target's formats), names, amounts, dates, distractor records, their order,
  which rule decides, and the phrasing of the request.
- reward bounds: the reward is finite and in [0, 1] for ANY action sequence, garbage included.
- solvability: the reference solution scores >= {solve_reward} on >= {solve_share:.0%} of seeds.
- capability necessity: the capability-skipping solution scores <= {skip_reward} on >= {skip_share:.0%} of seeds.
- GRPO signal: mixtures of the reference, skipping and random policies must get DIFFERENT rewards within a
  group of {group} rollouts on >= {grpo_share:.0%} of seeds. So the reward must be graded: several named
  components with partial credit (e.g. state_match, verified_before_acting, communicated_answer), not 0/1.
- robustness: malformed or wrong calls must never crash your code (tools raise only sdk.ToolError), and
  episodes end within max_steps.
- budget: reset and step run in milliseconds.

Reward design for GRPO: grade progress (partial credit per sub-goal), compute it from the final state and the
transcript (never trust the agent's claims alone), check that required information was communicated, and use
a gate for actions the policy forbids so a fast-but-wrong agent scores low.
"""


def _capability_section(capability: Capability) -> str:
    lines = [f"## The capability to train: `{capability.name}`", "", capability.description.strip()]
    if isinstance(capability, CapabilityFinding):
        stats = capability.stats
        figures = []
        if stats.er_failure is not None and stats.er_success is not None:
            figures.append(f"lacking in {stats.er_failure:.0%} of failed and {stats.er_success:.0%} of successful trajectories")
        figures.append(f"lacking in {stats.coverage:.0%} of all failures")
        lines += ["", "Evidence from the agent's own trajectories: " + "; ".join(figures) + "."]
    if capability.example_failure_ids:
        lines += ["", "Failed trajectories where the agent lacked it: " + ", ".join(capability.example_failure_ids[:10]) + "."]
    return "\n".join(lines)


def example_blueprint(target: str) -> tuple[str, str]:
    """A shipped blueprint on the same target (or the first one), as the worked example."""
    name = EXAMPLE_FOR_TARGET.get(target)
    if name not in blueprint_names():
        name = blueprint_names()[0]
    return name, blueprint_source(name)


def generation_prompt(capability: Capability, profile: TargetProfile, config: ValidationConfig) -> str:
    tools = [tool.model_dump(mode="json", exclude_none=True) for tool in profile.tools]
    example_name, example_source = example_blueprint(profile.id)
    return "\n\n".join(
        [
            f"Write a training environment that isolates one capability of an agent on the target `{profile.id}` "
            f"({profile.title}).",
            _capability_section(capability),
            f"## The target's tools (exact schemas; the env must expose some of these, unchanged)\n```json\n{json.dumps(tools, indent=1)}\n```",
            f"## The target's policy (summary)\n{profile.policy.strip() or '(none given)'}",
            CONTRACT.format(
                modules=", ".join(sorted(ALLOWED_MODULES - {"__future__"})),
                capability=capability.name,
                target=profile.id,
                max_steps_limit=config.max_steps_limit,
            ),
            GATE_RULES.format(
                diversity_seeds=config.diversity_seeds,
                diversity_share=config.diversity_min_share,
                solve_reward=config.solvability_min_reward,
                solve_share=config.solvability_min_share,
                skip_reward=config.necessity_max_reward,
                skip_share=config.necessity_min_share,
                group=config.grpo_group_size,
                grpo_share=config.grpo_min_informative_share,
            ),
            f"## A complete example that passes the gate (capability `{example_name}`)\n```python\n{example_source}```",
            f"Now write the module for `{capability.name}` on `{profile.id}`. Make the scenarios such that an agent "
            "lacking this capability fails them in the way the evidence above shows. Answer with the complete "
            "module in one ```python block.",
        ]
    )


def repair_prompt(report: ValidationReport | None, problem: str | None = None) -> str:
    """Feedback for the next attempt: each failed check with its figure and counterexample, or why no code was found."""
    if report is None:
        return f"Your previous reply could not be used: {problem}. Send the complete corrected module in one ```python block."
    lines = ["Your module failed the validation gate. Fix every failure below and send the complete corrected module in one ```python block.", ""]
    for check in report.failures():
        if check.skipped:
            continue
        lines.append(f"- {check.name}: {check.message or 'failed'} (measured: {check.figure})")
        ce = check.counterexample
        if ce is not None:
            actions = json.dumps(ce.actions, default=str)
            if len(actions) > 1500:
                actions = actions[:1500] + " ...(truncated)"
            lines.append(f"  counterexample: seed={ce.seed} actions={actions}" + (f" detail: {ce.detail}" if ce.detail else ""))
    if problem:
        lines.append(f"- {problem}")
    return "\n".join(lines)


def prompt_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
