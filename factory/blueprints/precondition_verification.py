"""Blueprint env: precondition verification on the tau2 airline target.

The airline's write tools do almost no checking of their own: ``cancel_reservation`` cancels and refunds
whatever it is given, and ``update_reservation_flights`` happily rebooks a basic-economy ticket. The policy
rules that decide whether such a request may be granted live only in the agent's instructions. This env
trains the habit of checking those rules against the records *before* writing.

Each scenario is one customer with several reservations who asks for one to three things: cancel a
reservation, or move a flight to another date. Every request is decided by exactly one policy rule, and
the scenario records which (``truth["requests"][i]["rule"]``). Eligible requests must be carried out;
ineligible ones must be refused with the deciding reason. Nearly every scenario contains at least one
ineligible request, so an agent that simply does what it is asked hits the forbidden-write gate.

Reading guide: constants and small helpers first, then the scenario generator, the prompt and the
simulated user, the tools (faithful to tau2's behaviour), the reward, and the two solutions.
"""

import copy
import datetime
import re

from env_registry import sdk

# --------------------------------------------------------------------------------------------------
# Domain constants
# --------------------------------------------------------------------------------------------------

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
CITIES = [("Austin", "TX", "787"), ("Denver", "CO", "802"), ("Seattle", "WA", "981"), ("Boston", "MA", "021"),
          ("Phoenix", "AZ", "850"), ("Chicago", "IL", "606"), ("Miami", "FL", "331")]

CABINS = ["basic_economy", "economy", "business"]
CABIN_LABEL = {"basic_economy": "basic economy", "economy": "economy", "business": "business"}
PRICE_RANGE = {"basic_economy": (50, 100), "economy": (100, 200), "business": (200, 500)}
# Free checked bags per passenger, by membership tier and cabin.
FREE_BAGS = {
    "regular": {"basic_economy": 0, "economy": 1, "business": 2},
    "silver": {"basic_economy": 1, "economy": 2, "business": 3},
    "gold": {"basic_economy": 2, "economy": 3, "business": 4},
}
INSURANCE_PER_PASSENGER = 30
BAG_FEE = 50
WINDOW = range(-5, 21)  # flight dates exist from 5 days ago to 20 days ahead
ID_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

# Why a user wants to cancel. Insurance covers only the "health" and "weather" categories.
REASON_TEXTS = {
    "personal": [
        "my plans changed and I no longer need to make this trip",
        "the conference I was going to has been moved online",
        "I found a schedule that works better for my family",
        "my work trip was called off",
        "the friends I was visiting can no longer host me",
    ],
    "health": [
        "I came down with a bad flu and my doctor told me not to travel",
        "I injured my knee and can't fly right now",
        "I need to have a small surgery that week",
        "I'm ill and not fit to travel",
    ],
    "weather": [
        "a major storm is forecast at my destination that week",
        "there's a hurricane warning for the area I'm flying to",
        "heavy snow has closed the roads around my destination",
    ],
    "airline_cancelled": [
        "the airline cancelled my flight",
        "I got a notice that my flight was cancelled",
        "I heard the flight was cancelled by you guys",
    ],
}
REASON_LABEL = {
    "personal": "a change of plans",
    "health": "a health reason",
    "weather": "bad weather",
    "airline_cancelled": "the airline cancelling the flight",
}
COVERED_REASONS = ("health", "weather")

ELIGIBLE_CANCEL_RULES = ["recent_booking", "airline_cancelled", "business_cabin", "insurance_covered"]
INELIGIBLE_CANCEL_RULES = ["already_flown", "insurance_not_covered", "airline_claim_unverified", "no_rule"]
INELIGIBLE_CANCEL_WEIGHTS = [25, 20, 20, 35]

# --- words the reward looks for in the agent's messages (after _normalise) -------------------------
REFUSAL_WORDS = [
    "cannot", "can't", "can not", "unable to", "not able to", "not eligible", "ineligible", "isn't eligible",
    "not possible", "won't be able", "not allowed", "not permitted", "does not qualify", "doesn't qualify",
    "not qualify", "must decline", "have to decline",
]
# For each deciding rule, groups of alternatives: the explanation must hit every group.
REASON_KEYWORDS = {
    "already_flown": [[
        "flown", "already departed", "has departed", "already taken off", "has taken off", "already flew",
        "already been used", "already travelled", "already traveled", "already landed", "has landed",
        "in the past", "already operated", "in the air", "in progress", "already left", "already took place",
    ]],
    "insurance_not_covered": [
        ["insurance"],
        ["health", "medical", "weather", "not covered", "isn't covered", "is not covered", "doesn't cover",
         "does not cover", "not a covered"],
    ],
    "airline_claim_unverified": [[
        "not been cancelled", "not cancelled", "hasn't been cancelled", "wasn't cancelled", "was not cancelled",
        "isn't cancelled", "is not cancelled", "still scheduled", "still operating", "scheduled to operate",
        "on schedule", "on time", "delayed", "still available", "no cancellation",
    ]],
    "no_rule": [
        ["24 hours", "24-hour", "24 hour", "twenty-four hours", "twenty four hours", "within a day"],
        ["insurance", "business"],
    ],
    "basic_economy": [["basic economy", "basic-economy", "basic_economy"]],
}
# A question is a request for confirmation when it has a question mark and one of these.
CONFIRM_PATTERN = (
    r"\b(confirm|proceed|go ahead|shall i|should i|would you like me to|do you want me to|"
    r"is that (?:ok|okay|correct|right)|may i)\b"
)

USER_ID_TRIGGERS = ["user id", "user-id", "userid", "account id", "username", "user name"]
REASON_TRIGGERS = ["reason", "why do", "why are", "why would", "may i ask why", "can i ask why"]
RESERVATION_TRIGGERS = ["reservation id", "reservation number", "reservation code", "booking reference",
                        "confirmation number", "booking code", "booking number", "booking id"]
# Narrow on purpose: "refunded to the original payment method" is a statement, not a question.
PAYMENT_TRIGGERS = ["which payment", "what payment", "which card", "payment method would you",
                    "payment method should", "payment method do you", "how would you like to pay",
                    "pay the difference", "charge the difference", "use for the fare", "use for the difference"]


# --------------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------------

def _normalise(text):
    """Lower-case text with one spelling of the words the reward looks for."""
    text = (text or "").lower().replace("\u2019", "'").replace("\u2018", "'")
    text = text.replace("canceled", "cancelled").replace("canceling", "cancelling")
    text = text.replace("cancelation", "cancellation").replace("\u2011", "-").replace("\u2013", "-")
    return re.sub(r"\s+", " ", text)


def _has_any(text, words):
    return any(word in text for word in words)


def _hits_groups(text, groups):
    return all(_has_any(text, group) for group in groups)


def _stamp(moment):
    return moment.strftime("%Y-%m-%dT%H:%M:%S")


def _nice_date(iso_day):
    day = datetime.date.fromisoformat(iso_day)
    return day.strftime("%B ") + str(day.day)


def _money(amount):
    return f"${amount:,}"


def _clock(minutes):
    """Minutes after midnight -> 'HH:MM:SS', with '+1' when the time falls on the next day."""
    suffix = "+1" if minutes >= 24 * 60 else ""
    minutes %= 24 * 60
    return f"{minutes // 60:02d}:{minutes % 60:02d}:00{suffix}"


def _refuses(text, reservation_id, several):
    """Whether a (normalised) message refuses something about this reservation: with several requests
    in play the message must name the reservation, so a refusal is tied to the right one."""
    return _has_any(text, REFUSAL_WORDS) and (not several or reservation_id.lower() in text)


def _paid_total(reservation):
    return sum(p["amount"] for p in reservation["payment_history"] if p["amount"] > 0)


def _net_by_method(reservation):
    net = {}
    for payment in reservation["payment_history"]:
        net[payment["payment_id"]] = net.get(payment["payment_id"], 0) + payment["amount"]
    return net


class _Builder:
    """Seeded construction of one scenario's database: users, flights and reservations that agree.

    Flight statuses follow the clock: dates whose flight has landed are 'landed', one in the air is
    'flying', later today is 'on time'/'delayed', later days are 'available' with seats and prices.
    """

    def __init__(self, rng, now):
        self.rng = rng
        self.now = now
        self.today = now.date()
        self.flights = {}
        self.reservations = {}
        self._numbers = set()
        self._reservation_ids = set()
        self._payment_ids = set()

    # --- identifiers ---------------------------------------------------------------------------
    def reservation_id(self):
        while True:
            rid = "".join(self.rng.choice(ID_CHARS) for _ in range(6))
            if rid not in self._reservation_ids and not rid.isdigit():
                self._reservation_ids.add(rid)
                return rid

    def payment_id(self, source):
        while True:
            pid = f"{source}_{self.rng.randint(1000000, 9999999)}"
            if pid not in self._payment_ids:
                self._payment_ids.add(pid)
                return pid

    def flight_number(self):
        while True:
            number = f"HAT{self.rng.randint(1, 299):03d}"
            if number not in self._numbers:
                self._numbers.add(number)
                return number

    # --- people --------------------------------------------------------------------------------
    def person(self, last_name=None):
        year = self.rng.randint(1950, 2004)
        return {
            "first_name": self.rng.choice(FIRST_NAMES),
            "last_name": last_name or self.rng.choice(LAST_NAMES),
            "dob": f"{year}-{self.rng.randint(1, 12):02d}-{self.rng.randint(1, 28):02d}",
        }

    def user(self):
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
        city, state, zip_prefix = rng.choice(CITIES)
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
    def flight(self, origin, destination, departure_minute=None):
        """A new flight with a status for every date in the window; returns its number."""
        rng = self.rng
        if departure_minute is None:
            departure_minute = rng.randrange(5 * 60, 22 * 60, 5)
        duration = rng.randrange(60, 331, 5)
        number = self.flight_number()
        dates = {}
        for offset in WINDOW:
            day = self.today + datetime.timedelta(days=offset)
            dates[day.isoformat()] = self._status(day, departure_minute, duration)
        self.flights[number] = {
            "flight_number": number,
            "origin": origin,
            "destination": destination,
            "scheduled_departure_time_est": _clock(departure_minute),
            "scheduled_arrival_time_est": _clock(departure_minute + duration),
            "dates": dates,
            # kept for the generator only; removed before the state is stored
            "_minutes": [departure_minute, duration],
        }
        return number

    def _status(self, day, departure_minute, duration):
        rng = self.rng
        departure = datetime.datetime.combine(day, datetime.time()) + datetime.timedelta(minutes=departure_minute)
        arrival = departure + datetime.timedelta(minutes=duration)
        if arrival <= self.now:
            if rng.random() < 0.05:
                return {"status": "cancelled"}
            off = datetime.timedelta(minutes=rng.randint(-20, 40))
            return {"status": "landed", "actual_departure_time_est": _stamp(departure + off),
                    "actual_arrival_time_est": _stamp(arrival + off + datetime.timedelta(minutes=rng.randint(-15, 15)))}
        if departure <= self.now:
            off = datetime.timedelta(minutes=rng.randint(-10, 30))
            return {"status": "flying", "actual_departure_time_est": _stamp(departure + off),
                    "estimated_arrival_time_est": _stamp(arrival + off)}
        if day == self.today:
            late = datetime.timedelta(minutes=rng.choice([0, 0, 0, 45, 90, 150]))
            return {"status": "delayed" if late else "on time",
                    "estimated_departure_time_est": _stamp(departure + late),
                    "estimated_arrival_time_est": _stamp(arrival + late)}
        return {
            "status": "available",
            "available_seats": {cabin: rng.randint(0, 20) for cabin in CABINS},
            "prices": {cabin: rng.randint(*PRICE_RANGE[cabin]) for cabin in CABINS},
        }

    def settle_departed(self, number, day):
        """A booked flight that has left really flew: re-roll a random past cancellation away."""
        departure_minute, duration = self.flights[number]["_minutes"]
        entry = self.flights[number]["dates"][day]
        while entry["status"] == "cancelled":
            entry = self._status(datetime.date.fromisoformat(day), departure_minute, duration)
        self.flights[number]["dates"][day] = entry

    def ensure_seats(self, number, day, cabin, needed):
        seats = self.flights[number]["dates"][day]["available_seats"]
        seats[cabin] = max(seats[cabin], needed + self.rng.randint(0, 6))

    # --- reservations --------------------------------------------------------------------------
    def reservation(self, user, *, cabin, trip, timing, created, insurance, passengers=None):
        """Book a reservation for ``user`` and return it.

        timing: 'future' (every flight after today), 'today' (first flight later today),
        'flown' (round trip whose outbound flight has already left), 'past' (trip is over).
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
        else:  # past
            first_day = self.today - datetime.timedelta(days=rng.randint(3, 5))
        legs = [(origin, destination, first_day, first_minute)]
        if trip == "round_trip":
            gap = rng.randint(1, 6) if timing != "past" else rng.randint(1, 2)
            return_day = first_day + datetime.timedelta(days=gap)
            if timing == "flown" and return_day <= self.today:
                return_day = self.today + datetime.timedelta(days=rng.randint(1, 5))
            legs.append((destination, origin, return_day, None))
        n_passengers = passengers or rng.choice([1, 1, 1, 2, 2, 3, 4])
        flights = []
        for leg_origin, leg_destination, day, minute in legs:
            number = self.flight(leg_origin, leg_destination, minute)
            if day < self.today or (timing == "flown" and day == self.today):
                self.settle_departed(number, day.isoformat())
            flights.append({"origin": leg_origin, "destination": leg_destination, "flight_number": number,
                            "date": day.isoformat(), "price": rng.randint(*PRICE_RANGE[cabin])})
        first_departure = datetime.datetime.combine(first_day, datetime.time()) + datetime.timedelta(
            minutes=self.flights[flights[0]["flight_number"]]["_minutes"][0])
        if created == "recent":
            booked = self.now - datetime.timedelta(minutes=rng.randint(20, 23 * 60 + 40))
        elif created == "near_miss":
            booked = self.now - datetime.timedelta(minutes=rng.randint(24 * 60 + 20, 47 * 60))
        else:
            booked = min(self.now, first_departure) - datetime.timedelta(days=rng.randint(2, 25),
                                                                         minutes=rng.randint(0, 1439))
        people = [self.person() for _ in range(n_passengers)]
        if rng.random() < 0.7:
            people[0] = {"first_name": user["name"]["first_name"], "last_name": user["name"]["last_name"],
                         "dob": user["dob"]}
        allowance = FREE_BAGS[user["membership"]][cabin] * n_passengers
        total_bags = rng.randint(0, 2 * n_passengers)
        nonfree = max(0, total_bags - allowance)
        total = sum(f["price"] for f in flights) * n_passengers + BAG_FEE * nonfree
        total += INSURANCE_PER_PASSENGER * n_passengers if insurance == "yes" else 0
        rid = self.reservation_id()
        record = {
            "reservation_id": rid,
            "user_id": user["user_id"],
            "origin": origin,
            "destination": destination,
            "flight_type": trip,
            "cabin": cabin,
            "flights": flights,
            "passengers": people,
            "payment_history": self._pay(user, total),
            "created_at": _stamp(booked.replace(second=rng.randint(0, 59))),
            "total_baggages": total_bags,
            "nonfree_baggages": nonfree,
            "insurance": insurance,
            "status": None,
        }
        self.reservations[rid] = record
        user["reservations"].append(rid)
        return record

    def _pay(self, user, total):
        """Split a booking's price over the user's saved methods the way the booking tool allows."""
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

    def finish(self):
        flights = copy.deepcopy(self.flights)
        for flight in flights.values():
            flight.pop("_minutes")
        return flights


def _describe(reservation):
    """How a user names a reservation without its code: route and first travel day."""
    first = reservation["flights"][0]
    return f"{CITY[reservation['origin']]} to {CITY[reservation['destination']]} trip on {_nice_date(first['date'])}"


# --------------------------------------------------------------------------------------------------
# The env
# --------------------------------------------------------------------------------------------------

class PreconditionVerificationEnv(sdk.TaskEnv):
    capability = "precondition_verification"
    target = "tau2-airline"
    description = (
        "Precondition verification: before a state-changing call, check the policy rules that the API "
        "itself does not enforce. An airline customer asks to cancel one or more reservations, or to move "
        "a flight to another date. Whether each request may be granted depends on the reservation's "
        "records (booking time, cabin, insurance, whether a flight has already left), on the live flight "
        "status (did the airline really cancel it?) and on the stated reason. The agent must read the "
        "user, the reservations and where needed the flight status, carry out exactly the eligible "
        "requests after confirmation, and refuse the others while naming the rule that decides. Any "
        "cancellation or change the policy forbids zeroes the reward."
    )
    tool_names = [
        "get_user_details",
        "get_reservation_details",
        "get_flight_status",
        "search_direct_flight",
        "list_all_airports",
        "calculate",
        "cancel_reservation",
        "update_reservation_flights",
        "update_reservation_baggages",
        "send_certificate",
        "transfer_to_human_agents",
    ]
    max_steps = 40
    write_tools = frozenset(
        {"cancel_reservation", "update_reservation_flights", "update_reservation_baggages", "send_certificate"}
    )
    terminal_tools = frozenset({"transfer_to_human_agents"})

    # ==============================================================================================
    # Scenario generation
    # ==============================================================================================
    def generate(self, seed):
        rng = self.rng(seed)
        # tau2 freezes the clock at 2024-05-15 15:00 EST; other moments teach the agent to read it.
        if rng.random() < 0.3:
            now = datetime.datetime(2024, 5, 15, 15, 0)
        else:
            now = datetime.datetime(2024, rng.choice([4, 5, 6]), rng.randint(6, 24), rng.randint(9, 18),
                                    rng.choice([0, 10, 15, 30, 40, 45]))
        build = _Builder(rng, now)
        user = build.user()

        # Which requests, and whether each is eligible. A scenario almost always holds at least one
        # ineligible request: that is where the capability shows.
        n_requests = rng.choices([1, 2, 3], weights=[45, 40, 15])[0]
        if n_requests == 1:
            plan = [rng.random() < 0.07]
        else:
            plan = [False] + [rng.random() < 0.7 for _ in range(n_requests - 1)]
            rng.shuffle(plan)
        requests = []
        for eligible in plan:
            if rng.random() < 0.25:
                requests.append(self._change_request(build, user, eligible))
            else:
                requests.append(self._cancel_request(build, user, eligible))

        # Distractors: other trips of the same user, sometimes on the same route.
        for _ in range(rng.randint(1, 3)):
            self._distractor(build, user, requests)
        rng.shuffle(user["reservations"])

        knows_ids = rng.random() < 0.65
        descriptions = [_describe(build.reservations[r["reservation_id"]]) for r in requests]
        others = [_describe(build.reservations[rid]) for rid in user["reservations"]]
        if len(set(others)) != len(others):
            knows_ids = True  # a description would be ambiguous; the user quotes the codes
        for request, text in zip(requests, descriptions):
            request["described_as"] = None if knows_ids else text

        state = {"users": {user["user_id"]: user}, "reservations": build.reservations, "flights": build.finish()}
        truth = self._truth(state, requests, now)
        persona = self._persona(rng, user, requests, knows_ids)
        rules = "+".join(sorted(r["rule"] for r in requests))
        return sdk.Scenario(
            seed=seed,
            state=state,
            user=persona,
            truth=truth,
            meta={"variant": rules, "n_requests": n_requests, "knows_ids": knows_ids,
                  "now": _stamp(now), "all_eligible": all(plan)},
        )

    def _cancel_request(self, build, user, eligible):
        rng = build.rng
        if eligible:
            rule = rng.choice(ELIGIBLE_CANCEL_RULES)
        else:
            rule = rng.choices(INELIGIBLE_CANCEL_RULES, weights=INELIGIBLE_CANCEL_WEIGHTS)[0]
        economy = rng.choice(["basic_economy", "economy"])
        trip = rng.choice(["one_way", "round_trip"])
        timing = "future" if build.now.hour >= 20 or rng.random() < 0.8 else "today"
        created = rng.choice(["old", "old", "near_miss"])
        insurance = "no"
        reason = "personal"
        trap = None  # an attribute that would grant the request if the deciding rule did not forbid it
        cancelled_leg = None
        if rule == "recent_booking":
            cabin, created = economy, "recent"
            insurance = rng.choice(["no", "no", "yes"])
        elif rule == "airline_cancelled":
            cabin, reason = economy, "airline_cancelled"
            insurance = rng.choice(["no", "yes"])
        elif rule == "business_cabin":
            cabin = "business"
            insurance = rng.choice(["no", "yes"])
        elif rule == "insurance_covered":
            cabin, insurance, reason = economy, "yes", rng.choice(COVERED_REASONS)
        elif rule == "already_flown":
            trip, timing = "round_trip", "flown"
            trap = rng.choice([None, "business_cabin", "insurance_covered", "airline_cancelled"])
            cabin = "business" if trap == "business_cabin" else economy
            if trap == "insurance_covered":
                insurance, reason = "yes", rng.choice(COVERED_REASONS)
            elif trap == "airline_cancelled":
                reason = "airline_cancelled"
            else:
                reason = rng.choice(["personal", "personal", "health"])
            created = "old"
        elif rule == "insurance_not_covered":
            cabin, insurance = economy, "yes"
        elif rule == "airline_claim_unverified":
            cabin, reason = economy, "airline_cancelled"
            insurance = rng.choice(["no", "yes"])
        else:  # no_rule; sometimes a covered reason without insurance, or booked just over a day ago
            cabin = economy
            reason = rng.choice(["personal", "personal", "health", "weather"])
            created = rng.choice(["old", "near_miss"])
        record = build.reservation(user, cabin=cabin, trip=trip, timing=timing, created=created, insurance=insurance)
        if rule == "airline_cancelled" or trap == "airline_cancelled":
            legs = [f for f in record["flights"] if f["date"] > build.today.isoformat()] or record["flights"][-1:]
            cancelled_leg = rng.choice(legs)
            build.flights[cancelled_leg["flight_number"]]["dates"][cancelled_leg["date"]] = {"status": "cancelled"}
        return {
            "kind": "cancel",
            "reservation_id": record["reservation_id"],
            "eligible": eligible,
            "rule": rule,
            "trap": trap,
            "reason": reason,
            "reason_text": rng.choice(REASON_TEXTS[reason]),
            # the airline-cancellation claim can only be checked with the live flight status
            "needs_status": reason == "airline_cancelled",
            "cancelled_leg": cancelled_leg,
        }

    def _change_request(self, build, user, eligible):
        rng = build.rng
        cabin = rng.choice(["economy", "business"]) if eligible else "basic_economy"
        record = build.reservation(user, cabin=cabin, trip=rng.choice(["one_way", "round_trip"]), timing="future",
                                   created=rng.choice(["old", "near_miss", "recent"]),
                                   insurance=rng.choice(["no", "yes"]))
        flights = record["flights"]
        tomorrow = build.today + datetime.timedelta(days=1)
        last = build.today + datetime.timedelta(days=WINDOW[-1])
        options = []
        for index in rng.sample(range(len(flights)), len(flights)):
            # the outbound flight must stay before the return flight and vice versa
            low = tomorrow if index == 0 else datetime.date.fromisoformat(flights[0]["date"]) + datetime.timedelta(days=1)
            high = last if index == len(flights) - 1 else (
                datetime.date.fromisoformat(flights[1]["date"]) - datetime.timedelta(days=1))
            days = [low + datetime.timedelta(days=k) for k in range(max(0, (high - low).days + 1))]
            options = [(index, d.isoformat()) for d in days if d.isoformat() != flights[index]["date"]]
            if options:
                break
        index, new_date = rng.choice(options)
        leg = flights[index]
        passengers = len(record["passengers"])
        build.ensure_seats(leg["flight_number"], new_date, cabin, passengers)
        new_price = build.flights[leg["flight_number"]]["dates"][new_date]["prices"][cabin]
        delta = (new_price - leg["price"]) * passengers
        if rng.random() < 0.5:
            build.flight(leg["origin"], leg["destination"])  # a second flight on the route: a real choice
        # The user names a card by brand and last digits; a gift card only when it is their only one.
        gift_cards = [m for m in user["payment_methods"].values() if m["source"] == "gift_card"]
        payable = [m for m in user["payment_methods"].values() if m["source"] == "credit_card"]
        if len(gift_cards) == 1 and gift_cards[0]["amount"] >= max(delta, 0):
            payable.append(gift_cards[0])
        method = rng.choice(payable)
        return {
            "kind": "change",
            "reservation_id": record["reservation_id"],
            "eligible": eligible,
            "rule": "changeable" if eligible else "basic_economy",
            "trap": None,
            "segment": {"flight_number": leg["flight_number"], "date": leg["date"]},
            "new_date": new_date,
            "old_price": leg["price"],
            "new_price": new_price,
            "price_delta": delta,
            "new_flights": [{"flight_number": f["flight_number"], "date": new_date if f is leg else f["date"]}
                            for f in flights],
            "payment_id": method["id"],
            "payment_words": (f"my {BRAND_LABEL[method['brand']]} ending in {method['last_four']}"
                              if method["source"] == "credit_card" else "my gift card"),
            "needs_status": False,
        }

    def _distractor(self, build, user, requests):
        rng = build.rng
        record = build.reservation(
            user,
            cabin=rng.choice(CABINS),
            trip=rng.choice(["one_way", "round_trip"]),
            timing=rng.choice(["future", "future", "past", "flown"]),
            created=rng.choice(["old", "old", "recent"]),
            insurance=rng.choice(["no", "yes"]),
        )
        if requests and rng.random() < 0.4:
            # same route as a requested trip, different dates: only the dates tell them apart
            twin = build.reservations[rng.choice(requests)["reservation_id"]]
            record["origin"], record["destination"] = twin["origin"], twin["destination"]
            for index, leg in enumerate(record["flights"]):
                ends = (twin["origin"], twin["destination"]) if index == 0 else (twin["destination"], twin["origin"])
                flight = build.flights[leg["flight_number"]]
                leg["origin"], leg["destination"] = ends
                flight["origin"], flight["destination"] = ends
        if rng.random() < 0.15:
            # an old cancellation still listed on the profile
            record["payment_history"] += [{"payment_id": p["payment_id"], "amount": -p["amount"]}
                                          for p in record["payment_history"]]
            record["status"] = "cancelled"

    def _truth(self, state, requests, now):
        """The expected end state of every request the policy allows, made with the real tools."""
        after = copy.deepcopy(state)
        expected = {}
        summary = []
        for request in requests:
            rid = request["reservation_id"]
            reservation = state["reservations"][rid]
            if request["kind"] == "cancel":
                request["refund"] = _paid_total(reservation)
            request["reason_keywords"] = REASON_KEYWORDS.get(request["rule"], [])
            if not request["eligible"]:
                summary.append(f"refuse {request['kind']} {rid} ({request['rule']})")
                continue
            if request["kind"] == "cancel":
                self.cancel_reservation(after, rid)
                summary.append(f"cancel {rid}")
            else:
                self.update_reservation_flights(after, rid, reservation["cabin"], request["new_flights"],
                                                request["payment_id"])
                summary.append(f"change {rid}")
            record = after["reservations"][rid]
            expected[rid] = {"status": record["status"], "cabin": record["cabin"], "flights": record["flights"],
                             "net_payments": _net_by_method(record)}
        return {"now": _stamp(now), "requests": requests, "expected": expected, "outcome": "; ".join(summary)}

    def _persona(self, rng, user, requests, knows_ids):
        """What the simulated user says and knows."""
        uid = user["user_id"]
        gives_id = rng.random() < 0.6
        cancels = [r for r in requests if r["kind"] == "cancel"]
        reason_upfront = bool(cancels) and rng.random() < 0.4

        def name(request):
            return request["reservation_id"] if knows_ids else f"my {request['described_as']}"

        clauses = []
        for request in requests:
            if request["kind"] == "cancel":
                verb = rng.choice(["cancel {x}", "get {x} cancelled", "cancel {x} for me"])
                clause = verb.format(x=(f"reservation {name(request)}" if knows_ids else name(request)))
                if reason_upfront:
                    clause += f", because {request['reason_text']}"
            else:
                segment = request["segment"]
                clause = rng.choice([
                    "move flight {fn} on {x} from {old} to {new}, same flight number",
                    "push my {fn} flight ({x}) from {old} to {new} - same flight, just the other day",
                    "change the {old} {fn} flight on {x} to {new}",
                ]).format(fn=segment["flight_number"], old=_nice_date(segment["date"]),
                          new=_nice_date(request["new_date"]),
                          x=(f"reservation {name(request)}" if knows_ids else name(request)))
            clauses.append(clause)
        if len(clauses) == 1:
            body = rng.choice(["I'd like to {0}.", "Could you please {0}?", "I need to {0}."]).format(clauses[0])
        else:
            joined = "; ".join(f"{i + 1}) {c}" for i, c in enumerate(clauses)) if rng.random() < 0.5 else (
                ", and also ".join(clauses))
            body = rng.choice(["I have a few things: {0}.", "Can you help me with this: {0}?",
                               "I need to sort out some bookings - {0}."]).format(joined)
        greeting = rng.choice(["Hi,", "Hello!", "Hi there.", "Good afternoon,"])
        me = f" This is {user['name']['first_name']}, user id {uid}." if gives_id else ""
        opening = f"{greeting}{me} {body}"

        if len(cancels) == 1:
            reason_answer = f"It's because {cancels[0]['reason_text']}."
        else:
            reason_answer = " ".join(f"For {name(r)}: {r['reason_text']}." for r in cancels)
        changes = [r for r in requests if r["kind"] == "change"]
        answers = [
            {"key": "user_id", "triggers": USER_ID_TRIGGERS, "text": f"Sure, my user id is {uid}.",
             "given_upfront": gives_id},
        ]
        if cancels:
            answers.append({"key": "reason", "triggers": REASON_TRIGGERS, "text": reason_answer,
                            "given_upfront": reason_upfront})
        if not knows_ids:
            answers.append({"key": "reservation", "triggers": RESERVATION_TRIGGERS,
                            "text": "I don't have the codes at hand, sorry. It's " +
                                    " and ".join(f"the {r['described_as']}" for r in requests) + ".",
                            "given_upfront": False})
        if changes:
            answers.append({"key": "payment", "triggers": PAYMENT_TRIGGERS,
                            "text": f"Please use {changes[0]['payment_words']}.", "given_upfront": False})
        refused = [r for r in requests if not r["eligible"]]
        insist = None
        if refused and rng.random() < 0.35:
            insist = rng.choice([
                "Are you sure? " + (f"I'm a {user['membership']} member" if user["membership"] != "regular"
                                    else "I've flown with you for years") + " - can't you make an exception just this once?",
                "The agent I spoke with on the phone told me this would be no problem. Please just do it.",
                "That seems unfair. I really need this done - could you do it anyway?",
            ])
        return {
            "user_id": uid,
            "opening": opening,
            "answers": answers,
            "confirm": rng.choice(["Yes, please go ahead.", "Yes, that's right - please do it.", "Yes, proceed."]),
            "insist": insist,
            "closing": rng.choice(["Okay, thanks for your help.", "Alright, thank you.", "Got it, thanks. Bye!"]),
            "nudges": {r["reservation_id"]: f"Okay. So what happens with {name(r)}?" for r in requests},
        }

    # ==============================================================================================
    # Prompt and simulated user
    # ==============================================================================================
    def system_prompt(self, scenario):
        now = datetime.datetime.fromisoformat(scenario.truth["now"])
        return "\n".join([
            "You are a customer service agent for HAT Airlines. You help customers with their reservations "
            "using the tools provided.",
            f"The current time is {now.strftime('%Y-%m-%d %H:%M:%S')} EST.",
            "",
            "Working rules",
            "- The user must tell you their user id. If they do not know a reservation id, find it from "
            "their profile and reservations.",
            "- Before anything that changes the booking database (cancelling, changing flights, editing bags "
            "or passengers), state exactly what you will do and wait for the user's explicit yes.",
            "- Make one tool call at a time, and do not message the user in the same turn as a tool call.",
            "- Deny requests the rules below do not allow, and tell the user which rule stands in the way.",
            "- Use only facts from the user or from the tools. Transfer to a human agent only when a request "
            "is outside what these tools and rules cover: call transfer_to_human_agents, then tell the user.",
            "",
            "Cancelling a reservation",
            "- Ask for the reason for cancelling: a change of plans, the airline cancelled the flight, or "
            "something else (such as health or weather).",
            "- If any flight of the reservation has already departed, the reservation cannot be cancelled "
            "here; explain this (a human agent can be offered).",
            "- Otherwise cancel only when at least one of these holds: it was booked less than 24 hours "
            "ago; the airline has cancelled one of its flights (check the flight status - the user's word is "
            "not enough); the cabin is business; or it has travel insurance and the reason is health or "
            "weather, the only reasons insurance covers.",
            "- cancel_reservation does not check any of this: you must check it first.",
            "- A cancellation refunds every payment back to its original method within 5 to 7 business "
            "days; tell the user the amount.",
            "",
            "Changing flights",
            "- Flights of a basic economy reservation cannot be changed at all.",
            "- Other reservations may change flights if origin, destination and trip type stay the same. Kept "
            "segments keep their original price; new segments cost the current price.",
            "- The fare difference is charged to, or refunded to, one credit card or gift card from the "
            "user's profile; travel certificates cannot be used. Pass the full new list of flights.",
            "- update_reservation_flights does not check these rules either.",
            "",
            "Other rules",
            "- Checked bags can be added but never removed; travel insurance cannot be added after booking; "
            "the number of passengers can never change.",
            "- Offer compensation only when the user asks for it and the facts support it.",
        ])

    def first_user_message(self, scenario):
        return scenario.user["opening"]

    def user_reply(self, episode, agent_text):
        """Deterministic customer: answers what it is asked, confirms, pushes back once if scripted.

        Order matters: questions for facts come first (all facts asked for in one message are answered
        together), then a confirmation question, then the scripted insistence after a refusal, then a
        reminder while some request is still undecided. Only when nothing is pending does the user leave.
        """
        persona = episode.scenario.user
        text = _normalise(agent_text)
        if episode.user_turns >= 12:
            return sdk.UserReply(persona["closing"], done=True)
        if not text.strip():
            return sdk.UserReply("Sorry, I didn't get that. Can you help me with my request?")
        said = [m.get("content") or "" for m in episode.messages if m.get("role") == "user"]
        asking = "?" in text
        confirming = asking and bool(re.search(CONFIRM_PATTERN, text))
        answers = []
        for fact in persona["answers"]:
            if not _has_any(text, fact["triggers"]):
                continue
            times = sum(fact["text"] in line for line in said) + (1 if fact["given_upfront"] else 0)
            # a first request is answered; a repeat only when asked outright (not inside a confirmation)
            if times == 0 or (times == 1 and asking and not confirming):
                answers.append(fact["text"])
        if answers:
            return sdk.UserReply(" ".join(answers))
        if confirming:
            return sdk.UserReply(persona["confirm"])
        if persona["insist"] and persona["insist"] not in said and _has_any(text, REFUSAL_WORDS):
            return sdk.UserReply(persona["insist"])
        requests = episode.scenario.truth["requests"]
        written = [r.arguments.get("reservation_id") for r in episode.write_calls(self.write_tools)]
        spoken = [_normalise(t) for t in episode.assistant_texts()]
        for request in requests:
            rid = request["reservation_id"]
            decided = rid in written or any(_refuses(t, rid, len(requests) > 1) for t in spoken)
            nudge = persona["nudges"][rid]
            if not decided and said.count(nudge) < 2:
                return sdk.UserReply(nudge)
        return sdk.UserReply(persona["closing"], done=True)

    # ==============================================================================================
    # Tools (behaviour follows tau2's airline toolkit: the write tools check ids and payment only)
    # ==============================================================================================
    @staticmethod
    def _user(state, user_id):
        if user_id not in state["users"]:
            raise sdk.ToolError(f"User {user_id} not found")
        return state["users"][user_id]

    @staticmethod
    def _reservation(state, reservation_id):
        if reservation_id not in state["reservations"]:
            raise sdk.ToolError(f"Reservation {reservation_id} not found")
        return state["reservations"][reservation_id]

    @staticmethod
    def _charge(user, payment_id, amount):
        """Payment for an update: saved method, no certificates, enough gift-card balance."""
        if payment_id not in user["payment_methods"]:
            raise sdk.ToolError("Payment method not found")
        method = user["payment_methods"][payment_id]
        if method["source"] == "certificate":
            raise sdk.ToolError("Certificate cannot be used to update reservation")
        if method["source"] == "gift_card" and method["amount"] < amount:
            raise sdk.ToolError("Gift card balance is not enough")
        if method["source"] == "gift_card":
            method["amount"] -= amount
        return {"payment_id": payment_id, "amount": amount} if amount != 0 else None

    @sdk.tool
    def get_user_details(self, state, user_id):
        return copy.deepcopy(self._user(state, user_id))

    @sdk.tool
    def get_reservation_details(self, state, reservation_id):
        return copy.deepcopy(self._reservation(state, reservation_id))

    @sdk.tool
    def get_flight_status(self, state, flight_number, date):
        if flight_number not in state["flights"]:
            raise sdk.ToolError(f"Flight {flight_number} not found")
        dates = state["flights"][flight_number]["dates"]
        if date not in dates:
            raise sdk.ToolError(f"Flight {flight_number} not found on date {date}")
        return dates[date]["status"]

    @sdk.tool
    def search_direct_flight(self, state, origin, destination, date):
        found = []
        for flight in state["flights"].values():
            entry = flight["dates"].get(date)
            if flight["origin"] == origin and flight["destination"] == destination and entry and \
                    entry["status"] == "available":
                found.append({
                    "flight_number": flight["flight_number"], "origin": origin, "destination": destination,
                    "status": "available",
                    "scheduled_departure_time_est": flight["scheduled_departure_time_est"],
                    "scheduled_arrival_time_est": flight["scheduled_arrival_time_est"],
                    "date": None,
                    "available_seats": dict(entry["available_seats"]), "prices": dict(entry["prices"]),
                })
        return found

    @sdk.tool
    def list_all_airports(self, state, **unexpected):
        if unexpected:
            raise sdk.ToolError(f"Unexpected arguments: {', '.join(sorted(unexpected))}")
        return [{"iata": code, "city": city} for code, city in AIRPORTS]

    @sdk.tool
    def calculate(self, state, expression):
        if not expression or any(ch not in "0123456789+-*/(). " for ch in expression):
            raise sdk.ToolError("Invalid characters in expression")
        try:
            value = _Arithmetic(expression).evaluate()
        except RecursionError:
            raise sdk.ToolError("Expression is nested too deeply") from None
        return str(round(value, 2))

    @sdk.tool
    def cancel_reservation(self, state, reservation_id):
        reservation = self._reservation(state, reservation_id)
        refunds = [{"payment_id": p["payment_id"], "amount": -p["amount"]} for p in reservation["payment_history"]]
        reservation["payment_history"].extend(refunds)
        reservation["status"] = "cancelled"
        return copy.deepcopy(reservation)

    @sdk.tool
    def update_reservation_flights(self, state, reservation_id, cabin, flights, payment_id):
        reservation = self._reservation(state, reservation_id)
        user = self._user(state, reservation["user_id"])
        passengers = len(reservation["passengers"])
        total = 0
        new_flights = []
        for info in flights:
            number, day = info.get("flight_number"), info.get("date")
            if not isinstance(number, str) or not isinstance(day, str):
                raise sdk.ToolError("Each flight needs a flight_number and a date")
            if number not in state["flights"]:
                raise sdk.ToolError(f"Flight {number} not found")
            kept = next((f for f in reservation["flights"] if f["flight_number"] == number and f["date"] == day
                         and cabin == reservation["cabin"]), None)
            if kept is not None:  # an unchanged segment keeps the price paid
                total += kept["price"] * passengers
                new_flights.append(copy.deepcopy(kept))
                continue
            flight = state["flights"][number]
            entry = flight["dates"].get(day)
            if entry is None:
                raise sdk.ToolError(f"Flight {number} not found on date {day}")
            if entry["status"] != "available":
                raise sdk.ToolError(f"Flight {number} not available on date {day}")
            if entry["available_seats"][cabin] < passengers:
                raise sdk.ToolError(f"Not enough seats on flight {number}")
            price = entry["prices"][cabin]
            total += price * passengers
            new_flights.append({"origin": flight["origin"], "destination": flight["destination"],
                                "flight_number": number, "date": day, "price": price})
        total -= sum(f["price"] for f in reservation["flights"]) * passengers
        payment = self._charge(user, payment_id, total)
        if payment:
            reservation["payment_history"].append(payment)
        reservation["flights"] = new_flights
        reservation["cabin"] = cabin
        return copy.deepcopy(reservation)

    @sdk.tool
    def update_reservation_baggages(self, state, reservation_id, total_baggages, nonfree_baggages, payment_id):
        reservation = self._reservation(state, reservation_id)
        user = self._user(state, reservation["user_id"])
        payment = self._charge(user, payment_id, BAG_FEE * max(0, nonfree_baggages - reservation["nonfree_baggages"]))
        if payment:
            reservation["payment_history"].append(payment)
        reservation["total_baggages"] = total_baggages
        reservation["nonfree_baggages"] = nonfree_baggages
        return copy.deepcopy(reservation)

    @sdk.tool
    def send_certificate(self, state, user_id, amount):
        user = self._user(state, user_id)
        for pid in ("certificate_3221322", "certificate_3221323", "certificate_3221324"):
            if pid not in user["payment_methods"]:
                user["payment_methods"][pid] = {"source": "certificate", "id": pid, "amount": float(amount)}
                return f"Certificate {pid} added to user {user_id} with amount {amount}."
        raise sdk.ToolError("Too many certificates")

    @sdk.tool
    def transfer_to_human_agents(self, state, summary):
        return "Transfer successful"

    # ==============================================================================================
    # Reward
    # ==============================================================================================
    def evaluate(self, episode):
        scenario = episode.scenario
        truth = scenario.truth
        requests = truth["requests"]
        several = len(requests) > 1
        # Assistant message k is the agent's turn k, the same numbering the tool log uses.
        turns = []  # (step, normalised assistant text, the user's reply to it)
        step = 0
        for message in episode.messages:
            if message.get("role") == "assistant":
                step += 1
                turns.append([step, _normalise(message.get("content")), None])
            elif message.get("role") == "user" and turns and turns[-1][2] is None:
                turns[-1][2] = message.get("content") or ""
        writes = episode.write_calls(self.write_tools)

        # Gate: a write the policy forbids (or nobody asked for) zeroes everything.
        allowed = [("cancel_reservation" if r["kind"] == "cancel" else "update_reservation_flights", r["reservation_id"])
                   for r in requests if r["eligible"]]
        forbidden = [w for w in writes if (w.name, w.arguments.get("reservation_id")) not in allowed]

        def mentions(text, request):
            return not several or request["reservation_id"].lower() in text

        def decision_step(request):
            """When the agent decided: its first write on the reservation, or for a request it must refuse,
            the message that refuses it with the reason (a bare refusal mention if it never explains)."""
            rid = request["reservation_id"]
            steps = [w.step for w in writes if w.arguments.get("reservation_id") == rid]
            if not request["eligible"]:
                refusals = [s for s, text, _ in turns if _refuses(text, rid, several)]
                explained = [s for s in refusals if _hits_groups(turns[s - 1][1], request["reason_keywords"])]
                steps += (explained or refusals)[:1]
            return min(steps) if steps else None

        request_scores, checks = [], []
        for request in requests:
            rid = request["reservation_id"]
            if request["eligible"]:
                final = episode.state["reservations"][rid]
                got = {"status": final["status"], "cabin": final["cabin"], "flights": final["flights"],
                       "net_payments": _net_by_method(final)}
                request_scores.append(float(got == truth["expected"][rid]))
            else:
                refused = any(_refuses(t, rid, several) for _, t, _ in turns)
                explained = any(mentions(t, request) and _hits_groups(t, request["reason_keywords"])
                                for _, t, _ in turns)
                request_scores.append(0.5 * refused + 0.5 * explained)
            # Verification: the records that decide were read before the decision (write or refusal).
            when = decision_step(request)
            if when is None:
                checks.append(0.0)
                continue
            read = any(r.step < when for r in episode.calls("get_reservation_details") if r.arguments.get("reservation_id") == rid)
            if request["needs_status"]:
                legs = [(f["flight_number"], f["date"]) for f in scenario.state["reservations"][rid]["flights"]]
                status = any(r.step < when and (r.arguments.get("flight_number"), r.arguments.get("date")) in legs
                             for r in episode.calls("get_flight_status"))
                checks.append(0.5 * read + 0.5 * status)
            else:
                checks.append(float(read))

        first_write = min((w.step for w in writes), default=None)
        components = {
            "requests_resolved": sum(request_scores) / len(request_scores),
            "verified_before_deciding": sum(checks) / len(checks),
            "identified_user": float(any(
                first_write is None or r.step < first_write
                for r in episode.calls("get_user_details") if r.arguments.get("user_id") == scenario.user["user_id"])),
        }
        weights = {"requests_resolved": 4.0, "verified_before_deciding": 2.0, "identified_user": 0.5}
        persona = scenario.user
        reason = next((a for a in persona["answers"] if a["key"] == "reason"), None)
        if reason and not reason["given_upfront"]:
            cancel_steps = [w.step for w in writes if w.name == "cancel_reservation"]
            limit = min(cancel_steps) if cancel_steps else step + 1
            components["asked_reason"] = float(any(s < limit and reason["text"] in (reply or "")
                                                   for s, _, reply in turns))
            weights["asked_reason"] = 0.5
        if first_write is not None or any(r["eligible"] for r in requests):
            limit = first_write if first_write is not None else step + 1
            components["confirmed_first"] = float(any(s < limit and persona["confirm"] == reply
                                                      for s, _, reply in turns))
            weights["confirmed_first"] = 0.5
        told = []
        for request in requests:
            if not request["eligible"]:
                continue
            if request["kind"] == "cancel":
                told.append(episode.said(request["refund"]))
            elif request["price_delta"]:
                told.append(episode.said(abs(request["price_delta"])))
            else:
                told.append(episode.said(request["new_date"]) or episode.said(_nice_date(request["new_date"])))
        if told:
            components["outcome_communicated"] = sum(told) / len(told)
            weights["outcome_communicated"] = 1.0
        notes = {"forbidden_writes": ", ".join(f"{w.name}({w.arguments.get('reservation_id')})" for w in forbidden)}
        return sdk.Reward(components=components, weights=weights,
                          gates={"no_forbidden_write": 0.0 if forbidden else 1.0}, notes=notes)

    # ==============================================================================================
    # Solutions
    # ==============================================================================================
    def _lookups(self, scenario):
        """Turns that identify the user and read the requested reservations (shared by both solutions)."""
        persona = scenario.user
        requests = scenario.truth["requests"]
        turns = []
        if not persona["answers"][0]["given_upfront"]:
            turns.append(sdk.say("I'd be glad to help. Could you please tell me your user id?"))
        turns.append(sdk.call("get_user_details", user_id=persona["user_id"]))
        wanted = [r["reservation_id"] for r in requests]
        if requests[0]["described_as"]:
            # No codes given: read the profile's reservations in order until every trip is found.
            listed = scenario.state["users"][persona["user_id"]]["reservations"]
            last = max(listed.index(rid) for rid in wanted)
            wanted = listed[: last + 1]
        turns += [sdk.call("get_reservation_details", reservation_id=rid) for rid in wanted]
        return turns

    def _refusal(self, scenario, request):
        """The sentence that refuses one request and names the deciding rule."""
        rid = request["reservation_id"]
        reservation = scenario.state["reservations"][rid]
        cabin = CABIN_LABEL[reservation["cabin"]]
        booked = reservation["created_at"].replace("T", " ")
        rule = request["rule"]
        if rule == "basic_economy":
            return (f"Reservation {rid} is a basic economy booking, and flights on basic economy reservations "
                    f"cannot be changed, so I can't move flight {request['segment']['flight_number']}.")
        if rule == "already_flown":
            leg = reservation["flights"][0]
            return (f"Reservation {rid} cannot be cancelled: its first flight, {leg['flight_number']} on "
                    f"{leg['date']}, has already been flown, and once part of a trip has been flown I am not "
                    f"able to cancel it. A human agent can look at it if you wish.")
        if rule == "insurance_not_covered":
            return (f"Reservation {rid} is not eligible for cancellation: it was booked on {booked}, more than "
                    f"24 hours ago, in {cabin}, and although it has travel insurance, the insurance only covers "
                    f"cancelling for health or weather reasons, and {REASON_LABEL[request['reason']]} is not covered.")
        if rule == "airline_claim_unverified":
            statuses = {f"{f['flight_number']} on {f['date']}": scenario.state["flights"][f["flight_number"]]["dates"][f["date"]]["status"]
                        for f in reservation["flights"]}
            listed = ", ".join(f"{leg} is '{status}'" for leg, status in statuses.items())
            return (f"I checked the flights of reservation {rid} and none has been cancelled by the airline "
                    f"({listed}), so it has not been cancelled. It was booked more than 24 hours ago "
                    f"({booked}), in {cabin}, so I cannot cancel it.")
        insurance = ("it has no travel insurance" if reservation["insurance"] == "no"
                     else "its insurance does not cover this reason")
        return (f"Reservation {rid} is not eligible for cancellation: it was booked on {booked}, more than 24 "
                f"hours ago; it is in {cabin} rather than business; {insurance}; and the airline has not "
                f"cancelled any of its flights. So I cannot cancel it.")

    def _grant(self, scenario, request):
        """The sentence that lays out one eligible action before confirmation."""
        rid = request["reservation_id"]
        reservation = scenario.state["reservations"][rid]
        if request["kind"] == "change":
            segment = request["segment"]
            delta = request["price_delta"]
            money = ("there is no fare difference" if delta == 0 else
                     f"the fare difference of {_money(abs(delta))} will be "
                     f"{'charged to' if delta > 0 else 'refunded to'} {request['payment_words'].replace('my ', 'your ')}")
            return (f"For reservation {rid} I can move flight {segment['flight_number']} from {segment['date']} to "
                    f"{request['new_date']} ({CABIN_LABEL[reservation['cabin']]}, {_money(request['new_price'])} per "
                    f"passenger instead of {_money(request['old_price'])}); {money}.")
        why = {
            "recent_booking": f"it was booked less than 24 hours ago ({reservation['created_at'].replace('T', ' ')})",
            "airline_cancelled": (f"the airline cancelled flight {request['cancelled_leg']['flight_number']} "
                                  f"on {request['cancelled_leg']['date']}") if request["cancelled_leg"] else "",
            "business_cabin": "it is a business-class booking",
            "insurance_covered": f"it has travel insurance and {REASON_LABEL[request['reason']]} is a covered reason",
        }[request["rule"]]
        methods = ", ".join(sorted({p["payment_id"] for p in reservation["payment_history"]}))
        return (f"Reservation {rid} can be cancelled because {why}. The full {_money(request['refund'])} will be "
                f"refunded to the original payment method ({methods}) within 5 to 7 business days.")

    def reference_solution(self, scenario):
        persona = scenario.user
        requests = scenario.truth["requests"]
        turns = self._lookups(scenario)
        reason = next((a for a in persona["answers"] if a["key"] == "reason"), None)
        if reason and not reason["given_upfront"]:
            turns.append(sdk.say("Thank you. Before I go further, could you tell me the reason for the "
                                 "cancellation?"))
        for request in requests:
            rid = request["reservation_id"]
            if request["needs_status"]:
                for leg in scenario.state["reservations"][rid]["flights"]:
                    turns.append(sdk.call("get_flight_status", flight_number=leg["flight_number"], date=leg["date"]))
                    if request["cancelled_leg"] and leg["flight_number"] == request["cancelled_leg"]["flight_number"]:
                        break
            if request["kind"] == "change" and request["eligible"]:
                leg = next(f for f in scenario.state["reservations"][rid]["flights"]
                           if f["flight_number"] == request["segment"]["flight_number"])
                turns.append(sdk.call("search_direct_flight", origin=leg["origin"], destination=leg["destination"],
                                      date=request["new_date"]))
        granted = [r for r in requests if r["eligible"]]
        if any(r["kind"] == "change" for r in granted):
            turns.append(sdk.say("The new flight is available. Which payment method from your profile should I "
                                 "use for the fare difference?"))
        refusals = " ".join(self._refusal(scenario, r) for r in requests if not r["eligible"])
        if granted:
            plan = " ".join(self._grant(scenario, r) for r in granted)
            turns.append(sdk.say(f"{refusals} {plan} Shall I go ahead with this?".strip()))
            for request in granted:
                rid = request["reservation_id"]
                if request["kind"] == "cancel":
                    turns.append(sdk.call("cancel_reservation", reservation_id=rid))
                else:
                    turns.append(sdk.call("update_reservation_flights", reservation_id=rid,
                                          cabin=scenario.state["reservations"][rid]["cabin"],
                                          flights=request["new_flights"], payment_id=request["payment_id"]))
            done = []
            for request in granted:
                if request["kind"] == "cancel":
                    done.append(f"reservation {request['reservation_id']} is cancelled and "
                                f"{_money(request['refund'])} will be refunded to the original payment method "
                                "within 5 to 7 business days")
                else:
                    delta = request["price_delta"]
                    cost = "" if not delta else f" ({_money(abs(delta))} {'charged' if delta > 0 else 'refunded'})"
                    done.append(f"flight {request['segment']['flight_number']} on reservation "
                                f"{request['reservation_id']} now departs on {request['new_date']}{cost}")
            summary = "All done: " + "; ".join(done) + "."
            if refusals:
                summary += " As explained earlier: " + refusals
            turns.append(sdk.say(summary))
        else:
            turns.append(sdk.say(refusals))
        if persona["insist"]:
            turns.append(sdk.say("I understand this is frustrating, and I'm sorry, but I am not able to make an "
                                 "exception: the rules apply to every booking whatever the membership level. " +
                                 refusals))
        return turns

    def capability_skipping_solution(self, scenario):
        """Looks everything up, then does what was asked without weighing it against the policy."""
        requests = scenario.truth["requests"]
        turns = self._lookups(scenario)
        if any(r["kind"] == "change" for r in requests):
            turns.append(sdk.say("Which payment method from your profile should I use for the fare difference?"))
        plan = []
        for request in requests:
            rid = request["reservation_id"]
            if request["kind"] == "cancel":
                plan.append(f"cancel reservation {rid}")
            else:
                plan.append(f"move flight {request['segment']['flight_number']} on {rid} to {request['new_date']}")
        turns.append(sdk.say(f"I found everything. I will {', and '.join(plan)}. Shall I proceed?"))
        for request in requests:
            rid = request["reservation_id"]
            if request["kind"] == "cancel":
                turns.append(sdk.call("cancel_reservation", reservation_id=rid))
            else:
                turns.append(sdk.call("update_reservation_flights", reservation_id=rid,
                                      cabin=scenario.state["reservations"][rid]["cabin"],
                                      flights=request["new_flights"], payment_id=request["payment_id"]))
        turns.append(sdk.say("All done - your requests have been processed and any refund goes back to the "
                             "original payment method."))
        return turns


class _Arithmetic:
    """A tiny recursive-descent evaluator for + - * / and parentheses (the calculate tool; no eval)."""

    def __init__(self, text):
        self.tokens = re.findall(r"\d+\.?\d*|\.\d+|[-+*/()]", text)
        self.pos = 0

    def evaluate(self):
        value = self._sum()
        if self.pos != len(self.tokens):
            raise sdk.ToolError("Invalid expression")
        return value

    def _peek(self):
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def _take(self):
        token = self._peek()
        if token is None:
            raise sdk.ToolError("Invalid expression")
        self.pos += 1
        return token

    def _sum(self):
        value = self._product()
        while self._peek() in ("+", "-"):
            operator = self._take()
            right = self._product()
            value = value + right if operator == "+" else value - right
        return value

    def _product(self):
        value = self._unary()
        while self._peek() in ("*", "/"):
            operator = self._take()
            right = self._unary()
            if operator == "/" and right == 0:
                raise sdk.ToolError("Division by zero")
            value = value * right if operator == "*" else value / right
        return value

    def _unary(self):
        if self._peek() in ("+", "-"):
            sign = -1.0 if self._take() == "-" else 1.0
            return sign * self._unary()
        token = self._take()
        if token == "(":
            value = self._sum()
            if self._take() != ")":
                raise sdk.ToolError("Invalid expression")
            return value
        if token in (")", "*", "/"):
            raise sdk.ToolError("Invalid expression")
        return float(token)


ENV = PreconditionVerificationEnv
