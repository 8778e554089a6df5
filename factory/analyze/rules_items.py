"""τ² retail items: which variant the agent chose, and which items it put in a return or exchange.

- structured_data_reasoning: the new item of an exchange or item modification has none of the values the user
  named for an option ("size 8", "clicky switches", "RGB, or else no backlight", "the same material"; the item's
  own value counts unless the user asked to change from it), or is not the cheapest
  (most expensive) available variant when the user asked for that, while an available variant of the product
  the agent had read would have matched;
- multi_step_task_completion: the user named items to return or exchange and the call left one of them out;
- tool_calling_precision: the call carries an item the user did not name.

What the user asked is read from the user's sentences about that product (a sentence that names another
product is about that one), so a colour asked for the helmet does not constrain the luggage.
"""

from __future__ import annotations

import re
from typing import Any

from factory.analyze.calls import AgentCall
from factory.analyze.conversation import sentences
from factory.analyze.evidence import LACKING, TEXT, Evidence

DATA = "structured_data_reasoning"
SWAPS = ("exchange_delivered_order_items", "modify_pending_order_items")
KINDS = {"return_delivered_order_items": "return", "exchange_delivered_order_items": "exchang"}
_VERB_WORD = {"return": "return", "exchang": "exchange"}
_SIZES = {"xs": "extra small", "s": "small", "m": "medium", "l": "large", "xl": "extra large"}
_NUMBERS = {"1": "one", "2": "two", "3": "three", "4": "four", "5": "five", "6": "six"}
_GENERIC_HEADS = {"set", "kit", "machine", "bulb", "mat", "jacket", "puzzle", "clock", "bed", "chair"}
_CHEAPEST = re.compile(r"\b(cheapest|lowest[- ]priced?|least expensive|lowest cost)\b", re.I)
_DEAREST = re.compile(r"\b(most expensive|highest[- ]priced?|priciest)\b", re.I)
_EVERY_ITEM = re.compile(r"\b(all|every|each)( of the| the| my)? (items?|things|of them|products)\b|\beverything\b", re.I)
_VERB = re.compile(r"\b(return|exchang|cancel|modif|chang|switch|keep|swap)\w*", re.I)
_COMPARATIVE = re.compile(r"\b(shorter|longer|bigger|smaller|larger|brighter|dimmer|lighter|heavier|higher|lower|faster|slower|wider|"
                          r"narrower|thinner|thicker|less|more (?!expensive))\b", re.I)  # fmt: skip
_AMONG = re.compile(r"[^.]{0,40}\b(from|among|in|of|within) (the|my|that|your|this|these)\b", re.I)
"""The cheapest "from the rest of that order": a pool the rule does not know."""
_HYPOTHETICAL = re.compile(r"\b(whether|if|able to|could|can i|check|wonder|not sure|thinking)\b", re.I)
_PRONOUN = re.compile(r"\b(return|exchang\w*)\s+(them|it|those|these|both|all)\b", re.I)
_LOCATOR = re.compile(r"\b(?:received|got|bought|came|ordered|purchased|arrived)\b", re.I)
_ONLY = re.compile(r"\b(only|just)\b", re.I)
_EXCEPT = re.compile(r"\b(except|but not|other than|apart from|keep|not the|everything|all|the rest|others?)\b", re.I)


def _squash(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def names_item(text: str, name: str) -> bool:
    """Whether a text names a product: its full name, its head noun (plural or not), or its first word when
    the head is generic ("luggage" for "Luggage Set")."""
    words = [w for w in re.findall(r"[a-z0-9]+", name.lower().replace("-", ""))]
    if not words:
        return False
    squashed = _squash(text)
    if _squash(name) in squashed:
        return True
    head = words[-1] if words[-1] not in _GENERIC_HEADS or len(words) == 1 else words[0]
    tokens = {t.rstrip("s") for t in re.findall(r"[a-z0-9]+", text.lower().replace("-", ""))}
    return len(head) >= 3 and head.rstrip("s") in tokens


def _value_said(value: str, key: str, text: str) -> bool:
    low = text.lower()
    value_low = value.lower()
    key_word = key.split()[-1].lower()
    if value_low == "none":
        return re.search(rf"\bno {re.escape(key_word)}\b|\bwithout (a |any )?{re.escape(key_word)}\b", low) is not None
    if value_low in ("yes", "no"):
        return False
    if value_low in _SIZES and key_word == "size":
        letters = re.search(rf"(?<![A-Za-z'’]){value.upper()}(?![A-Za-z'’])", text)
        return letters is not None or re.search(rf"\b{_SIZES[value_low]}\b", low) is not None
    if re.fullmatch(r"\d+(\.\d+)?", value_low):
        return re.search(rf"\b{re.escape(key_word)}\s*(of\s*)?{re.escape(value_low)}\b", low) is not None
    pattern = re.escape(value_low).replace(r"\ ", r"[\s-]?").replace(r"\-", r"[\s-]?")
    number = re.match(r"(\d)[- ]", value_low)
    if number and number.group(1) in _NUMBERS:
        pattern = f"(?:{pattern}|{_NUMBERS[number.group(1)]}[\\s-]?{re.escape(value_low[2:])})"
    return len(value_low) >= 2 and re.search(rf"(?<![a-z0-9]){pattern}(?![a-z0-9])", low) is not None


def _changed_from(value: str, text: str) -> bool:
    """Whether the text names a value as the one to change from ("instead of Apple HomeKit", "from linear")."""
    escaped = re.escape(value.lower()).replace(r"\ ", r"[\s-]?")
    return re.search(rf"\b(instead of|rather than|from|not|other than|replace|no longer)\s+(the |my |a |an )?{escaped}\b", text.lower()) is not None


def _user_sentences(ev: Evidence, before: int) -> list[str]:
    return [s for u in ev.said if u.role == "user" and u.index < before for s in sentences(u.text)]


def _about(sentence_list: list[str], name: str, others: list[str], single: bool) -> list[str]:
    """The sentences about one product: those naming it, and (when the call swaps only it) those naming no product."""
    out = []
    for sentence in sentence_list:
        if names_item(sentence, name) or (single and not any(names_item(sentence, o) for o in others)) or _EVERY_ITEM.search(sentence):
            out.append(sentence)
    return out


def _judge_pair(ev: Evidence, call: AgentCall, old: dict[str, Any], new_id: str, product: dict[str, Any], said: list[str]) -> bool:
    variants = product.get("variants") or {}
    new = variants.get(new_id)
    if not isinstance(new, dict):
        return False
    text = " ".join(said)
    wanted: dict[str, set[str]] = {}
    for key in {k for v in variants.values() for k in (v.get("options") or {})}:
        values = {str((v.get("options") or {}).get(key)) for v in variants.values()} - {"None"}
        old_value = str((old.get("options") or {}).get(key))
        asked = {v for v in values if _value_said(v, key, text)}
        if asked == {old_value} or _changed_from(old_value, text):
            asked.discard(old_value)  # the item as it is, or "instead of <it>": what the user wants it changed from
        if not asked and re.search(rf"\bsame {re.escape(key.split()[-1].lower())}\b(?! as (the|my|your) other)", text, re.I):
            asked = {old_value}
        if asked:
            wanted[key] = asked
    fits = [v for v in variants.values() if v.get("available") and all(str((v.get("options") or {}).get(k)) in vs for k, vs in wanted.items())]
    new_options = new.get("options") or {}
    broken = {k: sorted(vs) for k, vs in wanted.items() if str(new_options.get(k)) not in vs}
    where = {"at": call.message_index, "confidence": 0.75}
    if broken and any(v.get("item_id") != old.get("item_id") for v in fits):
        key = next(iter(broken))
        better = next(v for v in fits if v.get("item_id") != old.get("item_id"))
        ev.add(DATA, LACKING, f"{call.name}: new item {new_id} has {key} {new_options.get(key)!r}; the user asked for {' or '.join(broken[key])}, "
                              f"and {better.get('item_id')} was available", rule="variant_contradicts_request",
               values={"item": new_id, "option": key, "chosen": new_options.get(key), "asked": broken[key], "available_match": better.get("item_id")},
               **where)  # fmt: skip
        return True
    for pattern, pick, word in ((_CHEAPEST, min, "cheapest"), (_DEAREST, max, "most expensive")):
        found = pattern.search(text)
        if found and not _COMPARATIVE.search(text) and not _AMONG.match(text[found.end() :]):  # unparsed constraints: judge nothing
            pool = [v for v in (fits or [v for v in variants.values() if v.get("available")]) if isinstance(v.get("price"), (int, float))]
            if pool and isinstance(new.get("price"), (int, float)):
                best = pick(pool, key=lambda v: v["price"])
                if abs(best["price"] - new["price"]) > 0.005 and pick(best["price"], new["price"]) == best["price"]:
                    ev.add(DATA, LACKING, f"{call.name}: new item {new_id} costs ${new['price']}; the {word} available variant read is "
                                          f"{best.get('item_id')} at ${best['price']}", rule=f"not_the_{word.replace(' ', '_')}",
                           values={"item": new_id, "price": new["price"], "best_item": best.get("item_id"), "best_price": best["price"]}, **where)  # fmt: skip
                    return True
    return False


def judge_choices(ev: Evidence) -> None:
    """The variants chosen in exchanges and item modifications, against what the user asked."""
    for call in ev.calls:
        args = call.arguments or {}
        if call.name not in SWAPS or not isinstance(args.get("item_ids"), list) or not isinstance(args.get("new_item_ids"), list):
            continue
        world = ev.world_before(call.message_index)
        order = ev.first_seen.orders.get("#" + str(args.get("order_id", "")).lstrip("#"))
        if order is None:
            continue
        items = {i.get("item_id"): i for i in order.get("items") or []}
        names = [i.get("name", "") for i in items.values()]
        said = _user_sentences(ev, call.message_index)
        for old_id, new_id in zip(args["item_ids"], args["new_item_ids"]):
            old = items.get(old_id)
            product = world.products.get(str((old or {}).get("product_id")))
            if old is None or product is None:
                continue
            others = [n for n in names if n != old.get("name")]
            if _judge_pair(ev, call, old, str(new_id), product, _about(said, old.get("name", ""), others, len(args["item_ids"]) == 1)):
                return


def _named(ev: Evidence, before: int, names: list[str], kind: str) -> tuple[set[str], bool]:
    """Product names the user asked to return (or exchange), and whether the request was a blanket one."""
    named: set[str] = set()
    blanket, first_blanket = False, -1
    previous = ""
    for utterance in ev.said:
        if utterance.index >= before:
            break
        if utterance.role == "assistant":
            previous = utterance.text
            continue
        verbs = _VERB.findall(previous)
        verb = verbs[-1].lower() if verbs else ""
        for clause in re.split(r"[.;!?]|,? and (?=[a-z ]{0,20}\b(?:return|exchang|cancel|modif|chang|keep)\w*)", utterance.text):
            found = _VERB.search(clause)
            verb = found.group(0).lower() if found else verb
            if not verb.startswith(kind[:5]) or _HYPOTHETICAL.search(clause[: found.start()] if found else clause):
                continue
            if _EXCEPT.search(clause) or _PRONOUN.search(clause):
                blanket, first_blanket = True, utterance.index
                continue
            objects = _LOCATOR.split(clause[found.end() :] if found else clause, maxsplit=1)[0]  # "the backpack [I got with the vacuum]"
            here = {n for n in names if names_item(objects, n)}
            named = here if here and _ONLY.search(clause) else named | here
            blanket = blanket and not (here and utterance.index > first_blanket)  # a list named after "everything" decides
    return named, blanket


def named_items(ev: Evidence) -> None:
    """A return or exchange of items the user named: none left out, none added."""
    for call in ev.calls:
        kind = KINDS.get(call.name)
        args = call.arguments or {}
        if kind is None or not isinstance(args.get("item_ids"), list):
            continue
        order = ev.first_seen.orders.get("#" + str(args.get("order_id", "")).lstrip("#"))
        if order is None:
            continue
        items = order.get("items") or []
        named, blanket = _named(ev, call.message_index, list({i.get("name", "") for i in items}), kind)
        in_call = [i for i in items if i.get("item_id") in args["item_ids"]]
        if not named or not any(i.get("name") in named for i in in_call):
            continue
        same_kind = [c for c in ev.writes if c.name == call.name and str((c.arguments or {}).get("order_id", "")).lstrip("#") == str(args.get("order_id", "")).lstrip("#")]
        covered = {i for c in same_kind for i in (c.arguments or {}).get("item_ids") or []}
        covered_names = {i.get("name") for i in items if i.get("item_id") in covered}
        left = [i for i in items if i.get("name") in named and i.get("name") not in covered_names] if kind == "return" else []
        where = {"at": call.message_index, "confidence": TEXT}
        if call.succeeded and left:
            ev.add("multi_step_task_completion", LACKING, f"{call.name} on {args.get('order_id')} leaves out {left[0].get('name')} "
                   f"({left[0].get('item_id')}), which the user asked to {_VERB_WORD[kind]}", rule="named_item_left_out",
                   values={"named": sorted(named), "in_call": [i.get("name") for i in in_call], "left_out": left[0].get("item_id")}, **where)  # fmt: skip
            return
        extra = [i for i in in_call if i.get("name") not in named]
        if extra and not blanket:
            ev.add("tool_calling_precision", LACKING, f"{call.name} on {args.get('order_id')} includes {extra[0].get('name')} "
                   f"({extra[0].get('item_id')}), which the user did not name", rule="item_not_named",
                   values={"named": sorted(named), "in_call": [i.get("name") for i in in_call], "extra": extra[0].get("item_id")}, **where)  # fmt: skip
            return
