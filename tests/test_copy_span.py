"""How the copying drafters (suffix decoding, prompt lookup) size a proposal from the evidence
behind it (`drafters.copy_span`), and that the sized proposals keep the output the target's.

- the rule: a long copy proposes long, a short match proposes nothing on a steep pass-cost
  curve, a match that resumes a broken-off copy proposes at once, and misses teach it;
- greedy: prompt lookup and suffix decoding, sized by the tree cost rule, give plain greedy
  decoding's tokens on a tiny torch model (test_draft_free runs suffix across more settings);
- sampling: on the toy language of tests/monte_carlo.py (4 tokens, fixed target distributions
  with zeros), proposals sized by the rule on a learnt, carried-over evidence (so their sizes
  vary from run to run) and verified by the engine's rule give the first two output tokens
  distributed as the target's: N = 20,000 runs, every outcome expected 5 times or more within
  5 standard errors, rarer ones pooled, impossible ones never (monte_carlo.frequencies_match).
  A sizing that verifies a round again when its first guess is rejected fails the same check.
"""

import pytest
import torch

import specviz.engine.verify as rule
from specviz import engine
from specviz.drafters import copy_span as cs
from specviz.cost_model import CostModel
from specviz.drafters.lookup import LookupDrafter, agreement
from specviz.drafters.suffix import SuffixDrafter
from specviz.drafters.tree_cost import TreeCost
from specviz.settings import GenerationSettings
from monte_carlo import frequencies_match, target_rows, toy
from tiny_models import single_thread, tiny_pair  # noqa: F401 (single_thread: a fixture)

pytestmark = pytest.mark.usefixtures("single_thread")

# llama.cpp's Q4 target on 2 cores of a Xeon with AMX (docs/BENCHMARKS.md): a pass over 16 tokens
# costs 3.6 one-token passes, over 2 tokens 1.56.
STEEP = CostModel(verify={1: 78.0, 2: 122.0, 4: 176.0, 8: 258.0, 16: 281.0, 17: 290.0}, draft=0.0)
ANY = lambda c: True  # noqa: E731


def copy_context(copied: int) -> torch.Tensor:
    """A 40-token source, a separator, then the answer copying its first `copied` tokens."""
    source = torch.arange(100, 140)
    return torch.cat([source, torch.tensor([7]), source[:copied]])


@pytest.mark.parametrize("make", [SuffixDrafter, LookupDrafter], ids=["suffix", "lookup"])
def test_a_long_copy_proposes_long_and_a_short_match_nothing(make):
    cost = TreeCost(STEEP, 16)
    d = make()
    d.begin(copy_context(20))
    long = d.propose(copy_context(20), 16, ANY, cost)
    # Behind a 20-token span the priors say 0.93, then 0.99 from 32 on: a 12-node chain expects 7.7
    # tokens for 3.3 one-token passes (V(13) = 265 ms by interpolation); anything shorter than 8 loses to it.
    assert len(long) >= 12 and long.tokens.tolist() == list(range(120, 120 + len(long)))
    d = make()
    d.begin(copy_context(1))
    assert len(d.propose(copy_context(1), 16, ANY, cost)) == 0  # one token of agreement: 0.19 does not pay 1.56x


def test_chances_fall_slowly_along_a_copy_and_fast_along_a_short_match():
    e = cs.CopyEvidence()
    chain = list(range(-1, 7))
    long, short = e.chances(20, chain, [1.0] * 8), e.chances(1, chain, [1.0] * 8)
    assert long[-1] > 0.3 > short[1]
    # Deeper nodes sit behind a longer span: the conditional chance grows down the chain.
    steps = [b / a for a, b in zip(short, short[1:])]
    assert all(x <= y + 1e-9 for x, y in zip(steps, steps[1:])) and steps[0] < steps[-1]
    # A sibling's share of the occurrences scales its chance.
    assert e.chances(20, [-1, -1], [0.75, 0.25]) == pytest.approx([0.75 * e.rate(20), 0.25 * e.rate(20)])


@pytest.mark.parametrize("make", [SuffixDrafter, LookupDrafter], ids=["suffix", "lookup"])
def test_a_match_that_resumes_a_broken_off_copy_proposes_at_once(make):
    cost = TreeCost(STEEP, 16)
    d = make()
    ctx = copy_context(20)
    d.begin(ctx)
    p = d.propose(ctx, 16, ANY, cost)
    d.accepted(3) if p.parents is None else d.accepted_path([0, 1, 2])  # 120-122 copied, then the answer changed 123
    # The answer wrote 999 for 123, then 124: one token agreeing with the source, just after the break.
    resumed = torch.cat([ctx, torch.tensor([120, 121, 122, 999, 124])])
    back = d.propose(resumed, 16, ANY, cost).tokens.tolist()
    assert len(back) >= 2 and back == list(range(125, 125 + len(back)))
    # The same one-token match with no copy broken off nearby proposes nothing.
    fresh = make()
    fresh.begin(resumed)
    assert len(fresh.propose(resumed, 16, ANY, cost)) == 0


@pytest.mark.parametrize("make", [SuffixDrafter, LookupDrafter], ids=["suffix", "lookup"])
def test_right_after_a_long_copy_breaks_off_the_round_guesses_a_replaced_token(make):
    # On the priors the guess's first node has 0.5, then 0.75 a node: on a curve where a second token
    # adds a quarter of a pass (1.5 tokens for 125 ms against 1 for 100), it pays.
    cost = TreeCost(CostModel(verify={1: 100.0, 2: 125.0, 4: 150.0, 8: 200.0, 17: 300.0}, draft=0.0), 16)
    d = make()
    ctx = copy_context(20)
    d.begin(ctx)
    p = d.propose(ctx, 16, ANY, cost)
    d.accepted(3) if p.parents is None else d.accepted_path([0, 1, 2])
    # The answer wrote 999 where the copy had 123: read on at 124, as if 999 replaced 123.
    replaced = torch.cat([ctx, torch.tensor([120, 121, 122, 999])])
    guess = d.propose(replaced, 16, ANY, cost).tokens.tolist()
    assert len(guess) >= 2 and guess == list(range(124, 124 + len(guess)))


def test_a_skip_guess_that_keeps_missing_stops_for_the_run():
    e = cs.CopyEvidence()
    start = e.skip_rate()
    for _ in range(8):
        e.proposed(cs.RESUMED_BONUS, [-1, 0], [(0, 5), (0, 6)], 50, skip=True)
        e.heard([])
    low = e.skip_rate()
    assert low < start / 2
    for _ in range(300):  # waiting does not bring it back, unlike a span's rate
        e.heard([])
    assert e.skip_rate() == pytest.approx(low)
    # A failed guess leaves the break where it was: no second skip one token further on.
    e.proposed(20, [-1, 0, 1], [(0, 5), (0, 6), (0, 7)], 50)
    e.heard([0])
    assert e.skip_source(52) == (0, 7)
    e.proposed(cs.RESUMED_BONUS, [-1], [(0, 7)], 52, skip=True)
    e.heard([])
    assert e.skip_source(53) is None and e.resumes((0, 8), 1, 53)


def test_misses_teach_the_rate_of_their_own_span_and_waiting_restores_it():
    e = cs.CopyEvidence()
    for _ in range(30):
        e.proposed(20, [-1, 0, 1], [(0, 5), (0, 6), (0, 7)], 50)
        e.heard([])  # the first node, behind a 20-token span, rejected; the others never checked
    assert e.rate(20) < 0.2 and e.rate(21) < 0.2  # the 16-31 bin
    assert e.rate(32) == pytest.approx(cs.PRIOR_ACCEPT[-1])  # unchecked spans keep their prior
    for _ in range(300):
        e.heard([])
    assert e.rate(20) > 0.8


def test_agreement_counts_back_from_the_occurrence():
    ctx = torch.tensor([9, 1, 2, 3, 4, 8, 2, 3, 4])
    assert agreement(ctx, 5, 32) == 3  # "2 3 4" before index 5 and at the end; "1" against "8" stops it
    assert agreement(ctx, 5, 2) == 2


# ---- greedy ---------------------------------------------------------------------------------

PROMPT = "def add(a, b):\n    return a + b\n\ndef add(a, b):\n    return a + b\n\ndef add("


@pytest.mark.parametrize("drafter", ["lookup", "suffix"])
def test_sized_proposals_keep_greedy_output_plain(drafter):
    pair = tiny_pair(None)
    plain = engine.run(pair, PROMPT, GenerationSettings(mode="plain", max_new_tokens=32, raw=True)).token_ids
    trace = engine.run(
        pair, PROMPT, GenerationSettings(drafter=drafter, policy="cost-aware", max_new_tokens=32, raw=True)
    )
    assert trace.token_ids == plain


# ---- sampling -------------------------------------------------------------------------------

N_RUNS = 20_000
# Contexts over the toy language's 4 tokens: short repeats (trees with siblings), and a copy of a
# 8-token span, so a round proposes behind a long span and, when the copy breaks off, the next
# round may guess a replaced token or resume it.
CONTEXTS = {
    "repeats": (0, 1, 2, 0, 1, 3, 2, 0, 1, 2, 3, 0, 1),
    "copy": (0, 1, 2, 3, 2, 1, 0, 3, 3, 1, 2, 0, 1, 2, 3, 2, 1, 0, 3),
}
# Mild enough that a proposal's size follows the learnt chances (neither always all nor none).
MILD = TreeCost(CostModel(verify={1: 100.0, 2: 125.0, 4: 150.0, 8: 200.0, 17: 300.0}, draft=0.0), 16)


def first_two(drafter, context, seed: int, *, retry: bool = False, fresh: bool = False):
    """Counts of the first two output tokens over N_RUNS runs, the proposal sizes seen and
    whether skip guesses were among them; the drafter's evidence is carried from run to run
    (`fresh`: each run starts from the priors). `retry`: a broken sizing that verifies a round a
    second time when its first guess was rejected."""
    g = torch.Generator().manual_seed(seed)
    counts, sizes, skips = torch.zeros(16, dtype=torch.float64), set(), set()
    drafter.begin(torch.tensor(context))
    for _ in range(N_RUNS):
        ctx, out = list(context), []
        if fresh:
            drafter.begin(torch.tensor(ctx))
        while len(out) < 2:
            prop = drafter.propose(torch.tensor(ctx), 3, ANY, MILD)
            tokens = prop.tokens.tolist()
            sizes.add(len(tokens))
            if tokens:
                skips.add(drafter.evidence._last[3])
            parents = prop.parents if prop.parents is not None else list(range(-1, len(tokens) - 1))
            p = target_rows(tuple(ctx), tokens, parents)
            v = rule.verify_tree(prop.tokens, parents, p, generator=g)
            if retry and tokens and not v.path:
                v = rule.verify_tree(prop.tokens, parents, p, generator=g)
            drafter.accepted_path(v.path)
            out += v.new_tokens
            ctx += v.new_tokens
        counts[out[0] * 4 + out[1]] += 1
    return counts, sizes, skips


def expected_first_two(context) -> torch.Tensor:
    first = toy(0, context)
    return torch.stack([first[a] * toy(0, context + (a,)) for a in range(4)]).reshape(-1)


@pytest.mark.parametrize("variant", ["repeats", "resume", "skip"])
@pytest.mark.parametrize(
    "make", [lambda: SuffixDrafter(max_nodes=6, min_score=0.0), LookupDrafter], ids=["suffix", "lookup"]
)
def test_sized_sampled_output_is_distributed_as_the_target(make, variant, monkeypatch):
    """repeats: the evidence carried over 20,000 runs sizes the proposals; resume and skip: on
    the copy, each run from the priors, a match that resumes the broken-off copy, or (with no
    resuming window, and the guess made likely) the guess of a replaced token, is proposed."""
    resumed = []
    real = cs.CopyEvidence.resumes
    monkeypatch.setattr(cs.CopyEvidence, "resumes", lambda *a: resumed.append(real(*a)) or resumed[-1])
    if variant == "skip":
        monkeypatch.setattr(cs, "RESUME_WINDOW", -1)
        monkeypatch.setattr(cs, "SKIP_PRIOR", 0.95)
    context = CONTEXTS["repeats" if variant == "repeats" else "copy"]
    counts, sizes, skips = first_two(make(), context, seed=11, fresh=variant != "repeats")
    if variant == "repeats":
        assert len(sizes - {0}) >= 2, sizes  # the rule did size: proposals of several lengths
    else:
        assert (any(resumed), True in skips) == (variant == "resume", variant == "skip")
    ok, message = frequencies_match(counts, expected_first_two(context), N_RUNS)
    assert ok, message


def test_a_sizing_that_verifies_again_after_a_miss_is_caught():
    context = CONTEXTS["repeats"]
    counts, _, _ = first_two(SuffixDrafter(max_nodes=6, min_score=0.0), context, seed=11, retry=True)
    ok, message = frequencies_match(counts, expected_first_two(context), N_RUNS)
    assert not ok, message
