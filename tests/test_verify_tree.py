"""The acceptance rule (`engine.verify.verify_tree`) on trees: exact cases, a chain stated as a tree deciding as the chain
rule, and statistical losslessness on trees built the way they are drafted and on one-wide
trees sampled from the draft's q.

Statistical tests, on the toy language of tests/monte_carlo.py: N independent runs (fixed
seed, so each test is deterministic) each produce the first two output tokens, taking a
second round when the first emitted only one, and the frequencies of the first two tokens
must match the target's (p(a) p(b | a)) within 5 standard errors (`frequencies_match`). The
same check on a deliberately wrong rule must fail.
"""

import functools

import pytest
import torch

import specviz.engine.verify as rule
from specviz.drafters.tree import grow_tree
from specviz.engine.verify import verify, verify_tree
from specviz.lm.tree import chain_parents
from specviz.lm.sampling import draw
from specviz.lm.tree import depths
from monte_carlo import N_RUNS, V, frequencies_match, target_rows, toy


@functools.lru_cache(maxsize=None)
def top_tree(context: tuple[int, ...]):
    """The tree drafter's tree on the toy draft (it is deterministic): the 6 best nodes by
    path probability, top-2 children per node, depth <= 3, grown by `grow_tree`."""
    grown = grow_tree(
        toy(1, context), lambda batch: [toy(1, context + c.path) for c in batch], nodes=6, width=2, max_depth=3
    )
    tokens, parents = grown.tokens, grown.parents
    return torch.tensor(tokens), parents, target_rows(context, tokens, parents)


def one_round(context: tuple[int, ...], g: torch.Generator) -> list[int]:
    tokens, parents, p = top_tree(context)
    return verify_tree(tokens, parents, p, generator=g).new_tokens


def sampled_chain_round(context: tuple[int, ...], g: torch.Generator, k: int = 2) -> list[int]:
    """A chain of k tokens drawn from the toy draft's q, verified as a one-wide tree with its q rows."""
    tokens: list[int] = []
    for _ in range(k):
        tokens.append(int(torch.multinomial(toy(1, context + tuple(tokens)), 1, generator=g)))
    q = torch.stack([toy(1, context + tuple(tokens[:i])) for i in range(k)])
    parents = chain_parents(k)
    return verify_tree(torch.tensor(tokens), parents, target_rows(context, tokens, parents), q, generator=g).new_tokens


def first_two(n: int, seed: int, round_=one_round):
    g = torch.Generator().manual_seed(seed)
    first = torch.zeros(V, dtype=torch.long)
    pairs = torch.zeros(V * V, dtype=torch.long)
    for _ in range(n):
        out = round_((), g)
        if len(out) < 2:
            out += round_((out[0],), g)
        first[out[0]] += 1
        pairs[out[0] * V + out[1]] += 1
    return first, pairs


def target_first_two():
    p1 = toy(0, ())
    joint = torch.stack([p1[a] * toy(0, (a,)) for a in range(V)]).reshape(-1)
    return p1, joint


def check_lossless(n: int, seed: int, round_=one_round) -> list[tuple[bool, str]]:
    first, pairs = first_two(n, seed, round_)
    p1, joint = target_first_two()
    return [frequencies_match(first, p1, n), frequencies_match(pairs, joint, n)]


# ---- exact cases -----------------------------------------------------------------------------


def test_greedy_follows_the_argmax_down_the_tree():
    # root -> 0 (tok 1), 1 (tok 2); 0 -> 2 (tok 0); 1 -> 3 (tok 3), 4 (tok 1)
    tokens, parents = torch.tensor([1, 2, 0, 3, 1]), [-1, -1, 0, 1, 1]
    logits = torch.zeros(6, 4)
    logits[0, 2] = 5  # after the root: 2, so node 1
    logits[2, 1] = 5  # after node 1: 1, so node 4 (the second sibling)
    logits[5, 3] = 5  # after node 4 (a leaf): the bonus 3
    v = verify_tree(tokens, parents, logits, greedy=True)
    assert v.path == [1, 4] and v.new_tokens == [2, 1, 3] and v.emitted_kind == "bonus"
    assert v.decisions == ["rejected", "accepted", "unchecked", "rejected", "accepted"]
    assert v.p == [0.0, 1.0, 1.0, 0.0, 1.0] and v.u == [None] * 5  # every node's, checked or not (row 1 ties: 0)
    logits[2, 1] = 0
    logits[2, 0] = 5  # after node 1 the target wants 0, which no child offers
    v = verify_tree(tokens, parents, logits, greedy=True)
    assert v.path == [1] and v.new_tokens == [2, 0] and v.emitted_kind == "resampled"
    assert v.decisions == ["rejected", "accepted", "unchecked", "rejected", "rejected"]


def test_point_masses_accept_a_sure_candidate_and_never_emit_a_rejected_one():
    tokens, parents = torch.tensor([0, 1, 2]), [-1, -1, -1]
    g = torch.Generator().manual_seed(0)
    p = torch.tensor([[0.0, 0.0, 1.0, 0.0]] + [[0.25] * 4] * 3)
    for _ in range(50):
        v = verify_tree(tokens, parents, p, generator=g)
        assert v.decisions == ["rejected", "rejected", "accepted"] and v.path == [2]  # p = 0 never, p = 1 always
    p = torch.tensor([[0.3, 0.3, 0.1, 0.3]] + [[0.25] * 4] * 3)
    seen = set()
    for _ in range(300):
        v = verify_tree(tokens, parents, p, generator=g)
        if not v.path:
            assert v.decisions == ["rejected"] * 3 and v.emitted == 3 and v.emitted_kind == "resampled"
        seen.add(tuple(v.decisions))
    assert ("rejected", "rejected", "rejected") in seen and ("accepted", "unchecked", "unchecked") in seen


def test_remove_token_renormalises_and_falls_back_when_nothing_is_left():
    assert torch.allclose(rule.remove_token(torch.tensor([0.5, 0.25, 0.25]), 0), torch.tensor([0.0, 0.5, 0.5]))
    assert torch.equal(rule.remove_token(torch.tensor([0.0, 1.0]), 1), torch.tensor([0.0, 1.0]))


def reference_chain(x: torch.Tensor, p: torch.Tensor, q: torch.Tensor | None, g: torch.Generator):
    """The chain rule as the textbook states it, vectorised: the k uniforms drawn up front,
    accept while u * q(x) < p(x) in p's dtype, then one draw from the residual or the bonus
    row. Returns (accepted count, emitted token, the uniforms)."""
    k = x.numel()
    px = p[torch.arange(k), x]
    qx = q[torch.arange(k), x] if q is not None else torch.ones_like(px)
    u = torch.rand(k, generator=g, dtype=p.dtype)
    n = int((u * qx < px).long().cumprod(0).sum())
    if n == k:
        dist = p[k]
    else:
        mass = torch.zeros_like(p[n])
        mass[x[n]] = 1.0
        r = (p[n] - (q[n] if q is not None else mass)).clamp_min(0)
        dist = r / r.sum()
    return n, int(draw(dist, g)), u.tolist()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("k", [0, 1, 2, 4, 6])
def test_a_chain_decides_as_the_textbook_chain_rule(k, dtype):
    # Same seed, same draws and the same comparison: the walk on a one-wide tree (with q rows
    # and as point masses) is the chain rule, decision for decision, so seeded runs keep
    # their tokens.
    for case in range(60):
        g = torch.Generator().manual_seed(1000 * k + case)
        p = torch.softmax(torch.randn(k + 1, 7, generator=g, dtype=dtype) * 2, -1)
        q = torch.softmax(torch.randn(k, 7, generator=g, dtype=dtype) * 2, -1)
        x = torch.multinomial(q, 1, generator=g).view(-1) if k else torch.empty(0, dtype=torch.long)
        if case % 3 == 0 and k:
            p[:k] = q  # long accepted runs too
        for rows in (q, None):
            n, emitted, u = reference_chain(x, p, rows, torch.Generator().manual_seed(case))
            t = verify_tree(x, chain_parents(k), p, rows, generator=torch.Generator().manual_seed(case))
            assert (t.path, t.emitted) == (list(range(n)), emitted)
            assert t.emitted_kind == ("bonus" if n == k else "resampled")
            assert t.decisions == ["accepted"] * n + ["rejected"] * (n < k) + ["unchecked"] * max(0, k - n - 1)
            assert t.u == [u[i] if i <= n else None for i in range(k)]
            assert t == verify(x, p, rows, generator=torch.Generator().manual_seed(case))
        best = p.argmax(-1)
        n = int((x == best[:k]).long().cumprod(0).sum())
        t = verify_tree(x, chain_parents(k), p, greedy=True)
        assert (t.path, t.emitted, t.emitted_kind) == (list(range(n)), int(best[n]), "bonus" if n == k else "resampled")


def test_q_rows_are_refused_on_a_tree_with_siblings():
    p = torch.full((3, 4), 0.25)
    with pytest.raises(ValueError, match="one-wide"):
        verify_tree(torch.tensor([0, 1]), [-1, -1], p, torch.full((2, 4), 0.25))


def test_the_drafted_toy_tree_is_a_real_tree():
    # The statistical tests below mean something only if the tree branches and goes deep.
    tokens, parents, _ = top_tree(())
    assert len(tokens) == 6
    assert any(parents.count(i) == 2 for i in [-1] + list(range(6)))
    assert max(depths(parents)) >= 2  # depth 3 counts from 0 here


# ---- statistical losslessness -----------------------------------------------------------------


def test_first_two_tokens_are_distributed_as_the_target():
    # N = 40,000 runs; 5 standard errors per outcome (4 first tokens, 16 pairs).
    for ok, message in check_lossless(N_RUNS, seed=11):
        assert ok, message


def test_not_removing_a_rejected_candidate_is_caught(monkeypatch):
    # After rejecting candidate c keep p' as it was, so c can still be emitted.
    monkeypatch.setattr(rule, "remove_token", lambda dist, token: dist)
    results = check_lossless(N_RUNS, seed=11)
    assert not all(ok for ok, _ in results), [m for _, m in results]


def test_a_chain_sampled_from_q_gives_the_targets_first_two_tokens():
    # N = 40,000 runs of k = 2 tokens drawn from the toy draft's q, checked with its q rows;
    # 5 standard errors per outcome (4 first tokens, 16 pairs).
    for ok, message in check_lossless(N_RUNS, seed=13, round_=sampled_chain_round):
        assert ok, message


def test_resampling_from_p_instead_of_the_residual_is_caught(monkeypatch):
    # After rejecting a token sampled from q, emit from p' itself rather than norm(max(0, p' - q)).
    monkeypatch.setattr(rule, "residual_distribution", lambda p, q: p)
    results = check_lossless(N_RUNS, seed=13, round_=sampled_chain_round)
    assert not all(ok for ok, _ in results), [m for _, m in results]
