"""The τ² airline world: seeded databases, the fourteen faithful tools, and the policy as functions.

An env writes ``from trace_env.kits import tau2_airline as airline`` and then:

- builds its database with ``world = airline.AirlineWorld(rng, now)`` (``user()``, ``flight()``,
  ``reservation()``, ``state(user)``), in the real ``db.json`` record shapes;
- inherits ``airline.AirlineTools`` to get every τ² tool as an ``@sdk.tool`` method, exposes a subset in
  ``tool_names``, and overrides any one by redefining it; the same tools are plain functions
  (``airline.cancel_reservation(db, rid)``) for computing an expected end state;
- grades with the policy: ``airline.cancellation_check(reservation, db["flights"], now, reason)``,
  ``airline.flight_change_problems(...)``, ``airline.add_bags(...)``, ``airline.price_flights(...)``,
  ``airline.net_payments(...)``, ``airline.compensation(...)``;
- speaks like the target: ``airline.agent_policy(now)`` for the system prompt, ``REASON_TEXTS``, ``TRIGGERS``
  and ``RULE_WORDS`` for scripted customers and graded explanations.
"""

from trace_env.kits.tau2_airline import customer, policy, tools, world
from trace_env.kits.tau2_airline.customer import *  # noqa: F403
from trace_env.kits.tau2_airline.policy import *  # noqa: F403
from trace_env.kits.tau2_airline.tools import *  # noqa: F403
from trace_env.kits.tau2_airline.world import *  # noqa: F403

__all__ = sorted({*customer.__all__, *policy.__all__, *tools.__all__, *world.__all__})
