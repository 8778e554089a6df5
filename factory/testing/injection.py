"""Synthetic τ² trajectories with known, injected deficits: the ground truth that checks the offline labeler
(and feeds the benchmark).

A *success* replays a real task's gold actions, with the verification reads a careful agent makes inserted
before each write whose record it had not yet read; tool results come from the real τ² database. A *failure*
takes that replay and injects one deficit whose capability is known:

=====================  ==============================================================  ============================
kind                   what changes                                                    capability expected LACKING
=====================  ==============================================================  ============================
drop_write             one required write is removed                                   multi_step_task_completion
corrupt_argument       a required write gets an invented / mistyped / incomplete value tool_calling_precision
wrong_record           a required write takes a value from another record it had seen  structured_data_reasoning
shift_date             the date of a dated write (and of its search) is off by a day   datetime_reasoning
write_before_check     a required write is moved before the read of its record         precondition_verification
ineligible_write       a write the task forbids is added, on a record never read       precondition_verification
repeat_failed_call     a required write errors and the agent repeats it unchanged      permission_error_recovery
drop_transfer          the required transfer to a human agent is removed               escalation_judgment
=====================  ==============================================================  ============================

Two more kinds of success test for false alarms: ``recovered_error`` makes a wrong first attempt at a write
that errors and then the right call (so permission_error_recovery also has PRESENT examples), and
``noisy_success`` adds a mistyped look-up that errors, its correction and a repeated read.
"""

from __future__ import annotations

import ast
import copy
import datetime as dt
import json
import operator
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from factory.analyze.gold import GoldAction, gold_from_task
from factory.analyze.toolinfo import ToolCatalog, catalog_for_target
from schemas.capability import CapabilityLabel, TrajectoryLabel
from schemas.messages import FunctionCall, Message, ToolCall
from schemas.trajectory import Trajectory

INJECTIONS: dict[str, str] = {
    "drop_write": "multi_step_task_completion",
    "corrupt_argument": "tool_calling_precision",
    "wrong_record": "structured_data_reasoning",
    "shift_date": "datetime_reasoning",
    "write_before_check": "precondition_verification",
    "ineligible_write": "precondition_verification",
    "repeat_failed_call": "permission_error_recovery",
    "drop_transfer": "escalation_judgment",
}
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class InjectedCase(BaseModel):
    trajectory: Trajectory
    kind: str  # "success", "recovered_error" or an INJECTIONS key
    expected: list[str]  # capabilities expected LACKING


@dataclass
class Step:
    name: str
    arguments: dict[str, Any]
    gold: bool = True
    error: str | None = None  # forced error result


# --------------------------------------------------------------------------------------------------
# the τ² domain: database-backed tool results
# --------------------------------------------------------------------------------------------------
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv, ast.USub: operator.neg}


def _calc(expression: str) -> str:
    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.operand))
        raise ValueError("unsupported expression")

    try:
        return str(round(ev(ast.parse(expression, mode="eval")), 2))
    except (ValueError, SyntaxError, ZeroDivisionError, TypeError):
        return "Error: invalid expression"


class Tau2Domain:
    """One τ² domain folder (``db.json``, ``tasks.json``): answers tool calls from the real database."""

    def __init__(self, name: str, db: dict[str, Any], tasks: list[dict[str, Any]]) -> None:
        self.name = name
        self.db = db
        self.tasks = tasks
        self.target = f"tau2-{name}"
        self.catalog: ToolCatalog = catalog_for_target(self.target)

    @classmethod
    def load(cls, folder: Path, tasks_file: str = "tasks.json") -> "Tau2Domain":
        folder = Path(folder)
        db = json.loads((folder / "db.json").read_text(encoding="utf-8"))
        tasks = json.loads((folder / tasks_file).read_text(encoding="utf-8"))
        return cls(folder.name, db, tasks)

    # -- reads ----------------------------------------------------------------------------------
    def respond(self, name: str, args: dict[str, Any]) -> tuple[str, bool]:
        """(tool result text, is_error) for a call, in the spirit of the τ² tools."""
        handler = getattr(self, f"_t_{name}", None)
        try:
            if handler is not None:
                return json.dumps(handler(**args), ensure_ascii=False) if not isinstance(r := handler(**args), str) else r, False
            return self._write_result(name, args), False
        except KeyError as exc:
            return f"Error: {exc.args[0]}", True
        except TypeError as exc:
            return f"Error: {exc}", True

    def _record(self, table: str, key: str, label: str) -> dict[str, Any]:
        record = self.db.get(table, {}).get(key)
        if record is None:
            raise KeyError(f"{label} {key} not found")
        return record

    def _t_get_user_details(self, user_id: str) -> Any:
        return self._record("users", user_id, "User")

    def _t_get_reservation_details(self, reservation_id: str) -> Any:
        return self._record("reservations", reservation_id, "Reservation")

    def _t_get_order_details(self, order_id: str) -> Any:
        return self._record("orders", order_id, "Order")

    def _t_get_product_details(self, product_id: str) -> Any:
        return self._record("products", product_id, "Product")

    def _t_get_item_details(self, item_id: str) -> Any:
        for product in self.db.get("products", {}).values():
            if item_id in product.get("variants", {}):
                return product["variants"][item_id]
        raise KeyError(f"Item {item_id} not found")

    def _t_list_all_product_types(self) -> Any:
        return {p["name"]: p["product_id"] for p in self.db.get("products", {}).values()}

    def _t_list_all_airports(self) -> Any:
        return sorted({f["origin"] for f in self.db.get("flights", {}).values()})

    def _t_find_user_id_by_email(self, email: str) -> str:
        for user in self.db.get("users", {}).values():
            if user.get("email", "").lower() == email.lower():
                return user["user_id"]
        raise KeyError("User not found")

    def _t_find_user_id_by_name_zip(self, first_name: str, last_name: str, zip: str) -> str:  # noqa: A002
        for user in self.db.get("users", {}).values():
            name = user.get("name", {})
            if (name.get("first_name", "").lower(), name.get("last_name", "").lower(), user.get("address", {}).get("zip")) == (
                first_name.lower(), last_name.lower(), zip,
            ):  # fmt: skip
                return user["user_id"]
        raise KeyError("User not found")

    def _t_search_direct_flight(self, origin: str, destination: str, date: str) -> Any:
        out = []
        for flight in self.db.get("flights", {}).values():
            day = flight.get("dates", {}).get(date)
            if flight["origin"] == origin and flight["destination"] == destination and day and day.get("status") == "available":
                out.append({k: v for k, v in flight.items() if k != "dates"} | {"date": date, **day})
        return out

    def _t_search_onestop_flight(self, origin: str, destination: str, date: str) -> Any:
        out = []
        flights = list(self.db.get("flights", {}).values())
        for first in flights:
            day = first.get("dates", {}).get(date)
            if first["origin"] != origin or not day or day.get("status") != "available":
                continue
            for second in flights:
                day2 = second.get("dates", {}).get(date)
                if second["origin"] == first["destination"] and second["destination"] == destination and day2 and day2.get("status") == "available":
                    out.append([first["flight_number"], second["flight_number"]])
        return out[:20]

    def _t_get_flight_status(self, flight_number: str, date: str) -> str:
        flight = self._record("flights", flight_number, "Flight")
        day = flight.get("dates", {}).get(date)
        if day is None:
            raise KeyError(f"Flight {flight_number} not found on date {date}")
        return str(day.get("status"))

    def _t_calculate(self, expression: str) -> str:
        return _calc(expression)

    def _t_transfer_to_human_agents(self, summary: str = "") -> str:
        return "Transfer successful"

    def _write_result(self, name: str, args: dict[str, Any]) -> str:
        key = self.catalog.primary_key(name, args)
        record = None
        if key:
            for table in ("reservations", "orders", "users"):
                record = self.db.get(table, {}).get(args[key])
                if record is not None:
                    break
        result = copy.deepcopy(record) if isinstance(record, dict) else {"success": True}
        if name.startswith("cancel"):
            result["status"] = "cancelled"
        return json.dumps(result, ensure_ascii=False)

    # -- task facts -----------------------------------------------------------------------------
    def task_user(self, task: dict[str, Any], gold: list[GoldAction]) -> str | None:
        for action in gold:
            if isinstance(action.arguments.get("user_id"), str):
                return action.arguments["user_id"]
        for action in gold:
            for table, key in (("reservations", "reservation_id"), ("orders", "order_id")):
                record = self.db.get(table, {}).get(action.arguments.get(key, ""))
                if record:
                    return record.get("user_id")
        known = ((task.get("user_scenario") or {}).get("instructions") or {}).get("known_info") or ""
        match = re.search(r"user id is\s+([a-z_]+_\d+)", known)
        return match.group(1) if match and match.group(1) in self.db.get("users", {}) else None

    def mentioned_records(self, task: dict[str, Any]) -> list[tuple[str, str]]:
        """(read tool, id) for reservations/orders named in the user's reason for calling."""
        instructions = (task.get("user_scenario") or {}).get("instructions") or {}
        text = f"{instructions.get('reason_for_call') or ''} {instructions.get('known_info') or ''}"
        out = []
        for token in re.findall(r"#?[A-Z0-9]{6,8}", text):
            if token in self.db.get("reservations", {}):
                out.append(("get_reservation_details", token))
            elif token in self.db.get("orders", {}):
                out.append(("get_order_details", token))
        return out


# --------------------------------------------------------------------------------------------------
# building trajectories
# --------------------------------------------------------------------------------------------------
def _read_tool_for(catalog: ToolCatalog, key: str) -> str | None:
    for name, schema in catalog.schemas.items():
        if catalog.is_read(name) and (schema.get("required") or []) == [key]:
            return name
    return None


def _mentions(args: dict[str, Any], value: Any) -> bool:
    return value in _leaves(args)


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [x for v in value.values() for x in _leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in _leaves(v)]
    return [value]


def success_plan(domain: Tau2Domain, task: dict[str, Any], gold: list[GoldAction]) -> list[Step]:
    """Gold actions, with a read of each write's record inserted where the gold has none before it."""
    catalog = domain.catalog
    steps: list[Step] = []
    user = domain.task_user(task, gold)
    if not gold:  # nothing to do but look things up (refusals, questions)
        if user:
            steps.append(Step("get_user_details", {"user_id": user}, gold=False))
        steps += [Step(tool, {tool.split("_")[1] + "_id": rid}, gold=False) for tool, rid in domain.mentioned_records(task)]
        return steps
    for action in gold:
        if catalog.is_write(action.name):
            key = catalog.primary_key(action.name, action.arguments)
            value = action.arguments.get(key) if key else None
            if value is not None and not any(catalog.is_read(s.name) and _mentions(s.arguments, value) for s in steps):
                reader = _read_tool_for(catalog, key)
                if reader:
                    steps.append(Step(reader, {key: value}, gold=False))
        steps.append(Step(action.name, copy.deepcopy(action.arguments)))
    return steps


def render(domain: Tau2Domain, task: dict[str, Any], steps: list[Step], traj_id: str, success: bool, kind: str) -> Trajectory:
    instructions = (task.get("user_scenario") or {}).get("instructions") or {}
    opening = " ".join(str(instructions.get(k) or "").strip() for k in ("known_info", "reason_for_call")).strip() or "Hi, I need help."
    messages = [Message(role="user", content=opening)]
    for number, step in enumerate(steps):
        call_id = f"call_{number}"
        messages.append(Message(role="assistant", content=None, tool_calls=[
            ToolCall(id=call_id, function=FunctionCall(name=step.name, arguments=json.dumps(step.arguments, ensure_ascii=False)))
        ]))  # fmt: skip
        if step.error:
            text, error = step.error, True
        else:
            text, error = domain.respond(step.name, step.arguments)
        messages.append(Message(role="tool", content=text, tool_call_id=call_id, name=step.name, error=error))
    messages.append(Message(role="assistant", content="Is there anything else I can help you with?" if success else "I have taken care of your request."))
    messages.append(Message(role="user", content="No, that's all. ###STOP###"))
    return Trajectory(
        id=traj_id,
        target=domain.target,
        task_id=str(task["id"]),
        messages=messages,
        reward=1.0 if success else 0.0,
        success=success,
        source="synthetic",
        metadata={"domain": domain.name, "injected": kind},
    )


# --------------------------------------------------------------------------------------------------
# injections: each returns the new steps, or None when the task offers no place for it
# --------------------------------------------------------------------------------------------------
def _gold_writes(domain: Tau2Domain, steps: list[Step]) -> list[int]:
    return [i for i, s in enumerate(steps) if s.gold and domain.catalog.is_write(s.name)]


def _seen_values(domain: Tau2Domain, steps: list[Step], upto: int) -> dict[str, set[str]]:
    """key -> values found in the results of reads before step ``upto`` (what the agent had seen)."""
    found: dict[str, set[str]] = {}

    def walk(value: Any, key: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                found.setdefault("<key>", set()).add(str(k))
                walk(v, k)
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif isinstance(value, str):
            found.setdefault(key, set()).add(value)

    for step in steps[:upto]:
        text, error = domain.respond(step.name, step.arguments)
        if not error:
            try:
                walk(json.loads(text), "")
            except json.JSONDecodeError:
                found.setdefault("", set()).add(text)
    return found


def _paths(value: Any, prefix: tuple = ()) -> list[tuple[tuple, Any]]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _paths(v, prefix + (k,))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _paths(v, prefix + (i,))]
    return [(prefix, value)]


def _set_path(args: dict[str, Any], path: tuple, value: Any) -> None:
    target: Any = args
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value


def _all_values(domain: Tau2Domain, steps: list[Step]) -> set[str]:
    seen: set[str] = set()
    for values in _seen_values(domain, steps, len(steps)).values():
        seen |= values
    for step in steps:
        seen |= {str(v) for v in _leaves(step.arguments)}
    return seen


def inject_drop_write(domain, task, steps, rng):
    writes = _gold_writes(domain, steps)
    if not writes:
        return None
    drop = rng.choice(writes)
    return [s for i, s in enumerate(steps) if i != drop]


def inject_corrupt_argument(domain, task, steps, rng):
    options = []
    for i in _gold_writes(domain, steps):
        key = domain.catalog.primary_key(steps[i].name, steps[i].arguments)
        for path, value in _paths(steps[i].arguments):
            if path[0] == key or (isinstance(value, str) and _DATE.match(value)) or value is None:
                continue
            options.append((i, path, value))
        for name, value in steps[i].arguments.items():
            if isinstance(value, list) and len(value) >= 2 and name != key:
                options.append((i, (name,), value))
    if not options:
        return None
    i, path, value = rng.choice(options)
    new_steps = copy.deepcopy(steps)
    taken = _all_values(domain, steps)
    if isinstance(value, list):
        new_value: Any = [v for j, v in enumerate(value) if j != rng.randrange(len(value))][: len(value) - 1]
    elif isinstance(value, bool):
        new_value = not value
    elif isinstance(value, (int, float)):
        new_value = value * 2 + 7
        while str(new_value) in taken or str(float(new_value)) in taken:
            new_value += 13
    else:
        text = str(value)
        new_value = text
        for _ in range(50):
            chars = list(text)
            digits = [k for k, c in enumerate(chars) if c.isdigit()]
            if digits:
                k = rng.choice(digits)
                chars[k] = str((int(chars[k]) + rng.randint(1, 9)) % 10)
            else:
                k = rng.randrange(len(chars)) if chars else 0
                chars[k:k + 1] = []  # fmt: skip
            new_value = "".join(chars) or "x"
            if new_value not in taken and new_value != text:
                break
    _set_path(new_steps[i].arguments, path, new_value)
    return new_steps


def inject_wrong_record(domain, task, steps, rng):
    options = []
    for i in _gold_writes(domain, steps):
        key = domain.catalog.primary_key(steps[i].name, steps[i].arguments)
        seen = _seen_values(domain, steps, i)
        used = {str(v) for s in steps for v in _leaves(s.arguments)}
        for path, value in _paths(steps[i].arguments):
            if path[0] == key or not isinstance(value, str) or _DATE.match(value):
                continue
            for seen_key, values in seen.items():
                if value in values and seen_key not in ("", "<key>"):
                    alternatives = sorted(v for v in values - used if not _DATE.match(v))
                    if alternatives:
                        options.append((i, path, rng.choice(alternatives)))
                    break
    if not options:
        return None
    i, path, new_value = rng.choice(options)
    new_steps = copy.deepcopy(steps)
    _set_path(new_steps[i].arguments, path, new_value)
    return new_steps


def inject_shift_date(domain, task, steps, rng):
    dates = sorted({v for i in _gold_writes(domain, steps) for _, v in _paths(steps[i].arguments) if isinstance(v, str) and _DATE.match(v)})
    if not dates:
        return None
    old = rng.choice(dates)
    new = (dt.date.fromisoformat(old) + dt.timedelta(days=1)).isoformat()
    new_steps = copy.deepcopy(steps)
    for step in new_steps:
        for path, value in _paths(step.arguments):
            if value == old:
                _set_path(step.arguments, path, new)
    return new_steps


def inject_write_before_check(domain, task, steps, rng):
    options = []
    for i in _gold_writes(domain, steps):
        key = domain.catalog.primary_key(steps[i].name, steps[i].arguments)
        value = steps[i].arguments.get(key) if key else None
        reads = [j for j in range(i) if domain.catalog.is_read(steps[j].name) and _mentions(steps[j].arguments, value)]
        if value is not None and reads:
            options.append((i, reads[0]))
    if not options:
        return None
    i, first_read = rng.choice(options)
    new_steps = list(steps)
    write = new_steps.pop(i)
    new_steps.insert(first_read, write)
    return new_steps


_INELIGIBLE = {
    "airline": [("cancel_reservation", "reservations"), ("send_certificate", None)],
    "retail": [("cancel_pending_order", "orders"), ("return_delivered_order_items", "orders")],
}


def inject_ineligible_write(domain, task, steps, rng):
    gold_names = {s.name for s in steps if s.gold}
    user_id = domain.task_user(task, [GoldAction(name=s.name, arguments=s.arguments) for s in steps])
    user = domain.db.get("users", {}).get(user_id or "")
    if not user:
        return None
    touched = {str(v) for s in steps for v in _leaves(s.arguments)}
    for tool, table in _INELIGIBLE.get(domain.name, []):
        if tool in gold_names:
            continue
        if tool == "send_certificate":
            step = Step(tool, {"user_id": user_id, "amount": 150}, gold=False)
        else:
            ids = user.get("reservations") if table == "reservations" else user.get("orders")
            candidates = [r for r in ids or [] if r not in touched]
            if table == "orders":
                wanted = "pending" if tool == "cancel_pending_order" else "delivered"
                candidates = [o for o in candidates if domain.db["orders"].get(o, {}).get("status") == wanted]
            if not candidates:
                continue
            record = rng.choice(candidates)
            if tool == "cancel_reservation":
                step = Step(tool, {"reservation_id": record}, gold=False)
            elif tool == "cancel_pending_order":
                step = Step(tool, {"order_id": record, "reason": "no longer needed"}, gold=False)
            else:
                order = domain.db["orders"][record]
                payment = order["payment_history"][0]["payment_method_id"]
                step = Step(tool, {"order_id": record, "item_ids": [order["items"][0]["item_id"]], "payment_method_id": payment}, gold=False)
        new_steps = list(steps)
        new_steps.insert(rng.randint(min(1, len(steps)), len(steps)), step)
        return new_steps
    return None


def inject_repeat_failed_call(domain, task, steps, rng):
    writes = _gold_writes(domain, steps)
    if not writes:
        return None
    i = rng.choice(writes)
    new_steps = copy.deepcopy(steps)
    failing = Step(steps[i].name, steps[i].arguments, gold=True, error="Error: the request could not be processed; the operation is not permitted")
    new_steps[i] = failing
    new_steps.insert(i + 1, copy.deepcopy(failing))
    return new_steps


def inject_drop_transfer(domain, task, steps, rng):
    transfers = [i for i, s in enumerate(steps) if s.name == "transfer_to_human_agents"]
    if not transfers:
        return None
    return [s for i, s in enumerate(steps) if i not in transfers]


def noisy_success(domain, task, steps, rng):
    """A success with the detours real agents take: a look-up with a mistyped id that errors, then the right
    one, and a repeated read. Nothing here is a deficit."""
    reads = [
        i for i, s in enumerate(steps)
        if domain.catalog.is_read(s.name) and s.arguments and not domain.respond(s.name, s.arguments)[1]
    ]  # fmt: skip
    if not reads:
        return None
    i = rng.choice(reads)
    step = steps[i]
    key = next(iter(step.arguments))
    typo = Step(step.name, {**step.arguments, key: f"{step.arguments[key]}X"}, gold=False)
    again = Step(step.name, copy.deepcopy(step.arguments), gold=False)
    return steps[:i] + [typo] + steps[i : i + 1] + [again] + steps[i + 1 :]


def recovered_error(domain, task, steps, rng):
    """A wrong first attempt at a required write that errors, then the right call: a success."""
    corrupted = inject_corrupt_argument(domain, task, steps, rng)
    if corrupted is None:
        return None
    for i, (a, b) in enumerate(zip(steps, corrupted)):
        if a.arguments != b.arguments:
            bad = copy.deepcopy(b)
            bad.gold, bad.error = False, "Error: invalid argument; please check the value and try again"
            return steps[:i] + [bad] + steps[i:]
    return None


INJECTORS = {
    "drop_write": inject_drop_write,
    "corrupt_argument": inject_corrupt_argument,
    "wrong_record": inject_wrong_record,
    "shift_date": inject_shift_date,
    "write_before_check": inject_write_before_check,
    "ineligible_write": inject_ineligible_write,
    "repeat_failed_call": inject_repeat_failed_call,
    "drop_transfer": inject_drop_transfer,
}


def build_cases(domains: Iterable[Tau2Domain], seed: int = 0, kinds: Iterable[str] | None = None) -> list[InjectedCase]:
    """For every task with gold actions: one success, one recovered-error success, and each applicable injection."""
    kinds = list(kinds or INJECTORS)
    rng = random.Random(seed)
    cases: list[InjectedCase] = []
    for domain in domains:
        for task in domain.tasks:
            gold = gold_from_task(task)
            if gold is None:
                continue
            steps = success_plan(domain, task, gold)
            base = f"{domain.name}/{task['id']}"
            cases.append(InjectedCase(trajectory=render(domain, task, steps, f"{base}#success", True, "success"), kind="success", expected=[]))
            for variant, make in (("recovered_error", recovered_error), ("noisy_success", noisy_success)):
                variant_steps = make(domain, task, steps, rng)
                if variant_steps is not None:
                    traj = render(domain, task, variant_steps, f"{base}#{variant}", True, variant)
                    cases.append(InjectedCase(trajectory=traj, kind=variant, expected=[]))
            for kind in kinds:
                new_steps = INJECTORS[kind](domain, task, steps, rng)
                if new_steps is None:
                    continue
                traj = render(domain, task, new_steps, f"{base}#{kind}", False, kind)
                cases.append(InjectedCase(trajectory=traj, kind=kind, expected=[INJECTIONS[kind]]))
    return cases


@dataclass
class Score:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    fp_examples: list[str] = field(default_factory=list)
    fn_examples: list[str] = field(default_factory=list)

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None


def score(cases: list[InjectedCase], labels: list[TrajectoryLabel], capabilities: Iterable[str]) -> dict[str, Score]:
    """Per capability: predicted LACKING against expected LACKING, over every case (successes included)."""
    lacking = {(l.trajectory_id, l.capability): l for l in labels if l.label == CapabilityLabel.LACKING}
    out = {c: Score() for c in capabilities}
    for case in cases:
        tid = case.trajectory.id
        for capability, s in out.items():
            predicted = (tid, capability) in lacking
            expected = capability in case.expected
            if predicted and expected:
                s.tp += 1
            elif predicted:
                s.fp += 1
                s.fp_examples.append(f"{tid}: {lacking[(tid, capability)].reason}")
            elif expected:
                s.fn += 1
                s.fn_examples.append(tid)
    return out
