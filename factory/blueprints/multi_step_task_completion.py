"""Blueprint env: multi-step task completion on the tau2 airline target.

A customer asks for several things in one breath: "cancel this one, move that flight, add two bags to the
third, and tell me what it all costs". Every sub-request is allowed by the airline's policy, so nothing
here is about refusing; the difficulty is carrying *every* sub-request through to the end (look up, work
out the amounts, confirm, write) and then reporting on all of them, instead of finishing the first one
and wrapping up.

The reward has one component per sub-task, each graded on the final database (so three of four done
scores three quarters of the task credit), one component for a wrap-up that reports every outcome, and
one for the totals when the user asks for them. Writes to reservations that were not part of the request
zero the reward.

Reading guide: constants and helpers, the seeded database builder, the scenario generator, prompt and
simulated user, tools (faithful to tau2's behaviour), reward, and the two solutions.
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

# Why a user cancels, per eligibility rule (every cancellation asked for here is one the policy allows).
CANCEL_RULES = {
    "recent_booking": ["personal"],
    "business_cabin": ["personal"],
    "insurance_covered": ["health", "weather"],
    "airline_cancelled": ["airline_cancelled"],
}
REASON_TEXTS = {
    "personal": [
        "my plans changed", "the event I was flying to got postponed", "I won't need that trip after all",
        "I booked it by mistake",
    ],
    "health": ["I'm sick and can't travel", "my doctor told me not to fly that week", "I've just had surgery"],
    "weather": ["a big storm is forecast there", "there's a hurricane warning at the destination"],
    "airline_cancelled": ["you cancelled my flight", "I got a notice that the flight was cancelled"],
}
# Sub-task kinds and how often each is drawn.
KINDS = ["cancel", "change_flight", "add_bags", "update_passenger", "upgrade_cabin"]
KIND_WEIGHTS = [30, 20, 20, 15, 15]
WRITE_TOOL_OF = {
    "cancel": "cancel_reservation",
    "change_flight": "update_reservation_flights",
    "upgrade_cabin": "update_reservation_flights",
    "add_bags": "update_reservation_baggages",
    "update_passenger": "update_reservation_passengers",
}
# The fields of a reservation each kind of sub-task is graded on.
GRADED_FIELDS = {
    "cancel": ["status", "net_payments"],
    "change_flight": ["flights", "cabin", "net_payments"],
    "upgrade_cabin": ["flights", "cabin", "net_payments"],
    "add_bags": ["total_baggages", "nonfree_baggages", "net_payments"],
    "update_passenger": ["passengers"],
}

# A question is a request for confirmation when it has a question mark and one of these.
CONFIRM_PATTERN = (
    r"\b(confirm|proceed|go ahead|shall i|should i|would you like me to|do you want me to|"
    r"is that (?:ok|okay|correct|right)|may i)\b"
)
USER_ID_TRIGGERS = ["user id", "user-id", "userid", "account id", "username", "user name"]
REASON_TRIGGERS = ["reason", "why do", "why are", "why would", "may i ask why", "can i ask why"]
# Words that close a conversation: the user takes them as the agent's wrap-up and leaves.
WRAP_UP_WORDS = ["anything else", "all done", "everything is done", "all set", "that's everything",
                 "that is everything", "all taken care of", "have a great", "have a nice"]
ACK = "Okay."
GO_ON = "Everything you need should be in my first message - please go ahead."
# Narrow on purpose: "refunded to the original payment method" is a statement, not a question.
PAYMENT_TRIGGERS = ["which payment", "what payment", "which card", "payment method would you",
                    "payment method should", "payment method do you", "how would you like to pay",
                    "charge the", "use for the", "use for any", "use for these", "use for this"]


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



def _said(text, value):
    """Whether a number appears in text ("$1,204" counts as 1204)."""
    return any(abs(number - float(value)) < 0.005 for number in sdk.numbers_in(text))


def _graded(reservation, kind):
    view = dict(reservation, net_payments=_net_by_method(reservation))
    return {name: view[name] for name in GRADED_FIELDS[kind]}


# --------------------------------------------------------------------------------------------------
# The env
# --------------------------------------------------------------------------------------------------

class MultiStepTaskCompletionEnv(sdk.TaskEnv):
    capability = "multi_step_task_completion"
    target = "tau2-airline"
    description = (
        "Multi-step task completion: finish every part of a compound request. An airline customer asks "
        "for two to four things in one message - cancel a reservation, move a flight to another date, "
        "add checked bags, correct a passenger, upgrade a cabin - on different reservations, and often "
        "asks for the total charged or refunded at the end. Every part is allowed by policy. The agent "
        "must look up each reservation, work out each amount, confirm, make every write, and close with "
        "a summary that reports each outcome (and the totals). Each sub-task is graded separately on the "
        "final database, so stopping after the first one earns only its share."
    )
    tool_names = [
        "get_user_details",
        "get_reservation_details",
        "search_direct_flight",
        "get_flight_status",
        "list_all_airports",
        "calculate",
        "cancel_reservation",
        "update_reservation_flights",
        "update_reservation_baggages",
        "update_reservation_passengers",
        "send_certificate",
        "transfer_to_human_agents",
    ]
    max_steps = 45
    write_tools = frozenset({
        "cancel_reservation", "update_reservation_flights", "update_reservation_baggages",
        "update_reservation_passengers", "send_certificate",
    })
    terminal_tools = frozenset({"transfer_to_human_agents"})

    # ==============================================================================================
    # Scenario generation
    # ==============================================================================================
    def generate(self, seed):
        rng = self.rng(seed)
        if rng.random() < 0.3:
            now = datetime.datetime(2024, 5, 15, 15, 0)  # tau2's frozen clock
        else:
            now = datetime.datetime(2024, rng.choice([4, 5, 6]), rng.randint(6, 24), rng.randint(9, 18),
                                    rng.choice([0, 10, 15, 30, 40, 45]))
        build = _Builder(rng, now)
        user = build.user()
        card = rng.choice([m for m in user["payment_methods"].values() if m["source"] == "credit_card"])

        n_tasks = rng.choices([2, 3, 4], weights=[40, 35, 25])[0]
        kinds = rng.choices(KINDS, weights=KIND_WEIGHTS, k=n_tasks)
        makers = {"cancel": self._cancel, "change_flight": self._change_flight, "add_bags": self._add_bags,
                  "update_passenger": self._update_passenger, "upgrade_cabin": self._upgrade_cabin}
        tasks = [makers[kind](build, user, card["id"]) for kind in kinds]
        for _ in range(rng.randint(1, 3)):
            build.reservation(user, cabin=rng.choice(CABINS), trip=rng.choice(["one_way", "round_trip"]),
                              timing=rng.choice(["future", "future", "past"]), created="old",
                              insurance=rng.choice(["no", "yes"]))
        rng.shuffle(user["reservations"])

        state = {"users": {user["user_id"]: user}, "reservations": build.reservations, "flights": build.finish()}
        # The expected end state, made by the real tools from the reference's own arguments.
        after = copy.deepcopy(state)
        expected = []
        for task in tasks:
            self._write(after, task)
            expected.append(_graded(after["reservations"][task["reservation_id"]], task["kind"]))
        charges = [t["money"] for t in tasks if t["money"] > 0]
        refunds = [-t["money"] for t in tasks if t["money"] < 0]
        # A total is asked for only when it really adds up several amounts.
        totals = {}
        if len(charges) >= 2:
            totals["charged"] = sum(charges)
        if len(refunds) >= 2:
            totals["refunded"] = sum(refunds)
        truth = {
            "now": _stamp(now),
            "tasks": tasks,
            "expected": expected,
            "totals": totals,
            "outcome": "; ".join(f"{t['kind']} {t['reservation_id']} ({t['money']:+d})" for t in tasks),
        }
        persona = self._persona(rng, user, card, tasks, totals)
        return sdk.Scenario(
            seed=seed, state=state, user=persona, truth=truth,
            meta={"variant": "+".join(kinds), "n_tasks": n_tasks, "now": _stamp(now),
                  "asks_totals": sorted(totals)},
        )

    # --- one maker per kind of sub-task: each books a suitable reservation and says what to do ---
    def _cancel(self, build, user, card_id):
        rng = build.rng
        rule = rng.choice(sorted(CANCEL_RULES))
        reason = rng.choice(CANCEL_RULES[rule])
        record = build.reservation(
            user,
            cabin="business" if rule == "business_cabin" else rng.choice(["basic_economy", "economy"]),
            trip=rng.choice(["one_way", "round_trip"]), timing="future",
            created="recent" if rule == "recent_booking" else "old",
            insurance="yes" if rule == "insurance_covered" else "no",
        )
        if rule == "airline_cancelled":
            leg = rng.choice(record["flights"])
            build.flights[leg["flight_number"]]["dates"][leg["date"]] = {"status": "cancelled"}
        return {"kind": "cancel", "reservation_id": record["reservation_id"], "rule": rule, "reason": reason,
                "reason_text": rng.choice(REASON_TEXTS[reason]), "money": -_paid_total(record),
                "args": {"reservation_id": record["reservation_id"]}}

    def _change_flight(self, build, user, card_id):
        rng = build.rng
        cabin = rng.choice(["economy", "business"])
        record = build.reservation(user, cabin=cabin, trip=rng.choice(["one_way", "round_trip"]),
                                   timing="future", created="old", insurance=rng.choice(["no", "yes"]))
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
        build.ensure_seats(leg["flight_number"], new_date, cabin, len(record["passengers"]))
        new_price = build.flights[leg["flight_number"]]["dates"][new_date]["prices"][cabin]
        new_flights = [{"flight_number": f["flight_number"], "date": new_date if f is leg else f["date"]}
                       for f in flights]
        return {"kind": "change_flight", "reservation_id": record["reservation_id"],
                "flight_number": leg["flight_number"], "old_date": leg["date"], "new_date": new_date,
                "route": [leg["origin"], leg["destination"]],
                "money": (new_price - leg["price"]) * len(record["passengers"]),
                "args": {"reservation_id": record["reservation_id"], "cabin": cabin, "flights": new_flights,
                         "payment_id": card_id}}

    def _add_bags(self, build, user, card_id):
        rng = build.rng
        cabin = rng.choice(CABINS)
        record = build.reservation(user, cabin=cabin, trip=rng.choice(["one_way", "round_trip"]),
                                   timing="future", created="old", insurance=rng.choice(["no", "yes"]))
        added = rng.randint(1, 3)
        allowance = FREE_BAGS[user["membership"]][cabin] * len(record["passengers"])
        total = record["total_baggages"] + added
        nonfree = max(record["nonfree_baggages"], total - allowance)
        return {"kind": "add_bags", "reservation_id": record["reservation_id"], "added": added,
                "allowance": allowance, "money": BAG_FEE * (nonfree - record["nonfree_baggages"]),
                "args": {"reservation_id": record["reservation_id"], "total_baggages": total,
                         "nonfree_baggages": nonfree, "payment_id": card_id}}

    def _update_passenger(self, build, user, card_id):
        rng = build.rng
        record = build.reservation(user, cabin=rng.choice(CABINS), trip=rng.choice(["one_way", "round_trip"]),
                                   timing="future", created="old", insurance=rng.choice(["no", "yes"]),
                                   passengers=rng.choice([2, 2, 3]))
        people = record["passengers"]
        index = rng.randrange(1, len(people))  # a companion, not the first traveller
        old = people[index]
        mode = rng.choice(["replace", "dob", "spelling"])
        if mode == "replace":
            new = build.person()
            while new["first_name"] == old["first_name"]:
                new = build.person()
        elif mode == "dob":
            new = dict(old, dob=build.person()["dob"])
        else:  # the booking holds a typo of the traveller's real first name
            new = dict(old)
            typo = list(old["first_name"])
            cut = rng.randrange(1, len(typo) - 1)
            typo[cut], typo[cut + 1] = typo[cut + 1], typo[cut]
            old["first_name"] = "".join(typo) if typo != list(new["first_name"]) else new["first_name"] + "e"
        passengers = [dict(p) for p in people]
        passengers[index] = new
        return {"kind": "update_passenger", "reservation_id": record["reservation_id"], "mode": mode,
                "old": old, "new": new, "money": 0,
                "args": {"reservation_id": record["reservation_id"], "passengers": passengers}}

    def _upgrade_cabin(self, build, user, card_id):
        rng = build.rng
        cabin, target = rng.choice([("basic_economy", "economy"), ("economy", "business")])
        record = build.reservation(user, cabin=cabin, trip=rng.choice(["one_way", "round_trip"]),
                                   timing="future", created="old", insurance=rng.choice(["no", "yes"]))
        passengers = len(record["passengers"])
        new_total = 0
        for leg in record["flights"]:
            build.ensure_seats(leg["flight_number"], leg["date"], target, passengers)
            new_total += build.flights[leg["flight_number"]]["dates"][leg["date"]]["prices"][target]
        old_total = sum(leg["price"] for leg in record["flights"])
        return {"kind": "upgrade_cabin", "reservation_id": record["reservation_id"], "from": cabin, "to": target,
                "money": (new_total - old_total) * passengers,
                "args": {"reservation_id": record["reservation_id"], "cabin": target,
                         "flights": [{"flight_number": f["flight_number"], "date": f["date"]} for f in record["flights"]],
                         "payment_id": card_id}}

    def _write(self, state, task):
        """Carry out one sub-task with the real tool (used for the expected state and by the solutions)."""
        tool = self.tool_method(WRITE_TOOL_OF[task["kind"]])
        return tool(state, **copy.deepcopy(task["args"]))

    def _persona(self, rng, user, card, tasks, totals):
        uid = user["user_id"]
        gives_id = rng.random() < 0.65
        needs_card = any(t["kind"] not in ("cancel", "update_passenger") for t in tasks)
        card_upfront = needs_card and rng.random() < 0.5
        card_words = f"my {BRAND_LABEL[card['brand']]} ending in {card['last_four']}"

        clauses = []
        for task in tasks:
            rid = task["reservation_id"]
            kind = task["kind"]
            if kind == "cancel":
                clause = rng.choice(["cancel reservation {r} because {why}", "cancel {r} - {why}",
                                     "get {r} cancelled, since {why}"]).format(r=rid, why=task["reason_text"])
            elif kind == "change_flight":
                clause = rng.choice(["move flight {f} on {r} from {a} to {b}",
                                     "change the {a} flight {f} on reservation {r} to {b}, same flight number",
                                     "push {f} ({r}) from {a} to {b}"]).format(
                    f=task["flight_number"], r=rid, a=_nice_date(task["old_date"]), b=_nice_date(task["new_date"]))
            elif kind == "add_bags":
                bags = "a checked bag" if task["added"] == 1 else f"{task['added']} checked bags"
                clause = rng.choice(["add {n} to {r}", "put {n} on reservation {r}"]).format(n=bags, r=rid)
            elif kind == "update_passenger":
                old, new = task["old"], task["new"]
                who = f"{old['first_name']} {old['last_name']}"
                if task["mode"] == "replace":
                    clause = (f"on {rid}, replace {who} with {new['first_name']} {new['last_name']} "
                              f"(born {new['dob']})")
                elif task["mode"] == "dob":
                    clause = f"fix {who}'s date of birth on {rid} - it should be {new['dob']}"
                else:
                    clause = f"correct the spelling of {who} on {rid}: the first name is {new['first_name']}"
            else:
                clause = rng.choice(["upgrade {r} to {c}", "move reservation {r} up to {c}"]).format(
                    r=rid, c=CABIN_LABEL[task["to"]])
            clauses.append(clause)

        style = rng.choice(["list", "sequence", "plain"])
        if style == "list":
            body = "I need a few things done:\n" + "\n".join(f"{i + 1}. {c[0].upper()}{c[1:]}." for i, c in enumerate(clauses))
        elif style == "sequence":
            steps = [clauses[0]] + [("then " if i < len(clauses) - 1 else "and finally ") + c
                                    for i, c in enumerate(clauses[1:], start=1)]
            body = "Could you first " + ", ".join(steps) + "?"
        else:
            body = "Please " + ", ".join(clauses[:-1]) + " and " + clauses[-1] + "."
        asks = []
        if "charged" in totals:
            asks.append(rng.choice(["tell me the total you're charging my card", "what do all the charges add up to"]))
        if "refunded" in totals:
            asks.append(rng.choice(["how much I get back in total", "the total refund"]))
        if asks:
            wrap = " At the end, let me know " + " and ".join(asks) + "."
        else:
            wrap = rng.choice([" Let me know when it's all done.", " Give me a quick summary at the end.", ""])
        greeting = rng.choice(["Hi!", "Hello,", "Hi there,", "Good morning,"])
        me = f" I'm {user['name']['first_name']} (user id {uid})." if gives_id else ""
        pay = f" Please put any charges on {card_words}." if card_upfront else ""
        opening = f"{greeting}{me} {body}{pay}{wrap}"

        cancels = [t for t in tasks if t["kind"] == "cancel"]
        answers = [{"key": "user_id", "triggers": USER_ID_TRIGGERS, "text": f"My user id is {uid}.",
                    "given_upfront": gives_id}]
        if cancels:
            answers.append({"key": "reason", "triggers": REASON_TRIGGERS, "given_upfront": True,
                            "text": " ".join(f"For {t['reservation_id']}: {t['reason_text']}." for t in cancels)})
        if needs_card:
            answers.append({"key": "payment", "triggers": PAYMENT_TRIGGERS, "given_upfront": card_upfront,
                            "text": f"Please use {card_words}."})
        return {
            "user_id": uid,
            "opening": opening,
            "answers": answers,
            "confirm": rng.choice(["Yes, please go ahead with all of it.", "Yes, do it.", "Yes - go ahead."]),
            "closing": rng.choice(["Great, thanks!", "That's everything, thank you.", "Okay, thanks. Bye."]),
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
            "- The user must tell you their user id. Look up the user and every reservation involved before "
            "acting on it.",
            "- Before anything that changes the booking database, state exactly what you will do (with the "
            "amounts) and wait for the user's explicit yes. One confirmation may cover several changes.",
            "- Make one tool call at a time, and do not message the user in the same turn as a tool call.",
            "- When the user asks for several things, handle every one of them, then summarise what was done.",
            "- Use only facts from the user or from the tools.",
            "",
            "Cancelling",
            "- Allowed when no flight has departed and at least one holds: booked under 24 hours ago; the "
            "airline cancelled a flight; business cabin; travel insurance with a health or weather reason.",
            "- The refund goes back to the original payment methods within 5 to 7 business days.",
            "",
            "Changing a reservation",
            "- Flights (not in basic economy): same origin, destination and trip type; pass the full list of "
            "flights; kept segments keep their price, new ones cost the current price; the difference is "
            "charged or refunded to one credit card or gift card from the profile.",
            "- Cabin: every flight changes cabin together, at the current price of the new cabin; the user "
            "pays or gets back the difference. Use update_reservation_flights with the same flights.",
            "- Checked bags can only be added. Free bags per passenger by membership (basic economy / "
            "economy / business): regular 0/1/2, silver 1/2/3, gold 2/3/4. Each bag beyond the free "
            f"allowance costs ${BAG_FEE}; pass the new total and the new number of paid bags.",
            "- Passenger details may be corrected, but the number of passengers cannot change; pass the "
            "full passenger list.",
            "- Travel certificates cannot pay for changes.",
        ])

    def first_user_message(self, scenario):
        return scenario.user["opening"]

    def user_reply(self, episode, agent_text):
        """Deterministic customer: answers what it is asked, confirms, and leaves at the wrap-up.

        The user never reminds the agent of a forgotten sub-request: keeping track of them is the skill.
        """
        persona = episode.scenario.user
        text = _normalise(agent_text)
        if episode.user_turns >= 10:
            return sdk.UserReply(persona["closing"], done=True)
        if not text.strip():
            return sdk.UserReply("Sorry, I didn't get that. Can you help me with my requests?")
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
        if _has_any(text, WRAP_UP_WORDS):
            return sdk.UserReply(persona["closing"], done=True)
        # Anything else (narration, progress notes, a question the first message already answers): a
        # short go-on, never a reminder of what is left. After two go-ons with no tool call in between,
        # the user gives up.
        idle = 0
        for message in reversed(episode.messages[:-1]):
            if message.get("role") == "user" and message.get("content") in (ACK, GO_ON):
                idle += 1
            elif message.get("role") != "assistant" or message.get("tool_calls"):
                break
        if idle >= 2:
            return sdk.UserReply(persona["closing"], done=True)
        return sdk.UserReply(GO_ON if asking else ACK)

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
    def update_reservation_passengers(self, state, reservation_id, passengers):
        reservation = self._reservation(state, reservation_id)
        cleaned = []
        for person in passengers:
            values = [person.get(key) for key in ("first_name", "last_name", "dob")]
            if not all(isinstance(value, str) for value in values):
                raise sdk.ToolError("Each passenger needs first_name, last_name and dob")
            cleaned.append(dict(zip(("first_name", "last_name", "dob"), values)))
        if len(cleaned) != len(reservation["passengers"]):
            raise sdk.ToolError("Number of passengers does not match")
        reservation["passengers"] = cleaned
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
        truth = episode.scenario.truth
        tasks = truth["tasks"]
        writes = episode.write_calls(self.write_tools)
        # Gate: a write nobody asked for (another reservation, or the wrong kind of change).
        allowed = [(WRITE_TOOL_OF[t["kind"]], t["reservation_id"]) for t in tasks]
        stray = [w for w in writes if (w.name, w.arguments.get("reservation_id")) not in allowed]

        components, weights = {}, {}
        for index, (task, expected) in enumerate(zip(tasks, truth["expected"])):
            name = f"task{index + 1}_{task['kind']}"
            final = episode.state["reservations"][task["reservation_id"]]
            components[name] = float(_graded(final, task["kind"]) == expected)
            weights[name] = 1.0

        # The wrap-up: what the agent told the user once it had started writing.
        first_write = min((w.step for w in writes), default=None)
        step, after = 0, []
        for message in episode.messages:
            if message.get("role") == "assistant":
                step += 1
                if first_write is not None and step > first_write and message.get("content"):
                    after.append(message["content"])
        wrap_up = _normalise("\n".join(after))
        components["final_summary"] = sum(self._reported(wrap_up, task) for task in tasks) / len(tasks)
        weights["final_summary"] = 1.0
        if truth["totals"]:
            components["stated_totals"] = sum(_said(wrap_up, v) for v in truth["totals"].values()) / len(truth["totals"])
            weights["stated_totals"] = 1.0
        notes = {"stray_writes": ", ".join(f"{w.name}({w.arguments.get('reservation_id')})" for w in stray)}
        return sdk.Reward(components=components, weights=weights,
                          gates={"no_stray_write": 0.0 if stray else 1.0}, notes=notes)

    @staticmethod
    def _reported(text, task):
        """Whether the wrap-up names the reservation and the fact that shows the sub-task's outcome."""
        if task["reservation_id"].lower() not in text:
            return False
        kind, money = task["kind"], abs(task["money"])
        if kind == "update_passenger":
            return task["new"]["first_name"].lower() in text or task["new"]["dob"] in text
        if money:
            return _said(text, money)
        if kind == "change_flight":
            return task["new_date"] in text or _nice_date(task["new_date"]).lower() in text
        if kind == "add_bags":
            return _said(text, task["args"]["total_baggages"])
        return CABIN_LABEL.get(task.get("to"), "cancelled") in text

    # ==============================================================================================
    # Solutions
    # ==============================================================================================
    def _reads(self, scenario, task):
        """Look-ups an agent needs for one sub-task before it can quote and confirm it."""
        rid = task["reservation_id"]
        turns = [sdk.call("get_reservation_details", reservation_id=rid)]
        reservation = scenario.state["reservations"][rid]
        if task["kind"] == "change_flight":
            origin, destination = task["route"]
            turns.append(sdk.call("search_direct_flight", origin=origin, destination=destination, date=task["new_date"]))
        elif task["kind"] == "upgrade_cabin":
            for leg in reservation["flights"]:  # current prices of the new cabin, leg by leg
                turns.append(sdk.call("search_direct_flight", origin=leg["origin"], destination=leg["destination"],
                                      date=leg["date"]))
        elif task["kind"] == "cancel" and task["rule"] == "airline_cancelled":
            for leg in reservation["flights"]:
                turns.append(sdk.call("get_flight_status", flight_number=leg["flight_number"], date=leg["date"]))
        return turns

    def _plan_line(self, scenario, task):
        rid, money = task["reservation_id"], task["money"]
        reservation = scenario.state["reservations"][rid]
        kind = task["kind"]
        if kind == "cancel":
            return f"cancel reservation {rid}, refunding {_money(-money)} to the original payment method"
        if kind == "change_flight":
            cost = "no fare difference" if not money else (
                f"{_money(abs(money))} {'charged to' if money > 0 else 'refunded to'} your card")
            return f"move flight {task['flight_number']} on {rid} from {task['old_date']} to {task['new_date']} ({cost})"
        if kind == "add_bags":
            args = task["args"]
            return (f"add {task['added']} checked bag(s) to {rid}: {args['total_baggages']} bags in total, "
                    f"{args['nonfree_baggages']} of them paid beyond the free allowance of {task['allowance']} "
                    f"({_money(money)} charged)")
        if kind == "update_passenger":
            new = task["new"]
            return f"update the passenger on {rid} to {new['first_name']} {new['last_name']}, born {new['dob']}"
        return (f"upgrade {rid} from {CABIN_LABEL[reservation['cabin']]} to {CABIN_LABEL[task['to']]} "
                f"({_money(money)} charged)")

    def _done_line(self, task):
        rid, money = task["reservation_id"], task["money"]
        kind = task["kind"]
        if kind == "cancel":
            return (f"reservation {rid} is cancelled and {_money(-money)} will be refunded to the original "
                    "payment method within 5 to 7 business days")
        if kind == "change_flight":
            cost = "" if not money else f"; {_money(abs(money))} {'charged' if money > 0 else 'refunded'}"
            return f"flight {task['flight_number']} on {rid} now departs on {task['new_date']}{cost}"
        if kind == "add_bags":
            return (f"reservation {rid} now has {task['args']['total_baggages']} checked bags; "
                    f"{_money(money)} charged")
        if kind == "update_passenger":
            new = task["new"]
            return f"the passenger on {rid} is now {new['first_name']} {new['last_name']} (born {new['dob']})"
        return f"reservation {rid} is now in {CABIN_LABEL[task['to']]}; {_money(money)} charged"

    def _start(self, scenario):
        persona = scenario.user
        turns = []
        if not persona["answers"][0]["given_upfront"]:
            turns.append(sdk.say("Happy to help with all of that. Could you tell me your user id first?"))
        turns.append(sdk.call("get_user_details", user_id=persona["user_id"]))
        return turns

    def _ask_card(self, scenario, tasks):
        payment = next((a for a in scenario.user["answers"] if a["key"] == "payment"), None)
        needs = any(t["kind"] not in ("cancel", "update_passenger") for t in tasks)
        if payment and needs and not payment["given_upfront"]:
            return [sdk.say("Which payment method from your profile should I use for the charges?")]
        return []

    def reference_solution(self, scenario):
        tasks = scenario.truth["tasks"]
        turns = self._start(scenario)
        for task in tasks:
            turns += self._reads(scenario, task)
        turns += self._ask_card(scenario, tasks)
        plan = "; ".join(f"({i + 1}) {self._plan_line(scenario, t)}" for i, t in enumerate(tasks))
        turns.append(sdk.say(f"Here is what I will do: {plan}. Shall I go ahead with all of these?"))
        for task in tasks:
            turns.append(sdk.call(WRITE_TOOL_OF[task["kind"]], **copy.deepcopy(task["args"])))
        summary = "Everything is done: " + "; ".join(
            f"({i + 1}) {self._done_line(t)}" for i, t in enumerate(tasks)) + "."
        totals = scenario.truth["totals"]
        if "charged" in totals:
            summary += f" In total, {_money(totals['charged'])} was charged to your card."
        if "refunded" in totals:
            summary += f" In total, {_money(totals['refunded'])} will be refunded to you."
        turns.append(sdk.say(summary))
        return turns

    def capability_skipping_solution(self, scenario):
        """Handles the first request properly, then wraps up as if that were all."""
        first = scenario.truth["tasks"][0]
        turns = self._start(scenario) + self._reads(scenario, first) + self._ask_card(scenario, [first])
        turns.append(sdk.say(f"I can {self._plan_line(scenario, first)}. Shall I go ahead?"))
        turns.append(sdk.call(WRITE_TOOL_OF[first["kind"]], **copy.deepcopy(first["args"])))
        turns.append(sdk.say(f"Done: {self._done_line(first)}. Is there anything else I can help you with?"))
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


ENV = MultiStepTaskCompletionEnv
