"""The generation and repair prompts of environment synthesis.

The generation prompt gives the model what a human author of a blueprint has: the capability and the failures
that revealed it, the target's exact tool schemas and policy, the env contract, the gate's rules, the API of the
target's world kit (records, faithful tools, policy functions: generated from the kit itself, so it cannot drift)
and one blueprint built on that kit as the worked example. The kit carries the world, so the model writes only the
capability, and the example is short enough to leave most of the reply budget for the answer. The repair prompt
gives back each failed check with its figure and counterexample, so the model fixes what the gate measured.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json

from factory.blueprints import blueprint_names, blueprint_source
from factory.validation.static import ALLOWED_MODULES
from schemas.capability import Capability, CapabilityFinding
from schemas.target import TargetProfile
from schemas.validation import ValidationConfig, ValidationReport
from trace_env.kits import KIT_FOR_TARGET, SHARED_KITS

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
The module imports only `from trace_env import sdk`, the world kits (`from trace_env.kits import {kits}`) and these
pure stdlib modules: {modules}. The static check is a quality filter (the sandbox, a fresh process for every
episode and the replay of training's episodes on a fresh worker hold env code in, not the lint): it refuses any
other import (`time`, `os`, `sys`, `uuid`, `pathlib`...), relative imports and `__import__()`, clock reads
(`datetime.now()`, `date.today()`, `.utcnow()`: scenario times come from `self.rng(seed)`), the process-wide random
generator (`random.choice(...)` and the like, `random.Random()` without a seed: draw from `self.rng(seed)`),
`hash()` (string hashes change with every worker) and `id()`. Other Python is allowed. An env is pure computation
over its scenario: it reads no file, network, process or clock (the sandbox has none), keeps nothing between
episodes (each runs in a fresh process), and lets nothing depend on set iteration order (iterate lists, or
`sorted(...)`).

It defines exactly one subclass of `sdk.TaskEnv` and ends with `ENV = <ThatClass>`. The class sets:
- `capability = "{capability}"`, `target = "{target}"`, `description` (one paragraph), `tool_names` (a subset
  of the target's tools, including realistic distractors), `max_steps` (at most {max_steps_limit}),
  `write_tools` (state-changing tools), `terminal_tools` (tools whose call ends the episode, if any).
- Tools: inherit the kit's tools mixin (`class MyEnv(kit.SomeTools, sdk.TaskEnv)`): every tool of the target,
  faithful to it, as a method; `tool_names` picks the ones the agent sees. To change one tool, define a method of
  the same name decorated `@sdk.tool`, signature `(self, db, <arguments>)` with defaults for optional parameters.
  A tool returns a str or JSON-able value like the real target; for a bad request `raise sdk.ToolError("message")`
  (never any other exception). Tools enforce only what the real API enforces.
- `generate(self, seed) -> sdk.Scenario(seed=seed, state=..., user=..., truth=..., meta=...)`: all randomness
  from `rng = self.rng(seed)`; build `state` with the kit's world builder (the target's record shapes); `user` is
  what the simulated user wants and knows; `truth` is the ground truth for the reward; all JSON-serialisable.
  Compute an expected end state by running the kit's tool functions on a copy of the state.
- `system_prompt(self, scenario)` and `first_user_message(self, scenario)`. The prompt carries the policy rules the
  capability needs (the kit's prompt helper, or `self.target_policy()`). The first message states the request,
  never the answer the reward checks.
- `user_reply(self, episode, agent_text) -> sdk.UserReply(text, done=False)`: deterministic; answers from
  `episode.scenario.user`; confirms when asked; `done=True` when the request is settled or after a bounded
  number of turns. `sdk.ScriptedUser(facts=[((triggers...), answer)], ...)` is a ready default.
- `evaluate(self, episode) -> sdk.Reward(components={{name: score in [0,1]}}, weights={{...}}, gates={{...}})`
  computed from `episode.state` (final state) against `episode.scenario.truth`, and from the transcript:
  `episode.tool_log` (records with `name`, `arguments`, `ok`, `result`, `step`), `episode.calls(name)`,
  `episode.called(name, **arguments)`, `episode.first_index(...)`, `episode.said(value)` (did the agent tell
  the user this number or text). A gate multiplies: use one for forbidden actions. Grade with the kit's policy
  functions where they apply.
- `reference_solution(self, scenario) -> list[sdk.Turn]`: what an agent WITH the capability does, as a fixed
  list of turns (`sdk.call(name, **args)`, `sdk.calls((name, args), ...)`, `sdk.say(text)`); the user is
  deterministic, so a fixed list works. It ends with a message after which the user closes the conversation.
- `capability_skipping_solution(self, scenario) -> list[sdk.Turn]`: a plausible agent LACKING the capability
  that does the obvious thing without it.
- Optional: `derive_truth(self, scenario, state) -> dict`, the truth as the records in `state` support it (have
  `generate` set `truth` from it); `reward_range = (low, high)` for a reward not in [0, 1] (then `evaluate` returns
  a float); a tool may `return sdk.EndEpisode(result)` to end the episode on that outcome.
"""

GATE_RULES = """\
## The validation gate your module must pass (run in sandboxes; seeds are drawn at random on every run)
- static: a quality filter; the module parses and uses only the allowed imports, no clock, no process-wide
  random generator, no `hash()` or `id()` (above).
- schema fidelity: tool schemas come from the target profile unchanged, descriptions included (do not override
  `tools()`); every call in your reference solution must validate against its schema. (An env that trains on tools
  of its own sets `tool_domain` and `tool_schemas`; then each schema must match its method's parameters.)
- world fidelity: the scenario's state keeps the target world's invariants (every reservation, flight, order and
  item it refers to exists), and your reference's tool calls, replayed with the kit's own functions, give results
  of the same shape and leave the same state: inherit the kit's tools, and do not change what they do.
- determinism: the same seed and actions give the same scenario and transcript in a fresh worker driven only
  through reset and step, as training drives it, with its own string hashing: never let content depend on set
  order or `hash()` (use lists, `sorted(...)`), keep no random generator or state on the env object, its class or
  the module, and behave the same whoever calls (a gate-only behaviour is seen and rejected).
- diversity: over {diversity_seeds} seeds at least {diversity_share:.0%} distinct scenarios, still at least
  {masked} distinct once ids and names are masked, at least {patterns} distinct reference decisions (the calls with
  their arguments, the state they leave, the yes/no of the answer: a decision may live in an argument or an
  answer), and the ground truth varies: vary records, ids (in the target's formats), names, amounts, dates,
  distractor records, their order, which rule decides, and the phrasing of the request.
- solvability: the reference solution scores >= {solve_reward:.0%} of the reward range on {solve_share:.0%} of
  seeds: every seed's task must be solvable and graded right.
- stale truth: `generate` must set the truth last, after its final change to the records (the gate replays it
  and fails an env that changes the records afterwards). Where you define `derive_truth(scenario, state)` (recommended: have `generate` compute the truth
  with it), the truth recomputed from the state, at the start and after the reference's reads, must equal the
  truth your reward grades with: nothing may change the facts after the truth is computed. The gate also moves
  the numbers the agent reads and recomputes the truth with it: a decision boundary (an amount limit, a count)
  must be a number the agent is shown (system prompt, request or records), never a rule only your code knows.
- paraphrase: the reference with its messages reworded (contractions such as "can't", "canceled", "$1204.50"
  for "$1,204.50", a courteous sentence added) and with its reads in another order keeps its reward: read words
  as whole words with their variants, compare numbers as numbers (`episode.said(value)` does both and ignores a
  negated mention such as "is not cancelled").
- capability necessity: the capability-skipping solution scores <= {skip_reward:.0%} of the range on >=
  {skip_share:.0%} of seeds. No message the agent sees may give the answer away: an agent that only repeats the
  first message, or does nothing, must fail, no phrase of the first message may predict what the reference does,
  and no user reply or tool result may state the verdict ("eligible", "approved"...) nor a name or id encode it.
- reward sensitivity: dropping a write call of the reference, corrupting a key argument of one, or replacing
  every turn with a useless call must each lower the reward (by {drop:.0%} of the range, or one write's share of a
  long task) on >= {sens_share:.0%} of seeds.
- exploit search: degenerate policies (junk, empty or copied-value calls to every tool, echoing the user, always
  agreeing, refusing or escalating, talking only, ending at once, spamming the words of the description, the
  tool names and the request), also after making the reference's reads, must stay below {exploit_share:.0%} of the
  reference's mean reward and match it on at most {exploit_match:.0%} of seeds and on less than 80% of the seeds
  of any one decision (e.g. every seed to refuse); mutations of the reference that change the outcome (a write
  dropped, duplicated or moved, an id changed, an amount off by its last digit or a tenth, the answer's yes/no
  flipped, extra or destructive writes after it) must lose reward. So grade the exact end state (a second refund
  or an extra message is a different state), gate writes nobody asked for, and check the exact stated amount,
  the reason the records give and the answer's meaning, not a keyword.
- GRPO signal: mixtures of the reference, skipping and random policies must get DIFFERENT rewards (std >=
  {spread}) within a group of {group} rollouts on >= {grpo_share:.0%} of seeds, for reasons other than episode
  length, and at most {max_success:.0%} of such rollouts may already score full marks. So the reward must be
  graded: several named components with partial credit (e.g. state_match, verified_before_acting,
  communicated_answer), not 0/1.
- user paths: an agent that stalls, asks for confirmation again and again, keeps asking questions or says
  nothing must see its episode end (the simulated user closes it, or max_steps), with replies of bounded size
  (never growing turn after turn), and must not be paid like the reference: a time-out is not a finished task.
- robustness: malformed or wrong calls (unknown ids too) must never crash your code (tools raise only
  sdk.ToolError); reference episodes must END (the simulated user closes the conversation, a terminal tool is
  called, or a tool returns `sdk.EndEpisode(result)`), never by running out of steps; no state may survive an
  episode (the same episode replayed in a busy worker equals a fresh one); memory must not grow from episode to
  episode.
- reward bounds: the reward is finite and in [0, 1] for ANY action sequence, garbage and repeated calls included
  (a reward on another scale declares `reward_range = (low, high)` and returns a float in it).
- budget: generate + reset within {reset_ms:.0f} ms and a step within {step_ms:.0f} ms (wall time, sleeps and waits
  included), at the 95th percentile, on every seed (generate is also timed alone on many more seeds), and no
  call, re-timed, over twice its budget on any argument, however rare.

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


def _first_paragraph(obj: object) -> str:
    doc = inspect.getdoc(obj) or ""
    return " ".join(doc.split("\n\n")[0].split())


def _signature(obj: object) -> str:
    try:
        text = str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(...)"
    return text.replace("'", "")


def _member(name: str, obj: object) -> str:
    """One line of the kit reference: a function's signature, a class's methods, a constant's shape."""
    if inspect.isclass(obj):
        tools = [attr for attr, value in vars(obj).items() if callable(value) and getattr(value, "__trace_tool_name__", None)]
        for base in obj.__mro__[1:-1]:
            tools += [attr for attr, value in vars(base).items() if getattr(value, "__trace_tool_name__", None)]
        if tools:
            return f"- class `{name}`: tools mixin with {len(tools)} `@sdk.tool` methods: {', '.join(tools)}."
        methods = [f"{attr}{_signature(value)}".replace("(self, ", "(").replace("(self)", "()")
                   for attr, value in vars(obj).items() if inspect.isfunction(value) and not attr.startswith("_")]
        head = f"- class `{name}{_signature(obj)}`: {_first_paragraph(obj)}"
        return head + (f" Methods: {'; '.join(methods)}." if methods else "")
    if inspect.isfunction(obj):
        doc = _first_paragraph(obj)
        return f"- `{name}{_signature(obj)}`" + (f": {doc}" if doc else "")
    if isinstance(obj, (dict, list, tuple, frozenset)) and len(repr(obj)) > 100:
        keys = list(obj)[:8] if isinstance(obj, dict) else None
        shape = f"{type(obj).__name__} of {len(obj)}" + (f", keys {', '.join(map(str, keys))}{' ...' if len(obj) > 8 else ''}" if keys else "")
        return f"- `{name}`: {shape}"
    return f"- `{name}` = {obj!r}"


def kit_reference(target: str) -> str:
    """What an env for ``target`` can import from ``trace_env.kits``: the target's kit and the shared ones,
    generated from their ``__all__``, signatures and docstrings."""
    names = [KIT_FOR_TARGET[target]] if target in KIT_FOR_TARGET else []
    sections = []
    for kit in names + list(SHARED_KITS):
        module = importlib.import_module(f"trace_env.kits.{kit}")
        lines = [f"### `from trace_env.kits import {kit}`", _first_paragraph(module)]
        tools = [name for name in getattr(module, "TOOL_NAMES", ()) if inspect.isfunction(getattr(module, name, None))]
        if tools:  # the tools as functions: one line, their behaviour is the target's
            lines.append("- the tools as functions, `db` first, returning what the target returns (for expected end "
                         "states): " + ", ".join(f"`{n}{_signature(getattr(module, n))}`" for n in tools))
        lines += [_member(name, getattr(module, name)) for name in module.__all__ if name not in tools]
        sections.append("\n".join(lines))
    return "\n\n".join(sections)


def example_blueprint(target: str) -> tuple[str, str]:
    """A shipped blueprint on the same target (or the first one), as the worked example."""
    name = EXAMPLE_FOR_TARGET.get(target)
    if name not in blueprint_names():
        name = blueprint_names()[0]
    return name, blueprint_source(name)


def generation_prompt(capability: Capability, profile: TargetProfile, config: ValidationConfig) -> str:
    tools = [tool.model_dump(mode="json", exclude_none=True) for tool in profile.tools]
    example_name, example_source = example_blueprint(profile.id)
    kits = ", ".join(([KIT_FOR_TARGET[profile.id]] if profile.id in KIT_FOR_TARGET else []) + list(SHARED_KITS))
    return "\n\n".join(
        [
            f"Write a training environment that isolates one capability of an agent on the target `{profile.id}` "
            f"({profile.title}).",
            _capability_section(capability),
            f"## The target's tools (exact schemas; the env must expose some of these, unchanged)\n```json\n{json.dumps(tools, indent=1)}\n```",
            f"## The target's policy (summary)\n{profile.policy.strip() or '(none given)'}",
            CONTRACT.format(
                kits=kits,
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
                masked=config.diversity_min_masked,
                patterns=config.diversity_min_patterns,
                drop=config.sensitivity_min_drop,
                sens_share=config.sensitivity_min_share,
                spread=config.grpo_min_spread,
                max_success=config.grpo_max_success_share,
                exploit_share=config.exploit_max_share,
                exploit_match=config.exploit_max_match_share,
                reset_ms=config.reset_budget_ms,
                step_ms=config.step_budget_ms,
            ),
            "## The world kits you can import (generated from the kits; use them instead of re-writing the world)\n"
            + kit_reference(profile.id),
            f"## A complete example that passes the gate, built on the kit (capability `{example_name}`)\n"
            f"```python\n{example_source}```",
            f"Now write the module for `{capability.name}` on `{profile.id}`. Make the scenarios such that an agent "
            "lacking this capability fails them in the way the evidence above shows. Build on the kit: write only what "
            "the capability adds. Answer with the complete module in one ```python block.",
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
