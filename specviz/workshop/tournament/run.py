"""The tournament: every drafter on one text, from one teacher-forced pass per model, priced on
this machine and on others. `tournament` is the one code path the page, the CLI and the API use.

1. `passes.read_all`: the target and each drafter that runs a model read the text once;
2. per drafter, per policy (a fixed k from 1 to 8, the cost-aware policy, the heuristic one)
   and per cost curve, `replay.replay` runs the engine's round loop with the real drafter (or
   its teacher-forced stand-in) and the real policy, the verdicts from the text;
3. each replay is priced on its curve (`price.py`); the cost-aware policy, which reads the
   costs, is replayed on each curve against a clock the curve's prices move;
4. the oracles (`oracle.py`) and what each drafter would guess at each position.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from specviz.choices import COST_AWARE, FIXED, HEURISTIC, MODEL
from specviz.costs.measure import for_pair
from specviz.drafters import make_drafter, make_length
from specviz.drafters.cost_aware import CostAwareLength
from specviz.lm.runtime import open_lm
from specviz.lm.sampling import Sampler
from specviz.app import server_details
from specviz.lm.timing import cpu_name
from specviz.settings import MAX_K
from specviz.workshop.tournament import oracle
from specviz.workshop.tournament.chains import Branches, TeacherForced
from specviz.workshop.tournament.contestants import CHAIN, FREE, OUT, TREE, Contestant, contestants, settings_for
from specviz.workshop.tournament.curves import Curve, stored, this_machine
from specviz.workshop.tournament.passes import DraftRows, Progress, TargetRows, read_all
from specviz.workshop.tournament.price import Priced, Prices, plain
from specviz.workshop.tournament.replay import Clock, Round, greedy_path, replay
from specviz.workshop.tournament.sampled import SAMPLED_REPLAYS, SampledVerdict
from specviz.workshop.tournament.text import Text
from specviz.workshop.tournament.trees import BoundedTree

KS = tuple(range(1, 9))


@dataclass(frozen=True)
class Config:
    policy: str
    k: int

    @property
    def label(self) -> str:
        return f"k={self.k}" if self.policy == FIXED else self.policy


def configs(c: Contestant, greedy: bool) -> list[Config]:
    fixed = [Config(FIXED, k) for k in KS]
    if c.kind == TREE:  # bounded under greedy decoding only
        return fixed if greedy else []
    adaptive = [Config(COST_AWARE, MAX_K)] + ([Config(HEURISTIC, MAX_K)] if c.kind == CHAIN else [])
    return fixed + adaptive


@dataclass
class Entry:
    drafter: str
    config: Config
    priced: dict[str, Priced] = field(default_factory=dict)  # by curve name
    low: dict[str, Priced] = field(default_factory=dict)  # a bounded tree's lower bound, by curve
    rounds: list[Round] = field(default_factory=list)  # this machine's replay (greedy: the run's rounds)


@dataclass
class Result:
    pair_name: str
    text: Text
    target: TargetRows
    drafts: dict[str, DraftRows]
    contestants: list[Contestant]
    curves: list[Curve]
    entries: list[Entry]
    runs: dict[str, np.ndarray]  # per drafter, its first proposal's run at each position
    plans: dict[str, oracle.Plan]  # the best drafter each round, by curve
    copy_plans: dict[str, oracle.Plan]  # the copy oracle, by curve
    plain: dict[str, Priced]  # plain decoding of the same tokens, by curve
    seconds: dict[str, float]


class Play:
    """What one tournament's replays share: the text, the rows, the pair and its branches."""

    def __init__(self, pair, text: Text, target: TargetRows, drafts: dict[str, DraftRows], prefill: dict[str, float]):
        self.pair, self.text, self.target, self.drafts, self.prefill = pair, text, target, drafts, prefill
        self.sampler = Sampler(text.settings, pair.vocab_size)
        self.branches: dict[str, Branches] = {}
        self._settings: dict[tuple, object] = {}

    def settings(self, c: Contestant, config: Config):
        key = (c.name, config)
        if key not in self._settings:
            self._settings[key] = settings_for(self.text.settings, c.name, config.policy, config.k)
        return self._settings[key]

    def draft_ms(self, c: Contestant, curve: Curve) -> float | None:
        """What a drafted token costs `c` on `curve` (None: the curve cannot price it)."""
        if c.kind == FREE:
            return 0.0
        if c.share:
            return c.share * curve.cost.target
        return curve.cost.draft if curve.has_draft else None

    def prices(self, c: Contestant, curve: Curve) -> Prices | None:
        d = self.draft_ms(c, curve)
        if d is None:
            return None
        return Prices(curve.cost.with_draft(d), d, free=c.kind == FREE, prefill_ms=self._prefill_ms(c, curve, d))

    def _prefill_ms(self, c: Contestant, curve: Curve, d: float) -> float:
        """The draft's read of the prompt: as timed here, else priced as the cost-aware policy
        prices a catch-up on the curve."""
        if c.kind == FREE:
            return 0.0
        if curve.here and c.name in self.prefill:
            return self.prefill[c.name]
        return CostAwareLength(curve.cost.with_draft(d), 1).catch_up_ms(len(self.text.prompt_ids))

    def drafter(self, c: Contestant, config: Config, prices: Prices, *, lower: bool = False):
        settings = self.settings(c, config)
        if c.kind == FREE:
            return make_drafter(self.pair, settings)
        if c.kind == TREE:
            rows = self.drafts[MODEL]
            return BoundedTree(c.name, self.text, rows, settings.tree_nodes, settings.tree_width, lower=lower)
        reads_confidence = config.policy != FIXED and self.text.settings.greedy
        branches = self._branches(c) if reads_confidence else None
        return TeacherForced(c.name, self.text, self.drafts[c.name], branches, prices.prefill_ms)

    def _branches(self, c: Contestant) -> Branches:
        if c.name not in self.branches:
            self.branches[c.name] = Branches(c.lm, self.text, self.drafts[c.name], self.sampler)
        return self.branches[c.name]

    def play(self, c: Contestant, config: Config, prices: Prices, *, lower: bool = False) -> list[list[Round]]:
        """The replays of `c` under `config` priced by `prices` (a curve's): one under greedy
        decoding, SAMPLED_REPLAYS under sampling. A policy that reads the costs reads the curve's,
        and times its rounds on a clock the curve's prices move."""
        on_curve = copy.copy(self.pair)
        on_curve.cost_model = prices.cost
        out = []
        for seed in range(1 if self.text.settings.greedy else SAMPLED_REPLAYS):
            length, clock = make_length(on_curve, self.settings(c, config)), Clock()
            if isinstance(length, CostAwareLength):
                length._clock = clock  # the policy times rounds on the curve's clock, not this machine's
            drafter = self.drafter(c, config, prices, lower=lower)
            prices.paid = False
            tick = lambda r: clock.advance(prices.round_ms(r))  # noqa: E731
            out.append(replay(self.text, drafter, length, self._verdict(c, seed), after_round=tick))
        return out

    def _verdict(self, c: Contestant, seed: int):
        if self.text.settings.greedy:
            return greedy_path(self.text.answer_ids)
        overlap = self.drafts[c.name].overlap if c.kind == CHAIN else None
        return SampledVerdict(self.target, self.text.n, overlap, seed)


def _sum(replays: list[list[Round]], prices: Prices) -> Priced:
    ps = [prices.run(rs) for rs in replays]
    return Priced(sum(p.ms for p in ps), sum(p.tokens for p in ps), sum(p.plain_ms for p in ps))


def _entry(play: Play, c: Contestant, config: Config, curves: list[Curve], shared: dict) -> Entry:
    """One drafter under one policy, priced on every curve that can price it. Only the
    cost-aware policy reads the costs; every other replay is made once and priced on each curve."""
    entry = Entry(c.name, config)
    for curve in curves:
        prices = play.prices(c, curve)
        if prices is None:
            continue
        for lower in (False, True) if c.kind == TREE else (False,):
            key = (c.name, config, lower, curve.name if config.policy == COST_AWARE else "")
            if key not in shared:
                shared[key] = play.play(c, config, prices, lower=lower)
            (entry.low if lower else entry.priced)[curve.name] = _sum(shared[key], prices)
            if curve.here and not lower:
                entry.rounds = shared[key][0]
    return entry


def tournament(
    pair,
    text: Text,
    *,
    others: Sequence[Curve] | None = None,
    drafters: Sequence[str] | None = None,
    progress: Progress | None = None,
) -> Result:
    """Every drafter on `text` (see the module docstring), or those named in `drafters`,
    priced on this machine and on `others` (the stored curves when None)."""
    t0 = time.perf_counter()
    say = progress or (lambda f, m: None)
    cs = [c for c in contestants(pair, text.settings) if drafters is None or c.name in drafters]
    models = {c.name: c.lm for c in cs if c.kind == CHAIN}
    sampler = Sampler(text.settings, pair.vocab_size)
    target, drafts = read_all(text, open_lm(pair.target, pair.device), models, sampler, lambda f, m: say(0.5 * f, m))
    t_pass = time.perf_counter()
    prefill = {name: rows.prefill_ms for name, rows in drafts.items()}
    play = Play(pair, text, target, drafts, prefill)
    machine = "this server" if server_details.hidden() else cpu_name()  # a public page names no CPU model
    curves = [this_machine(for_pair(pair), pair.runtime, machine)] + list(stored() if others is None else others)
    entries, shared = [], {}
    todo = [(c, config) for c in cs if c.kind != OUT for config in configs(c, text.settings.greedy)]
    for i, (c, config) in enumerate(todo):
        say(0.5 + 0.45 * i / len(todo), f"replaying {c.name}, {config.label}")
        entries.append(_entry(play, c, config, curves, shared))
    say(0.95, "the oracles")
    runs, plans, copies = _oracles(play, cs, curves)
    result = Result(
        pair.name, text, target, drafts, cs, curves, entries, runs, plans, copies,
        {cv.name: plain(text.n - 1, cv.cost) for cv in curves},
        {"passes": t_pass - t0, "replays": time.perf_counter() - t_pass, "total": time.perf_counter() - t0},
    )  # fmt: skip
    say(1.0, "done")
    return result


def _oracles(play: Play, cs: list[Contestant], curves: list[Curve]):
    text = play.text
    runs = {}
    for c in cs:
        if c.kind == CHAIN:
            runs[c.name] = oracle.runs_from_matches(play.drafts[c.name].matches(text.answer_ids))
        elif c.kind == FREE:
            runs[c.name] = oracle.copy_runs(text, c.name, text.settings.lookahead_ngram)
    copy_run = {oracle.COPY: oracle.copy_runs(text, oracle.COPY)}
    plans, copies = {}, {}
    for curve in curves:
        costs = {n: play.draft_ms(c, curve) for c in cs if (n := c.name) in runs}
        usable = {n: r for n, r in runs.items() if costs[n] is not None}
        plans[curve.name] = oracle.best_rounds(usable, costs, curve.cost, text.n)
        copies[curve.name] = oracle.best_rounds(copy_run, {oracle.COPY: 0.0}, curve.cost, text.n)
    return runs, plans, copies
