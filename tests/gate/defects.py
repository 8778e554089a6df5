"""A catalogue of defective envs: each is a valid env (tests/envs/defective/desk.py, tests/gate/envs/tiny_checked.py,
the kit-based example env, or an env of tests/gate/envs/) with ONE subtle defect of the kind a careless or
reward-hacking LLM writes, and the check that must reject it.

Each defect is a list of (anchor, replacement) patches on its base module, so the defect is the diff and
nothing else. ``python -m tests.gate.defects DIR`` writes every variant out as a module, e.g. to try them
on another gate.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ENVS = Path(__file__).resolve().parents[1] / "envs"
GATE_ENVS = Path(__file__).resolve().parent / "envs"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "envs" / "cancellation_eligibility.py"
BASES = {"desk": ENVS / "defective" / "desk.py", "tiny": GATE_ENVS / "tiny_checked.py", "kit": EXAMPLE,
         "yesno": GATE_ENVS / "refundable_question.py", "library": GATE_ENVS / "library_desk.py"}
#: Valid envs of the kinds the gate used to reject, each of which must pass.
VALID = {name: GATE_ENVS / f"{name}.py" for name in ("which_trip", "refundable_question", "long_task", "signed_reward", "library_desk")}

# Busy work standing in for slow env code (env modules cannot sleep): 0.05 to 0.1 s per unit on these machines.
SPIN = "sum(i * i for i in range(1000000))"


@dataclass(frozen=True)
class Defect:
    check: str  # the check that must reject it (several allowed, e.g. static OR determinism for the clock)
    summary: str
    patches: tuple[tuple[str, str], ...]
    base: str = "desk"
    config: dict[str, Any] = field(default_factory=dict)
    needs_actions: bool = False  # the counterexample must carry actions to replay
    also: tuple[str, ...] = ()  # other checks that may rightly reject it too
    instead: tuple[str, ...] = ()  # checks that may reject it first (the strict static check), skipping the rest
    counterexample: bool = True  # the failing check names a seed (not so for a declared constant like max_steps)

    def source(self) -> str:
        text = BASES[self.base].read_text()
        for old, new in self.patches:
            if text.count(old) != 1:
                raise AssertionError(f"patch anchor not found exactly once: {old[:60]!r}")
            text = text.replace(old, new)
        return text


GENERATE = "        rng = self.rng(seed)\n        name = rng.choice(FIRST_NAMES)\n"
EVALUATE_RETURN = '''        return sdk.Reward(
            components={"state": float(cancelled == allowed), "told": float(told)},
            gates={"verified": 1.0 if verified else 0.4, "no_other_cancelled": 0.0 if others else 1.0},
        )'''
GET_TOOL = '''    def get_reservation_details(self, state, reservation_id):
        if reservation_id not in state["reservations"]:
            raise sdk.ToolError("Reservation not found")'''
USER_REPLY_HOOK = "    @sdk.tool\n    def get_reservation_details"

DEFECTS: dict[str, Defect] = {
    # --- static and contract ---
    "hidden_forbidden_import": Defect(
        "static", "an import outside the allowed set, spelled as a call to __import__", base="tiny", counterexample=False,
        patches=(("from env_registry import sdk", "from env_registry import sdk\n_load = __import__('o' + 's')"),),
    ),
    "schema_type_differs": Defect(
        "schema_fidelity", "a tool schema changed from the target's (an id typed as integer)", base="tiny",
        also=("solvability", "reward_sensitivity", "exploit_search"),
        patches=(("    def evaluate(self, episode):",
                  "    def tools(self):\n        schemas = super().tools()\n"
                  "        schemas[1]['function']['parameters']['properties']['reservation_id']['type'] = 'integer'\n"
                  "        return schemas\n\n    def evaluate(self, episode):"),),
    ),
    # --- determinism -------------------------------------------------------------------------------
    "unseeded_on_some_seeds": Defect(
        "determinism", "generate uses an unseeded RNG on one seed in seven",
        ((GENERATE, "        import random\n        rng = random.Random(None) if seed % 7 == 3 else self.rng(seed)\n        name = rng.choice(FIRST_NAMES)\n"),),
        # every episode generates its scenario afresh in its own process, so the reference (planned on another
        # process's draw) also fails those seeds
        also=("exploit_search", "paraphrase", "robustness", "grpo_signal", "solvability"),
    ),
    "set_iteration_order": Defect(
        "determinism", "the destination is drawn from a list made of a set of strings (order differs per process)",
        (("            origin, destination = rng.sample(CITIES, 2)", "            origin, destination = rng.sample(list(set(CITIES)), 2)"),), also=("exploit_search", "paraphrase", "robustness", "grpo_signal"),
    ),
    "module_random_in_tool": Defect(
        "determinism", "cancel_reservation adds a confirmation code from the module-level RNG",
        (('        record["status"] = "cancelled"\n        return record',
          '        import random\n        record["status"] = "cancelled"\n        return {**record, "confirmation": random.randint(100000, 999999)}'),), also=("exploit_search", "paraphrase", "robustness", "grpo_signal"),
        instead=("static",),
    ),
    "string_hash": Defect(
        "determinism", "the reservation total depends on hash() of a string", instead=("static",),
        patches=(('                "total": rng.randint(90, 900),', '                "total": 90 + hash(origin + destination) % 800,'),),
    ),
    "wall_clock": Defect(
        "determinism", "the scenario records the time it was generated", instead=("static",),
        patches=((GENERATE, "        import datetime\n" + GENERATE),
         ('            truth={"cancel": allowed, "reservation_id": target},',
          '            truth={"cancel": allowed, "reservation_id": target, "asked_at": datetime.datetime.now().isoformat()},')),
    ),
    "unseeded_every_seed": Defect(
        "determinism", "generate uses an unseeded RNG", base="tiny",
        patches=(("rng = self.rng(seed)", "import random\n        rng = random.Random()"),), also=("exploit_search", "paraphrase", "robustness", "grpo_signal"),
        instead=("static",),
    ),
    # --- diversity ---------------------------------------------------------------------------------
    "differs_only_in_ids": Defect(
        "diversity", "every seed is the same task apart from reservation ids and the customer's name",
        (("        for index in range(rng.randint(2, 4)):", "        for index in range(3):"),
         ('                "cabin": rng.choice(CABINS),', '                "cabin": CABINS[index],'),
         ('                "insurance": rng.choice(["yes", "no"]),', '                "insurance": "no",'),
         ("            origin, destination = rng.sample(CITIES, 2)", "            origin, destination = CITIES[index], CITIES[index + 1]"),
         ('                "total": rng.randint(90, 900),', '                "total": 100 * (index + 1),'),
         ("        target = rng.choice(sorted(reservations))", "        target = list(reservations)[2]"),
         ('"opening": rng.choice(OPENINGS),', '"opening": OPENINGS[0],')),
        also=("capability_necessity",),
    ),
    # --- solvability -------------------------------------------------------------------------------
    "reference_fails_rare_branch": Defect(
        "solvability", "on about 2% of seeds the business-class reservation has already flown, and the reference still cancels it",
        (('        allowed = record["cabin"] == "business" or record["insurance"] == "yes"',
          '        if rng.random() < 0.02:\n            record.update(status="flown", cabin="business")\n'
          '        allowed = record["status"] == "active" and (record["cabin"] == "business" or record["insurance"] == "yes")'),
         ('        if scenario.truth["cancel"]:', '        record = scenario.state["reservations"][rid]\n'
          '        if record["cabin"] == "business" or record["insurance"] == "yes":')),
        needs_actions=True, config={"solvability_seeds": 60},
    ),
    "reference_gives_up": Defect(
        "solvability", "the reference solution refuses every request", base="tiny", needs_actions=True,
        also=("diversity", "reward_sensitivity"),
        patches=(('turns = [sdk.call("get_reservation_details", reservation_id=rid)]', "return [sdk.say('I cannot help with that.')]"),),
    ),
    # --- capability necessity ----------------------------------------------------------------------
    "answer_in_first_message": Defect(
        "capability_necessity", "the first message says whether the fare is refundable",
        (('        return scenario.user["opening"]',
          '        fare = "refundable" if scenario.truth["cancel"] else "non-refundable"\n'
          '        return scenario.user["opening"] + f" It is my {fare} booking."'),),
    ),
    "skipping_does_not_skip": Defect(
        "capability_necessity", "the 'capability-skipping' solution is the reference", base="tiny", also=("grpo_signal",),
        patches=(('        return [sdk.call("cancel_reservation", reservation_id=rid), sdk.say("Done, cancelled.")]',
          "        return self.reference_solution(scenario)"),),
        needs_actions=True,
    ),
    # --- reward sensitivity ------------------------------------------------------------------------
    "reward_ignores_which_reservation": Defect(
        "reward_sensitivity", "the reward checks that some reservation was cancelled, not which one",
        (('        cancelled = episode.state["reservations"][rid]["status"] == "cancelled"',
          '        cancelled = any(r["status"] == "cancelled" for r in episode.state["reservations"].values())'),
         ('        others = [r for key, r in episode.state["reservations"].items() if key != rid and r["status"] == "cancelled"]',
          "        others = []"),
         ('        acted = episode.first_index("cancel_reservation", reservation_id=rid)', '        acted = episode.first_index("cancel_reservation")')),
        needs_actions=True, also=("exploit_search",),
    ),
    "reward_ignores_the_write": Defect(
        "reward_sensitivity", "the reward grades what the agent said, not whether the reservation was cancelled",
        (('            components={"state": float(cancelled == allowed), "told": float(told)},',
          '            components={"told": float(told)},'),),
        needs_actions=True, also=("exploit_search",),
    ),
    # --- reward bounds -----------------------------------------------------------------------------
    "nan_when_cancelled_twice": Defect(
        "reward_bounds", "an infinite penalty for a repeated cancellation times a zero weight is NaN",
        ((EVALUATE_RETURN, '        penalty = float("inf") if len(episode.calls("cancel_reservation", ok=None)) > 1 else 0.0\n'
          "        reward = " + EVALUATE_RETURN.strip().removeprefix("return ") + "\n        return reward.total - 0.0 * penalty"),),
        needs_actions=True,
    ),
    "negative_when_cancelled_twice": Defect(
        "reward_bounds", "each cancellation after the first costs 0.6, below zero",
        ((EVALUATE_RETURN, "        reward = " + EVALUATE_RETURN.strip().removeprefix("return ") + "\n"
          '        return reward.total - 0.6 * max(0, len(episode.calls("cancel_reservation", ok=None)) - 1)'),),
        needs_actions=True,
    ),
    "bonus_above_one": Defect(
        "reward_bounds", "a raw bonus of 2.0", base="tiny", also=("solvability", "capability_necessity", "exploit_search"),
        patches=(("        return sdk.Reward(\n", "        return 2.0 if cancelled else 0.0\n        sdk.Reward(\n"),),
        needs_actions=True,
    ),
    # --- GRPO signal -------------------------------------------------------------------------------
    "binary_mostly_one": Defect(
        "grpo_signal", "1.0 unless the agent announces a cancellation without ever looking the reservation up (80% of "
        "mixture rollouts score 1; an agent that does nothing scores 1 too)",
        ((EVALUATE_RETURN, "        return 0.0 if episode.said('cancelled') and looked is None else 1.0"),),
        also=("reward_sensitivity", "capability_necessity", "exploit_search", "user_paths"), config={"grpo_seeds": 16},
    ),
    "reward_is_episode_length": Defect(
        "grpo_signal", "the reward grows with the number of steps (so the skipping solution as an agent plays it, one turn longer, "
        "is paid too)", also=("reward_sensitivity", "capability_necessity", "exploit_search", "user_paths"),
        patches=((EVALUATE_RETURN, "        return min(1.0, episode.steps / 4)"),
         ('        turns = [sdk.say("Which reservation would you like to cancel?"), sdk.call("get_reservation_details", reservation_id=rid)]',
          '        turns = [sdk.say("Which reservation would you like to cancel?"), sdk.call("get_reservation_details", reservation_id=rid),\n'
          '                 sdk.call("get_reservation_details", reservation_id=rid)]'),
         ('        return [sdk.say("Which reservation would you like to cancel?"), sdk.call("cancel_reservation", reservation_id=rid),\n'
          '                sdk.say(f"Reservation {rid} is cancelled.")]',
          '        return [sdk.call("cancel_reservation", reservation_id=rid), sdk.say(f"Reservation {rid} is cancelled.")]')),
    ),
    "constant_reward": Defect(
        "grpo_signal", "a constant reward", base="tiny", also=("reward_sensitivity", "capability_necessity", "exploit_search", "user_paths"),
        patches=(("return sdk.Reward(\n", "return sdk.Reward(components={'flat': 1.0})\n        sdk.Reward(\n"),),
    ),
    # --- robustness --------------------------------------------------------------------------------
    "user_never_ends": Defect(
        "robustness", "the simulated user always asks for something more, so episodes end only by truncation",
        ((USER_REPLY_HOOK, "    def user_reply(self, episode, agent_text):\n        reply = super().user_reply(episode, agent_text)\n"
          "        return sdk.UserReply(reply.text if not reply.done else \"Anything else you can do for me?\")\n\n" + USER_REPLY_HOOK),),
        needs_actions=True,
    ),
    "state_grows_every_call": Defect(
        "robustness", "every tool call appends a snapshot to a class-level audit log that is never cleared",
        (('class Desk(sdk.TaskEnv):\n', 'class Desk(sdk.TaskEnv):\n    audit = []\n'),
         (GET_TOOL, GET_TOOL + '\n        self.audit.append({"state": dict(state), "note": "lookup " * 1000})')),
    ),
    "state_leaks_between_episodes": Defect(
        "robustness", "cancellations are remembered in a class attribute, so a later episode sees them",
        (('class Desk(sdk.TaskEnv):\n', 'class Desk(sdk.TaskEnv):\n    cancelled_before = {}\n'),
         (GET_TOOL, GET_TOOL + '\n        if reservation_id in self.cancelled_before:\n'
          '            return {**state["reservations"][reservation_id], "status": "cancelled"}'),
         ('        record["status"] = "cancelled"\n', '        record["status"] = "cancelled"\n        self.cancelled_before[reservation_id] = True\n')),
        also=("solvability", "reward_sensitivity", "grpo_signal", "determinism"),
    ),
    "crash_on_malformed_input": Defect(
        "robustness", "looking up a reservation that does not exist raises KeyError", base="tiny", needs_actions=True,
        patches=(('        if reservation_id not in state["reservations"]:\n            raise sdk.ToolError("Reservation not found")\n'
                  '        return state["reservations"][reservation_id]\n', '        return state["reservations"][reservation_id]\n'),),
    ),
    "crash_on_unknown_id": Defect(
        "robustness", "looking up an unknown reservation raises KeyError", needs_actions=True,
        patches=((GET_TOOL, '    def get_reservation_details(self, state, reservation_id):'),),
    ),
    "endless_episode": Defect("robustness", "max_steps far beyond the limit", base="tiny", counterexample=False,
                              patches=(("max_steps = 6", "max_steps = 10**6"),)),
    "module_kept_alive_by_a_type_alias": Defect(  # survives the module re-executed per episode: see below
        "robustness", "a module-level alias over the env's own class (Itinerary = List[Leg]) puts every episode's newly "
        "executed module, with its 4.4 MB of seat maps, in typing's cache of subscripted generics: a training worker keeps "
        "the last 128 (~560 MB, over the 512 MB budget)",
        (("from env_registry import sdk", "from typing import List\n\nfrom env_registry import sdk"),
         ("CONFIRMED = (", "#: an empty seat map (180 seats) for each of the 8 daily flights over a year, built when the module loads\n"
          "SEAT_MAPS = [[0] * 180 for _ in range(366 * 8)]\n\n\n"
          "class Leg(dict):\n    \"\"\"One leg of an itinerary: its seats are its flight's.\"\"\"\n\n"
          "    def seats(self, day, flight):\n        return SEAT_MAPS[day * 8 + flight]\n\n\n"
          "Itinerary = List[Leg]\n"
          "CONFIRMED = (")),
    ),
    "generate_raises_on_some_seeds": Defect(
        "robustness", "generate raises on one seed in thirteen", also=("solvability", "interface"),
        patches=((GENERATE, GENERATE + "        if seed % 13 == 6:\n            raise ValueError('no flights on that day')\n"),),
    ),
    # --- exploit search (reward truth) ----------------------------------------------------------------
    "diligence_bonus_for_failed_calls": Defect(
        "exploit_search", "a 'diligence' bonus of 0.7 for trying tools, even calls that fail: junk calls farm it",
        ((EVALUATE_RETURN, "        tried = 0.7 if len(episode.calls(ok=False)) >= 2 else 0.0\n        return max(tried, "
          + EVALUATE_RETURN.strip().removeprefix("return ") + ".total)"),),
        needs_actions=True,
    ),
    "keyword_inside_a_word": Defect(
        "exploit_search", "a refusal is recognised by the letters 'no' anywhere: 'I don't know' after any look-up is paid",
        (("        told = any(episode.said(w) for w in (CONFIRMED if allowed else REFUSED))",
          "        spoken = episode.assistant_text.lower()\n        told = ('cancel' in spoken) if allowed else ('no' in spoken)"),),
        needs_actions=True, also=("paraphrase",),  # the substring test also fails the reworded reference on some seeds
    ),
    "work_destroyed_afterwards": Defect(
        "exploit_search", "nothing checks the other reservations: cancelling them after the work still scores 1.0",
        (('        others = [r for key, r in episode.state["reservations"].items() if key != rid and r["status"] == "cancelled"]',
          "        others = []"),),
        needs_actions=True,
    ),
    "answer_off_by_leading_digit": Defect(
        "exploit_search", "the refund told is checked on its last digits only: an amount off by its leading digit gets full credit",
        (('            truth={"cancel": allowed, "reservation_id": target},',
          '            truth={"cancel": allowed, "reservation_id": target, "refund": record["total"]},'),
         ("        told = any(episode.said(w) for w in (CONFIRMED if allowed else REFUSED))",
          "        told = str(episode.scenario.truth['refund'])[1:] in episode.assistant_text if allowed else "
          "any(episode.said(w) for w in REFUSED)"),
         ('            turns.append(sdk.say(f"Reservation {rid} is cancelled."))',
          "            turns.append(sdk.say(f\"Reservation {rid} is cancelled; ${scenario.truth['refund']} will be refunded.\"))")),
        needs_actions=True,
    ),
    "flipped_answer_paid": Defect(
        "exploit_search", "the yes/no answer is read by substrings: 'not refundable' contains 'refundable', 'economy' contains 'no'",
        base="yesno", needs_actions=True,
        patches=(("        answers = re.findall(r\"\\b(yes|no)\\b\", final)  # the answer is the final message's yes or no, and only one\n"
                  "        right = len(set(answers)) == 1 and (answers[0] == \"yes\") == truth[\"refundable\"]",
                  "        right = ('refundable' in final or 'yes' in final) if truth['refundable'] else 'no' in final"),),
    ),
    "any_short_answer_but_the_probe_word": Defect(
        "exploit_search", "one short closing message is paid 0.9, unless it is exactly the old probe's 'Okay.'",
        ((EVALUATE_RETURN, "        if episode.steps == 1 and episode.assistant_text.strip() != 'Okay.':\n            return 0.9\n"
          + EVALUATE_RETURN),),
        also=("capability_necessity", "user_paths"),
    ),
    # --- the right behaviour wins ----------------------------------------------------------------------
    "truth_goes_stale_when_read": Defect(
        "stale_truth", "reading a reservation whose id ends in A-F 'refreshes' its insurance to yes: the truth computed "
        "at generation goes stale, and an agent that trusts what it read loses", base="kit", also=("world_fidelity", "solvability"),
        config={"truth_seeds": 64},  # stale on ~1.5% of seeds: 12 seeds met one only by the luck of the old seed draw
        patches=(("    def evaluate(self, episode):",
                  "    @sdk.tool\n    def get_reservation_details(self, db, reservation_id):\n"
                  "        if reservation_id in db['reservations'] and reservation_id[-1] in 'ABCDEF':\n"
                  "            db['reservations'][reservation_id]['insurance'] = 'yes'\n"
                  "        return airline.get_reservation_details(db, reservation_id)\n\n    def evaluate(self, episode):"),),
    ),
    "truth_computed_before_a_last_change": Defect(
        "stale_truth", "generate computes the truth, then upgrades the cabin on some seeds: the graded truth is not the "
        "one the records support", base="kit", also=("solvability", "exploit_search", "reward_sensitivity"),
        patches=(('        scenario.meta["variant"] = scenario.truth["rule"]',
                  '        scenario.meta["variant"] = scenario.truth["rule"]\n        if seed % 5 == 1:\n'
                  '            scenario.state["reservations"][rid]["cabin"] = "business"'),),
    ),
    "exact_words_required": Defect(
        "paraphrase", "the answer must contain the reference's exact sentence: 'canceled' or 'can't' lose the reward",
        (("        told = any(episode.said(w) for w in (CONFIRMED if allowed else REFUSED))",
          "        told = ('is cancelled' if allowed else 'cannot be cancelled') in episode.assistant_text"),),
        needs_actions=True,
    ),
    # --- state and determinism -------------------------------------------------------------------------
    "module_level_counter": Defect(
        "determinism", "a module-level list counts requests across episodes and the user says how often they asked",
        (("CABINS = [", "ASKED = []\nCABINS = ["),
         (USER_REPLY_HOOK, "    def user_reply(self, episode, agent_text):\n        ASKED.append(1)\n"
          "        reply = super().user_reply(episode, agent_text)\n"
          "        return sdk.UserReply(reply.text + f' (request {len(ASKED)})', reply.done)\n\n" + USER_REPLY_HOOK)),
        also=("robustness", "solvability", "grpo_signal", "reward_sensitivity"),
    ),
    "random_generator_on_the_class": Defect(
        "determinism", "the simulated user's wording comes from one random generator on the class, shared by every episode",
        (("CABINS = [", "import random\nCABINS = ["),
         ("class Desk(sdk.TaskEnv):\n", "class Desk(sdk.TaskEnv):\n    chatter = random.Random(7)\n"),
         (USER_REPLY_HOOK, "    def user_reply(self, episode, agent_text):\n        reply = super().user_reply(episode, agent_text)\n"
          "        return sdk.UserReply(self.chatter.choice(['', 'Sure. ', 'Okay. ']) + reply.text, reply.done)\n\n" + USER_REPLY_HOOK)),
        also=("robustness",),
    ),
    "gate_only_behaviour": Defect(  # a fresh module per episode: the flag never survives, so it never pays
        "solvability", "the reward is only paid once the reference solution has been asked for (training never asks)",
        (("class Desk(sdk.TaskEnv):\n", "class Desk(sdk.TaskEnv):\n    consulted = []\n"),
         ("    def reference_solution(self, scenario):\n", "    def reference_solution(self, scenario):\n        self.consulted.append(1)\n"),
         (EVALUATE_RETURN, "        if not self.consulted:\n            return 0.0\n" + EVALUATE_RETURN)),
        also=("robustness", "determinism", "capability_necessity", "reward_sensitivity", "grpo_signal", "exploit_search",
              "paraphrase", "user_paths", "stale_truth"),
    ),
    "reads_the_gate_hash_seed": Defect(
        "solvability", "the env tells the old gate's workers (hash seeds 1 and 2) by set order and pays nothing elsewhere",
        (("CABINS = [", "GATE_ORDERS = (['epsilon', 'gamma', 'beta', 'delta', 'zeta', 'alpha'], "
          "['beta', 'delta', 'gamma', 'zeta', 'alpha', 'epsilon'])\n"
          "UNDER_GATE = list({'alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta'}) in GATE_ORDERS\nCABINS = ["),
         (EVALUATE_RETURN, "        if not UNDER_GATE:\n            return 0.0\n" + EVALUATE_RETURN)),
        also=("capability_necessity", "reward_sensitivity", "grpo_signal", "exploit_search", "paraphrase", "determinism",
              "user_paths", "stale_truth"),
    ),
    "seeds_outside_the_old_window": Defect(
        "solvability", "on seeds of 10,000 and up the reference forgets to cancel: a fixed window 0..127 never saw it",
        (('        if scenario.truth["cancel"]:\n            turns.append(sdk.call("cancel_reservation", reservation_id=rid))',
          '        if scenario.truth["cancel"] and scenario.seed < 10000:\n            turns.append(sdk.call("cancel_reservation", reservation_id=rid))'),),
        also=("reward_sensitivity", "exploit_search", "paraphrase", "stale_truth", "diversity"), needs_actions=True,
    ),
    "small_cycle_of_tasks": Defect(
        "diversity", "the scenario repeats every 150 seeds: a window of 100 consecutive seeds sees no repeat",
        ((GENERATE, "        rng = self.rng(seed % 150)\n        name = rng.choice(FIRST_NAMES)\n"),),
        counterexample=False,
    ),
    # --- the simulated user's other paths ---------------------------------------------------------------
    "reply_doubles_every_turn": Defect(
        "user_paths", "when the agent says nothing useful, the user repeats everything said so far: the observation doubles",
        ((USER_REPLY_HOOK, "    def user_reply(self, episode, agent_text):\n        reply = super().user_reply(episode, agent_text)\n"
          "        if 'reservation' not in agent_text.lower() and not reply.done:\n"
          "            said = ' '.join(m.get('content') or '' for m in episode.messages if m.get('role') == 'user')\n"
          "            return sdk.UserReply(said + ' ' + said)\n        return reply\n\n" + USER_REPLY_HOOK),),
        needs_actions=True,
    ),
    "time_out_paid_as_success": Defect(
        "user_paths", "when the user gives up after being stalled, the episode is graded as a polite, finished task",
        ((EVALUATE_RETURN, "        if episode.user_turns >= 8:\n            return 1.0\n" + EVALUATE_RETURN),),
        needs_actions=True,
    ),
    # --- fidelity beyond parameters ---------------------------------------------------------------------
    "result_shape_differs": Defect(
        "world_fidelity", "get_reservation_details returns the target's record plus a field the target does not have",
        base="kit", needs_actions=True,
        patches=(("    def evaluate(self, episode):",
                  "    @sdk.tool\n    def get_reservation_details(self, db, reservation_id):\n"
                  "        view = airline.get_reservation_details(db, reservation_id)\n"
                  "        view['refund_policy_version'] = 'v2'\n        return view\n\n    def evaluate(self, episode):"),),
    ),
    "refund_never_recorded": Defect(
        "world_fidelity", "cancel_reservation marks the reservation cancelled but never records the refund, and the "
        "reward checks the status only", base="kit", needs_actions=True,
        patches=(("    def evaluate(self, episode):",
                  "    @sdk.tool\n    def cancel_reservation(self, db, reservation_id):\n"
                  "        if reservation_id not in db['reservations']:\n            raise sdk.ToolError('Reservation not found')\n"
                  "        record = db['reservations'][reservation_id]\n        record['status'] = 'cancelled'\n"
                  "        return airline.get_reservation_details(db, reservation_id)\n\n    def evaluate(self, episode):"),
                 ('            exact = episode.state["reservations"][rid] == expected["reservations"][rid]', "            exact = cancelled")),
    ),
    "tool_description_of_another_version": Defect(
        "schema_fidelity", "the env re-describes a tool with an older wording", base="kit", counterexample=False,
        patches=(("    def evaluate(self, episode):",
                  "    def tools(self):\n        schemas = super().tools()\n"
                  "        schemas[1]['function']['description'] = 'Get the details of a reservation (v1 API).'\n"
                  "        return schemas\n\n    def evaluate(self, episode):"),),
    ),
    "booking_on_a_flight_that_does_not_exist": Defect(
        "world_fidelity", "on some seeds the requested reservation is moved to a flight number the world does not have",
        base="kit", also=("solvability", "exploit_search", "capability_necessity", "paraphrase", "reward_sensitivity", "stale_truth"),
        patches=(('        scenario.meta["variant"] = scenario.truth["rule"]',
                  '        scenario.meta["variant"] = scenario.truth["rule"]\n        if seed % 3 == 0:\n'
                  '            scenario.state["reservations"][rid]["flights"][0]["flight_number"] = "HAT999"'),),
    ),
    "user_states_the_verdict": Defect(
        "capability_necessity", "asked which reservation, the user adds that the agent on the phone said it is eligible "
        "(only when it is)",
        (("f\"It's {target}, {record['origin']} to {record['destination']}.\"]]},",
          "f\"It's {target}, {record['origin']} to {record['destination']}.\""
          " + (' The phone agent said it is eligible.' if allowed else '')]]},"),),
        config={"necessity_seeds": 60, "diversity_seeds": 60},
    ),
    "tool_result_states_the_verdict": Defect(
        "capability_necessity", "the reservation lookup adds a note for the agent saying what to do with the reservation "
        "('agent_should': 'cancel' or 'refuse')",
        (('        return state["reservations"][reservation_id]\n',
          '        record = state["reservations"][reservation_id]\n'
          '        allowed = record["cabin"] == "business" or record["insurance"] == "yes"\n'
          '        return {**record, "agent_should": "cancel" if allowed else "refuse"}\n'),),
        config={"necessity_seeds": 60, "diversity_seeds": 60},
    ),
    # --- a contract for real envs ------------------------------------------------------------------------
    "own_schema_disagrees_with_method": Defect(
        "schema_fidelity", "an own-domain tool's schema declares an argument its method does not take", base="library",
        counterexample=False,
        patches=(('"properties": {"loan_id": {"type": "string"}}, "required": ["loan_id"]},',
                  '"properties": {"loan_id": {"type": "string"}, "branch": {"type": "string"}}, "required": ["loan_id"]},'),), also=("robustness",),
    ),
    "own_returns_disagree_with_results": Defect(
        "schema_fidelity", "an own-domain tool declares it returns a due date, and never does", base="library",
        patches=(('"returns": {"type": "object", "required": ["loan_id", "title", "fines", "holds"]}',
                  '"returns": {"type": "object", "required": ["loan_id", "title", "fines", "holds", "due_date"]}'),),
        needs_actions=True,
    ),
    # --- budget ------------------------------------------------------------------------------------
    "generate_slow_on_some_seeds": Defect(
        "budget", "generate spins for about 0.4 s on one seed in eight",
        ((GENERATE, GENERATE + f"        if seed % 8 == 5:\n            [{SPIN} for _ in range(10)]\n"),),
    ),
    "generate_slow_on_every_seed": Defect(
        "budget", "generate spins for about 0.5 s on every seed: the gate must stop early",
        ((GENERATE, GENERATE + f"        [{SPIN} for _ in range(5)]\n"),),
    ),
    "tool_slow_on_unknown_ids": Defect(
        "budget", "looking up a well-formed but unknown id scans for about 1 s", needs_actions=True,
        patches=((GET_TOOL, '    def get_reservation_details(self, state, reservation_id):\n'
          '        if reservation_id not in state["reservations"]:\n'
          f'            if len(reservation_id) == 6 and reservation_id.isupper():\n                [{SPIN} for _ in range(30)]\n'
          '            raise sdk.ToolError("Reservation not found")'),),
    ),
}

# Envs that break the gate's own assumptions: it must still return a report (and say why), never raise.
HOSTILE: dict[str, tuple[tuple[str, str], ...]] = {
    "every_method_raises": tuple(
        (f"    def {method}(self, {args}):\n", f"    def {method}(self, {args}):\n        raise RuntimeError('nope')\n")
        for method, args in [("generate", "seed"), ("system_prompt", "scenario"), ("first_user_message", "scenario"),
                             ("evaluate", "episode"), ("reference_solution", "scenario"), ("capability_skipping_solution", "scenario")]
    ),
    "returns_nan": (
        ("    def evaluate(self, episode):\n", "    def evaluate(self, episode):\n        return float('nan')\n"),
        ("    def system_prompt(self, scenario):\n", "    def system_prompt(self, scenario):\n        return float('nan')\n"),
        ('        return state["reservations"][reservation_id]\n', "        return float('nan')\n"),
    ),
    "returns_wrong_types": (
        ("    def generate(self, seed):\n", "    def generate(self, seed):\n        return {'seed': seed}\n"),
        ("    def reference_solution(self, scenario):\n", "    def reference_solution(self, scenario):\n        return 'cancel it'\n"),
        ("    def evaluate(self, episode):\n", "    def evaluate(self, episode):\n        return 'high'\n"),
    ),
    "solutions_of_wrong_type": (
        ("    def reference_solution(self, scenario):\n", "    def reference_solution(self, scenario):\n        return [42, None, {'calls': 'x'}]\n"),
        ("    def capability_skipping_solution(self, scenario):\n", "    def capability_skipping_solution(self, scenario):\n        return 7\n"),
    ),
    "generate_hangs": (("        rng = self.rng(seed)\n        name", "        while True:\n            pass\n        rng = self.rng(seed)\n        name"),),
    "tool_hangs": ((GET_TOOL, '    def get_reservation_details(self, state, reservation_id):\n        while True:\n            pass'),),
    "import_hangs": (("CABINS = [", "while True:\n    pass\nCABINS = ["),),
}


def hostile_source(name: str) -> str:
    text = BASES["desk"].read_text()
    for old, new in HOSTILE[name]:
        if text.count(old) != 1:
            raise AssertionError(f"{name}: patch anchor not found exactly once: {old[:60]!r}")
        text = text.replace(old, new)
    return text


#: State kept across episodes on the class or the module: the handler runs every episode on a freshly executed
#: module, so these no longer differ between episodes (or between gate and training) and must pass; tested in
#: tests/gate/test_isolation.py.
STATE_WITHOUT_EFFECT = {name: DEFECTS.pop(name) for name in (
    "state_grows_every_call", "state_leaks_between_episodes", "module_level_counter", "random_generator_on_the_class",
    "module_kept_alive_by_a_type_alias")}


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "defective-envs")
    out.mkdir(parents=True, exist_ok=True)
    for key, defect in DEFECTS.items():
        (out / f"{key}.py").write_text(f'"""Defect ({defect.check}): {defect.summary}."""\n\n' + defect.source())
    for key in HOSTILE:
        (out / f"hostile_{key}.py").write_text(hostile_source(key))
    print(f"wrote {len(DEFECTS) + len(HOSTILE)} envs to {out}")

