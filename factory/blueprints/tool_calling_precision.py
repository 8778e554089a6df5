"""Blueprint env: tool_calling_precision on the tau2-retail target (store, tools, customer: the retail kit).

The customer's request is easy to understand; the difficulty is in the ARGUMENTS. Every scenario puts a
plausible lookalike next to the right value:

- return_items: the order holds two variants of the same product and the customer returns one of them; the refund
  goes to the ORIGINAL payment method (from the order's payment history) although the profile lists a gift card
  first, or to the gift card although the order was paid otherwise.
- exchange_items / modify_items: one of two same-product items changes to a fully specified variant; the price
  difference goes to a method named by brand and last digits, next to a lookalike of the same kind listed first.
- cancel_order: two pending orders share a product; only the one described may be cancelled, with an accepted reason.
- modify_payment: a pending order switches to a named card or gift card, beside another of the same kind.

Order ids must carry their leading '#', even when the customer types them without it. The reward has one component
per argument, one for the end state, and a gate against writes to anything else.
"""

import copy
import math

from trace_env import sdk
from trace_env.kits import tau2_retail as retail
from trace_env.kits import text

KINDS = ["return_items", "exchange_items", "modify_items", "cancel_order", "modify_payment"]
TOOL_OF = {"return_items": "return_delivered_order_items", "exchange_items": "exchange_delivered_order_items",
           "modify_items": "modify_pending_order_items", "cancel_order": "cancel_pending_order",
           "modify_payment": "modify_pending_order_payment"}
NOTES = """\
Identifiers
- Order ids always start with '#', e.g. '#W1234567'; customers often leave the '#' out.
- An order can contain several items of the same product in different variants: each has its own item id, so \
match items by their options.
- Payment methods have ids such as 'credit_card_1234567', 'paypal_1234567' or 'gift_card_1234567'; the order's \
payment_history shows which one paid for it."""


def item_key(arguments):
    """Item arguments in a comparable form: sorted ids, or sorted (old, new) pairs; None if malformed."""
    olds, news = arguments.get("item_ids"), arguments.get("new_item_ids")
    if not isinstance(olds, list) or not all(isinstance(i, str) for i in olds):
        return None
    if "new_item_ids" not in arguments:
        return sorted(olds)
    if not isinstance(news, list) or len(news) != len(olds) or not all(isinstance(i, str) for i in news):
        return None
    return sorted(zip(olds, news))


class ToolCallingPrecisionEnv(retail.RetailTools, sdk.TaskEnv):
    capability = "tool_calling_precision"
    target = "tau2-retail"
    description = (
        "Precise tool arguments among lookalikes. A retail customer asks for one clear action (return items, exchange "
        "or modify an item, cancel an order, switch an order's payment method) and the agent must pass exactly the "
        "right values: the order id with its leading '#', the item id of the right variant when an order holds two "
        "variants of the same product, the ORIGINAL payment method id or the card the customer names by brand and "
        "last digits rather than the first one in the profile, the right one of two pending orders that share a "
        "product, and a cancel reason from the two accepted strings. Each argument is a reward component, plus the "
        "end state, with a gate against writes to any other record."
    )
    tool_names = ["find_user_id_by_email", "find_user_id_by_name_zip", "get_user_details", "get_order_details",
                  "get_product_details", "get_item_details", "list_all_product_types", "calculate",
                  "cancel_pending_order", "exchange_delivered_order_items", "modify_pending_order_items",
                  "modify_pending_order_payment", "modify_pending_order_address", "return_delivered_order_items",
                  "modify_user_address", "transfer_to_human_agents"]
    max_steps = 30
    write_tools = frozenset({"cancel_pending_order", "exchange_delivered_order_items", "modify_pending_order_items",
                             "modify_pending_order_payment", "modify_pending_order_address",
                             "return_delivered_order_items", "modify_user_address"})
    terminal_tools = frozenset({"transfer_to_human_agents"})

    # --- scenario -------------------------------------------------------------------------------------
    def generate(self, seed):
        rng = self.rng(seed)
        for _ in range(200):  # a draw that cannot host the lookalikes is redrawn from the same rng
            scenario = self.attempt(rng, seed)
            if scenario is not None:
                return scenario
        raise RuntimeError("could not build a scenario")

    def attempt(self, rng, seed):
        world = retail.RetailWorld(rng)
        kind = rng.choice(KINDS)
        products = []
        for spec in rng.sample(retail.CATALOG, rng.randint(7, 10)):
            product_id = world.digits(10)
            products.append(world.product(spec["name"], world.variants(spec, rng.randint(6, 14)), product_id))
        twin, others = products[0], products[1:]  # twin: the product that appears twice
        twin_variants = list(twin["variants"].values())
        # The customer's payment methods; the lookalike is always listed first.
        said = None  # which kind of method the customer names: what a careless agent keys on
        if kind == "return_items":
            said = rng.choice(["original", "gift_card"])
            rest = rng.sample(["credit_card", "paypal", "credit_card"], rng.randint(1, 2))
            methods = ["gift_card"] + rest if said == "original" else rest[:1] + ["gift_card"] + rest[1:]
        elif kind in ("exchange_items", "modify_items", "modify_payment"):
            said = rng.choice(["credit_card", "gift_card"] + (["paypal"] if kind != "modify_payment" else []))
            pair = [said, said] if said != "paypal" else ["paypal"]
            methods = pair + rng.sample([k for k in ("credit_card", "paypal", "gift_card") if k != said], rng.randint(1, 2))
            methods = methods[:1] + rng.sample(methods[1:], len(methods) - 1)
        else:
            methods = rng.sample(["credit_card", "paypal", "gift_card", "credit_card"], rng.randint(1, 3))
        user = world.user(methods)
        records = user["payment_methods"]
        ids = list(records)
        of_kind = {k: [i for i in ids if records[i]["source"] == k] for k in ("credit_card", "paypal", "gift_card")}
        target_method = None
        if kind == "return_items" and said == "original":
            original = target_method = rng.choice([i for i in ids if records[i]["source"] != "gift_card"])
        elif kind == "return_items":
            original, target_method = ids[0], of_kind["gift_card"][0]
        elif kind in ("exchange_items", "modify_items", "modify_payment"):
            target_method, lookalike = of_kind[said][-1], of_kind[said][0]  # the second one of its kind when two
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

        def pick(product):
            return retail.order_item(product, rng.choice(list(product["variants"].values())))

        extras = rng.sample(others, 3)
        spare = [p for p in others if p not in extras]
        lookalike_order, new_item, wanted, distinguish = None, None, [], None
        if kind in ("return_items", "exchange_items", "modify_items"):
            if len(twin_variants) < 3:
                return None
            first, second = rng.sample(twin_variants, 2)
            distinguish = rng.choice([d for d in first["options"] if first["options"][d] != second["options"][d]])
            fillers = [pick(p) for p in extras[: rng.randint(1, 2)]]
            items = fillers + [retail.order_item(twin, first)]
            rng.shuffle(items)
            at = rng.randint(items.index(next(i for i in items if i["item_id"] == first["item_id"])) + 1, len(items))
            items.insert(at, retail.order_item(twin, second))  # the wanted twin comes after its lookalike
            order = world.order(user, items, "delivered" if kind != "modify_items" else "pending", original)
            wanted = [second["item_id"]]
            if kind == "return_items" and rng.random() < 0.5:
                wanted.append(fillers[0]["item_id"])
            if kind != "return_items":
                new_item = rng.choice([v for v in twin_variants if v["item_id"] not in (first["item_id"], second["item_id"])])
                new_item["available"] = True
        elif kind == "cancel_order":
            first, second = rng.sample(twin_variants, 2) if len(twin_variants) > 1 else (twin_variants[0],) * 2
            mine, theirs = [retail.order_item(twin, second), pick(extras[0])], [retail.order_item(twin, first), pick(extras[1])]
            rng.shuffle(mine)
            rng.shuffle(theirs)
            order = world.order(user, mine, "pending", original)
            lookalike_order = world.order(user, theirs, "pending", rng.choice(ids))
        else:
            order = world.order(user, [pick(p) for p in extras[: rng.randint(1, 3)]], "pending", original)
        if target_method and records[target_method]["source"] == "gift_card":  # a named gift card covers what it pays
            need = order["payment_history"][0]["amount"] if kind == "modify_payment" else 0.0
            if new_item is not None:
                need = max(0.0, new_item["price"] - second["price"])
            records[target_method]["balance"] = float(math.ceil(need) + rng.randint(20, 200))
        # The customer's other orders and a few other customers.
        orders = [order] + ([lookalike_order] if lookalike_order else [])
        for product in rng.sample(spare, min(len(spare), rng.randint(1, 3))):
            status = rng.choice(["pending", "processed", "delivered", "cancelled"])
            orders.append(world.order(user, [pick(product)], status, rng.choice(ids)))
        rng.shuffle(orders)
        if lookalike_order and orders.index(lookalike_order) > orders.index(order):
            a, b = orders.index(lookalike_order), orders.index(order)
            orders[a], orders[b] = orders[b], orders[a]
        user["orders"] = [o["order_id"] for o in orders]
        users = [user]
        for _ in range(rng.randint(2, 4)):
            someone = world.user(rng.choice([["credit_card"], ["paypal"], ["gift_card", "paypal"]]))
            theirs = world.order(someone, [pick(rng.choice(products))], rng.choice(["pending", "delivered", "processed"]),
                                 next(iter(someone["payment_methods"])))
            someone["orders"] = [theirs["order_id"]]
            users.append(someone)
            orders.append(theirs)
        rng.shuffle(users)
        rng.shuffle(products)
        state = retail.RetailWorld.state(products, users, orders)
        # Ground truth: replay the right call on a copy with the store's own logic.
        call = {"order_id": order["order_id"]}
        reason = None
        if kind == "return_items":
            call.update(item_ids=sorted(wanted), payment_method_id=target_method)
        elif kind in ("exchange_items", "modify_items"):
            call.update(item_ids=wanted, new_item_ids=[new_item["item_id"]], payment_method_id=target_method)
        elif kind == "cancel_order":
            reason = rng.choice(list(retail.CANCEL_REASONS))
            call.update(reason=reason)
        else:
            call.update(payment_method_id=target_method)
        expected = copy.deepcopy(state)
        self.tool_method(TOOL_OF[kind])(expected, **call)
        truth = {"kind": kind, "tool": TOOL_OF[kind], "call": call, "user_id": user["user_id"],
                 "order_id": order["order_id"], "payment_said": said, "twin_name": twin["name"],
                 "twin_product_id": twin["product_id"],
                 "lookalike_order_id": lookalike_order["order_id"] if lookalike_order else None,
                 "expected_order": expected["orders"][order["order_id"]], "expected_user": expected["users"][user["user_id"]]}
        order_ref = "none" if kind == "cancel_order" else rng.choice(["hash", "bare", "none"])
        customer = self.customer(rng, kind, state, truth, order_ref, distinguish, reason, new_item)
        meta = {"variant": kind, "order_ref": order_ref, "payment_said": said, "n_payment_methods": len(ids),
                "n_orders": len(user["orders"])}
        return sdk.Scenario(seed=seed, state=state, user=customer, truth=truth, meta=meta)

    def customer(self, rng, kind, state, truth, order_ref, distinguish, reason, new_item):
        user, order, call = state["users"][truth["user_id"]], state["orders"][truth["order_id"]], truth["call"]
        knows_email = rng.random() < 0.7
        identity = rng.choice([f"Sure, my email is {user['email']}.", f"It's {user['email']}."]) if knows_email else (
            f"I can't remember the email on the account. I'm {user['name']['first_name']} {user['name']['last_name']}, "
            f"zip code {user['address']['zip']}.")
        by_id, twin = {i["item_id"]: i for i in order["items"]}, truth["twin_name"]
        if order_ref == "hash":  # how the customer points at the order
            where, order_reply = f" The order number is {order['order_id']}.", f"It's {order['order_id']}."
        elif order_ref == "bare":
            where, order_reply = f" My order number is {order['order_id'][1:]}.", f"The number is {order['order_id'][1:]}."
        elif kind == "cancel_order":
            other = next(i["name"] for i in order["items"] if i["name"] != twin)
            where, order_reply = "", f"It's the pending order with the {twin} and the {other}."
        else:
            status = "delivered" if order["status"] == "delivered" else "pending"
            where, order_reply = "", f"I don't have the number; it's my {status} order with the {twin}."
        if kind == "modify_payment":
            names = " and ".join(sorted(dict.fromkeys(i["name"] for i in order["items"])))
            order_reply = order_reply.replace(f"with the {twin}", f"with the {names}")
        method = user["payment_methods"].get(call.get("payment_method_id") or "", {})
        items_reply, reason_reply, payment_reply = "", "", ""
        if kind == "return_items":
            wanted = [by_id[i] for i in call["item_ids"]]
            twin_item = next(i for i in wanted if i["name"] == twin)
            named = [f"the {twin} {retail.phrase(distinguish, twin_item['options'][distinguish])}"]
            named += [f"the {i['name']}" for i in wanted if i["name"] != twin]
            keep = next(i for i in order["items"] if i["name"] == twin and i["item_id"] != twin_item["item_id"])
            spare = f" (I'm keeping the other one, the one {retail.phrase(distinguish, keep['options'][distinguish])})"
            what = " and ".join(named) + (spare if rng.random() < 0.5 else "")
            payment_reply = rng.choice(["Please refund it to the original payment method I used for that order.",
                                        "The refund should go back to whatever I paid with originally."]) if (
                truth["payment_said"] == "original") else "Please put the refund on my gift card."
            opener = rng.choice(["Hi, I'd like to return some items from an order that was delivered.",
                                 "Hello! I need to send back part of a delivery."])
            request, items_reply = f"I want to return {what}.", "Yes, only those items."
        elif kind in ("exchange_items", "modify_items"):
            old = by_id[call["item_ids"][0]]
            spec = ", ".join(f"{d} {v}" for d, v in new_item["options"].items())
            payment_reply = f"Please use my {retail.method_words(method)} for any price difference."
            opener = rng.choice(["Hi, I want to exchange something I received.",
                                 "Hello, one of the items in my delivered order needs exchanging."] if kind == "exchange_items"
                                else ["Hi, I want to change an item in an order that hasn't shipped yet.",
                                      "Hello, can you switch an item in my pending order?"])
            request = (f"It's the {twin} {retail.phrase(distinguish, old['options'][distinguish])}; I'd like it swapped "
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
            payment_reply = f"Please charge my {retail.method_words(method)} instead."
            request = order_reply.replace("I don't have the number; it's", "It's") if order_ref == "none" else ""
        first_message = " ".join(part for part in (opener + where, request, payment_reply or reason_reply) if part)
        return {"persona": rng.choice(["polite and brief", "chatty but clear", "in a hurry"]), "knows_email": knows_email,
                "order_ref": order_ref, "first_message": first_message, "identity_reply": identity,
                "order_reply": order_reply, "payment_reply": payment_reply, "items_reply": items_reply,
                "reason_reply": reason_reply, "confirm_reply": "Yes, please go ahead.", "closing": "Perfect, thank you!",
                "restate": " ".join(p for p in ("Just to be clear:", request, payment_reply or reason_reply) if p)}

    # --- prompt and customer ---------------------------------------------------------------------------
    def system_prompt(self, scenario):
        return retail.system_prompt(NOTES)

    def first_user_message(self, scenario):
        return scenario.user["first_message"]

    def user_reply(self, episode, agent_text):
        return retail.customer_reply(episode, agent_text)

    # --- reward -----------------------------------------------------------------------------------------
    def evaluate(self, episode):
        scenario, truth = episode.scenario, episode.scenario.truth
        initial, final = scenario.state, episode.state
        tool, expected, order_id, user_id = truth["tool"], truth["call"], truth["order_id"], truth["user_id"]
        # Arguments are graded on the first call of the right tool that went through (else the last try).
        attempts = [r for r in episode.tool_log if r.name == tool]
        placed = [r for r in attempts if r.ok]
        graded = placed[0] if placed else (attempts[-1] if attempts else None)
        arguments = graded.arguments if graded else {}
        components = {"right_tool": float(bool(placed)),
                      "order_id": float(bool(placed) and placed[0].arguments.get("order_id") == order_id)}
        weights = {"right_tool": 1.0, "order_id": 1.0, "item_ids": 2.0, "payment_method": 2.0, "cancel_reason": 2.0,
                   "state_match": 4.0, "authenticated": 0.5, "clean_writes": 0.5}
        if "item_ids" in expected:
            components["item_ids"] = float(item_key(arguments) is not None and item_key(arguments) == item_key(expected))
        if "payment_method_id" in expected:
            components["payment_method"] = float(arguments.get("payment_method_id") == expected["payment_method_id"])
        if "reason" in expected:
            components["cancel_reason"] = float(arguments.get("reason") == expected["reason"])
        components["state_match"] = float(final["orders"].get(order_id) == truth["expected_order"]
                                          and final["users"].get(user_id) == truth["expected_user"])
        writes = [r for r in episode.tool_log if r.name in self.write_tools]
        components["authenticated"] = float(retail.authenticated_before_writes(episode.tool_log, user_id, self.write_tools))
        # Trial and error on write tools (e.g. an order id without '#') is imprecise even when it recovers.
        components["clean_writes"] = float(all(r.ok for r in writes))
        # Gate: no other record may change, and no other write may go through.
        changed = retail.changed_records(initial, final)
        untouched = set(changed["orders"]) <= {order_id} and set(changed["users"]) <= {user_id} and not changed["products"]
        stray = any(r.name != tool or r.arguments.get("order_id") != order_id for r in episode.write_calls(self.write_tools))
        return sdk.Reward(components=components, weights={k: weights[k] for k in components},
                          gates={"no_collateral_write": float(untouched and not stray)},
                          notes={"variant": scenario.meta["variant"], "expected_call": str(expected)})

    # --- solutions --------------------------------------------------------------------------------------
    def reference_solution(self, scenario):
        return self.solution(scenario, careless=False)

    def capability_skipping_solution(self, scenario):
        """The same conversation with careless arguments: the first lookalike wins every time. It cancels the first
        pending order with the product, returns or swaps the first item of that product, pays with the first method
        of the kind the customer mentioned (the first in the profile for "the original method"), and copies an
        order number typed without '#' into its first write."""
        return self.solution(scenario, careless=True)

    def solution(self, scenario, careless):
        state, truth, side = scenario.state, scenario.truth, scenario.user
        kind, customer = truth["kind"], state["users"][truth["user_id"]]
        methods, call, order_id = customer["payment_methods"], copy.deepcopy(truth["call"]), truth["order_id"]
        if careless and kind == "cancel_order":
            order_id = call["order_id"] = next(o for o in customer["orders"] if state["orders"][o]["status"] == "pending"
                                               and any(i["name"] == truth["twin_name"] for i in state["orders"][o]["items"]))
        order = state["orders"][order_id]
        if careless and "item_ids" in call:
            names = {i["item_id"]: i["name"] for i in order["items"]}
            call["item_ids"] = [next(i["item_id"] for i in order["items"] if i["name"] == names[x]) for x in call["item_ids"]]
            call["item_ids"] = sorted(call["item_ids"]) if kind == "return_items" else call["item_ids"]
        if careless and "payment_method_id" in call:
            said = truth["payment_said"]
            call["payment_method_id"] = next(m for m in methods if said == "original" or methods[m]["source"] == said)
        turns = [sdk.say("Happy to help with that. First, could you please tell me the email address on your account so "
                         "I can verify your identity?")]
        if side["knows_email"]:
            turns.append(sdk.call("find_user_id_by_email", email=customer["email"]))
        else:
            turns.append(sdk.call("find_user_id_by_name_zip", first_name=customer["name"]["first_name"],
                                  last_name=customer["name"]["last_name"], zip=customer["address"]["zip"]))
        turns.append(sdk.call("get_user_details", user_id=customer["user_id"]))
        listed = customer["orders"]
        read = [order_id] if side["order_ref"] != "none" else listed[: listed.index(order_id) + 1]
        turns += [sdk.call("get_order_details", order_id=o) for o in read]
        if kind in ("exchange_items", "modify_items"):
            turns.append(sdk.call("get_product_details", product_id=truth["twin_product_id"]))
        turns.append(sdk.say(self.confirmation(state, kind, call)))
        if careless and side["order_ref"] == "bare":
            turns.append(sdk.call(truth["tool"], **dict(call, order_id=order_id[1:])))
        turns.append(sdk.call(truth["tool"], **call))
        return turns + [sdk.say("All done - the change has been recorded on your order. Thanks for shopping with us.")]

    def confirmation(self, state, kind, call):
        """The agent's summary before a write: what will change, with ids, amounts and payment method."""
        order = state["orders"][call["order_id"]]
        methods = state["users"][order["user_id"]]["payment_methods"]
        by_id = {i["item_id"]: i for i in order["items"]}

        def item_text(item):
            options = ", ".join(f"{k} {v}" for k, v in item["options"].items())
            return f"the {item['name']} ({options}; item {item['item_id']}, {text.money(item['price'])})"

        method = methods.get(call.get("payment_method_id", ""))
        paid_with = f"your {retail.method_words(method)} ({method['id']})" if method else ""
        if kind == "return_items":
            items = [by_id[i] for i in call["item_ids"]]
            return (f"Here is the return for order {order['order_id']}: " + " and ".join(map(item_text, items))
                    + f". The refund of {text.money(round(sum(i['price'] for i in items), 2))} will go to {paid_with}. "
                    "Please confirm these are all the items to return, and shall I proceed?")
        if kind in ("exchange_items", "modify_items"):
            old = by_id[call["item_ids"][0]]
            product = state["products"][old["product_id"]]
            new = product["variants"][call["new_item_ids"][0]]
            difference = round(new["price"] - old["price"], 2)
            return (f"On order {order['order_id']} I'll swap {item_text(old)} for {item_text(dict(new, name=product['name']))}. "
                    f"The price difference of {text.money(abs(difference))} will be "
                    f"{'charged to' if difference > 0 else 'refunded to'} {paid_with}. Please confirm this is the only "
                    "item to change, and shall I proceed?")
        if kind == "cancel_order":
            items = " and ".join(i["name"] for i in order["items"])
            return (f"I'll cancel order {order['order_id']} ({items}) with the reason '{call['reason']}'. "
                    f"{text.money(order['payment_history'][0]['amount'])} will be refunded to the payment method you "
                    "used. Shall I proceed?")
        current = methods[order["payment_history"][0]["payment_method_id"]]
        return (f"I'll switch the payment for order {order['order_id']} "
                f"({text.money(order['payment_history'][0]['amount'])}) from your {retail.method_words(current)} to "
                f"{paid_with}. Shall I proceed?")


ENV = ToolCallingPrecisionEnv
