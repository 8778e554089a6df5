"""Label-order debiasing, on a case where the label dominates: with digit labels the tiny model puts about
0.6 of the mass on "1" whatever the menu says, so a fixed order routes every task to whichever option
happens to be listed first. Averaging over the cyclic orders (every option takes every label once)
removes that preference and lets the task decide."""

from __future__ import annotations

import pytest

from router.decide import Router, cyclic_orders
from router.schema import NO_ADAPTER, RouterConfig

DIGITS = ["1", "2", "3", "4"]
TASKS = [
    "Hi, I need to cancel reservation ZFA04Y, I booked it by mistake.",
    "I want my money back for order #W2378156, the lamp arrived broken.",
    "Text Bob that I will be ten minutes late.",
]


def rotated(menu, shift: int):
    options = menu.options[shift:] + menu.options[:shift]
    return menu.model_copy(update={"options": options})


def swing(decisions: dict, key: str) -> float:
    values = [d.probabilities[key] for d in decisions.values()]
    return max(values) - min(values)


def test_cyclic_orders_form_a_latin_square() -> None:
    keys = ["a", "b", "c", NO_ADAPTER]
    orders = cyclic_orders(keys)
    assert len(orders) == 4
    for position in range(4):
        assert sorted(order[position] for order in orders) == sorted(keys)  # each option once in each label slot
    assert cyclic_orders(keys, 2) == [keys, ["c", NO_ADAPTER, "a", "b"]]


def test_debiasing_changes_decisions_a_fixed_label_order_biased(plain_model, tokenizer, menu) -> None:
    n = len(menu.capabilities)
    fixed = {s: Router(plain_model, tokenizer, rotated(menu, s), RouterConfig(alphabet=DIGITS)) for s in range(n)}
    fair = {s: Router(plain_model, tokenizer, rotated(menu, s), RouterConfig(alphabet=DIGITS, debias="cyclic")) for s in range(n)}
    changed = 0
    for task in TASKS:
        by_order = {s: fixed[s].route(task) for s in range(n)}
        # The bias: label "1" wins in every order, so the route is whatever is listed first, not the task's.
        assert {d.label for d in by_order.values()} == {"1"}
        assert [d.choice for d in by_order.values()] == [rotated(menu, s).capabilities[0] for s in range(n)]
        assert min(d.probabilities[d.choice] for d in by_order.values()) > 0.45
        debiased = {s: fair[s].route(task) for s in range(n)}
        assert all(d.debiased and len(d.orders) == n + 1 for d in debiased.values())
        for key in menu.capabilities:  # where a capability is listed swings its fixed-order probability, not its debiased one
            assert swing(by_order, key) > 0.3 and swing(debiased, key) < 0.05, (key, swing(by_order, key), swing(debiased, key))
        assert max(debiased[0].probabilities.values()) < 0.35  # no option runs away with the mass any more
        changed += debiased[0].choice != by_order[0].choice
    assert changed >= 1, "debiasing should overturn at least one label-driven decision"


def test_fewer_orders_trade_cost_for_balance(plain_model, tokenizer, menu) -> None:
    two = Router(plain_model, tokenizer, menu, RouterConfig(alphabet=DIGITS, debias="cyclic", orders=2)).route(TASKS[0])
    assert len(two.orders) == 2 and [o.order[0] for o in two.orders] == [menu.keys[0], menu.keys[2]]
    assert two.probabilities == pytest.approx({k: sum(o.probabilities[k] for o in two.orders) / 2 for k in menu.keys})
