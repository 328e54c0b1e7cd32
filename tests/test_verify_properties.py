"""Property-based tests of the acceptance rule (`specviz.engine.verify.verify`).

Whatever valid p, q and drafts hypothesis finds, the result must be well formed: no NaN, an
emitted token inside the vocabulary with p > 0, 0..k accepted drafts, decisions shaped
accepted* rejected? unchecked*, and greedy mode accepting exactly the argmax-matching prefix.
Small vocabularies and draft lengths keep each example cheap.
"""

import math

import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from specviz.lm.sampling import Sampler
from specviz.engine.verify import residual_distribution, verify
from specviz.settings import GenerationSettings

EXAMPLES = settings(max_examples=100, deadline=None)
DTYPES = st.sampled_from([torch.float32, torch.float64])


@st.composite
def distributions(draw, rows: int, vocab: int, dtype):
    """`rows` probability vectors over `vocab` tokens, with zeros likely (as top-k/p makes)."""
    weight = st.one_of(st.just(0), st.integers(1, 1000), st.just(10**12))  # zeros, ties, near-point masses
    out = []
    for _ in range(rows):
        w = draw(st.lists(weight, min_size=vocab, max_size=vocab).filter(any))
        t = torch.tensor(w, dtype=torch.float64)
        out.append((t / t.sum()).to(dtype))
    return torch.stack(out) if out else torch.empty(0, vocab, dtype=dtype)


@st.composite
def rounds(draw, point_mass_drafts: bool = False):
    """A round: drafts x (k,), target p (k+1, V), draft q (k, V) or None, and a seed.

    Each x_i lies in the support of q_i, since the drafter sampled it from q_i; p may give it
    probability 0. Point-mass drafts (q None) may propose any token.
    """
    vocab, k, dtype = draw(st.integers(2, 8)), draw(st.integers(0, 5)), draw(DTYPES)
    p = draw(distributions(k + 1, vocab, dtype))
    if point_mass_drafts:
        q = None
        drafts = [draw(st.integers(0, vocab - 1)) for _ in range(k)]
    else:
        q = draw(st.one_of(distributions(k, vocab, dtype), st.just(p[:k].clone())))  # q == p is a case
        drafts = [draw(st.sampled_from(torch.nonzero(row > 0).flatten().tolist())) for row in q]
    return torch.tensor(drafts, dtype=torch.long), p, q, draw(st.integers(0, 2**32 - 1))


def check_well_formed(x, p, q, v, greedy=False):
    k, vocab = x.numel(), p.shape[-1]
    n = v.n_accepted
    assert 0 <= n <= k
    assert v.tokens == x.tolist()
    assert v.decisions == ["accepted"] * n + ["rejected"] * (n < k) + ["unchecked"] * (k - n - 1 if n < k else 0)
    assert v.new_tokens == x.tolist()[:n] + [v.emitted]
    assert v.emitted_kind == ("bonus" if n == k else "resampled")
    assert 0 <= v.emitted < vocab
    assert len(v.p) == len(v.q) == len(v.u) == k
    for value in [*v.p, *v.q, v.emitted_p, *(u for u in v.u if u is not None)]:
        assert not math.isnan(value)
    if greedy:
        return
    # Nothing p rules out is ever output: not an accepted draft, not the emitted token.
    for i in range(n):
        assert p[i, x[i]] > 0
    assert p[n, v.emitted] > 0
    assert v.emitted_p == float(p[n, v.emitted])
    if n < k:
        q_n = q[n] if q is not None else torch.nn.functional.one_hot(x[n], vocab).to(p.dtype)
        assert residual_distribution(p[n], q_n)[v.emitted] > 0
    # Each checked position carries its u in [0, 1); positions after the rejection carry none.
    assert all((0 <= u < 1) if i <= n else u is None for i, u in enumerate(v.u))
    assert v.p == [float(p[i, x[i]]) for i in range(k)]
    assert v.q == ([float(q[i, x[i]]) for i in range(k)] if q is not None else [1.0] * k)


@EXAMPLES
@given(rounds())
def test_sampled_round_is_well_formed(case):
    x, p, q, seed = case
    v = verify(x, p, q, generator=torch.Generator().manual_seed(seed))
    check_well_formed(x, p, q, v)


@EXAMPLES
@given(rounds(point_mass_drafts=True))
def test_point_mass_drafts_are_well_formed(case):
    x, p, _, seed = case
    v = verify(x, p, None, generator=torch.Generator().manual_seed(seed))
    check_well_formed(x, p, None, v)
    # A point-mass draft is kept with probability p(x): one with p(x) = 1 is never rejected.
    if v.n_accepted < x.numel():
        assert p[v.n_accepted, x[v.n_accepted]] < 1


@EXAMPLES
@given(rounds(), st.data())
def test_draft_equal_to_target_accepts_everything(case, data):
    _, p, _, seed = case
    k = p.shape[0] - 1
    x = torch.tensor(
        [data.draw(st.sampled_from(torch.nonzero(row > 0).flatten().tolist())) for row in p[:k]], dtype=torch.long
    )
    v = verify(x, p, p[:k].clone(), generator=torch.Generator().manual_seed(seed))
    assert v.n_accepted == x.numel()
    assert v.emitted_kind == "bonus"


@st.composite
def top_p_rounds(draw):
    """Logits for p and q processed by the engine's own sampling (temperature, top-k, top-p)."""
    vocab, k = draw(st.integers(2, 8)), draw(st.integers(0, 4))
    cfg = GenerationSettings(
        temperature=draw(st.floats(0.1, 2)), top_k=draw(st.integers(0, vocab)), top_p=draw(st.floats(0.05, 1))
    )
    logit = st.integers(-40, 40).map(lambda i: i / 2)  # half-steps: ties and wide gaps both occur
    raw_p = torch.tensor(
        draw(st.lists(st.lists(logit, min_size=vocab, max_size=vocab), min_size=k + 1, max_size=k + 1))
    )
    raw_q = torch.tensor(draw(st.lists(st.lists(logit, min_size=vocab, max_size=vocab), min_size=k, max_size=k)))
    p = Sampler(cfg, vocab).distribution(raw_p)
    q = Sampler(cfg, vocab).distribution(raw_q.reshape(k, vocab)) if k else torch.empty(0, vocab)
    drafts = [draw(st.sampled_from(torch.nonzero(row > 0).flatten().tolist())) for row in q]
    return torch.tensor(drafts, dtype=torch.long), p, q, draw(st.integers(0, 2**32 - 1))


@EXAMPLES
@given(top_p_rounds())
def test_top_p_processed_round_never_leaves_the_support(case):
    x, p, q, seed = case
    v = verify(x, p, q, generator=torch.Generator().manual_seed(seed))
    check_well_formed(x, p, q, v)  # includes: every output token has processed p > 0


@st.composite
def greedy_rounds(draw):
    """Logits with a unique argmax per row, and drafts that follow it for a while, then may not."""
    vocab, k = draw(st.integers(2, 8)), draw(st.integers(0, 5))
    rows = draw(
        st.lists(
            st.lists(st.integers(-60, 60).map(lambda i: i / 2), min_size=vocab, max_size=vocab),
            min_size=k + 1,
            max_size=k + 1,
        )
    )
    assume(all(row.count(max(row)) == 1 for row in rows))
    logits = torch.tensor(rows, dtype=draw(DTYPES))
    best = logits.argmax(-1).tolist()
    drafts = [best[i] if draw(st.booleans()) else draw(st.integers(0, vocab - 1)) for i in range(k)]
    return torch.tensor(drafts, dtype=torch.long), logits, best


@EXAMPLES
@given(greedy_rounds())
def test_greedy_accepts_exactly_the_argmax_prefix(case):
    x, logits, best = case
    v = verify(x, logits, None, greedy=True)
    check_well_formed(x, logits, None, v, greedy=True)
    n = 0
    while n < x.numel() and x[n] == best[n]:
        n += 1
    assert v.n_accepted == n
    assert v.emitted == best[n]
    assert all(u is None for u in v.u)
