"""Valid env whose decision is carried in a free-text argument: the agent looks a claim up and escalates it with a
summary that says "approve" or "deny" and why. The only argument of the write is the summary, so a key-argument
mutant that changed any character (a courtesy word, "Thanks" -> "Thankt") would not lower the reward, rightly; the
gate must change the words the decision lives in ("approve" -> "deny"), which the reference varies across seeds."""

from trace_env import sdk

LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
KINDS = ["meals", "taxi", "hotel", "train"]


class ClaimSummary(sdk.TaskEnv):
    capability = "claim_triage_summary"
    target = "claims-desk"
    tool_domain = "claims_desk"
    description = "Look up an expense claim and escalate it with a summary that says approve or deny, and why."
    tool_names = ["lookup_claim", "escalate"]
    tool_schemas = [
        {"type": "function", "function": {
            "name": "lookup_claim", "description": "A claim's kind, amount, limit and whether a receipt is attached.",
            "parameters": {"type": "object", "properties": {"claim_id": {"type": "string"}}, "required": ["claim_id"]},
            "returns": {"type": "object", "required": ["claim_id", "kind", "amount", "limit", "receipt"]}}},
        {"type": "function", "function": {
            "name": "escalate", "description": "Hand the claim to a reviewer with a summary; ends the conversation.",
            "parameters": {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]}}},
    ]
    max_steps = 6
    terminal_tools = frozenset({"escalate"})

    def generate(self, seed):
        rng = self.rng(seed)
        cid = "C" + "".join(rng.choice(LETTERS) for _ in range(6))
        limit = rng.choice([50, 100, 150])
        record = {"claim_id": cid, "kind": rng.choice(KINDS), "amount": rng.randint(10, 200), "limit": limit,
                  "receipt": rng.choice([True, True, False])}
        approve = record["receipt"] and record["amount"] <= limit
        reason = "within the limit with a receipt" if approve else ("no receipt attached" if not record["receipt"] else "over the limit")
        return sdk.Scenario(seed=seed, state={"claims": {cid: record}, "escalated": None},
                            user={"claim_id": cid, "opening": f"Can you pass my {record['kind']} claim {cid} on to a reviewer?"},
                            truth={"approve": approve, "reason": reason})

    def system_prompt(self, scenario):
        return ("You triage expense claims. Approve a claim only if a receipt is attached and the amount is within the "
                "limit. Escalate every claim with a summary that says approve or deny and the reason.")

    def first_user_message(self, scenario):
        return scenario.user["opening"]

    @sdk.tool
    def lookup_claim(self, state, claim_id):
        if claim_id not in state["claims"]:
            raise sdk.ToolError(f"Claim {claim_id} not found")
        return state["claims"][claim_id]

    @sdk.tool
    def escalate(self, state, summary):
        state["escalated"] = summary
        return "Escalated to a reviewer."

    def evaluate(self, episode):
        truth, cid = episode.scenario.truth, episode.scenario.user["claim_id"]
        summary = (episode.state["escalated"] or "").lower()
        words = set(summary.replace(";", " ").replace(".", " ").replace(",", " ").replace(":", " ").split())
        says = "approve" if "approve" in words and "deny" not in words else "deny" if "deny" in words and "approve" not in words else ""
        right = says == ("approve" if truth["approve"] else "deny")
        reason = truth["reason"] in summary
        looked = episode.called("lookup_claim", claim_id=cid)
        return sdk.Reward(components={"decision": float(right), "reason": float(reason)}, weights={"decision": 3.0, "reason": 1.0},
                          gates={"looked_up": 1.0 if looked else 0.3})

    def reference_solution(self, scenario):
        cid, truth = scenario.user["claim_id"], scenario.truth
        verdict = "approve" if truth["approve"] else "deny"
        return [sdk.call("lookup_claim", claim_id=cid),
                sdk.call("escalate", summary=f"Claim {cid}: {verdict}, {truth['reason']}. Thanks for taking it from here!")]

    def capability_skipping_solution(self, scenario):
        return [sdk.call("escalate", summary=f"Claim {scenario.user['claim_id']}: approve. Thanks!")]


ENV = ClaimSummary
