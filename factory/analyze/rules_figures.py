"""Figures told to the user, against their parts and the records (structured_data_reasoning).

Only arithmetic the message itself shows is checked: a sum written out (``a + b = c``), or a list of amounts
followed by their total; a count of a product's available options against the product read; a checked-bag
allowance against the membership, cabin and passengers on record. A figure whose parts are not in view is
not judged: the rules cannot tell arithmetic from a different question.
"""

from __future__ import annotations

import re

from trace_env.kits import tau2_airline as airline_kit

from factory.analyze.conversation import ids_in, sentences
from factory.analyze.evidence import LACKING, PRESENT, TEXT, Evidence
from factory.analyze.rules_items import names_item

DATA = "structured_data_reasoning"
_AMOUNT = r"\$\s?\d[\d,]*(?:\.\d+)?"
_EQUATION = re.compile(rf"((?:{_AMOUNT}|\d[\d,]*(?:\.\d+)?)(?:\s*\+\s*(?:{_AMOUNT}|\d[\d,]*(?:\.\d+)?))+)\s*(?:=|equals|comes to|adds up to)\s*({_AMOUNT}|\d[\d,]*(?:\.\d+)?)")
_TOTAL_FIRST = re.compile(rf"({_AMOUNT})\s*[:=(]\s*((?:{_AMOUNT})(?:\s*\+\s*{_AMOUNT})+)")
_TOTAL_WORD = re.compile(r"\b(in total|total(?:l?ing)?|altogether|combined|together|adds? up to|sums? (?:up )?to|overall)\b", re.I)
_NOT_A_SUM = re.compile(r"instead of|minus|difference|per (passenger|person|item|bag)|\beach\b|×|\d\s?x\s?\$?\d|\bless\b|more than|new total|order total|"
                        r"updated total|balance|remaining|left on|\bafter\b", re.I)  # fmt: skip
_COUNT = re.compile(r"\b(\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)\s+(?:different\s+)?(?:available\s+)?"
                    r"([a-z][a-z -]{1,30}?)\s+(options|variants|versions|models|kinds|types|choices|styles)\b", re.I)  # fmt: skip
_WORDS = {w: i for i, w in enumerate(("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"))}
_BAGS = re.compile(r"\b(bags?|baggages?|suitcases?|luggage)\b", re.I)
_FREE = re.compile(r"\b(allowance|free (checked )?(bags?|baggages?|suitcases?)|(bags?|suitcases?) (are|is) (free|included)|allows?|can (bring|take|check))\b",
                   re.I)  # fmt: skip
"""A statement of the allowance itself, not of a fee ("adding 2 bags costs nothing")."""
_CABINS = (("basic economy", "basic_economy"), ("business", "business"), ("economy", "economy"))


def _number(text: str) -> float:
    return float(text.replace("$", "").replace(",", "").strip())


def _contains(text: str, value: str) -> bool:
    """Whether a required fact was said: a figure as a number (327 is not in 1,327; 1286 is 1,286.00), a
    word or phrase as itself."""
    wanted = value.replace(",", "").replace("$", "").strip()
    try:
        target = float(wanted)
    except ValueError:
        return bool(wanted) and re.search(r"(?<!\w)" + re.escape(wanted.lower()) + r"(?!\w)", text.lower()) is not None
    numbers = re.findall(r"\d[\d,]*(?:\.\d+)?", text)
    return any(abs(float(n.replace(",", "")) - target) < 0.005 for n in numbers)


_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_FIGURE = re.compile(r"(?<![\w#.-])\$?\d[\d,]*(\.\d+)?(?![\w-])")
"""A figure told to the user: a standalone number or amount (ids such as HAT123, #W1234567, card_1234 and ISO
dates are not figures)."""


def judge_required(ev: Evidence) -> None:
    """τ²'s ``communicate_info``: all said is PRESENT; none of any figure said is a part never reached."""
    required = ev.task.communicate_info if ev.task is not None else []
    if not required:
        return
    said = "\n".join(u.text for u in ev.said if u.role == "assistant")
    missing = [v for v in required if not _contains(said, v)]
    if not missing:
        ev.add(DATA, PRESENT, "told the user every figure the task requires", rule="required_facts_told")
    elif not _FIGURE.search(_ISO_DATE.sub(" ", said)) or not _FIGURE.fullmatch(missing[0].strip()):
        ev.add("multi_step_task_completion", LACKING, f"never told the user {missing[0]!r}, which the task requires", rule="required_fact_never_told",
               values={"required": missing[0], "figures_said": 0}, confidence=TEXT)  # fmt: skip


def _sums(ev: Evidence, index: int, text: str) -> bool:
    for match in _EQUATION.finditer(text):
        parts = [_number(p) for p in re.split(r"\s*\+\s*", match.group(1))]
        total = _number(match.group(2))
        if abs(sum(parts) - total) > 0.005:
            ev.add(DATA, LACKING, f"told the user {match.group(0).strip()!r}; the parts add up to {sum(parts):.2f}", rule="sum_disagrees", at=index,
                   values={"parts": parts, "stated_total": total, "sum": round(sum(parts), 2)}, confidence=0.85)  # fmt: skip
            return True
    for match in _TOTAL_FIRST.finditer(text):
        parts = [_number(p) for p in re.split(r"\s*\+\s*", match.group(2))]
        total = _number(match.group(1))
        if abs(sum(parts) - total) > 0.005:
            ev.add(DATA, LACKING, f"told the user a total of {match.group(1)} made of {match.group(2)}; those add up to {sum(parts):.2f}",
                   rule="sum_disagrees", at=index, values={"parts": parts, "stated_total": total, "sum": round(sum(parts), 2)}, confidence=0.85)  # fmt: skip
            return True
    word = _TOTAL_WORD.search(text)
    if word is None or _NOT_A_SUM.search(text) or _EQUATION.search(text) or _TOTAL_FIRST.search(text):
        return False
    amounts = [(m.start(), _number(m.group(0))) for m in re.finditer(_AMOUNT, text)]
    after = [a for a in amounts if word.end() <= a[0] <= word.end() + 40]
    before = [a for a in amounts if word.start() - 25 <= a[0] < word.start()]
    chosen = after[0] if after else (before[-1] if before else None)
    if chosen is None:
        return False
    parts = [v for p, v in amounts if p != chosen[0]]
    if len(parts) >= 2 and chosen[1] > max(parts) and abs(sum(parts) - chosen[1]) > 0.005:
        ev.add(DATA, LACKING, f"told the user a total of ${chosen[1]:,.2f} for amounts that add up to ${sum(parts):,.2f}", rule="total_disagrees", at=index,
               values={"parts": parts, "stated_total": chosen[1], "sum": round(sum(parts), 2)}, confidence=TEXT)  # fmt: skip
        return True
    return False


def _counts(ev: Evidence, index: int, text: str) -> bool:
    world = ev.world_before(index)
    for match in _COUNT.finditer(text):
        told = _WORDS.get(match.group(1).lower(), None) if not match.group(1).isdigit() else int(match.group(1))
        product = next((p for p in world.products.values() if names_item(match.group(2), str(p.get("name", "")))), None)
        if product is None or told is None or not isinstance(product.get("variants"), dict) or len(product["variants"]) < 2:
            continue
        available = sum(1 for v in product["variants"].values() if v.get("available"))
        if told != available:
            ev.add(DATA, LACKING, f"told the user {told} {match.group(2).strip()} options; the product read lists {available} available "
                                  f"(of {len(product['variants'])})", rule="count_disagrees", at=index,
                   values={"told": told, "available": available, "variants": len(product["variants"]), "product": product.get("product_id")},
                   confidence=0.75)  # fmt: skip
            return True
        ev.add(DATA, PRESENT, "counted the available options right", rule="count_right")
    return False


def _allowance(ev: Evidence, index: int, text: str) -> bool:
    """A stated free checked-bag allowance against membership, cabin and passengers on record (τ² airline)."""
    world = ev.world_before(index)
    for sentence in sentences(text):
        if not _BAGS.search(sentence) or not _FREE.search(sentence):
            continue
        told = {int(n) for n in re.findall(r"(?<![\w$.])\d{1,2}(?![\w.])", sentence)} | {_WORDS[w] for w in re.findall(r"[a-z]+", sentence.lower()) if w in _WORDS}
        named = [r for r in sorted(ids_in(text), key=text.find) if r in world.reservations]  # in order of mention, not set order
        res = world.reservations[named[0]] if named else (next(iter(world.reservations.values())) if len(world.reservations) == 1 else None)
        if res is None or not told:
            continue
        user = world.users.get(res.get("user_id", ""))
        if user is None or user.get("membership") not in airline_kit.FREE_BAGS:
            ev.add("precondition_verification", LACKING, f"stated a free bag allowance for {res['reservation_id']} without reading the user's "
                                                         "membership", rule="allowance_without_membership", at=index,
                   values={"said": sentence[:160], "reservation": res["reservation_id"]}, confidence=TEXT)  # fmt: skip
            return True
        cabin = next((c for word, c in _CABINS if word in sentence.lower()), res.get("cabin"))
        per = airline_kit.FREE_BAGS[user["membership"]].get(cabin, 0)
        total = per * len(res.get("passengers") or [])
        if not told & {per, total}:
            ev.add(DATA, LACKING, f"told the user {sorted(told)} free bag(s); a {user['membership']} member in {cabin} with "
                                  f"{len(res.get('passengers') or [])} passenger(s) has {per} each, {total} in all", rule="allowance_disagrees", at=index,
                   values={"told": sorted(told), "membership": user["membership"], "cabin": cabin, "per_passenger": per, "total": total},
                   confidence=TEXT)  # fmt: skip
            return True
    return False


_CHARGE_WORDS = re.compile(r"\b(difference|additional|extra|charg\w*|owe)\b", re.I)
_NOT_A_CHARGE = re.compile(r"\b(refund\w*|per (passenger|person|segment|flight|bag)|each|original|paid)\b", re.I)


def new_payments(ev: Evidence, call: object) -> list[float] | None:
    """The amounts a successful write added to its record's payment history (τ²: a charge is positive, a refund
    negative), against the same record as the agent last read it; None when there is no earlier read to compare."""
    result = call.result_json() if hasattr(call, "result_json") else None
    if not isinstance(result, dict) or not isinstance(result.get("payment_history"), list):
        return None
    world = ev.world_before(call.message_index)
    rid, oid = result.get("reservation_id"), result.get("order_id")
    before = world.reservations.get(rid) if isinstance(rid, str) else world.orders.get(oid) if isinstance(oid, str) else None
    if not isinstance(before, dict) or not isinstance(before.get("payment_history"), list):
        return None
    added = result["payment_history"][len(before["payment_history"]) :]
    amounts = [p.get("amount") for p in added if isinstance(p, dict) and p.get("transaction_type", "payment") == "payment"]  # retail logs refunds as positive
    return [float(a) for a in amounts if isinstance(a, (int, float))]


def _quoted_charge(ev: Evidence) -> bool:
    """A charge or refund the write made that no figure of the agent's last message before it states."""
    for call in ev.writes:
        amounts = new_payments(ev, call)
        if not amounts or len(amounts) != 1 or amounts[0] < 1:
            continue  # a refund goes back by the policy's route; only a charge the user agreed to is compared
        made = amounts[0]
        quote = next((u for u in reversed(ev.said) if u.role == "assistant" and u.index <= call.message_index), None)
        if quote is None:
            continue
        stated = [_number(m) for s in sentences(quote.text) if _CHARGE_WORDS.search(s) and not _NOT_A_CHARGE.search(s) for m in re.findall(_AMOUNT, s)]
        every = [_number(m) for m in re.findall(_AMOUNT, quote.text)]
        passengers = max(1, len((ev.world_before(call.message_index).reservations.get(str((call.arguments or {}).get("reservation_id"))) or {}).get("passengers") or []))
        if not stated or any(abs(v * k - made) < 1 for v in every for k in range(1, passengers + 1)):
            continue
        ev.add(DATA, LACKING, f"{call.name} charged ${made:g}, but the agent's message before it stated {', '.join(f'${v:g}' for v in stated[:4])}",
               rule="charge_differs_from_quote", at=call.message_index, values={"made": amounts[0], "stated": stated[:6], "quoted_at": quote.index},
               confidence=TEXT)  # fmt: skip
        return True
    return False


def judge(ev: Evidence) -> None:
    if _quoted_charge(ev):
        return
    for utterance in ev.said:
        if utterance.role != "assistant":
            continue
        if _sums(ev, utterance.index, utterance.text) or _counts(ev, utterance.index, utterance.text):
            return
        if ev.domain == "airline" and _allowance(ev, utterance.index, utterance.text):
            return
