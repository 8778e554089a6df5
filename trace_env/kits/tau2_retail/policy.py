"""The τ² retail policy as pure functions over real ``db.json`` records.

The store's tools enforce little beyond order status; the rest (one exchange per order, refunds to the
original method or a gift card, same-product swaps, accepted cancel reasons) is policy. These functions
state it once over the real record shapes - an order from ``db["orders"]``, a user from ``db["users"]``,
the product table ``db["products"]`` - for envs to grade with and for ``factory analyze`` to check real
trajectories. Plain stdlib, importable on the host.
"""

from __future__ import annotations

__all__ = [
    "CANCEL_REASONS",
    "allowed_actions",
    "authenticated_before_writes",
    "changed_records",
    "matching_variants",
    "order_total",
    "price_difference",
    "refund_problems",
    "return_refund",
    "swap_problems",
    "payment_change_problems",
]

#: The only reasons ``cancel_pending_order`` accepts.
CANCEL_REASONS = ("no longer needed", "ordered by mistake")


def allowed_actions(order: dict) -> list[str]:
    """What the policy allows on an order in its current status.

    ``pending``: cancel, modify_address, modify_payment, modify_items. After an item modification
    (``pending (item modified)``) the order can no longer be modified or cancelled. ``delivered``: return,
    exchange. Any other status (processed, cancelled, return/exchange requested): nothing.
    """
    if order["status"] == "pending":
        return ["cancel", "modify_address", "modify_payment", "modify_items"]
    if order["status"] == "delivered":
        return ["return", "exchange"]
    return []


def order_total(order: dict) -> float:
    """What the customer has paid net of refunds, rounded to cents."""
    total = sum(p["amount"] if p["transaction_type"] == "payment" else -p["amount"] for p in order["payment_history"])
    return round(total, 2)


def return_refund(order: dict, item_ids: list[str]) -> float:
    """The refund for returning these items: the prices they were bought at."""
    prices = {}
    for item in order["items"]:
        prices.setdefault(item["item_id"], item["price"])
    return round(sum(prices.get(item_id, 0.0) for item_id in item_ids), 2)


def price_difference(products: dict, order: dict, item_ids: list[str], new_item_ids: list[str]) -> float:
    """New variants' prices minus the old items' (positive: the customer pays), rounded to cents."""
    difference = 0.0
    for item_id, new_item_id in zip(item_ids, new_item_ids):
        item = next(i for i in order["items"] if i["item_id"] == item_id)
        difference += products[item["product_id"]]["variants"][new_item_id]["price"] - item["price"]
    return round(difference, 2)


def swap_problems(products: dict, order: dict, item_ids: list[str], new_item_ids: list[str]) -> list[str]:
    """Rules an exchange or item modification breaks (empty: allowed): ``count_mismatch``, ``item_not_in_order``,
    ``same_item``, ``other_product`` (a swap must stay within the product), ``unavailable``."""
    if len(item_ids) != len(new_item_ids):
        return ["count_mismatch"]
    problems = []
    present = [item["item_id"] for item in order["items"]]
    for item_id, new_item_id in zip(item_ids, new_item_ids):
        if item_ids.count(item_id) > present.count(item_id):
            problems.append("item_not_in_order")
            continue
        if item_id == new_item_id:
            problems.append("same_item")
            continue
        product = products.get(next(i["product_id"] for i in order["items"] if i["item_id"] == item_id), {})
        variant = product.get("variants", {}).get(new_item_id)
        if variant is None:
            problems.append("other_product")
        elif not variant["available"]:
            problems.append("unavailable")
    return list(dict.fromkeys(problems))


def refund_problems(order: dict, user: dict, payment_method_id: str) -> list[str]:
    """A return's refund must go to the order's original payment method or to a gift card the user has."""
    method = user["payment_methods"].get(payment_method_id)
    if method is None:
        return ["not_in_profile"]
    original = order["payment_history"][0]["payment_method_id"]
    return [] if payment_method_id == original or method["source"] == "gift_card" else ["not_original_or_gift_card"]


def payment_change_problems(order: dict, user: dict, payment_method_id: str, amount: float | None = None) -> list[str]:
    """Paying a pending order (``amount``: its total by default) or a price difference with another method:
    it must be in the profile, differ from the current one, and a gift card must cover the amount."""
    method = user["payment_methods"].get(payment_method_id)
    if method is None:
        return ["not_in_profile"]
    problems = []
    if amount is None:
        amount = order["payment_history"][0]["amount"]
        if order["payment_history"][0]["payment_method_id"] == payment_method_id:
            problems.append("same_method")
    if method["source"] == "gift_card" and method["balance"] < amount:
        problems.append("insufficient_gift_card_balance")
    return problems


def matching_variants(variants, options: dict | None = None, max_price: float | None = None,
                      available: bool | None = True, exclude: tuple = ()) -> list[dict]:
    """Variants (of a product record, or a list of them; in listed order) having all these option values,
    priced at most ``max_price``, in stock (``available=True``; ``None`` ignores stock), other than the item
    ids in ``exclude``."""
    if isinstance(variants, dict):
        variants = list(variants["variants"].values())
    found = []
    for variant in variants:
        if variant["item_id"] in exclude or (available is not None and variant["available"] != available):
            continue
        if any(variant["options"].get(dim) != value for dim, value in (options or {}).items()):
            continue
        if max_price is not None and variant["price"] > max_price:
            continue
        found.append(variant)
    return found


def authenticated_before_writes(calls, user_id: str, write_tools) -> bool:
    """The policy's first rule: the user was authenticated - a successful ``find_user_id_by_email`` or
    ``find_user_id_by_name_zip`` returning ``user_id`` - before the first call of any of ``write_tools``.
    ``calls`` are tool records in order with ``name``, ``ok`` and ``result`` (``sdk.ToolRecord``)."""
    for record in calls:
        if record.name in write_tools:
            return False
        if record.name.startswith("find_user_id") and record.ok and record.result == user_id:
            return True
    return False


def changed_records(before: dict, after: dict) -> dict[str, list[str]]:
    """Ids of the records that differ between two store databases, by table (added and removed included)."""
    return {table: [key for key in dict.fromkeys([*before[table], *after.get(table, {})])
                    if before[table].get(key) != after.get(table, {}).get(key)] for table in before}
