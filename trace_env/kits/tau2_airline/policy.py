"""The τ² airline policy as pure functions over real ``db.json`` records.

τ²'s write tools check almost nothing (``cancel_reservation`` cancels anything); the rules live in the
agent's policy (``policy.md``). These functions state them once, over the record shapes of the real
database (a reservation from ``db["reservations"]``, the flight table ``db["flights"]``, a user from
``db["users"]``), so envs grade against them and ``factory analyze`` can check real trajectories with them.
Times are τ²'s naive EST strings (``"2024-05-15T15:00:00"``) or ``datetime`` objects; the default "now" is
τ²'s frozen clock. Plain stdlib, importable on the host.

Reading of the policy where it is terse (say so when grading):
- "booked within the last 24 hrs": ``now - created_at <= 24 h``.
- "any portion of the flight has already been flown": a segment whose flight date has status ``flying`` or
  ``landed``.
- "flight cancelled by airline": a segment whose flight date has status ``cancelled`` in the database (the
  user's word is not enough).
"""

from __future__ import annotations

import datetime
from dataclasses import asdict, dataclass, field

from trace_env.sdk import ToolError

__all__ = [
    "BAG_FEE",
    "COVERED_REASONS",
    "CancellationCheck",
    "FREE_BAGS",
    "INSURANCE_PER_PASSENGER",
    "MAX_PASSENGERS",
    "add_bags",
    "booked_within_24h",
    "booking_price",
    "cabin_change_problems",
    "cancellation_check",
    "cancellation_refunds",
    "compensation",
    "flight_change_problems",
    "flown_segments",
    "free_bags",
    "insurance_covers",
    "net_payments",
    "paid_total",
    "payment_problems",
    "price_flights",
    "segment_status",
    "to_time",
]

BAG_FEE = 50  # dollars per checked bag beyond the free allowance
INSURANCE_PER_PASSENGER = 30
MAX_PASSENGERS = 5
#: Free checked bags per passenger, by the booking user's membership and the cabin.
FREE_BAGS = {
    "regular": {"basic_economy": 0, "economy": 1, "business": 2},
    "silver": {"basic_economy": 1, "economy": 2, "business": 3},
    "gold": {"basic_economy": 2, "economy": 3, "business": 4},
}
#: Reasons for cancelling that travel insurance covers.
COVERED_REASONS = ("health", "weather")
FLOWN = ("flying", "landed")
#: Gesture certificates per passenger, by what the user complains about (only for eligible users).
COMPENSATION_PER_PASSENGER = {"cancelled": 100, "delayed": 50}
TAU2_NOW = "2024-05-15T15:00:00"


def to_time(value) -> datetime.datetime:
    """A ``datetime`` from a datetime or an ISO string such as ``"2024-05-15T15:00:00"``."""
    return value if isinstance(value, datetime.datetime) else datetime.datetime.fromisoformat(str(value))


def segment_status(segment: dict, flights: dict) -> str | None:
    """Status of one reservation segment on its date (``available``, ``landed``, ...); None if unknown."""
    entry = flights.get(segment["flight_number"], {}).get("dates", {}).get(segment["date"])
    return entry.get("status") if entry else None


def flown_segments(reservation: dict, flights: dict) -> list[dict]:
    """Segments that have taken off (``flying``) or landed: once one exists the trip cannot be cancelled."""
    return [s for s in reservation["flights"] if segment_status(s, flights) in FLOWN]


def booked_within_24h(reservation: dict, now=TAU2_NOW) -> bool:
    """Whether the booking was made at most 24 hours before ``now``."""
    elapsed = to_time(now) - to_time(reservation["created_at"])
    return datetime.timedelta(0) <= elapsed <= datetime.timedelta(hours=24)


def insurance_covers(reason: str | None) -> bool:
    """Travel insurance refunds a cancellation only for health or weather reasons."""
    return reason in COVERED_REASONS


@dataclass
class CancellationCheck:
    """Which cancellation rules hold for one reservation; ``rule`` names the one that decides.

    ``rule`` is ``already_flown`` when a segment has flown (no cancellation, whatever else holds), else the
    first ground that allows it (``recent_booking``, ``airline_cancelled``, ``business_cabin``,
    ``insurance_covered``), else ``no_rule``.
    """

    flown: list = field(default_factory=list)
    recent_booking: bool = False
    airline_cancelled: list = field(default_factory=list)
    business_cabin: bool = False
    insurance_covered: bool = False

    @property
    def grounds(self) -> list[str]:
        held = {"recent_booking": self.recent_booking, "airline_cancelled": bool(self.airline_cancelled),
                "business_cabin": self.business_cabin, "insurance_covered": self.insurance_covered}
        return [name for name, holds in held.items() if holds]

    @property
    def eligible(self) -> bool:
        return not self.flown and bool(self.grounds)

    @property
    def rule(self) -> str:
        if self.flown:
            return "already_flown"
        return (self.grounds or ["no_rule"])[0]

    def to_dict(self) -> dict:
        return dict(asdict(self), grounds=self.grounds, eligible=self.eligible, rule=self.rule)


def cancellation_check(reservation: dict, flights: dict, now=TAU2_NOW, reason: str | None = None) -> CancellationCheck:
    """The policy's cancellation rules on one reservation. ``reason`` is the user's reason as a category
    (``health``, ``weather``, ``airline_cancelled``, a change of plans...); only the first two are covered."""
    return CancellationCheck(
        flown=flown_segments(reservation, flights),
        recent_booking=booked_within_24h(reservation, now),
        airline_cancelled=[s for s in reservation["flights"] if segment_status(s, flights) == "cancelled"],
        business_cabin=reservation["cabin"] == "business",
        insurance_covered=reservation.get("insurance") == "yes" and insurance_covers(reason),
    )


def flight_change_problems(reservation: dict, new_flights: list[dict], flights: dict) -> list[str]:
    """Rules a flight change breaks (empty: allowed): ``basic_economy`` (its flights cannot change),
    ``origin_changed``, ``destination_changed`` (the trip's ends and type must stay), ``unknown_flight``."""
    problems = []
    old = [(s["flight_number"], s["date"]) for s in reservation["flights"]]
    new = [(f.get("flight_number"), f.get("date")) for f in new_flights]
    if reservation["cabin"] == "basic_economy" and new != old:
        problems.append("basic_economy")
    records = [flights.get(number) for number, _ in new]
    if not new or any(record is None for record in records):
        return problems + ["unknown_flight"]
    if records[0]["origin"] != reservation["origin"]:
        problems.append("origin_changed")
    end = reservation["origin"] if reservation["flight_type"] == "round_trip" else reservation["destination"]
    reaches = any(r["destination"] == reservation["destination"] for r in records)
    if records[-1]["destination"] != end or not reaches:
        problems.append("destination_changed")
    return problems


def cabin_change_problems(reservation: dict, flights: dict) -> list[str]:
    """A cabin change (same flights) is refused once any segment has flown: ``already_flown``."""
    return ["already_flown"] if flown_segments(reservation, flights) else []


def price_flights(db: dict, reservation: dict, cabin: str, new_flights: list[dict]) -> tuple[list[dict], int]:
    """What ``update_reservation_flights`` would book and charge: (segments, amount; negative = refund).

    Kept segments (same flight, date and cabin) keep the price paid; new ones cost today's price in
    ``cabin``; the difference with the old fares is per passenger. Raises :class:`ToolError` exactly where
    the τ² tool does (unknown flight or date, not available, not enough seats).
    """
    passengers = len(reservation["passengers"])
    total, segments = 0, []
    for info in new_flights:
        number, day = info.get("flight_number"), info.get("date")
        if not isinstance(number, str) or not isinstance(day, str):
            raise ToolError("Each flight needs a flight_number and a date")
        kept = next((s for s in reservation["flights"] if s["flight_number"] == number and s["date"] == day
                     and cabin == reservation["cabin"]), None)
        if kept is not None:
            total += kept["price"] * passengers
            segments.append(kept)
            continue
        if number not in db["flights"]:
            raise ToolError(f"Flight {number} not found")
        flight = db["flights"][number]
        if day not in flight["dates"]:
            raise ToolError(f"Flight {number} not found on date {day}")
        entry = flight["dates"][day]
        if entry.get("status") != "available":
            raise ToolError(f"Flight {number} not available on date {day}")
        if entry["available_seats"][cabin] < passengers:
            raise ToolError(f"Not enough seats on flight {number}")
        price = entry["prices"][cabin]
        segments.append({"flight_number": number, "origin": flight["origin"], "destination": flight["destination"],
                         "date": day, "price": price})
        total += price * passengers
    return segments, total - sum(s["price"] for s in reservation["flights"]) * passengers


def free_bags(membership: str, cabin: str, passengers: int) -> int:
    """Free checked bags of a reservation: the per-passenger allowance times its passengers."""
    return FREE_BAGS[membership][cabin] * passengers


def add_bags(reservation: dict, membership: str, added: int) -> dict:
    """The ``update_reservation_baggages`` arguments and fee for adding ``added`` bags (bags are never removed):
    ``{"total_baggages", "nonfree_baggages", "fee"}``. ``membership`` is the booking user's."""
    allowance = free_bags(membership, reservation["cabin"], len(reservation["passengers"]))
    total = reservation["total_baggages"] + added
    nonfree = max(reservation["nonfree_baggages"], total - allowance)
    return {"total_baggages": total, "nonfree_baggages": nonfree,
            "fee": BAG_FEE * (nonfree - reservation["nonfree_baggages"])}


def booking_price(fares: list[int], passengers: int, insurance: str, nonfree_bags: int) -> int:
    """What ``book_reservation`` requires the payments to add up to."""
    total = sum(fares) * passengers + BAG_FEE * nonfree_bags
    return total + (INSURANCE_PER_PASSENGER * passengers if insurance == "yes" else 0)


def payment_problems(payments: list[dict], user: dict) -> list[str]:
    """Booking payment rules broken: a method not in the profile, more than one certificate, more than one
    credit card, more than three gift cards."""
    methods = user["payment_methods"]
    sources = [methods[p["payment_id"]]["source"] for p in payments if p["payment_id"] in methods]
    problems = ["not_in_profile"] if len(sources) < len(payments) else []
    limits = {"certificate": 1, "credit_card": 1, "gift_card": 3}
    return problems + [f"too_many_{source}s" for source, most in limits.items() if sources.count(source) > most]


def paid_total(reservation: dict) -> int:
    """Everything paid for a reservation (refunds excluded)."""
    return sum(p["amount"] for p in reservation["payment_history"] if p["amount"] > 0)


def net_payments(reservation: dict) -> dict:
    """Net amount per payment method after every payment and refund: ``{payment_id: amount}``."""
    net: dict = {}
    for payment in reservation["payment_history"]:
        net[payment["payment_id"]] = net.get(payment["payment_id"], 0) + payment["amount"]
    return net


def cancellation_refunds(reservation: dict) -> list[dict]:
    """The refunds ``cancel_reservation`` appends: every payment reversed to its original method."""
    return [{"payment_id": p["payment_id"], "amount": -p["amount"]} for p in reservation["payment_history"]]


def compensation(user: dict, reservation: dict, complaint: str) -> int:
    """The certificate the policy allows for a complaint about ``cancelled`` or ``delayed`` flights: 0 unless
    the user is silver/gold, has travel insurance or flies business; else $100 or $50 per passenger."""
    if complaint not in COMPENSATION_PER_PASSENGER:
        return 0
    eligible = (user["membership"] in ("silver", "gold") or reservation.get("insurance") == "yes"
                or reservation["cabin"] == "business")
    return COMPENSATION_PER_PASSENGER[complaint] * len(reservation["passengers"]) if eligible else 0
