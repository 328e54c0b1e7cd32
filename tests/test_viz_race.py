"""Speculative against plain: the replay frames, tokens over time, the tables."""

import pytest
from viz_sample import SAMPLE_OUTPUT, plain_trace, sample_rounds, spec_trace, tid

from specviz.events import Trace
from specviz.viz import comparison_html, identity_check, identity_html, race_end_s, race_frame, tokens_vs_time_figure
from specviz.viz.race import first_difference, output_tokens


def test_race_frame_at_zero_shows_nothing_and_at_the_end_everything():
    spec, plain = spec_trace(), plain_trace()
    s0, p0 = race_frame(spec, plain, 0.0)
    assert 'class="tok ' not in s0 and 'class="tok ' not in p0
    assert "0 tokens" in s0 and "0 tokens" in p0
    end = race_end_s(spec, plain)
    assert end == pytest.approx(2.7)  # the plain run's last token
    s1, p1 = race_frame(spec, plain, end)
    assert s1.count('data-round="') == 4 + 14  # 4 round wrappers, 5 + 3 + 4 + 2 token spans (discarded drafts too)
    assert p1.count('class="tok tok-plain"') == 9
    assert "done: 9 tokens in 2.00 s" in s1 and "done: 9 tokens in 2.70 s" in p1


def test_race_frame_in_between_shows_the_events_finished_by_then():
    s, p = race_frame(spec_trace(), plain_trace(), 1.0)
    assert s.count('class="sv-round"') == 2 and "6 tokens at 1.00 s" in s  # rounds ending at 0.5 and 1.0
    assert p.count('class="tok tok-plain"') == 3  # tokens at 0.3, 0.6, 0.9


def test_race_frame_takes_event_lists_too():
    s, p = race_frame(sample_rounds(), [], 5.0)
    assert s.count('class="sv-round"') == 4 and 'class="tok ' not in p


def test_tokens_vs_time_steps_for_both_runs():
    fig = tokens_vs_time_figure(spec_trace(), plain_trace())
    spec, plain = fig.data
    assert list(spec.x) == [0, 0.5, 1.0, 1.5, 2.0] and list(spec.y) == [0, 3, 6, 8, 9]
    assert list(plain.y) == list(range(10)) and plain.x[-1] == pytest.approx(2.7)
    assert spec.line.shape == "hv"


def test_comparison_table_names_both_runs():
    html = comparison_html(spec_trace().summary, plain_trace().summary)
    assert "1.35\u00d7" in html  # 4.5 / 3.333 tokens per second
    assert "56% fewer target passes" in html  # 4/9 passes per token against 9/9
    for cell in ("2.00 s", "2.70 s", "<td>4</td>", "<td>9</td>"):
        assert cell in html


def greedy_spec() -> Trace:
    """The sample run as if decoded greedily (temperature 0), where the outputs must be identical."""
    trace = spec_trace()
    trace.settings = {**trace.settings, "temperature": 0}
    return trace


def test_identity_of_equal_outputs():
    assert [t for _, t in output_tokens(spec_trace())] == SAMPLE_OUTPUT
    ident = identity_check(spec_trace(), plain_trace())
    assert ident.identical and ident.first_difference is None and ident.compared == 9
    assert "Identical: all 9 tokens match" in identity_html(greedy_spec(), plain_trace())


def test_identity_finds_the_first_difference_and_its_logit_gap():
    plain = plain_trace()
    plain.events[7].id, plain.events[7].text = tid(" y"), " y"
    ident = identity_check(spec_trace(), plain)
    # output token 7 is the greedy round's replacement " x", made at its position 2 (gap 0.8)
    assert ident.first_difference == 7 and ident.top2_logit_gap == 0.8
    html = identity_html(greedy_spec(), plain)
    assert "first differ at token 7" in html and "&quot; x&quot;" in html and "&quot; y&quot;" in html
    assert "0.800" in html and "near-tie" not in html


def test_identity_of_a_prefix_and_of_sampling():
    assert first_difference([1, 2, 3], [1, 2]) == 2 and first_difference([1, 2], [1, 2]) is None
    assert "first 7 tokens are identical" in identity_html(greedy_spec(), plain_trace(7))
    assert identity_html(spec_trace(), plain_trace()).count("Sampling") == 1  # temperature 0.7 in the trace
