"""The fourteen τ² airline tools, faithful to τ²: same results, same JSON, same error messages.

Each tool is a plain function over the database (``db`` first, then the tool's arguments) that returns what
τ² returns and raises :class:`~trace_env.sdk.ToolError` with τ²'s message where τ² raises. Results are fresh
copies in τ²'s field order, so ``json.dumps`` of a result is byte-identical to τ²'s tool message on the same
records. :class:`AirlineTools` wraps them as ``@sdk.tool`` methods: an env inherits it, lists the tools it
exposes in ``tool_names``, and overrides any one by defining a method of the same name.

Like τ², the write tools enforce ids, seats and payment only; the policy (who may cancel, basic economy,
...) is the agent's job and lives in :mod:`~trace_env.kits.tau2_airline.policy`.
"""

from __future__ import annotations

import copy

from trace_env.kits.calculator import calculate as calculate_expression
from trace_env.kits.tau2_airline.policy import BAG_FEE, INSURANCE_PER_PASSENGER, cancellation_refunds, price_flights
from trace_env.kits.tau2_airline.world import AIRPORTS
from trace_env.kits.toolkit import tool_mixin
from trace_env.sdk import ToolError

__all__ = [
    "AirlineTools",
    "READ_TOOLS",
    "TOOL_NAMES",
    "WRITE_TOOLS",
    "book_reservation",
    "calculate",
    "cancel_reservation",
    "get_flight_status",
    "get_reservation_details",
    "get_user_details",
    "list_all_airports",
    "search_direct_flight",
    "search_onestop_flight",
    "send_certificate",
    "transfer_to_human_agents",
    "update_reservation_baggages",
    "update_reservation_flights",
    "update_reservation_passengers",
]

WRITE_TOOLS = ("book_reservation", "cancel_reservation", "send_certificate", "update_reservation_baggages",
               "update_reservation_flights", "update_reservation_passengers")
READ_TOOLS = ("get_user_details", "get_reservation_details", "get_flight_status", "search_direct_flight",
              "search_onestop_flight", "list_all_airports")
TOOL_NAMES = READ_TOOLS + WRITE_TOOLS + ("calculate", "transfer_to_human_agents")
NEW_RESERVATION_IDS = ("HATHAT", "HATHAU", "HATHAV")
CERTIFICATE_IDS = ("certificate_3221322", "certificate_3221323", "certificate_3221324")
BOOKING_TIME = "2024-05-15T15:00:00"  # τ² stamps every new booking with its frozen clock


# --- records and their views -------------------------------------------------------------------
def user_record(db: dict, user_id: str) -> dict:
    if user_id not in db["users"]:
        raise ToolError(f"User {user_id} not found")
    return db["users"][user_id]


def reservation_record(db: dict, reservation_id: str) -> dict:
    if reservation_id not in db["reservations"]:
        raise ToolError(f"Reservation {reservation_id} not found")
    return db["reservations"][reservation_id]


def flight_date(db: dict, flight_number: str, date: str) -> dict:
    if flight_number not in db["flights"]:
        raise ToolError(f"Flight {flight_number} not found")
    dates = db["flights"][flight_number]["dates"]
    if date not in dates:
        raise ToolError(f"Flight {flight_number} not found on date {date}")
    return dates[date]


def reservation_view(reservation: dict) -> dict:
    """A reservation in τ²'s field order (``status`` is null until cancelled)."""
    keys = ("reservation_id", "user_id", "origin", "destination", "flight_type", "cabin")
    view = {key: reservation[key] for key in keys}
    view["flights"] = [{key: s[key] for key in ("flight_number", "origin", "destination", "date", "price")}
                       for s in reservation["flights"]]
    for key in ("passengers", "payment_history", "created_at", "total_baggages", "nonfree_baggages", "insurance"):
        view[key] = copy.deepcopy(reservation[key])
    view["status"] = reservation.get("status")
    return view


def user_view(user: dict) -> dict:
    view = copy.deepcopy(user)
    view["address"].setdefault("address2", None)
    keys = ("user_id", "name", "address", "email", "dob", "payment_methods", "saved_passengers", "membership",
            "reservations")
    return {key: view[key] for key in keys}


def flight_view(flight: dict, entry: dict, date=None) -> dict:
    return {"flight_number": flight["flight_number"], "origin": flight["origin"], "destination": flight["destination"],
            "status": "available", "scheduled_departure_time_est": flight["scheduled_departure_time_est"],
            "scheduled_arrival_time_est": flight["scheduled_arrival_time_est"], "date": date,
            "available_seats": dict(entry["available_seats"]), "prices": dict(entry["prices"])}


def available_flights(db: dict, date: str, origin=None, destination=None, leave_after=None, shown_date=None) -> list:
    found = []
    for flight in db["flights"].values():
        entry = flight["dates"].get(date)
        if not entry or entry.get("status") != "available":
            continue
        if (origin is not None and flight["origin"] != origin) or (
                destination is not None and flight["destination"] != destination):
            continue
        if leave_after is not None and flight["scheduled_departure_time_est"] < leave_after:
            continue
        found.append(flight_view(flight, entry, shown_date))
    return found


def charge(user: dict, payment_id: str, amount: int) -> dict | None:
    """Payment for an update: a saved method, not a certificate, enough gift-card balance."""
    if payment_id not in user["payment_methods"]:
        raise ToolError("Payment method not found")
    method = user["payment_methods"][payment_id]
    if method["source"] == "certificate":
        raise ToolError("Certificate cannot be used to update reservation")
    if method["source"] == "gift_card" and method["amount"] < amount:
        raise ToolError("Gift card balance is not enough")
    if method["source"] == "gift_card":
        method["amount"] -= amount
    return {"payment_id": payment_id, "amount": amount} if amount != 0 else None


# --- the tools -----------------------------------------------------------------------------------
def get_user_details(db: dict, user_id: str) -> dict:
    return user_view(user_record(db, user_id))


def get_reservation_details(db: dict, reservation_id: str) -> dict:
    return reservation_view(reservation_record(db, reservation_id))


def get_flight_status(db: dict, flight_number: str, date: str) -> str:
    return str(flight_date(db, flight_number, date)["status"])


def search_direct_flight(db: dict, origin: str, destination: str, date: str) -> list:
    return available_flights(db, date, origin=origin, destination=destination)


def search_onestop_flight(db: dict, origin: str, destination: str, date: str) -> list:
    """Two-leg trips. As in τ², the second leg's next-day date is ``2024-05-<day + 1>`` (May only)."""
    trips = []
    for first in available_flights(db, date, origin=origin, shown_date=date):
        second_date = f"2024-05-{int(date[-2:]) + 1}" if "+1" in first["scheduled_arrival_time_est"] else date
        for second in available_flights(db, second_date, origin=first["destination"], destination=destination,
                                        leave_after=first["scheduled_arrival_time_est"], shown_date=second_date):
            trips.append([first, second])
    return trips


def list_all_airports(db: dict | None = None) -> list:
    return [{"iata": code, "city": city} for code, city in AIRPORTS]


def calculate(db: dict | None, expression: str) -> str:
    return calculate_expression(expression)


def transfer_to_human_agents(db: dict | None, summary: str) -> str:
    return "Transfer successful"


def book_reservation(db: dict, user_id: str, origin: str, destination: str, flight_type: str, cabin: str,
                     flights: list, passengers: list, payment_methods: list, total_baggages: int,
                     nonfree_baggages: int, insurance: str) -> dict:
    user = user_record(db, user_id)
    reservation_id = next((rid for rid in NEW_RESERVATION_IDS if rid not in db["reservations"]), None)
    if reservation_id is None:
        raise ToolError("Too many reservations")
    segments, entries, total = [], [], 0
    for info in flights:
        number, day = info["flight_number"], info["date"]
        entry = flight_date(db, number, day)
        if entry.get("status") != "available":
            raise ToolError(f"Flight {number} not available on date {day}")
        if entry["available_seats"][cabin] < len(passengers):
            raise ToolError(f"Not enough seats on flight {number}")
        flight = db["flights"][number]
        segments.append({"flight_number": number, "origin": flight["origin"], "destination": flight["destination"],
                         "date": day, "price": entry["prices"][cabin]})
        entries.append(entry)
        total += entry["prices"][cabin] * len(passengers)
    total += INSURANCE_PER_PASSENGER * len(passengers) if insurance == "yes" else 0
    total += BAG_FEE * nonfree_baggages
    for payment in payment_methods:
        method = user["payment_methods"].get(payment["payment_id"])
        if method is None:
            raise ToolError(f"Payment method {payment['payment_id']} not found")
        if method["source"] in ("gift_card", "certificate") and method["amount"] < payment["amount"]:
            raise ToolError(f"Not enough balance in payment method {payment['payment_id']}")
    paid = sum(payment["amount"] for payment in payment_methods)
    if paid != total:
        raise ToolError(f"Payment amount does not add up, total price is {total}, but paid {paid}")
    for payment in payment_methods:
        method = user["payment_methods"][payment["payment_id"]]
        if method["source"] == "gift_card":
            method["amount"] -= payment["amount"]
        elif method["source"] == "certificate":
            user["payment_methods"].pop(payment["payment_id"])
    for entry in entries:
        entry["available_seats"][cabin] -= len(passengers)
    reservation = {
        "reservation_id": reservation_id, "user_id": user_id, "origin": origin, "destination": destination,
        "flight_type": flight_type, "cabin": cabin, "flights": segments, "passengers": copy.deepcopy(passengers),
        "payment_history": copy.deepcopy(payment_methods), "created_at": BOOKING_TIME,
        "total_baggages": total_baggages, "nonfree_baggages": nonfree_baggages, "insurance": insurance, "status": None,
    }
    db["reservations"][reservation_id] = reservation
    user["reservations"].append(reservation_id)
    return reservation_view(reservation)


def cancel_reservation(db: dict, reservation_id: str) -> dict:
    reservation = reservation_record(db, reservation_id)
    reservation["payment_history"].extend(cancellation_refunds(reservation))
    reservation["status"] = "cancelled"
    return reservation_view(reservation)


def update_reservation_flights(db: dict, reservation_id: str, cabin: str, flights: list, payment_id: str) -> dict:
    reservation = reservation_record(db, reservation_id)
    user = user_record(db, reservation["user_id"])
    segments, amount = price_flights(db, reservation, cabin, flights)
    payment = charge(user, payment_id, amount)
    if payment is not None:
        reservation["payment_history"].append(payment)
    reservation["flights"] = segments
    reservation["cabin"] = cabin
    return reservation_view(reservation)


def update_reservation_baggages(db: dict, reservation_id: str, total_baggages: int, nonfree_baggages: int,
                                payment_id: str) -> dict:
    reservation = reservation_record(db, reservation_id)
    user = user_record(db, reservation["user_id"])
    payment = charge(user, payment_id, BAG_FEE * max(0, nonfree_baggages - reservation["nonfree_baggages"]))
    if payment is not None:
        reservation["payment_history"].append(payment)
    reservation["total_baggages"] = total_baggages
    reservation["nonfree_baggages"] = nonfree_baggages
    return reservation_view(reservation)


def update_reservation_passengers(db: dict, reservation_id: str, passengers: list) -> dict:
    reservation = reservation_record(db, reservation_id)
    cleaned = []
    for person in passengers:  # τ² keeps exactly these three fields of each passenger
        values = [person.get(key) for key in ("first_name", "last_name", "dob")]
        if not all(isinstance(value, str) for value in values):
            raise ToolError("Each passenger needs first_name, last_name and dob")
        cleaned.append(dict(zip(("first_name", "last_name", "dob"), values)))
    if len(cleaned) != len(reservation["passengers"]):
        raise ToolError("Number of passengers does not match")
    reservation["passengers"] = cleaned
    return reservation_view(reservation)


def send_certificate(db: dict, user_id: str, amount) -> str:
    user = user_record(db, user_id)
    for certificate_id in CERTIFICATE_IDS:
        if certificate_id not in user["payment_methods"]:
            user["payment_methods"][certificate_id] = {"source": "certificate", "id": certificate_id,
                                                       "amount": float(amount)}
            return f"Certificate {certificate_id} added to user {user_id} with amount {amount}."
    raise ToolError("Too many certificates")


AirlineTools = tool_mixin("AirlineTools", [
    get_user_details, get_reservation_details, get_flight_status, search_direct_flight, search_onestop_flight,
    list_all_airports, calculate, transfer_to_human_agents, book_reservation, cancel_reservation,
    update_reservation_flights, update_reservation_baggages, update_reservation_passengers, send_certificate,
], """Mixin: every τ² airline tool as an ``@sdk.tool`` method. Expose a subset with ``tool_names``; override
one by defining a method of the same name in the env.""")
