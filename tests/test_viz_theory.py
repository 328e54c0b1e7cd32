"""Theory figures, predicted against measured, and the lossless lab figures."""

import numpy as np
import pytest
from viz_sample import plain_trace, spec_trace

from specviz import theory
from specviz.cost_model import CostModel
from specviz.events import RunSummary
from specviz.viz import (
    gap_explanation,
    lossless_acceptance_figure,
    lossless_frequencies_figure,
    lossless_summary_html,
    predict,
    prediction_html,
    speedup_heatmap_figure,
    speedup_vs_k_figure,
    theory_text_html,
    tokens_per_round_figure,
)

T, D = 344.0, 132.0


def test_tokens_per_round_curves_and_the_run():
    fig = tokens_per_round_figure(alphas=(0.5, 0.9), k_max=8, run_alpha=0.7, run_k=4, measured_tokens_per_round=2.5)
    a5, a9, run, measured = fig.data
    assert list(a5.y) == pytest.approx(theory.tokens_per_round(0.5, np.arange(9)))
    assert a9.y[-1] == pytest.approx((1 - 0.9**9) / 0.1)
    assert run.name.startswith("this run") and run.showlegend and not a5.showlegend
    assert (measured.x[0], measured.y[0]) == (4, 2.5)


def test_speedup_curves_star_the_best_k():
    fig = speedup_vs_k_figure(
        T,
        D,
        alphas=(0.6, 0.9),
        k_max=12,
        run_alpha=0.73,
        run_k=4,
        measured_speedup=1.2,
        cost=CostModel(dict(enumerate([344, 394, 559, 724, 790], 1)), D),
    )
    by_name = {t.name: t for t in fig.data}
    best = by_name["best k"]
    expected = [theory.best_k(a, T, D, 12) for a in (0.6, 0.9, 0.73)]
    assert list(best.x) == [k for k, _ in expected] and list(best.y) == pytest.approx([s for _, s in expected])
    costed = by_name["this run, measured verify cost"]
    assert list(costed.x) == [0, 1, 2, 3, 4]  # only pass sizes that were measured
    assert costed.y[4] == pytest.approx(theory.tokens_per_round(0.73, 4) * T / (4 * D + 790))
    assert by_name["measured"].y[0] == 1.2


def test_heatmap_values_best_k_and_run():
    fig = speedup_heatmap_figure(T, D, k_max=8, run_alpha=0.73, run_k=4)
    heat, best, run = fig.data
    z = np.asarray(heat.z)
    assert z.shape == (50, 8) and heat.zmid == 1
    i = list(heat.y).index(0.8)
    assert z[i, 3] == pytest.approx(theory.speedup(0.8, 4, T, D))
    assert all(k >= 1 for k in best.x)  # alphas where drafting loses (best k = 0) are left out
    assert (run.x[0], run.y[0]) == (4, 0.73)


def test_theory_text_gives_best_k_and_break_even():
    html = theory_text_html(0.73, 4, T, D)
    k, s = theory.best_k(0.73, T, D, 16)
    assert f"The best k is {k} ({s:.2f}\u00d7)" in html
    assert f"above \u03b1 = {theory.break_even_alpha(4, T, D):.2f}" in html
    assert "below it" in theory_text_html(0.3, 4, T, D) and "not to draft" in theory_text_html(0.1, 4, T, D)
    assert "cannot pay off" in theory_text_html(0.9, 4, 100, 150)


def test_prediction_uses_the_plain_run_and_explains_an_expensive_verify_pass():
    # A trace without a load-time cost model: T is the plain run's mean pass.
    spec = spec_trace()
    spec.summary.mean_overlap, spec.summary.tokens_per_round, spec.summary.plain_ms_per_token = 0.63, 2.25, 0.0
    pred = predict(spec.summary, spec.events, k=4, plain=plain_trace().summary)
    assert pred.target_ms == 300 and pred.draft_ms == 30 and pred.verify_ms == pytest.approx(348.5)
    assert pred.predicted_speedup == pytest.approx(theory.speedup(0.63, 4, 300, 30))
    assert pred.predicted_speedup_measured_cost == pytest.approx(
        theory.tokens_per_round(0.63, 4) * 300 / (4 * 30 + 348.5)
    )
    # 4.5 tokens/s against one 300 ms pass per token (3.33 tokens/s), and against the plain
    # run's 9 tokens in 2.7 s
    assert spec.summary.tokens_per_s == 4.5
    assert pred.measured_speedup == pytest.approx(4.5 * 0.3)
    assert pred.plain_run_speedup == pytest.approx(4.5 / (9 / 2.7))
    assert pred.overhead_share == pytest.approx(1 - (300 + 1394) / 2000)
    why = " ".join(gap_explanation(pred))
    assert "348 ms, 1.2\u00d7 a one-token pass (300 ms)" in why
    assert "15% of the wall time" in why
    html = prediction_html(pred)
    assert "plain run&#x27;s mean pass" in html and "speedup over the plain run" in html


def test_prediction_prices_plain_decoding_with_the_load_time_pass_not_the_verify_pass():
    spec = spec_trace()
    spec.summary.mean_overlap, spec.summary.plain_ms_per_token = 0.63, 250.0
    cost = CostModel({1: 250.0, 4: 400.0, 8: 700.0}, 30.0)
    pred = predict(spec.summary, spec.events, k=4, plain=plain_trace().summary, cost=cost)
    assert pred.target_ms == 250.0 and pred.target_ms_source == "one-token pass measured at load"
    assert pred.verify_ms == pytest.approx(400.0 + (700.0 - 400.0) / 4)  # V(5), between the measured 4 and 8
    assert pred.measured_speedup == pytest.approx(spec.summary.tokens_per_s * 0.25)
    # best k is searched within the k the page offers
    assert pred.best_k <= 16


def test_prediction_explains_low_alpha_and_streaky_acceptance():
    summary = RunSummary(
        new_tokens=50,
        rounds=10,
        mean_overlap=0.2,
        tokens_per_round=5.0,
        wall_s=5,
        tokens_per_s=10,
        target_ms=300,
        draft_ms=120,
        plain_ms_per_token=300,
    )
    pred = predict(summary, [], k=4)
    why = " ".join(gap_explanation(pred))
    assert "below the break-even" in why and "more than the 1.25" in why
    assert pred.target_ms_source == "one-token pass measured at load" and pred.measured_speedup == pytest.approx(3.0)


def test_no_prediction_without_a_one_token_measurement():
    # Never the run's own verify pass (target_ms here): it covers k + 1 tokens.
    summary = RunSummary(
        new_tokens=50,
        rounds=10,
        mean_overlap=0.5,
        tokens_per_round=5.0,
        wall_s=5,
        tokens_per_s=10,
        target_ms=400,
        draft_ms=0,
    )
    assert predict(summary, [], k=4) is None
    assert predict(RunSummary(**{**summary.__dict__, "plain_ms_per_token": 300.0}), [], k=4) is not None


LOSSLESS = {
    "p": [0.5, 0.3, 0.2],
    "q": [0.2, 0.2, 0.6],
    "residual": [0.6, 0.4, 0.0],
    "measured": [0.501, 0.299, 0.2],
    "abs_error": [0.001, 0.001, 0.0],
    "std_error": [0.0005, 0.00046, 0.0004],
    "acceptance_rate": 0.601,
    "overlap": 0.6,
    "acceptance_std_error": 0.00049,
    "max_z": 2.17,
    "acceptance_z": 2.04,
    "samples": 1_000_000,
    "seed": 0,
    "seconds": 0.1,
}


def test_lossless_frequency_bars_and_acceptance():
    fig = lossless_frequencies_figure(LOSSLESS, labels=["<a>", " b", "\n"])
    p, measured, q, residual = fig.data
    assert list(p.y) == LOSSLESS["p"] and list(q.y) == LOSSLESS["q"] and list(measured.y) == LOSSLESS["measured"]
    assert list(measured.error_y.array) == pytest.approx([0.0015, 0.00138, 0.0012])
    assert residual.visible == "legendonly"
    assert list(fig.layout.xaxis.ticktext) == ["&lt;a&gt;", "\u2423b", "\\n"]
    acc = lossless_acceptance_figure(LOSSLESS)
    assert list(acc.data[0].y) == [0.6, 0.601]
    html = lossless_summary_html(LOSSLESS)
    assert "1,000,000 draws" in html and "2.2 standard errors" in html and "distributed as p" in html
    assert "NOT" in lossless_summary_html({**LOSSLESS, "max_z": 7.0})
