"""What was said in a trajectory, as the offline labeler needs it: the user's requests, reasons and dates,
the agent's refusals, proposals and claims. Plain pattern matching over English customer-service text,
deliberately narrow: a pattern that does not fire leaves a label NA rather than guessing.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from schemas.trajectory import Trajectory

SENTENCE = re.compile(r"(?<=[.!?:;\n])\s+|\n+")
_REFUSE_AHEAD = re.compile(
    r"\b(unable to|not able to|cannot|can ?not|can['’]t|won['’]t be able to|am not allowed to|must decline to|have to decline|no longer be)\b",
    re.IGNORECASE,
)
"""Negations that govern what follows them: "cannot [be] upgrade[d]"."""
_REFUSE_AROUND = re.compile(
    r"\b(is not|isn['’]t|are not|aren['’]t|not) (eligible|possible|permitted|allowed)\b|\bineligible\b|\b(does|do)(n['’]t| not) (qualify|meet)\b",
    re.IGNORECASE,
)
"""Verdicts that may follow what they judge: "upgrading it is not allowed"."""
_REFUSE = re.compile(_REFUSE_AHEAD.pattern + "|" + _REFUSE_AROUND.pattern, re.IGNORECASE)
ACTIONS: dict[str, re.Pattern[str]] = {
    "cancel": re.compile(r"\bcancel(l?ed|l?ing|lation|s)?\b", re.IGNORECASE),
    "change_cabin": re.compile(r"\b(upgrad|downgrad)\w*|\b(chang|modif|switch|mov)\w*\b[^.]{0,25}\b(cabin|class|to (basic )?economy|to business)\b", re.IGNORECASE),
    "change_flights": re.compile(r"\b(change|modify|modif\w+|rebook|move|switch)\b[^.]{0,40}\b(flight|date|itinerary|trip|reservation|return|departure)", re.IGNORECASE),
    "add_bags": re.compile(r"\b(add|extra|additional)\b[^.]{0,25}\b(bag|baggage|luggage)", re.IGNORECASE),
    "compensation": re.compile(r"\b(compensat\w*|certificate|voucher|gesture)\b", re.IGNORECASE),
    "return": re.compile(r"\breturn(ed|ing|s)?\b", re.IGNORECASE),
    "exchange": re.compile(r"\bexchang(e|ed|ing)\b", re.IGNORECASE),
    "modify_order": re.compile(r"\b(modify|change|update)\b[^.]{0,30}\b(order|item|address|payment)", re.IGNORECASE),
}
REASONS = {
    "health": re.compile(r"\b(health|sick|ill|illness|hospital\w*|medical|surgery|injur\w*|doctor|emergency room|unwell|covid|flu)\b", re.IGNORECASE),
    "weather": re.compile(r"\b(weather|storm|hurricane|snow\w*|blizzard|typhoon|flood\w*)\b", re.IGNORECASE),
    "airline_cancelled": re.compile(r"\b(airline|you|your company)\b[^.]{0,30}\bcancel+ed\b|\bflight (was|got|has been) cancel+ed\b", re.IGNORECASE),
    "change_of_plan": re.compile(r"\b(change (of|in|to) (my )?plans?|plans? (have |has )?changed|no longer (need|want)|don['’]t need)\b", re.IGNORECASE),
}
_CONFIRM = re.compile(
    r"^\W*(yes|yeah|yep|correct|confirm(ed)?|go ahead|please (do|proceed|go ahead)|proceed|i confirm|that['’]s (right|correct))\b"
    r"|^\W*(sure|ok(ay)?)\W+(please )?(go ahead|proceed|do it|confirm)",
    re.IGNORECASE,
)
_ASKS_CONFIRM = re.compile(
    r"(would you like (me )?to proceed|shall i|should i proceed|do you (want|wish) (me )?to proceed|do you confirm|please confirm|"
    r"can you confirm|confirm (that )?you|proceed\?|go ahead\?|\(yes\)|yes/no|(reply|respond|answer) (with )?['\"“]?yes)",
    re.IGNORECASE,
)
_DONE_VERB = r"(cancel+ed|updated|modified|booked|changed|added|processed|upgraded|downgraded|exchanged|returned|refunded|issued)"
_CLAIM_DONE = re.compile(
    r"\b(i['’]ve|i have|we['’]ve|we have) (now )?(successfully )?" + _DONE_VERB
    + r"|\byour (reservation|booking|order|flight|flights|bags?|baggage|cabin|address|payment|exchange|return|refund|certificate)\b"
    r"[^.!?]{0,60}\b(has|have) (now )?(been )?(successfully )?" + _DONE_VERB
    + r"|\bsuccessfully " + _DONE_VERB,
    re.IGNORECASE,
)
_CLAIM_SHORT = re.compile(
    r"^\W*(done|all set|all done|you['’]re all set|you are all set|completed?|confirmed)\b"
    r"|\b(is|are|has been|have been|was|were) (now )?(all )?(successfully )?(booked|confirmed|cancel+ed|updated|modified|changed|added|"
    r"processed|upgraded|downgraded|exchanged|returned|refunded|issued|requested|removed|placed|done|complete[d]?)\b|\bis now\b",
    re.IGNORECASE,
)
"""Short claims of a change, trusted only about the change a failed call was meant to make."""
_NOT_DONE = re.compile(r"\b(unable|not able|couldn['’]t|could not|can['’]t|cannot|failed|fail|error|problem|issue|unfortunately|"
                       r"wasn['’]t|was not|did not|didn['’]t|not (been )?(processed|completed|possible))\b", re.IGNORECASE)  # fmt: skip
_CONDITION = re.compile(r"\b(but|however|only if|as long as|provided|unless)\b|\?", re.I)
CLAIM_OBJECT = {
    "cancel_reservation": r"cancel", "cancel_pending_order": r"cancel", "return_delivered_order_items": r"return",
    "exchange_delivered_order_items": r"exchang", "book_reservation": r"book|reservation|flight", "send_certificate": r"certificate|voucher",
    "update_reservation_flights": r"flight|cabin|class|upgrad|downgrad|economy|business", "update_reservation_baggages": r"bag|luggage",
    "update_reservation_passengers": r"passenger|name", "modify_pending_order_items": r"\bitems?\b|swap|exchang|modif|chang|switch",
    "modify_pending_order_address": r"address", "modify_pending_order_payment": r"payment", "modify_user_address": r"address",
}  # fmt: skip
"""What a message must mention to be about the change a given tool makes."""
_DAY = r"(24|twenty[- ]four)[- ]?(hours?|hrs?|h)\b"
WITHIN_24H = re.compile(r"(?<!not )(?<!n['’]t )\b(within|less than|under|inside)( of)?( the)?( last| past)? " + _DAY + r"|\bwithin a day\b", re.IGNORECASE)
"""A claim that a booking is recent enough for the 24-hour rule."""
BEYOND_24H = re.compile(r"\b(more than|over|beyond|exceed\w*|not within|outside( of)?|after)( the)?( last| past| first)? " + _DAY, re.IGNORECASE)
"""A claim that it is not."""
FLOWN_WORDS = re.compile(r"\b(already (been )?(flown|departed|taken off|landed|completed|used)|in the past|has departed|have departed)\b", re.IGNORECASE)
RESERVATION_ID = re.compile(r"(?<![A-Za-z0-9#])[A-Z0-9]{6}(?![A-Za-z0-9])")
"""Six capitals or digits: a τ² reservation id shape (also matches words such as PLEASE; callers keep only ids
of records the agent has read)."""
ORDER_ID = re.compile(r"#?W\d{7}\b")
_MONTHS = {m: i for i, m in enumerate(("january", "february", "march", "april", "may", "june", "july", "august", "september",
                                       "october", "november", "december"), start=1)}  # fmt: skip
_MONTH = "(" + "|".join(_MONTHS) + r"|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)\.?"
_DATE_WORDS = re.compile(
    r"\b(\d{4})-(\d{2})-(\d{2})\b|\b" + _MONTH + r"\s+(\d{1,2})(?:st|nd|rd|th)?(?:,?\s+(\d{4}))?\b"
    r"|\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MONTH + r"(?:,?\s+(\d{4}))?\b",
    re.IGNORECASE,
)
RELATIVE_DATE = re.compile(r"\b(tomorrow|today|tonight|next (day|week|morning)|day after|following day|same day|later|earlier|earliest|latest|"
                           r"day before|weekend|original|return)\b", re.IGNORECASE)  # fmt: skip


@dataclass
class Utterance:
    index: int
    role: str
    text: str


def utterances(trajectory: Trajectory) -> list[Utterance]:
    """User and assistant text messages in order (tool results and the user's own device tools excluded)."""
    out = []
    for index, message in enumerate(trajectory.messages):
        if message.role in ("user", "assistant") and message.content and getattr(message, "requestor", None) != "user":
            out.append(Utterance(index, message.role, message.content))
    return out


def sentences(text: str) -> list[str]:
    return [s.strip() for s in SENTENCE.split(text) if s and s.strip()]


def refusals(text: str) -> list[tuple[str, str]]:
    """(action, sentence) for each sentence that refuses an action (``cancel``, ``change_flights``, ...): the
    action must follow a negation such as "cannot" closely, or sit near a verdict such as "is not allowed"."""
    out: list[tuple[str, str]] = []
    if not _REFUSE.search(text):
        return out
    for sentence in sentences(text):
        spans = [(m.end(), m.end() + 60) for m in _REFUSE_AHEAD.finditer(sentence)]
        spans += [(max(0, m.start() - 80), m.end() + 60) for m in _REFUSE_AROUND.finditer(sentence)]
        for action, pattern in ACTIONS.items():
            if any(pattern.search(sentence[a:b]) for a, b in spans):
                out.append((action, sentence))
                break
    return out


_NEGATED = re.compile(r"\b(not|no|don['’]t|do not|never|nor|isn['’]t|aren['’]t|without|fake|pretend|lie about)\b(\W+\w+){0,6}\W*$", re.IGNORECASE)


def reason_category(text: str) -> str | None:
    """The user's reason for cancelling as the policy's categories (health and weather are covered); a reason
    mentioned only to deny it ("you do NOT have a health related issue") does not count."""
    for name, pattern in REASONS.items():
        if any(not _NEGATED.search(text[max(0, m.start() - 40) : m.start()]) for m in pattern.finditer(text)):
            return name
    if re.search(r"\bother reasons?\b|\breason\W+(is\W+)?['\"“]?other\b|\bfor another reason\b", text, re.IGNORECASE):
        return "other"
    return None


def is_confirmation(text: str) -> bool:
    return bool(_CONFIRM.search(text.strip()))


def confirms_first(text: str) -> bool:
    """Whether the message opens with a plain yes (its first sentence a confirmation with no condition): "Yes.
    Also, what is the total?" goes ahead; "Yes, but only if it is free" does not."""
    parts = sentences(text)
    return bool(parts) and is_confirmation(parts[0]) and not _CONDITION.search(parts[0])


def asks_confirmation(text: str) -> bool:
    return bool(_ASKS_CONFIRM.search(text))


def claims_done(text: str, tool: str | None = None) -> str | None:
    """The sentence in which a message says a change was made, if any. Without ``tool``, only explicit
    claims count ("I have cancelled", "your order has been modified", "successfully ..."); with a tool, also
    short ones ("Done", "All set", "is booked", "are done", "is now ...") in a sentence about what that tool
    changes (a booking, bags, the passengers, an exchange)."""
    subject = CLAIM_OBJECT.get(tool or "")
    for sentence in sentences(text):
        if _NOT_DONE.search(sentence):
            continue
        if _CLAIM_DONE.search(sentence) and (subject is None or re.search(subject, sentence, re.I) or tool is None):
            return sentence
        if subject is not None and _CLAIM_SHORT.search(sentence) and re.search(subject, sentence, re.I):
            return sentence
    if subject is not None and _CLAIM_SHORT.match(text.strip()) and re.search(subject, text, re.I):
        return sentences(text)[0]
    return None


def denies_success(text: str) -> bool:
    """Whether a message says something did not work (an error, a failure, an inability)."""
    return bool(_NOT_DONE.search(text))


def ids_in(text: str) -> set[str]:
    """Reservation and order ids named in a text (order ids with their leading ``#``)."""
    found = set(RESERVATION_ID.findall(text))
    found |= {("#" + m.lstrip("#")) for m in ORDER_ID.findall(text)}
    return found


def dates_in(text: str, year: int = 2024) -> set[str]:
    """Explicit calendar dates in a text, as ``YYYY-MM-DD`` (a month and day without a year take ``year``)."""
    out = set()
    for match in _DATE_WORDS.finditer(text):
        iso_y, iso_m, iso_d, month_a, day_a, year_a, day_b, month_b, year_b = match.groups()
        try:
            if iso_y:
                out.add(dt.date(int(iso_y), int(iso_m), int(iso_d)).isoformat())
            else:
                name = (month_a or month_b).lower().rstrip(".")
                month = next(v for k, v in _MONTHS.items() if k.startswith(name[:3]))
                out.add(dt.date(int(year_a or year_b or year), month, int(day_a or day_b)).isoformat())
        except ValueError:
            continue
    return out
