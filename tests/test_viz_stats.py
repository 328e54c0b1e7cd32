"""Live stats, the round timeline and the accepted-length figure, from hand-built events."""

import numpy as np
import pytest
from viz_sample import bonus_round, plain_events, sample_rounds, sampled_round

from specviz import theory
from specviz.run_stats import length_stats
from specviz.viz import live_stats, round_timeline_figure, stats_html
from specviz.viz.acceptance_plots import lengths_figure


def test_live_stats_count_what_happened():
    s = live_stats(sample_rounds())
    # judged: 3 + 2 + 2 + 1 drafts; accepted: 2 + 2 + 1 + 0
    assert (s.checked, s.accepted, s.rounds, s.tokens) == (8, 5, 4, 9)
    assert s.acceptance == pytest.approx(5 / 8)
    assert s.mean_overlap == pytest.approx(np.mean([0.9, 0.7, 0.52, 0.9, 0.95, 1.0, 0.0, 0.1]))
    assert s.tokens_per_round == pytest.approx(9 / 4)
    assert (s.target_passes, s.target_passes_saved) == (4, 5)
    assert s.tokens_per_s == pytest.approx(9 / 2.0)
    html = stats_html(s)
    assert "62%" in html and "2.25" in html and "4.50" in html


def test_live_stats_of_plain_decoding_and_of_nothing():
    s = live_stats(plain_events(4, ms=250))
    assert s.plain and s.tokens == 4 and s.target_passes == 4 and s.tokens_per_s == pytest.approx(4.0)
    assert "acceptance" not in stats_html(s)
    empty = live_stats([])
    assert empty.tokens == 0 and empty.tokens_per_s == 0


def test_live_stats_accept_a_generator():
    assert live_stats(e for e in sample_rounds()).tokens == 9


def test_timeline_has_draft_verify_and_gained_per_round():
    fig = round_timeline_figure(sample_rounds())
    draft, verify, gained, k = fig.data
    assert list(draft.y) == [120, 60, 90, 30] and list(verify.y) == [344, 350, 360, 340]
    assert list(gained.y) == [3, 3, 2, 1]
    assert list(k.y) == [r.k for r in sample_rounds()] and k.name == "k drafted"
    assert fig.layout.barmode == "stack" and fig.layout.paper_bgcolor == "rgba(0,0,0,0)"
    assert len(round_timeline_figure([]).data) == 0


def test_accepted_length_histogram_against_truncated_geometric():
    rounds = [sampled_round(i) for i in range(3)] + [bonus_round(3)]
    lengths = length_stats(rounds)
    assert list(lengths.accepted) == [2, 2, 2, 2] and list(lengths.k) == [4, 4, 4, 2]
    alpha = 8 / 11  # the measured acceptance: 2 of 3 judged drafts in each sampled round, 2 of 2 in the bonus one
    assert lengths.alpha == pytest.approx(alpha)
    expected = lengths.predicted_histogram
    assert expected.sum() == pytest.approx(4)
    assert expected == pytest.approx(
        3 * theory.accepted_length_distribution(alpha, 4) + np.r_[theory.accepted_length_distribution(alpha, 2), 0, 0]
    )
    fig = lengths_figure(rounds)
    assert list(fig.data[0].y) == [0, 0, 4, 0, 0]
    assert list(fig.data[1].y) == pytest.approx(expected)
