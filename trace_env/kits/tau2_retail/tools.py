"""The sixteen τ² retail tools, faithful to τ²: same results, same JSON, same error messages.

Each tool is a plain function over the database (``db`` first) returning what τ² returns, in τ²'s field order
(absent optional order fields appear as null), and raising :class:`~trace_env.sdk.ToolError` with τ²'s
message. :class:`RetailTools` wraps them as ``@sdk.tool`` methods for an env to inherit; expose a subset
in ``tool_names`` and override any one by redefining it.

One τ² quirk is kept on purpose: ``modify_pending_order_items`` gives every modified item the price and
options of the LAST new variant in the call (the agent sees exactly what τ² shows).
"""

from __future__ import annotations

import copy
import json

from trace_env.kits.calculator import calculate as calculate_expression
from trace_env.kits.toolkit import tool_mixin
from trace_env.sdk import ToolError

__all__ = [
    "RetailTools",
    "READ_TOOLS",
    "TOOL_NAMES",
    "WRITE_TOOLS",
    "calculate",
    "cancel_pending_order",
    "exchange_delivered_order_items",
    "find_user_id_by_email",
    "find_user_id_by_name_zip",
    "get_item_details",
    "get_order_details",
    "get_product_details",
    "get_user_details",
    "list_all_product_types",
    "modify_pending_order_address",
    "modify_pending_order_items",
    "modify_pending_order_payment",
    "modify_user_address",
    "return_delivered_order_items",
    "transfer_to_human_agents",
]

WRITE_TOOLS = ("cancel_pending_order", "exchange_delivered_order_items", "modify_pending_order_address",
               "modify_pending_order_items", "modify_pending_order_payment", "modify_user_address",
               "return_delivered_order_items")
READ_TOOLS = ("find_user_id_by_email", "find_user_id_by_name_zip", "get_user_details", "get_order_details",
              "get_product_details", "get_item_details", "list_all_product_types")
TOOL_NAMES = READ_TOOLS + WRITE_TOOLS + ("calculate", "transfer_to_human_agents")
CANCEL_REASONS = ("no longer needed", "ordered by mistake")
ORDER_OPTIONAL = ("cancel_reason", "exchange_items", "exchange_new_items", "exchange_payment_method_id",
                  "exchange_price_difference", "return_items", "return_payment_method_id")


# --- records and their views -------------------------------------------------------------------
def order_record(db: dict, order_id: str) -> dict:
    if order_id not in db["orders"]:
        raise ToolError("Order not found")
    return db["orders"][order_id]


def user_record(db: dict, user_id: str) -> dict:
    if user_id not in db["users"]:
        raise ToolError("User not found")
    return db["users"][user_id]


def product_record(db: dict, product_id: str) -> dict:
    if product_id not in db["products"]:
        raise ToolError("Product not found")
    return db["products"][product_id]


def variant_record(db: dict, product_id: str, item_id: str) -> dict:
    product = product_record(db, product_id)
    if item_id not in product["variants"]:
        raise ToolError("Variant not found")
    return product["variants"][item_id]


def payment_method(db: dict, user_id: str, method_id: str) -> dict:
    user = user_record(db, user_id)
    if method_id not in user["payment_methods"]:
        raise ToolError("Payment method not found")
    return user["payment_methods"][method_id]


def variant_view(variant: dict) -> dict:
    return {"item_id": variant["item_id"], "options": dict(variant["options"]), "available": variant["available"],
            "price": variant["price"]}


def order_view(order: dict) -> dict:
    """An order in τ²'s field order, optional fields (cancel reason, exchange, return) null when absent."""
    view = {key: copy.deepcopy(order[key]) for key in ("order_id", "user_id", "address")}
    view["items"] = [{key: copy.deepcopy(item[key]) for key in ("name", "product_id", "item_id", "price", "options")}
                     for item in order["items"]]
    for key in ("status", "fulfillments", "payment_history") + ORDER_OPTIONAL:
        view[key] = copy.deepcopy(order.get(key))
    return view


def user_view(user: dict) -> dict:
    return {key: copy.deepcopy(user[key]) for key in ("user_id", "name", "address", "email", "payment_methods", "orders")}


def address_record(address1, address2, city, state, country, zip) -> dict:
    return {"address1": address1, "address2": address2, "city": city, "country": country, "state": state, "zip": zip}


def check_counts(order: dict, item_ids: list, message: str) -> None:
    present = [item["item_id"] for item in order["items"]]
    for item_id in item_ids:
        if item_ids.count(item_id) > present.count(item_id):
            raise ToolError(message.format(item_id=item_id))


def swapped_variant(db: dict, order: dict, item_id: str, new_item_id: str) -> tuple[dict, dict]:
    item = next((i for i in order["items"] if i["item_id"] == item_id), None)
    if item is None:
        raise ToolError(f"Item {item_id} not found")
    variant = variant_record(db, item["product_id"], new_item_id)
    if not variant["available"]:
        raise ToolError(f"New item {new_item_id} not found or available")
    return item, variant


# --- the tools -----------------------------------------------------------------------------------
def find_user_id_by_email(db: dict, email: str) -> str:
    for user_id, user in db["users"].items():
        if user["email"].lower() == email.lower():
            return user_id
    raise ToolError("User not found")


def find_user_id_by_name_zip(db: dict, first_name: str, last_name: str, zip: str) -> str:
    for user_id, user in db["users"].items():
        name = user["name"]
        if (name["first_name"].lower() == first_name.lower() and name["last_name"].lower() == last_name.lower()
                and user["address"]["zip"] == zip):
            return user_id
    raise ToolError("User not found")


def get_user_details(db: dict, user_id: str) -> dict:
    return user_view(user_record(db, user_id))


def get_order_details(db: dict, order_id: str) -> dict:
    return order_view(order_record(db, order_id))


def get_product_details(db: dict, product_id: str) -> dict:
    product = product_record(db, product_id)
    return {"name": product["name"], "product_id": product["product_id"],
            "variants": {key: variant_view(v) for key, v in product["variants"].items()}}


def get_item_details(db: dict, item_id: str) -> dict:
    for product in db["products"].values():
        if item_id in product["variants"]:
            return variant_view(product["variants"][item_id])
    raise ToolError("Item not found")


def list_all_product_types(db: dict) -> str:
    return json.dumps({p["name"]: p["product_id"] for p in db["products"].values()}, sort_keys=True)


def calculate(db: dict | None, expression: str) -> str:
    return calculate_expression(expression)


def transfer_to_human_agents(db: dict | None, summary: str) -> str:
    return "Transfer successful"


def cancel_pending_order(db: dict, order_id: str, reason: str) -> dict:
    order = order_record(db, order_id)
    if order["status"] != "pending":
        raise ToolError("Non-pending order cannot be cancelled")
    if reason not in CANCEL_REASONS:
        raise ToolError("Invalid reason")
    refunds = []
    for payment in order["payment_history"]:
        refunds.append({"transaction_type": "refund", "amount": payment["amount"],
                        "payment_method_id": payment["payment_method_id"]})
        method = payment_method(db, order["user_id"], payment["payment_method_id"])
        if method.get("source") == "gift_card":
            method["balance"] = round(method["balance"] + payment["amount"], 2)
    order["status"] = "cancelled"
    order["cancel_reason"] = reason
    order["payment_history"].extend(refunds)
    return order_view(order)


def exchange_delivered_order_items(db: dict, order_id: str, item_ids: list, new_item_ids: list,
                                   payment_method_id: str) -> dict:
    order = order_record(db, order_id)
    if order["status"] != "delivered":
        raise ToolError("Non-delivered order cannot be exchanged")
    check_counts(order, item_ids, "Number of {item_id} not found.")
    if len(item_ids) != len(new_item_ids):
        raise ToolError("The number of items to be exchanged should match.")
    difference = 0
    for item_id, new_item_id in zip(item_ids, new_item_ids):
        item, variant = swapped_variant(db, order, item_id, new_item_id)
        difference += variant["price"] - item["price"]
    difference = round(difference, 2)
    method = payment_method(db, order["user_id"], payment_method_id)
    if method.get("source") == "gift_card" and method["balance"] < difference:
        raise ToolError("Insufficient gift card balance to pay for the price difference")
    order["status"] = "exchange requested"
    order["exchange_items"] = sorted(item_ids)
    order["exchange_new_items"] = sorted(new_item_ids)
    order["exchange_payment_method_id"] = payment_method_id
    order["exchange_price_difference"] = difference
    return order_view(order)


def modify_pending_order_items(db: dict, order_id: str, item_ids: list, new_item_ids: list,
                               payment_method_id: str) -> dict:
    order = order_record(db, order_id)
    if order["status"] != "pending":
        raise ToolError("Non-pending order cannot be modified")
    check_counts(order, item_ids, "{item_id} not found")
    if len(item_ids) != len(new_item_ids):
        raise ToolError("The number of items to be exchanged should match")
    difference, last = 0, None
    for item_id, new_item_id in zip(item_ids, new_item_ids):
        if item_id == new_item_id:
            raise ToolError("The new item id should be different from the old item id")
        item, last = swapped_variant(db, order, item_id, new_item_id)
        difference += last["price"] - item["price"]
    method = payment_method(db, order["user_id"], payment_method_id)
    if method.get("source") == "gift_card" and method["balance"] < difference:
        raise ToolError("Insufficient gift card balance to pay for the new item")
    order["payment_history"].append({"transaction_type": "payment" if difference > 0 else "refund",
                                     "amount": abs(difference), "payment_method_id": payment_method_id})
    if method.get("source") == "gift_card":
        method["balance"] = round(method["balance"] - difference, 2)
    for item_id, new_item_id in zip(item_ids, new_item_ids):
        item = next(i for i in order["items"] if i["item_id"] == item_id)
        item.update(item_id=new_item_id, price=last["price"], options=copy.deepcopy(last["options"]))
    order["status"] = "pending (item modified)"
    return order_view(order)


def modify_pending_order_payment(db: dict, order_id: str, payment_method_id: str) -> dict:
    order = order_record(db, order_id)
    if "pending" not in order["status"]:
        raise ToolError("Non-pending order cannot be modified")
    method = payment_method(db, order["user_id"], payment_method_id)
    history = order["payment_history"]
    if len(history) != 1 or history[0]["transaction_type"] != "payment":
        raise ToolError("There should be exactly one payment for a pending order")
    old_id = history[0]["payment_method_id"]
    if old_id == payment_method_id:
        raise ToolError("The new payment method should be different from the current one")
    amount = history[0]["amount"]
    if method.get("source") == "gift_card" and method["balance"] < amount:
        raise ToolError("Insufficient gift card balance to pay for the order")
    history.extend([{"transaction_type": "payment", "amount": amount, "payment_method_id": payment_method_id},
                    {"transaction_type": "refund", "amount": amount, "payment_method_id": old_id}])
    if method.get("source") == "gift_card":
        method["balance"] = round(method["balance"] - amount, 2)
    old = payment_method(db, order["user_id"], old_id)
    if old.get("source") == "gift_card":
        old["balance"] = round(old["balance"] + amount, 2)
    return order_view(order)


def modify_pending_order_address(db: dict, order_id: str, address1: str, address2: str, city: str, state: str,
                                 country: str, zip: str) -> dict:
    order = order_record(db, order_id)
    if "pending" not in order["status"]:
        raise ToolError("Non-pending order cannot be modified")
    order["address"] = address_record(address1, address2, city, state, country, zip)
    return order_view(order)


def modify_user_address(db: dict, user_id: str, address1: str, address2: str, city: str, state: str, country: str,
                        zip: str) -> dict:
    user = user_record(db, user_id)
    user["address"] = address_record(address1, address2, city, state, country, zip)
    return user_view(user)


def return_delivered_order_items(db: dict, order_id: str, item_ids: list, payment_method_id: str) -> dict:
    order = order_record(db, order_id)
    if order["status"] != "delivered":
        raise ToolError("Non-delivered order cannot be returned")
    method = payment_method(db, order["user_id"], payment_method_id)
    if method.get("source") != "gift_card" and payment_method_id != order["payment_history"][0]["payment_method_id"]:
        raise ToolError("Payment method should be the original payment method")
    check_counts(order, item_ids, "Some item not found")
    order["status"] = "return requested"
    order["return_items"] = sorted(item_ids)
    order["return_payment_method_id"] = payment_method_id
    return order_view(order)


RetailTools = tool_mixin("RetailTools", [
    find_user_id_by_email, find_user_id_by_name_zip, get_user_details, get_order_details, get_product_details,
    get_item_details, list_all_product_types, calculate, transfer_to_human_agents, cancel_pending_order,
    exchange_delivered_order_items, modify_pending_order_items, modify_pending_order_payment,
    modify_pending_order_address, modify_user_address, return_delivered_order_items,
], """Mixin: every τ² retail tool as an ``@sdk.tool`` method. Expose a subset with ``tool_names``; override one
by defining a method of the same name. The database parameter is ``db`` because two tools take an argument
called ``state`` (a US state code).""")
