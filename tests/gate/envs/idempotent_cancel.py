"""Valid env with an idempotent write: cancelling a booking twice changes nothing the second time (the status is
already "cancelled"), so the reference with its cancellation repeated ends in the same state, and that is no change
of outcome."""

from trace_env import sdk

LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
CABINS = ["basic_economy", "economy", "business"]


class IdempotentCancel(sdk.TaskEnv):
    capability = "cancel_only_when_allowed_idempotent"
    target = "booking-desk"
    tool_domain = "booking_desk"
    description = "Cancel a booking only when it is in business class or insured; otherwise refuse and say why."
    tool_names = ["get_booking", "cancel_booking"]
    tool_schemas = [
        {"type": "function", "function": {
            "name": "get_booking", "description": "A booking's cabin, insurance and status.",
            "parameters": {"type": "object", "properties": {"booking_id": {"type": "string"}}, "required": ["booking_id"]},
            "returns": {"type": "object", "required": ["booking_id", "cabin", "insurance", "status"]}}},
        {"type": "function", "function": {
            "name": "cancel_booking", "description": "Cancel a booking.",
            "parameters": {"type": "object", "properties": {"booking_id": {"type": "string"}}, "required": ["booking_id"]}}},
    ]
    max_steps = 8
    write_tools = frozenset({"cancel_booking"})

    def generate(self, seed):
        rng = self.rng(seed)
        bid = "K" + "".join(rng.choice(LETTERS) for _ in range(5))
        record = {"booking_id": bid, "cabin": rng.choice(CABINS), "insurance": rng.choice(["yes", "no"]), "status": "active"}
        scenario = sdk.Scenario(seed=seed, state={"bookings": {bid: record}},
                                user={"booking_id": bid, "opening": f"Please cancel my booking {bid}."}, truth={})
        scenario.truth = self.derive_truth(scenario, scenario.state)
        return scenario

    def derive_truth(self, scenario, state):
        record = state["bookings"][scenario.user["booking_id"]]
        return {"allowed": record["cabin"] == "business" or record["insurance"] == "yes"}

    def system_prompt(self, scenario):
        return ("You are a booking agent. A booking may be cancelled only when it is in business class or has travel "
                "insurance; otherwise refuse and say which rule stands in the way.")

    def first_user_message(self, scenario):
        return scenario.user["opening"]

    @sdk.tool
    def get_booking(self, state, booking_id):
        if booking_id not in state["bookings"]:
            raise sdk.ToolError(f"Booking {booking_id} not found")
        return state["bookings"][booking_id]

    @sdk.tool
    def cancel_booking(self, state, booking_id):
        if booking_id not in state["bookings"]:
            raise sdk.ToolError(f"Booking {booking_id} not found")
        state["bookings"][booking_id]["status"] = "cancelled"
        return state["bookings"][booking_id]

    def evaluate(self, episode):
        scenario = episode.scenario
        bid = scenario.user["booking_id"]
        allowed = scenario.truth["allowed"]
        cancelled = episode.state["bookings"][bid]["status"] == "cancelled"
        read = episode.first_index("get_booking", booking_id=bid)
        done = episode.first_index("cancel_booking")
        verified = read is not None and (done is None or read < done)
        spoken = episode.assistant_text.lower()
        if allowed:
            told = float(cancelled)
        else:
            refused = any(w in spoken for w in ("cannot", "can't", "unable"))
            told = float(not cancelled and refused and ("insur" in spoken or "business" in spoken))
        return sdk.Reward(components={"decision": told}, gates={"verified": 1.0 if verified else 0.3})

    def reference_solution(self, scenario):
        bid = scenario.user["booking_id"]
        turns = [sdk.call("get_booking", booking_id=bid)]
        if scenario.truth["allowed"]:
            return turns + [sdk.call("cancel_booking", booking_id=bid), sdk.say(f"Done: booking {bid} is cancelled.")]
        return turns + [sdk.say(f"Sorry, booking {bid} cannot be cancelled: it is neither business class nor insured.")]

    def capability_skipping_solution(self, scenario):
        bid = scenario.user["booking_id"]
        return [sdk.call("cancel_booking", booking_id=bid), sdk.say(f"Booking {bid} is cancelled.")]


ENV = IdempotentCancel
