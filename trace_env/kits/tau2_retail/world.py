"""Seeded τ² retail databases: products with variants, users, orders, in the real ``db.json`` shapes.

:class:`RetailWorld` draws every id in the target's formats (10-digit product and item ids, ``#W`` + 7
digits for orders, ``credit_card_`` + 7 digits for payment methods) and never repeats one within a world.
The catalogue holds the product types of the real store with their option dimensions; ``ordered`` names
dimensions whose values have a natural order (sizes, capacities), smallest first.
"""

from __future__ import annotations

import copy
import itertools

__all__ = [
    "CATALOG",
    "RetailWorld",
    "method_words",
    "order_item",
    "phrase",
]

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


def order_item(product: dict, variant: dict) -> dict:
    """An order line for one variant of a product, in the order record's shape."""
    return {"name": product["name"], "product_id": product["product_id"], "item_id": variant["item_id"],
            "price": variant["price"], "options": dict(variant["options"])}


def method_words(method: dict) -> str:
    """How a customer names a payment method: ``"Visa card ending in 1234"``, ``"gift card ending in 4567"``."""
    if method["source"] == "credit_card":
        brand = "Mastercard" if method["brand"] == "mastercard" else method["brand"].title() + " card"
        return f"{brand} ending in {method['last_four']}"
    if method["source"] == "gift_card":
        return f"gift card ending in {method['id'][-4:]}"
    return "PayPal account"


def phrase(dim: str, value: str) -> str:
    """How a customer names one option value: ``in blue``, ``in size L``, ``with material leather``."""
    if dim == "color":
        return f"in {value}"
    if dim == "size":
        return f"in size {value}"
    return f"with {dim} {value}"


class RetailWorld:
    """Seeded construction of one scenario's store: ``rng`` is the env's ``self.rng(seed)``."""

    def __init__(self, rng) -> None:
        self.rng = rng
        self.used: set = set()  # digit strings already drawn (ids never repeat)
        self.names: set = set()  # (first, last) of users already made

    def digits(self, width: int) -> str:
        """A fresh decimal string of ``width`` digits without a leading zero."""
        while True:
            text = str(self.rng.randint(10 ** (width - 1), 10**width - 1))
            if text not in self.used:
                self.used.add(text)
                return text

    def address(self) -> dict:
        city, state, zip_prefix = self.rng.choice(CITIES)
        return {"address1": f"{self.rng.randint(100, 999)} {self.rng.choice(STREETS)}",
                "address2": f"{self.rng.choice(['Suite', 'Apt'])} {self.rng.randint(100, 999)}",
                "city": city, "country": "USA", "state": state, "zip": zip_prefix + f"{self.rng.randint(0, 99):02d}"}

    def user(self, methods: list[str]) -> dict:
        """A user whose profile lists payment methods of these kinds, in this order
        (``credit_card``, ``gift_card``, ``paypal``)."""
        rng = self.rng
        while True:
            first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
            if (first, last) not in self.names:
                self.names.add((first, last))
                break
        user_id = f"{first.lower()}_{last.lower()}_{self.digits(4)}"
        payment_methods = {}
        for kind in methods:
            method_id = f"{kind}_{self.digits(7)}"
            if kind == "credit_card":
                record = {"source": kind, "id": method_id, "brand": rng.choice(["visa", "mastercard"]),
                          "last_four": f"{rng.randint(0, 9999):04d}"}
            elif kind == "gift_card":
                record = {"source": kind, "id": method_id, "balance": float(rng.randint(40, 300))}
            else:
                record = {"source": kind, "id": method_id}
            payment_methods[method_id] = record
        return {"user_id": user_id, "name": {"first_name": first, "last_name": last}, "address": self.address(),
                "email": f"{first.lower()}.{last.lower()}{rng.randint(1000, 9999)}@example.com",
                "payment_methods": payment_methods, "orders": []}

    def variants(self, spec: dict, count: int) -> list[dict]:
        """``count`` distinct option combinations of a catalogue entry, with stock flags and distinct prices."""
        rng = self.rng
        dims = list(spec["options"])
        combos = list(itertools.product(*spec["options"].values()))
        rng.shuffle(combos)
        prices: set = set()
        low, high = spec["price"]
        made = []
        for combo in combos[: min(count, len(combos))]:
            item_id = self.digits(10)
            available = rng.random() < 0.7
            while True:
                price = round(rng.uniform(low, high), 2)
                if price not in prices:
                    prices.add(price)
                    break
            made.append({"item_id": item_id, "options": dict(zip(dims, combo)), "available": available, "price": price})
        return made

    def product(self, name: str, variants: list[dict], product_id: str | None = None) -> dict:
        """A product record; ``get_product_details`` lists its variants in this order."""
        return {"name": name, "product_id": product_id or self.digits(10),
                "variants": {v["item_id"]: v for v in variants}}

    def order(self, user: dict, items: list[dict], status: str, method_id: str) -> dict:
        """An order paid in full by one method; delivered/processed orders have a fulfilment, cancelled ones
        a refund. The order is not added to the user's list (callers decide the list's order)."""
        order_id = "#W" + self.digits(7)
        fulfillments = []
        if status in ("processed", "delivered"):
            fulfillments = [{"tracking_id": [self.digits(12)], "item_ids": [i["item_id"] for i in items]}]
        total = round(sum(i["price"] for i in items), 2)
        payments = [{"transaction_type": "payment", "amount": total, "payment_method_id": method_id}]
        if status == "cancelled":
            payments.append({"transaction_type": "refund", "amount": total, "payment_method_id": method_id})
        return {"order_id": order_id, "user_id": user["user_id"], "address": dict(user["address"]), "items": items,
                "status": status, "fulfillments": fulfillments, "payment_history": payments}

    @staticmethod
    def state(products: list[dict], users: list[dict], orders: list[dict]) -> dict:
        """The database ``{"products", "users", "orders"}`` keyed by id, in list order (a copy)."""
        return copy.deepcopy({"products": {p["product_id"]: p for p in products},
                              "users": {u["user_id"]: u for u in users},
                              "orders": {o["order_id"]: o for o in orders}})
