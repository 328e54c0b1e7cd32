"""Acceptance by position, accepted lengths and hindsight k, against hand arithmetic on
hand-built rounds (tests/viz_sample.py: four rounds whose drafts go
[acc, acc, rej, unchecked] + resampled, [acc, acc] + bonus, [acc, rej, unchecked] + resampled,
[rej] + resampled)."""

import math

import pytest
from viz_sample import bonus_round, draft, emitted, sample_rounds

from specviz.run_stats import (
    acceptance_by_position,
    best_speed,
    departure_words,
    hindsight,
    hindsight_k,
    length_stats,
    position_stats,
)
from specviz.events import RoundEvent

# V(n) = 80 + 20 n ms and D = 10 ms: a round drafting k tokens costs 100 + 30 k ms.
LINEAR = {"verify": {str(n): 80.0 + 20 * n for n in range(1, 18)}, "draft": 10.0, "source": "measured", "meta": {}}


def chain(decisions: str, index: int = 0, end: str | None = "resampled") -> RoundEvent:
    """A round from a string of decisions: a accepted, r rejected, u unchecked."""
    names = {"a": "accepted", "r": "rejected", "u": "unchecked"}
    drafted = [draft(f"t{i}", 0.5, 0.5, 0.1, names[c]) for i, c in enumerate(decisions)]
    return RoundEvent(
        index=index,
        k=len(decisions),
        drafted=drafted,
        emitted=emitted("x", 0.5, end) if end else None,
        positions=[],
        draft_ms=10.0 * len(decisions),
        verify_ms=100.0,
        t_end_s=float(index + 1),
        new_tokens=0,
    )


def test_both_per_position_rates_count_by_hand():
    s = position_stats(sample_rounds())
    # position 1: all four rounds drafted and reached it, three accepted it.
    # position 2: three rounds drafted 2+ tokens and all three accepted their first; two accepted the second.
    # position 3: two rounds drafted 3+; only the first had accepted 1 and 2; it rejected 3.
    # position 4: one round drafted it, after a rejection: never reached.
    assert list(s.drafted) == [4, 3, 2, 1]
    assert list(s.reached) == [4, 3, 1, 0]
    assert list(s.accepted) == [3, 2, 0, 0]
    assert s.alpha == pytest.approx(5 / 8)  # 5 accepted of 8 judged
    assert list(s.conditional[:3]) == pytest.approx([3 / 4, 2 / 3, 0.0]) and math.isnan(s.conditional[3])
    assert list(s.unconditional) == pytest.approx([3 / 4, 2 / 3, 0.0, 0.0])
    assert list(s.predicted_conditional) == pytest.approx([0.625] * 4)
    assert list(s.predicted_unconditional) == pytest.approx([0.625, 0.390625, 0.244140625, 0.152587890625])


def test_the_summary_list_is_the_conditional_rate_up_to_the_last_reached_position():
    assert acceptance_by_position(sample_rounds()) == pytest.approx([3 / 4, 2 / 3, 0.0])
    assert acceptance_by_position([]) == []


def test_the_two_definitions_part_where_rounds_stop_early():
    # Every first draft accepted; the second accepted in one round of two: conditional 1/2 at
    # position 2, and the same unconditionally. A third round rejects its first draft: position 2
    # is drafted three times but reached twice, so the unconditional rate falls to 1/3.
    rounds = [chain("aa", 0, end="bonus"), chain("ar", 1), chain("ru", 2)]
    s = position_stats(rounds)
    assert list(s.conditional) == pytest.approx([2 / 3, 1 / 2])
    assert list(s.unconditional) == pytest.approx([2 / 3, 1 / 3])


def test_a_round_cut_short_by_the_end_of_the_run_counts_only_its_judged_drafts():
    # The run ended on an accepted end-of-text at position 2: positions 3 and 4 were never judged.
    s = position_stats([chain("aauu", 0, end=None)])
    assert list(s.drafted) == [1, 1, 0, 0] and list(s.reached) == [1, 1, 0, 0]
    assert length_stats([chain("aauu", 0, end=None)]).rounds == 0


def test_accepted_lengths_and_both_mean_lengths():
    ls = length_stats(sample_rounds())
    assert list(ls.accepted) == [2, 2, 1, 0] and list(ls.k) == [4, 2, 3, 1]
    assert list(ls.histogram) == [1, 1, 2, 0, 0]
    assert ls.mean_without_bonus == pytest.approx(5 / 4)
    assert ls.mean_with_bonus == pytest.approx(9 / 4)  # vLLM's 1 + accepted / drafts
    # alpha (1 - alpha^k) / (1 - alpha) at alpha = 5/8 for k = 4, 2, 3, 1, averaged
    expected = (1.412353515625 + 1.015625 + 1.259765625 + 0.625) / 4
    assert ls.predicted_mean_without_bonus == pytest.approx(expected)


def test_predicted_lengths_are_a_truncated_geometric_per_round():
    ls = length_stats([chain("ar"), chain("ru", 1)], alpha=0.6)
    # k = 2: P(0) = 0.4, P(1) = 0.6 * 0.4, P(2) = 0.36; two rounds.
    assert list(ls.predicted_histogram) == pytest.approx([0.8, 0.48, 0.72])
    assert list(ls.histogram) == [1, 1, 0]


def test_rounds_that_drafted_nothing_are_left_out_of_the_lengths():
    plain_step = chain("", 0, end="bonus")
    ls = length_stats([plain_step, chain("ar", 1)])
    assert ls.rounds == 1 and list(ls.accepted) == [1]


def test_a_run_like_the_model_is_said_to_be_within_noise():
    words = departure_words(sample_rounds())
    assert len(words) == 1 and words[0].startswith("Within noise")


def test_bursty_acceptance_is_named():
    # 20 rounds keep all four drafts, 20 lose the first: alpha = 80 / 100 = 0.8, yet position 1
    # accepts half the time (4.7 standard errors low) and position 2 always (2.2 high), and 20
    # rounds gain nothing against 40 * 0.2 = 8 expected.
    rounds = [chain("aaaa", i, end="bonus") for i in range(20)] + [chain("ruuu", 20 + i) for i in range(20)]
    text = " ".join(departure_words(rounds))
    assert "Position 1: 50% of the 40 drafts" in text and "less often than the model's 80%" in text
    assert "Position 2: 100% of the 20 drafts" in text
    assert "acceptances come in runs" in text
    assert "20 rounds lost their first draft against 8.0 expected" in text
    assert "Within noise" not in text


def test_hindsight_k_by_hand():
    # With V(n) = 80 + 20 n and D = 10, (k' + 1) / (100 + 30 k') rises with k', so a round that
    # rejected at a + 1 wants k' = a (1 when a = 0); the round that kept both drafts is capped at 2.
    assert hindsight_k(sample_rounds(), LINEAR) == [2, 2, 1, 1]
    h = hindsight(sample_rounds(), LINEAR)
    assert [r.k for r in h.rounds] == [4, 2, 3, 1] and [r.capped for r in h.rounds] == [False, True, False, False]
    assert (h.policy_tokens, h.policy_ms) == (9, 220 + 160 + 190 + 130)
    assert (h.hindsight_tokens, h.hindsight_ms) == (9, 160 + 160 + 130 + 130)
    assert h.policy_tokens_per_s == pytest.approx(9 / 0.700)
    assert h.hindsight_tokens_per_s == pytest.approx(9 / 0.580)
    assert h.plain_tokens_per_s == pytest.approx(10.0)
    assert h.measured_tokens_per_s == pytest.approx(9 / 1.694)  # the recorded 464 + 410 + 450 + 370 ms
    assert h.matched == 2  # the bonus round (2) and the one-token round (1) already drafted their hindsight k


def test_a_steep_verify_cost_makes_hindsight_draft_less_than_was_accepted():
    # A 3-token pass costs three times a 2-token one: keeping 2 drafts (3 tokens, 300 ms) yields
    # less per ms than keeping 1 (2 tokens, 105 ms).
    steep = {"verify": {"1": 100.0, "2": 105.0, "3": 300.0, "4": 320.0}, "draft": 0.0}
    assert hindsight_k([chain("aar")], steep) == [1]


def test_a_recorded_cost_model_never_gets_cheaper_with_more_tokens():
    from specviz.cost_model import CostModel

    v = CostModel.from_dict({"verify": {"1": 100.0, "2": 90.0, "4": 160.0, "8": 200.0}, "draft": 12.0}).verify_ms
    assert v(2) == 100.0  # 90 is noise below the one-token pass
    assert v(3) == pytest.approx(130.0)  # halfway from 100 to 160
    assert v(10) == pytest.approx(220.0)  # on along the last slope, 10 ms a token


def test_no_cost_model_no_hindsight():
    assert hindsight_k(sample_rounds(), None) == [] and hindsight_k(sample_rounds(), {}) == []


def test_the_fastest_run_can_beat_each_rounds_best_ratio():
    # Round 1: 5 tokens in 5 ms (1.0 a ms) or 1 in 0.9 ms (1.11); round 2: 1 token in 10 or in 9 ms.
    # Best ratios pick 0.9 and 9: 2 tokens in 9.9 ms. The fastest run keeps 5 in 5 ms: 6 in 14.
    options = [[(1, 5, 5.0), (2, 1, 0.9)], [(1, 1, 10.0), (2, 1, 9.0)]]
    assert best_speed(options) == pytest.approx(1000 * 6 / 14)
    h = hindsight(sample_rounds(), LINEAR)
    assert h.best_tokens_per_s >= h.hindsight_tokens_per_s - 1e-9


def test_a_bonus_round_alone():
    s = position_stats([bonus_round()])
    assert list(s.conditional) == [1.0, 1.0] and s.alpha == 1.0
    assert departure_words([bonus_round()])[0].startswith("Every judged draft was accepted")
    assert position_stats([]).alpha == 0.0
