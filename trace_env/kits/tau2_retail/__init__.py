"""The τ² retail world: seeded stores, the sixteen faithful tools, the policy as functions, a scripted customer.

An env writes ``from trace_env.kits import tau2_retail as retail`` and then:

- builds its store with ``world = retail.RetailWorld(rng)`` (``variants()``, ``product()``, ``user()``,
  ``order()``, ``RetailWorld.state(products, users, orders)``) from ``retail.CATALOG``, in the real shapes;
- inherits ``retail.RetailTools`` to get every τ² tool as an ``@sdk.tool`` method, exposes a subset in
  ``tool_names``, overrides any one by redefining it; the same tools are plain functions
  (``retail.exchange_delivered_order_items(db, ...)``) for computing an expected end state;
- grades with the policy: ``retail.allowed_actions(order)``, ``retail.swap_problems(...)``,
  ``retail.price_difference(...)``, ``retail.refund_problems(...)``, ``retail.matching_variants(...)``;
- answers as the customer with ``retail.customer_reply(episode, agent_text)``.
"""

from trace_env.kits.tau2_retail import customer, policy, tools, world
from trace_env.kits.tau2_retail.customer import *  # noqa: F403
from trace_env.kits.tau2_retail.policy import *  # noqa: F403
from trace_env.kits.tau2_retail.tools import *  # noqa: F403
from trace_env.kits.tau2_retail.world import *  # noqa: F403

__all__ = sorted({*customer.__all__, *policy.__all__, *tools.__all__, *world.__all__})
