"""The bug gallery: each rule's output against its closed form, derived by hand below.

Toy distributions: p = [0.5, 0.3, 0.2], q = [0.2, 0.3, 0.5] (at temperature 1).
At T = 0.5, softmax(log x / T) squares and renormalises: p_T = [25, 9, 4] / 38 and
q_T = [4, 9, 25] / 38. Every rule drafts x ~ q_T; the output should be p_T.

  exact                  output p_T.
  argmax-accept          keeps x only when x = 0 = argmax p, else emits 0: output [1, 0, 0],
                         TV = 1 - p_T(0) = 13/38 (T = 1: 1 - 0.5 = 0.5).
  replacement-from-p     min(p_T, q_T) + (1 - overlap) p_T. T = 0.5: [4, 9, 4]/38 + (21/38) [25, 9, 4]/38
                         = [677, 531, 236]/1444, TV = (273 + 189 + 84)/2/1444 = 273/1444.
                         T = 1: [0.2, 0.3, 0.2] + 0.3 [0.5, 0.3, 0.2] = [0.35, 0.39, 0.26], TV = 0.15.
  q-before-temperature   keep min(1, p_T(x) / q(x)) = [1, 15/19, 4/19]; kept mass q_T * keep =
                         [76, 135, 100]/722 (total 311/722); residual norm(max(0, p_T - q)) = [1, 0, 0]
                         (only p_T(0) = 25/38 exceeds q(0) = 0.2): output [487, 135, 100]/722,
                         TV = (12 + 36 + 24)/2/722 = 36/722. At T = 1 it is the exact rule.
  p-without-temperature  the exact rule for p itself: output p = [0.5, 0.3, 0.2],
                         TV from p_T = (25/38 - 0.5) = 6/38. At T = 1 it is the exact rule.

Sample size N = 1,000,000 draws per rule unless a test says otherwise. Tolerance: 5 standard
errors for a frequency or a TV that should match its closed form (a seeded run; a right
answer fails one such check with probability under 1e-6). An empirical TV is biased upward
by noise, so the exact rule is not asserted to have TV ~ 0: its frequencies are checked
against p_T, and its TV against the noise floor sum_i sqrt(t_i (1 - t_i) / (2 pi N)).
"""

import json
import math

import gradio as gr
import numpy as np
import pytest

from specviz.workshop import lossless_tab
from specviz.workshop.cli import main
from specviz.errors import UserError
from specviz.workshop.lossless import RULES, at_temperature, bug_gallery, rule_parts, total_variation, tv_std_error
from specviz.viz.lossless_plots import bug_frequencies_figure, bug_table_html, bug_tv_figure

N = 1_000_000
TOL = 5
P = [0.5, 0.3, 0.2]
Q = [0.2, 0.3, 0.5]
P_HALF = np.array([25, 9, 4]) / 38  # p at T = 0.5
Q_HALF = np.array([4, 9, 25]) / 38  # q at T = 0.5
# A correct rule's empirical TV exceeds 4x the noise floor with probability about 5e-5 at these
# sizes (200,000 multinomial replicates of N draws from p_T: mean ratio 1.00, sd 0.56).
NOISE_FLOOR_FACTOR = 4

# (temperature, rule) -> (closed-form output, closed-form TV from p at T), from the docstring.
CLOSED_FORM = {
    (0.5, "exact"): (P_HALF, 0.0),
    (0.5, "argmax-accept"): (np.array([1.0, 0, 0]), 13 / 38),
    (0.5, "replacement-from-p"): (np.array([677, 531, 236]) / 1444, 273 / 1444),
    (0.5, "q-before-temperature"): (np.array([487, 135, 100]) / 722, 36 / 722),
    (0.5, "p-without-temperature"): (np.array(P), 6 / 38),
    (1.0, "exact"): (np.array(P), 0.0),
    (1.0, "argmax-accept"): (np.array([1.0, 0, 0]), 0.5),
    (1.0, "replacement-from-p"): (np.array([0.35, 0.39, 0.26]), 0.15),
    (1.0, "q-before-temperature"): (np.array(P), 0.0),
    (1.0, "p-without-temperature"): (np.array(P), 0.0),
}
TARGET = {0.5: P_HALF, 1.0: np.array(P)}


@pytest.fixture(scope="module")
def galleries():
    return {t: bug_gallery(P, Q, temperature=t, samples=N, seed=11) for t in (0.5, 1.0)}


def hand_tv_se(output: np.ndarray, target: np.ndarray, n: int) -> float:
    """The TV's standard error from the closed-form output: half the sd of sign(pi - t) at the draw."""
    s = np.sign(output - target)
    return 0.5 * math.sqrt(((output * s * s).sum() - (output * s).sum() ** 2) / n)


def test_temperature_is_softmax_of_log_over_t():
    np.testing.assert_allclose(at_temperature(P, 0.5), P_HALF, rtol=1e-12)
    root = np.sqrt(P)
    np.testing.assert_allclose(at_temperature(P, 2.0), root / root.sum(), rtol=1e-12)
    np.testing.assert_allclose(at_temperature(P, 1.0), P, rtol=1e-12)
    np.testing.assert_array_equal(at_temperature([0.0, 0.25, 0.75], 0.3)[0], 0.0)  # zeros stay zero
    np.testing.assert_allclose(at_temperature([0.25, 0.75], 0.01), [0, 1], atol=1e-40)  # no overflow near T = 0


@pytest.mark.parametrize("temperature,rule", sorted(CLOSED_FORM))
def test_each_rule_lands_on_its_closed_form(galleries, temperature, rule):
    r = galleries[temperature][rule]
    output, tv = CLOSED_FORM[temperature, rule]
    target = TARGET[temperature]
    np.testing.assert_allclose(r.target, target, rtol=1e-12)
    np.testing.assert_allclose(r.expected, output, atol=1e-12)
    assert r.tv_expected == pytest.approx(tv, abs=1e-12)

    # Frequencies: within 5 SE of the closed form (a point mass has no noise at all).
    measured = np.array(r.measured)
    se = np.sqrt(output * (1 - output) / N)
    np.testing.assert_array_less(np.abs(measured - output), TOL * se + 1e-15)

    if tv > 0:
        # Every token's output differs from the target here, so the TV is unbiased to first order.
        se_tv = hand_tv_se(output, target, N)
        assert r.tv_std_error == pytest.approx(se_tv, rel=0.05, abs=1e-12)
        assert abs(r.tv - tv) <= TOL * se_tv + 1e-12
        assert not r.within_noise and r.max_z > 20  # measurably off
    else:
        floor = np.sqrt(target * (1 - target) / (2 * math.pi * N)).sum()
        assert r.tv_noise == pytest.approx(floor, rel=1e-9)
        assert r.tv <= NOISE_FLOOR_FACTOR * floor
        assert r.within_noise and r.max_z <= TOL


def test_argmax_acceptance_is_greedy_with_no_noise(galleries):
    r = galleries[0.5]["argmax-accept"]
    assert r.measured == [1.0, 0.0, 0.0]
    assert r.tv == pytest.approx(13 / 38, abs=1e-15) and r.tv_std_error == 0.0


def test_acceptance_rates_match_the_rules(galleries):
    # exact: sum min(p_T, q_T) = 17/38; argmax-accept: q_T(0) = 4/38; q-before-temperature: 311/722
    # (docstring); p-without-temperature: sum min(p, q_T) = 4/38 + 9/38 + 0.2; replacement-from-p
    # keeps the same drafts as the exact rule.
    rates = {
        "exact": 17 / 38,
        "argmax-accept": 4 / 38,
        "replacement-from-p": 17 / 38,
        "q-before-temperature": 311 / 722,
        "p-without-temperature": 13 / 38 + 0.2,
    }
    for rule, rate in rates.items():
        got = galleries[0.5][rule].acceptance_rate
        assert abs(got - rate) <= TOL * math.sqrt(rate * (1 - rate) / N), rule
    for r in galleries[0.5].values():
        np.testing.assert_allclose(r.draft, Q_HALF, rtol=1e-12)  # every rule drafts from q at T


def test_every_rule_runs_on_the_same_draws(galleries):
    # At T = 1 the two temperature mistakes are the exact rule: the same seed gives the same output.
    g = galleries[1.0]
    assert g["exact"].measured == g["q-before-temperature"].measured == g["p-without-temperature"].measured
    assert {r.samples for r in g.values()} == {N}


def test_the_tv_standard_error_and_noise_floor_are_honest():
    # 200 independent galleries of 20,000 draws at T = 1: replacement-from-p's TV (0.15 exact) scatters
    # with sd sqrt((1 - 0.3^2) / 4 / n) = 0.00337 around 0.15; the exact rule's TV averages the
    # noise floor (sum_i sqrt(t_i (1 - t_i) / (2 pi n)) = 0.00383), not 0.
    n, reps = 20_000, 200
    runs = [bug_gallery(P, Q, 1.0, n, seed) for seed in range(reps)]
    wrong = np.array([g["replacement-from-p"].tv for g in runs])
    sd = math.sqrt((1 - 0.3**2) / 4 / n)
    assert abs(wrong.mean() - 0.15) <= TOL * sd / math.sqrt(reps)
    assert 0.75 * sd <= wrong.std(ddof=1) <= 1.25 * sd  # sd of a 200-sample sd: about 5 %
    assert np.mean([g["replacement-from-p"].tv_std_error for g in runs]) == pytest.approx(sd, rel=0.05)
    exact = np.array([g["exact"].tv for g in runs])
    floor = sum(math.sqrt(t * (1 - t) / (2 * math.pi * n)) for t in P)
    assert floor == pytest.approx(0.00383, abs=5e-6)  # (0.5 + 0.4583 + 0.4) / 354.5
    # The ratio TV / floor has sd about 0.56 per run, so its 200-run mean is within 5 x 0.04 of 1.
    assert abs(exact.mean() / floor - 1) <= 0.2


def test_tv_helpers_on_hand_cases():
    assert total_variation([1, 0, 0], P) == pytest.approx(0.5)
    assert tv_std_error([1.0, 0.0, 0.0], P, 100) == 0.0
    # s = [-1, +1, +1]: (1 - (−0.35 + 0.39 + 0.26)^2) / 4 = 0.2275
    assert tv_std_error([0.35, 0.39, 0.26], P, 10_000) == pytest.approx(math.sqrt(0.2275 / 10_000))


@pytest.mark.parametrize("temperature", [0, -1, float("nan"), float("inf"), 101, True, "0.5"])
def test_bad_temperatures_are_refused(temperature):
    with pytest.raises(UserError, match="temperature must be"):
        bug_gallery(P, Q, temperature, 10)


def test_bad_inputs_and_rules_are_refused():
    with pytest.raises(UserError, match="same vocabulary"):
        bug_gallery(P, [0.5, 0.5], 0.7, 10)
    with pytest.raises(UserError, match="samples must be"):
        bug_gallery(P, Q, 0.7, 0)
    with pytest.raises(UserError, match="unknown rule"):
        rule_parts("accept-all", np.array(P), np.array(Q), 1.0)


def test_default_distributions_show_every_mistake():
    # The lab's default p and q at the default temperature 0.7: only the exact rule is within noise.
    g = bug_gallery([0.15, 0.35, 0.1, 0.4], [0.5, 0.2, 0.2, 0.1], samples=N, seed=0)
    assert list(g) == list(RULES)
    assert [name for name, r in g.items() if r.within_noise] == ["exact"]
    assert all(r.temperature == 0.7 for r in g.values())


# --- command line --------------------------------------------------------------------


def test_cli_bugs_json(capsys):
    args = [
        "lossless",
        "--bugs",
        "--p",
        "0.5,0.3,0.2",
        "--q",
        "0.2,0.3,0.5",
        "--temperature",
        "0.5",
        "--samples",
        "200000",
        "--seed",
        "3",
        "--json",
    ]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == [
        "exact",
        "argmax-accept",
        "replacement-from-p",
        "q-before-temperature",
        "p-without-temperature",
    ]
    for rule in out.values():
        assert len(rule["measured"]) == 3 and rule["samples"] == 200_000 and rule["temperature"] == 0.5
    assert out["argmax-accept"]["measured"] == [1.0, 0.0, 0.0] and out["argmax-accept"]["tv"] == pytest.approx(13 / 38)
    wrong = out["replacement-from-p"]
    assert abs(wrong["tv"] - 273 / 1444) <= TOL * wrong["tv_std_error"]
    assert out["exact"]["within_noise"] and not out["p-without-temperature"]["within_noise"]


def test_cli_bugs_table_and_errors(capsys):
    assert (
        main(
            [
                "lossless",
                "--bugs",
                "--p",
                "0.5,0.3,0.2",
                "--q",
                "0.2,0.3,0.5",
                "--temperature",
                "0.5",
                "--samples",
                "100000",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "p at T = 0.5" in out and "0.6579 0.2368 0.1053" in out  # [25, 9, 4] / 38
    rows = {
        line.split()[0]: line
        for line in out.splitlines()
        if line.split() and line.split()[0] in RULES and ":" not in line
    }  # not the notes below the table
    assert set(rows) == set(RULES)
    assert rows["exact"].endswith("within noise") and rows["argmax-accept"].endswith("measurably off")
    assert "1.0000 0.0000 0.0000" in rows["argmax-accept"] and "0.34211" in rows["argmax-accept"]  # 13/38
    assert "argmax-accept (keep x only if it is argmax p, else emit argmax p): Sampling quietly turns greedy" in out
    assert main(["lossless", "--temperature", "0.5"]) == 2
    assert "--bugs only" in capsys.readouterr().err
    assert main(["lossless", "--bugs", "--temperature", "-1"]) == 2
    assert "temperature must be" in capsys.readouterr().err


# --- page ----------------------------------------------------------------------------

HAND_RULES = {  # a hand-written gallery, as JSON, for the drawing functions
    name: {
        "rule": name,
        "target": [0.6, 0.4],
        "temperature": 0.5,
        "measured": measured,
        "tv": tv,
        "tv_std_error": se,
        "tv_expected": exact,
        "tv_noise": 0.0007,
        "max_z": z,
        "within_noise": z <= 5,
        "samples": 1_000_000,
        "title": f"{name} & co",
        "in_practice": f"<{name}> shows",
    }
    for name, measured, tv, se, exact, z in [
        ("exact", [0.6004, 0.3996], 0.0004, 0.0005, 0.0, 0.8),
        ("argmax-accept", [1.0, 0.0], 0.4, 0.0, 0.4, 816.5),
        ("replacement-from-p", [0.55, 0.45], 0.05, 0.0005, 0.05, 102.1),
    ]
}


def test_bug_figures_draw_each_rule_against_the_target():
    fig = bug_frequencies_figure(HAND_RULES, labels=["<a>", " b"])
    assert [t.name for t in fig.data] == ["p at T = 0.5 (should be)", "exact", "argmax-accept", "replacement-from-p"]
    assert list(fig.data[0].y) == [0.6, 0.4] and list(fig.data[2].y) == [1.0, 0.0]
    assert list(fig.layout.xaxis.ticktext) == ["&lt;a&gt;", "\u2423b"]
    tv = bug_tv_figure(HAND_RULES)
    bars, crosses, numbers = tv.data
    assert list(bars.y) == ["exact", "argmax-accept", "replacement-from-p"] and list(bars.x) == [0.0004, 0.4, 0.05]
    assert list(bars.error_x.array) == pytest.approx([0.0015, 0.0, 0.0015])  # 3 SE
    assert list(bars.marker.color) == ["#009E73", "#D55E00", "#D55E00"]  # green within noise, vermillion off
    assert list(crosses.x) == [0.0, 0.4, 0.05]
    assert list(numbers.text) == ["0.0004", "0.4000", "0.0500"]


def test_bug_table_says_which_rules_are_off_and_escapes():
    html = bug_table_html(HAND_RULES)
    assert "1,000,000 draws per rule" in html and "T = 0.5" in html
    assert "The exact rule is within noise. 2 of 2 mistakes are measurably off here." in html
    assert (
        "<b>argmax-accept</b> (argmax-accept &amp; co): &lt;argmax-accept&gt; shows" in html
        and "<argmax-accept>" not in html
    )
    assert html.count("<tr>") == 4
    assert "<td>0.05000 \u00b1 0.00050</td><td>0.05000</td><td>measurably off (102.1 SE)</td>" in html
    assert "<td>within noise (0.8 SE)</td>" in html
    off = {**HAND_RULES, "exact": {**HAND_RULES["exact"], "within_noise": False}}
    assert "The exact rule is NOT within noise." in bug_table_html(off)


def test_the_tab_runs_the_gallery_and_refuses_bad_input_in_words():
    table, freq, tv = lossless_tab.simulate_bugs(lossless_tab.DEFAULT_P, lossless_tab.DEFAULT_Q, 100_000, 0, 0.7)
    assert all(name in table for name in RULES) and "4 of 4 mistakes are measurably off" in table
    assert len(freq.data) == 1 + len(RULES) and list(tv.data[0].y) == list(RULES)
    with pytest.raises(gr.Error, match="temperature must be"):
        lossless_tab.simulate_bugs(lossless_tab.DEFAULT_P, lossless_tab.DEFAULT_Q, 1000, 0, 0)
    with pytest.raises(gr.Error, match="sums to 1.1"):
        lossless_tab.simulate_bugs("0.5, 0.6", lossless_tab.DEFAULT_Q, 1000, 0, 0.7)


def test_the_page_and_the_command_line_default_to_the_same_temperature():
    from specviz.workshop.lossless import DEFAULT_TEMPERATURE

    assert lossless_tab.DEFAULT_TEMPERATURE == DEFAULT_TEMPERATURE == 0.7
