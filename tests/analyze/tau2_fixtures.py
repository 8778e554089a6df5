"""Small τ²-bench and τ-bench files for the analysis tests, in the exact shapes those benchmarks write
(``tau2 run`` Results with SimulationRun messages; τ-bench EnvRunResult lists). Records follow the real
``db.json`` shapes; the current time is τ²'s frozen clock, 2024-05-15 15:00 EST."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

NOW = "2025-06-10T12:00:00.000000"
POLICY = "# Airline Agent Policy\n\nThe current time is 2024-05-15 15:00:00 EST.\n..."

USER = {
    "user_id": "emma_kim_9957", "name": {"first_name": "Emma", "last_name": "Kim"}, "email": "emma.kim@example.com",
    "dob": "1980-01-01", "membership": "regular",
    "payment_methods": {"credit_card_1": {"source": "credit_card", "id": "credit_card_1", "brand": "visa", "last_four": "1234"}},
    "saved_passengers": [], "reservations": ["BUS123", "OLD456", "FLW789"],
}  # fmt: skip


def reservation(rid: str, cabin: str, created: str, insurance: str = "no", dates: tuple[str, str] = ("2024-05-20", "2024-05-20")) -> dict[str, Any]:
    return {
        "reservation_id": rid, "user_id": "emma_kim_9957", "origin": "JFK", "destination": "SEA", "flight_type": "one_way",
        "cabin": cabin, "flights": [
            {"flight_number": "HAT100", "origin": "JFK", "destination": "ORD", "date": dates[0], "price": 120},
            {"flight_number": "HAT200", "origin": "ORD", "destination": "SEA", "date": dates[1], "price": 140},
        ],
        "passengers": [{"first_name": "Emma", "last_name": "Kim", "dob": "1980-01-01"}],
        "payment_history": [{"payment_id": "credit_card_1", "amount": 260}], "created_at": created,
        "total_baggages": 0, "nonfree_baggages": 0, "insurance": insurance, "status": None,
    }  # fmt: skip


BUSINESS = reservation("BUS123", "business", "2024-05-01T10:00:00")  # cancellable: business
OLD_ECONOMY = reservation("OLD456", "economy", "2024-05-13T10:00:00")  # no ground: 53 h old, economy, no insurance
RECENT = reservation("NEW999", "basic_economy", "2024-05-15T01:00:00")  # cancellable: booked 14 h ago
FLOWN = reservation("FLW789", "business", "2024-05-01T10:00:00", dates=("2024-05-10", "2024-05-10"))
BASIC = reservation("BAS321", "basic_economy", "2024-05-01T10:00:00")


def message(role: str, content: str | None = None, turn: int = 0, **extra: Any) -> dict[str, Any]:
    out = {"role": role, "content": content, "turn_idx": turn, "timestamp": NOW}
    if role in ("assistant", "user"):
        out.update({"tool_calls": None, "cost": 0.0, "usage": None, "raw_data": None})
    out.update(extra)
    return out


def conversation(*turns: tuple) -> list[dict[str, Any]]:
    """τ² messages from ``("user"|"assistant", text)`` and ``("call", name, args, result[, error])`` turns."""
    out = [message("assistant", "Hi! How can I help you today?", 0)]
    for number, turn in enumerate(turns, start=1):
        if turn[0] == "call":
            name, args, result = turn[1], turn[2], turn[3]
            error = len(turn) > 4 and turn[4]
            call_id = f"call_{number}"
            out.append(message("assistant", None, len(out), tool_calls=[{"id": call_id, "name": name, "arguments": args, "requestor": "assistant"}]))
            text = result if isinstance(result, str) else json.dumps(result)
            out.append({"id": call_id, "role": "tool", "content": text, "requestor": "assistant", "error": bool(error), "turn_idx": len(out), "timestamp": NOW})
        else:
            out.append(message(turn[0], turn[1], len(out)))
    return out


def simulation(task_id: str, trial: int, reward: float, messages: list[dict[str, Any]], termination: str = "user_stop") -> dict[str, Any]:
    return {
        "id": f"sim-{task_id}-{trial}", "task_id": task_id, "timestamp": NOW, "start_time": NOW, "end_time": NOW, "duration": 12.5,
        "termination_reason": termination, "agent_cost": 0.01, "user_cost": 0.002,
        "reward_info": {
            "reward": reward, "db_check": {"db_match": reward == 1.0, "db_reward": reward}, "env_assertions": None,
            "action_checks": None, "nl_assertions": None, "communicate_checks": [], "reward_basis": ["DB", "COMMUNICATE"],
            "reward_breakdown": {"DB": reward, "COMMUNICATE": 1.0}, "info": None,
        },
        "messages": messages, "trial": trial, "seed": 300 + trial,
    }  # fmt: skip


def task(task_id: str, reason: str = "You want to cancel a reservation.", actions: list[dict[str, Any]] | None = None,
         communicate: list[str] | None = None) -> dict[str, Any]:  # fmt: skip
    return {
        "id": task_id, "description": {"purpose": None, "relevant_policies": None, "notes": None},
        "user_scenario": {"persona": None, "instructions": {
            "domain": "airline", "reason_for_call": reason, "known_info": "You are Emma Kim. Your user id is emma_kim_9957. Your reservations are BUS123, OLD456, NEW999, FLW789 and BAS321.",
            "unknown_info": None, "task_instructions": "Be polite."}},
        "initial_state": None,
        "evaluation_criteria": {"actions": [
            {"action_id": f"{task_id}_{i}", "requestor": "assistant", "name": a["name"], "arguments": a["arguments"], "info": None}
            for i, a in enumerate(actions or [])],
            "communicate_info": communicate or [], "nl_assertions": None},
    }  # fmt: skip


def results(simulations: list[dict[str, Any]], tasks: list[dict[str, Any]], domain: str = "airline") -> dict[str, Any]:
    return {
        "timestamp": NOW,
        "info": {
            "git_commit": "37199f36", "num_trials": 1, "max_steps": 200, "max_errors": 10,
            "user_info": {"implementation": "user_simulator", "llm": "gpt-4.1", "llm_args": {"temperature": 0.0}},
            "agent_info": {"implementation": "llm_agent", "llm": "gpt-4.1-mini", "llm_args": {"temperature": 0.0}},
            "environment_info": {"domain_name": domain, "policy": POLICY, "tool_defs": None},
            "seed": 300,
        },
        "tasks": tasks,
        "simulations": simulations,
    }  # fmt: skip


def write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def cancel_turns(record: dict[str, Any], *, read: bool = True, cancel: bool = True, reason: str = "My plans changed.",
                 refusal: str | None = None) -> list[tuple]:  # fmt: skip
    """A cancellation conversation on one reservation: the request, reads, the decision."""
    rid = record["reservation_id"]
    turns: list[tuple] = [("user", f"I want to cancel reservation {rid}. My user id is emma_kim_9957. {reason}")]
    turns.append(("call", "get_user_details", {"user_id": "emma_kim_9957"}, USER))
    if read:
        turns.append(("call", "get_reservation_details", {"reservation_id": rid}, record))
    if refusal:
        turns.append(("assistant", refusal))
    if cancel:
        turns += [("assistant", f"I will cancel {rid}. Do you confirm? Please answer yes to proceed."), ("user", "Yes, please proceed.")]
        done = copy.deepcopy(record)
        done["status"] = "cancelled"
        turns.append(("call", "cancel_reservation", {"reservation_id": rid}, done))
        turns.append(("assistant", f"Reservation {rid} has been cancelled."))
    turns.append(("user", "Thanks. ###STOP###"))
    return turns
