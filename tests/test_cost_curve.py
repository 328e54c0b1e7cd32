"""V(n), the one cost curve (specviz/cost_model.py): figures worked out by hand."""

from __future__ import annotations

import pytest

from specviz.cost_model import CostModel, never_cheaper, recorded
from specviz.errors import UserError


def test_between_measured_sizes_the_cost_is_interpolated():
    v = CostModel({1: 10.0, 4: 40.0, 8: 60.0}, 0.0).verify_ms
    assert v(1) == 10.0 and v(4) == 40.0 and v(8) == 60.0
    assert v(2) == pytest.approx(20.0)  # a third of the way from 10 to 40
    assert v(6) == pytest.approx(50.0)  # half way from 40 to 60


def test_a_larger_pass_never_costs_less():
    # 4 tokens timed cheaper than 3 (noise): it costs what 3 did, and so does 3.5
    assert never_cheaper({1: 10.0, 3: 30.0, 4: 25.0, 5: 35.0}) == {1: 10.0, 3: 30.0, 4: 30.0, 5: 35.0}
    v = CostModel({1: 10.0, 3: 30.0, 4: 25.0, 5: 35.0}, 0.0).verify_ms
    assert v(4) == 30.0 and all(v(n) <= v(n + 1) for n in range(1, 12))


def test_beyond_the_largest_size_it_goes_on_along_the_last_two_and_never_down():
    assert CostModel({1: 10.0, 4: 40.0, 8: 60.0}, 0.0).verify_ms(12) == pytest.approx(80.0)  # 5 ms a token after 8
    assert CostModel({1: 10.0, 2: 12.0, 4: 12.0}, 0.0).verify_ms(20) == 12.0  # flat: no slope to extend
    assert CostModel({1: 10.0}, 0.0).verify_ms(5) == 10.0  # one size: flat


def test_a_table_refuses_what_it_did_not_measure():
    v = CostModel({1: 10.0, 4: 40.0}, 0.0, extrapolate=False).verify_ms
    assert v(3) == pytest.approx(30.0)
    with pytest.raises(UserError, match="1 to 4 tokens only"):
        v(5)
    with pytest.raises(ValueError):
        CostModel({1: 10.0}, 0.0).verify_ms(0)


def test_a_round_costs_k_drafted_tokens_and_a_pass_over_k_plus_one():
    costs = CostModel.from_dict({"verify": {"1": 10.0, "5": 30.0}, "draft": 2.0})
    assert costs.round_ms(0) == 10.0
    assert costs.round_ms(4) == pytest.approx(4 * 2.0 + 30.0)
    assert costs.round_ms(2) == pytest.approx(2 * 2.0 + 20.0)  # V(3) half way from 10 to 30
    with pytest.raises(ValueError, match="one-token pass"):
        CostModel.from_dict({"verify": {"2": 10.0}, "draft": 1.0})
    assert CostModel({1: 10.0, 5: 30.0}, 2.0).with_draft(0.0).round_ms(4) == 30.0  # a drafter that costs nothing


def test_a_trace_without_a_usable_cost_model_prices_nothing():
    assert recorded({"cost_model": {"verify": {"1": 10.0}, "draft": 1.0}}).round_ms(1) == 11.0
    assert recorded({}) is None and recorded(None) is None
    assert recorded({"cost_model": {"verify": {"2": 10.0}, "draft": 1.0}}) is None  # no one-token pass
    with pytest.raises(UserError, match="must cost more than 0 ms"):
        CostModel({1: 0.0}, 1.0)
    with pytest.raises(UserError, match="draft_ms must be 0 or more"):
        CostModel({1: 10.0}, -1.0)
