"""Requests with several parts, of which only some were done (multi_step_task_completion).

Three readings of "what was asked", each narrow enough to be checked against the calls made:

- a proposal the user said yes to: each change it lists (by what the change is about: bags, passengers, the
  cabin, a cancellation, a return...) must be followed by a call of the tool that makes it;
- a request about all records of a kind ("downgrade all my business flights", "cancel all my pending orders",
  "modify all my pending t-shirts"): every matching record the agent had read must be changed or declined;
- a return or exchange of items the user named is judged in ``rules_items``.
"""

from __future__ import annotations

import re

from trace_env.kits import tau2_airline as airline_kit
from trace_env.kits import tau2_retail as retail_kit

from factory.analyze.conversation import asks_confirmation, claims_done, confirms_first, ids_in, reason_category, refusals, sentences
from factory.analyze.evidence import LACKING, PRESENT, TEXT, Evidence, same_record
from factory.analyze.world import World

CAP = "multi_step_task_completion"
TRANSFER = "transfer_to_human_agents"
_STOP = re.compile(r"###(STOP|TRANSFER|OUT-OF-SCOPE)###")
_WRITE_WORDS = re.compile(r"\b(book|cancel|change|modify|update|upgrade|downgrade|add|exchange|return|refund|issue|send|process|switch|remove|swap)\w*", re.I)
_ALL_CHANGES = re.compile(r"\b(all|both|these|the) (three|two|four|five|of the|changes|of them|of it)\b|\ball of (it|them|these)\b", re.I)
_PART_TOOLS = {
    "airline": [
        (r"\b(book|booking)\s+(you|the|a|this|these|it|for|flights?|HAT\d+|your|on)\b|^\W*booking\b", "book_reservation"),
        (r"\bcancel(l?ing)?\b", "cancel_reservation"),
        (r"\b(issue|send|offer)\w*\b[^.]{0,30}\b(certificate|voucher)", "send_certificate"),
        (r"\badd(ing)?\b[^.]{0,30}\b(bags?|baggages?|luggage|suitcases?)\b", "update_reservation_baggages"),
        (r"\b(upgrad|downgrad)\w*", "update_reservation_flights"),
        (r"\b(chang|updat|modif|replac|correct|renam)\w*\b[^.]{0,40}\b(passengers?|name)\b", "update_reservation_passengers"),
        (r"\b(chang|switch|mov|modif|updat|rebook|push)\w*\b[^.]{0,40}\b(cabin|class|flights?|date|itinerary)\b", "update_reservation_flights"),
    ],
    "retail": [
        (r"\breturn(ing)?\b(?!ed)", "return_delivered_order_items"),
        (r"\bexchang(e|ing)\b", "exchange_delivered_order_items"),
        (r"\bcancel(l?ing)?\b", "cancel_pending_order"),
        (r"\b(chang|updat|modif)\w*\b[^.]{0,40}\baddress\b", "modify_pending_order_address|modify_user_address"),
        (r"\b(chang|updat|modif|switch)\w*\b[^.]{0,40}\bpayment method\b", "modify_pending_order_payment"),
        (r"\b(modify|modifying|switch|switching|change|changing|swap|swapping)\b[^.]{0,40}\b(items?|variant|option|version|model|size|color|colour)\b",
         "modify_pending_order_items"),
    ],
}
_VERBS = re.compile(r"\b(cancel|downgrad|upgrad|modif|chang|switch|return|exchang|updat)\w*", re.I)
_ALL = re.compile(r"\b(all|every|each|both)\b", re.I)
_NOT_PROPOSAL = re.compile(r"\b(is|are|has been|have been|was|were) (now |already )?\w+ed\b|\bis now\b", re.I)


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _parts(text: str, domain: str | None) -> list[str]:
    """The tools a proposal's changes need, one per line or sentence that proposes a change."""
    tools: list[str] = []
    for line in sentences(text):
        if not _WRITE_WORDS.search(line) or _NOT_PROPOSAL.search(line) or refusals(line):
            continue
        for pattern, tool in _PART_TOOLS.get(domain or "", []):
            if re.search(pattern, line, re.I):
                if tool not in tools:
                    tools.append(tool)
                break
    return tools


_ROUTE = re.compile(r"\b[A-Z]{3}\s*(?:→|->|↔)\s*[A-Z]{3}\b")
"""An itinerary ("LAX → MIA"), not a change."""
_CHANGE_MARK = re.compile(r"→|->|\bto item\b|\(item \d+", re.I)


def _listed_records(text: str, ev: Evidence) -> list[str]:
    """Records a proposal lists a change for, one per line: a line naming a record it has read and a change
    ("order #W3561391: gas/portable → charcoal"), not a refusal or a done change. A record named as where a value
    comes from ("the address on order #W5285031") is not listed."""
    lines = text.splitlines() if "\n" in text.strip() else sentences(text)
    known = set(ev.final_world.reservations) | set(ev.final_world.orders)
    out: list[str] = []
    for line in lines:
        if not _CHANGE_MARK.search(_ROUTE.sub(" ", line)) or _NOT_PROPOSAL.search(line) or refusals(line):
            continue
        out += [i for i in sorted(ids_in(line)) if i in known and i not in out]
    return out


def confirmed_changes(ev: Evidence) -> None:
    """The user said yes to listed changes; each must be followed by a call that makes it (or a refusal)."""
    for number, utterance in enumerate(ev.said):
        if utterance.role != "user" or _STOP.search(utterance.text) or not confirms_first(utterance.text):
            continue
        proposal = next((u for u in reversed(ev.said[:number]) if u.role == "assistant"), None)
        if proposal is None or not asks_confirmation(proposal.text) or not _WRITE_WORDS.search(proposal.text):
            continue
        parts = _parts(proposal.text, ev.domain)
        if _ALL_CHANGES.search(proposal.text):
            request = next((u for u in reversed(ev.said[:number]) if u.role == "user" and _WRITE_WORDS.search(u.text)), None)
            window = [u.text for u in ev.said[:number] if u.role == "assistant" and (request is None or u.index > request.index)]
            parts = list(dict.fromkeys(p for text in window for p in _parts(text, ev.domain)))
        later = [c for c in ev.calls if c.message_index > utterance.index]
        declined = any(u.role == "assistant" and u.index > utterance.index and refusals(u.text) for u in ev.said)
        if any(c.name == TRANSFER for c in later) or declined:
            continue
        attempted = [c for c in later if ev.catalog.is_write(c.name)]
        missing = [p for p in parts if not any(re.fullmatch(p, c.name) for c in attempted)]
        touched = [(c.arguments or {}).get("reservation_id") or (c.arguments or {}).get("order_id") for c in attempted]
        unmade = [r for r in _listed_records(proposal.text, ev) if not any(same_record(r, t) for t in touched)]
        if attempted and unmade and not missing:
            ev.add(CAP, LACKING, f"the user confirmed the listed changes ({utterance.text.strip()[:50]!r}) but the agent never changed {unmade[0]}",
                   rule="listed_change_not_made", at=utterance.index,
                   values={"proposal_at": proposal.index, "listed": _listed_records(proposal.text, ev), "changed": [t for t in touched if t]},
                   confidence=TEXT)  # fmt: skip
            return
        if not attempted or missing:
            what = (missing[0] if missing else "the change").split("|")[0]
            ev.add(CAP, LACKING, f"the user confirmed ({utterance.text.strip()[:50]!r}) but the agent never made {what}", rule="confirmed_change_not_made",
                   at=utterance.index, values={"proposal_at": proposal.index, "proposed": parts, "calls_after": [c.name for c in attempted]},
                   confidence=TEXT)  # fmt: skip
            return
        ev.add(CAP, PRESENT, "confirmed changes were carried out", rule="confirmed_changes_made")


def _matches_filter(phrase: str, record: dict, kind: str, now: str) -> bool | None:
    """Whether a record fits the words between "all" and the noun ("my business", "my pending"); None when the
    phrase names no filter these rules understand."""
    phrase = phrase.lower()
    if kind == "reservation":
        cabin = "basic_economy" if "basic economy" in phrase else "business" if "business" in phrase else None
        upcoming = bool(re.search(r"upcoming|future", phrase))
        if cabin is None and not upcoming:
            return None
        if record.get("status") == "cancelled":
            return False
        if upcoming and any(isinstance(s.get("date"), str) and s["date"] < now[:10] for s in record.get("flights", [])):
            return False
        return cabin is None or record.get("cabin") == cabin
    status = next((s for s in ("pending", "delivered") if s in phrase), None)
    return None if status is None else record.get("status") == status


_VERB_TOOLS = {
    "cance": r"cancel_reservation|cancel_pending_order", "downg": r"update_reservation_flights", "upgra": r"update_reservation_flights",
    "modif": r"update_reservation_\w+|modify_\w+", "chang": r"update_reservation_\w+|modify_\w+", "switc": r"update_reservation_flights|modify_\w+",
    "updat": r"update_reservation_\w+|modify_\w+", "retur": r"return_delivered_order_items", "excha": r"exchange_delivered_order_items",
}  # fmt: skip
"""The tools that carry out each verb of an "all ..." request (by its first five letters)."""


def _allowed(ev: Evidence, verb: str, record: dict, world: World) -> bool:
    """Whether the policy lets the agent do this to the record: a record it rightly declines is not left undone."""
    if "reservation_id" in record:
        flights = world.flights
        if verb.startswith("cancel"):
            reason = reason_category(ev.user_text_before(len(ev.trajectory.messages)))
            return airline_kit.cancellation_check(record, flights, world.now, reason).eligible
        return not airline_kit.flown_segments(record, flights)
    action = {"cance": "cancel", "retur": "return", "excha": "exchange"}.get(verb[:5], "modify_items")
    return action in retail_kit.allowed_actions(record)


def all_of_a_kind(ev: Evidence) -> None:
    """ "Downgrade all my business flights", "cancel all my pending orders", "modify all my pending t-shirts":
    every matching record read must be changed or declined, once the agent has changed some."""
    seen = ev.first_seen
    for utterance in ev.said:
        if utterance.role != "user":
            continue
        for sentence in sentences(utterance.text):
            verb, every = _VERBS.search(sentence), _ALL.search(sentence)
            if not verb or not every:
                continue
            noun = re.search(r"\b(flights?|reservations?|trips?|bookings?|orders?)\b|\b([a-z-]+s)\b", sentence[every.end():], re.I)
            if noun is None:
                continue
            phrase = sentence[every.start(): every.end() + noun.end()]
            if ev.domain == "airline":
                records = {rid: r for rid, r in seen.reservations.items() if _matches_filter(phrase, r, "reservation", ev.now)}
                if not any(_matches_filter(phrase, r, "reservation", ev.now) is not None for r in seen.reservations.values()):
                    continue
            else:
                records = {oid: o for oid, o in seen.orders.items() if _matches_filter(phrase, o, "order", ev.now)}
                if not any(_matches_filter(phrase, o, "order", ev.now) is not None for o in seen.orders.values()):
                    continue
                product = noun.group(2)
                if product and not re.fullmatch(r"orders?|items?|things?|products?", product, re.I):
                    wanted = _norm(product.rstrip("s"))
                    records = {oid: o for oid, o in records.items() if any(wanted and wanted in _norm(i.get("name", "")) for i in o.get("items", []))}
            tools = _VERB_TOOLS.get(verb.group(1).lower()[:5], "")
            records = {k: r for k, r in records.items() if _allowed(ev, verb.group(1).lower(), r, seen)}
            changed = {str((c.arguments or {}).get("reservation_id") or (c.arguments or {}).get("order_id") or "").lstrip("#")
                       for c in ev.calls if c.message_index > utterance.index and ev.catalog.is_write(c.name) and re.fullmatch(tools, c.name)}  # fmt: skip
            declined = set()
            for later in ev.said:
                if later.role == "assistant" and later.index > utterance.index:
                    for sentence_out in sentences(later.text):
                        if refusals(sentence_out) or re.search(r"\b(already|not eligible|cannot|can't|unable|flown)\b", sentence_out, re.I):
                            declined |= {i.lstrip("#") for i in ids_in(sentence_out)}
            wanted_ids = {k.lstrip("#") for k in records}
            missing = sorted(i for i in wanted_ids - declined if not any(same_record(i, c) for c in changed))
            if missing and wanted_ids & changed:
                ev.add(CAP, LACKING, f"asked to {verb.group(0).lower()} {phrase.strip()!r}: changed {len(wanted_ids & changed)} of the "
                                     f"{len(wanted_ids)} matching records read, not {', '.join(missing)}", rule="all_of_a_kind_partly_done",
                       at=utterance.index, values={"asked": sentence[:160], "matching": sorted(wanted_ids), "changed": sorted(wanted_ids & changed),
                                                   "left": missing}, confidence=TEXT)  # fmt: skip
                return


def no_write_but_claimed(ev: Evidence) -> None:
    if not any(ev.catalog.is_write(c.name) for c in ev.calls):
        claim = next((u for u in ev.said if u.role == "assistant" and claims_done(u.text)), None)
        if claim is not None:
            ev.add(CAP, LACKING, f"told the user a change was made without making any: {claim.text.strip()[:60]!r}", rule="claimed_change_never_made",
                   at=claim.index, values={"said": claim.text.strip()[:160], "writes": 0}, confidence=TEXT)  # fmt: skip


_REBOOK = re.compile(r"\bcancel\w*\b[^.?!]{0,80}\b(re-?book|book (a |the )?new|new (booking|reservation))|\brebook", re.I)


_LATER = re.compile(r"\b(later|myself|on my own|another time|some other time)\b", re.I)


def cancelled_not_rebooked(ev: Evidence) -> None:
    """The user asked to cancel a reservation and book a new one; the agent cancelled and booked nothing: half of
    a two-part change, and the half that leaves the user without a trip."""
    said = " ".join(u.text for u in ev.said if u.role == "user")
    if ev.domain != "airline" or not any(not _LATER.search(said[m.end() : m.end() + 40]) for m in _REBOOK.finditer(said)):
        return
    cancels = [c for c in ev.calls if c.name == "cancel_reservation" and c.succeeded]
    if cancels and not any(c.name == "book_reservation" and c.succeeded for c in ev.calls):
        rid = (cancels[0].arguments or {}).get("reservation_id")
        ev.add(CAP, LACKING, f"cancelled {rid} to rebook, as the user asked, and booked no new reservation", rule="cancelled_not_rebooked",
               at=cancels[0].message_index, values={"cancelled": rid, "bookings": 0}, confidence=TEXT)  # fmt: skip


def judge(ev: Evidence) -> None:
    cancelled_not_rebooked(ev)
    confirmed_changes(ev)
    all_of_a_kind(ev)
    no_write_but_claimed(ev)
