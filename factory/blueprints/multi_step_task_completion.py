"""Blueprint env: multi-step task completion on the tau2 airline target (world, tools and policy: the airline kit).

A customer asks for several things in one breath: "cancel this one, move that flight, add two bags to the third,
and tell me what it all costs". Every sub-request is allowed by the policy, so nothing here is about refusing; the
difficulty is carrying every sub-request through (look up, work out the amounts, confirm, write) and reporting on
all of them, instead of finishing the first and wrapping up. Each sub-task is graded on the final database; a
wrap-up that reports every outcome and the totals the user asked for earns the rest. Stray writes zero the reward.
"""

import copy
import datetime

from trace_env import sdk
from trace_env.kits import tau2_airline as airline
from trace_env.kits import text

# Why a user cancels, per eligibility rule (every cancellation asked for here is one the policy allows).
CANCEL_RULES = {"recent_booking": ["personal"], "business_cabin": ["personal"], "insurance_covered": ["health", "weather"],
                "airline_cancelled": ["airline_cancelled"]}
KINDS = ["cancel", "change_flight", "add_bags", "update_passenger", "upgrade_cabin"]
KIND_WEIGHTS = [30, 20, 20, 15, 15]
WRITE_TOOL_OF = {"cancel": "cancel_reservation", "change_flight": "update_reservation_flights",
                 "upgrade_cabin": "update_reservation_flights", "add_bags": "update_reservation_baggages",
                 "update_passenger": "update_reservation_passengers"}
# The fields of a reservation each kind of sub-task is graded on.
GRADED_FIELDS = {"cancel": ["status", "payment_history"], "change_flight": ["flights", "cabin", "payment_history"],
                 "upgrade_cabin": ["flights", "cabin", "payment_history"],
                 "add_bags": ["total_baggages", "nonfree_baggages", "payment_history"], "update_passenger": ["passengers"]}
# Words that close a conversation: the user takes them as the agent's wrap-up and leaves.
WRAP_UP_WORDS = ["anything else", "all done", "everything is done", "all set", "that's everything", "that is everything",
                 "all taken care of", "have a great", "have a nice"]
ACK, GO_ON = "Okay.", "Everything you need should be in my first message - please go ahead."
# Narrow on purpose: "refunded to the original payment method" is a statement, not a question.
PAYMENT_TRIGGERS = ["which payment", "what payment", "which card", "payment method would you", "payment method should",
                    "payment method do you", "how would you like to pay", "charge the", "use for the", "use for any",
                    "use for these", "use for this"]
NOTES = """\
In this conversation
- When the user asks for several things, handle every one of them, then summarise what was done with the amounts. One \
confirmation may cover several changes.
- A cabin change is update_reservation_flights with the same flights; a bag change passes the new total and the new \
number of paid bags; a passenger change passes the full passenger list; a flight change the full list of flights."""


def graded(reservation, kind):
    view = dict(reservation, net_payments=airline.net_payments(reservation))
    return {name: view[name] for name in GRADED_FIELDS[kind]}


def said(spoken, value):
    """Whether a number appears in text ("$1,204" counts as 1204)."""
    return any(abs(number - float(value)) < 0.005 for number in sdk.numbers_in(spoken))


class MultiStepTaskCompletionEnv(airline.AirlineTools, sdk.TaskEnv):
    capability = "multi_step_task_completion"
    target = "tau2-airline"
    description = (
        "Multi-step task completion: finish every part of a compound request. An airline customer asks for two to "
        "four things in one message - cancel a reservation, move a flight, add checked bags, correct a passenger, "
        "upgrade a cabin - on different reservations, often with the totals at the end. Every part is allowed by "
        "policy. The agent must look up each reservation, work out each amount, confirm, make every write, and close "
        "with a summary of each outcome (and the totals). Each sub-task is graded separately on the final database."
    )
    tool_names = ["get_user_details", "get_reservation_details", "search_direct_flight", "get_flight_status",
                  "list_all_airports", "calculate", "cancel_reservation", "update_reservation_flights",
                  "update_reservation_baggages", "update_reservation_passengers", "send_certificate",
                  "transfer_to_human_agents"]
    max_steps = 45
    write_tools = frozenset({"cancel_reservation", "update_reservation_flights", "update_reservation_baggages",
                             "update_reservation_passengers", "send_certificate"})
    terminal_tools = frozenset({"transfer_to_human_agents"})

    # --- scenario -------------------------------------------------------------------------------------
    def generate(self, seed):
        rng = self.rng(seed)
        now = airline.scenario_now(rng)
        world = airline.AirlineWorld(rng, now)
        user = world.user()
        card = rng.choice([m for m in user["payment_methods"].values() if m["source"] == "credit_card"])
        n_tasks = rng.choices([2, 3, 4], weights=[40, 35, 25])[0]
        kinds = rng.choices(KINDS, weights=KIND_WEIGHTS, k=n_tasks)
        makers = {"cancel": self.cancel_task, "change_flight": self.change_task, "add_bags": self.bags_task,
                  "update_passenger": self.passenger_task, "upgrade_cabin": self.upgrade_task}
        tasks = [makers[kind](world, user, card["id"]) for kind in kinds]
        for _ in range(rng.randint(1, 3)):
            world.reservation(user, cabin=rng.choice(airline.CABINS), trip=rng.choice(["one_way", "round_trip"]),
                              timing=rng.choice(["future", "future", "past"]), created="old",
                              insurance=rng.choice(["no", "yes"]))
        rng.shuffle(user["reservations"])
        state = world.state(user)
        after, expected = copy.deepcopy(state), []  # the expected end state, made by the real tools
        for task in tasks:
            self.write(after, task)
            expected.append(graded(after["reservations"][task["reservation_id"]], task["kind"]))
        charges = [t["money"] for t in tasks if t["money"] > 0]
        refunds = [-t["money"] for t in tasks if t["money"] < 0]
        totals = {}  # asked for only when it really adds up several amounts
        if len(charges) >= 2:
            totals["charged"] = sum(charges)
        if len(refunds) >= 2:
            totals["refunded"] = sum(refunds)
        truth = {"now": airline.stamp(now), "tasks": tasks, "expected": expected, "totals": totals,
                 "outcome": "; ".join(f"{t['kind']} {t['reservation_id']} ({t['money']:+d})" for t in tasks)}
        return sdk.Scenario(seed=seed, state=state, user=self.persona(rng, user, card, tasks, totals), truth=truth,
                            meta={"variant": "+".join(kinds), "n_tasks": n_tasks, "now": airline.stamp(now),
                                  "asks_totals": sorted(totals)})

    # One maker per kind of sub-task: each books a suitable reservation and says what to do.
    def cancel_task(self, world, user, card_id):
        rng = world.rng
        rule = rng.choice(sorted(CANCEL_RULES))
        reason = rng.choice(CANCEL_RULES[rule])
        record = world.reservation(
            user, cabin="business" if rule == "business_cabin" else rng.choice(["basic_economy", "economy"]),
            trip=rng.choice(["one_way", "round_trip"]), timing="future",
            created="recent" if rule == "recent_booking" else "old", insurance="yes" if rule == "insurance_covered" else "no")
        if rule == "airline_cancelled":
            leg = rng.choice(record["flights"])
            world.flights[leg["flight_number"]]["dates"][leg["date"]] = {"status": "cancelled"}
        return {"kind": "cancel", "reservation_id": record["reservation_id"], "rule": rule, "reason": reason,
                "reason_text": rng.choice(airline.REASON_TEXTS[reason]), "money": -airline.paid_total(record),
                "args": {"reservation_id": record["reservation_id"]}}

    def change_task(self, world, user, card_id):
        rng = world.rng
        cabin = rng.choice(["economy", "business"])
        record = world.reservation(user, cabin=cabin, trip=rng.choice(["one_way", "round_trip"]), timing="future",
                                   created="old", insurance=rng.choice(["no", "yes"]))
        change = world.flight_change(record)
        return {"kind": "change_flight", "reservation_id": record["reservation_id"], "route": change["route"],
                "flight_number": change["segment"]["flight_number"], "old_date": change["segment"]["date"],
                "new_date": change["new_date"], "money": change["price_delta"],
                "args": {"reservation_id": record["reservation_id"], "cabin": cabin, "flights": change["new_flights"],
                         "payment_id": card_id}}

    def bags_task(self, world, user, card_id):
        rng = world.rng
        cabin = rng.choice(airline.CABINS)
        record = world.reservation(user, cabin=cabin, trip=rng.choice(["one_way", "round_trip"]), timing="future",
                                   created="old", insurance=rng.choice(["no", "yes"]))
        added = rng.randint(1, 3)
        bags = airline.add_bags(record, user["membership"], added)
        return {"kind": "add_bags", "reservation_id": record["reservation_id"], "added": added, "money": bags["fee"],
                "allowance": airline.free_bags(user["membership"], cabin, len(record["passengers"])),
                "args": {"reservation_id": record["reservation_id"], "total_baggages": bags["total_baggages"],
                         "nonfree_baggages": bags["nonfree_baggages"], "payment_id": card_id}}

    def passenger_task(self, world, user, card_id):
        rng = world.rng
        record = world.reservation(user, cabin=rng.choice(airline.CABINS), trip=rng.choice(["one_way", "round_trip"]),
                                   timing="future", created="old", insurance=rng.choice(["no", "yes"]),
                                   passengers=rng.choice([2, 2, 3]))
        people = record["passengers"]
        index = rng.randrange(1, len(people))  # a companion, not the first traveller
        old = people[index]
        mode = rng.choice(["replace", "dob", "spelling"])
        if mode == "replace":
            new = world.person()
            while new["first_name"] == old["first_name"]:
                new = world.person()
        elif mode == "dob":
            new = dict(old, dob=world.person()["dob"])
        else:  # the booking holds a typo of the traveller's real first name
            new, typo = dict(old), list(old["first_name"])
            cut = rng.randrange(1, len(typo) - 1)
            typo[cut], typo[cut + 1] = typo[cut + 1], typo[cut]
            old["first_name"] = "".join(typo) if typo != list(new["first_name"]) else new["first_name"] + "e"
        passengers = [dict(p) for p in people]
        passengers[index] = new
        return {"kind": "update_passenger", "reservation_id": record["reservation_id"], "mode": mode, "old": old,
                "new": new, "money": 0, "args": {"reservation_id": record["reservation_id"], "passengers": passengers}}

    def upgrade_task(self, world, user, card_id):
        rng = world.rng
        cabin, target = rng.choice([("basic_economy", "economy"), ("economy", "business")])
        record = world.reservation(user, cabin=cabin, trip=rng.choice(["one_way", "round_trip"]), timing="future",
                                   created="old", insurance=rng.choice(["no", "yes"]))
        flights = [{"flight_number": f["flight_number"], "date": f["date"]} for f in record["flights"]]
        for leg in flights:
            world.ensure_seats(leg["flight_number"], leg["date"], target, len(record["passengers"]))
        money = airline.price_flights({"flights": world.flights}, record, target, flights)[1]
        return {"kind": "upgrade_cabin", "reservation_id": record["reservation_id"], "from": cabin, "to": target,
                "money": money, "args": {"reservation_id": record["reservation_id"], "cabin": target, "flights": flights,
                                         "payment_id": card_id}}

    def write(self, state, task):
        """Carry out one sub-task with the real tool (the expected state; the solutions make the same call)."""
        return self.tool_method(WRITE_TOOL_OF[task["kind"]])(state, **copy.deepcopy(task["args"]))

    def persona(self, rng, user, card, tasks, totals):
        uid = user["user_id"]
        gives_id = rng.random() < 0.65
        needs_card = any(t["kind"] not in ("cancel", "update_passenger") for t in tasks)
        card_upfront = needs_card and rng.random() < 0.5
        card_words = airline.payment_words(card)
        clauses = []
        for task in tasks:
            rid, kind, new = task["reservation_id"], task["kind"], task.get("new")
            if kind == "cancel":
                clause = rng.choice(["cancel reservation {r} because {why}", "cancel {r} - {why}",
                                     "get {r} cancelled, since {why}"]).format(r=rid, why=task["reason_text"])
            elif kind == "change_flight":
                clause = rng.choice(["move flight {f} on {r} from {a} to {b}", "push {f} ({r}) from {a} to {b}",
                                     "change the {a} flight {f} on reservation {r} to {b}, same flight number"]).format(
                    f=task["flight_number"], r=rid, a=text.nice_date(task["old_date"]), b=text.nice_date(task["new_date"]))
            elif kind == "add_bags":
                bags = "a checked bag" if task["added"] == 1 else f"{task['added']} checked bags"
                clause = rng.choice(["add {n} to {r}", "put {n} on reservation {r}"]).format(n=bags, r=rid)
            elif kind == "update_passenger":
                who = f"{task['old']['first_name']} {task['old']['last_name']}"
                clause = {"replace": f"on {rid}, replace {who} with {new['first_name']} {new['last_name']} (born {new['dob']})",
                          "dob": f"fix {who}'s date of birth on {rid} - it should be {new['dob']}",
                          "spelling": f"correct the spelling of {who} on {rid}: the first name is {new['first_name']}",
                          }[task["mode"]]
            else:
                clause = rng.choice(["upgrade {r} to {c}", "move reservation {r} up to {c}"]).format(
                    r=rid, c=airline.CABIN_LABEL[task["to"]])
            clauses.append(clause)
        style = rng.choice(["list", "sequence", "plain"])
        if style == "list":
            body = "I need a few things done:\n" + "\n".join(f"{i + 1}. {c[0].upper()}{c[1:]}." for i, c in enumerate(clauses))
        elif style == "sequence":
            body = "Could you first " + ", ".join([clauses[0]] + [("then " if i < len(clauses) - 1 else "and finally ") + c
                                                                  for i, c in enumerate(clauses[1:], start=1)]) + "?"
        else:
            body = "Please " + ", ".join(clauses[:-1]) + " and " + clauses[-1] + "."
        asks = ([rng.choice(["tell me the total you're charging my card", "what do all the charges add up to"])]
                if "charged" in totals else []) + ([rng.choice(["how much I get back in total", "the total refund"])]
                                                   if "refunded" in totals else [])
        wrap = " At the end, let me know " + " and ".join(asks) + "." if asks else rng.choice(
            [" Let me know when it's all done.", " Give me a quick summary at the end.", ""])
        greeting = rng.choice(["Hi!", "Hello,", "Hi there,", "Good morning,"])
        me = f" I'm {user['name']['first_name']} (user id {uid})." if gives_id else ""
        pay = f" Please put any charges on {card_words}." if card_upfront else ""
        cancels = [t for t in tasks if t["kind"] == "cancel"]
        answers = [text.fact("user_id", airline.TRIGGERS["user_id"], f"My user id is {uid}.", gives_id)]
        if cancels:
            answers.append(text.fact("reason", airline.TRIGGERS["reason"], " ".join(
                f"For {t['reservation_id']}: {t['reason_text']}." for t in cancels), True))
        if needs_card:
            answers.append(text.fact("payment", PAYMENT_TRIGGERS, f"Please use {card_words}.", card_upfront))
        return {"user_id": uid, "opening": f"{greeting}{me} {body}{pay}{wrap}", "answers": answers,
                "confirm": rng.choice(["Yes, please go ahead with all of it.", "Yes, do it.", "Yes - go ahead."]),
                "closing": rng.choice(["Great, thanks!", "That's everything, thank you.", "Okay, thanks. Bye."])}

    # --- prompt and simulated user ----------------------------------------------------------------------
    def system_prompt(self, scenario):
        return airline.system_prompt(datetime.datetime.fromisoformat(scenario.truth["now"]), NOTES)

    def first_user_message(self, scenario):
        return scenario.user["opening"]

    def user_reply(self, episode, agent_text):
        """Answers what it is asked, confirms, and leaves at the wrap-up. It never reminds the agent of a forgotten
        sub-request: keeping track of them is the skill."""
        persona, spoken = episode.scenario.user, text.normalise(agent_text)
        reply = text.answer_or_confirm(episode, agent_text, persona, max_turns=10)
        if reply is not None:
            return reply
        if text.has_any(spoken, WRAP_UP_WORDS):
            return sdk.UserReply(persona["closing"], done=True)
        # Anything else gets a short go-on, never a reminder; after two with no tool call in between, the user leaves.
        idle = 0
        for message in reversed(episode.messages[:-1]):
            if message.get("role") == "user" and message.get("content") in (ACK, GO_ON):
                idle += 1
            elif message.get("role") != "assistant" or message.get("tool_calls"):
                break
        if idle >= 2:
            return sdk.UserReply(persona["closing"], done=True)
        return sdk.UserReply(GO_ON if "?" in spoken else ACK)

    # --- reward -----------------------------------------------------------------------------------------
    def evaluate(self, episode):
        truth = episode.scenario.truth
        tasks = truth["tasks"]
        writes = episode.write_calls(self.write_tools)
        # Gate: a write nobody asked for (another reservation, or the wrong kind of change).
        allowed = [(WRITE_TOOL_OF[t["kind"]], t["reservation_id"]) for t in tasks]
        stray = [w for w in writes if (w.name, w.arguments.get("reservation_id")) not in allowed]
        components, weights = {}, {}
        for index, (task, expected) in enumerate(zip(tasks, truth["expected"])):
            name = f"task{index + 1}_{task['kind']}"
            components[name] = float(graded(episode.state["reservations"][task["reservation_id"]], task["kind"]) == expected)
            weights[name] = 1.0
        first_write = min((w.step for w in writes), default=None)  # the wrap-up: what was said once writing began
        after = [t for step, t, _ in text.agent_turns(episode) if first_write is not None and step > first_write]
        wrap_up = " ".join(t for t in after if t)
        components["final_summary"], weights["final_summary"] = sum(self.reported(wrap_up, t) for t in tasks) / len(tasks), 1.0
        if truth["totals"]:
            components["stated_totals"] = sum(said(wrap_up, v) for v in truth["totals"].values()) / len(truth["totals"])
            weights["stated_totals"] = 1.0
        notes = {"stray_writes": ", ".join(f"{w.name}({w.arguments.get('reservation_id')})" for w in stray)}
        return sdk.Reward(components=components, weights=weights, gates={"no_stray_write": 0.0 if stray else 1.0},
                          notes=notes)

    @staticmethod
    def reported(spoken, task):
        """Whether the wrap-up names the reservation and the fact that shows the sub-task's outcome."""
        if task["reservation_id"].lower() not in spoken:
            return False
        kind, money = task["kind"], abs(task["money"])
        if kind == "update_passenger":
            return task["new"]["first_name"].lower() in spoken or task["new"]["dob"] in spoken
        if money:
            return said(spoken, money)
        if kind == "change_flight":
            return task["new_date"] in spoken or text.nice_date(task["new_date"]).lower() in spoken
        if kind == "add_bags":
            return said(spoken, task["args"]["total_baggages"])
        return airline.CABIN_LABEL.get(task.get("to"), "cancelled") in spoken

    # --- solutions --------------------------------------------------------------------------------------
    def reads(self, scenario, task):
        """Look-ups an agent needs for one sub-task before it can quote and confirm it."""
        rid, kind = task["reservation_id"], task["kind"]
        flights = scenario.state["reservations"][rid]["flights"]
        turns = [sdk.call("get_reservation_details", reservation_id=rid)]
        if kind == "change_flight":
            turns.append(sdk.call("search_direct_flight", origin=task["route"][0], destination=task["route"][1],
                                  date=task["new_date"]))
        elif kind == "upgrade_cabin":  # current prices of the new cabin, leg by leg
            turns += [sdk.call("search_direct_flight", origin=leg["origin"], destination=leg["destination"],
                               date=leg["date"]) for leg in flights]
        elif kind == "cancel" and task["rule"] == "airline_cancelled":
            turns += [sdk.call("get_flight_status", flight_number=leg["flight_number"], date=leg["date"]) for leg in flights]
        return turns

    def plan_line(self, scenario, task):
        rid, money, kind = task["reservation_id"], task["money"], task["kind"]
        if kind == "cancel":
            return f"cancel reservation {rid}, refunding {text.money(-money)} to the original payment method"
        if kind == "change_flight":
            cost = "no fare difference" if not money else (
                f"{text.money(abs(money))} {'charged to' if money > 0 else 'refunded to'} your card")
            return f"move flight {task['flight_number']} on {rid} from {task['old_date']} to {task['new_date']} ({cost})"
        if kind == "add_bags":
            args = task["args"]
            return (f"add {task['added']} checked bag(s) to {rid}: {args['total_baggages']} bags in total, "
                    f"{args['nonfree_baggages']} of them paid beyond the free allowance of {task['allowance']} "
                    f"({text.money(money)} charged)")
        if kind == "update_passenger":
            new = task["new"]
            return f"update the passenger on {rid} to {new['first_name']} {new['last_name']}, born {new['dob']}"
        cabin = airline.CABIN_LABEL[scenario.state["reservations"][rid]["cabin"]]
        return f"upgrade {rid} from {cabin} to {airline.CABIN_LABEL[task['to']]} ({text.money(money)} charged)"

    def done_line(self, task):
        rid, money, kind = task["reservation_id"], task["money"], task["kind"]
        if kind == "cancel":
            return (f"reservation {rid} is cancelled and {text.money(-money)} will be refunded to the original payment "
                    f"method within 5 to 7 business days")
        if kind == "change_flight":
            cost = "" if not money else f"; {text.money(abs(money))} {'charged' if money > 0 else 'refunded'}"
            return f"flight {task['flight_number']} on {rid} now departs on {task['new_date']}{cost}"
        if kind == "add_bags":
            return f"reservation {rid} now has {task['args']['total_baggages']} checked bags; {text.money(money)} charged"
        if kind == "update_passenger":
            new = task["new"]
            return f"the passenger on {rid} is now {new['first_name']} {new['last_name']} (born {new['dob']})"
        return f"reservation {rid} is now in {airline.CABIN_LABEL[task['to']]}; {text.money(money)} charged"

    def opening_turns(self, scenario, tasks):
        """Ask for the user id if needed and read the user; ask for a card if a charge needs one."""
        answers = {a["key"]: a for a in scenario.user["answers"]}
        turns = [] if answers["user_id"]["given_upfront"] else [
            sdk.say("Happy to help with all of that. Could you tell me your user id first?")]
        turns.append(sdk.call("get_user_details", user_id=scenario.user["user_id"]))
        for task in tasks:
            turns += self.reads(scenario, task)
        payment = answers.get("payment")
        if payment and not payment["given_upfront"] and any(t["kind"] not in ("cancel", "update_passenger") for t in tasks):
            turns.append(sdk.say("Which payment method from your profile should I use for the charges?"))
        return turns

    def reference_solution(self, scenario):
        tasks, totals = scenario.truth["tasks"], scenario.truth["totals"]
        turns = self.opening_turns(scenario, tasks)
        plan = "; ".join(f"({i + 1}) {self.plan_line(scenario, t)}" for i, t in enumerate(tasks))
        turns.append(sdk.say(f"Here is what I will do: {plan}. Shall I go ahead with all of these?"))
        turns += [sdk.call(WRITE_TOOL_OF[t["kind"]], **copy.deepcopy(t["args"])) for t in tasks]
        summary = "Everything is done: " + "; ".join(f"({i + 1}) {self.done_line(t)}" for i, t in enumerate(tasks)) + "."
        if "charged" in totals:
            summary += f" In total, {text.money(totals['charged'])} was charged to your card."
        if "refunded" in totals:
            summary += f" In total, {text.money(totals['refunded'])} will be refunded to you."
        return turns + [sdk.say(summary)]

    def capability_skipping_solution(self, scenario):
        """Handles the first request properly, then wraps up as if that were all."""
        first = scenario.truth["tasks"][0]
        return self.opening_turns(scenario, [first]) + [
            sdk.say(f"I can {self.plan_line(scenario, first)}. Shall I go ahead?"),
            sdk.call(WRITE_TOOL_OF[first["kind"]], **copy.deepcopy(first["args"])),
            sdk.say(f"Done: {self.done_line(first)}. Is there anything else I can help you with?")]


ENV = MultiStepTaskCompletionEnv
