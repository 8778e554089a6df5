"""A call's argument values against what the agent had already seen (tool_calling_precision).

An id, an address, a name or a date of birth must come from somewhere: the user said it or a tool result
showed it. A value found nowhere is a typo or an invention. A passenger the profile lists must be booked with
the profile's date of birth, and a payment must use the method the user asked for. Each finding names the
call's message, the argument and the values compared.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from factory.analyze.calls import AgentCall
from factory.analyze.conversation import dates_in, sentences
from factory.analyze.evidence import LACKING, RECORD, TEXT, Evidence
from factory.analyze.world import World

CAP = "tool_calling_precision"
_VALUE_KEYS = re.compile(r"(_id|_ids|^flight_number)$")
_FREE_TEXT = ("address1", "address2", "city", "zip", "first_name", "last_name", "dob")
_PUNCTUATION = str.maketrans({c: " " for c in "!\"#$%&'()*+,-./:;<=>?@[\\]^`{|}~"})
_PAY_INTENT = re.compile(
    r"\b(use|using|pay|paying|paid|charge|charged|via|prefer\w*|refund\w*)\b[^.?!]{0,40}?"
    r"\b(card ending(?: in)? \d{4}|ending(?: in)? \d{4}|\d{4} card|gift ?cards?|paypal|certificates?|credit ?card|visa|mastercard|amex)"
    r"|\b(gift ?card|paypal|credit ?card|card ending(?: in)? \d{4})\b[^.?!]{0,15}\b(for|please|is fine|works|then)\b",
    re.IGNORECASE,
)


def _norm(value: object) -> str:
    return str(value).lower().translate(_PUNCTUATION).replace(" ", "")


def _values(arguments: object, keep: Callable[[str], bool], key: str = "") -> list[tuple[str, str]]:
    """(key, value) for every non-empty string argument whose key ``keep`` accepts, nested ones included."""
    out: list[tuple[str, str]] = []
    if isinstance(arguments, dict):
        for k, v in arguments.items():
            out += _values(v, keep, k)
    elif isinstance(arguments, list):
        for v in arguments:
            out += _values(v, keep, key)
    elif isinstance(arguments, str) and arguments.strip() and keep(key):
        out.append((key, arguments))
    return out


def id_values(arguments: object) -> list[tuple[str, str]]:
    """Every id-like argument, nested ones included (payment ids inside payment lists)."""
    return _values(arguments, lambda key: bool(_VALUE_KEYS.search(key)))


def _free_values(arguments: object) -> list[tuple[str, str]]:
    """Addresses, names and dates of birth, nested ones included (passengers)."""
    return _values(arguments, lambda key: key in _FREE_TEXT)


class Sources:
    """Per message, what an argument value may have come from: user messages (their dates also as ISO dates)
    and tool results, normalised once (lower case, no spaces or punctuation)."""

    def __init__(self, ev: Evidence) -> None:
        told = ev.instructions + " " + " ".join(dates_in(ev.instructions))
        self.told_text = told.lower().translate(_PUNCTUATION).replace(" ", "")  # what the simulated user knows and may say
        self.texts: list[str] = []
        for message in ev.trajectory.messages:
            text = message.content or "" if message.role in ("user", "tool") else ""
            extra = " ".join(dates_in(text)) if message.role == "user" and text else ""
            self.texts.append((text + " " + extra).lower().translate(_PUNCTUATION).replace(" ", ""))

    def mentioned(self, value: str, before: int, batch: tuple[int, ...] = ()) -> bool:
        """Verbatim (spaces and punctuation aside), or an order id's digits typed without its ``#W``. ``batch``:
        results of the calls listed before this one in the same assistant message: some agents' logs merge
        several sequential steps into one message, so a call may use what an earlier call of its batch returned."""
        plain = _norm(value)
        digits = re.sub(r"\D", "", plain)
        loose = len(digits) >= 5 and digits == plain.lstrip("w")
        texts = self.texts[:before] + [self.texts[i] for i in batch if i < len(self.texts)]
        return any(plain in text or (loose and digits in text) for text in texts)

    def told(self, value: str) -> bool:
        return _norm(value) in self.told_text


def _people(world: World) -> dict[tuple[str, str], set[str]]:
    """Dates of birth the records give each person, by (first, last) name."""
    out: dict[tuple[str, str], set[str]] = {}

    def see(person: Any) -> None:
        if isinstance(person, dict) and isinstance(person.get("dob"), str):
            name = person.get("name") if isinstance(person.get("name"), dict) else person
            key = (str(name.get("first_name", "")).lower(), str(name.get("last_name", "")).lower())
            out.setdefault(key, set()).add(person["dob"])

    for user in world.users.values():
        see(user)
        for passenger in user.get("saved_passengers") or []:
            see(passenger)
    for reservation in world.reservations.values():
        for passenger in reservation.get("passengers") or []:
            see(passenger)
    return out


def _passengers(ev: Evidence, call: AgentCall, sources: Sources) -> bool:
    people = _people(ev.world_before(call.message_index))
    for passenger in (call.arguments or {}).get("passengers") or []:
        if not isinstance(passenger, dict) or not isinstance(passenger.get("dob"), str):
            continue
        key = (str(passenger.get("first_name", "")).lower(), str(passenger.get("last_name", "")).lower())
        known = people.get(key)
        user_said = any(passenger["dob"] in dates_in(u.text) for u in ev.said if u.role == "user" and u.index < call.message_index)
        if known and passenger["dob"] not in known and not user_said:
            name = f"{passenger.get('first_name')} {passenger.get('last_name')}"
            ev.add(CAP, LACKING, f"{call.name}: {name} passed with date of birth {passenger['dob']}; the records read give {sorted(known)[0]}",
                   rule="passenger_dob_disagrees", at=call.message_index,
                   values={"passenger": name, "passed": passenger["dob"], "on_record": sorted(known)}, confidence=RECORD)  # fmt: skip
            return True
    return False


def _payment_ids(arguments: dict[str, Any]) -> list[str]:
    ids = [arguments.get(k) for k in ("payment_id", "payment_method_id")]
    ids += [p.get("payment_id") for p in arguments.get("payment_methods") or [] if isinstance(p, dict)]
    return [i for i in ids if isinstance(i, str)]


def _method(world: World, payment_id: str) -> dict[str, Any] | None:
    for user in world.users.values():
        method = (user.get("payment_methods") or {}).get(payment_id)
        if isinstance(method, dict):
            return method
    return None


_PAYMENT_WORDS = re.compile(r"\b(card|paypal|payment method|original (payment )?method|certificate)\b", re.I)
_EXPLAINED = re.compile(r"\b(only|must|can['’]?t|cannot|not possible|not able|original (payment )?method|not (allowed|permitted))\b", re.I)


def _asked_method(ev: Evidence, before: int) -> tuple[str, int] | None:
    """The payment method the user last asked for before a message: (what, message index); None when the agent
    explained in between that it could not be used (the policy decides where a refund goes)."""
    for utterance in reversed([u for u in ev.said if u.role == "user" and u.index < before]):
        matches = list(_PAY_INTENT.finditer(utterance.text))
        if matches:
            between = [s for u in ev.said if u.role == "assistant" and utterance.index < u.index < before for s in sentences(u.text)]
            if any(_EXPLAINED.search(s) and _PAYMENT_WORDS.search(s) for s in between):
                return None
            said = matches[-1].group(0)
            if re.search(r"card", said, re.I) and not re.search(r"\d{4}|gift", said, re.I):  # "credit card ending in 7334": digits come after
                sentence = next((s for s in sentences(utterance.text) if said in s), said)
                tail = sentence[sentence.find(said) + len(said) :][:25]
                said += tail if re.match(r"\s*(ending|that ends)", tail, re.I) else ""
            return said, utterance.index
    return None


def _payment(ev: Evidence, call: AgentCall) -> bool:
    asked = _asked_method(ev, call.message_index)
    if asked is None:
        return False
    text, at = asked
    world = ev.world_before(call.message_index)
    digits = re.search(r"\b(\d{4})\b", text)
    owned = [m for u in world.users.values() for m in (u.get("payment_methods") or {}).values() if isinstance(m, dict)]
    if digits and not any(str(m.get("last_four")) == digits.group(1) for m in owned):
        return False  # no such card on record: the agent could not have used it
    for source, pattern in (("gift_card", r"gift ?card"), ("paypal", r"paypal")):
        if re.search(pattern, text, re.I) and not digits and not any(m.get("source") == source for m in owned):
            return False
    for payment_id in _payment_ids(call.arguments or {}):
        method = _method(world, payment_id)
        if method is None:
            continue
        source, last_four = str(method.get("source", "")), str(method.get("last_four") or "")
        wrong = None
        if digits and source == "credit_card" and last_four and last_four != digits.group(1):
            wrong = f"the card ending in {digits.group(1)}"
        elif re.search(r"gift ?card", text, re.I) and not digits and source not in ("gift_card",) and source != "certificate":
            wrong = "a gift card"
        elif re.search(r"paypal", text, re.I) and source == "credit_card" and not re.search(r"credit|card", text, re.I):
            wrong = "PayPal"
        if wrong:
            described = f"{source.replace('_', ' ')}" + (f" ending in {last_four}" if last_four else "")
            ev.add(CAP, LACKING, f"{call.name} paid with {payment_id} ({described}); the user asked for {wrong}", rule="payment_not_the_one_asked",
                   at=call.message_index, values={"payment_id": payment_id, "method": described, "user_asked": text[:80], "asked_at": at},
                   confidence=TEXT)  # fmt: skip
            return True
    return False


def judge_values(ev: Evidence) -> None:
    """Ids and free text found nowhere, passengers' dates of birth and payment methods, for every call."""
    sources: Sources | None = None
    for call in ev.calls:
        if call.arguments is None or ev.catalog.knows(call.name) is False:
            continue
        sources = sources or Sources(ev)
        batch = tuple(c.result_index for c in ev.calls if c.message_index == call.message_index and c.position < call.position and c.result_index is not None)
        unseen = [(k, v) for k, v in id_values(call.arguments) if not sources.mentioned(v, call.message_index, batch)]
        if ev.domain in ("airline", "retail"):  # τ²'s argument names; another target's may mean something else
            unseen += [(k, v) for k, v in _free_values(call.arguments) if not sources.mentioned(v, call.message_index, batch) and not sources.told(v)]
        if unseen:
            key, value = unseen[0]
            ev.add(CAP, LACKING, f"{call.name}: {key} {value!r} appears nowhere the agent could have read it", rule="value_seen_nowhere",
                   at=call.message_index, values={"argument": key, "passed": value}, confidence=RECORD)  # fmt: skip
            return
        if call.name in ("book_reservation", "update_reservation_passengers") and _passengers(ev, call, sources):
            return
        if ev.catalog.is_write(call.name) and _payment(ev, call):
            return
