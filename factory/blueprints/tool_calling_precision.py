"""Blueprint env: tool_calling_precision on the tau2-retail target.

The customer's request is easy to understand; the difficulty is in the ARGUMENTS. Every scenario puts a
plausible lookalike next to the right value:

- return_items: the order holds two variants of the same product and the customer returns one of them;
  the refund must go to the ORIGINAL payment method (from the order's payment history) although the
  profile lists a gift card first, or to the gift card although the order was paid otherwise.
- exchange_items / modify_items: one of two same-product items changes to a fully specified variant; the
  price difference goes to a payment method named by brand and last digits, next to a lookalike of the
  same kind listed first in the profile.
- cancel_order: two pending orders share a product; only the one the customer describes may be cancelled,
  with the exact reason string the store accepts.
- modify_payment: a pending order switches to a named card or gift card, beside another of the same kind.

Order ids must carry their leading '#', even when the customer types them without it. The reward has one
component per argument (tool, order id, item ids, payment method or reason), one for the end state, and a
gate against writes to anything else.

Module layout: static data, id and record builders, the store's tool logic as plain functions (also used
by generate() to compute the expected end state), the scripted customer, and finally the env class.
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

# Product types in the store's shape: option dimensions with their values, and a price range.
CATALOG = [
    {"name": "T-Shirt", "price": (44.0, 58.0),
     "options": {"color": ["black", "blue", "purple", "red", "white"], "size": ["S", "M", "L", "XL", "XXL"],
                 "material": ["cotton", "polyester"], "style": ["crew neck", "v-neck"]}},
    {"name": "Water Bottle", "price": (44.0, 56.0),
     "options": {"capacity": ["500ml", "750ml", "1000ml"], "material": ["plastic", "glass", "stainless steel"],
                 "color": ["black", "blue", "green", "red"]}},
    {"name": "Hiking Boots", "price": (228.0, 262.0),
     "options": {"size": ["7", "8", "9", "10", "11", "12"], "material": ["leather", "synthetic"],
                 "waterproof": ["yes", "no"]}},
    {"name": "Backpack", "price": (184.0, 221.0),
     "options": {"color": ["black", "green", "grey", "navy"], "size": ["small", "medium", "large"],
                 "material": ["leather", "nylon", "polyester"], "compartment": ["camera", "hydration", "laptop"]}},
    {"name": "Mechanical Keyboard", "price": (224.0, 274.0),
     "options": {"switch type": ["clicky", "linear", "tactile"], "backlight": ["none", "white", "RGB"],
                 "size": ["60%", "80%", "full size"]}},
    {"name": "Office Chair", "price": (460.0, 546.0),
     "options": {"material": ["fabric", "leather", "mesh"], "color": ["black", "blue", "gray", "red"],
                 "armrest": ["none", "fixed", "adjustable"], "backrest height": ["standard", "high-back"]}},
    {"name": "Electric Kettle", "price": (136.0, 166.0),
     "options": {"capacity": ["1L", "1.5L", "2L"], "material": ["glass", "plastic", "stainless steel"],
                 "color": ["black", "silver", "white"]}},
    {"name": "Cycling Helmet", "price": (178.0, 221.0),
     "options": {"size": ["S", "M", "L"], "color": ["black", "blue", "red", "white"],
                 "ventilation": ["low", "medium", "high"]}},
    {"name": "Pet Bed", "price": (179.0, 216.0),
     "options": {"size": ["small", "medium", "large"], "material": ["fleece", "memory foam", "polyester"],
                 "color": ["beige", "brown", "grey"]}},
    {"name": "Running Shoes", "price": (146.0, 160.0),
     "options": {"size": ["8", "9", "10", "11"], "color": ["black", "red", "white", "yellow"],
                 "material": ["leather", "mesh", "synthetic"], "sole": ["EVA", "rubber"]}},
    {"name": "Wireless Earbuds", "price": (225.0, 269.0),
     "options": {"color": ["black", "blue", "white"], "battery life": ["4 hours", "6 hours", "8 hours"],
                 "water resistance": ["not resistant", "IPX4", "IPX7"]}},
    {"name": "Fleece Jacket", "price": (140.0, 161.0),
     "options": {"size": ["XS", "S", "M", "L", "XL"], "color": ["black", "navy", "red"], "zipper": ["full", "half"]}},
    {"name": "Portable Charger", "price": (89.0, 111.0),
     "options": {"capacity": ["5000mAh", "10000mAh", "20000mAh"], "output": ["USB-A", "USB-C", "Wireless"],
                 "color": ["black", "blue", "white"]}},
    {"name": "Desk Lamp", "price": (134.0, 166.0),
     "options": {"color": ["black", "silver", "white"], "brightness": ["low", "medium", "high"],
                 "power source": ["AC adapter", "USB", "battery"]}},
    {"name": "Yoga Mat", "price": (91.0, 107.0),
     "options": {"thickness": ["4mm", "5mm", "6mm"], "material": ["PVC", "TPE", "natural rubber"],
                 "color": ["blue", "green", "pink"]}},
    {"name": "Smart Watch", "price": (314.0, 384.0),
     "options": {"color": ["black", "gold", "silver"], "band material": ["leather", "metal", "silicone"],
                 "display": ["AMOLED", "LCD"]}},
    {"name": "Tablet", "price": (900.0, 1056.0),
     "options": {"screen size": ["7-inch", "8-inch", "10-inch"], "storage": ["32GB", "64GB", "128GB"],
                 "color": ["black", "gold", "silver"]}},
    {"name": "Skateboard", "price": (179.0, 218.0),
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

# The scenario variants.
KINDS = ["return_items", "exchange_items", "modify_items", "cancel_order", "modify_payment"]

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

Identifiers
- Order ids always start with '#', e.g. '#W1234567'; customers often leave the '#' out.
- Product ids and item ids are different 10-digit numbers. An order can contain several items of the same
  product in different variants: each has its own item id, so match items by their options.
- Payment methods have ids such as 'credit_card_1234567', 'paypal_1234567' or 'gift_card_1234567'. The
  user profile lists them; the order's payment_history shows which one paid for the order.

Cancelling a pending order
- The customer confirms the order and gives a reason, which must be exactly 'no longer needed' or
  'ordered by mistake'. The refund goes back to the payment method that paid.

Changing a pending order
- Payment: the customer picks one method that differs from the current one; a gift card needs enough
  balance for the whole order total.
- Items (once per order): each item can only become another available variant of the same product. The
  price difference is charged or refunded to the payment method the customer names; a gift card needs
  enough balance for a charge. Ask the customer to confirm that the list of items is complete.

Returning or exchanging a delivered order
- Returns: the refund goes to the original payment method of the order, or to a gift card the customer
  already has, as the customer chooses.
- Exchanges (once per order): each item can only become another available variant of the same product;
  the price difference goes to the payment method the customer names. Ask the customer to confirm that
  the list of items is complete.

Confirmation
- Before any change to the database, tell the customer exactly what will happen (order id, items,
  payment method, reason) and wait for an explicit yes.

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


def _modify_payment(state: dict, order_id: str, method_id: str) -> dict:
    order = _order(state, order_id)
    if "pending" not in order["status"]:
        raise sdk.ToolError("Non-pending order cannot be modified")
    method = _payment_method(state, order["user_id"], method_id)
    history = order["payment_history"]
    if len(history) != 1 or history[0]["transaction_type"] != "payment":
        raise sdk.ToolError("There should be exactly one payment for a pending order")
    old_id = history[0]["payment_method_id"]
    if old_id == method_id:
        raise sdk.ToolError("The new payment method should be different from the current one")
    amount = history[0]["amount"]
    if method["source"] == "gift_card" and method["balance"] < amount:
        raise sdk.ToolError("Insufficient gift card balance to pay for the order")
    history.extend([{"transaction_type": "payment", "amount": amount, "payment_method_id": method_id},
                    {"transaction_type": "refund", "amount": amount, "payment_method_id": old_id}])
    if method["source"] == "gift_card":
        method["balance"] = round(method["balance"] - amount, 2)
    old = _payment_method(state, order["user_id"], old_id)
    if old["source"] == "gift_card":
        old["balance"] = round(old["balance"] + amount, 2)
    return order


def _address(address1, address2, city, state_code, country, zip_code) -> dict:
    return {"address1": address1, "address2": address2, "city": city, "country": country,
            "state": state_code, "zip": zip_code}


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
_ASKS_REASON = re.compile(r"\b((?:what is|what's|tell me|share|provide|give me) (?:the |your )?reason|"
                          r"why (?:do|would|are) you)", re.I)
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
    if _ASKS_REASON.search(text):
        answer("reason_reply")
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
class ToolCallingPrecisionEnv(sdk.TaskEnv):
    capability = "tool_calling_precision"
    target = "tau2-retail"
    description = (
        "Precise tool arguments among lookalikes. A retail customer asks for one clear action (return items, "
        "exchange or modify an item, cancel an order, switch an order's payment method) and the agent must "
        "pass exactly the right values: the order id with its leading '#', the item id of the right variant "
        "when an order holds two variants of the same product, the ORIGINAL payment method id (from the "
        "order's payment history) or the card the customer names by brand and last digits rather than the "
        "first one in the profile, the right one of two pending orders that share a product, and a cancel "
        "reason from the two accepted strings. Each argument is a reward component, plus the end state, "
        "with a gate against writes to any other record."
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
        "cancel_pending_order",
        "exchange_delivered_order_items",
        "modify_pending_order_items",
        "modify_pending_order_payment",
        "modify_pending_order_address",
        "return_delivered_order_items",
        "modify_user_address",
        "transfer_to_human_agents",
    ]
    max_steps = 30
    write_tools = frozenset({"cancel_pending_order", "exchange_delivered_order_items", "modify_pending_order_items",
                             "modify_pending_order_payment", "modify_pending_order_address",
                             "return_delivered_order_items", "modify_user_address"})
    terminal_tools = frozenset({"transfer_to_human_agents"})

    TOOL_OF = {"return_items": "return_delivered_order_items", "exchange_items": "exchange_delivered_order_items",
               "modify_items": "modify_pending_order_items", "cancel_order": "cancel_pending_order",
               "modify_payment": "modify_pending_order_payment"}

    # --- scenario generation ---------------------------------------------------------------------
    def generate(self, seed: int) -> sdk.Scenario:
        rng = self.rng(seed)
        for _ in range(200):  # a draw that cannot host the lookalikes is redrawn from the same rng
            scenario = self._attempt(rng, seed)
            if scenario is not None:
                return scenario
        raise RuntimeError("could not build a scenario")  # pragma: no cover

    def _attempt(self, rng, seed: int) -> sdk.Scenario | None:
        used: set = set()
        names: set = set()
        kind = rng.choice(KINDS)
        specs = rng.sample(CATALOG, rng.randint(7, 10))
        products = [_product_record(spec["name"], _fresh_digits(rng, used, 10),
                                    _random_variants(rng, spec, rng.randint(6, 14), used)) for spec in specs]
        twin, others = products[0], products[1:]  # ``twin``: the product that appears twice
        twin_variants = list(twin["variants"].values())

        # --- the customer and their payment methods (the lookalike is always listed first)
        said = None  # which kind of method the customer names: what a careless agent keys on
        if kind == "return_items":
            said = rng.choice(["original", "gift_card"])
            rest = rng.sample(["credit_card", "paypal", "credit_card"], rng.randint(1, 2))
            methods = ["gift_card"] + rest if said == "original" else rest[:1] + ["gift_card"] + rest[1:]
        elif kind in ("exchange_items", "modify_items", "modify_payment"):
            choices = ["credit_card", "gift_card"] + (["paypal"] if kind != "modify_payment" else [])
            said = rng.choice(choices)
            pair = [said, said] if said != "paypal" else ["paypal"]
            extra = [k for k in ("credit_card", "paypal", "gift_card") if k != said]
            methods = pair + rng.sample(extra, rng.randint(1, 2))
            lead = methods[0]
            methods = [lead] + rng.sample(methods[1:], len(methods) - 1)
        else:
            methods = rng.sample(["credit_card", "paypal", "gift_card", "credit_card"], rng.randint(1, 3))
        user = _make_user(rng, used, names, methods)
        ids = list(user["payment_methods"])
        records = user["payment_methods"]
        of_kind = {k: [i for i in ids if records[i]["source"] == k] for k in ("credit_card", "paypal", "gift_card")}

        if kind == "return_items":
            if said == "original":
                original = rng.choice([i for i in ids if records[i]["source"] != "gift_card"])
                target_method = original
            else:
                original = ids[0]
                target_method = of_kind["gift_card"][0]
        elif kind in ("exchange_items", "modify_items", "modify_payment"):
            target_method = of_kind[said][-1]  # the second one of its kind when there are two
            lookalike = of_kind[said][0]
            if said == "credit_card":
                if rng.random() < 0.5:
                    records[target_method]["brand"] = records[lookalike]["brand"]
                if records[target_method]["last_four"] == records[lookalike]["last_four"]:
                    return None
            if said == "gift_card" and target_method[-4:] == lookalike[-4:]:
                return None
            original = rng.choice([i for i in ids if i != target_method])
        else:
            original = rng.choice(ids)
            target_method = None

        # --- the target order (and, for cancel_order, its lookalike)
        def pick(product):
            return _order_item(product, rng.choice(list(product["variants"].values())))

        extras = rng.sample(others, 3)
        spare = [p for p in others if p not in extras]
        lookalike_order = None
        new_item = None
        if kind in ("return_items", "exchange_items", "modify_items"):
            if len(twin_variants) < 3:
                return None
            first, second = rng.sample(twin_variants, 2)
            differing = [d for d in first["options"] if first["options"][d] != second["options"][d]]
            distinguish = rng.choice(differing)
            fillers = [pick(p) for p in extras[: rng.randint(1, 2)]]
            items = fillers + [_order_item(twin, first)]
            rng.shuffle(items)
            at = rng.randint(items.index(next(i for i in items if i["item_id"] == first["item_id"])) + 1, len(items))
            items.insert(at, _order_item(twin, second))  # the wanted twin comes after its lookalike
            status = "delivered" if kind != "modify_items" else "pending"
            order = _make_order(rng, used, user, items, status, original)
            wanted = [second["item_id"]]
            if kind == "return_items" and rng.random() < 0.5:
                wanted.append(fillers[0]["item_id"])
            if kind != "return_items":
                choices = [v for v in twin_variants if v["item_id"] not in (first["item_id"], second["item_id"])]
                new_item = rng.choice(choices)
                new_item["available"] = True
        elif kind == "cancel_order":
            first, second = rng.sample(twin_variants, 2) if len(twin_variants) > 1 else (twin_variants[0],) * 2
            mine = [_order_item(twin, second), pick(extras[0])]
            theirs = [_order_item(twin, first), pick(extras[1])]
            rng.shuffle(mine)
            rng.shuffle(theirs)
            order = _make_order(rng, used, user, mine, "pending", original)
            lookalike_order = _make_order(rng, used, user, theirs, "pending", rng.choice(ids))
            wanted, distinguish = [], None
        else:  # modify_payment
            items = [pick(p) for p in extras[: rng.randint(1, 3)]]
            order = _make_order(rng, used, user, items, "pending", original)
            wanted, distinguish = [], None

        # Gift cards named by the customer must cover what they pay for.
        if target_method and records[target_method]["source"] == "gift_card":
            need = order["payment_history"][0]["amount"] if kind == "modify_payment" else 0.0
            if new_item is not None:
                need = max(0.0, new_item["price"] - second["price"])
            records[target_method]["balance"] = float(math.ceil(need) + rng.randint(20, 200))

        # --- the customer's other orders and a few other customers
        orders = [order] + ([lookalike_order] if lookalike_order else [])
        for product in rng.sample(spare, min(len(spare), rng.randint(1, 3))):
            status = rng.choice(["pending", "processed", "delivered", "cancelled"])
            orders.append(_make_order(rng, used, user, [pick(product)], status, rng.choice(ids)))
        rng.shuffle(orders)
        if lookalike_order and orders.index(lookalike_order) > orders.index(order):
            a, b = orders.index(lookalike_order), orders.index(order)
            orders[a], orders[b] = orders[b], orders[a]
        user["orders"] = [o["order_id"] for o in orders]
        users = [user]
        for _ in range(rng.randint(2, 4)):
            someone = _make_user(rng, used, names, rng.choice([["credit_card"], ["paypal"], ["gift_card", "paypal"]]))
            theirs = _make_order(rng, used, someone, [pick(rng.choice(products))],
                                 rng.choice(["pending", "delivered", "processed"]), next(iter(someone["payment_methods"])))
            someone["orders"] = [theirs["order_id"]]
            users.append(someone)
            orders.append(theirs)
        rng.shuffle(users)
        rng.shuffle(products)
        state = {"products": {p["product_id"]: p for p in products},
                 "users": {u["user_id"]: u for u in users},
                 "orders": {o["order_id"]: o for o in orders}}

        # --- ground truth: replay the right call on a copy with the store's own logic
        tool = self.TOOL_OF[kind]
        call = {"order_id": order["order_id"]}
        reason = None
        if kind == "return_items":
            call.update(item_ids=sorted(wanted), payment_method_id=target_method)
        elif kind in ("exchange_items", "modify_items"):
            call.update(item_ids=wanted, new_item_ids=[new_item["item_id"]], payment_method_id=target_method)
        elif kind == "cancel_order":
            reason = rng.choice(["no longer needed", "ordered by mistake"])
            call.update(reason=reason)
        else:
            call.update(payment_method_id=target_method)
        expected = copy.deepcopy(state)
        self.tool_method(tool)(expected, **call)
        truth = {
            "kind": kind,
            "tool": tool,
            "call": call,
            "user_id": user["user_id"],
            "order_id": order["order_id"],
            "payment_said": said,
            "twin_name": twin["name"],
            "twin_product_id": twin["product_id"],
            "lookalike_order_id": lookalike_order["order_id"] if lookalike_order else None,
            "expected_order": expected["orders"][order["order_id"]],
            "expected_user": expected["users"][user["user_id"]],
        }
        order_ref = "none" if kind == "cancel_order" else rng.choice(["hash", "bare", "none"])
        user_side = self._customer(rng, kind, state, truth, order_ref, distinguish, reason, new_item)
        meta = {"variant": kind, "order_ref": order_ref, "payment_said": said,
                "n_payment_methods": len(ids), "n_orders": len(user["orders"])}
        return sdk.Scenario(seed=seed, state=state, user=user_side, truth=truth, meta=meta)

    def _customer(self, rng, kind, state, truth, order_ref, distinguish, reason, new_item) -> dict:
        user = state["users"][truth["user_id"]]
        order = state["orders"][truth["order_id"]]
        call = truth["call"]
        first, last = user["name"]["first_name"], user["name"]["last_name"]
        knows_email = rng.random() < 0.7
        if knows_email:
            identity = rng.choice([f"Sure, my email is {user['email']}.", f"It's {user['email']}."])
        else:
            identity = (f"I can't remember the email on the account. I'm {first} {last}, zip code "
                        f"{user['address']['zip']}.")
        by_id = {i["item_id"]: i for i in order["items"]}
        twin = truth["twin_name"]
        # How the customer points at the order.
        if order_ref == "hash":
            where, order_reply = f" The order number is {order['order_id']}.", f"It's {order['order_id']}."
        elif order_ref == "bare":
            bare = order["order_id"][1:]
            where, order_reply = f" My order number is {bare}.", f"The number is {bare}."
        elif kind == "cancel_order":
            others = [i["name"] for i in order["items"] if i["name"] != twin]
            where = ""
            order_reply = f"It's the pending order with the {twin} and the {others[0]}."
        else:
            status = "delivered" if order["status"] == "delivered" else "pending"
            where, order_reply = "", f"I don't have the number; it's my {status} order with the {twin}."
        if kind == "modify_payment":
            names = " and ".join(sorted({i["name"] for i in order["items"]}))
            order_reply = order_reply.replace(f"with the {twin}", f"with the {names}")
        method = user["payment_methods"].get(call.get("payment_method_id") or "", {})
        items_reply, reason_reply, payment_reply = "", "", ""

        if kind == "return_items":
            wanted = [by_id[i] for i in call["item_ids"]]
            twin_item = next(i for i in wanted if i["name"] == twin)
            named = [f"the {twin} {_phrase(distinguish, twin_item['options'][distinguish])}"]
            named += [f"the {i['name']}" for i in wanted if i["name"] != twin]
            keep = next(i for i in order["items"] if i["name"] == twin and i["item_id"] != twin_item["item_id"])
            spare = f" (I'm keeping the other one, the one {_phrase(distinguish, keep['options'][distinguish])})"
            what = " and ".join(named) + (spare if rng.random() < 0.5 else "")
            if truth["payment_said"] == "original":
                payment_reply = rng.choice(["Please refund it to the original payment method I used for that order.",
                                            "The refund should go back to whatever I paid with originally."])
            else:
                payment_reply = "Please put the refund on my gift card."
            opener = rng.choice(["Hi, I'd like to return some items from an order that was delivered.",
                                 "Hello! I need to send back part of a delivery."])
            request = f"I want to return {what}."
            items_reply = "Yes, only those items."
        elif kind in ("exchange_items", "modify_items"):
            old = by_id[call["item_ids"][0]]
            spec = ", ".join(f"{d} {v}" for d, v in new_item["options"].items())
            payment_reply = f"Please use my {_name_method(method)} for any price difference."
            if kind == "exchange_items":
                opener = rng.choice(["Hi, I want to exchange something I received.",
                                     "Hello, one of the items in my delivered order needs exchanging."])
            else:
                opener = rng.choice(["Hi, I want to change an item in an order that hasn't shipped yet.",
                                     "Hello, can you switch an item in my pending order?"])
            request = (f"It's the {twin} {_phrase(distinguish, old['options'][distinguish])}; I'd like it swapped "
                       f"for the one with {spec}.")
            items_reply = f"Yes, just that one {twin}."
        elif kind == "cancel_order":
            opener = rng.choice(["Hi, I need to cancel an order.", "Hello, please cancel one of my orders."])
            request = order_reply.replace("It's the pending order", "It's my pending order")
            reason_reply = rng.choice({
                "no longer needed": ["I don't need those things anymore.", "My plans changed, so I no longer need it."],
                "ordered by mistake": ["I placed it by mistake.", "Honestly, I ordered it by accident."],
            }[reason])
        else:
            opener = rng.choice(["Hi, I'd like to change how I'm paying for an order.",
                                 "Hello, can I switch the payment method on my pending order?"])
            payment_reply = f"Please charge my {_name_method(method)} instead."
            request = order_reply.replace("I don't have the number; it's", "It's") if order_ref == "none" else ""
        first_message = " ".join(part for part in (opener + where, request, payment_reply or reason_reply) if part)
        return {
            "persona": rng.choice(["polite and brief", "chatty but clear", "in a hurry"]),
            "knows_email": knows_email,
            "order_ref": order_ref,
            "first_message": first_message,
            "identity_reply": identity,
            "order_reply": order_reply,
            "payment_reply": payment_reply,
            "items_reply": items_reply,
            "reason_reply": reason_reply,
            "confirm_reply": "Yes, please go ahead.",
            "restate": " ".join(p for p in ("Just to be clear:", request, payment_reply or reason_reply) if p),
            "closing": "Perfect, thank you!",
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
    def cancel_pending_order(self, state, order_id, reason):
        return _cancel(state, order_id, reason)

    @sdk.tool
    def exchange_delivered_order_items(self, state, order_id, item_ids, new_item_ids, payment_method_id):
        return _exchange(state, order_id, list(item_ids), list(new_item_ids), payment_method_id)

    @sdk.tool
    def modify_pending_order_items(self, state, order_id, item_ids, new_item_ids, payment_method_id):
        return _modify_items(state, order_id, list(item_ids), list(new_item_ids), payment_method_id)

    @sdk.tool
    def modify_pending_order_payment(self, state, order_id, payment_method_id):
        return _modify_payment(state, order_id, payment_method_id)

    # These two tools have a parameter literally named "state" (the US state code), so the database,
    # which the runner passes positionally, is called ``db`` here.
    @sdk.tool
    def modify_pending_order_address(self, db, order_id, address1, address2, city, state, country, zip):
        order = _order(db, order_id)
        if "pending" not in order["status"]:
            raise sdk.ToolError("Non-pending order cannot be modified")
        order["address"] = _address(address1, address2, city, state, country, zip)
        return order

    @sdk.tool
    def modify_user_address(self, db, user_id, address1, address2, city, state, country, zip):
        if user_id not in db["users"]:
            raise sdk.ToolError("User not found")
        db["users"][user_id]["address"] = _address(address1, address2, city, state, country, zip)
        return db["users"][user_id]

    @sdk.tool
    def return_delivered_order_items(self, state, order_id, item_ids, payment_method_id):
        return _return(state, order_id, list(item_ids), payment_method_id)

    @sdk.tool
    def transfer_to_human_agents(self, state, summary):
        return "Transfer successful"

    # --- reward --------------------------------------------------------------------------------------
    def evaluate(self, episode: sdk.Episode) -> sdk.Reward:
        scenario, truth = episode.scenario, episode.scenario.truth
        initial, final = scenario.state, episode.state
        tool, expected = truth["tool"], truth["call"]
        order_id, user_id = truth["order_id"], truth["user_id"]

        # Arguments are graded on the first call of the right tool that went through (else the last try).
        attempts = [r for r in episode.tool_log if r.name == tool]
        placed = [r for r in attempts if r.ok]
        graded = placed[0] if placed else (attempts[-1] if attempts else None)
        arguments = graded.arguments if graded else {}
        components = {
            "right_tool": float(bool(placed)),
            "order_id": float(bool(placed) and placed[0].arguments.get("order_id") == order_id),
        }
        weights = {"right_tool": 1.0, "order_id": 1.0, "item_ids": 2.0, "payment_method": 2.0,
                   "cancel_reason": 2.0, "state_match": 4.0, "authenticated": 0.5, "clean_writes": 0.5}
        if "item_ids" in expected:
            components["item_ids"] = float(_item_key(arguments) is not None
                                           and _item_key(arguments) == _item_key(expected))
        if "payment_method_id" in expected:
            components["payment_method"] = float(arguments.get("payment_method_id") == expected["payment_method_id"])
        if "reason" in expected:
            components["cancel_reason"] = float(arguments.get("reason") == expected["reason"])
        components["state_match"] = float(final["orders"].get(order_id) == truth["expected_order"]
                                          and final["users"].get(user_id) == truth["expected_user"])
        writes = [r for r in episode.tool_log if r.name in self.write_tools]
        first_write = episode.tool_log.index(writes[0]) if writes else len(episode.tool_log)
        components["authenticated"] = float(any(r.name.startswith("find_user_id") and r.ok and r.result == user_id
                                                for r in episode.tool_log[:first_write]))
        # Trial and error on write tools (e.g. an order id without '#') is imprecise even when it recovers.
        components["clean_writes"] = float(all(r.ok for r in writes))

        # Gate: no other record may change, and no other write may go through.
        untouched = (all(final["orders"].get(k) == v for k, v in initial["orders"].items() if k != order_id)
                     and all(final["users"].get(k) == v for k, v in initial["users"].items() if k != user_id)
                     and final["products"] == initial["products"])
        stray = any(r.name != tool or r.arguments.get("order_id") != order_id
                    for r in episode.write_calls(self.write_tools))
        return sdk.Reward(
            components=components,
            weights={k: weights[k] for k in components},
            gates={"no_collateral_write": float(untouched and not stray)},
            notes={"variant": scenario.meta["variant"], "expected_call": str(expected)},
        )

    # --- solutions -----------------------------------------------------------------------------------
    def reference_solution(self, scenario: sdk.Scenario) -> list[sdk.Turn]:
        return self._solution(scenario, careless=False)

    def capability_skipping_solution(self, scenario: sdk.Scenario) -> list[sdk.Turn]:
        """The same conversation with careless arguments: the first lookalike wins every time.

        It cancels the first pending order that has the product, returns or swaps the first item of that
        product in the order, pays or refunds with the first payment method of the kind the customer
        mentioned (the first one in the profile for "the original method"), and copies an order number
        the customer typed without '#' into its first write.
        """
        return self._solution(scenario, careless=True)

    def _solution(self, scenario: sdk.Scenario, careless: bool) -> list[sdk.Turn]:
        state, truth, side = scenario.state, scenario.truth, scenario.user
        kind = truth["kind"]
        customer = state["users"][truth["user_id"]]
        methods = customer["payment_methods"]
        call = copy.deepcopy(truth["call"])

        order_id = truth["order_id"]
        if careless and kind == "cancel_order":
            order_id = next(o for o in customer["orders"] if state["orders"][o]["status"] == "pending"
                            and any(i["name"] == truth["twin_name"] for i in state["orders"][o]["items"]))
            call["order_id"] = order_id
        order = state["orders"][order_id]
        if careless and "item_ids" in call:
            def first_alike(item_id: str) -> str:
                name = next(i["name"] for i in order["items"] if i["item_id"] == item_id)
                return next(i["item_id"] for i in order["items"] if i["name"] == name)
            call["item_ids"] = [first_alike(i) for i in call["item_ids"]]
            if kind == "return_items":
                call["item_ids"] = sorted(call["item_ids"])
        if careless and "payment_method_id" in call:
            said = truth["payment_said"]
            call["payment_method_id"] = next(m for m in methods if said == "original" or methods[m]["source"] == said)

        turns = [sdk.say("Happy to help with that. First, could you please tell me the email address on your "
                         "account so I can verify your identity?")]
        if side["knows_email"]:
            turns.append(sdk.call("find_user_id_by_email", email=customer["email"]))
        else:
            turns.append(sdk.call("find_user_id_by_name_zip", first_name=customer["name"]["first_name"],
                                  last_name=customer["name"]["last_name"], zip=customer["address"]["zip"]))
        turns.append(sdk.call("get_user_details", user_id=customer["user_id"]))
        if side["order_ref"] != "none":
            turns.append(sdk.call("get_order_details", order_id=order_id))
        else:
            for other in customer["orders"]:
                turns.append(sdk.call("get_order_details", order_id=other))
                if other == order_id:
                    break
        if kind in ("exchange_items", "modify_items"):
            turns.append(sdk.call("get_product_details", product_id=truth["twin_product_id"]))

        turns.append(sdk.say(self._confirmation(state, kind, call)))
        if careless and side["order_ref"] == "bare":
            turns.append(sdk.call(truth["tool"], **dict(call, order_id=order_id[1:])))
        turns.append(sdk.call(truth["tool"], **call))
        turns.append(sdk.say("All done - the change has been recorded on your order. Thanks for shopping with us."))
        return turns

    def _confirmation(self, state: dict, kind: str, call: dict) -> str:
        """The agent's summary before a write: what will change, with ids, amounts and payment method."""
        order = state["orders"][call["order_id"]]
        methods = state["users"][order["user_id"]]["payment_methods"]
        by_id = {i["item_id"]: i for i in order["items"]}

        def item_text(item: dict) -> str:
            options = ", ".join(f"{k} {v}" for k, v in item["options"].items())
            return f"the {item['name']} ({options}; item {item['item_id']}, {_money(item['price'])})"

        method = methods.get(call.get("payment_method_id", ""))
        paid_with = f"your {_name_method(method)} ({method['id']})" if method else ""
        if kind == "return_items":
            items = [by_id[i] for i in call["item_ids"]]
            total = round(sum(i["price"] for i in items), 2)
            return (f"Here is the return for order {order['order_id']}: " + " and ".join(map(item_text, items))
                    + f". The refund of {_money(total)} will go to {paid_with}. Please confirm these are all the "
                    f"items to return, and shall I proceed?")
        if kind in ("exchange_items", "modify_items"):
            old = by_id[call["item_ids"][0]]
            product = state["products"][old["product_id"]]
            new = product["variants"][call["new_item_ids"][0]]
            new_item = dict(new, name=product["name"])
            difference = round(new["price"] - old["price"], 2)
            direction = "charged to" if difference > 0 else "refunded to"
            return (f"On order {order['order_id']} I'll swap {item_text(old)} for {item_text(new_item)}. The price "
                    f"difference of {_money(abs(difference))} will be {direction} {paid_with}. Please confirm this "
                    f"is the only item to change, and shall I proceed?")
        if kind == "cancel_order":
            items = " and ".join(i["name"] for i in order["items"])
            total = order["payment_history"][0]["amount"]
            return (f"I'll cancel order {order['order_id']} ({items}) with the reason '{call['reason']}'. "
                    f"{_money(total)} will be refunded to the payment method you used. Shall I proceed?")
        current = methods[order["payment_history"][0]["payment_method_id"]]
        return (f"I'll switch the payment for order {order['order_id']} ({_money(order['payment_history'][0]['amount'])}) "
                f"from your {_name_method(current)} to {paid_with}. Shall I proceed?")


def _item_key(arguments: dict):
    """Item arguments in a comparable form: sorted ids, or sorted (old, new) pairs; None if malformed."""
    olds = arguments.get("item_ids")
    if not isinstance(olds, list) or not all(isinstance(i, str) for i in olds):
        return None
    if "new_item_ids" not in arguments:
        return sorted(olds)
    news = arguments.get("new_item_ids")
    if not isinstance(news, list) or len(news) != len(olds) or not all(isinstance(i, str) for i in news):
        return None
    return sorted(zip(olds, news))


def _name_method(method: dict) -> str:
    """How a customer names a payment method: brand and last four digits, or the gift card's number end."""
    if method["source"] == "credit_card":
        brand = "Mastercard" if method["brand"] == "mastercard" else method["brand"].title() + " card"
        return f"{brand} ending in {method['last_four']}"
    if method["source"] == "gift_card":
        return f"gift card ending in {method['id'][-4:]}"
    return "PayPal account"


def _phrase(dim: str, value: str) -> str:
    """How a customer names one option value: 'in blue', 'in size L', 'with material leather'."""
    if dim == "color":
        return f"in {value}"
    if dim == "size":
        return f"in size {value}"
    return f"with {dim} {value}"


ENV = ToolCallingPrecisionEnv
