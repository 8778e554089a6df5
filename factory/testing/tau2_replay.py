"""Replays of real τ² tasks as conversations, with tool results from the real database through the world
kits' faithful tools (``trace_env.kits.tau2_airline`` / ``tau2_retail``): the ground on which
``injection`` builds trajectories with known deficits.

A plan is a list of steps: tool calls (``Step``) and lines of dialogue (``Say``). ``success_plan`` turns a
task's gold actions into what a careful agent does: it authenticates (retail), reads every record it is
about to change, the user's profile and the products and flights a change needs, lists the changes and
asks for a yes before making them, and transfers with the policy's sentence. ``render`` plays a plan
against a private copy of the records it touches, so replays never share state.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trace_env.kits import tau2_airline, tau2_retail
from trace_env.sdk import ToolError

from factory.analyze.tasks import GoldAction, gold_from_task, spec_from_tau2
from factory.analyze.toolinfo import ToolCatalog, catalog_for_target
from schemas.messages import FunctionCall, Message, ToolCall
from schemas.trajectory import Trajectory

KITS = {"airline": tau2_airline, "retail": tau2_retail}
CONFIRM_ASK = "Here is what I will do: {plan}. Do you confirm? Please answer yes to proceed."
CONFIRMED = "Yes, please proceed."
TRANSFER_LINE = "YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON."


@dataclass
class Step:
    name: str
    arguments: dict[str, Any]
    gold: bool = True
    error: str | None = None  # a forced error result


@dataclass
class Say:
    role: str  # "assistant" or "user"
    text: str


@dataclass
class Tau2Domain:
    """One τ² domain folder (``db.json``, ``tasks.json``): answers tool calls from the real database."""

    name: str
    db: dict[str, Any]
    tasks: list[dict[str, Any]]
    catalog: ToolCatalog = field(init=False)

    def __post_init__(self) -> None:
        self.target = f"tau2-{self.name}"
        self.catalog = catalog_for_target(self.target)
        self.kit = KITS[self.name]

    @classmethod
    def load(cls, folder: Path, tasks_file: str = "tasks.json") -> "Tau2Domain":
        folder = Path(folder)
        db = json.loads((folder / "db.json").read_text(encoding="utf-8"))
        return cls(folder.name, db, json.loads((folder / tasks_file).read_text(encoding="utf-8")))

    def scratch(self) -> dict[str, Any]:
        """A copy of the database whose tables are new dicts; records are copied when a write touches them."""
        return {table: dict(records) for table, records in self.db.items()}

    def _isolate(self, db: dict[str, Any], args: dict[str, Any]) -> None:
        for table, key in (("reservations", "reservation_id"), ("orders", "order_id"), ("users", "user_id")):
            value = args.get(key)
            if isinstance(value, str) and value in db.get(table, {}) and db[table][value] is self.db[table].get(value):
                db[table][value] = copy.deepcopy(db[table][value])
                owner = db[table][value].get("user_id")
                if table != "users" and owner in db["users"] and db["users"][owner] is self.db["users"].get(owner):
                    db["users"][owner] = copy.deepcopy(db["users"][owner])
        for flight in args.get("flights") or []:
            number = flight.get("flight_number") if isinstance(flight, dict) else None
            if number in db.get("flights", {}) and db["flights"][number] is self.db["flights"].get(number):
                db["flights"][number] = copy.deepcopy(db["flights"][number])

    def respond(self, db: dict[str, Any], name: str, args: dict[str, Any]) -> tuple[str, bool]:
        """(τ²'s tool message, is_error) for one call, made with the kit's faithful tool."""
        tool = getattr(self.kit, name, None)
        if tool is None:
            return f"Error: Tool '{name}' not found.", True
        if self.catalog.is_write(name):
            self._isolate(db, args)
        try:
            result = tool(db, **args)
        except ToolError as exc:
            return f"Error: {exc}", True
        except (TypeError, KeyError) as exc:
            return f"Error: {exc}", True
        return (result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)), False

    # -- task facts -------------------------------------------------------------------------------
    def task_user(self, task: dict[str, Any], gold: list[GoldAction]) -> str | None:
        for action in gold:
            if isinstance(action.arguments.get("user_id"), str):
                return action.arguments["user_id"]
        for action in gold:
            for table, key in (("reservations", "reservation_id"), ("orders", "order_id")):
                record = self.db.get(table, {}).get(action.arguments.get(key, ""))
                if record:
                    return record.get("user_id")
        text = json.dumps((task.get("user_scenario") or {}).get("instructions") or {})
        match = re.search(r"([a-z]+_[a-z]+_\d{3,5})", text)
        return match.group(1) if match and match.group(1) in self.db.get("users", {}) else None

    def record_of(self, table: str, key: Any) -> dict[str, Any] | None:
        return self.db.get(table, {}).get(key) if isinstance(key, str) else None

    def product_of_item(self, item_id: str) -> str | None:
        for product in self.db.get("products", {}).values():
            if item_id in product.get("variants", {}):
                return product["product_id"]
        return None


def _instructions(task: dict[str, Any]) -> dict[str, Any]:
    return (task.get("user_scenario") or {}).get("instructions") or {}


def _describe(step: Step) -> str:
    key = next((k for k in ("reservation_id", "order_id", "user_id") if k in step.arguments), None)
    return f"{step.name.replace('_', ' ')} for {step.arguments[key]}" if key else step.name.replace("_", " ")


def _reads_for(domain: Tau2Domain, action: GoldAction, done: list[Step], user: str | None) -> list[Step]:
    """The reads the policy makes a write conditional on, that the plan has not made yet."""
    have = {(s.name, json.dumps(s.arguments, sort_keys=True)) for s in done}
    wanted: list[Step] = []

    def want(name: str, **args: Any) -> None:
        if (name, json.dumps(args, sort_keys=True)) not in have and all(s.arguments != args or s.name != name for s in wanted):
            wanted.append(Step(name, args, gold=False))

    args = action.arguments
    owner = user
    if isinstance(args.get("reservation_id"), str):
        owner = (domain.record_of("reservations", args["reservation_id"]) or {}).get("user_id", owner)
    if isinstance(args.get("order_id"), str):
        owner = (domain.record_of("orders", args["order_id"]) or {}).get("user_id", owner)
    if owner and domain.name == "retail" and not any(s.name.startswith("find_user_id") for s in done):
        person = domain.db["users"].get(owner, {})
        want("find_user_id_by_email", email=person.get("email", ""))
    if owner and action.name != "modify_user_address":
        want("get_user_details", user_id=owner)
    for key, reader in (("reservation_id", "get_reservation_details"), ("order_id", "get_order_details")):
        if isinstance(args.get(key), str):
            want(reader, **{key: args[key]})
    if action.name in ("modify_pending_order_address", "modify_user_address"):
        address = {k: args.get(k) for k in ("address1", "address2", "city", "state", "country", "zip")}
        person = domain.db["users"].get(owner or "", {})
        source = next((o for o in person.get("orders") or [] if domain.db["orders"].get(o, {}).get("address") == address), None)
        if person.get("address") != address and source is not None:
            want("get_order_details", order_id=source)  # where the new address comes from: the order the user points to
    for item in args.get("new_item_ids") or []:
        product = domain.product_of_item(item)
        if product:
            want("get_product_details", product_id=product)
    for flight in args.get("flights") or []:
        record = domain.db.get("flights", {}).get(flight.get("flight_number"), {}) if isinstance(flight, dict) else {}
        if record and flight.get("date"):
            want("search_direct_flight", origin=record["origin"], destination=record["destination"], date=flight["date"])
    return wanted


def success_plan(domain: Tau2Domain, task: dict[str, Any], gold: list[GoldAction]) -> list[Step | Say]:
    """What a careful agent does for the task: the gold actions, the reads before them, and the dialogue the
    policy requires (the cancellation reason, listing the changes and a yes before making them)."""
    user = domain.task_user(task, gold)
    steps: list[Step | Say] = []
    if domain.name == "retail":  # authenticate first, then the profile: where order ids come from
        auth = next((a for a in gold if a.name.startswith("find_user_id") and not domain.respond(domain.scratch(), a.name, a.arguments)[1]), None)
        if auth is not None:
            steps.append(Step(auth.name, copy.deepcopy(auth.arguments)))
        elif user:
            steps.append(Step("find_user_id_by_email", {"email": domain.db["users"][user].get("email", "")}, gold=False))
    if user:
        steps.append(Step("get_user_details", {"user_id": user}, gold=False))
    writes = [a for a in gold if domain.catalog.is_write(a.name)]
    db = domain.scratch()
    profile_at = len(steps)
    for action in gold:
        if not domain.catalog.is_read(action.name) or domain.respond(db, action.name, action.arguments)[1]:
            continue  # a careful agent makes no look-up that fails (some gold reads name missing records)
        if not any(isinstance(s, Step) and s.name == action.name and s.arguments == action.arguments for s in steps):
            steps.append(Step(action.name, copy.deepcopy(action.arguments)))
    if any(a.name == "cancel_reservation" for a in writes):
        steps.append(Say("assistant", "What is the reason for the cancellation?"))
        steps.append(Say("user", str(_instructions(task).get("reason_for_call") or "Change of plans.")))
    pending = [s for s in steps if isinstance(s, Step)]
    for action in writes:
        reads = _reads_for(domain, action, pending, user)
        steps += reads
        pending += reads
    if writes:
        plan = "; ".join(_describe(Step(a.name, a.arguments)) for a in writes)
        steps += [Say("assistant", CONFIRM_ASK.format(plan=plan)), Say("user", CONFIRMED)]
        steps += [Step(a.name, copy.deepcopy(a.arguments)) for a in writes]
    for action in gold:
        if action.name == "transfer_to_human_agents":
            steps += [Step(action.name, copy.deepcopy(action.arguments)), Say("assistant", TRANSFER_LINE)]
    if any(isinstance(s, Step) and s.name == "get_product_details" for s in steps):
        steps.insert(profile_at, Step("list_all_product_types", {}, gold=False))  # where product ids come from
    return steps


def render(domain: Tau2Domain, task: dict[str, Any], steps: list[Step | Say], traj_id: str, success: bool, kind: str) -> Trajectory:
    instructions = _instructions(task)
    opening = " ".join(str(instructions.get(k) or "").strip() for k in ("known_info", "reason_for_call")).strip() or "Hi, I need help."
    messages = [Message(role="assistant", content="Hi! How can I help you today?"), Message(role="user", content=opening)]
    db = domain.scratch()
    for number, step in enumerate(steps):
        if isinstance(step, Say):
            messages.append(Message(role=step.role, content=step.text))
            continue
        call_id = f"call_{number}"
        function = FunctionCall(name=step.name, arguments=json.dumps(step.arguments, ensure_ascii=False))
        messages.append(Message(role="assistant", content=None, tool_calls=[ToolCall(id=call_id, function=function)]))
        text, error = (step.error, True) if step.error else domain.respond(db, step.name, step.arguments)
        messages.append(Message(role="tool", content=text, tool_call_id=call_id, name=step.name, error=error))
    messages.append(Message(role="assistant", content="Is there anything else I can help you with?"))
    messages.append(Message(role="user", content="No, that's all. ###STOP###"))
    return Trajectory(
        id=traj_id, target=domain.target, task_id=str(task["id"]), messages=messages, reward=1.0 if success else 0.0,
        success=success, source="synthetic",
        metadata={"domain": domain.name, "injected": kind, "task": spec_from_tau2(task, domain=domain.name).model_dump(mode="json")},
    )  # fmt: skip


def tasks_with_gold(domain: Tau2Domain) -> list[tuple[dict[str, Any], list[GoldAction]]]:
    out = []
    for task in domain.tasks:
        gold = gold_from_task(task)
        if gold is not None:
            out.append((task, gold))
    return out
