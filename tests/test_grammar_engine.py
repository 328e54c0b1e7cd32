"""Decoding under an output format: greedy speculative output equals greedy plain output under the
same format for every drafter (tiny models, torch), every output is valid, and by Monte Carlo the
rule on the masked pair keeps the output distributed as the target's masked distribution.

The mathematics the Monte Carlo test checks. With p' and q' the masked, renormalised target and
draft distributions, accepting x ~ q' with probability min(1, p'(x) / q'(x)) and resampling
from norm(max(0, p' - q')) gives output distributed exactly as p'. That holds for ANY proposal
distribution q, masked or not, and for a forced token proposed as a point mass (q = 1). So:

- q and p both masked (the engine): the output follows p', and no forbidden token is proposed;
- only q masked: the rule runs against the unmasked p, and the output follows p, not p': the
  grammar is broken (forbidden outputs), a failure of the distribution;
- only p masked: the output still follows p' (the rule is exact for any q), but the draft
  proposes tokens the grammar forbids, which are always rejected: acceptance falls, and the
  promise that no forbidden token is proposed fails. The test shows exactly this: no
  distribution failure is claimed where none exists.
"""

from __future__ import annotations

import functools
import json
import time
from collections import Counter

import pytest
import torch

from monte_carlo import frequencies_match
from specviz import engine
from specviz.choices import CHOICE, JSON_SCHEMA, REGEX
from specviz.drafters.base import draft_chain
from specviz.engine.tree_round import decide
from specviz.grammar import formats
from specviz.grammar.matcher import Grammar
from specviz.lm.sampling import Sampler
from specviz.settings import GenerationSettings
from tiny_models import single_thread, tiny_pair  # noqa: F401 (single_thread: a fixture)

pytestmark = pytest.mark.usefixtures("single_thread")

PERSON = json.dumps(
    {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 16}, "n": {"type": "integer"}},
        "required": ["name", "n"],
        "additionalProperties": False,
    }
)
FORMATS = {JSON_SCHEMA: PERSON, REGEX: "(the|a) (dog|fox|sun)( sleeps| jumps| runs)+[.!]", CHOICE: "yes\nno\nnot sure"}
DRAFTERS = ["model", "tree", "lookup", "early-exit", "suffix", "lookahead"]
N_NEW = 40


@pytest.fixture(scope="module")
def plain():
    pair = tiny_pair("close")
    out = {}
    for kind, spec in FORMATS.items():
        s = GenerationSettings(mode="plain", max_new_tokens=N_NEW, output_format=kind, output_spec=spec)
        out[kind] = engine.run(pair, "hello", s)
    return out


@pytest.mark.parametrize("kind", list(FORMATS))
@pytest.mark.parametrize("drafter", DRAFTERS)
def test_greedy_constrained_speculative_equals_constrained_plain(drafter, kind, plain):
    pair = tiny_pair("close")
    for policy, k in (("fixed", 3), ("cost-aware", 8)):
        s = GenerationSettings(
            drafter=drafter, policy=policy, k=k, max_new_tokens=N_NEW, output_format=kind, output_spec=FORMATS[kind]
        )
        trace = engine.run(pair, "hello", s)
        assert trace.token_ids == plain[kind].token_ids, (drafter, policy)
        assert trace.summary.format_check in ("valid", plain[kind].summary.format_check)
        drafted = [d for e in trace.events for d in e.drafted]
        assert trace.summary.forced == sum(d.forced and d.decision != "unchecked" for d in drafted)
        assert trace.summary.forced_accepted == sum(d.forced and d.decision == "accepted" for d in drafted)
    assert plain[kind].summary.format_check == "valid"  # the run ended on its own, its text valid


def test_forced_tokens_ride_free_and_are_counted_apart_from_drafted_ones(plain):
    pair = tiny_pair("close")
    s = GenerationSettings(drafter="lookup", k=4, max_new_tokens=N_NEW, output_format=JSON_SCHEMA, output_spec=PERSON)
    trace = engine.run(pair, "hello", s)
    forced = [d for e in trace.events for d in e.drafted if d.forced]
    assert forced and trace.summary.forced == len(forced)
    assert trace.summary.drafted == sum(
        not d.forced and d.decision != "unchecked" for e in trace.events for d in e.drafted
    )
    first = trace.events[1]  # after the prefill's token `{"`, the keys and quotes the schema forces
    assert first.drafted and all(d.forced for d in first.drafted)
    assert trace.summary.grammar_ms > 0 and trace.meta["grammar"]["engine"] == "llguidance"
    positions = [p for e in trace.events for p in e.positions]
    assert all(p.allowed is not None and 1 <= p.allowed <= pair.vocab_size for p in positions)
    assert any(p.allowed == 1 for p in positions) and all(0 <= p.kept <= 1 for p in positions)


@pytest.mark.parametrize("drafter", DRAFTERS)
def test_sampled_constrained_runs_propose_only_allowed_tokens_and_end_valid(drafter):
    pair = tiny_pair("random")
    s = GenerationSettings(
        drafter=drafter, temperature=1.0, seed=3, max_new_tokens=N_NEW, output_format=REGEX, output_spec=FORMATS[REGEX]
    )
    trace = engine.run(pair, "hello", s)
    # p here is the masked p': a proposed token the grammar forbids would show p = 0.
    checked = [d for e in trace.events for d in e.drafted if d.decision != "unchecked"]
    assert all(d.p > 0 for d in checked)
    assert all(n.p is None or n.p > 0 for e in trace.events for n in e.tree)
    assert trace.summary.format_check == "valid" or trace.summary.format_check.startswith("cut by the token limit")


def test_a_run_cut_by_the_token_limit_says_so():
    pair = tiny_pair("close")
    s = GenerationSettings(max_new_tokens=3, output_format=JSON_SCHEMA, output_spec=PERSON)
    trace = engine.run(pair, "hello", s)
    assert trace.summary.stop_reason == "max_new_tokens"
    assert trace.summary.format_check.startswith("cut by the token limit: not JSON")


# ---- the rule under a grammar, by Monte Carlo ------------------------------------------------

N_EXACT = 10_000  # rounds for the exactness check: each outcome within 5 standard errors
N_BROKEN = 2_000  # rounds for each broken variant: its failure shows long before
TEMPERATURE = 2.0  # the tiny models' logits are large: this spreads p' over its outcomes
SPEC = "[a-d][e-g]x"  # over the tiny vocabulary: a, b, c, d, de, af first; then e, f, g (x forced after de, af)


class Harness:
    """The real pieces of a round (the sampler's mask, `draft_chain`, `walk`, `decide`) over a
    real tiny target and an unrelated tiny draft, their logits memoised by path, with each
    side's mask switched on or off. After a path the grammar forbids, the switched-off side's
    rows allow everything (the real engine never meets such a path)."""

    def __init__(self, mask_p: bool, mask_q: bool):
        self.pair = tiny_pair("random")
        tok = self.pair.tokenizer
        self.grammar = Grammar(formats.parse(REGEX, SPEC), tok, len(tok), [tok.eos_token_id])
        self.mask_p, self.mask_q = mask_p, mask_q
        self.ctx = tok("x", add_special_tokens=False)["input_ids"]  # a context where p' is spread out
        self.settings = GenerationSettings(temperature=TEMPERATURE)
        self.V = self.pair.vocab_size

    def allowed(self, path) -> torch.Tensor:
        rows = self.grammar.allowed(path)
        return rows if rows.any() else torch.ones(self.V, dtype=torch.bool)

    def rows(self, paths) -> torch.Tensor:
        return torch.stack([self.allowed(p) for p in paths])

    def forced(self, path) -> list[int]:
        return self.grammar.forced(path)

    def ends(self, token) -> bool:
        return self.grammar.ends(token)

    @functools.lru_cache(maxsize=None)
    def logits(self, which: str, path: tuple[int, ...]) -> torch.Tensor:
        model = self.pair.target if which == "p" else self.pair.draft
        with torch.no_grad():
            return model(torch.tensor([self.ctx + list(path)])).logits[0, -1].float()

    def round(self, before: tuple[int, ...], k: int, gen: torch.Generator) -> tuple[list[int], list[int]]:
        """One round after `before` (output so far): the drafted tokens and the round's new tokens."""
        view = _After(self, before)
        q_sampler = Sampler(self.settings, self.V)
        q_sampler.grammar = view if self.mask_q else None
        drafted: list[int] = []

        def step(fed: torch.Tensor) -> torch.Tensor:
            drafted.extend(int(t) for t in fed.tolist() if t >= 0)
            return self.logits("q", before + tuple(drafted))

        proposal = draft_chain(step, torch.tensor([-1]), k, lambda c: True, set(), q_sampler, gen, time.perf_counter())
        if self.mask_q or self.mask_p:
            tokens = proposal.tokens.tolist()
            paths = [()] + [tuple(tokens[: i + 1]) for i in range(len(tokens))]
            proposal.allowed = view.rows(paths) if self.mask_p else None
        logits = torch.stack([self.logits("p", before + p) for p in _prefixes(proposal.tokens.tolist())])
        r = decide(Sampler(self.settings, self.V), proposal, logits, time.perf_counter(), gen, greedy=False)
        return proposal.tokens.tolist(), r.outcome.new_tokens

    def first_two(self, n: int, seed: int) -> tuple[Counter, int]:
        """The first two output tokens of n runs, and how many proposed tokens the grammar forbids."""
        gen = torch.Generator().manual_seed(seed)
        outcomes, forbidden = Counter(), 0
        for _ in range(n):
            out: list[int] = []
            while len(out) < 2:
                proposed, new = self.round(tuple(out), 2, gen)
                forbidden += sum(
                    not self.grammar.allowed(tuple(out) + tuple(proposed[:i]))[t] for i, t in enumerate(proposed)
                )
                out += new
            outcomes[tuple(out[:2])] += 1
        return outcomes, forbidden

    def expected(self) -> dict[tuple[int, int], float]:
        """p'(y1) p'(y2 | y1) by hand: softmax over the allowed tokens' logits / TEMPERATURE."""

        def masked(path):
            on = self.grammar.allowed(path)
            logits = self.logits("p", path).masked_fill(~on, float("-inf"))
            return (logits.double() / TEMPERATURE).softmax(-1)

        first = masked(())
        return {
            (y1, y2): float(first[y1] * p2)
            for y1 in first.nonzero().flatten().tolist()
            for y2, p2 in enumerate(masked((y1,)).tolist())
            if p2 > 0
        }


class _After:
    """The harness's masks after an output `before`: paths past it, as the engine's grammar takes them."""

    def __init__(self, h: Harness, before: tuple[int, ...]):
        self.h, self.before = h, before

    def allowed(self, path=()) -> torch.Tensor:
        return self.h.allowed(self.before + tuple(path))

    def rows(self, paths) -> torch.Tensor:
        return torch.stack([self.allowed(p) for p in paths])

    def forced(self, path=()) -> list[int]:
        return self.h.forced(self.before + tuple(path))


def _prefixes(tokens: list[int]) -> list[tuple[int, ...]]:
    return [tuple(tokens[:i]) for i in range(len(tokens) + 1)]


def _check(outcomes: Counter, expected: dict, n: int) -> tuple[bool, str]:
    keys = sorted(set(expected) | set(outcomes))
    counts = torch.tensor([outcomes.get(key, 0) for key in keys], dtype=torch.float64)
    p = torch.tensor([expected.get(key, 0.0) for key in keys], dtype=torch.float64)
    return frequencies_match(counts, p, n)


def test_the_first_two_tokens_follow_the_masked_target_when_both_are_masked():
    h = Harness(mask_p=True, mask_q=True)
    expected = h.expected()
    assert abs(sum(expected.values()) - 1) < 1e-9
    assert sum(v > 0.02 for v in expected.values()) >= 6  # a spread of outcomes, no single one certain
    outcomes, forbidden = h.first_two(N_EXACT, seed=0)
    ok, why = _check(outcomes, expected, N_EXACT)
    assert ok, why
    assert forbidden == 0


def test_masking_only_q_breaks_the_distribution():
    h = Harness(mask_p=False, mask_q=True)
    outcomes, _ = h.first_two(N_BROKEN, seed=1)
    ok, why = _check(outcomes, h.expected(), N_BROKEN)
    assert not ok and "probability 0 came out" in why  # the grammar's forbidden text comes out


def test_masking_only_p_keeps_the_distribution_but_proposes_forbidden_tokens():
    h = Harness(mask_p=True, mask_q=False)
    outcomes, forbidden = h.first_two(N_BROKEN, seed=2)
    ok, why = _check(outcomes, h.expected(), N_BROKEN)
    assert ok, why  # exact for any q: no distribution failure to show
    assert forbidden > N_BROKEN // 10  # but the draft proposes what the grammar forbids


# ---- the other runtime and the other drafters -------------------------------------------------


@pytest.mark.parametrize(
    "drafter, draft", [("model", "close"), ("tree", "close"), ("lookup", None), ("suffix", None), ("lookahead", None)]
)
def test_greedy_constrained_speculative_equals_constrained_plain_on_llamacpp(drafter, draft):
    pytest.importorskip("llama_cpp")
    from test_runtime_llamacpp import llamacpp_pair

    pair = llamacpp_pair(draft)
    for kind in (JSON_SCHEMA, REGEX):
        base = dict(max_new_tokens=N_NEW, output_format=kind, output_spec=FORMATS[kind])
        want = engine.run(pair, "hello", GenerationSettings(mode="plain", **base))
        got = engine.run(pair, "hello", GenerationSettings(drafter=drafter, policy="fixed", k=4, **base))
        assert got.token_ids == want.token_ids, (drafter, kind)
        assert got.summary.format_check == want.summary.format_check


@pytest.mark.parametrize("method", ["text", "intersection"])
def test_greedy_constrained_speculative_equals_constrained_plain_with_a_draft_of_another_tokenizer(method):
    from test_cross_vocab import cross_pair

    pair = cross_pair()
    for kind in (JSON_SCHEMA, REGEX):
        base = dict(max_new_tokens=N_NEW, output_format=kind, output_spec=FORMATS[kind])
        want = engine.run(pair, "hello", GenerationSettings(mode="plain", **base))
        got = engine.run(pair, "hello", GenerationSettings(vocab_method=method, policy="fixed", k=4, **base))
        assert got.token_ids == want.token_ids, (method, kind)


def test_the_policy_hears_the_forced_tokens_where_each_round_starts(monkeypatch):
    from specviz.drafters.cost_aware import CostAwareLength

    heard = []
    limit = CostAwareLength.limit

    def spy(self, unread=0, remaining=None, forced=0):
        heard.append(forced)
        return limit(self, unread, remaining, forced)

    monkeypatch.setattr(CostAwareLength, "limit", spy)
    pair = tiny_pair("close")
    s = GenerationSettings(policy="cost-aware", max_new_tokens=N_NEW, output_format=JSON_SCHEMA, output_spec=PERSON)
    trace = engine.run(pair, "hello", s)
    # The first round after the prefill starts where the schema forces the key and its quotes.
    assert heard and heard[0] >= 1
    assert trace.summary.forced >= heard[0]
