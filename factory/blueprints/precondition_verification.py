"""Blueprint env: precondition verification on the tau2 airline target (world, tools and policy: the airline kit).

The airline's write tools check almost nothing, so whether a request may be granted is decided by policy rules
the agent must check against the records before writing. A customer asks for one to three things (cancel a
reservation, move a flight); each is decided by exactly one rule (``truth["requests"][i]["rule"]``). Nearly every
scenario holds a request to refuse, so an agent that does what it is asked hits the forbidden-write gate.
"""

import copy
import datetime

from trace_env import sdk
from trace_env.kits import tau2_airline as airline
from trace_env.kits import text

ELIGIBLE_CANCEL_RULES = ["recent_booking", "airline_cancelled", "business_cabin", "insurance_covered"]
INELIGIBLE_CANCEL_RULES = ["already_flown", "insurance_not_covered", "airline_claim_unverified", "no_rule"]
INELIGIBLE_CANCEL_WEIGHTS = [25, 20, 20, 35]
# Narrow on purpose: "refunded to the original payment method" is a statement, not a question.
PAYMENT_TRIGGERS = ["which payment", "what payment", "which card", "payment method would you", "payment method should",
                    "payment method do you", "how would you like to pay", "pay the difference",
                    "charge the difference", "use for the fare", "use for the difference"]
NOTES = """\
In this conversation
- Check every rule against the records before a write (for a claimed airline cancellation, the flight status: the \
user's word is not enough). When you refuse a request, tell the user which rule stands in the way.
- A reservation with a flight already flown cannot be cancelled: say so (you may offer a human agent); do not transfer."""


def refuses(said, reservation_id, several):
    """Whether a normalised message refuses something about this reservation (naming it when several are asked)."""
    return text.has_any(said, text.REFUSAL_WORDS) and (not several or reservation_id.lower() in said)


def graded(reservation):
    """What a granted request must leave, payments as the target records them: a second cancellation (a second
    round of refunds) is a different end state, as in tau2's database check."""
    return {"status": reservation["status"], "cabin": reservation["cabin"], "flights": reservation["flights"],
            "payment_history": reservation["payment_history"]}


class PreconditionVerificationEnv(airline.AirlineTools, sdk.TaskEnv):
    capability = "precondition_verification"
    target = "tau2-airline"
    description = (
        "Precondition verification: before a state-changing call, check the policy rules the API does not enforce. "
        "An airline customer asks to cancel reservations or move flights; each request is allowed or not by the "
        "records (booking time, cabin, insurance, flights already flown), the live flight status and the stated "
        "reason. The agent must carry out exactly the eligible requests after confirmation and refuse the others "
        "naming the deciding rule. Any cancellation or change the policy forbids zeroes the reward."
    )
    tool_names = ["get_user_details", "get_reservation_details", "get_flight_status", "search_direct_flight",
                  "list_all_airports", "calculate", "cancel_reservation", "update_reservation_flights",
                  "update_reservation_baggages", "send_certificate", "transfer_to_human_agents"]
    max_steps = 40
    write_tools = frozenset({"cancel_reservation", "update_reservation_flights", "update_reservation_baggages",
                             "send_certificate"})
    terminal_tools = frozenset({"transfer_to_human_agents"})

    # --- scenario -------------------------------------------------------------------------------------
    def generate(self, seed):
        rng = self.rng(seed)
        now = airline.scenario_now(rng)
        world = airline.AirlineWorld(rng, now)
        user = world.user()
        n_requests = rng.choices([1, 2, 3], weights=[45, 40, 15])[0]
        if n_requests == 1:
            # almost always something to refuse: that is where the capability shows. A lone eligible request is a task
            # a policy-blind agent also gets right, so it stays rare (about 1% of seeds): the gate's necessity check
            # must not fail on a handful of random seeds where skipping the check happens to be right.
            plan = [rng.random() < 0.02]
        else:
            plan = [False] + [rng.random() < 0.7 for _ in range(n_requests - 1)]
            rng.shuffle(plan)
        requests = [self.change_request(world, user, ok) if rng.random() < 0.25 else self.cancel_request(world, user, ok, now)
                    for ok in plan]
        for _ in range(rng.randint(1, 3)):
            self.distractor(world, user, requests)
        rng.shuffle(user["reservations"])
        knows_ids, trips = rng.random() < 0.65, [airline.describe_trip(world.reservations[r]) for r in user["reservations"]]
        knows_ids = knows_ids or len(set(trips)) != len(trips)  # an ambiguous description: the user quotes codes
        for request in requests:
            request["described_as"] = None if knows_ids else airline.describe_trip(world.reservations[request["reservation_id"]])
        state = world.state(user)
        truth = self.expected(state, requests, now)
        rules = "+".join(sorted(r["rule"] for r in requests))
        return sdk.Scenario(seed=seed, state=state, user=self.persona(rng, user, requests, knows_ids), truth=truth,
                            meta={"variant": rules, "n_requests": n_requests, "knows_ids": knows_ids,
                                  "now": airline.stamp(now), "all_eligible": all(plan)})

    def cancel_request(self, world, user, eligible, now):
        rng = world.rng
        if eligible:
            rule = rng.choice(ELIGIBLE_CANCEL_RULES)
        else:
            rule = rng.choices(INELIGIBLE_CANCEL_RULES, weights=INELIGIBLE_CANCEL_WEIGHTS)[0]
        economy = rng.choice(["basic_economy", "economy"])
        trip = rng.choice(["one_way", "round_trip"])
        timing = "future" if now.hour >= 20 or rng.random() < 0.8 else "today"
        created = rng.choice(["old", "old", "near_miss"])
        cabin, insurance, reason, trap = economy, "no", "personal", None  # trap: what would grant it but for the rule
        if rule == "recent_booking":
            created, insurance = "recent", rng.choice(["no", "no", "yes"])
        elif rule in ("airline_cancelled", "airline_claim_unverified"):
            reason, insurance = "airline_cancelled", rng.choice(["no", "yes"])
        elif rule == "business_cabin":
            cabin, insurance = "business", rng.choice(["no", "yes"])
        elif rule == "insurance_covered":
            insurance, reason = "yes", rng.choice(airline.COVERED_REASONS)
        elif rule == "already_flown":
            trip, timing, created = "round_trip", "flown", "old"
            trap = rng.choice([None, "business_cabin", "insurance_covered", "airline_cancelled"])
            cabin = "business" if trap == "business_cabin" else economy
            if trap == "insurance_covered":
                insurance, reason = "yes", rng.choice(airline.COVERED_REASONS)
            else:
                reason = "airline_cancelled" if trap == "airline_cancelled" else rng.choice(["personal", "personal", "health"])
        elif rule == "insurance_not_covered":
            insurance = "yes"
        elif rule == "no_rule":  # sometimes a covered reason without insurance, or booked just over a day ago
            reason, created = rng.choice(["personal", "personal", "health", "weather"]), rng.choice(["old", "near_miss"])
        record = world.reservation(user, cabin=cabin, trip=trip, timing=timing, created=created, insurance=insurance)
        cancelled_leg = None
        if "airline_cancelled" in (rule, trap):
            legs = [f for f in record["flights"] if f["date"] > now.date().isoformat()] or record["flights"][-1:]
            cancelled_leg = rng.choice(legs)
            world.flights[cancelled_leg["flight_number"]]["dates"][cancelled_leg["date"]] = {"status": "cancelled"}
        # the airline-cancellation claim can only be checked with the live flight status
        return {"kind": "cancel", "reservation_id": record["reservation_id"], "eligible": eligible, "rule": rule,
                "trap": trap, "reason": reason, "reason_text": rng.choice(airline.REASON_TEXTS[reason]),
                "needs_status": reason == "airline_cancelled", "cancelled_leg": cancelled_leg}

    def change_request(self, world, user, eligible):
        rng = world.rng
        cabin = rng.choice(["economy", "business"]) if eligible else "basic_economy"
        record = world.reservation(user, cabin=cabin, trip=rng.choice(["one_way", "round_trip"]), timing="future",
                                   created=rng.choice(["old", "near_miss", "recent"]), insurance=rng.choice(["no", "yes"]))
        change = world.flight_change(record)
        if rng.random() < 0.5:
            world.flight(*change["route"])  # a second flight on the route: a real choice
        methods = list(user["payment_methods"].values())  # a card, or the only gift card if it covers the difference
        gift_cards = [m for m in methods if m["source"] == "gift_card"]
        payable = [m for m in methods if m["source"] == "credit_card"] + (
            gift_cards if len(gift_cards) == 1 and gift_cards[0]["amount"] >= max(change["price_delta"], 0) else [])
        method = rng.choice(payable)
        return dict(change, kind="change", reservation_id=record["reservation_id"], eligible=eligible, trap=None,
                    rule="changeable" if eligible else "basic_economy", payment_id=method["id"],
                    payment_words=airline.payment_words(method), needs_status=False)

    def distractor(self, world, user, requests):
        rng = world.rng
        record = world.reservation(user, cabin=rng.choice(airline.CABINS), trip=rng.choice(["one_way", "round_trip"]),
                                   timing=rng.choice(["future", "future", "past", "flown"]),
                                   created=rng.choice(["old", "old", "recent"]), insurance=rng.choice(["no", "yes"]))
        if requests and rng.random() < 0.4:  # same route as a requested trip: only the dates tell them apart
            world.copy_route(record, world.reservations[rng.choice(requests)["reservation_id"]])
        if rng.random() < 0.15:  # an old cancellation still listed on the profile
            record["payment_history"] += airline.cancellation_refunds(record)
            record["status"] = "cancelled"

    def expected(self, state, requests, now):
        """The end state of every request the policy allows, made with the real tools."""
        after = copy.deepcopy(state)
        expected, summary = {}, []
        for request in requests:
            rid = request["reservation_id"]
            if request["kind"] == "cancel":
                request["refund"] = airline.paid_total(state["reservations"][rid])
            request["reason_keywords"] = airline.RULE_WORDS.get(request["rule"], [])
            if not request["eligible"]:
                summary.append(f"refuse {request['kind']} {rid} ({request['rule']})")
                continue
            if request["kind"] == "cancel":
                airline.cancel_reservation(after, rid)
            else:
                airline.update_reservation_flights(after, rid, state["reservations"][rid]["cabin"], request["new_flights"],
                                                   request["payment_id"])
            summary.append(f"{request['kind']} {rid}")
            expected[rid] = graded(after["reservations"][rid])
        return {"now": airline.stamp(now), "requests": requests, "expected": expected, "outcome": "; ".join(summary)}

    def persona(self, rng, user, requests, knows_ids):
        uid = user["user_id"]
        gives_id = rng.random() < 0.6
        cancels = [r for r in requests if r["kind"] == "cancel"]
        reason_upfront = bool(cancels) and rng.random() < 0.4

        def name(request):
            return request["reservation_id"] if knows_ids else f"my {request['described_as']}"

        clauses = []
        for request in requests:
            where = f"reservation {name(request)}" if knows_ids else name(request)
            if request["kind"] == "cancel":
                clause = rng.choice(["cancel {x}", "get {x} cancelled", "cancel {x} for me"]).format(x=where)
                clause += f", because {request['reason_text']}" if reason_upfront else ""
            else:
                clause = rng.choice([
                    "move flight {fn} on {x} from {old} to {new}, same flight number",
                    "push my {fn} flight ({x}) from {old} to {new} - same flight, just the other day",
                    "change the {old} {fn} flight on {x} to {new}",
                ]).format(fn=request["segment"]["flight_number"], old=text.nice_date(request["segment"]["date"]),
                          new=text.nice_date(request["new_date"]), x=where)
            clauses.append(clause)
        if len(clauses) == 1:
            body = rng.choice(["I'd like to {0}.", "Could you please {0}?", "I need to {0}."]).format(clauses[0])
        else:
            joined = "; ".join(f"{i + 1}) {c}" for i, c in enumerate(clauses)) if rng.random() < 0.5 else (
                ", and also ".join(clauses))
            body = rng.choice(["I have a few things: {0}.", "Can you help me with this: {0}?",
                               "I need to sort out some bookings - {0}."]).format(joined)
        greeting = rng.choice(["Hi,", "Hello!", "Hi there.", "Good afternoon,"])
        me = f" This is {user['name']['first_name']}, user id {uid}." if gives_id else ""
        reason_answer = f"It's because {cancels[0]['reason_text']}." if len(cancels) == 1 else " ".join(
            f"For {name(r)}: {r['reason_text']}." for r in cancels)
        changes = [r for r in requests if r["kind"] == "change"]
        answers = [text.fact("user_id", airline.TRIGGERS["user_id"], f"Sure, my user id is {uid}.", gives_id)]
        if cancels:
            answers.append(text.fact("reason", airline.TRIGGERS["reason"], reason_answer, reason_upfront))
        if not knows_ids:
            answers.append(text.fact("reservation", airline.TRIGGERS["reservation"], "I don't have the codes at hand, "
                                     "sorry. It's " + " and ".join(f"the {r['described_as']}" for r in requests) + "."))
        if changes:
            answers.append(text.fact("payment", PAYMENT_TRIGGERS, f"Please use {changes[0]['payment_words']}."))
        insist = None
        if any(not r["eligible"] for r in requests) and rng.random() < 0.35:
            insist = rng.choice([
                "Are you sure? " + (f"I'm a {user['membership']} member" if user["membership"] != "regular"
                                    else "I've flown with you for years") + " - can't you make an exception just this once?",
                "The agent I spoke with on the phone told me this would be no problem. Please just do it.",
                "That seems unfair. I really need this done - could you do it anyway?",
            ])
        return {"user_id": uid, "opening": f"{greeting}{me} {body}", "answers": answers, "insist": insist,
                "confirm": rng.choice(["Yes, please go ahead.", "Yes, that's right - please do it.", "Yes, proceed."]),
                "closing": rng.choice(["Okay, thanks for your help.", "Alright, thank you.", "Got it, thanks. Bye!"]),
                "nudges": {r["reservation_id"]: f"Okay. So what happens with {name(r)}?" for r in requests}}

    # --- prompt and simulated user ----------------------------------------------------------------------
    def system_prompt(self, scenario):
        return airline.system_prompt(datetime.datetime.fromisoformat(scenario.truth["now"]), NOTES)

    def first_user_message(self, scenario):
        return scenario.user["opening"]

    def user_reply(self, episode, agent_text):
        """Answers what it is asked (all at once), confirms, pushes back once if scripted after a refusal, and
        asks about any request still undecided; leaves only when nothing is pending."""
        persona, said_now = episode.scenario.user, text.normalise(agent_text)
        reply = text.answer_or_confirm(episode, agent_text, persona, max_turns=12)
        if reply is not None:
            return reply
        said = [m.get("content") or "" for m in episode.messages if m.get("role") == "user"]
        if persona["insist"] and persona["insist"] not in said and text.has_any(said_now, text.REFUSAL_WORDS):
            return sdk.UserReply(persona["insist"])
        requests = episode.scenario.truth["requests"]
        written = [r.arguments.get("reservation_id") for r in episode.write_calls(self.write_tools)]
        spoken = [text.normalise(t) for t in episode.assistant_texts()]
        for request in requests:
            rid = request["reservation_id"]
            decided = rid in written or any(refuses(t, rid, len(requests) > 1) for t in spoken)
            if not decided and said.count(persona["nudges"][rid]) < 2:
                return sdk.UserReply(persona["nudges"][rid])
        return sdk.UserReply(persona["closing"], done=True)

    # --- reward -----------------------------------------------------------------------------------------
    def evaluate(self, episode):
        scenario, truth = episode.scenario, episode.scenario.truth
        requests, persona = truth["requests"], episode.scenario.user
        several = len(requests) > 1
        turns = text.agent_turns(episode)  # [step, normalised text, the user's reply]
        writes = episode.write_calls(self.write_tools)
        # Gate: a write the policy forbids (or nobody asked for) zeroes everything.
        allowed = [("cancel_reservation" if r["kind"] == "cancel" else "update_reservation_flights", r["reservation_id"])
                   for r in requests if r["eligible"]]
        forbidden = [w for w in writes if (w.name, w.arguments.get("reservation_id")) not in allowed]

        def decision_step(request):
            """The first write on the reservation or, for a refusal, the message refusing it with the reason."""
            rid = request["reservation_id"]
            steps = [w.step for w in writes if w.arguments.get("reservation_id") == rid]
            if not request["eligible"]:
                refusals = [s for s, said, _ in turns if refuses(said, rid, several)]
                steps += ([s for s in refusals if text.hits_groups(turns[s - 1][1], request["reason_keywords"])]
                          or refusals)[:1]
            return min(steps) if steps else None

        scores, checks = [], []
        for request in requests:
            rid = request["reservation_id"]
            if request["eligible"]:
                scores.append(float(graded(episode.state["reservations"][rid]) == truth["expected"][rid]))
            else:
                refused = any(refuses(t, rid, several) for _, t, _ in turns)
                explained = any((not several or rid.lower() in t) and text.hits_groups(t, request["reason_keywords"])
                                for _, t, _ in turns)
                scores.append(0.5 * refused + 0.5 * explained)
            when = decision_step(request)  # verification: the deciding records were read before the decision
            if when is None:
                checks.append(0.0)
                continue
            read = any(r.step < when for r in episode.calls("get_reservation_details")
                       if r.arguments.get("reservation_id") == rid)
            if request["needs_status"]:
                legs = [(f["flight_number"], f["date"]) for f in scenario.state["reservations"][rid]["flights"]]
                status = any(r.step < when and (r.arguments.get("flight_number"), r.arguments.get("date")) in legs
                             for r in episode.calls("get_flight_status"))
                checks.append(0.5 * read + 0.5 * status)
            else:
                checks.append(float(read))
        first_write = min((w.step for w in writes), default=None)
        last = turns[-1][0] + 1 if turns else 1
        components = {"requests_resolved": sum(scores) / len(scores), "verified_before_deciding": sum(checks) / len(checks),
                      "identified_user": float(any(first_write is None or r.step < first_write
                                                   for r in episode.calls("get_user_details")
                                                   if r.arguments.get("user_id") == persona["user_id"]))}
        weights = {"requests_resolved": 4.0, "verified_before_deciding": 2.0, "identified_user": 0.5}
        reason = next((a for a in persona["answers"] if a["key"] == "reason"), None)
        if reason and not reason["given_upfront"]:
            limit = min([w.step for w in writes if w.name == "cancel_reservation"] or [last])
            components["asked_reason"] = float(any(s < limit and reason["text"] in (reply or "") for s, _, reply in turns))
            weights["asked_reason"] = 0.5
        if first_write is not None or any(r["eligible"] for r in requests):
            limit = first_write if first_write is not None else last
            components["confirmed_first"] = float(any(s < limit and persona["confirm"] == reply for s, _, reply in turns))
            weights["confirmed_first"] = 0.5
        told = [episode.said(r["refund"]) if r["kind"] == "cancel" else episode.said(abs(r["price_delta"]))
                if r["price_delta"] else episode.said(r["new_date"]) or episode.said(text.nice_date(r["new_date"]))
                for r in requests if r["eligible"]]
        if told:
            components["outcome_communicated"], weights["outcome_communicated"] = sum(told) / len(told), 1.0
        notes = {"forbidden_writes": ", ".join(f"{w.name}({w.arguments.get('reservation_id')})" for w in forbidden)}
        return sdk.Reward(components=components, weights=weights, notes=notes,
                          gates={"no_forbidden_write": 0.0 if forbidden else 1.0})

    # --- solutions --------------------------------------------------------------------------------------
    def lookups(self, scenario):
        """Identify the user and read the requested reservations (both solutions)."""
        persona, requests = scenario.user, scenario.truth["requests"]
        turns = [] if persona["answers"][0]["given_upfront"] else [
            sdk.say("I'd be glad to help. Could you please tell me your user id?")]
        turns.append(sdk.call("get_user_details", user_id=persona["user_id"]))
        wanted = [r["reservation_id"] for r in requests]
        if requests[0]["described_as"]:  # no codes given: read the profile's reservations until every trip is found
            listed = scenario.state["users"][persona["user_id"]]["reservations"]
            wanted = listed[: max(listed.index(rid) for rid in wanted) + 1]
        return turns + [sdk.call("get_reservation_details", reservation_id=rid) for rid in wanted]

    def grant(self, scenario, request):
        """The sentence laying out one eligible action before confirmation."""
        rid = request["reservation_id"]
        reservation = scenario.state["reservations"][rid]
        if request["kind"] == "change":
            delta, segment = request["price_delta"], request["segment"]
            money = "there is no fare difference" if delta == 0 else (
                f"the fare difference of {text.money(abs(delta))} will be {'charged to' if delta > 0 else 'refunded to'} "
                f"{request['payment_words'].replace('my ', 'your ')}")
            return (f"For reservation {rid} I can move flight {segment['flight_number']} from {segment['date']} to "
                    f"{request['new_date']} ({airline.CABIN_LABEL[reservation['cabin']]}, {text.money(request['new_price'])} "
                    f"per passenger instead of {text.money(request['old_price'])}); {money}.")
        return airline.explain_cancellation(request["rule"], reservation, request["reason"], request["cancelled_leg"])

    def writes(self, scenario, requests):
        return [sdk.call("cancel_reservation", reservation_id=r["reservation_id"]) if r["kind"] == "cancel" else
                sdk.call("update_reservation_flights", reservation_id=r["reservation_id"], flights=r["new_flights"],
                         cabin=scenario.state["reservations"][r["reservation_id"]]["cabin"], payment_id=r["payment_id"])
                for r in requests]

    def reference_solution(self, scenario):
        persona, requests = scenario.user, scenario.truth["requests"]
        turns = self.lookups(scenario)
        reason = next((a for a in persona["answers"] if a["key"] == "reason"), None)
        if reason and not reason["given_upfront"]:
            turns.append(sdk.say("Thank you. Before I go further, could you tell me the reason for the cancellation?"))
        for request in requests:
            flights = scenario.state["reservations"][request["reservation_id"]]["flights"]
            if request["needs_status"]:
                for leg in flights:
                    turns.append(sdk.call("get_flight_status", flight_number=leg["flight_number"], date=leg["date"]))
                    if request["cancelled_leg"] and leg["flight_number"] == request["cancelled_leg"]["flight_number"]:
                        break
            if request["kind"] == "change" and request["eligible"]:
                leg = next(f for f in flights if f["flight_number"] == request["segment"]["flight_number"])
                turns.append(sdk.call("search_direct_flight", origin=leg["origin"], destination=leg["destination"],
                                      date=request["new_date"]))
        granted = [r for r in requests if r["eligible"]]
        if any(r["kind"] == "change" for r in granted):
            turns.append(sdk.say("The new flight is available. Which payment method from your profile should I use for "
                                 "the fare difference?"))
        refusals = " ".join(airline.explain_refusal(
            r["rule"], scenario.state["reservations"][r["reservation_id"]], scenario.state["flights"], r.get("reason", ""),
            r.get("segment", {}).get("flight_number", "")) for r in requests if not r["eligible"])
        if granted:
            plan = " ".join(self.grant(scenario, r) for r in granted)
            turns.append(sdk.say(f"{refusals} {plan} Shall I go ahead with this?".strip()))
            turns += self.writes(scenario, granted)
            done = [f"reservation {r['reservation_id']} is cancelled and {text.money(r['refund'])} will be refunded to "
                    f"the original payment method within 5 to 7 business days" if r["kind"] == "cancel" else
                    f"flight {r['segment']['flight_number']} on reservation {r['reservation_id']} now departs on "
                    f"{r['new_date']}" + ("" if not r["price_delta"] else f" ({text.money(abs(r['price_delta']))} "
                                          f"{'charged' if r['price_delta'] > 0 else 'refunded'})") for r in granted]
            summary = "All done: " + "; ".join(done) + "."
            turns.append(sdk.say(summary + (" As explained earlier: " + refusals if refusals else "")))
        else:
            turns.append(sdk.say(refusals))
        if persona["insist"]:
            turns.append(sdk.say("I understand this is frustrating, and I'm sorry, but I am not able to make an "
                                 "exception: the rules apply to every booking whatever the membership level. " + refusals))
        return turns

    def capability_skipping_solution(self, scenario):
        """Looks everything up, then does what was asked without weighing it against the policy."""
        requests = scenario.truth["requests"]
        turns = self.lookups(scenario)
        if any(r["kind"] == "change" for r in requests):
            turns.append(sdk.say("Which payment method from your profile should I use for the fare difference?"))
        plan = [f"cancel reservation {r['reservation_id']}" if r["kind"] == "cancel" else
                f"move flight {r['segment']['flight_number']} on {r['reservation_id']} to {r['new_date']}" for r in requests]
        turns.append(sdk.say(f"I found everything. I will {', and '.join(plan)}. Shall I proceed?"))
        turns += self.writes(scenario, requests)
        turns.append(sdk.say("All done - your requests have been processed and any refund goes back to the original "
                             "payment method."))
        return turns


ENV = PreconditionVerificationEnv
