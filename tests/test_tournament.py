"""The tournament (specviz/workshop/tournament): every drafter replayed over one text.

- greedy: for each chain drafter (the draft model, the target's early layers, prompt lookup)
  at k = 1, 4 and 8, and for suffix decoding, the tournament's accepted length in every round
  equals a real greedy run's on the same text, round for round; under the cost-aware policy
  too, where the run and the replay read the same clock; lookahead where its window does not
  ride (its window reads the target's logits at its own guesses, which no text holds);
- sampled: along real sampled runs' own texts each tested position is accepted with the chance
  sum min(p, q) the tournament's passes give it: over the N (about 500) tested positions of 12 runs at temperature 1.8 and top-k 50 the
  accepted count is within 3 standard errors of the summed chances, and a q taken before the
  sampler's processing (the classic bug) is refused by the same check;
- the oracles and the pricing: the copy oracle is never slower than a copying drafter on the
  same curve, and a replay that drafts nothing is priced as plain decoding.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from specviz import engine
from specviz.choices import COST_AWARE, EARLY_EXIT, FIXED, LOOKAHEAD, LOOKUP, MODEL, SUFFIX
from specviz.cost_model import CostModel
from specviz.drafters import cost_aware
from specviz.events import RoundEvent
from specviz.lm.runtime import open_lm
from specviz.lm.sampling import Sampler
from specviz.settings import GenerationSettings
from specviz.workshop.tournament import run as tournament_run
from specviz.workshop.tournament import oracle
from specviz.workshop.tournament.passes import read_all
from specviz.workshop.tournament.price import Prices
from specviz.workshop.tournament.run import Config
from specviz.workshop.tournament.text import from_pasted, from_trace
from tiny_models import single_thread, tiny_pair  # noqa: F401 (single_thread: a fixture)

pytestmark = pytest.mark.usefixtures("single_thread")

# A prompt that repeats itself (raw, so the context ends with it), so that the copying drafters
# find copies and the draft model both hits and misses.
PROMPT = "def reverse(s):\n    return s[::-1]\n\nprint(reverse('hello'))\n\ndef reverse(s):\n"
N_NEW = 48
COST = CostModel(verify={n: 100.0 + 15.0 * (n - 1) for n in range(1, 18)}, draft=12.0)
# A curve where one copied node pays but lookahead's window (8 tokens more) never can.
NO_WINDOW = CostModel(verify={1: 100.0, 2: 110.0, 8: 400.0, 17: 600.0}, draft=12.0)


def accepted(trace) -> list[int]:
    """Per round after the prefill's, the accepted drafts its event shows."""
    rounds = [e for e in trace.events if isinstance(e, RoundEvent)][1:]
    return [sum(n.decision == "accepted" for n in (e.tree or e.drafted)) for e in rounds]


def replayed(result, drafter: str, config: Config) -> list[int]:
    entry = next(e for e in result.entries if e.drafter == drafter and e.config == config)
    return [r.accepted for r in entry.rounds]


@pytest.fixture
def pair(monkeypatch):
    p = tiny_pair("close")
    monkeypatch.setattr(p, "cost_model", COST)
    return p


def real_and_replayed(pair, drafter: str, policy: str, k: int) -> tuple[list[int], list[int]]:
    settings = GenerationSettings(max_new_tokens=N_NEW, k=k, policy=policy, drafter=drafter, raw=True)
    trace = engine.run(pair, PROMPT, settings)
    result = tournament_run.tournament(pair, from_trace(pair, trace), others=(), drafters=[drafter])
    real = accepted(trace)
    assert len(real) > 8, "the run should have rounds enough to compare"
    return real, replayed(result, drafter, Config(policy, k))


@pytest.mark.parametrize("drafter", [MODEL, EARLY_EXIT, LOOKUP, SUFFIX])
@pytest.mark.parametrize("k", [1, 4, 8])
def test_greedy_accepted_lengths_are_a_real_runs_round_for_round(pair, drafter, k):
    real, replay = real_and_replayed(pair, drafter, FIXED, k)
    assert replay == real
    if drafter == MODEL and k > 1:
        assert len(set(real)) > 2, "hits and misses both, or the check proves little"


@pytest.fixture
def one_clock(monkeypatch):
    """The cost-aware policy's clock a counter in the run and in the replay alike (each round
    0.25 s); the draft's prompt read and the target pass's own time, both timed on the real
    clock in a run (a replay has neither), heard by neither."""
    update = cost_aware.CostAwareLength.update
    monkeypatch.setattr(
        cost_aware.CostAwareLength,
        "update",
        lambda self, drafted, accepted, setup_ms=0.0, target_ms=None: update(self, drafted, accepted),
    )

    class Counter:
        def __init__(self):
            self.ticks = itertools.count()

        def __call__(self):
            return next(self.ticks) * 0.25

        def advance(self, ms):
            pass

    def fresh():
        monkeypatch.setattr(cost_aware, "CLOCK", Counter())
        monkeypatch.setattr(tournament_run, "Clock", Counter)

    return fresh


@pytest.mark.parametrize("drafter", [MODEL, EARLY_EXIT, LOOKUP, SUFFIX])
def test_the_cost_aware_policy_replays_as_it_ran_on_the_same_clock(pair, one_clock, drafter):
    one_clock()
    real, replay = real_and_replayed(pair, drafter, COST_AWARE, 16)
    assert replay == real


def test_lookahead_replays_exactly_where_its_window_does_not_ride(pair, monkeypatch):
    monkeypatch.setattr(pair, "cost_model", NO_WINDOW)
    settings = GenerationSettings(max_new_tokens=N_NEW, k=16, policy=COST_AWARE, drafter=LOOKAHEAD, raw=True)
    trace = engine.run(pair, PROMPT, settings)
    rounds = [e for e in trace.events if isinstance(e, RoundEvent)][1:]
    assert not any(e.source and e.source.window_on for e in rounds), "the window should not ride on this curve"
    real = [(len(e.tree or e.drafted), n) for e, n in zip(rounds, accepted(trace))]
    assert sum(d for d, _ in real) >= 3, "lookahead should propose n-grams in some rounds"
    entry = next(
        e
        for e in tournament_run.tournament(pair, from_trace(pair, trace), others=(), drafters=[LOOKAHEAD]).entries
        if e.drafter == LOOKAHEAD and e.config == Config(COST_AWARE, 16)
    )
    assert [(r.drafted, r.accepted) for r in entry.rounds] == real


SAMPLED = dict(temperature=1.8, top_k=50)
RUNS = 12


def positions_tested(trace) -> list[tuple[int, bool]]:
    """(answer position, accepted) of every drafted token the target tested."""
    out, start = [], 0
    for e in trace.events:
        if isinstance(e, RoundEvent):
            for j, d in enumerate(e.drafted):
                if d.decision in ("accepted", "rejected"):
                    out.append((start + j, d.decision == "accepted"))
            start = e.new_tokens
    return out


def z_of(pair, runs, settings_for_passes) -> tuple[float, int]:
    """How many standard errors the accepted count lies from the passes' summed chances."""
    hits = chance = var = 0.0
    n = 0
    for trace in runs:
        text = from_trace(pair, trace)
        text = replace(text, settings=settings_for_passes)
        lms = {MODEL: open_lm(pair.draft, pair.device)}
        _, drafts = read_all(
            text, open_lm(pair.target, pair.device), lms, Sampler(settings_for_passes, pair.vocab_size)
        )
        beta = drafts[MODEL].overlap
        for pos, ok in positions_tested(trace):
            hits += ok
            chance += beta[pos]
            var += beta[pos] * (1 - beta[pos])
            n += 1
    return (hits - chance) / var**0.5, n


def test_sampled_acceptance_is_the_overlap_the_passes_give(pair):
    settings = GenerationSettings(max_new_tokens=N_NEW, k=4, policy=FIXED, drafter=MODEL, raw=True, **SAMPLED)
    runs = [engine.run(pair, PROMPT, GenerationSettings(**{**settings.to_dict(), "seed": s})) for s in range(RUNS)]
    z, n = z_of(pair, runs, settings)
    assert n > 300, f"N = {n} tested positions"
    assert abs(z) < 3, f"{z:.2f} standard errors over N = {n}"
    # The same check with q and p taken before the sampler's processing (temperature, top-k,
    # top-p) finds the difference: the tournament must read the distributions sampled from.
    unprocessed = GenerationSettings(**{**settings.to_dict(), "temperature": 1.0, "top_k": 0, "top_p": 1.0})
    z_bad, _ = z_of(pair, runs, unprocessed)
    assert abs(z_bad) > 3, f"a q before processing should be caught ({z_bad:.2f} standard errors)"


def test_no_copying_drafter_beats_the_copy_oracle(pair):
    # A pasted answer that copies most of its prompt, with an edit in the middle.
    answer = "def reverse(s):\n    return s[::-1]\n\nprint(reverse('world'))\n\ndef reverse(s):\n    return s[::-1]\n"
    result = tournament_run.tournament(pair, from_pasted(pair, PROMPT, answer, GenerationSettings(raw=True)))
    copied = 0
    for curve in result.curves:
        plan = result.copy_plans[curve.name]
        assert plan.ms <= result.plain[curve.name].ms + 1e-9
        for e in result.entries:
            if e.drafter in (LOOKUP, SUFFIX) and curve.name in e.priced:
                # the drafter's rounds on V(n) alone (its own work left out, as the oracle's is)
                if curve.here:
                    assert plan.ms <= Prices(curve.cost, 0.0, free=False).run(e.rounds).ms + 1e-9
                    copied += sum(r.accepted for r in e.rounds)
    assert copied > 0, "the copying drafters should copy something on this prompt"
    runs = oracle.copy_runs(result.text, oracle.COPY)
    for e in result.entries:
        for r in e.rounds if e.drafter in (LOOKUP, SUFFIX) else []:
            assert r.accepted <= runs[r.start], "an accepted copy is a copy of earlier text"


def test_the_tool_and_the_tab_give_the_clis_figures(pair, monkeypatch):
    """One code path: the API tool's JSON is `report.to_dict` of `run.tournament`, as the CLI's
    --json is, and the tab draws that dict (the heatmap, the ranked table with the oracles, the
    text, the notes naming each curve's source), for this machine and as a prediction elsewhere."""
    import json as json_

    from specviz.app import runner
    from specviz.app.loading import PairLoader
    from specviz.workshop.tournament import tab
    from specviz.workshop.tournament.report import to_dict
    from specviz.workshop.tournament.cli import token_texts

    monkeypatch.setattr(runner, "LOADER", PairLoader(lambda name, **_: pair))
    settings = GenerationSettings(max_new_tokens=24, k=4, policy=FIXED, raw=True)
    trace = engine.run(pair, PROMPT, settings)
    got = json_.loads(tab.tournament(trace=trace.to_json(), pair="tiny"))
    direct = to_dict(
        tournament_run.tournament(pair, from_trace(pair, trace)), texts=token_texts(pair, trace.token_ids), trace=trace
    )
    keep = ("drafter", "label", "rounds", "acceptance")
    assert [{k: e[k] for k in keep} for e in got["entries"]] == [{k: e[k] for k in keep} for e in direct["entries"]]
    assert got["measured"] and got["measured"][0]["drafter"] == MODEL
    assert {c["source"] for c in got["curves"]} >= {"measured here", "published"}
    assert all(c["link"].startswith("https://") for c in got["curves"] if c["source"] == "published")
    heat, ranked, text, notes, curves = tab.views(got, got["curves"][-1]["name"])
    assert "a prediction for" in heat.layout.title.text and "copy oracle" in ranked
    assert text.count('class="tok"') == len(trace.token_ids)
    assert "exact under greedy decoding" in notes and "github.com" in curves
    exported = tab.export_winner(got, "vllm")
    assert got["winner"]["drafter"] in exported or "nothing to export" in exported or "#" in exported
