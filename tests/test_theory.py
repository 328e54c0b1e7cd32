"""The speedup theory of specviz/theory.py, checked against arithmetic done by hand."""

import numpy as np
import pytest

from specviz.cost_model import CostModel
from specviz.errors import UserError
from specviz.theory import (
    accepted_length_distribution,
    best_k,
    best_k_with_cost,
    break_even_alpha,
    speedup,
    speedup_with_cost,
    tokens_per_round,
)

# Target pass ms by number of new tokens and one drafted token's ms, timed on the bundled pair in
# fp32 on a 2-core CPU (the Theory tab's defaults): uneven, as real timings are (16 tokens below 8).
TARGET_FP32 = {1: 344, 2: 394, 4: 724, 8: 987, 16: 746}
DRAFT_FP32_MS = 132


def table(verify, draft=DRAFT_FP32_MS) -> CostModel:
    """A user's table: it says nothing past its largest size."""
    return CostModel(dict(verify), draft, extrapolate=False)


def test_tokens_per_round_by_hand():
    assert tokens_per_round(0.5, 2) == pytest.approx(1 + 0.5 + 0.25)  # 1.75
    assert tokens_per_round(0.8, 4) == pytest.approx(1 + 0.8 + 0.64 + 0.512 + 0.4096)  # 3.3616


def test_tokens_per_round_limits_are_exact():
    assert tokens_per_round(1.0, 4) == 5.0  # every draft accepted, plus the bonus
    assert tokens_per_round(0.0, 4) == 1.0  # nothing accepted: the target's own token
    assert tokens_per_round(0.3, 0) == 1.0  # no drafting
    # Just below 1 the closed form must not lose precision to cancellation: 1+a+..+a^4.
    a = 1 - 1e-9
    assert tokens_per_round(a, 4) == pytest.approx(sum(a**i for i in range(5)), rel=1e-12)


def test_speedup_by_hand():
    # alpha 0.8, k 4, T 100 ms, D 10 ms: 3.3616 tokens per 4*10 + 100 = 140 ms, vs 1 per 100 ms.
    assert speedup(0.8, 4, 100, 10) == pytest.approx(3.3616 * 100 / 140)
    assert speedup(0.9, 0, 100, 10) == 1.0  # k = 0 is plain decoding
    assert speedup(1.0, 3, 100, 0) == 4.0  # free drafts all accepted: k+1 tokens per pass


def test_best_k_by_hand():
    # alpha 0.8, T 100, D 10. tokens per round (1 - 0.8^(k+1)) / 0.2:
    #   k=5: (1 - 0.262144)   / 0.2 = 3.68928   -> * 100/150 = 2.45952
    #   k=6: (1 - 0.2097152)  / 0.2 = 3.951424  -> * 100/160 = 2.46964
    #   k=7: (1 - 0.16777216) / 0.2 = 4.1611392 -> * 100/170 = 2.447729...
    k, s = best_k(0.8, 100, 10)
    assert (k, s) == (6, pytest.approx(2.46964))
    assert best_k(0.0, 100, 10) == (0, 1.0)  # nothing is ever accepted: do not draft
    assert best_k(1.0, 100, 10, k_max=8)[0] == 8  # everything accepted: draft as far as allowed


def test_best_k_falls_as_alpha_falls():
    alphas = np.linspace(0, 0.99, 100)
    for t, d in [(100, 10), (344, 132), (100, 1), (100, 60)]:
        ks, speedups = best_k(alphas, t, d)
        assert np.all(np.diff(ks) >= 0), (t, d)
        assert np.all(np.diff(speedups) >= 0), (t, d)
        assert ks[-1] > ks[0]


def test_break_even_by_hand():
    # k=1: 1 + alpha = 1 + D/T, so alpha = D/T.
    assert break_even_alpha(1, 100, 10) == pytest.approx(0.1)
    # k=2: 1 + a + a^2 = 1 + 2D/T = 1.2, so a = (-1 + sqrt(1 + 4*0.2)) / 2.
    assert break_even_alpha(2, 100, 10) == pytest.approx((-1 + np.sqrt(1.8)) / 2, rel=1e-12)
    assert break_even_alpha(0, 100, 10) == 0.0  # no drafting never loses
    assert break_even_alpha(4, 100, 0) == 0.0  # free drafts never lose
    assert np.isnan(break_even_alpha(3, 100, 200))  # a draft token dearer than a target pass
    # D = T: only a round that accepts every draft breaks even, whatever rounding says.
    assert [break_even_alpha(k, 33.3, 33.3) for k in (1, 5, 16)] == pytest.approx([1.0, 1.0, 1.0])


@pytest.mark.parametrize("t,d", [(100, 10), (344, 132), (100, 99), (5, 1)])
def test_speedup_is_one_at_break_even(t, d):
    ks = np.arange(1, 17)
    alpha = break_even_alpha(ks, t, d)
    assert np.all((alpha > 0) & (alpha < 1))
    np.testing.assert_allclose(speedup(alpha, ks, t, d), 1.0, rtol=1e-12)
    assert np.all(speedup(np.minimum(alpha + 0.01, 1), ks, t, d) > 1)
    assert np.all(speedup(alpha - 0.01, ks, t, d) < 1)


def test_vectorised_matches_scalar():
    alphas = np.linspace(0, 1, 11)[:, None]
    ks = np.arange(9)
    grid = speedup(alphas, ks, 344, 132)
    assert grid.shape == (11, 9)
    for i, a in enumerate(alphas[:, 0]):
        for k in ks:
            assert grid[i, k] == pytest.approx(speedup(float(a), int(k), 344, 132))


def test_flat_cost_model_equals_the_formula():
    alphas = np.linspace(0, 1, 21)[:, None]
    ks = np.arange(17)
    np.testing.assert_allclose(speedup_with_cost(alphas, ks, CostModel({1: 100.0}, 10)), speedup(alphas, ks, 100, 10))
    assert best_k_with_cost(0.8, table({n: 100.0 for n in range(1, 34)}, 10)) == best_k(0.8, 100, 10)


def test_measured_cost_by_hand():
    # fp32 table, alpha 0.8, D 132: k=1 verifies 2 tokens (394 ms):
    #   1.8 * 344 / (132 + 394) = 619.2 / 526 = 1.17718...
    assert speedup_with_cost(0.8, 1, table(TARGET_FP32)) == pytest.approx(619.2 / 526)
    # k=2 verifies 3 tokens, interpolated between 2 and 4: (394 + 724) / 2 = 559 ms:
    #   2.44 * 344 / (264 + 559) = 839.36 / 823 = 1.01988...
    assert speedup_with_cost(0.8, 2, table(TARGET_FP32)) == pytest.approx(839.36 / 823)
    # The flat formula would promise 2.44 * 344 / (264 + 344) = 1.3805 for k=2: the gap is the lesson.
    assert speedup(0.8, 2, 344, DRAFT_FP32_MS) == pytest.approx(2.44 * 344 / 608)
    k, s = best_k_with_cost(0.8, table(TARGET_FP32))
    assert (k, s) == (1, pytest.approx(619.2 / 526))
    # target_ms sets the plain-decoding baseline when it differs from a one-token verify pass.
    assert speedup_with_cost(0.8, 1, table(TARGET_FP32), target_ms=400) == pytest.approx(1.8 * 400 / 526)


def test_measured_cost_sequence_and_range():
    seq = table(enumerate([344, 394, 559, 724], 1))
    assert speedup_with_cost(0.8, 2, seq) == pytest.approx(839.36 / 823)
    assert best_k_with_cost(0.99, seq.with_draft(1))[0] <= 3  # k_max capped at what was measured
    with pytest.raises(UserError, match="1 to 4 tokens"):
        speedup_with_cost(0.8, 4, seq)
    with pytest.raises(UserError, match="1 to 16 tokens"):
        best_k_with_cost(0.8, table(TARGET_FP32), k_max=20)


def test_best_k_with_cost_falls_as_alpha_falls():
    bf16 = {1: 334, 2: 297, 4: 308, 8: 331, 16: 340}
    alphas = np.linspace(0, 0.99, 100)
    for verify, d in [(TARGET_FP32, DRAFT_FP32_MS), (bf16, 150), (bf16, 20)]:
        ks, _ = best_k_with_cost(alphas, table(verify, d))
        assert np.all(np.diff(ks) >= 0)


def test_accepted_length_distribution_by_hand():
    # alpha 0.8, k 4: 0.2, 0.8*0.2, 0.64*0.2, 0.512*0.2, then all four accepted 0.8^4.
    np.testing.assert_allclose(accepted_length_distribution(0.8, 4), [0.2, 0.16, 0.128, 0.1024, 0.4096])
    np.testing.assert_array_equal(accepted_length_distribution(0.0, 3), [1, 0, 0, 0])
    np.testing.assert_array_equal(accepted_length_distribution(1.0, 3), [0, 0, 0, 1])
    np.testing.assert_array_equal(accepted_length_distribution(0.5, 0), [1])


def test_accepted_length_distribution_agrees_with_tokens_per_round():
    alphas = np.linspace(0, 1, 11)
    for k in range(9):
        dist = accepted_length_distribution(alphas, k)
        assert dist.shape == (11, k + 1)
        np.testing.assert_allclose(dist.sum(axis=-1), 1.0)
        mean_accepted = dist @ np.arange(k + 1)
        np.testing.assert_allclose(mean_accepted + 1, tokens_per_round(alphas, k))


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: tokens_per_round(1.2, 3), "alpha must be between 0 and 1"),
        (lambda: tokens_per_round(0.5, -1), "k must be a whole number"),
        (lambda: tokens_per_round(0.5, 1.5), "k must be a whole number"),
        (lambda: speedup(0.5, 3, 0, 10), "target_ms must be above 0"),
        (lambda: speedup(0.5, 3, 100, -1), "draft_ms must be 0 or more"),
        (lambda: best_k(np.array([0.5, np.nan]), 100, 10), "alpha must be between 0 and 1"),
        (lambda: speedup_with_cost(0.5, 1, CostModel({1: 0.0}, 10)), "must cost more than 0 ms"),
    ],
)
def test_bad_input_is_refused_in_words(call, match):
    with pytest.raises(UserError, match=match):
        call()


def test_the_theory_tabs_opening_example():
    # alpha 0.8, k 4, T 40 ms, D 4 ms (what the Theory tab shows before a pair loads):
    # 3.3616 tokens per 4*4 + 40 = 56 ms, against 1 token per 40 ms plain.
    assert speedup(0.8, 4, 40, 4) == pytest.approx(3.3616 * 40 / 56)  # 2.40x
    k, s = best_k(0.8, 40, 4)
    rates = {kk: (1 - 0.8 ** (kk + 1)) / 0.2 * 40 / (kk * 4 + 40) for kk in range(0, 17)}
    assert k == max(rates, key=rates.get) and s == pytest.approx(rates[k])
