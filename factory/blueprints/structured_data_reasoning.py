"""Blueprint env: structured_data_reasoning on the tau2-retail target.

A customer wants one item of an order swapped for another variant of the same product. The request is
phrased as constraints over the product's options ("the same shirt but in blue and size L", "the cheapest
blue one you have in stock", "blue, size M, under $50", "one size up", "blue, or else green if blue is
sold out"). ``get_product_details`` returns the product with a nested ``variants`` dict keyed by item id;
each variant has ``options``, ``available`` and ``price``. Only an agent that checks every variant against
every constraint (options, availability, price, "cheapest") finds the one item id that fits. The catalogue
is built so that the first variant sharing the most salient option is always a lookalike that is wrong.

Module layout: static data, id and record builders, the store's tool logic as plain functions (so
``generate`` can compute the expected end state with the same code the tools run), the variant solver,
the scripted customer, and finally the env class.
"""

from __future__ import annotations

import copy
import itertools
import math
import re

from env_registry import sdk

# ------------------------------------------------------------------------------------------------
# Static data
# ------------------------------------------------------------------------------------------------

# Product types in the store's shape. ``ordered`` names option dimensions whose values have a natural
# order (listed smallest first), so "one size up" is well defined on them.
CATALOG = [
    {"name": "T-Shirt", "price": (44.0, 58.0), "ordered": ["size"],
     "options": {"color": ["black", "blue", "purple", "red", "white"], "size": ["S", "M", "L", "XL", "XXL"],
                 "material": ["cotton", "polyester"], "style": ["crew neck", "v-neck"]}},
    {"name": "Water Bottle", "price": (44.0, 56.0), "ordered": ["capacity"],
     "options": {"capacity": ["500ml", "750ml", "1000ml"], "material": ["plastic", "glass", "stainless steel"],
                 "color": ["black", "blue", "green", "red"]}},
    {"name": "Hiking Boots", "price": (228.0, 262.0), "ordered": ["size"],
     "options": {"size": ["7", "8", "9", "10", "11", "12"], "material": ["leather", "synthetic"],
                 "waterproof": ["yes", "no"]}},
    {"name": "Backpack", "price": (184.0, 221.0), "ordered": ["size"],
     "options": {"color": ["black", "green", "grey", "navy"], "size": ["small", "medium", "large"],
                 "material": ["leather", "nylon", "polyester"], "compartment": ["camera", "hydration", "laptop"]}},
    {"name": "Mechanical Keyboard", "price": (224.0, 274.0), "ordered": ["size"],
     "options": {"switch type": ["clicky", "linear", "tactile"], "backlight": ["none", "white", "RGB"],
                 "size": ["60%", "80%", "full size"]}},
    {"name": "Office Chair", "price": (460.0, 546.0), "ordered": [],
     "options": {"material": ["fabric", "leather", "mesh"], "color": ["black", "blue", "gray", "red"],
                 "armrest": ["none", "fixed", "adjustable"], "backrest height": ["standard", "high-back"]}},
    {"name": "Electric Kettle", "price": (136.0, 166.0), "ordered": ["capacity"],
     "options": {"capacity": ["1L", "1.5L", "2L"], "material": ["glass", "plastic", "stainless steel"],
                 "color": ["black", "silver", "white"]}},
    {"name": "Cycling Helmet", "price": (178.0, 221.0), "ordered": ["size"],
     "options": {"size": ["S", "M", "L"], "color": ["black", "blue", "red", "white"],
                 "ventilation": ["low", "medium", "high"]}},
    {"name": "Pet Bed", "price": (179.0, 216.0), "ordered": ["size"],
     "options": {"size": ["small", "medium", "large"], "material": ["fleece", "memory foam", "polyester"],
                 "color": ["beige", "brown", "grey"]}},
    {"name": "Running Shoes", "price": (146.0, 160.0), "ordered": ["size"],
     "options": {"size": ["8", "9", "10", "11"], "color": ["black", "red", "white", "yellow"],
                 "material": ["leather", "mesh", "synthetic"], "sole": ["EVA", "rubber"]}},
    {"name": "Wireless Earbuds", "price": (225.0, 269.0), "ordered": ["battery life"],
     "options": {"color": ["black", "blue", "white"], "battery life": ["4 hours", "6 hours", "8 hours"],
                 "water resistance": ["not resistant", "IPX4", "IPX7"]}},
    {"name": "Fleece Jacket", "price": (140.0, 161.0), "ordered": ["size"],
     "options": {"size": ["XS", "S", "M", "L", "XL"], "color": ["black", "navy", "red"], "zipper": ["full", "half"]}},
    {"name": "Portable Charger", "price": (89.0, 111.0), "ordered": ["capacity"],
     "options": {"capacity": ["5000mAh", "10000mAh", "20000mAh"], "output": ["USB-A", "USB-C", "Wireless"],
                 "color": ["black", "blue", "white"]}},
    {"name": "Desk Lamp", "price": (134.0, 166.0), "ordered": ["brightness"],
     "options": {"color": ["black", "silver", "white"], "brightness": ["low", "medium", "high"],
                 "power source": ["AC adapter", "USB", "battery"]}},
    {"name": "Yoga Mat", "price": (91.0, 107.0), "ordered": ["thickness"],
     "options": {"thickness": ["4mm", "5mm", "6mm"], "material": ["PVC", "TPE", "natural rubber"],
                 "color": ["blue", "green", "pink"]}},
    {"name": "Smart Watch", "price": (314.0, 384.0), "ordered": [],
     "options": {"color": ["black", "gold", "silver"], "band material": ["leather", "metal", "silicone"],
                 "display": ["AMOLED", "LCD"]}},
    {"name": "Tablet", "price": (900.0, 1056.0), "ordered": ["storage"],
     "options": {"screen size": ["7-inch", "8-inch", "10-inch"], "storage": ["32GB", "64GB", "128GB"],
                 "color": ["black", "gold", "silver"]}},
    {"name": "Skateboard", "price": (179.0, 218.0), "ordered": ["length"],
     "options": {"deck material": ["bamboo", "maple", "plastic"], "length": ["28 inch", "31 inch", "34 inch"],
                 "design": ["custom", "graphic", "plain"]}},
]

FIRST_NAMES = ["Yusuf", "Mia", "Noah", "Sofia", "Ethan", "Amelia", "Liam", "Olivia", "Lucas", "Isabella", "Omar",
               "Chen", "Aarav", "Fatima", "Mateo", "Harper", "Ivan", "Lei", "Raj", "Emma", "James", "Ava", "Daiki",
               "Anya", "Mohamed", "Yara", "Juan", "Sara", "Evelyn", "Kenji", "Lucia", "Arjun"]
LAST_NAMES = ["Rossi", "Li", "Brown", "Garcia", "Kim", "Silva", "Patel", "Moore", "Nguyen", "Ahmed", "Lopez",
              "Johnson", "Santos", "Kovacs", "Muller", "Ito", "Hernandez", "Davis", "Khan", "Wilson", "Thomas",
              "Anderson", "Smith", "Gonzalez", "Martin", "Lee", "Sanchez", "Taylor"]
CITIES = [("Denver", "CO", "802"), ("Austin", "TX", "787"), ("San Jose", "CA", "951"), ("New York", "NY", "100"),
          ("Seattle", "WA", "981"), ("Chicago", "IL", "606"), ("Phoenix", "AZ", "850"), ("Columbus", "OH", "432"),
          ("Charlotte", "NC", "282"), ("Portland", "OR", "972"), ("San Antonio", "TX", "782"),
          ("Philadelphia", "PA", "191"), ("Fort Worth", "TX", "761"), ("San Diego", "CA", "921")]
STREETS = ["Sunset Drive", "River Road", "Cedar Street", "Broadway", "Maple Avenue", "Hillcrest Drive", "Elm Street",
           "Lakeview Drive", "Park Avenue", "Oak Street", "Pine Lane", "Willow Lane", "Chestnut Street", "Main Street"]

# The request kinds (scenario variants). Each one is a different shape of constraint over the variants.
KINDS = ["exact_change", "cheapest", "budget", "fallback", "step"]

POLICY = """\
# Retail support policy (summary)

Identity
- Before you share or change anything, authenticate the customer: look up their user id by email
  (find_user_id_by_email) or, if they cannot give an email, by first name, last name and zip code
  (find_user_id_by_name_zip). Do this even if they volunteer a user id. Help only that one customer.

What you can do
- Cancel or change pending orders, return or exchange delivered orders, and update the default address.
- Orders in any other status ('processed', 'cancelled', ...) cannot be acted on.
- Only say what the customer told you or what a tool returned; do not invent facts or give opinions.
- Use one tool call per turn, and do not talk to the customer in the same turn as a tool call.

Products, items and variants
- A product (product id) has several variant items (item ids); the two kinds of id are unrelated.
  get_product_details lists every variant with its options, whether it is available and its price.
- An item can only be exchanged or modified into another AVAILABLE variant of the SAME product. Check all
  of the customer's requirements (every option, stock, price limits) against the variants before choosing.
- Exchanges (delivered orders) and item modifications (pending orders) can each be done only once per
  order, so collect every item to change first and ask the customer to confirm the list is complete.
- The price difference between the new and the old item is charged to, or refunded to, a payment method
  the customer chooses; a gift card must hold enough balance to cover a charge.

Confirmation
- Before any change to the database, tell the customer exactly what will happen (items, new item and its
  price, the price difference and which payment method it goes to) and wait for an explicit yes.
- After an exchange the order becomes 'exchange requested' and the customer gets return instructions by
  email; after an item modification the pending order cannot be changed again.

Hand-off
- Transfer to a human agent (transfer_to_human_agents) only if the customer asks for one or the request
  is impossible with your tools and this policy.
"""


# ------------------------------------------------------------------------------------------------
# Ids and records in the target's formats
# ------------------------------------------------------------------------------------------------
def _fresh_digits(rng, used: set, width: int) -> str:
    """A random decimal string of ``width`` digits (no leading zero) not used before in this scenario."""
    while True:
        text = str(rng.randint(10 ** (width - 1), 10 ** width - 1))
        if text not in used:
            used.add(text)
            return text


def _fresh_price(rng, low: float, high: float, taken: set) -> float:
    while True:
        price = round(rng.uniform(low, high), 2)
        if price not in taken:
            taken.add(price)
            return price


def _make_address(rng) -> dict:
    city, state, zip_prefix = rng.choice(CITIES)
    return {
        "address1": f"{rng.randint(100, 999)} {rng.choice(STREETS)}",
        "address2": f"{rng.choice(['Suite', 'Apt'])} {rng.randint(100, 999)}",
        "city": city,
        "country": "USA",
        "state": state,
        "zip": zip_prefix + f"{rng.randint(0, 99):02d}",
    }


def _make_user(rng, used: set, taken_names: set, methods: list[str]) -> dict:
    """A user record; ``methods`` lists payment-method kinds in the order they appear in the profile."""
    while True:
        first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
        if (first, last) not in taken_names:
            taken_names.add((first, last))
            break
    user_id = f"{first.lower()}_{last.lower()}_{_fresh_digits(rng, used, 4)}"
    payment_methods = {}
    for kind in methods:
        method_id = f"{kind}_{_fresh_digits(rng, used, 7)}"
        if kind == "credit_card":
            record = {"source": kind, "id": method_id, "brand": rng.choice(["visa", "mastercard"]),
                      "last_four": f"{rng.randint(0, 9999):04d}"}
        elif kind == "gift_card":
            record = {"source": kind, "id": method_id, "balance": float(rng.randint(40, 300))}
        else:
            record = {"source": kind, "id": method_id}
        payment_methods[method_id] = record
    return {
        "user_id": user_id,
        "name": {"first_name": first, "last_name": last},
        "address": _make_address(rng),
        "email": f"{first.lower()}.{last.lower()}{rng.randint(1000, 9999)}@example.com",
        "payment_methods": payment_methods,
        "orders": [],
    }


def _order_item(product: dict, variant: dict) -> dict:
    return {"name": product["name"], "product_id": product["product_id"], "item_id": variant["item_id"],
            "price": variant["price"], "options": dict(variant["options"])}


def _make_order(rng, used: set, user: dict, items: list[dict], status: str, method_id: str) -> dict:
    order_id = "#W" + _fresh_digits(rng, used, 7)
    fulfillments = []
    if status in ("processed", "delivered"):
        fulfillments = [{"tracking_id": [_fresh_digits(rng, used, 12)], "item_ids": [i["item_id"] for i in items]}]
    total = round(sum(i["price"] for i in items), 2)
    payments = [{"transaction_type": "payment", "amount": total, "payment_method_id": method_id}]
    if status == "cancelled":
        payments.append({"transaction_type": "refund", "amount": total, "payment_method_id": method_id})
    return {"order_id": order_id, "user_id": user["user_id"], "address": dict(user["address"]), "items": items,
            "status": status, "fulfillments": fulfillments, "payment_history": payments}


def _random_variants(rng, spec: dict, count: int, used: set) -> list[dict]:
    """``count`` distinct option combinations of a product type, with stock flags and distinct prices."""
    dims = list(spec["options"])
    combos = list(itertools.product(*spec["options"].values()))
    rng.shuffle(combos)
    prices: set = set()
    low, high = spec["price"]
    return [
        {"item_id": _fresh_digits(rng, used, 10), "options": dict(zip(dims, combo)),
         "available": rng.random() < 0.7, "price": _fresh_price(rng, low, high, prices)}
        for combo in combos[: min(count, len(combos))]
    ]


def _product_record(name: str, product_id: str, variants: list[dict]) -> dict:
    # The variants dict keeps list order: the order in which get_product_details shows them.
    return {"name": name, "product_id": product_id, "variants": {v["item_id"]: v for v in variants}}


def _describe_method(method: dict) -> str:
    if method["source"] == "credit_card":
        brand = "Mastercard" if method["brand"] == "mastercard" else method["brand"].title() + " card"
        return f"{brand} ending in {method['last_four']}"
    if method["source"] == "paypal":
        return "PayPal account"
    return "gift card"


def _money(value: float) -> str:
    return f"${value:,.2f}"


# ------------------------------------------------------------------------------------------------
# Store logic shared by the tools and by generate() (which replays the right action to get the
# expected end state). It enforces only what the real store API enforces; policy is the agent's job.
# ------------------------------------------------------------------------------------------------
def _order(state: dict, order_id: str) -> dict:
    if order_id not in state["orders"]:
        raise sdk.ToolError("Order not found")
    return state["orders"][order_id]


def _payment_method(state: dict, user_id: str, method_id: str) -> dict:
    user = state["users"].get(user_id)
    if user is None:
        raise sdk.ToolError("User not found")
    if method_id not in user["payment_methods"]:
        raise sdk.ToolError("Payment method not found")
    return user["payment_methods"][method_id]


def _check_swap(state: dict, order: dict, item_ids: list, new_item_ids: list, missing: str) -> float:
    """Validate an item swap the way the store does and return the total price difference."""
    present = [item["item_id"] for item in order["items"]]
    for item_id in item_ids:
        if item_ids.count(item_id) > present.count(item_id):
            raise sdk.ToolError(missing.format(item_id=item_id))
    if len(item_ids) != len(new_item_ids):
        raise sdk.ToolError("The number of items to be exchanged should match.")
    difference = 0.0
    for item_id, new_item_id in zip(item_ids, new_item_ids):
        item = next(i for i in order["items"] if i["item_id"] == item_id)
        product = state["products"].get(item["product_id"])
        if product is None:
            raise sdk.ToolError("Product not found")
        variant = product["variants"].get(new_item_id)
        if variant is None:
            raise sdk.ToolError("Variant not found")
        if not variant["available"]:
            raise sdk.ToolError(f"New item {new_item_id} not found or available")
        difference += variant["price"] - item["price"]
    return round(difference, 2)


def _exchange(state: dict, order_id: str, item_ids: list, new_item_ids: list, method_id: str) -> dict:
    order = _order(state, order_id)
    if order["status"] != "delivered":
        raise sdk.ToolError("Non-delivered order cannot be exchanged")
    difference = _check_swap(state, order, item_ids, new_item_ids, "Number of {item_id} not found.")
    method = _payment_method(state, order["user_id"], method_id)
    if method["source"] == "gift_card" and method["balance"] < difference:
        raise sdk.ToolError("Insufficient gift card balance to pay for the price difference")
    order["status"] = "exchange requested"
    order["exchange_items"] = sorted(item_ids)
    order["exchange_new_items"] = sorted(new_item_ids)
    order["exchange_payment_method_id"] = method_id
    order["exchange_price_difference"] = difference
    return order


def _modify_items(state: dict, order_id: str, item_ids: list, new_item_ids: list, method_id: str) -> dict:
    order = _order(state, order_id)
    if order["status"] != "pending":
        raise sdk.ToolError("Non-pending order cannot be modified")
    if any(old == new for old, new in zip(item_ids, new_item_ids)):
        raise sdk.ToolError("The new item id should be different from the old item id")
    difference = _check_swap(state, order, item_ids, new_item_ids, "{item_id} not found")
    method = _payment_method(state, order["user_id"], method_id)
    if method["source"] == "gift_card" and method["balance"] < difference:
        raise sdk.ToolError("Insufficient gift card balance to pay for the new item")
    order["payment_history"].append({"transaction_type": "payment" if difference > 0 else "refund",
                                     "amount": abs(difference), "payment_method_id": method_id})
    if method["source"] == "gift_card":
        method["balance"] = round(method["balance"] - difference, 2)
    for item_id, new_item_id in zip(item_ids, new_item_ids):
        item = next(i for i in order["items"] if i["item_id"] == item_id)
        variant = state["products"][item["product_id"]]["variants"][new_item_id]
        item.update(item_id=new_item_id, price=variant["price"], options=dict(variant["options"]))
    order["status"] = "pending (item modified)"
    return order


def _return(state: dict, order_id: str, item_ids: list, method_id: str) -> dict:
    order = _order(state, order_id)
    if order["status"] != "delivered":
        raise sdk.ToolError("Non-delivered order cannot be returned")
    method = _payment_method(state, order["user_id"], method_id)
    if method["source"] != "gift_card" and method_id != order["payment_history"][0]["payment_method_id"]:
        raise sdk.ToolError("Payment method should be the original payment method")
    present = [item["item_id"] for item in order["items"]]
    if any(item_ids.count(i) > present.count(i) for i in item_ids):
        raise sdk.ToolError("Some item not found")
    order["status"] = "return requested"
    order["return_items"] = sorted(item_ids)
    order["return_payment_method_id"] = method_id
    return order


def _cancel(state: dict, order_id: str, reason: str) -> dict:
    order = _order(state, order_id)
    if order["status"] != "pending":
        raise sdk.ToolError("Non-pending order cannot be cancelled")
    if reason not in ("no longer needed", "ordered by mistake"):
        raise sdk.ToolError("Invalid reason")
    refunds = []
    for payment in order["payment_history"]:
        refunds.append({"transaction_type": "refund", "amount": payment["amount"],
                        "payment_method_id": payment["payment_method_id"]})
        method = _payment_method(state, order["user_id"], payment["payment_method_id"])
        if method["source"] == "gift_card":
            method["balance"] = round(method["balance"] + payment["amount"], 2)
    order["status"] = "cancelled"
    order["cancel_reason"] = reason
    order["payment_history"].extend(refunds)
    return order


_CALC_TOKEN = re.compile(r"\s*(?:(\d+\.?\d*|\.\d+)|(.))")


def _calculate(expression: str) -> float:
    """Evaluate + - * / and parentheses without eval(): a small recursive-descent parser."""
    if not all(ch in "0123456789+-*/(). " for ch in expression):
        raise sdk.ToolError("Invalid characters in expression")
    tokens = [num or op for num, op in _CALC_TOKEN.findall(expression) if (num or op).strip()]
    if not tokens or len(tokens) > 500:
        raise sdk.ToolError("Invalid expression")
    position = 0

    def peek():
        return tokens[position] if position < len(tokens) else None

    def take():
        nonlocal position
        position += 1
        return tokens[position - 1]

    def atom(depth):
        if depth > 60:
            raise sdk.ToolError("Invalid expression")
        token = peek()
        if token in ("+", "-"):
            take()
            value = atom(depth + 1)
            return value if token == "+" else -value
        if token == "(":
            take()
            value = expr(depth + 1)
            if take_if(")"):
                return value
            raise sdk.ToolError("Invalid expression")
        if token is None or token in "+-*/()":
            raise sdk.ToolError("Invalid expression")
        take()
        return float(token)

    def take_if(symbol):
        if peek() == symbol:
            take()
            return True
        return False

    def term(depth):
        value = atom(depth)
        while peek() in ("*", "/"):
            operator, right = take(), atom(depth)
            if operator == "/" and right == 0:
                raise sdk.ToolError("division by zero")
            value = value * right if operator == "*" else value / right
        return value

    def expr(depth):
        value = term(depth)
        while peek() in ("+", "-"):
            operator, right = take(), term(depth)
            value = value + right if operator == "+" else value - right
        return value

    result = expr(0)
    if position != len(tokens) or math.isinf(result) or math.isnan(result):
        raise sdk.ToolError("Invalid expression")
    return round(result, 2)


# ------------------------------------------------------------------------------------------------
# Variant reasoning: the ground-truth solver and the near-miss measure
# ------------------------------------------------------------------------------------------------
def _fits(variant: dict, fixed: dict) -> bool:
    return all(variant["options"].get(dim) == value for dim, value in fixed.items())


def _solve(variants: list[dict], request: dict, current_id: str) -> dict | None:
    """The variant a careful agent picks for ``request``; None if the request has no single answer.

    request = {"fixed": {dim: value}, "cap": price limit or None, "pick": "only" | "cheapest",
               "fallback": another request used only when this one has no candidate}
    """
    candidates = [v for v in variants
                  if v["item_id"] != current_id and v["available"] and _fits(v, request["fixed"])
                  and (request.get("cap") is None or v["price"] <= request["cap"])]
    if not candidates:
        return _solve(variants, request["fallback"], current_id) if request.get("fallback") else None
    if request["pick"] == "cheapest":
        return min(candidates, key=lambda v: v["price"])
    return candidates[0] if len(candidates) == 1 else None


def _fit_fraction(variant: dict, variants: list[dict], request: dict, current_id: str) -> float:
    """Share of the request's checks a (wrong) variant passes: options, stock, price cap, cheapest."""
    checks = [variant["options"].get(dim) == value for dim, value in request["fixed"].items()]
    checks.append(bool(variant["available"]))
    if request.get("cap") is not None:
        checks.append(variant["price"] <= request["cap"])
    if request["pick"] == "cheapest":
        pool = [v["price"] for v in variants
                if v["item_id"] != current_id and v["available"] and _fits(v, request["fixed"])]
        checks.append(bool(pool) and variant["price"] <= min(pool))
    score = sum(checks) / len(checks)
    if request.get("fallback"):
        score = max(score, _fit_fraction(variant, variants, request["fallback"], current_id))
    return score


def _first_with(variants: list[dict], current_id: str, dim: str, value: str) -> dict | None:
    """What a skimming agent picks: the first listed variant that has the most salient option."""
    return next((v for v in variants if v["item_id"] != current_id and v["options"][dim] == value), None)


# ------------------------------------------------------------------------------------------------
# The scripted customer
# ------------------------------------------------------------------------------------------------
_ASKS_IDENTITY = re.compile(r"\b(e-?mail address|your e-?mail|zip ?code|your (?:full )?name|postal code|"
                            r"verify your identity|authenticat)", re.I)
_ASKS_ORDER = re.compile(r"\b(which order|what order|which of your orders|(?:the|your) order (?:id|number)s?)\b(?!\s*#)",
                         re.I)
_ASKS_PAYMENT = re.compile(r"\b((?:which|what) (?:payment|card|method)|how would you like to (?:pay|be refunded|"
                           r"receive)|payment method (?:would|do|should|to use|for the)|charge or refund)", re.I)
_ASKS_ALL_ITEMS = re.compile(r"\b(all (?:the )?items|every item|only item|any other items?|other items? (?:to|you)|"
                             r"anything else (?:to|you(?:'d| would) like to) (?:exchange|change|modify))", re.I)
_ASKS_CONFIRM = re.compile(r"\b(confirm|proceed|go ahead|shall i|should i|would you like me to|do you want me to|"
                           r"is that (?:ok|okay|correct|right)|yes or no|sound good)\b", re.I)
_ASKS_ANYTHING_ELSE = re.compile(r"\b(anything else|something else|any other questions?)\b", re.I)
MAX_USER_TURNS = 10


def _customer_reply(episode: sdk.Episode, agent_text: str) -> sdk.UserReply:
    """Deterministic customer: answers what is asked from scenario.user, confirms, and closes.

    Several questions in one agent message get several answers in one reply. A question it cannot map
    to a fact gets the request restated (twice at most); a message without a question ends the chat.
    """
    user = episode.scenario.user
    if episode.user_turns >= MAX_USER_TURNS:
        return sdk.UserReply(user["closing"], done=True)
    text = (agent_text or "").strip()
    if not text:
        return sdk.UserReply("Sorry, I didn't get any answer. Can you help me with my request?")
    earlier = " ".join(m.get("content") or "" for m in episode.messages if m.get("role") == "user")
    authenticated = any(r.name.startswith("find_user_id") for r in episode.calls(ok=True))
    parts = []

    def answer(key: str) -> None:
        if user.get(key) and earlier.count(user[key]) < 2:
            parts.append(user[key])

    if _ASKS_IDENTITY.search(text) and not authenticated:
        answer("identity_reply")
    if _ASKS_ORDER.search(text):
        answer("order_reply")
    if _ASKS_PAYMENT.search(text):
        answer("payment_reply")
    if _ASKS_ALL_ITEMS.search(text):
        answer("items_reply")
    if _ASKS_CONFIRM.search(text):
        parts.append(user["confirm_reply"])
    if parts:
        return sdk.UserReply(" ".join(parts))
    if "?" in text and not _ASKS_ANYTHING_ELSE.search(text) and earlier.count(user["restate"]) < 2:
        return sdk.UserReply(user["restate"])
    return sdk.UserReply(user["closing"], done=True)


# ------------------------------------------------------------------------------------------------
# The env
# ------------------------------------------------------------------------------------------------
class StructuredDataReasoningEnv(sdk.TaskEnv):
    capability = "structured_data_reasoning"
    target = "tau2-retail"
    description = (
        "Reasoning over nested structured tool results. A retail customer asks to exchange (delivered order) "
        "or modify (pending order) one item into another variant of the same product, stating constraints "
        "over its options: exact option changes while keeping the rest, the cheapest in-stock variant with a "
        "given option, a price ceiling, a first choice with a fallback when it is sold out, or 'one size up' "
        "relative to the current item. The agent must read get_product_details' nested variants dict and "
        "check every variant's options, availability and price. Full credit needs the exact item id placed "
        "with the right payment method and the price difference told to the customer; a near miss (right "
        "colour wrong size, right options but sold out) earns partial credit."
    )
    tool_names = [
        "find_user_id_by_email",
        "find_user_id_by_name_zip",
        "get_user_details",
        "get_order_details",
        "get_product_details",
        "get_item_details",
        "list_all_product_types",
        "calculate",
        "exchange_delivered_order_items",
        "modify_pending_order_items",
        "return_delivered_order_items",
        "cancel_pending_order",
        "transfer_to_human_agents",
    ]
    max_steps = 30
    write_tools = frozenset({"exchange_delivered_order_items", "modify_pending_order_items",
                             "return_delivered_order_items", "cancel_pending_order"})
    terminal_tools = frozenset({"transfer_to_human_agents"})

    # --- scenario generation ---------------------------------------------------------------------
    def generate(self, seed: int) -> sdk.Scenario:
        rng = self.rng(seed)
        for _ in range(200):  # rare constructions that turn out ambiguous are redrawn from the same rng
            scenario = self._attempt(rng, seed)
            if scenario is not None:
                return scenario
        raise RuntimeError("could not build an unambiguous scenario")  # pragma: no cover

    def _attempt(self, rng, seed: int) -> sdk.Scenario | None:
        used: set = set()
        kind = rng.choice(KINDS)
        delivered = rng.random() < 0.5
        specs = rng.sample(CATALOG, rng.randint(6, 9))
        spec = specs[0]
        if kind == "step" and not spec["ordered"]:
            return None
        variants = _random_variants(rng, spec, rng.randint(9, 18), used)
        current = rng.choice(variants)
        request, salient, wording = self._build_request(rng, kind, spec, variants, current, used)
        if request is None:
            return None
        answer = _solve(variants, request, current["item_id"])
        decoy = _first_with(variants, current["item_id"], *salient)
        if answer is None or decoy is None or decoy is answer or answer["item_id"] != request["intended"]:
            return None

        # --- the catalogue: the target product plus a few others for the rest of the orders
        products: dict = {}
        target_product = _product_record(spec["name"], _fresh_digits(rng, used, 10), variants)
        others = []
        for extra in specs[1:]:
            record = _product_record(extra["name"], _fresh_digits(rng, used, 10),
                                     _random_variants(rng, extra, rng.randint(5, 12), used))
            others.append(record)
        catalogue = [target_product] + others
        rng.shuffle(catalogue)
        for record in catalogue:
            products[record["product_id"]] = record

        # --- the customer, their orders, and a few other customers
        names: set = set()
        kinds = rng.choice([["credit_card"], ["paypal"], ["gift_card", "credit_card"], ["credit_card", "paypal"],
                            ["paypal", "credit_card", "gift_card"], ["credit_card", "credit_card"]])
        user = _make_user(rng, used, names, kinds)
        method_id = rng.choice(list(user["payment_methods"]))
        method = user["payment_methods"][method_id]
        difference = round(answer["price"] - current["price"], 2)
        if method["source"] == "gift_card":
            method["balance"] = float(max(method["balance"], math.ceil(max(difference, 0)) + rng.randint(20, 150)))

        filler = [_order_item(p, rng.choice(list(p["variants"].values()))) for p in rng.sample(others, rng.randint(0, 2))]
        items = filler + [_order_item(target_product, current)]
        rng.shuffle(items)
        target = _make_order(rng, used, user, items, "delivered" if delivered else "pending", method_id)
        orders = [target]
        for other in rng.sample(others, rng.randint(1, 3)):
            status = rng.choice(["pending", "processed", "delivered", "cancelled"])
            pick = _order_item(other, rng.choice(list(other["variants"].values())))
            orders.append(_make_order(rng, used, user, [pick], status, rng.choice(list(user["payment_methods"]))))
        rng.shuffle(orders)
        user["orders"] = [o["order_id"] for o in orders]

        users = [user]
        for _ in range(rng.randint(2, 4)):
            someone = _make_user(rng, used, names, rng.choice([["credit_card"], ["paypal"], ["gift_card", "paypal"]]))
            other = rng.choice(catalogue)
            order = _make_order(rng, used, someone, [_order_item(other, rng.choice(list(other["variants"].values())))],
                                rng.choice(["pending", "delivered", "processed"]), next(iter(someone["payment_methods"])))
            someone["orders"] = [order["order_id"]]
            users.append(someone)
            orders.append(order)
        rng.shuffle(users)
        state = {"products": products,
                 "users": {u["user_id"]: u for u in users},
                 "orders": {o["order_id"]: o for o in orders}}

        # --- ground truth: replay the right action on a copy with the store's own logic
        tool = "exchange_delivered_order_items" if delivered else "modify_pending_order_items"
        expected = copy.deepcopy(state)
        action = _exchange if delivered else _modify_items
        action(expected, target["order_id"], [current["item_id"]], [answer["item_id"]], method_id)
        request = {k: v for k, v in request.items() if k != "intended"}
        truth = {
            "user_id": user["user_id"],
            "order_id": target["order_id"],
            "product_id": target_product["product_id"],
            "tool": tool,
            "old_item_id": current["item_id"],
            "new_item_id": answer["item_id"],
            "payment_method_id": method_id,
            "price_difference": difference,
            "request": request,
            "salient": list(salient),
            "expected_order": expected["orders"][target["order_id"]],
            "expected_user": expected["users"][user["user_id"]],
        }
        user_side = self._customer(rng, user, target, spec["name"], wording, method, delivered)
        meta = {"variant": kind, "action": "exchange" if delivered else "modify",
                "n_variants": len(variants), "order_id_known": user_side["knows_order_id"]}
        return sdk.Scenario(seed=seed, state=state, user=user_side, truth=truth, meta=meta)

    # Each builder edits the random variant list so that the request has exactly one answer, a sold-out
    # or almost-matching lookalike exists, and the first variant carrying the salient option is wrong.
    def _build_request(self, rng, kind, spec, variants, current, used):
        dims = list(spec["options"])
        cur = current["options"]
        protected = {current["item_id"]}

        def ensure(options: dict, available: bool | None = None) -> dict:
            """The variant with exactly these options, created (by re-labelling a spare one) if missing."""
            found = next((v for v in variants if v["options"] == options), None)
            if found is None:
                spare = [v for v in variants if v["item_id"] not in protected]
                found = rng.choice(spare)
                found["options"] = dict(options)
            if available is not None:
                found["available"] = available
            protected.add(found["item_id"])
            return found

        def place_before(first: dict, second: dict) -> None:
            variants.remove(first)
            variants.insert(variants.index(second), first)

        def other_value(dim: str, *avoid: str) -> str | None:
            choices = [x for x in spec["options"][dim] if x not in avoid]
            return rng.choice(choices) if choices else None

        if kind == "exact_change":
            changed = rng.sample(dims, rng.choice([1, 2]))
            wanted = dict(cur)
            for dim in changed:
                wanted[dim] = other_value(dim, cur[dim])
            target = ensure(wanted, True)
            spot = rng.choice([d for d in dims if d != changed[0]])
            look = dict(wanted, **{spot: other_value(spot, wanted[spot])})
            lookalike = ensure(look, rng.random() < 0.75)
            place_before(lookalike, target)
            request = {"fixed": wanted, "cap": None, "pick": "only", "intended": target["item_id"]}
            change_text = " and ".join(_phrase(d, wanted[d]) for d in changed)
            wording = rng.choice([
                f"I'd like the same {spec['name']} but {change_text}; everything else should stay exactly as it is.",
                f"Could I switch it to one {change_text}? Keep all the other options the same as mine.",
                f"I want it {change_text} instead, with every other option unchanged.",
            ])
            return request, (changed[0], wanted[changed[0]]), wording

        if kind in ("cheapest", "budget"):
            salient = "color" if "color" in dims and rng.random() < 0.6 else rng.choice(dims)
            value = other_value(salient, cur[salient])
            fixed = {salient: value}
            free = [d for d in dims if d != salient]
            keep = rng.choice(free) if rng.random() < 0.6 else None
            if keep and math.prod(len(spec["options"][d]) for d in free if d != keep) >= 3:
                fixed[keep] = cur[keep] if kind == "cheapest" or rng.random() < 0.5 else other_value(keep)
            # at least three variants carry the fixed options
            pool = [combo for combo in itertools.product(*[spec["options"][d] for d in dims])
                    if all(dict(zip(dims, combo))[d] == v for d, v in fixed.items())]
            rng.shuffle(pool)
            for combo in pool:
                if len([v for v in variants if _fits(v, fixed)]) >= 3:
                    break
                ensure(dict(zip(dims, combo)))
            matching = sorted([v for v in variants if _fits(v, fixed)], key=lambda v: v["price"])
            if len(matching) < 3:
                return None, None, None
            sold_out_first = rng.random() < 0.7
            for v in matching:
                v["available"] = rng.random() < 0.6
            answer_at = 1 if sold_out_first else 0
            for v in matching[:answer_at]:
                v["available"] = False  # a cheaper lookalike that is sold out
            answer = matching[answer_at]
            answer["available"] = True
            rng.choice(matching[answer_at + 1:])["available"] = True  # a pricier one that is in stock
            request = {"fixed": fixed, "cap": None, "pick": "cheapest", "intended": answer["item_id"]}
            keep_text = "".join(f", and it must stay {_phrase(d, fixed[d])}" for d in fixed if d != salient and fixed[d] == cur[d])
            keep_text += "".join(f", and {_phrase(d, fixed[d])}" for d in fixed if d != salient and fixed[d] != cur[d])
            if kind == "cheapest":
                wording = rng.choice([
                    f"I'd like the cheapest one {_phrase(salient, value)} that you actually have in stock{keep_text}.",
                    f"Please swap it for whichever version {_phrase(salient, value)} is the least expensive and available{keep_text}.",
                    f"Other options don't matter much: I just want it {_phrase(salient, value)}{keep_text}, at the lowest price you can do among what's in stock.",
                ])
            else:
                nxt = next((v for v in matching[answer_at + 1:] if v["available"]), None)
                if nxt["price"] - answer["price"] < 2.0:
                    nxt["price"] = round(answer["price"] + rng.uniform(2.0, 9.0), 2)
                    if sum(1 for v in variants if v["price"] == nxt["price"]) > 1:
                        return None, None, None
                cap = rng.randint(math.floor(answer["price"]) + 1, math.ceil(nxt["price"]) - 1)
                if rng.random() < 0.6:
                    for v in matching:
                        if not v["available"] and v["price"] > cap:
                            v["price"] = round(rng.uniform(answer["price"] - 6.0, cap - 0.01), 2)
                            break
                if len({v["price"] for v in variants}) != len(variants):
                    return None, None, None
                request = {"fixed": fixed, "cap": float(cap), "pick": "only", "intended": answer["item_id"]}
                wording = rng.choice([
                    f"I want one {_phrase(salient, value)}{keep_text}, but it has to cost less than ${cap}.",
                    f"My budget is ${cap} for it: I'd like it {_phrase(salient, value)}{keep_text}, and it needs to be in stock.",
                    f"Can you find me one {_phrase(salient, value)}{keep_text} that's under ${cap}?",
                ])
            decoys = [v for v in variants if v["options"][salient] == value and v is not answer
                      and v["item_id"] != current["item_id"]]
            if not decoys:
                return None, None, None
            place_before(rng.choice(decoys), answer)
            return request, (salient, value), wording

        if kind == "fallback":
            dims3 = [d for d in dims if len(spec["options"][d]) >= 3]
            if not dims3:
                return None, None, None
            dim = rng.choice(dims3)
            first_choice = other_value(dim, cur[dim])
            second_choice = other_value(dim, cur[dim], first_choice)
            primary = ensure(dict(cur, **{dim: first_choice}), False)
            backup = ensure(dict(cur, **{dim: second_choice}), True)
            if rng.random() < 0.5:
                place_before(primary, backup)  # the skimmer lands on the sold-out first choice
            else:  # or on an in-stock variant with the first-choice value but other options changed
                spot = rng.choice([d for d in dims if d != dim])
                look = ensure(dict(cur, **{dim: first_choice, spot: other_value(spot, cur[spot])}), True)
                place_before(look, primary)
            request = {"fixed": dict(cur, **{dim: first_choice}), "cap": None, "pick": "only",
                       "fallback": {"fixed": dict(cur, **{dim: second_choice}), "cap": None, "pick": "only"},
                       "intended": backup["item_id"]}
            wording = rng.choice([
                f"I'd like it {_phrase(dim, first_choice)}, everything else the same. If that one is sold out, "
                f"then {_phrase(dim, second_choice)} with the rest unchanged.",
                f"My first choice is {_phrase(dim, first_choice)} (same other options as mine); if you don't have it "
                f"in stock, I'll take it {_phrase(dim, second_choice)} instead.",
            ])
            return request, (dim, first_choice), wording

        # kind == "step": one size (capacity, ...) up or down, every other option unchanged
        dim = rng.choice(spec["ordered"])
        scale = spec["options"][dim]
        index = scale.index(cur[dim])
        directions = [d for d in (1, -1) if 0 <= index + d < len(scale)]
        step = rng.choice(directions)
        wanted = dict(cur, **{dim: scale[index + step]})
        target = ensure(wanted, True)
        spot = rng.choice([d for d in dims if d != dim])
        lookalike = ensure(dict(wanted, **{spot: other_value(spot, wanted[spot])}), rng.random() < 0.8)
        place_before(lookalike, target)
        word = "up" if step > 0 else "down"
        request = {"fixed": wanted, "cap": None, "pick": "only", "intended": target["item_id"]}
        wording = rng.choice([
            f"The {dim} is wrong: I need the next {dim} {'up' if step > 0 else 'down'} from the one I have, and "
            f"everything else exactly the same.",
            f"Could I get it one step {word} in {dim}? All the other options should match what I have now.",
            f"Please swap it for the same thing one {dim} {'up' if step > 0 else 'down'} from mine, nothing else changed.",
        ])
        return request, (dim, wanted[dim]), wording

    def _customer(self, rng, user, order, product_name, wording, method, delivered) -> dict:
        first, last = user["name"]["first_name"], user["name"]["last_name"]
        knows_email = rng.random() < 0.7
        knows_order_id = rng.random() < 0.5
        if knows_email:
            identity = rng.choice([f"Sure, my email is {user['email']}.", f"It's {user['email']}."])
        else:
            identity = (f"I don't remember which email I used, sorry. My name is {first} {last} and my zip code "
                        f"is {user['address']['zip']}.")
        if delivered:
            opener = rng.choice([
                f"Hi! I received my {product_name} and would like to exchange it for a different version.",
                f"Hello, I want to exchange the {product_name} from one of my delivered orders.",
            ])
        else:
            opener = rng.choice([
                f"Hi, I placed an order that hasn't shipped yet and I'd like to change the {product_name} in it.",
                f"Hello! Before my order ships, can you switch the {product_name} I ordered to another version?",
            ])
        where = f" It's order {order['order_id']}." if knows_order_id else ""
        pay = (f"Any price difference should go on the {_describe_method(method)} I paid with.")
        return {
            "persona": rng.choice(["polite and brief", "chatty but clear", "in a hurry"]),
            "knows_email": knows_email,
            "knows_order_id": knows_order_id,
            "first_message": f"{opener}{where} {wording} {pay}",
            "identity_reply": identity,
            "order_reply": (f"The order id is {order['order_id']}." if knows_order_id
                            else f"I don't have the order number handy; it's the order with the {product_name} in it."),
            "payment_reply": pay,
            "items_reply": f"Yes, the {product_name} is the only item I want to change.",
            "confirm_reply": "Yes, please go ahead.",
            "restate": f"To recap what I want: {wording}",
            "closing": "Great, thanks for your help!",
        }

    # --- prompts -------------------------------------------------------------------------------------
    def system_prompt(self, scenario: sdk.Scenario) -> str:
        return ("You are a customer-service agent for an online retail store. You help customers through "
                "the tools you are given and follow the store policy below.\n\n" + POLICY)

    def first_user_message(self, scenario: sdk.Scenario) -> str:
        return scenario.user["first_message"]

    def user_reply(self, episode: sdk.Episode, agent_text: str) -> sdk.UserReply:
        return _customer_reply(episode, agent_text)

    # --- tools (the store API, in the target's record shapes and error messages) ------------------
    @sdk.tool
    def find_user_id_by_email(self, state, email):
        for user_id, user in state["users"].items():
            if user["email"].lower() == email.lower():
                return user_id
        raise sdk.ToolError("User not found")

    @sdk.tool
    def find_user_id_by_name_zip(self, state, first_name, last_name, zip):
        for user_id, user in state["users"].items():
            name = user["name"]
            if (name["first_name"].lower() == first_name.lower() and name["last_name"].lower() == last_name.lower()
                    and user["address"]["zip"] == zip):
                return user_id
        raise sdk.ToolError("User not found")

    @sdk.tool
    def get_user_details(self, state, user_id):
        if user_id not in state["users"]:
            raise sdk.ToolError("User not found")
        return state["users"][user_id]

    @sdk.tool
    def get_order_details(self, state, order_id):
        return _order(state, order_id)

    @sdk.tool
    def get_product_details(self, state, product_id):
        if product_id not in state["products"]:
            raise sdk.ToolError("Product not found")
        return state["products"][product_id]

    @sdk.tool
    def get_item_details(self, state, item_id):
        for product in state["products"].values():
            if item_id in product["variants"]:
                return product["variants"][item_id]
        raise sdk.ToolError("Item not found")

    @sdk.tool
    def list_all_product_types(self, state):
        return {p["name"]: p["product_id"] for p in sorted(state["products"].values(), key=lambda p: p["name"])}

    @sdk.tool
    def calculate(self, state, expression):
        return str(_calculate(expression))

    @sdk.tool
    def exchange_delivered_order_items(self, state, order_id, item_ids, new_item_ids, payment_method_id):
        return _exchange(state, order_id, list(item_ids), list(new_item_ids), payment_method_id)

    @sdk.tool
    def modify_pending_order_items(self, state, order_id, item_ids, new_item_ids, payment_method_id):
        return _modify_items(state, order_id, list(item_ids), list(new_item_ids), payment_method_id)

    @sdk.tool
    def return_delivered_order_items(self, state, order_id, item_ids, payment_method_id):
        return _return(state, order_id, list(item_ids), payment_method_id)

    @sdk.tool
    def cancel_pending_order(self, state, order_id, reason):
        return _cancel(state, order_id, reason)

    @sdk.tool
    def transfer_to_human_agents(self, state, summary):
        return "Transfer successful"

    # --- reward --------------------------------------------------------------------------------------
    def evaluate(self, episode: sdk.Episode) -> sdk.Reward:
        scenario, truth = episode.scenario, episode.scenario.truth
        initial, final = scenario.state, episode.state
        order_id, user_id = truth["order_id"], truth["user_id"]
        variants = list(initial["products"][truth["product_id"]]["variants"].values())

        # Which replacement did each swap attempt pick for the item in question?
        choice, fits = 0.0, []
        for record in episode.tool_log:
            if record.name not in ("exchange_delivered_order_items", "modify_pending_order_items"):
                continue
            olds, news = record.arguments.get("item_ids"), record.arguments.get("new_item_ids")
            if not (isinstance(olds, list) and isinstance(news, list)) or truth["old_item_id"] not in olds:
                continue
            position = olds.index(truth["old_item_id"])
            picked = news[position] if position < len(news) else None
            if picked == truth["new_item_id"] and record.ok and record.arguments.get("order_id") == order_id:
                choice = 1.0
            variant = initial["products"][truth["product_id"]]["variants"].get(picked) if isinstance(picked, str) else None
            if variant is not None and picked != truth["new_item_id"]:
                fits.append(_fit_fraction(variant, variants, truth["request"], truth["old_item_id"]))
        if choice < 1.0 and fits:
            choice = 0.5 * max(fits)  # a near miss: right colour wrong size, right options but sold out, ...

        placed = [r for r in episode.calls(truth["tool"], ok=True) if r.arguments.get("order_id") == order_id]
        payment_ok = float(any(r.arguments.get("payment_method_id") == truth["payment_method_id"] for r in placed))
        state_ok = float(final["orders"].get(order_id) == truth["expected_order"]
                         and final["users"].get(user_id) == truth["expected_user"])
        difference = abs(truth["price_difference"])
        told = float(episode.said(difference) or episode.said(-difference))

        writes = [r for r in episode.tool_log if r.name in self.write_tools]
        first_write = episode.tool_log.index(writes[0]) if writes else len(episode.tool_log)
        authenticated = float(any(r.name.startswith("find_user_id") and r.ok and r.result == user_id
                                  for r in episode.tool_log[:first_write]))

        # Gate: nothing else in the store may change, and no other kind of write may succeed.
        untouched = (all(final["orders"].get(k) == v for k, v in initial["orders"].items() if k != order_id)
                     and all(final["users"].get(k) == v for k, v in initial["users"].items() if k != user_id)
                     and final["products"] == initial["products"])
        stray = any(r.name != truth["tool"] or r.arguments.get("order_id") != order_id
                    for r in episode.write_calls(self.write_tools))
        return sdk.Reward(
            components={"variant_choice": choice, "state_match": state_ok, "price_difference_told": told,
                        "payment_method": payment_ok, "authenticated": authenticated},
            weights={"variant_choice": 3.0, "state_match": 2.0, "price_difference_told": 1.0,
                     "payment_method": 0.5, "authenticated": 0.5},
            gates={"no_collateral_write": float(untouched and not stray)},
            notes={"expected_item": truth["new_item_id"], "variant": scenario.meta["variant"]},
        )

    # --- solutions -----------------------------------------------------------------------------------
    def _solution(self, scenario: sdk.Scenario, new_item_id: str) -> list[sdk.Turn]:
        """Authenticate, find the order, read the product, confirm with the price difference, act."""
        state, truth, user = scenario.state, scenario.truth, scenario.user
        customer = state["users"][truth["user_id"]]
        product = state["products"][truth["product_id"]]
        old = product["variants"][truth["old_item_id"]]
        new = product["variants"][new_item_id]
        method = customer["payment_methods"][truth["payment_method_id"]]
        difference = round(new["price"] - old["price"], 2)
        turns = [sdk.say("I'd be glad to help. First I need to verify your identity: could you tell me the "
                         "email address on your account?")]
        if user["knows_email"]:
            turns.append(sdk.call("find_user_id_by_email", email=customer["email"]))
        else:
            turns.append(sdk.call("find_user_id_by_name_zip", first_name=customer["name"]["first_name"],
                                  last_name=customer["name"]["last_name"], zip=customer["address"]["zip"]))
        turns.append(sdk.call("get_user_details", user_id=customer["user_id"]))
        if user["knows_order_id"]:
            turns.append(sdk.call("get_order_details", order_id=truth["order_id"]))
        else:  # look through the customer's orders until the one holding the product
            for order_id in customer["orders"]:
                turns.append(sdk.call("get_order_details", order_id=order_id))
                if order_id == truth["order_id"]:
                    break
        turns.append(sdk.call("get_product_details", product_id=product["product_id"]))
        options = ", ".join(f"{k}: {v}" for k, v in new["options"].items())
        direction = "charged to" if difference > 0 else "refunded to"
        verb = "exchange" if truth["tool"].startswith("exchange") else "change"
        turns.append(sdk.say(
            f"Here is what I can do on order {truth['order_id']}: {verb} your {product['name']} (item "
            f"{old['item_id']}, {_money(old['price'])}) for item {new['item_id']} ({options}), which costs "
            f"{_money(new['price'])}. The price difference of {_money(abs(difference))} will be {direction} your "
            f"{_describe_method(method)}. Please confirm this is the only item to change, and shall I proceed?"))
        tool = truth["tool"]
        turns.append(sdk.call(tool, order_id=truth["order_id"], item_ids=[old["item_id"]],
                              new_item_ids=[new["item_id"]], payment_method_id=method["id"]))
        if tool.startswith("exchange"):
            turns.append(sdk.say("All done: the exchange has been requested. You'll receive an email explaining "
                                 "how to send back the old item."))
        else:
            turns.append(sdk.say("All done: your pending order has been updated with the new item."))
        return turns

    def reference_solution(self, scenario: sdk.Scenario) -> list[sdk.Turn]:
        return self._solution(scenario, scenario.truth["new_item_id"])

    def capability_skipping_solution(self, scenario: sdk.Scenario) -> list[sdk.Turn]:
        """Same conversation, but it takes the first listed variant carrying the salient option value."""
        truth = scenario.truth
        variants = list(scenario.state["products"][truth["product_id"]]["variants"].values())
        pick = _first_with(variants, truth["old_item_id"], *truth["salient"])
        return self._solution(scenario, pick["item_id"])


def _phrase(dim: str, value: str) -> str:
    """How a customer names one option value: 'in blue', 'in size L', 'with material leather'."""
    if dim == "color":
        return f"in {value}"
    if dim == "size":
        return f"in size {value}"
    return f"with {dim} {value}"


ENV = StructuredDataReasoningEnv
