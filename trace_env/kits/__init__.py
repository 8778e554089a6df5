"""Target worlds an env may import: seeded state builders, faithful tools and the policy, per target.

An env module writes ``from trace_env.kits import tau2_airline`` (or ``tau2_retail``, ``toolsandbox``) and gets
the target's records, its tools as ``@sdk.tool`` mixin methods, and its policy as functions, so the env only
writes what its capability adds. Shared helpers: ``calculator`` (τ²'s ``calculate`` without eval) and ``text``
(how rewards read an agent's words). Kits run inside the sandbox like the SDK: plain stdlib, trusted code;
the host imports them too (``factory analyze`` checks real τ² trajectories with the policy functions).

- ``tau2_airline``: ``AirlineWorld``, ``AirlineTools`` (14 tools), ``cancellation_check``, ``price_flights`` ...
- ``tau2_retail``: ``RetailWorld``, ``CATALOG``, ``RetailTools`` (16 tools), ``allowed_actions``,
  ``swap_problems``, ``matching_variants``, ``customer_reply`` ...
- ``toolsandbox``: ``PhoneWorld``, ``PhoneTools`` (settings, contacts, messaging, reminders, utilities),
  ``us_holidays``, ``mentions_date`` ...
"""

KITS = ("calculator", "text", "tau2_airline", "tau2_retail", "toolsandbox")
#: The kit of each shipped target (an env for another target may still use the shared kits).
KIT_FOR_TARGET = {"tau2-airline": "tau2_airline", "tau2-retail": "tau2_retail", "toolsandbox": "toolsandbox"}
#: Kits for every target.
SHARED_KITS = ("text", "calculator")
