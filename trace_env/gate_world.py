"""Inside the sandbox: what the gate reads in an episode beyond its reward, measured next to the env.

- the decision an episode made: its successful calls with their arguments, what it changed in the state
  and the yes/no words it said, with ids and names masked (diversity counts these, not tool names);
- the world's fidelity, using the target's kit: the tool calls of an episode replayed with the kit's own
  functions on a copy of the start state, so an overridden tool whose result has another shape, or whose
  write skips part of what the target does (a refund never recorded), shows; and the scenario's state
  checked against the world's invariants (a booking on a flight that does not exist);
- the ground truth recomputed with the env's ``derive_truth`` where it declares one.

Stdlib only (this runs next to untrusted env code); the host validates what comes back.
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import json
import re
from typing import Any, Callable

from trace_env import sdk
from trace_env.kits import KIT_FOR_TARGET
from trace_env.scenario_values import Masker
from trace_env.sdk import Episode, Scenario, TaskEnv, ToolError, canonical_json
from trace_env.sdk import numbers_in as sdk_numbers

MAX_DELTA = 200
POLARITY = frozenset("""yes no not cannot can't can unable able won't will isn't is eligible ineligible allowed
permitted approved denied refuse refused decline declined unfortunately sorry true false""".split())
_WORD = re.compile(r"[a-z']+")
AMOUNT = re.compile(r"[-+]?\$?\s?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?")


# --- decisions -------------------------------------------------------------------------------------


def state_delta(masker: Masker, before: Any, after: Any, path: str = "", out: list[list[Any]] | None = None) -> list[list[Any]]:
    """What changed between two JSON states, as ``[masked path, masked new value]`` pairs (bounded)."""
    out = [] if out is None else out
    if len(out) >= MAX_DELTA:
        return out
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after), key=str):
            where = f"{path}/{masker.structure(str(key))}"
            if key not in after:
                out.append([where, "<removed>"])
            elif key not in before:
                out.append([where, masker.structure(after[key])])
            elif before[key] != after[key]:
                state_delta(masker, before[key], after[key], where, out)
    elif isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for index, (a, b) in enumerate(zip(before, after)):
            if a != b:
                state_delta(masker, a, b, f"{path}[{index}]", out)
    elif before != after:
        out.append([path, masker.structure(after)])
    return out


def decision(masker: Masker, before: dict[str, Any], episode: Episode) -> str:
    """A digest of what the episode decided: successful calls with masked arguments, the masked state
    change, and the yes/no words of what the agent said. Two seeds whose reference differs only in ids and
    names decide alike; a different item, answer or end state is a different decision."""
    calls = [[r.name, masker.structure(r.arguments)] for r in episode.tool_log if r.ok]
    delta = state_delta(masker, before, episode.state)
    said = sorted({w for text in episode.assistant_texts() for w in _WORD.findall(text.lower()) if w in POLARITY})
    return hashlib.sha256(canonical_json([calls, delta, said]).encode()).hexdigest()[:20]


def numbers(value: Any, out: set[float] | None = None, depth: int = 0) -> list[float]:
    """The numbers among a JSON value's leaves (numbers, and strings that are one amount such as
    ``"$1,204.50"``), at most 100: what an answer graded against the truth would state."""
    out = set() if out is None else out
    if depth > 12 or len(out) >= 100:
        return sorted(out)
    if isinstance(value, dict):
        for item in value.values():
            numbers(item, out, depth + 1)
    elif isinstance(value, list):
        for item in value[:200]:
            numbers(item, out, depth + 1)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        out.add(float(value))
    elif isinstance(value, str) and AMOUNT.fullmatch(value.strip()):
        out.update(sdk_numbers(value))
    return sorted(out)[:100]


def heard_text(messages: list[dict[str, Any]]) -> str:
    """Every message the agent is shown after its system prompt and before its last turn: user turns and tool
    results, in order. What comes after the agent's last message (the result of the write that ended the episode,
    the user's goodbye) arrives when nothing can use it any more, so no leak can live there."""
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=len(messages))
    return "\n".join(str(m.get("content") or "") for m in messages[1:last] if m.get("role") in ("user", "tool"))


# --- kit fidelity ------------------------------------------------------------------------------------


def kit_functions(target: str) -> dict[str, Callable[..., Any]]:
    """The target's tools as the kit's plain functions (``db`` first), or none for a target without a kit."""
    kit = KIT_FOR_TARGET.get(target)
    if kit is None:
        return {}
    module = importlib.import_module(f"trace_env.kits.{kit}")
    return {name: getattr(module, name) for name in getattr(module, "TOOL_NAMES", ()) if callable(getattr(module, name, None))}


def skeleton(value: Any, path: str = "", out: set[str] | None = None) -> set[str]:
    """The shape of a JSON value: the set of key paths with their leaf types (list items merged)."""
    out = set() if out is None else out
    if isinstance(value, dict):
        for key, item in value.items():
            skeleton(item, f"{path}.{key}", out)
        if not value:
            out.add(f"{path}:{{}}")
    elif isinstance(value, list):
        for item in value[:50]:
            skeleton(item, f"{path}[]", out)
    else:
        kind = "null" if value is None else "number" if isinstance(value, (int, float)) and not isinstance(value, bool) else type(value).__name__
        out.add(f"{path}:{kind}")
    return out


def _parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def first_difference(a: Any, b: Any, path: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            if key not in a or key not in b or a[key] != b[key]:
                return first_difference(a.get(key), b.get(key), f"{path}.{key}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for index, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return first_difference(x, y, f"{path}[{index}]")
    return f"{path or 'state'}: {json.dumps(a, default=str)[:80]} vs the kit's {json.dumps(b, default=str)[:80]}"


def kit_replay(env: TaskEnv, scenario: Scenario, episode: Episode) -> dict[str, Any]:
    """The episode's tool calls replayed with the kit's functions on a copy of the start state: each result
    must have the kit's shape (and succeed or fail alike), and the final states must be equal."""
    functions = kit_functions(env.target)
    if env.tool_domain or not functions:
        return {"status": "no_kit"}
    state = copy.deepcopy(env.initial_state(scenario))
    compared = 0
    for record in episode.tool_log:
        function = functions.get(record.name)
        if function is None:
            return {"status": "not_comparable", "detail": f"{record.name} is not a tool of the kit"}
        try:
            result, ok = function(state, **record.arguments), True
        except ToolError as exc:
            result, ok = str(exc), False
        except Exception as exc:  # the env's state is not the kit's world (a world of its own): nothing to compare
            return {"status": "not_comparable", "detail": f"the kit's {record.name} cannot run on this state ({type(exc).__name__})"}
        compared += 1
        if ok != record.ok:
            verdict = "succeeded" if record.ok else "failed"
            return {"status": "differs", "calls": compared, "detail": f"{record.name}({json.dumps(record.arguments)[:120]}) "
                    f"{verdict} here but {'succeeds' if ok else 'fails'} with the kit: {str(result if not ok else record.result)[:120]}"}
        if ok:
            mine, theirs = skeleton(_parsed(record.result)), skeleton(json.loads(json.dumps(result, default=str)) if not isinstance(result, str) else _parsed(result))
            if mine != theirs:
                extra, missing = sorted(mine - theirs)[:2], sorted(theirs - mine)[:2]
                return {"status": "differs", "calls": compared, "detail": f"the result of {record.name} has another shape than the "
                        f"target's: extra {extra}, missing {missing}"}
    mine, theirs = json.loads(canonical_json(episode.state)), json.loads(canonical_json(state))
    if mine != theirs:
        writes = sorted({r.name for r in episode.tool_log if r.ok and r.name in env.write_tools}) or ["no write"]
        return {"status": "differs", "calls": compared, "detail": f"after {', '.join(writes)} the state differs from what the "
                f"target's tools leave: {first_difference(mine, theirs)}"}
    return {"status": "same", "calls": compared}


# --- world invariants ---------------------------------------------------------------------------------


def _airline(state: dict[str, Any]) -> list[str]:
    problems = []
    users, reservations, flights = state.get("users", {}), state.get("reservations", {}), state.get("flights", {})
    for rid, record in reservations.items():
        if record.get("reservation_id") != rid:
            problems.append(f"reservations.{rid} has reservation_id {record.get('reservation_id')!r}")
        if users and record.get("user_id") not in users:
            problems.append(f"reservation {rid} belongs to user {record.get('user_id')!r}, who does not exist")
        for leg in record.get("flights", []):
            number, day = leg.get("flight_number"), leg.get("date")
            if flights and (number not in flights or day not in flights[number].get("dates", {})):
                problems.append(f"reservation {rid} is booked on flight {number} on {day}, which does not exist")
    for uid, user in users.items():
        for rid in user.get("reservations", []):
            if reservations and rid not in reservations:
                problems.append(f"user {uid} lists reservation {rid}, which does not exist")
    return problems


def _retail(state: dict[str, Any]) -> list[str]:
    problems = []
    users, orders, products = state.get("users", {}), state.get("orders", {}), state.get("products", {})
    for oid, order in orders.items():
        if order.get("order_id") != oid:
            problems.append(f"orders.{oid} has order_id {order.get('order_id')!r}")
        user = users.get(order.get("user_id"))
        if users and user is None:
            problems.append(f"order {oid} belongs to user {order.get('user_id')!r}, who does not exist")
        for item in order.get("items", []):
            product = products.get(item.get("product_id"))
            if products and (product is None or item.get("item_id") not in product.get("variants", {})):
                problems.append(f"order {oid} holds item {item.get('item_id')} of product {item.get('product_id')}, which does not exist")
        for payment in order.get("payment_history", []):
            if user is not None and payment.get("payment_method_id") not in user.get("payment_methods", {}):
                problems.append(f"order {oid} was paid with {payment.get('payment_method_id')}, not a method of its user")
    for uid, user in users.items():
        for oid in user.get("orders", []):
            if orders and oid not in orders:
                problems.append(f"user {uid} lists order {oid}, which does not exist")
    return problems


def _toolsandbox(state: dict[str, Any]) -> list[str]:
    problems = []
    ids = [c.get("person_id") for c in state.get("contacts", [])]
    if len(ids) != len(set(ids)):
        problems.append("two contacts share a person_id")
    settings = state.get("settings", {})
    for key in ("cellular", "wifi", "location_service", "low_battery_mode"):
        if settings and key in settings and not isinstance(settings[key], bool):
            problems.append(f"settings.{key} is {settings[key]!r}, not a boolean")
    return problems


INVARIANTS: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "tau2-airline": _airline, "tau2-retail": _retail, "toolsandbox": _toolsandbox,
}


def invariants(target: str, state: Any) -> list[str]:
    """What in a scenario's state breaks the target world's invariants (first few)."""
    check = INVARIANTS.get(target)
    if check is None or not isinstance(state, dict):
        return []
    try:
        return check(state)[:3]
    except (AttributeError, TypeError, KeyError):  # a world of the env's own making: its records are its business
        return []


def truth_check(env: TaskEnv, scenario: Scenario, state: dict[str, Any]) -> str:
    """``derive_truth(scenario, state)`` against the scenario's truth: ``same``, ``undeclared`` or what differs."""
    try:
        derived = env.derive_truth(scenario, copy.deepcopy(state))
    except Exception as exc:  # env code
        return f"error: derive_truth raised {type(exc).__name__}: {exc}"[:300]
    if derived is None:
        return "undeclared"
    mine, given = json.loads(canonical_json(derived)), json.loads(canonical_json(scenario.truth))
    return "same" if mine == given else "differs: " + first_difference(given, mine).replace("vs the kit's", "recomputed as")[:300]


def truth_order(env: TaskEnv, seed: int) -> str:
    """Replays ``generate(seed)`` watching each time the scenario's truth is set: ``same`` when the records the
    agent will read are what they were when the truth was last set, else the first record changed after it
    (the truth was computed from records the agent never sees: stale, or a verdict written into them).
    The replay runs where the env's type says (``trace_env.gate_remote.RemoteEnv``: a fresh process); the
    comparison runs here."""
    remote = getattr(type(env), "truth_marks", None)
    found = remote(env, seed) if remote is not None else truth_marks(env, seed)
    mark, state, truth = found.get("mark"), found.get("state"), found.get("truth")
    if mark is None:
        return "same"
    if not (isinstance(mark, list) and len(mark) == 2 and all(isinstance(x, str) for x in (*mark, state, truth))):
        raise TypeError("the truth marks are not two texts and the final state and truth")
    if state == mark[0] or truth != mark[1]:
        return "same"
    return "changed " + (_first_difference(json.loads(mark[0]), json.loads(state)) or "the records")


def truth_marks(env: TaskEnv, seed: int) -> dict[str, Any]:
    """``generate(seed)`` run here with the truth watched: the records and truth as they were when the truth was
    last set (``mark``, None when it never was or the result is no scenario), and as generate returned them."""
    marks: dict[int, tuple[str, str]] = {}

    def watch(scenario: Scenario) -> None:
        try:
            marks[id(scenario)] = (canonical_json(scenario.state), canonical_json(scenario.truth))
        except Exception:  # noqa: BLE001 - not JSON yet: judged by the later marks
            marks.pop(id(scenario), None)

    sdk._truth_watch = watch
    try:
        scenario = env.generate(seed)
    finally:
        sdk._truth_watch = None
    mark = marks.get(id(scenario))
    if mark is None or not isinstance(scenario, Scenario):
        return {"mark": None}
    return {"mark": list(mark), "state": canonical_json(scenario.state), "truth": canonical_json(scenario.truth)}


def _first_difference(before: Any, after: Any, path: str = "state") -> str | None:
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after), key=str):
            if key not in before or key not in after:
                return f"{path}.{key} ({'added' if key not in before else 'removed'})"
            found = _first_difference(before[key], after[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for i, (b, a) in enumerate(zip(before, after)):
            found = _first_difference(b, a, f"{path}[{i}]")
            if found:
                return found
        return None
    return None if before == after else f"{path}: {json.dumps(before)[:60]} -> {json.dumps(after)[:60]}"


def world_report(env: TaskEnv, scenario: Scenario, episode: Episode) -> dict[str, Any]:
    """Invariants of the start state, the kit replay of the episode, and the truth recomputed at the start."""
    return {"invariants": invariants(env.target, scenario.state), "kit": kit_replay(env, scenario, episode),
            "truth_at_start": truth_check(env, scenario, scenario.state)}
