"""The part of a τ² world an agent saw, rebuilt from its tool results, in ``db.json`` record shapes.

The policy functions of ``trace_env.kits.tau2_airline`` / ``tau2_retail`` take records as they are in the
database (a reservation, ``db["flights"]``, a user, an order, ``db["products"]``). An agent's reads return
exactly those records, so the labeler can run the policy on what the agent knew at each step, and only on
that: a record it never read is unknown here, never fetched from a database the agent did not see.

``flights`` are filled from ``get_flight_status`` and the search tools. A segment dated before the
policy's current day has flown (τ²'s clock is frozen, so its database says ``landed``); that fact is added
for segments of reservations the agent read, since the agent could see the date.
"""

from __future__ import annotations

import copy
import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any

from factory.analyze.calls import AgentCall

TAU2_NOW = "2024-05-15T15:00:00"
_NOW_IN_POLICY = re.compile(r"current time is (\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}(?::\d{2})?)", re.IGNORECASE)


def policy_now(policy_text: str | None) -> str:
    """The policy's current time (τ² states it in the policy), else τ²'s frozen clock."""
    match = _NOW_IN_POLICY.search(policy_text or "")
    if not match:
        return TAU2_NOW
    clock = match.group(2) if match.group(2).count(":") == 2 else match.group(2) + ":00"
    return f"{match.group(1)}T{clock}"


@dataclass
class World:
    """Records the agent had seen at one point of the episode (later reads replace earlier ones)."""

    now: str = TAU2_NOW
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    reservations: dict[str, dict[str, Any]] = field(default_factory=dict)
    flights: dict[str, dict[str, Any]] = field(default_factory=dict)
    orders: dict[str, dict[str, Any]] = field(default_factory=dict)
    products: dict[str, dict[str, Any]] = field(default_factory=dict)
    authenticated: set[str] = field(default_factory=set)
    searched: set[tuple[str, str]] = field(default_factory=set)  # (flight_number, date) seen as bookable
    statuses_checked: set[tuple[str, str]] = field(default_factory=set)

    @property
    def today(self) -> str:
        return self.now[:10]

    def flight_entry(self, number: str, date: str | None) -> dict[str, Any]:
        flight = self.flights.setdefault(number, {"flight_number": number, "dates": {}})
        return flight["dates"].setdefault(date, {}) if date else {}

    def see_reservation(self, record: dict[str, Any]) -> None:
        rid = record.get("reservation_id")
        if not isinstance(rid, str) or not isinstance(record.get("flights"), list):
            return
        self.reservations[rid] = record
        for segment in record["flights"]:
            if not isinstance(segment, dict) or not isinstance(segment.get("flight_number"), str):
                continue
            flight = self.flights.setdefault(segment["flight_number"], {"flight_number": segment["flight_number"], "dates": {}})
            for key in ("origin", "destination"):
                if isinstance(segment.get(key), str):
                    flight.setdefault(key, segment[key])
            date = segment.get("date")
            if isinstance(date, str) and date < self.today:
                flight["dates"].setdefault(date, {}).setdefault("status", "landed")

    def see_flight(self, record: dict[str, Any], date: str | None) -> None:
        number = record.get("flight_number")
        if not isinstance(number, str):
            return
        flight = self.flights.setdefault(number, {"flight_number": number, "dates": {}})
        for key in ("origin", "destination", "scheduled_departure_time_est", "scheduled_arrival_time_est"):
            if key in record:
                flight[key] = record[key]
        day = record.get("date") if isinstance(record.get("date"), str) else date
        if day:
            entry = flight["dates"].setdefault(day, {})
            for key in ("status", "available_seats", "prices"):
                if key in record:
                    entry[key] = record[key]
            self.searched.add((number, day))

    def apply(self, call: AgentCall) -> None:
        """Take in one successful call's result."""
        if not call.succeeded:
            return
        args = call.arguments or {}
        result = call.result_json()
        name = call.name
        if name == "get_user_details" and isinstance(result, dict):
            uid = result.get("user_id") or args.get("user_id")
            if isinstance(uid, str):
                self.users[uid] = result
        elif name in ("find_user_id_by_email", "find_user_id_by_name_zip") and isinstance(result, str):
            self.authenticated.add(result.strip().strip('"'))
        elif name == "get_reservation_details" and isinstance(result, dict):
            self.see_reservation(result)
        elif name == "get_flight_status" and isinstance(result, str):
            number, date = args.get("flight_number"), args.get("date")
            if isinstance(number, str) and isinstance(date, str):
                self.flight_entry(number, date)["status"] = result.strip().strip('"')
                self.statuses_checked.add((number, date))
        elif name in ("search_direct_flight", "search_onestop_flight") and isinstance(result, list):
            for item in result:
                for leg in item if isinstance(item, list) else [item]:
                    if isinstance(leg, dict):
                        self.see_flight(leg, args.get("date"))
        elif name == "get_order_details" and isinstance(result, dict) and isinstance(result.get("order_id"), str):
            self.orders[result["order_id"]] = result
        elif name == "get_product_details" and isinstance(result, dict) and isinstance(result.get("product_id"), str):
            self.products[result["product_id"]] = result
        elif name == "get_item_details" and isinstance(result, dict) and isinstance(result.get("product_id"), str):
            product = self.products.setdefault(result["product_id"], {"product_id": result["product_id"], "variants": {}})
            if isinstance(result.get("item_id"), str):
                product.setdefault("variants", {})[result["item_id"]] = result
        elif isinstance(result, dict):  # a write returns the record it changed
            if isinstance(result.get("reservation_id"), str):
                self.see_reservation(result)
            elif isinstance(result.get("order_id"), str):
                self.orders[result["order_id"]] = result
            elif isinstance(result.get("user_id"), str) and "payment_methods" in result:
                self.users[result["user_id"]] = result

    def snapshot(self) -> "World":
        return copy.deepcopy(self)


def worlds_before(calls: list[AgentCall], positions: set[int], now: str) -> dict[int, World]:
    """The world as seen just before each call in ``positions`` (one pass, copies only where asked)."""
    world = World(now=now)
    out: dict[int, World] = {}
    for call in calls:
        if call.position in positions:
            out[call.position] = world.snapshot()
        world.apply(call)
    return out


def is_before_today(date: str | None, now: str) -> bool:
    return isinstance(date, str) and date < now[:10]


def hours_between(earlier: str, later: str) -> float | None:
    try:
        return (dt.datetime.fromisoformat(later) - dt.datetime.fromisoformat(earlier)).total_seconds() / 3600
    except (TypeError, ValueError):
        return None
