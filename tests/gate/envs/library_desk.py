"""Valid env on a tool domain of its own (a library's loan desk, not a benchmark target), whose episode ends on
a tool's outcome: ``submit_decision`` returns ``sdk.EndEpisode(...)``. The gate checks its declared schemas
against its tool methods and reports it off-target."""

from trace_env import sdk

LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ"
TITLES = ["Dune", "Emma", "Ulysses", "Beloved", "Middlemarch", "Hamlet", "Walden", "Persuasion", "Kindred", "Solaris"]


class LibraryDesk(sdk.TaskEnv):
    capability = "loan_renewal_rules"
    target = "library-desk"
    tool_domain = "library_desk"
    description = "Renew a loan only when no one holds a reservation on the book and the member owes no fines."
    tool_names = ["lookup_loan", "submit_decision"]
    tool_schemas = [
        {"type": "function", "function": {
            "name": "lookup_loan", "description": "The loan's book, member, fines and holds.",
            "parameters": {"type": "object", "properties": {"loan_id": {"type": "string"}}, "required": ["loan_id"]},
            "returns": {"type": "object", "required": ["loan_id", "title", "fines", "holds"]}}},
        {"type": "function", "function": {
            "name": "submit_decision", "description": "Renew the loan or refuse; ends the conversation.",
            "parameters": {"type": "object", "properties": {"loan_id": {"type": "string"}, "renew": {"type": "boolean"},
                                                            "reason": {"type": "string"}},
                           "required": ["loan_id", "renew"]}}},
    ]
    max_steps = 6
    write_tools = frozenset({"submit_decision"})

    def generate(self, seed):
        rng = self.rng(seed)
        loan = "L" + "".join(rng.choice(LETTERS) for _ in range(5))
        record = {"loan_id": loan, "title": rng.choice(TITLES), "fines": rng.choice([0, 0, 2.5, 7.0]), "holds": rng.choice([0, 0, 1, 3])}
        renew = record["fines"] == 0 and record["holds"] == 0
        reason = "ok" if renew else ("holds" if record["holds"] else "fines")
        return sdk.Scenario(seed=seed, state={"loans": {loan: record}, "decision": None},
                            user={"loan_id": loan, "opening": f"Could you renew my loan {loan} of {record['title']}?"},
                            truth={"renew": renew, "reason": reason})

    def system_prompt(self, scenario):
        return ("You work at a library loan desk. Renew a loan only if nobody holds a reservation on the book and the "
                "member owes no fines. Look the loan up, then submit your decision with the reason.")

    def first_user_message(self, scenario):
        return scenario.user["opening"]

    @sdk.tool
    def lookup_loan(self, state, loan_id):
        if loan_id not in state["loans"]:
            raise sdk.ToolError(f"No loan {loan_id}")
        return state["loans"][loan_id]

    @sdk.tool
    def submit_decision(self, state, loan_id, renew, reason=""):
        if loan_id not in state["loans"]:
            raise sdk.ToolError(f"No loan {loan_id}")
        state["decision"] = {"loan_id": loan_id, "renew": bool(renew), "reason": reason}
        return sdk.EndEpisode({"recorded": True, "renewed": bool(renew)})

    def evaluate(self, episode):
        truth, decision = episode.scenario.truth, episode.state["decision"]
        looked = episode.first_index("lookup_loan")
        right = decision is not None and decision["loan_id"] == episode.scenario.user["loan_id"] and decision["renew"] == truth["renew"]
        reason = decision is not None and truth["reason"] in str(decision["reason"]).lower()
        return sdk.Reward(components={"decision": float(right), "reason": float(reason)}, weights={"decision": 3.0, "reason": 1.0},
                          gates={"looked_first": 1.0 if looked is not None else 0.3})

    def reference_solution(self, scenario):
        loan, truth = scenario.user["loan_id"], scenario.truth
        return [sdk.call("lookup_loan", loan_id=loan),
                sdk.call("submit_decision", loan_id=loan, renew=truth["renew"], reason=truth["reason"])]

    def capability_skipping_solution(self, scenario):
        loan = scenario.user["loan_id"]
        return [sdk.call("submit_decision", loan_id=loan, renew=True, reason="ok")]


ENV = LibraryDesk
