"""τ² retail: the agent's decisions judged against the policy, on the records it had read.

As for the airline: each state-changing call is checked for the reads the policy requires (the user
authenticated by email or name and zip code, the order and the new items' product read), for what the
policy allows on the order in its status (policy_application), and for the values it carries
(structured_data_reasoning); refusing what the order's status allows is a policy-application failure.
The policy itself comes from ``trace_env.kits.tau2_retail``.
"""

from __future__ import annotations

import re
from typing import Any

from trace_env.kits import tau2_retail as kit

from factory.analyze.calls import AgentCall
from factory.analyze.conversation import ORDER_ID
from factory.analyze.evidence import LACKING, PRESENT, RECORD, TEXT, Evidence

RECOVERY = "permission_error_recovery"
from factory.analyze.world import World

PRE, POLICY, DATA = "precondition_verification", "policy_application", "structured_data_reasoning"
ACTION_OF = {
    "cancel_pending_order": "cancel",
    "modify_pending_order_address": "modify_address",
    "modify_pending_order_payment": "modify_payment",
    "modify_pending_order_items": "modify_items",
    "return_delivered_order_items": "return",
    "exchange_delivered_order_items": "exchange",
}
_REFUSAL_ACTION = {"cancel": "cancel", "return": "return", "exchange": "exchange", "modify_order": "modify_items"}
_OTHER_REASON = re.compile(r"\b(available|stock|same product|different product|type|reason|balance|gift card|once|already (been )?"
                           r"(modified|exchanged|returned|cancel)|another user|other user|price)\b", re.IGNORECASE)  # fmt: skip


def _order_id(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    return "#" + value.lstrip("#") if ORDER_ID.fullmatch(value) or ORDER_ID.fullmatch("#" + value.lstrip("#")) else value


def _user_of(world: World, order: dict[str, Any]) -> dict[str, Any] | None:
    return world.users.get(order.get("user_id", ""))


def _known_method(world: World, order: dict[str, Any], method: Any) -> bool:
    if not isinstance(method, str):
        return True
    user = _user_of(world, order)
    if user is not None and method in (user.get("payment_methods") or {}):
        return True
    return any(p.get("payment_method_id") == method for p in order.get("payment_history") or [])


def _write(ev: Evidence, call: AgentCall, world: World, earlier: list[AgentCall]) -> None:
    args = call.arguments or {}
    where = {"at": call.message_index}
    if not world.authenticated:
        ev.add(PRE, LACKING, f"{call.name} before authenticating the user by email or by name and zip code", rule="write_before_authentication",
               values={"tool": call.name, "authentication_calls": 0}, confidence=RECORD, **where)  # fmt: skip
        return
    if call.name == "modify_user_address":
        ev.add(PRE, PRESENT, "authenticated before changing the address")
        return
    oid = _order_id(args.get("order_id"))
    order = world.orders.get(oid or "")
    if order is None:
        ev.add(PRE, LACKING, f"{call.name}({oid!r}) made without reading that order first", rule="write_without_reading_record",
               values={"tool": call.name, "order": oid, "read": sorted(world.orders)}, confidence=RECORD, **where)  # fmt: skip
        return
    action = ACTION_OF[call.name]
    items, new_items = args.get("item_ids") or [], args.get("new_item_ids") or []
    method = args.get("payment_method_id")
    unchecked = [i for i in new_items if not any(i in (p.get("variants") or {}) for p in world.products.values())]
    if unchecked:
        ev.add(PRE, LACKING, f"{call.name} to item {unchecked[0]} without reading its product's variants (availability, price)",
               rule="new_item_unread", values={"tool": call.name, "item": unchecked[0]}, confidence=RECORD, **where)  # fmt: skip
    elif not _known_method(world, order, method):
        ev.add(PRE, LACKING, f"{call.name} with payment method {method} without reading the user's payment methods", rule="payment_method_unread",
               values={"tool": call.name, "payment_method": method}, confidence=RECORD, **where)  # fmt: skip
    else:
        ev.add(PRE, PRESENT, f"read {oid} and what the change depends on")
    if order.get("user_id") and order["user_id"] not in world.authenticated:
        ev.add(POLICY, LACKING, f"acted on {oid}, which belongs to {order['user_id']}, not the authenticated user", rule="another_users_order",
               values={"order": oid, "owner": order["user_id"], "authenticated": sorted(world.authenticated)}, **where)  # fmt: skip
        return
    if action not in kit.allowed_actions(order):
        ev.add(POLICY, LACKING, f"{action.replace('_', ' ')} on {oid} although its status is {order.get('status')!r}", rule="status_forbids_action",
               values={"order": oid, "status": order.get("status"), "action": action}, **where)  # fmt: skip
        return
    if _second_swap(ev, call, earlier):
        return
    if action == "cancel" and args.get("reason") not in kit.CANCEL_REASONS:
        ev.add(POLICY, LACKING, f"cancelled {oid} with reason {args.get('reason')!r}; only {' or '.join(kit.CANCEL_REASONS)} are accepted",
               rule="cancel_reason_not_accepted", values={"order": oid, "reason": args.get("reason")}, **where)  # fmt: skip
        return
    if action in ("modify_items", "exchange") and isinstance(items, list) and isinstance(new_items, list):
        problems = kit.swap_problems(world.products, order, items, new_items) if not unchecked else []
        if "item_not_in_order" in problems or "count_mismatch" in problems:
            ev.add(DATA, LACKING, f"{call.name} on {oid} names items that are not in the order: {items}", rule="items_not_in_order",
                   values={"order": oid, "items": items, "in_order": [i.get("item_id") for i in order.get("items") or []]}, confidence=RECORD, **where)  # fmt: skip
            return
        if "other_product" in problems or "unavailable" in problems:
            what = "another product" if "other_product" in problems else "an unavailable item"
            ev.add(POLICY, LACKING, f"{call.name} on {oid} swaps to {what}; the policy allows only available variants of the same product",
                   rule="swap_outside_product", values={"order": oid, "new_items": new_items, "problems": problems}, **where)  # fmt: skip
            return
        ev.add(DATA, PRESENT, "items and new items taken from the records")
    user = _user_of(world, order)
    if action == "return" and user is not None and isinstance(method, str) and kit.refund_problems(order, user, method):
        ev.add(POLICY, LACKING, f"refunded the return of {oid} to {method}, neither the original method nor a gift card", rule="refund_method",
               values={"order": oid, "payment_method": method}, **where)  # fmt: skip
        return
    if action == "modify_payment" and user is not None and isinstance(method, str):
        problems = kit.payment_change_problems(order, user, method)
        if "insufficient_gift_card_balance" in problems or "same_method" in problems:
            ev.add(POLICY, LACKING, f"changed the payment of {oid} to {method}: {problems[0].replace('_', ' ')}", rule="payment_change_rules",
                   values={"order": oid, "payment_method": method, "problems": problems}, **where)  # fmt: skip
            return
    ev.add(POLICY, PRESENT, f"{action.replace('_', ' ')} on {oid} allowed in status {order.get('status')!r}")


def judge_refusals(ev: Evidence) -> None:
    judged: set[tuple[str, str]] = set()
    for utterance, world, kind, sentence in ev.refusals():
        action = _REFUSAL_ACTION.get(kind)
        if action is None:
            continue
        ids = [o for o in (_order_id(m) for m in ORDER_ID.findall(sentence)) if o in world.orders]
        if not ids and len(world.orders) == 1:
            ids = list(world.orders)
        for oid in ids:
            if (action, oid) in judged or _OTHER_REASON.search(sentence):
                continue
            judged.add((action, oid))
            if [c for c in ev.later_writes(utterance.index) if _order_id((c.arguments or {}).get("order_id")) == oid]:
                continue
            status = world.orders[oid].get("status")
            if action in kit.allowed_actions(world.orders[oid]):
                ev.add(POLICY, LACKING, f"refused to {action.replace('_', ' ')} {oid} although its status {status!r} allows it", rule="allowed_action_refused",
                       at=utterance.index, values={"order": oid, "status": status, "action": action, "refusal": sentence[:160]}, confidence=TEXT)  # fmt: skip
            elif action == "exchange" and "modify_items" in kit.allowed_actions(world.orders[oid]):
                ev.add(POLICY, LACKING, f"declined to exchange items of {oid} until delivery without offering the item modification its status "
                                        f"{status!r} allows", rule="pending_swap_not_offered", at=utterance.index,
                       values={"order": oid, "status": status, "refusal": sentence[:160]}, confidence=TEXT)  # fmt: skip
            else:
                ev.add(POLICY, PRESENT, f"declined to {action.replace('_', ' ')} {oid} in status {status!r}")


def _second_swap(ev: Evidence, call: AgentCall, earlier: list[AgentCall]) -> bool:
    """A second exchange (or item modification) of one order: the policy allows one, with every item collected."""
    oid = _order_id((call.arguments or {}).get("order_id"))
    if call.name not in ("modify_pending_order_items", "exchange_delivered_order_items"):
        return False
    if not any(c.name == call.name and _order_id((c.arguments or {}).get("order_id")) == oid for c in earlier):
        return False
    ev.add(POLICY, LACKING, f"a second {call.name} on {oid}; the policy allows one, with every item collected first", rule="second_swap_on_order",
           at=call.message_index, values={"order": oid, "tool": call.name, "earlier_at": [c.message_index for c in earlier if c.name == call.name]})  # fmt: skip
    return True


_STATUS_ERROR = re.compile(r"non-(pending|delivered) order", re.IGNORECASE)
"""A write the store refused because of the order's status: still a decision the agent made, judged as one."""


def _swap_error_not_recovered(ev: Evidence) -> None:
    """The store refused an exchange because the order was not delivered: on a pending order the policy's
    alternative is an item modification, so a run that never makes one did not recover (permission_error_recovery)."""
    for call in ev.calls:
        if call.name != "exchange_delivered_order_items" or not call.error or not re.search(r"non-delivered|not (been )?delivered", call.result or "", re.I):
            continue
        oid = _order_id((call.arguments or {}).get("order_id"))
        order = ev.world_before(call.message_index).orders.get(oid or "")
        if order is None or "modify_items" not in kit.allowed_actions(order):
            continue
        if any(_order_id((c.arguments or {}).get("order_id")) == oid for c in ev.later_writes(call.message_index, "modify_pending_order_items")):
            ev.add(RECOVERY, PRESENT, f"modified the pending order {oid} after the exchange was refused")
            continue
        ev.add(RECOVERY, LACKING, f"exchange on {oid} refused as not delivered, and the agent never modified the pending order's items instead",
               rule="pending_swap_error_not_recovered", at=call.result_index, values={"order": oid, "status": order.get("status"),
               "tool_error": " ".join((call.result or "").split())[:80]}, confidence=RECORD)  # fmt: skip
        return


_WAIT_DELIVERY = re.compile(r"exchang\w*[^.]{0,60}\b(only|until|once|after|must be|has to be|needs to be)\b[^.]{0,30}\bdeliver|"
                            r"\b(not|isn['’]t|hasn['’]t been|yet to be|still)\b[^.]{0,20}\b(delivered|pending)\b[^.]{0,60}\bexchang", re.IGNORECASE)


def _exchange_deferred(ev: Evidence) -> None:
    """Told to wait for delivery to exchange an item of a pending order, with no item modification made: the
    policy lets a pending order's items be modified now (a refused tool call is judged by the recovery rule)."""
    if any(c.name == "exchange_delivered_order_items" and c.error for c in ev.calls):
        return
    for utterance in ev.said:
        if utterance.role != "assistant" or not _WAIT_DELIVERY.search(utterance.text):
            continue
        world = ev.world_before(utterance.index)
        named = [o for o in (_order_id(m) for m in ORDER_ID.findall(utterance.text)) if o in world.orders]
        pending = [o for o in named or list(world.orders) if "modify_items" in kit.allowed_actions(world.orders[o])]
        if len(pending) != 1:
            continue
        oid = pending[0]
        if any(_order_id((c.arguments or {}).get("order_id")) == oid for c in ev.later_writes(utterance.index, "modify_pending_order_items")):
            continue
        ev.add(POLICY, LACKING, f"told the user to wait for delivery to exchange items of the pending order {oid}, without the item modification "
                                "its status allows", rule="pending_swap_not_offered", at=utterance.index,
               values={"order": oid, "status": world.orders[oid].get("status")}, confidence=TEXT)  # fmt: skip
        return


def judge(ev: Evidence) -> None:
    _swap_error_not_recovered(ev)
    _exchange_deferred(ev)
    done: list[AgentCall] = []
    for call in ev.calls:
        refused = call.error and call.arguments is not None and _STATUS_ERROR.search(call.result or "")
        if not call.succeeded and not refused or not ev.catalog.is_write(call.name):
            continue
        if refused:
            _second_swap(ev, call, done)  # the store refused it; splitting one order's swaps was still the agent's decision
        elif call.name in ACTION_OF or call.name == "modify_user_address":
            _write(ev, call, ev.world_before(call.message_index), done)
        if call.succeeded:
            done.append(call)
    judge_refusals(ev)
