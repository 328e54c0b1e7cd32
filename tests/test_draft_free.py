"""The draft-free tree drafters, suffix and lookahead: their trees, exactness, and the cost rule.

- greedy: speculative decoding equals plain greedy decoding token for token on tiny torch
  models across settings (the llama.cpp runtime's twin is in test_runtime_llamacpp);
- sampling: on the toy language of tests/monte_carlo.py (4 tokens, fixed target distributions
  with zeros), the drafters' own proposals, ride nodes and all, verified by the engine's rule
  give the first two output tokens distributed as the target's: N = 20,000 runs, every
  outcome expected 5 times or more within 5 standard errors, rarer ones pooled, impossible
  ones never (monte_carlo.frequencies_match). A rule that does not remove a rejected
  candidate fails the same check;
- the protocol: ride nodes ride in the pass and their logits come back, the cache keeps none
  of them; the tree cost rule proposes nothing where nothing pays and starts again.
"""

import pytest
import torch

import specviz.engine.verify as rule
from specviz import engine
from specviz.drafters.base import Proposal, trie
from specviz.drafters.lookahead import LookaheadDrafter
from specviz.drafters.suffix import SuffixDrafter, longest_match
from specviz.drafters.tree_cost import TreeCost
from specviz.cost_model import CostModel
from specviz.engine.tree_round import tree_round
from specviz.lm.runtime import open_lm
from specviz.lm.sampling import Sampler
from specviz.settings import GenerationSettings, SettingsError, from_request
from monte_carlo import frequencies_match, target_rows, toy
from tiny_models import single_thread, tiny_pair  # noqa: F401 (single_thread: a fixture)

import numpy as np

pytestmark = pytest.mark.usefixtures("single_thread")

# A prompt that repeats itself, so both drafters find something to propose (sent raw, so
# the context ends with it and not with the chat template's assistant header).
PROMPT = "def add(a, b):\n    return a + b\n\ndef add(a, b):\n    return a + b\n\ndef add("
N_NEW = 32


@pytest.fixture(scope="module")
def pair():
    return tiny_pair(None)


@pytest.fixture(scope="module")
def plain(pair):
    return engine.run(pair, PROMPT, GenerationSettings(mode="plain", max_new_tokens=N_NEW, raw=True)).token_ids


@pytest.mark.parametrize("policy", ["fixed", "cost-aware"])
@pytest.mark.parametrize("k", [1, 3, 8])
@pytest.mark.parametrize(
    "extra",
    [
        {"drafter": "suffix"},
        {"drafter": "suffix", "suffix_max_nodes": 3, "suffix_min_score": 0.0},
        {"drafter": "lookahead"},
        {"drafter": "lookahead", "lookahead_window": 2, "lookahead_ngram": 6, "lookahead_candidates": 1},
        {"drafter": "lookahead", "lookahead_window": 7, "lookahead_ngram": 3, "lookahead_candidates": 8},
    ],
)
def test_greedy_equals_plain(pair, plain, extra, k, policy):
    trace = engine.run(pair, PROMPT, GenerationSettings(max_new_tokens=N_NEW, k=k, policy=policy, raw=True, **extra))
    assert trace.token_ids == plain
    if policy == "fixed":
        assert trace.summary.drafted > 0  # the repeated prompt gives both something to propose


def test_a_suffix_round_says_what_it_matched_and_each_nodes_count(pair):
    trace = engine.run(
        pair, PROMPT, GenerationSettings(drafter="suffix", policy="fixed", k=8, max_new_tokens=N_NEW, raw=True)
    )
    proposed = [e for e in trace.events if e.type == "round" and e.source is not None and e.source.counts]
    assert proposed
    for event in proposed:
        src = event.source
        assert src.method == "suffix" and src.occurrences >= 1 and src.matched
        # One count per node: the tree's, or the chain's drafted tokens (a one-wide tree runs as a chain).
        nodes = event.tree or event.drafted
        assert len(src.counts) == len(nodes)
        assert all(1 <= c <= src.occurrences for c in src.counts)
        parents = [n.parent for n in event.tree] if event.tree else list(range(-1, len(nodes) - 1))
        for parent, count in zip(parents, src.counts):  # a child never continues more occurrences than its parent
            if parent >= 0:
                assert count <= src.counts[parent]


def test_a_lookahead_round_shows_its_window_and_the_ngrams_it_made(pair):
    trace = engine.run(
        pair,
        PROMPT,
        GenerationSettings(
            drafter="lookahead", policy="fixed", k=4, max_new_tokens=6, lookahead_window=3, lookahead_ngram=4
        ),
    )
    src = [e.source for e in trace.events if e.type == "round" and e.source is not None][0]
    assert src.window_on
    assert [len(level) for level in src.window] == [3, 3, 3]  # N - 1 levels of W columns
    assert len(src.ngrams) == 3 and all(len(g) == 4 for g in src.ngrams)


def test_a_trace_with_sources_round_trips(pair):
    from specviz.events import Trace

    trace = engine.run(pair, PROMPT, GenerationSettings(drafter="lookahead", policy="fixed", k=4, max_new_tokens=6))
    again = Trace.from_json(trace.to_json())
    assert [e.source for e in again.events] == [e.source for e in trace.events]


# ---- the suffix index ---------------------------------------------------------------------


def test_the_longest_match_is_found_in_the_context_and_in_earlier_outputs():
    ctx = np.array([5, 1, 2, 3, 9, 1, 2, 3])
    m = longest_match([ctx], ctx, 32)
    assert m.length == 3 and m.ends == [(0, 3)]  # "1 2 3" ending at index 3; its own end does not count
    history = np.array([7, 9, 1, 2, 3, 4])
    m = longest_match([history, ctx], ctx, 32)
    assert m.length == 4 and m.ends == [(0, 4)]  # "9 1 2 3" only in the earlier output


def test_earlier_outputs_join_the_corpus_only_where_given(pair):
    # The session's earlier output holds the exact continuation; without it there is no match.
    ids = torch.tensor([11, 12, 13, 14])
    alone = SuffixDrafter().propose(ids, 4, lambda c: True)
    with_history = SuffixDrafter(history=[[12, 13, 14, 20, 21, 22]]).propose(ids, 4, lambda c: True)
    assert len(alone) == 0
    assert with_history.tokens.tolist() == [20, 21, 22]


def test_suffix_nodes_are_ordered_by_how_often_they_followed():
    # After "1 2": 3 twice, 4 once; after "1 2 3": 5 both times.
    ctx = torch.tensor([1, 2, 3, 5, 1, 2, 4, 0, 1, 2, 3, 5, 8, 1, 2])
    p = SuffixDrafter(max_nodes=8, min_score=0.0).propose(ctx, 3, lambda c: True)
    assert p.tokens.tolist()[:2] == [3, 5] and p.parents[:2] == [-1, 0]
    assert p.source.counts[:2] == [2, 2] and p.source.occurrences == 3
    assert 4 in p.tokens.tolist()  # the rarer sibling, after the likelier branch
    high = SuffixDrafter(max_nodes=8, min_score=0.5).propose(ctx, 3, lambda c: True)
    assert 4 not in high.tokens.tolist()  # 1/3 of the matches: under a 0.5 minimum score


# ---- lookahead's window -------------------------------------------------------------------


def test_the_window_is_a_tree_of_one_branch_per_column():
    d = LookaheadDrafter(window=3, ngram=4, candidates=2)
    d.begin(torch.tensor([1, 2, 3, 4]))
    p = d.propose(torch.tensor([1, 2, 3, 4]), 4, lambda c: True)
    # level 0: columns 1, 2 under the root as a chain; levels 1, 2: column i under the level below.
    assert p.ride_parents == [-1, 0, -1, 0, 1, 2, 3, 4]
    assert p.ride.numel() == 3 * 3 - 1


def test_ride_nodes_ride_in_the_pass_and_leave_nothing_in_the_cache(pair):
    target = open_lm(pair.target, pair.device)
    ids = torch.tensor(pair.tokenizer("hello there, general")["input_ids"])
    target.feed(ids[:-1])
    sampler = Sampler(GenerationSettings(), pair.vocab_size)
    cand, ride = torch.tensor([7, 8]), torch.tensor([30, 31, 32])
    proposal = Proposal(tokens=cand, q=None, parents=[-1, 0], ride=ride, ride_parents=[-1, 0, -1])
    r = tree_round(target, sampler, proposal, int(ids[-1]), None, True)
    # Each ride row is what a chain through its ancestors gives.
    fresh = open_lm(pair.target, pair.device)
    chain = fresh.feed(torch.cat([ids, ride[:2]]), keep=2)
    assert torch.allclose(r.ride_logits[:2], sampler.logits(chain), atol=1e-4)
    fresh.reset()
    assert torch.allclose(
        r.ride_logits[2], sampler.logits(fresh.feed(torch.cat([ids, ride[2:]]), keep=1))[0], atol=1e-4
    )
    # The cache holds the context and the accepted path only, as a fresh feed would.
    kept = ids.numel() + len(r.outcome.path)
    assert target.length == kept
    nxt = target.feed(torch.tensor([5]))
    fresh.reset()
    accepted = [r.outcome.tokens[i] for i in r.outcome.path]
    want = fresh.feed(torch.cat([ids, torch.tensor(accepted, dtype=torch.long), torch.tensor([5])]), keep=1)
    assert torch.allclose(nxt, want, atol=1e-4)


def test_trie_merges_shared_prefixes_first_met_first():
    tokens, parents, origins, depth, counts = trie([((1, 2, 3), "window"), ((1, 2, 4), "context"), ((5,), "window")])
    assert tokens == [1, 2, 3, 4, 5]
    assert parents == [-1, 0, 1, 1, -1]
    assert origins == ["window", "window", "window", "context", "window"]
    assert depth == [1, 2, 3, 3, 1]
    assert counts == [2, 2, 1, 1, 1]  # sequences through each node


# ---- the tree cost rule -------------------------------------------------------------------


# A pass over n tokens: flat up to 8 (bf16 on AMX, a GPU), or growing with n (llama.cpp Q4 on a small CPU).
FLAT = CostModel(verify={1: 100.0, 8: 110.0, 17: 160.0}, draft=0.0)
STEEP = CostModel(verify={1: 70.0, 2: 130.0, 4: 190.0, 8: 370.0, 17: 545.0}, draft=0.0)


def test_the_tree_rule_keeps_the_nodes_that_pay_for_their_share_of_the_pass():
    sure = [0.9, 0.8, 0.7, 0.6]
    assert TreeCost(FLAT, 16).tree_nodes(sure) == 4
    # Steep: V(4) = 190, V(5) = 235 (interpolated): 3.4 tokens / 190 ms beats 4.0 / 235, and 1 / 70.
    assert TreeCost(STEEP, 16).tree_nodes(sure) == 3
    weak = [0.2, 0.1, 0.05]
    assert TreeCost(FLAT, 16).tree_nodes(weak) == 3  # nearly free: every bit of expectation pays
    assert TreeCost(STEEP, 16).tree_nodes(weak) == 0  # 1.2 tokens / 130 ms loses to 1 / 70
    # Ride nodes are paid for whatever the candidates: beside 15 of them (V(16) = 526 ms) each
    # further node adds about 19 ms, and 0.2 tokens for it pays.
    assert TreeCost(STEEP, 16).tree_nodes(weak, ride=15) == 3


def test_pays_compares_a_measured_yield_with_plain_decoding():
    assert TreeCost(FLAT, 16).pays(1.5, 11)  # 1.5 tokens for 112 ms against 1 for 100
    assert not TreeCost(STEEP, 16).pays(1.5, 11)  # 1.5 tokens for ~400 ms


class Budget:
    """A policy under which every node pays, or only rounds that gain `least` tokens do."""

    def __init__(self, paying: bool, least: float = 3):
        self.paying, self.least = paying, least

    def tree_nodes(self, chances, ride=0):
        return len(chances) if self.paying else 0

    def pays(self, tokens, nodes):
        return self.paying or tokens >= self.least


def test_lookahead_rests_its_window_when_it_does_not_pay_and_tries_again():
    from specviz.drafters import lookahead as la

    d = LookaheadDrafter(window=3, ngram=3, candidates=2)
    ctx = torch.tensor([1, 2, 3, 4, 5, 6])
    d.begin(ctx)
    budget = Budget(False)
    riding = []
    for _ in range(la.TRIAL_ROUNDS + la.PROBE_WAIT + 2):
        p = d.propose(ctx, 4, lambda c: True, budget)
        riding.append(p.ride is not None)
        if p.ride is not None:
            d.observe(torch.zeros(p.ride.numel(), 50))
        d.accepted_path([])
    assert all(riding[: la.TRIAL_ROUNDS])  # the first trial
    assert not any(riding[la.TRIAL_ROUNDS : la.TRIAL_ROUNDS + la.PROBE_WAIT])  # resting
    assert riding[la.TRIAL_ROUNDS + la.PROBE_WAIT]  # and trying again


def test_suffix_stops_after_misses_and_starts_again_while_it_waits():
    d = SuffixDrafter(max_nodes=4, min_score=0.0)
    ctx = torch.tensor([1, 2, 3, 9, 1, 2])
    d.begin(ctx)
    cost = TreeCost(STEEP, 16)
    # One occurrence of a 2-token match, on the steep curve: a = 0.45 does not pay (0.45 x 70 ms
    # < the 60 ms a second token adds to the pass); where a second token adds 10 %, it does.
    assert len(d.propose(ctx, 4, lambda c: True, cost)) == 0
    d.accepted_path([])
    mild = TreeCost(CostModel(verify={1: 100.0, 2: 110.0, 8: 170.0, 17: 260.0}, draft=0.0), 16)
    assert len(d.propose(ctx, 4, lambda c: True, mild)) > 0
    d.accepted_path([])  # it missed
    for _ in range(60):  # and missed again
        d.propose(ctx, 4, lambda c: True, mild)
        d.accepted_path([])
    assert d.evidence.rate(2) < 0.1  # from the prior 0.45
    assert len(d.propose(ctx, 4, lambda c: True, mild)) == 0  # a second token's 10 % no longer pays
    d.accepted_path([])
    for _ in range(200):  # waiting: the estimate drifts back to its prior
        d.accepted_path([])
    assert d.evidence.rate(2) > 0.4
    assert len(d.propose(ctx, 4, lambda c: True, mild)) > 0


# ---- settings -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad,words",
    [
        ({"lookahead_window": 0}, "lookahead window must be a whole number from 1 to 16"),
        ({"lookahead_ngram": 2}, "lookahead n-gram size must be a whole number from 3 to 8"),
        ({"lookahead_candidates": 17}, "lookahead candidates must be a whole number from 1 to 16"),
        ({"suffix_max_nodes": 65}, "suffix max nodes must be a whole number from 1 to 64"),
        ({"suffix_min_score": 1.5}, "suffix min score must be between 0 and 1"),
    ],
)
def test_bad_settings_name_the_range(bad, words):
    with pytest.raises(SettingsError, match=words):
        from_request({"drafter": "lookahead", **bad})


def test_neither_needs_a_draft_model():
    assert not GenerationSettings(drafter="suffix").needs_draft
    assert not GenerationSettings(drafter="lookahead").needs_draft


# ---- statistical exactness ----------------------------------------------------------------

N_RUNS = 20_000
# Contexts over the toy language's 4 tokens that repeat, so both drafters propose trees with
# siblings (after "0 1": 2 twice and 3 once).
CONTEXT = (0, 1, 2, 0, 1, 3, 2, 0, 1, 2, 3, 0, 1)


def ride_rows(context: tuple[int, ...], tokens: list[int], parents: list[int]) -> torch.Tensor:
    """The toy target's log-probabilities after each ride node (rows 1.. of target_rows)."""
    return target_rows(context, tokens, parents)[1:].log()


def first_two(drafter, seed: int) -> torch.Tensor:
    """Counts of the first two output tokens over N_RUNS runs of drafter + the point-mass rule."""
    g = torch.Generator().manual_seed(seed)
    counts = torch.zeros(4 * 4, dtype=torch.float64)
    for _ in range(N_RUNS):
        ctx = list(CONTEXT)
        drafter.begin(torch.tensor(ctx))
        out: list[int] = []
        while len(out) < 2:
            prop = drafter.propose(torch.tensor(ctx), 3, lambda c: True, None)
            tokens = prop.tokens.tolist()
            parents = prop.parents if prop.parents is not None else list(range(-1, len(tokens) - 1))
            if prop.ride is not None:
                drafter.observe(ride_rows(tuple(ctx), prop.ride.tolist(), prop.ride_parents))
            p = target_rows(tuple(ctx), tokens, parents)
            v = rule.verify_tree(prop.tokens, parents, p, generator=g)
            drafter.accepted_path(v.path)
            out += v.new_tokens
            ctx += v.new_tokens
        counts[out[0] * 4 + out[1]] += 1
    return counts


def expected_first_two() -> torch.Tensor:
    first = toy(0, CONTEXT)
    return torch.stack([first[a] * toy(0, CONTEXT + (a,)) for a in range(4)]).reshape(-1)


@pytest.mark.parametrize(
    "make",
    [lambda: SuffixDrafter(max_nodes=6, min_score=0.0), lambda: LookaheadDrafter(window=3, ngram=3, candidates=3)],
    ids=["suffix", "lookahead"],
)
def test_sampled_output_is_distributed_as_the_target(make):
    d = make()
    # The check is meaningful only if trees with siblings were proposed.
    d.begin(torch.tensor(CONTEXT))
    first = d.propose(torch.tensor(CONTEXT), 3, lambda c: True, None)
    assert first.parents is not None and len(first) >= 2
    ok, message = frequencies_match(first_two(d, seed=5), expected_first_two(), N_RUNS)
    assert ok, message


def test_not_removing_a_rejected_candidate_is_caught(monkeypatch):
    monkeypatch.setattr(rule, "remove_token", lambda dist, token: dist)
    ok, message = frequencies_match(
        first_two(SuffixDrafter(max_nodes=6, min_score=0.0), seed=5), expected_first_two(), N_RUNS
    )
    assert not ok, message
