"""The measured cost model: what it measures, how it caches, and the k it picks."""

from __future__ import annotations

import json

import pytest
import torch

from specviz import theory
from specviz.engine.cost_model import CostModel, load_or_measure, measure_pass_ms
from tiny_models import tiny_pair


def test_flat_costs_pick_the_textbook_best_k():
    # With a verify pass as cheap over 9 tokens as over 1, the measured-cost choice is the formula's.
    cost = CostModel(verify=[100.0] * 9, draft=10.0)
    for alpha in (0.3, 0.6, 0.8, 0.95):
        assert cost.best_k(alpha, k_max=8) == theory.best_k(alpha, 100.0, 10.0, k_max=8)[0]


def test_costs_that_grow_with_n_shorten_the_draft():
    flat = CostModel(verify=[100.0] * 9, draft=10.0)
    growing = CostModel(verify=[100.0 + 40.0 * n for n in range(9)], draft=10.0)  # like fp32 on a CPU
    assert growing.best_k(0.9, k_max=8) < flat.best_k(0.9, k_max=8)


def test_below_break_even_the_best_k_is_no_drafting():
    cost = CostModel(verify=[100.0, 120.0, 140.0], draft=40.0)
    assert cost.best_k(0.05, k_max=2) == 0
    assert cost.best_k(0.99, k_max=2) == 2


def test_verify_cost_extrapolates_past_the_measured_sizes():
    cost = CostModel(verify=[100.0, 110.0, 130.0], draft=10.0)
    assert cost.verify_ms(3) == 130.0
    assert cost.verify_ms(5) == pytest.approx(170.0)  # the last step's slope, 20 ms a token
    assert cost(1) == 100.0


def test_predicted_speedup_interpolates_a_fractional_mean_k():
    cost = CostModel(verify=[100.0, 110.0, 120.0, 130.0], draft=10.0)
    s2 = theory.speedup_with_cost(0.8, 2, cost, 10.0)
    s3 = theory.speedup_with_cost(0.8, 3, cost, 10.0)
    assert cost.predicted_speedup(0.8, 2) == pytest.approx(s2)
    assert cost.predicted_speedup(0.8, 2.25) == pytest.approx(0.75 * s2 + 0.25 * s3)


def test_online_observations_move_the_estimate_towards_what_is_timed():
    cost = CostModel(verify=[100.0, 100.0], draft=10.0)
    for _ in range(100):
        cost.observe_verify(2, 200.0)
        cost.observe_draft(30.0)
    assert cost.verify_ms(2) == pytest.approx(200.0, rel=1e-3)
    assert cost.draft == pytest.approx(30.0, rel=1e-3)
    assert cost.verify_ms(1) == 100.0
    cost.observe_verify(4, 300.0)  # a size never measured extends the table
    assert len(cost.verify) == 4


@pytest.fixture
def one_thread():
    """Tiny models run fastest on one thread; two spin-waiting threads crawl on a busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_measure_times_every_size_on_a_tiny_model(one_thread):
    pair = tiny_pair("close")
    ms = measure_pass_ms(pair.target, [1, 2, 5], vocab_size=pair.vocab_size, context=16, repeats=2)
    assert sorted(ms) == [1, 2, 5]
    assert all(v > 0 for v in ms.values())


def test_load_or_measure_caches_per_pair_and_k_max(tmp_path, one_thread):
    pair = tiny_pair("close")
    first = load_or_measure(pair, 3, cache_dir=tmp_path, repeats=1)
    assert first.source == "measured" and len(first.verify) == 4 and first.draft > 0
    files = list((tmp_path / "cost-models").glob("*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text())["meta"]["key"]["k_max"] == 3
    again = load_or_measure(pair, 3, cache_dir=tmp_path)
    assert again.source == "cached" and again.verify == first.verify
    load_or_measure(pair, 2, cache_dir=tmp_path, repeats=1)  # another k_max: another entry
    assert len(list((tmp_path / "cost-models").glob("*.json"))) == 2
    files[0].write_text("not json")  # a damaged entry is measured again
    assert load_or_measure(pair, 3, cache_dir=tmp_path, repeats=1).source == "measured"
