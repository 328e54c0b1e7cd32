"""The labs' figures, from hand-built rounds and hand-written measurements."""

import math

import pytest
from viz_sample import sample_rounds

from specviz.run_stats import hindsight
from specviz.viz import acceptance_plots as ap
from specviz.viz.text import words_html

LINEAR = {"verify": {str(n): 80.0 + 20 * n for n in range(1, 18)}, "draft": 10.0}


def test_both_rates_and_both_model_lines_by_position():
    fig = ap.position_rates_figure(sample_rounds())
    conditional, unconditional, flat, power = fig.data
    assert list(conditional.y[:3]) == pytest.approx([3 / 4, 2 / 3, 0.0]) and math.isnan(conditional.y[3])
    assert list(unconditional.y) == pytest.approx([3 / 4, 2 / 3, 0.0, 0.0])
    assert list(flat.y) == pytest.approx([0.625] * 4)
    assert list(power.y) == pytest.approx([0.625**i for i in range(1, 5)])
    assert "vLLM" in unconditional.name and "0.62" in flat.name
    assert ap.position_rates_figure([]).layout.annotations[0].text == "No drafts judged yet"


def test_the_length_histogram_uses_the_measured_acceptance():
    fig = ap.lengths_figure(sample_rounds())
    measured, model = fig.data
    assert list(measured.y) == [1, 1, 2, 0, 0]
    assert "measured \u03b1 = 0.62" in model.name  # 5 of 8 judged drafts
    assert sum(model.y) == pytest.approx(4)  # one expected count per round, summed


def test_mean_lengths_name_the_conventions_and_the_departures():
    html = ap.lengths_html(sample_rounds())
    # 5 accepted over 4 rounds: 1.25 without the bonus token, 2.25 with it
    assert "<td>2.25</td>" in html and "<td>1.25</td>" in html
    assert "with the bonus token (vLLM, llama.cpp)" in html and "Within noise" in html


def test_hindsight_marks_and_speeds():
    h = hindsight(sample_rounds(), LINEAR)
    fig = ap.hindsight_figure(h)
    drafted, accepted, best = fig.data
    assert list(drafted.y) == [4, 2, 3, 1] and list(accepted.y) == [2, 2, 1, 0] and list(best.y) == [2, 2, 1, 1]
    html = ap.hindsight_html(h)
    # 9 tokens in 700 ms with the policy's k, in 580 ms with hindsight's: 12.86 and 15.52 tokens/s, +21 %
    assert "12.86" in html and "15.52" in html and "+21%" in html and "2 of 4 rounds" in html
    assert "no cost model" in ap.hindsight_html(None)
    assert len(ap.hindsight_figure(None).data) == 0


def test_sweep_panels_share_the_temperature_axis():
    fig = ap.temperature_sweep_figure([0.0, 0.7, 1.0], [0.8, 0.6, 0.4], [3.1, 2.2, 1.7], [1.6, 1.2, 0.9])
    acc, tpr, speed = fig.data
    assert list(acc.x) == list(tpr.x) == list(speed.x) == [0.0, 0.7, 1.0]
    assert (acc.yaxis, tpr.yaxis, speed.yaxis) == ("y", "y2", "y3")
    assert list(speed.y) == [1.6, 1.2, 0.9]
    assert fig.layout.shapes[0].y0 == 1  # plain decoding's line on the speedup panel
    assert len(ap.temperature_sweep_figure([], [], [], []).data) == 0


def test_batching_marks_where_drafting_stops_paying():
    fig = ap.batching_figure([1, 2, 4, 8], [1.5, 1.2, 0.9, 0.6], [1.7, 1.3, 1.0, 1.0], [5, 3, 0, 0], k=4, stops_at=4)
    at_k, best = fig.data
    assert list(best.text) == ["k=5", "k=3", "k=0", "k=0"]
    lines = {(s.type, s.x0, s.y0) for s in fig.layout.shapes}
    assert ("line", 4, 0) in lines  # the vertical mark at batch 4
    assert any("stops paying at 4" in a.text for a in fig.layout.annotations)


def test_pass_cost_ratios_never_fall_with_more_tokens():
    fig = ap.batch_costs_figure([1, 4], [1, 2, 3], [[10.0, 9.0, 12.0], [10.0, 20.0, 30.0]])
    b1, b4, diagonal = fig.data
    assert list(b1.y) == pytest.approx([1.0, 1.0, 1.2])  # 9 ms is noise below the one-token pass
    assert list(b4.y) == pytest.approx([1.0, 2.0, 3.0]) and list(diagonal.y) == [1, 2, 3]


def test_words_are_escaped():
    assert "&lt;b&gt;" in words_html(["<b>"])
