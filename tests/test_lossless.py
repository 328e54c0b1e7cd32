"""The acceptance rule reproduces p: measured against sampling noise, with tests that have power.

Tolerance everywhere: 5 standard errors (a seeded run; a fair rule fails one such check with
probability under 1e-6). Sample size: N below unless a test says otherwise.
"""

import json

import numpy as np
import pytest

from specviz.workshop.cli import main
from specviz.errors import UserError
from specviz.workshop.lossless import CHUNK, check_distribution, parse_distribution, residual, simulate

N = 2_000_000
P = np.array([0.15, 0.35, 0.1, 0.4])
Q = np.array([0.5, 0.2, 0.2, 0.1])
TOL = 5


def assert_output_is_p(r):
    p, se = np.array(r.p), np.array(r.std_error)
    np.testing.assert_array_less(np.array(r.abs_error), TOL * se + 1e-15)
    assert abs(r.acceptance_rate - r.overlap) <= TOL * r.acceptance_std_error + 1e-15
    assert sum(r.measured) == pytest.approx(1.0)
    assert r.max_z <= TOL and r.acceptance_z <= TOL
    assert np.all(np.array(r.measured)[p == 0] == 0)


def test_output_frequencies_are_p():
    r = simulate(P, Q, samples=N, seed=1)
    assert r.samples == N
    assert r.overlap == pytest.approx(0.15 + 0.2 + 0.1 + 0.1)  # sum min(p, q) = 0.55
    assert_output_is_p(r)


def test_sample_count_not_a_multiple_of_the_chunk():
    r = simulate(P, Q, samples=CHUNK + 12345, seed=2)
    assert sum(round(m * r.samples) for m in r.measured) == CHUNK + 12345
    assert_output_is_p(r)


def test_same_seed_same_answer():
    a, b, c = simulate(P, Q, 100_000, seed=7), simulate(P, Q, 100_000, seed=7), simulate(P, Q, 100_000, seed=8)
    assert a.measured == b.measured and a.acceptance_rate == b.acceptance_rate
    assert a.measured != c.measured


def _run_rule(p, q, keep_prob, replacement, n, seed):
    """The acceptance rule with its two parts swappable: keep x ~ q with keep_prob[x], else
    draw from `replacement`. Returns output frequencies and the z of each vs p."""
    rng = np.random.default_rng(seed)
    x = rng.choice(p.size, size=n, p=q)
    kept = x[rng.random(n) <= keep_prob[x]]
    out = np.concatenate([kept, rng.choice(p.size, size=n - kept.size, p=replacement)])
    freq = np.bincount(out, minlength=p.size) / n
    return freq, np.abs(freq - p) / np.sqrt(p * (1 - p) / n)


def test_the_check_has_power_against_wrong_rules():
    right_keep = np.minimum(1, P / Q)
    # The harness itself passes with the right rule, so what fails below is the rule alone.
    _, z = _run_rule(P, Q, right_keep, residual(P, Q), N, seed=3)
    assert z.max() <= TOL

    # Wrong 1: replace a rejected draft with a fresh sample from p instead of the residual.
    # Output = min(p,q) + (1 - 0.55) p = [0.2175, 0.3575, 0.145, 0.28], not p.
    freq, z = _run_rule(P, Q, right_keep, P, N, seed=3)
    np.testing.assert_allclose(freq, [0.2175, 0.3575, 0.145, 0.28], atol=0.002)
    assert z.max() > 100

    # Wrong 2: accept with p(x) alone, forgetting to divide by q(x).
    freq, z = _run_rule(P, Q, P, residual(P, Q), N, seed=3)
    assert z.max() > 100

    # Wrong 3: accept every draft (no verification at all): the output is q.
    freq, z = _run_rule(P, Q, np.ones(4), residual(P, Q), N, seed=3)
    np.testing.assert_allclose(freq, Q, atol=0.002)
    assert z.max() > 100


def test_p_equal_to_q_accepts_everything():
    r = simulate(Q, Q, samples=N, seed=4)
    assert r.acceptance_rate == 1.0
    assert r.overlap == pytest.approx(1.0)
    assert_output_is_p(r)


def test_disjoint_supports_accept_nothing():
    p, q = np.array([0.5, 0.5, 0, 0]), np.array([0, 0, 0.3, 0.7])
    r = simulate(p, q, samples=N, seed=5)
    assert r.acceptance_rate == 0.0 and r.overlap == 0.0
    np.testing.assert_allclose(r.residual, p)  # every output comes from the residual, which is p
    assert_output_is_p(r)


def test_point_mass_draft():
    # q always proposes token 1; it is kept with probability p(1) = 0.35, else the residual
    # p without token 1, renormalised, is sampled: together exactly p.
    q = np.array([0.0, 1.0, 0.0, 0.0])
    r = simulate(P, q, samples=N, seed=6)
    assert r.overlap == pytest.approx(0.35)
    np.testing.assert_allclose(r.residual, [0.15 / 0.65, 0, 0.1 / 0.65, 0.4 / 0.65])
    assert_output_is_p(r)


def test_point_mass_target():
    p = np.array([0.0, 0.0, 1.0, 0.0])
    r = simulate(p, Q, samples=N, seed=7)
    assert r.measured == [0.0, 0.0, 1.0, 0.0]  # no noise at all: only token 2 can come out
    assert r.overlap == pytest.approx(0.2)
    assert_output_is_p(r)


@pytest.mark.parametrize(
    "p,q,match",
    [
        ([0.5, 0.5], [0.2, 0.3, 0.5], "same vocabulary .p has 2 entries, q has 3"),
        ([1.2, -0.2], [0.5, 0.5], "negative"),
        ([0.5, 0.4], [0.5, 0.5], "sums to 0.9"),
        ([0.5, float("nan")], [0.5, 0.5], "finite"),
        ([], [], "non-empty"),
    ],
)
def test_bad_distributions_are_refused(p, q, match):
    with pytest.raises(UserError, match=match):
        simulate(p, q, samples=10)


def test_bad_counts_and_text_are_refused():
    with pytest.raises(UserError, match="samples must be"):
        simulate(P, Q, samples=0)
    with pytest.raises(UserError, match="seed must be"):
        simulate(P, Q, samples=10, seed=-1)
    with pytest.raises(UserError, match=r"^p must be numbers separated by commas, like .* \('0.5;0.5' is not one\)$"):
        parse_distribution("0.5;0.5", "p")
    with pytest.raises(UserError, match=r"\('' is not one\)"):  # a blank between commas is a typo here
        parse_distribution("0.5,,0.5", "p")
    np.testing.assert_array_equal(parse_distribution("0.25, 0.75", "p"), [0.25, 0.75])
    check_distribution([0.5, 0.5 + 5e-7], "p")  # within the 1e-6 tolerance


def test_cli_json(capsys):
    assert main(["lossless", "--samples", "200000", "--seed", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("p", "q", "measured", "abs_error", "acceptance_rate", "overlap", "samples", "seed", "std_error"):
        assert key in out
    assert out["p"] == [0.15, 0.35, 0.1, 0.4] and out["q"] == [0.5, 0.2, 0.2, 0.1]
    assert out["samples"] == 200_000 and out["seed"] == 3
    assert out["max_z"] <= TOL


def test_cli_table_and_errors(capsys):
    assert main(["lossless", "--samples", "100000", "--p", "0.5,0.5", "--q", "0.9,0.1"]) == 0
    out = capsys.readouterr().out
    assert "acceptance rate" in out and "overlap" in out and "lossless" in out
    assert main(["lossless", "--p", "0.5,0.4"]) == 2
    assert "sums to 0.9" in capsys.readouterr().err


def test_the_lab_keeps_drafts_through_the_engines_own_check(monkeypatch):
    """The lab's draws go through `engine.verify.accepts`, the check the engine's rounds call,
    every draw of them: counted, and then broken (accepting every draft), the engine's verify
    and the lab go wrong alike, the lab's output landing on q instead of p."""
    import torch

    from specviz.engine import verify

    real, seen = verify.accepts, []

    def counted(u, px, qx):
        seen.append(np.size(u))
        return real(u, px, qx)

    monkeypatch.setattr(verify, "accepts", counted)
    r = simulate(P, Q, samples=CHUNK + 12345, seed=4)
    assert sum(seen) == CHUNK + 12345 and len(seen) == 2  # every draw, a chunk at a time
    assert_output_is_p(r)

    monkeypatch.setattr(verify, "accepts", lambda u, px, qx: u < 2)  # no verification at all
    broken = simulate(P, Q, samples=N, seed=4)
    np.testing.assert_allclose(broken.measured, Q, atol=0.002)
    assert broken.max_z > 100 and broken.acceptance_rate == 1.0
    p = torch.tensor([[0.0, 1.0], [0.5, 0.5]])  # the target never takes token 0
    out = verify.verify(torch.tensor([0]), p, torch.tensor([[1.0, 0.0]]), generator=torch.Generator().manual_seed(0))
    assert out.decisions == ["accepted"]  # the engine, through the same broken check, takes it
