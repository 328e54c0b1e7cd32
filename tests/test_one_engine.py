"""One engine, one story: the library, the CLI, the page's runner (which the `generate` API
uses too) and the bench choose the same draft-length policy and, given the same cost model
and the same clock, draft the same k every round and emit the same tokens."""

from __future__ import annotations

import io
import itertools
import json
from dataclasses import replace

import pytest

from specviz import engine
from specviz.app import runner
from specviz.app.config import PageConfig
from specviz.app.loading import PairLoader
from specviz.workshop.bench.methods import parse_method, run_specviz, sv_settings
from specviz.drafters import cost_aware
from specviz.cost_model import CostModel
from specviz.workshop import generate_cli as cli
from specviz.events import RoundEvent
from specviz.settings import DEFAULTS, GenerationSettings
from tiny_models import single_thread, tiny_pair  # noqa: F401 (single_thread: a fixture)

pytestmark = pytest.mark.usefixtures("single_thread")

PROMPT = "def reverse(s):"
# A cost curve that makes the choice of k matter: passes grow with their size, drafts are cheap.
COST = CostModel(verify={n: 100.0 + 15.0 * (n - 1) for n in range(1, 18)}, draft=12.0)


@pytest.fixture
def repeatable(monkeypatch):
    """The pair's cost model fixed, and the policy's clock a counter: every call advances it
    by the same 0.25 s, so the rounds the policy times cost the same in every run. The draft's
    prompt prefill and the target's passes, timed on the real clock, are not told to it."""
    pair = tiny_pair("close")
    monkeypatch.setattr(pair, "cost_model", COST)
    update = cost_aware.CostAwareLength.update
    monkeypatch.setattr(
        cost_aware.CostAwareLength,
        "update",
        lambda self, *a, setup_ms=0.0, target_ms=None, **kw: update(self, *a, **kw),
    )

    def clock_factory():
        ticks = itertools.count()
        return lambda: next(ticks) * 0.25

    def install():
        monkeypatch.setattr(cost_aware, "CLOCK", clock_factory())

    return pair, install


def ks(trace) -> list[int]:
    return [e.k for e in trace.events if isinstance(e, RoundEvent)]


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_every_entry_point_drafts_the_same_k_and_tokens(repeatable, monkeypatch, temperature):
    pair, fresh_clock = repeatable
    settings = GenerationSettings(max_new_tokens=40, k=6, temperature=temperature, seed=5)
    assert settings.policy == DEFAULTS.policy == "cost-aware"

    fresh_clock()
    library = engine.run(pair, PROMPT, settings)

    fresh_clock()
    out = io.StringIO()
    cli.generate(pair, PROMPT, settings, as_json=True, out=out)
    from_cli = json.loads(out.getvalue())

    fresh_clock()
    monkeypatch.setattr(runner, "LOADER", PairLoader(lambda name, **_: pair))
    *_, from_page = runner.stream("tiny", PROMPT, settings, "session", PageConfig(), min_interval_s=0.0)

    fresh_clock()
    method = parse_method("sv-adaptive")
    from_bench = run_specviz(pair, PROMPT, method, sv_settings(method, replace(settings, k=1), k_max=6)).trace

    k_library = ks(library)
    assert len(set(k_library)) > 1, "the policy should vary k on this cost curve, or the test proves little"
    assert [e["k"] for e in from_cli["events"] if e["type"] == "round"] == k_library
    assert ks(from_page) == k_library
    assert ks(from_bench) == k_library
    assert from_cli["token_ids"] == from_page.token_ids == from_bench.token_ids == library.token_ids
    for trace in (library, from_page, from_bench):
        assert trace.summary.policy == "cost-aware"
        assert trace.settings["policy"] == "cost-aware"
    assert from_cli["summary"]["policy"] == "cost-aware"


def test_the_summary_measures_speed_against_the_load_time_cost_model(repeatable):
    pair, fresh_clock = repeatable
    fresh_clock()
    trace = engine.run(pair, PROMPT, GenerationSettings(max_new_tokens=12))
    s = trace.summary
    assert s.plain_ms_per_token == COST.verify_ms(1) == 100.0
    # speedup = tokens/s over the 10 tokens/s that one 100 ms pass per token gives
    assert s.speedup_vs_plain == pytest.approx(s.tokens_per_s / 10.0)
    assert trace.meta["cost_model"]["verify"]["1"] == 100.0
    # the whole-run figures: position 1's rate counted here from the rounds themselves
    rounds = [e for e in trace.events if isinstance(e, RoundEvent) and e.drafted]
    first = sum(r.drafted[0].decision == "accepted" for r in rounds) / len(rounds)
    assert s.acceptance_by_position[0] == pytest.approx(first)
    assert len(s.hindsight_k) == len([e for e in trace.events if isinstance(e, RoundEvent)])
    generation = engine.start(pair, PROMPT, GenerationSettings(max_new_tokens=12))
    running = iter(generation)  # kept: a dropped iterator ends the run
    next(running)
    assert not generation.done and generation.trace().summary.acceptance_by_position == [], (
        "filled once the run has ended"
    )
    plain = engine.run(pair, PROMPT, GenerationSettings(max_new_tokens=12, mode="plain"))
    assert plain.summary.policy == "" and plain.summary.plain_ms_per_token == 100.0


def test_make_length_gives_each_policy_its_behaviour(repeatable):
    from specviz.drafters import make_length

    pair, _ = repeatable
    made = {
        policy: make_length(pair, GenerationSettings(policy=policy, k=5))
        for policy in ("fixed", "heuristic", "cost-aware")
    }
    fixed, heuristic, cost_aware = made["fixed"], made["heuristic"], made["cost-aware"]
    # fixed: k every round, whatever the rounds did
    for _ in range(3):
        fixed.update(5, 0)
    assert fixed.limit(0, 100) == 5 and fixed.keep_going(0.01)
    # heuristic: -1 after a rejection, +2 (to the cap) after a fully accepted round, and a
    # round's drafting stops below the confidence threshold
    heuristic.update(5, 2)
    assert heuristic.limit(0, 100) == 4
    heuristic.update(4, 4)
    assert heuristic.limit(0, 100) == 5
    assert not heuristic.keep_going(0.1) and heuristic.keep_going(0.9)
    # cost-aware: from the pair's costs (V(n) = 100 + 15 (n - 1) ms, D = 12 ms), drafting
    # pays when drafts are accepted (at 0.9 one token: 1.9 tokens per 127 ms, above 1 per
    # 100 ms) and does not when none is (1 per 127 ms)
    assert cost_aware.choose(0.9)[0] > 0
    assert cost_aware.choose(0.0) == (0, pytest.approx(1 / 100))
