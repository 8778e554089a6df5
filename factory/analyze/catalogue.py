"""Built-in capability catalogue: the six capabilities the TRACE paper found on τ²-bench, plus policy
application (the most common τ² airline failure: deciding wrongly whether the policy allows a request) and
escalation.

The catalogue can seed LLM discovery (the model reuses these names for the same ideas and adds others) or
replace it (``--catalogue only``). The offline labeler knows exactly these capabilities.
"""

from __future__ import annotations

from schemas.capability import Capability

PAPER_CAPABILITIES: tuple[Capability, ...] = (
    Capability(
        name="precondition_verification",
        description=(
            "Before a state-changing action, looks up and checks the facts the policy makes it conditional on "
            "(the record's status, age or ownership; membership tier; insurance; whether the order is pending or "
            "delivered) and declines or offers an allowed alternative when a condition fails, instead of acting "
            "on the user's say-so or on a record it never opened."
        ),
    ),
    Capability(
        name="structured_data_reasoning",
        description=(
            "Reads nested tool results (user profiles, reservations, orders, flight lists, item variants) "
            "correctly: finds the right record among many, compares and aggregates fields such as prices, counts "
            "and statuses, and carries the exact ids and values of that record into later calls."
        ),
    ),
    Capability(
        name="tool_calling_precision",
        description=(
            "Calls the right tool with well-formed arguments that match its schema and the facts: exact ids and "
            "enum values, complete lists, the intended payment method, no invented, truncated or mistyped values "
            "and no missing required fields."
        ),
    ),
    Capability(
        name="multi_step_task_completion",
        description=(
            "Carries a multi-part request through every required step to the final state-changing actions: no "
            "sub-request forgotten, no promised action left unmade, no ending the conversation before the work "
            "the user asked for (and the policy allows) is done."
        ),
    ),
    Capability(
        name="permission_error_recovery",
        description=(
            "When a tool returns an error or a refusal (not found, not allowed, invalid status, insufficient "
            "funds), reads it, works out the cause and recovers: corrects the input, takes an allowed alternative "
            "or explains the limit to the user, rather than repeating the same failing call or ignoring it."
        ),
    ),
    Capability(
        name="datetime_reasoning",
        description=(
            "Reasons correctly about dates and times: the scenario's current date, days between dates, whether a "
            "booking is within a cancellation window, departure versus booking dates, relative dates such as "
            "'next Friday', and writes dates in the exact format tools expect."
        ),
    ),
)

EXTRA_CAPABILITIES: tuple[Capability, ...] = (
    Capability(
        name="policy_application",
        description=(
            "Decides correctly whether the domain policy allows what the user asks, given the records it has "
            "read: grants what the policy allows (a cancellation with a valid ground, a cabin change before any "
            "flight has flown, a return of a delivered order) and refuses what it forbids (changing a basic "
            "economy trip's flights, removing bags, compensating an ineligible user), whatever the user insists."
        ),
    ),
    Capability(
        name="escalation_judgment",
        description=(
            "Transfers to a human agent exactly when the policy requires it (a request outside what the agent "
            "may do), with a useful summary, and does not escalate a request it could and should have handled."
        ),
    ),
)

BUILTIN_CAPABILITIES: tuple[Capability, ...] = PAPER_CAPABILITIES + EXTRA_CAPABILITIES


def builtin_capabilities() -> list[Capability]:
    """Fresh copies, so callers may attach example failures without touching the catalogue."""
    return [c.model_copy(deep=True) for c in BUILTIN_CAPABILITIES]


def builtin_names() -> list[str]:
    return [c.name for c in BUILTIN_CAPABILITIES]
