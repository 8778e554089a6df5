"""Blueprint env: structured_data_reasoning on the tau2-retail target (store, tools, customer: the retail kit).

A customer wants one item of an order swapped for another variant of the same product, phrased as constraints
over the product's options ("the same shirt but in blue and size L", "the cheapest blue one you have in stock",
"blue, size M, under $50", "one size up", "blue, or else green if blue is sold out"). ``get_product_details``
returns a nested ``variants`` dict keyed by item id, each with ``options``, ``available`` and ``price``; only an
agent that checks every variant against every constraint finds the one item id that fits. The catalogue is built
so that the first variant sharing the most salient option is always a wrong lookalike.
"""

import copy
import itertools
import math

from trace_env import sdk
from trace_env.kits import tau2_retail as retail
from trace_env.kits import text

# The request kinds (scenario variants): each a different shape of constraint over the variants.
KINDS = ["exact_change", "cheapest", "budget", "fallback", "step"]
NOTES = """\
In this conversation
- Check every one of the customer's requirements (each option, stock, price limits, "cheapest") against every \
variant of the product before choosing the new item."""


def solve(variants, request, current_id):
    """The variant a careful agent picks; None if the request has no single answer.

    request = {"fixed": {dim: value}, "cap": price limit or None, "pick": "only" | "cheapest",
               "fallback": another request used only when this one has no candidate}
    """
    candidates = retail.matching_variants(variants, request["fixed"], max_price=request.get("cap"), exclude=(current_id,))
    if not candidates:
        return solve(variants, request["fallback"], current_id) if request.get("fallback") else None
    if request["pick"] == "cheapest":
        return min(candidates, key=lambda v: v["price"])
    return candidates[0] if len(candidates) == 1 else None


def fit_fraction(variant, variants, request, current_id):
    """Share of the request's checks a (wrong) variant passes: options, stock, price cap, cheapest."""
    checks = [variant["options"].get(dim) == value for dim, value in request["fixed"].items()]
    checks.append(bool(variant["available"]))
    if request.get("cap") is not None:
        checks.append(variant["price"] <= request["cap"])
    if request["pick"] == "cheapest":
        pool = [v["price"] for v in retail.matching_variants(variants, request["fixed"], exclude=(current_id,))]
        checks.append(bool(pool) and variant["price"] <= min(pool))
    score = sum(checks) / len(checks)
    if request.get("fallback"):
        score = max(score, fit_fraction(variant, variants, request["fallback"], current_id))
    return score


def first_with(variants, current_id, dim, value):
    """What a skimming agent picks: the first listed variant that has the most salient option."""
    return next((v for v in variants if v["item_id"] != current_id and v["options"][dim] == value), None)


class StructuredDataReasoningEnv(retail.RetailTools, sdk.TaskEnv):
    capability = "structured_data_reasoning"
    target = "tau2-retail"
    description = (
        "Reasoning over nested structured tool results. A retail customer asks to exchange (delivered order) or modify "
        "(pending order) one item into another variant of the same product, stating constraints over its options: "
        "exact option changes, the cheapest in-stock variant with an option, a price ceiling, a first choice with a "
        "fallback when it is sold out, or 'one size up'. The agent must read get_product_details' nested variants and "
        "check every variant's options, availability and price. Full credit needs the exact item id placed with the "
        "right payment method and the price difference told; a near miss earns partial credit."
    )
    tool_names = ["find_user_id_by_email", "find_user_id_by_name_zip", "get_user_details", "get_order_details",
                  "get_product_details", "get_item_details", "list_all_product_types", "calculate",
                  "exchange_delivered_order_items", "modify_pending_order_items", "return_delivered_order_items",
                  "cancel_pending_order", "transfer_to_human_agents"]
    max_steps = 30
    write_tools = frozenset({"exchange_delivered_order_items", "modify_pending_order_items",
                             "return_delivered_order_items", "cancel_pending_order"})
    terminal_tools = frozenset({"transfer_to_human_agents"})

    # --- scenario -------------------------------------------------------------------------------------
    def generate(self, seed):
        rng = self.rng(seed)
        for _ in range(200):  # rare constructions that turn out ambiguous are redrawn from the same rng
            scenario = self.attempt(rng, seed)
            if scenario is not None:
                return scenario
        raise RuntimeError("could not build an unambiguous scenario")

    def attempt(self, rng, seed):
        world = retail.RetailWorld(rng)
        kind = rng.choice(KINDS)
        delivered = rng.random() < 0.5
        specs = rng.sample(retail.CATALOG, rng.randint(6, 9))
        spec = specs[0]
        if kind == "step" and not spec["ordered"]:
            return None
        variants = world.variants(spec, rng.randint(9, 18))
        current = rng.choice(variants)
        request, salient, wording = self.build_request(rng, kind, spec, variants, current)
        if request is None:
            return None
        answer, decoy = solve(variants, request, current["item_id"]), first_with(variants, current["item_id"], *salient)
        if answer is None or decoy is None or decoy is answer or answer["item_id"] != request["intended"]:
            return None
        target_product = world.product(spec["name"], variants)
        others = []
        for extra in specs[1:]:
            product_id = world.digits(10)
            others.append(world.product(extra["name"], world.variants(extra, rng.randint(5, 12)), product_id))
        catalogue = [target_product] + others
        rng.shuffle(catalogue)
        user = world.user(rng.choice([["credit_card"], ["paypal"], ["gift_card", "credit_card"], ["credit_card", "paypal"],
                                      ["paypal", "credit_card", "gift_card"], ["credit_card", "credit_card"]]))
        method_id = rng.choice(list(user["payment_methods"]))
        method = user["payment_methods"][method_id]
        difference = round(answer["price"] - current["price"], 2)
        if method["source"] == "gift_card":
            method["balance"] = float(max(method["balance"], math.ceil(max(difference, 0)) + rng.randint(20, 150)))

        def pick(product):
            return retail.order_item(product, rng.choice(list(product["variants"].values())))

        items = [pick(p) for p in rng.sample(others, rng.randint(0, 2))] + [retail.order_item(target_product, current)]
        rng.shuffle(items)
        target = world.order(user, items, "delivered" if delivered else "pending", method_id)
        orders = [target]
        for other in rng.sample(others, rng.randint(1, 3)):
            status = rng.choice(["pending", "processed", "delivered", "cancelled"])
            orders.append(world.order(user, [pick(other)], status, rng.choice(list(user["payment_methods"]))))
        rng.shuffle(orders)
        user["orders"] = [o["order_id"] for o in orders]
        users = [user]
        for _ in range(rng.randint(2, 4)):
            someone = world.user(rng.choice([["credit_card"], ["paypal"], ["gift_card", "paypal"]]))
            order = world.order(someone, [pick(rng.choice(catalogue))], rng.choice(["pending", "delivered", "processed"]),
                                next(iter(someone["payment_methods"])))
            someone["orders"] = [order["order_id"]]
            users.append(someone)
            orders.append(order)
        rng.shuffle(users)
        state = retail.RetailWorld.state(catalogue, users, orders)
        tool = "exchange_delivered_order_items" if delivered else "modify_pending_order_items"
        expected = copy.deepcopy(state)  # ground truth: the right action replayed with the store's own logic
        self.tool_method(tool)(expected, target["order_id"], [current["item_id"]], [answer["item_id"]], method_id)
        truth = {"user_id": user["user_id"], "order_id": target["order_id"], "product_id": target_product["product_id"],
                 "tool": tool, "old_item_id": current["item_id"], "new_item_id": answer["item_id"],
                 "payment_method_id": method_id, "price_difference": difference,
                 "request": {k: v for k, v in request.items() if k != "intended"}, "salient": list(salient),
                 "expected_order": expected["orders"][target["order_id"]], "expected_user": expected["users"][user["user_id"]]}
        customer = self.customer(rng, user, target, spec["name"], wording, method, delivered)
        meta = {"variant": kind, "action": "exchange" if delivered else "modify", "n_variants": len(variants),
                "order_id_known": customer["knows_order_id"]}
        return sdk.Scenario(seed=seed, state=state, user=customer, truth=truth, meta=meta)

    def build_request(self, rng, kind, spec, variants, current):
        """Edit the random variants so the request has exactly one answer, a sold-out or almost-matching lookalike
        exists, and the first variant carrying the salient option is wrong: (request, salient, wording)."""
        dims, cur, protected = list(spec["options"]), current["options"], [current["item_id"]]

        def ensure(options, available=None):
            """The variant with exactly these options, made (by re-labelling a spare one) if missing."""
            found = next((v for v in variants if v["options"] == options), None)
            if found is None:
                found = rng.choice([v for v in variants if v["item_id"] not in protected])
                found["options"] = dict(options)
            if available is not None:
                found["available"] = available
            protected.append(found["item_id"])
            return found

        def place_before(first, second):
            variants.remove(first)
            variants.insert(variants.index(second), first)

        def other_value(dim, *avoid):
            choices = [x for x in spec["options"][dim] if x not in avoid]
            return rng.choice(choices) if choices else None

        if kind == "exact_change":
            changed = rng.sample(dims, rng.choice([1, 2]))
            wanted = dict(cur)
            for dim in changed:
                wanted[dim] = other_value(dim, cur[dim])
            target = ensure(wanted, True)
            spot = rng.choice([d for d in dims if d != changed[0]])
            lookalike = ensure(dict(wanted, **{spot: other_value(spot, wanted[spot])}), rng.random() < 0.75)
            place_before(lookalike, target)
            change = " and ".join(retail.phrase(d, wanted[d]) for d in changed)
            return ({"fixed": wanted, "cap": None, "pick": "only", "intended": target["item_id"]},
                    (changed[0], wanted[changed[0]]), rng.choice([
                        f"I'd like the same {spec['name']} but {change}; everything else should stay exactly as it is.",
                        f"Could I switch it to one {change}? Keep all the other options the same as mine.",
                        f"I want it {change} instead, with every other option unchanged."]))
        if kind in ("cheapest", "budget"):
            salient = "color" if "color" in dims and rng.random() < 0.6 else rng.choice(dims)
            value = other_value(salient, cur[salient])
            fixed, free = {salient: value}, [d for d in dims if d != salient]
            keep = rng.choice(free) if rng.random() < 0.6 else None
            if keep and math.prod(len(spec["options"][d]) for d in free if d != keep) >= 3:
                fixed[keep] = cur[keep] if kind == "cheapest" or rng.random() < 0.5 else other_value(keep)
            pool = [combo for combo in itertools.product(*[spec["options"][d] for d in dims])  # >= 3 carry the options
                    if all(dict(zip(dims, combo))[d] == v for d, v in fixed.items())]
            rng.shuffle(pool)
            for combo in pool:
                if len(retail.matching_variants(variants, fixed, available=None)) >= 3:
                    break
                ensure(dict(zip(dims, combo)))
            matching = sorted(retail.matching_variants(variants, fixed, available=None), key=lambda v: v["price"])
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
            keep_text = "".join(f", and it must stay {retail.phrase(d, fixed[d])}" for d in fixed if d != salient and fixed[d] == cur[d])
            keep_text += "".join(f", and {retail.phrase(d, fixed[d])}" for d in fixed if d != salient and fixed[d] != cur[d])
            want = f"{retail.phrase(salient, value)}{keep_text}"
            if kind == "cheapest":
                wording = rng.choice([
                    f"I'd like the cheapest one {retail.phrase(salient, value)} that you actually have in stock{keep_text}.",
                    f"Please swap it for whichever version {retail.phrase(salient, value)} is the least expensive and available{keep_text}.",
                    f"Other options don't matter much: I just want it {want}, at the lowest price you can do among what's in stock."])
            else:
                pricier = next((v for v in matching[answer_at + 1:] if v["available"]), None)
                if pricier["price"] - answer["price"] < 2.0:
                    pricier["price"] = round(answer["price"] + rng.uniform(2.0, 9.0), 2)
                    if sum(1 for v in variants if v["price"] == pricier["price"]) > 1:
                        return None, None, None
                cap = rng.randint(math.floor(answer["price"]) + 1, math.ceil(pricier["price"]) - 1)
                if rng.random() < 0.6:
                    for v in matching:
                        if not v["available"] and v["price"] > cap:
                            v["price"] = round(rng.uniform(answer["price"] - 6.0, cap - 0.01), 2)
                            break
                if len(set(v["price"] for v in variants)) != len(variants):
                    return None, None, None
                request = dict(request, cap=float(cap), pick="only")
                wording = rng.choice([f"I want one {want}, but it has to cost less than ${cap}.",
                                      f"My budget is ${cap} for it: I'd like it {want}, and it needs to be in stock.",
                                      f"Can you find me one {want} that's under ${cap}?"])
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
                place_before(ensure(dict(cur, **{dim: first_choice, spot: other_value(spot, cur[spot])}), True), primary)
            first, second = retail.phrase(dim, first_choice), retail.phrase(dim, second_choice)
            return ({"fixed": dict(cur, **{dim: first_choice}), "cap": None, "pick": "only",
                     "fallback": {"fixed": dict(cur, **{dim: second_choice}), "cap": None, "pick": "only"},
                     "intended": backup["item_id"]}, (dim, first_choice), rng.choice([
                        f"I'd like it {first}, everything else the same. If that one is sold out, then {second} with the "
                        f"rest unchanged.",
                        f"My first choice is {first} (same other options as mine); if you don't have it in stock, I'll "
                        f"take it {second} instead."]))
        dim = rng.choice(spec["ordered"])  # "step": one size (capacity, ...) up or down, the rest unchanged
        scale = spec["options"][dim]
        index = scale.index(cur[dim])
        step = rng.choice([d for d in (1, -1) if 0 <= index + d < len(scale)])
        wanted = dict(cur, **{dim: scale[index + step]})
        target = ensure(wanted, True)
        spot = rng.choice([d for d in dims if d != dim])
        place_before(ensure(dict(wanted, **{spot: other_value(spot, wanted[spot])}), rng.random() < 0.8), target)
        word = "up" if step > 0 else "down"
        return ({"fixed": wanted, "cap": None, "pick": "only", "intended": target["item_id"]}, (dim, wanted[dim]),
                rng.choice([f"The {dim} is wrong: I need the next {dim} {word} from the one I have, and everything else "
                            f"exactly the same.",
                            f"Could I get it one step {word} in {dim}? All the other options should match what I have now.",
                            f"Please swap it for the same thing one {dim} {word} from mine, nothing else changed."]))

    def customer(self, rng, user, order, product_name, wording, method, delivered):
        knows_email, knows_order_id = rng.random() < 0.7, rng.random() < 0.5
        identity = rng.choice([f"Sure, my email is {user['email']}.", f"It's {user['email']}."]) if knows_email else (
            f"I don't remember which email I used, sorry. My name is {user['name']['first_name']} "
            f"{user['name']['last_name']} and my zip code is {user['address']['zip']}.")
        opener = rng.choice([f"Hi! I received my {product_name} and would like to exchange it for a different version.",
                             f"Hello, I want to exchange the {product_name} from one of my delivered orders."] if delivered
                            else [f"Hi, I placed an order that hasn't shipped yet and I'd like to change the {product_name} in it.",
                                  f"Hello! Before my order ships, can you switch the {product_name} I ordered to another version?"])
        where = f" It's order {order['order_id']}." if knows_order_id else ""
        pay = f"Any price difference should go on the {retail.method_words(method)} I paid with."
        return {"persona": rng.choice(["polite and brief", "chatty but clear", "in a hurry"]), "knows_email": knows_email,
                "knows_order_id": knows_order_id, "first_message": f"{opener}{where} {wording} {pay}",
                "identity_reply": identity, "payment_reply": pay,
                "order_reply": (f"The order id is {order['order_id']}." if knows_order_id else
                                f"I don't have the order number handy; it's the order with the {product_name} in it."),
                "items_reply": f"Yes, the {product_name} is the only item I want to change.",
                "confirm_reply": "Yes, please go ahead.", "restate": f"To recap what I want: {wording}",
                "closing": "Great, thanks for your help!"}

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
        order_id, user_id = truth["order_id"], truth["user_id"]
        variants = initial["products"][truth["product_id"]]["variants"]
        choice, fits = 0.0, []  # which replacement each swap attempt picked for the item in question
        for record in episode.tool_log:
            olds, news = record.arguments.get("item_ids"), record.arguments.get("new_item_ids")
            if record.name not in ("exchange_delivered_order_items", "modify_pending_order_items") or not (
                    isinstance(olds, list) and isinstance(news, list)) or truth["old_item_id"] not in olds:
                continue
            position = olds.index(truth["old_item_id"])
            picked = news[position] if position < len(news) else None
            if picked == truth["new_item_id"] and record.ok and record.arguments.get("order_id") == order_id:
                choice = 1.0
            variant = variants.get(picked) if isinstance(picked, str) else None
            if variant is not None and picked != truth["new_item_id"]:
                fits.append(fit_fraction(variant, list(variants.values()), truth["request"], truth["old_item_id"]))
        if choice < 1.0 and fits:
            choice = 0.5 * max(fits)  # a near miss: right colour wrong size, right options but sold out, ...
        placed = [r for r in episode.calls(truth["tool"], ok=True) if r.arguments.get("order_id") == order_id]
        # Gate: nothing else in the store may change, and no other kind of write may succeed.
        changed = retail.changed_records(initial, final)
        untouched = set(changed["orders"]) <= {order_id} and set(changed["users"]) <= {user_id} and not changed["products"]
        stray = any(r.name != truth["tool"] or r.arguments.get("order_id") != order_id
                    for r in episode.write_calls(self.write_tools))
        difference = abs(truth["price_difference"])
        return sdk.Reward(
            components={"variant_choice": choice,
                        "state_match": float(final["orders"].get(order_id) == truth["expected_order"]
                                             and final["users"].get(user_id) == truth["expected_user"]),
                        "price_difference_told": float(episode.said(difference) or episode.said(-difference)),
                        "payment_method": float(any(r.arguments.get("payment_method_id") == truth["payment_method_id"]
                                                    for r in placed)),
                        "authenticated": float(retail.authenticated_before_writes(episode.tool_log, user_id,
                                                                                  self.write_tools))},
            weights={"variant_choice": 3.0, "state_match": 2.0, "price_difference_told": 1.0, "payment_method": 0.5,
                     "authenticated": 0.5},
            gates={"no_collateral_write": float(untouched and not stray)},
            notes={"expected_item": truth["new_item_id"], "variant": scenario.meta["variant"]})

    # --- solutions --------------------------------------------------------------------------------------
    def solution(self, scenario, new_item_id):
        """Authenticate, find the order, read the product, confirm with the price difference, act."""
        state, truth, side = scenario.state, scenario.truth, scenario.user
        customer, product = state["users"][truth["user_id"]], state["products"][truth["product_id"]]
        old, new = product["variants"][truth["old_item_id"]], product["variants"][new_item_id]
        method = customer["payment_methods"][truth["payment_method_id"]]
        difference = round(new["price"] - old["price"], 2)
        turns = [sdk.say("I'd be glad to help. First I need to verify your identity: could you tell me the email "
                         "address on your account?")]
        if side["knows_email"]:
            turns.append(sdk.call("find_user_id_by_email", email=customer["email"]))
        else:
            turns.append(sdk.call("find_user_id_by_name_zip", first_name=customer["name"]["first_name"],
                                  last_name=customer["name"]["last_name"], zip=customer["address"]["zip"]))
        turns.append(sdk.call("get_user_details", user_id=customer["user_id"]))
        listed = customer["orders"]  # without the id, look through the orders until the one holding the product
        read = [truth["order_id"]] if side["knows_order_id"] else listed[: listed.index(truth["order_id"]) + 1]
        turns += [sdk.call("get_order_details", order_id=o) for o in read]
        turns.append(sdk.call("get_product_details", product_id=product["product_id"]))
        options = ", ".join(f"{k}: {v}" for k, v in new["options"].items())
        exchange = truth["tool"].startswith("exchange")
        turns.append(sdk.say(
            f"Here is what I can do on order {truth['order_id']}: {'exchange' if exchange else 'change'} your "
            f"{product['name']} (item {old['item_id']}, {text.money(old['price'])}) for item {new['item_id']} ({options}), "
            f"which costs {text.money(new['price'])}. The price difference of {text.money(abs(difference))} will be "
            f"{'charged to' if difference > 0 else 'refunded to'} your {retail.method_words(method)}. Please confirm this "
            "is the only item to change, and shall I proceed?"))
        turns.append(sdk.call(truth["tool"], order_id=truth["order_id"], item_ids=[old["item_id"]],
                              new_item_ids=[new["item_id"]], payment_method_id=method["id"]))
        return turns + [sdk.say("All done: the exchange has been requested. You'll receive an email explaining how to "
                                "send back the old item." if exchange else
                                "All done: your pending order has been updated with the new item.")]

    def reference_solution(self, scenario):
        return self.solution(scenario, scenario.truth["new_item_id"])

    def capability_skipping_solution(self, scenario):
        """Same conversation, but it takes the first listed variant carrying the salient option value."""
        truth = scenario.truth
        variants = list(scenario.state["products"][truth["product_id"]]["variants"].values())
        return self.solution(scenario, first_with(variants, truth["old_item_id"], *truth["salient"])["item_id"])


ENV = StructuredDataReasoningEnv
