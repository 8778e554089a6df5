"""Seeded τ² airline databases: users, flights and reservations in the real ``db.json`` record shapes.

:class:`AirlineWorld` builds one scenario's database from an env's seeded ``rng`` and a chosen "now". What it
builds agrees with itself the way the real data does: flight statuses follow the clock (landed, flying, on
time or delayed today, available with seats and prices later), a booking's price is its fares times its
passengers plus paid bags and insurance, and payments use the user's saved methods as booking allows.
"""

from __future__ import annotations

import copy
import datetime

from trace_env.kits.tau2_airline.policy import BAG_FEE, FREE_BAGS, INSURANCE_PER_PASSENGER

__all__ = [
    "AIRPORTS",
    "AirlineWorld",
    "BRAND_LABEL",
    "CABINS",
    "CABIN_LABEL",
    "CARD_BRANDS",
    "CITY",
    "FIRST_NAMES",
    "LAST_NAMES",
    "PRICE_RANGE",
    "TAU2_NOW",
    "WINDOW",
    "clock",
    "describe_trip",
    "payment_words",
    "scenario_now",
    "stamp",
]

#: τ²'s frozen clock (its policy: "The current time is 2024-05-15 15:00:00 EST").
TAU2_NOW = datetime.datetime(2024, 5, 15, 15, 0)

AIRPORTS = [
    ("SFO", "San Francisco"), ("JFK", "New York"), ("LAX", "Los Angeles"), ("ORD", "Chicago"),
    ("DFW", "Dallas"), ("DEN", "Denver"), ("SEA", "Seattle"), ("ATL", "Atlanta"), ("MIA", "Miami"),
    ("BOS", "Boston"), ("PHX", "Phoenix"), ("IAH", "Houston"), ("LAS", "Las Vegas"), ("MCO", "Orlando"),
    ("EWR", "Newark"), ("CLT", "Charlotte"), ("MSP", "Minneapolis"), ("DTW", "Detroit"),
    ("PHL", "Philadelphia"), ("LGA", "LaGuardia"),
]
CITY = dict(AIRPORTS)
FIRST_NAMES = [
    "Mia", "Raj", "Sofia", "Omar", "Chen", "Lucas", "Amelia", "Yusuf", "Fatima", "Ivan", "Aarav", "Noah",
    "Olivia", "Mei", "Ethan", "Isabella", "Mohamed", "Harper", "Daiki", "Lei", "Emma", "Juan", "Anya",
    "Kenji", "Sara", "James", "Nia", "Mateo", "Priya", "Liam", "Zoe", "Amir", "Chloe", "Hiroshi", "Aisha",
]
LAST_NAMES = [
    "Li", "Sanchez", "Kim", "Patel", "Garcia", "Nguyen", "Rossi", "Ahmed", "Martin", "Silva", "Jackson",
    "Ito", "Brown", "Lopez", "Muller", "Khan", "Wilson", "Taylor", "Moore", "Lee", "Hernandez", "Smith",
    "Johansson", "Davis", "Thomas", "Anderson", "Gonzalez", "Wright", "Kovacs", "Okafor",
]
CARD_BRANDS = ["visa", "mastercard", "amex", "discover"]
BRAND_LABEL = {"visa": "Visa card", "mastercard": "Mastercard", "amex": "Amex card", "discover": "Discover card"}
STREETS = ["Maple Drive", "Sunset Boulevard", "Oak Lane", "Hillcrest Road", "Elm Street", "Lakeview Avenue"]
HOME_CITIES = [("Austin", "TX", "787"), ("Denver", "CO", "802"), ("Seattle", "WA", "981"),
               ("Boston", "MA", "021"), ("Phoenix", "AZ", "850"), ("Chicago", "IL", "606"), ("Miami", "FL", "331")]
CABINS = ["basic_economy", "economy", "business"]
CABIN_LABEL = {"basic_economy": "basic economy", "economy": "economy", "business": "business"}
#: Fare per passenger and leg, by cabin (the real data's ranges are wider; these keep sums readable).
PRICE_RANGE = {"basic_economy": (50, 100), "economy": (100, 200), "business": (200, 500)}
WINDOW = range(-5, 21)  # flight dates exist from 5 days before "now" to 20 days after
ID_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def stamp(moment: datetime.datetime) -> str:
    """The database's timestamp spelling: ``2024-05-15T15:00:00``."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S")


def clock(minutes: int) -> str:
    """Minutes after midnight -> ``HH:MM:SS``, with ``+1`` when the time falls on the next day."""
    suffix = "+1" if minutes >= 24 * 60 else ""
    minutes %= 24 * 60
    return f"{minutes // 60:02d}:{minutes % 60:02d}:00{suffix}"


def scenario_now(rng) -> datetime.datetime:
    """A moment for a scenario: τ²'s frozen clock 30% of the time, else a weekday hour in April to June 2024,
    so an agent learns to read the clock from the prompt."""
    if rng.random() < 0.3:
        return TAU2_NOW
    return datetime.datetime(2024, rng.choice([4, 5, 6]), rng.randint(6, 24), rng.randint(9, 18),
                             rng.choice([0, 10, 15, 30, 40, 45]))


def describe_trip(reservation: dict) -> str:
    """How a user names a reservation without its code: ``"Denver to Boston trip on May 7"``."""
    first = datetime.date.fromisoformat(reservation["flights"][0]["date"])
    return (f"{CITY[reservation['origin']]} to {CITY[reservation['destination']]} trip on "
            f"{first.strftime('%B ')}{first.day}")


def payment_words(method: dict) -> str:
    """How a user names a saved payment method: ``"my Visa card ending in 7447"``, ``"my gift card"``."""
    if method["source"] == "credit_card":
        return f"my {BRAND_LABEL[method['brand']]} ending in {method['last_four']}"
    return "my gift card" if method["source"] == "gift_card" else "my travel certificate"


class AirlineWorld:
    """Seeded construction of one scenario's airline database.

    ``rng`` is the env's ``self.rng(seed)``; ``now`` is the scenario's current time. Build users, flights
    and reservations, then take ``state(user)``: ``{"users", "reservations", "flights"}`` as in τ².
    """

    def __init__(self, rng, now: datetime.datetime) -> None:
        self.rng = rng
        self.now = now
        self.today = now.date()
        self.flights: dict = {}
        self.reservations: dict = {}
        self.schedule: dict = {}  # flight number -> (departure minute, duration in minutes)
        self.used: set = set()

    # --- identifiers ---------------------------------------------------------------------------
    def reservation_id(self) -> str:
        while True:
            rid = "".join(self.rng.choice(ID_CHARS) for _ in range(6))
            if rid not in self.used and not rid.isdigit():
                self.used.add(rid)
                return rid

    def payment_id(self, source: str) -> str:
        while True:
            pid = f"{source}_{self.rng.randint(1000000, 9999999)}"
            if pid not in self.used:
                self.used.add(pid)
                return pid

    def flight_number(self) -> str:
        while True:
            number = f"HAT{self.rng.randint(1, 299):03d}"
            if number not in self.used:
                self.used.add(number)
                return number

    # --- people --------------------------------------------------------------------------------
    def person(self, last_name: str | None = None) -> dict:
        """A passenger record: first name, last name, date of birth."""
        year = self.rng.randint(1950, 2004)
        return {"first_name": self.rng.choice(FIRST_NAMES), "last_name": last_name or self.rng.choice(LAST_NAMES),
                "dob": f"{year}-{self.rng.randint(1, 12):02d}-{self.rng.randint(1, 28):02d}"}

    def user(self) -> dict:
        """A user with one or two credit cards, maybe gift cards and certificates, and a membership tier."""
        rng = self.rng
        me = self.person()
        user_id = f"{me['first_name'].lower()}_{me['last_name'].lower()}_{rng.randint(100, 9999)}"
        methods = {}
        for _ in range(rng.choice([1, 1, 2])):
            pid = self.payment_id("credit_card")
            methods[pid] = {"source": "credit_card", "id": pid, "brand": rng.choice(CARD_BRANDS),
                            "last_four": f"{rng.randint(0, 9999):04d}"}
        for source, count in (("gift_card", rng.choice([0, 1, 1, 2])), ("certificate", rng.choice([0, 0, 1, 2]))):
            for _ in range(count):
                pid = self.payment_id(source)
                methods[pid] = {"source": source, "id": pid, "amount": float(rng.randrange(20, 501, 5))}
        city, state, zip_prefix = rng.choice(HOME_CITIES)
        return {
            "user_id": user_id,
            "name": {"first_name": me["first_name"], "last_name": me["last_name"]},
            "address": {"address1": f"{rng.randint(10, 9999)} {rng.choice(STREETS)}", "address2": "",
                        "city": city, "country": "USA", "state": state, "zip": f"{zip_prefix}{rng.randint(10, 99)}"},
            "email": f"{me['first_name'].lower()}.{me['last_name'].lower()}{rng.randint(10, 9999)}@example.com",
            "dob": me["dob"],
            "payment_methods": methods,
            "saved_passengers": [self.person() for _ in range(rng.randint(0, 2))],
            "membership": rng.choice(["regular", "regular", "silver", "gold"]),
            "reservations": [],
        }

    # --- flights -------------------------------------------------------------------------------
    def flight(self, origin: str, destination: str, departure_minute: int | None = None) -> str:
        """A new flight with a status for every date in the window; returns its number."""
        rng = self.rng
        if departure_minute is None:
            departure_minute = rng.randrange(5 * 60, 22 * 60, 5)
        duration = rng.randrange(60, 331, 5)
        number = self.flight_number()
        dates = {}
        for offset in WINDOW:
            day = self.today + datetime.timedelta(days=offset)
            dates[day.isoformat()] = self.date_status(day, departure_minute, duration)
        self.flights[number] = {
            "flight_number": number, "origin": origin, "destination": destination,
            "scheduled_departure_time_est": clock(departure_minute),
            "scheduled_arrival_time_est": clock(departure_minute + duration), "dates": dates,
        }
        self.schedule[number] = (departure_minute, duration)
        return number

    def date_status(self, day: datetime.date, departure_minute: int, duration: int) -> dict:
        """The status record of one flight date, as the clock makes it."""
        rng = self.rng
        departure = datetime.datetime.combine(day, datetime.time()) + datetime.timedelta(minutes=departure_minute)
        arrival = departure + datetime.timedelta(minutes=duration)
        if arrival <= self.now:
            if rng.random() < 0.05:
                return {"status": "cancelled"}
            off = datetime.timedelta(minutes=rng.randint(-20, 40))
            landed = arrival + off + datetime.timedelta(minutes=rng.randint(-15, 15))
            return {"status": "landed", "actual_departure_time_est": stamp(departure + off),
                    "actual_arrival_time_est": stamp(landed)}
        if departure <= self.now:
            off = datetime.timedelta(minutes=rng.randint(-10, 30))
            return {"status": "flying", "actual_departure_time_est": stamp(departure + off),
                    "estimated_arrival_time_est": stamp(arrival + off)}
        if day == self.today:
            late = datetime.timedelta(minutes=rng.choice([0, 0, 0, 45, 90, 150]))
            return {"status": "delayed" if late else "on time", "estimated_departure_time_est": stamp(departure + late),
                    "estimated_arrival_time_est": stamp(arrival + late)}
        return {"status": "available", "available_seats": {cabin: rng.randint(0, 20) for cabin in CABINS},
                "prices": {cabin: rng.randint(*PRICE_RANGE[cabin]) for cabin in CABINS}}

    def settle_departed(self, number: str, day: str) -> None:
        """A booked flight that has left really flew: re-roll a random past cancellation away."""
        departure_minute, duration = self.schedule[number]
        entry = self.flights[number]["dates"][day]
        while entry["status"] == "cancelled":
            entry = self.date_status(datetime.date.fromisoformat(day), departure_minute, duration)
        self.flights[number]["dates"][day] = entry

    def reschedule(self, reservation: dict) -> tuple[int, str]:
        """A segment of a future reservation and a new date for it within the window that keeps the outbound
        flight before the return: ``(segment index, new ISO date)``."""
        flights = reservation["flights"]
        tomorrow = self.today + datetime.timedelta(days=1)
        last = self.today + datetime.timedelta(days=WINDOW[-1])
        options: list = []
        for index in self.rng.sample(range(len(flights)), len(flights)):
            low = tomorrow if index == 0 else datetime.date.fromisoformat(flights[0]["date"]) + datetime.timedelta(days=1)
            high = last if index == len(flights) - 1 else (
                datetime.date.fromisoformat(flights[1]["date"]) - datetime.timedelta(days=1))
            days = [low + datetime.timedelta(days=k) for k in range(max(0, (high - low).days + 1))]
            options = [(index, d.isoformat()) for d in days if d.isoformat() != flights[index]["date"]]
            if options:
                break
        return self.rng.choice(options)

    def flight_change(self, reservation: dict) -> dict:
        """Move one segment of a future reservation to another date (seats guaranteed): the segment, the new date,
        old and new fare, ``price_delta`` (what the change costs all passengers; negative: refund), the full
        ``new_flights`` argument of ``update_reservation_flights`` and the segment's ``route``."""
        index, new_date = self.reschedule(reservation)
        leg = reservation["flights"][index]
        passengers = len(reservation["passengers"])
        self.ensure_seats(leg["flight_number"], new_date, reservation["cabin"], passengers)
        new_price = self.flights[leg["flight_number"]]["dates"][new_date]["prices"][reservation["cabin"]]
        return {"segment": {"flight_number": leg["flight_number"], "date": leg["date"]}, "new_date": new_date,
                "old_price": leg["price"], "new_price": new_price, "price_delta": (new_price - leg["price"]) * passengers,
                "new_flights": [{"flight_number": f["flight_number"], "date": new_date if f is leg else f["date"]}
                                for f in reservation["flights"]], "route": [leg["origin"], leg["destination"]]}

    def copy_route(self, reservation: dict, model: dict) -> None:
        """Give ``reservation`` (and its flights) the route of ``model``: two trips only their dates tell apart."""
        for index, leg in enumerate(reservation["flights"]):
            ends = (model["origin"], model["destination"]) if index == 0 else (model["destination"], model["origin"])
            leg["origin"], leg["destination"] = ends
            self.flights[leg["flight_number"]]["origin"], self.flights[leg["flight_number"]]["destination"] = ends
        reservation["origin"], reservation["destination"] = model["origin"], model["destination"]

    def ensure_seats(self, number: str, day: str, cabin: str, needed: int) -> None:
        """At least ``needed`` free seats in ``cabin`` on an available flight date."""
        seats = self.flights[number]["dates"][day]["available_seats"]
        seats[cabin] = max(seats[cabin], needed + self.rng.randint(0, 6))

    # --- reservations --------------------------------------------------------------------------
    def reservation(self, user: dict, *, cabin: str, trip: str, timing: str, created: str, insurance: str,
                    passengers: int | None = None) -> dict:
        """Book a reservation for ``user`` (added to their profile) and return it.

        timing: 'future' (every flight after today), 'today' (first flight later today), 'flown' (round trip
        whose outbound flight has already left), 'past' (the trip is over).
        created: 'recent' (< 24 h ago), 'near_miss' (24-47 h ago) or 'old' (days ago).
        """
        rng = self.rng
        if timing in ("flown", "past"):
            created = "old"  # a booking is always made before its first flight leaves
        origin, destination = rng.sample([code for code, _ in AIRPORTS], 2)
        now_minute = self.now.hour * 60 + self.now.minute
        first_minute = None
        if timing == "future":
            first_day = self.today + datetime.timedelta(days=rng.randint(1, 12))
        elif timing == "today":
            first_day = self.today
            first_minute = rng.randrange(now_minute + 120, 23 * 60, 5)
        elif timing == "flown":
            if rng.random() < 0.7:
                first_day = self.today - datetime.timedelta(days=rng.randint(1, 4))
            else:  # left earlier today: landed or still in the air
                first_day = self.today
                first_minute = rng.randrange(5 * 60, now_minute - 60, 5)
        else:
            first_day = self.today - datetime.timedelta(days=rng.randint(3, 5))
        legs = [(origin, destination, first_day, first_minute)]
        if trip == "round_trip":
            return_day = first_day + datetime.timedelta(days=rng.randint(1, 6) if timing != "past" else rng.randint(1, 2))
            if timing == "flown" and return_day <= self.today:
                return_day = self.today + datetime.timedelta(days=rng.randint(1, 5))
            legs.append((destination, origin, return_day, None))
        count = passengers or rng.choice([1, 1, 1, 2, 2, 3, 4])
        flights = []
        for leg_origin, leg_destination, day, minute in legs:
            number = self.flight(leg_origin, leg_destination, minute)
            if day < self.today or (timing == "flown" and day == self.today):
                self.settle_departed(number, day.isoformat())
            flights.append({"origin": leg_origin, "destination": leg_destination, "flight_number": number,
                            "date": day.isoformat(), "price": rng.randint(*PRICE_RANGE[cabin])})
        first_departure = datetime.datetime.combine(first_day, datetime.time()) + datetime.timedelta(
            minutes=self.schedule[flights[0]["flight_number"]][0])
        if created == "recent":
            booked = self.now - datetime.timedelta(minutes=rng.randint(20, 23 * 60 + 40))
        elif created == "near_miss":
            booked = self.now - datetime.timedelta(minutes=rng.randint(24 * 60 + 20, 47 * 60))
        else:
            booked = min(self.now, first_departure) - datetime.timedelta(days=rng.randint(2, 25),
                                                                         minutes=rng.randint(0, 1439))
        people = [self.person() for _ in range(count)]
        if rng.random() < 0.7:
            people[0] = {"first_name": user["name"]["first_name"], "last_name": user["name"]["last_name"],
                         "dob": user["dob"]}
        allowance = FREE_BAGS[user["membership"]][cabin] * count
        total_bags = rng.randint(0, 2 * count)
        nonfree = max(0, total_bags - allowance)
        total = sum(f["price"] for f in flights) * count + BAG_FEE * nonfree
        total += INSURANCE_PER_PASSENGER * count if insurance == "yes" else 0
        rid = self.reservation_id()
        record = {
            "reservation_id": rid, "user_id": user["user_id"], "origin": origin, "destination": destination,
            "flight_type": trip, "cabin": cabin, "flights": flights, "passengers": people,
            "payment_history": self.payments(user, total),
            "created_at": stamp(booked.replace(second=rng.randint(0, 59))),
            "total_baggages": total_bags, "nonfree_baggages": nonfree, "insurance": insurance, "status": None,
        }
        self.reservations[rid] = record
        user["reservations"].append(rid)
        return record

    def payments(self, user: dict, total: int) -> list[dict]:
        """Split a booking's price over the user's saved methods the way booking allows."""
        rng = self.rng
        methods = list(user["payment_methods"].values())
        cards = [m for m in methods if m["source"] == "credit_card"]
        gifts = [m for m in methods if m["source"] == "gift_card"]
        certificates = [m for m in methods if m["source"] == "certificate"]
        roll = rng.random()
        if certificates and roll < 0.2:
            part = min(total - 1, rng.randrange(50, 301, 50))
            return [{"payment_id": rng.choice(certificates)["id"], "amount": part},
                    {"payment_id": rng.choice(cards)["id"], "amount": total - part}]
        if gifts and roll < 0.45:
            return [{"payment_id": rng.choice(gifts)["id"], "amount": total}]
        return [{"payment_id": rng.choice(cards)["id"], "amount": total}]

    def state(self, *users: dict) -> dict:
        """The database: ``{"users", "reservations", "flights"}`` (a copy; the world can be built on)."""
        return copy.deepcopy({"users": {user["user_id"]: user for user in users}, "reservations": self.reservations,
                              "flights": self.flights})
