"""The tree drafter on tiny Qwen2 pairs: width 1 is the chain drafter, the tree is the best
nodes by the draft's path probability, and after a round its cache holds only the accepted path.
"""

import math

import pytest
import torch

from specviz.drafters.model import ModelDrafter
from specviz.drafters.tree import TreeDrafter
from specviz.lm.torch_runtime.lean import model_lm
from specviz.lm.prompt import stop_ids
from specviz.lm.sampling import Sampler
from specviz.lm.tree import depths
from specviz.settings import GenerationSettings
from tiny_models import single_thread, tiny_pair  # noqa: F401 (single_thread: a fixture)

pytestmark = pytest.mark.usefixtures("single_thread")

GREEDY = GenerationSettings(temperature=0.0)
SAMPLED = GenerationSettings(temperature=0.8, top_k=20)


def always(_confidence: float) -> bool:
    return True


def _context(pair, text="def reverse(s):\n    return"):
    return pair.tokenizer(text, return_tensors="pt")["input_ids"][0]


def tree_drafter(pair, settings, nodes, width):
    draft = pair.draft
    lm = model_lm(draft, pair.device)
    sampler = Sampler(settings, pair.vocab_size)
    return TreeDrafter("tree", lm, sampler, stop_ids(pair), nodes=nodes, width=width)


def chain_drafter(pair, settings):
    lm = model_lm(pair.draft, pair.device)
    return ModelDrafter(
        "model", lm, Sampler(settings, pair.vocab_size), torch.Generator().manual_seed(0), stop_ids(pair)
    )


def draft_dist(pair, settings, ids):
    """The distribution the drafter ranks children by, from a fresh full forward."""
    logits = Sampler(settings, pair.vocab_size).logits(pair.draft(input_ids=ids[None]).logits[0, -1])
    return logits.softmax(-1) if settings.greedy else Sampler(settings, pair.vocab_size).distribution(logits)


def node_paths(tokens, parents):
    paths = []
    for t, par in zip(tokens, parents):
        paths.append((paths[par] if par >= 0 else []) + [t])
    return paths


@torch.inference_mode()
@pytest.mark.parametrize("k", [1, 3, 6])
def test_width_one_proposes_the_chain_drafters_tokens(k):
    pair = tiny_pair("close")
    chain, tree = chain_drafter(pair, GREEDY), tree_drafter(pair, GREEDY, nodes=k, width=1)
    ids = _context(pair)
    chain.begin(ids)
    tree.begin(ids)
    for round_ in range(5):
        a = chain.propose(ids, k, always)
        b = tree.propose(ids, k, always)
        assert b.tokens.tolist() == a.tokens.tolist(), f"round {round_}"
        assert b.parents == list(range(-1, len(b) - 1))
        assert b.passes == a.passes
        assert b.confidence == pytest.approx(a.confidence, abs=1e-5)
        # Accept a different share each round, then a token of the target's own.
        n = round_ % (len(a) + 1)
        chain.accepted(n)
        tree.accepted_path(list(range(n)))
        ids = torch.cat([ids, a.tokens[:n], torch.tensor([(7 * round_ + 3) % pair.vocab_size])])


@torch.inference_mode()
@pytest.mark.parametrize("nodes,width", [(4, 2), (8, 3), (16, 2), (16, 4)])
def test_the_tree_is_the_best_nodes_by_path_probability(nodes, width):
    pair = tiny_pair("close")
    drafter = tree_drafter(pair, SAMPLED, nodes=nodes, width=width)
    ctx = _context(pair)
    drafter.begin(ctx)
    prop = drafter.propose(ctx, nodes, always)
    tokens, parents = prop.tokens.tolist(), prop.parents
    assert len(tokens) == nodes  # the tiny draft always has `width` candidates of p > 0 (top-k 20)
    depth = depths(parents)
    for i, par in enumerate(parents):
        assert par < i
        if i:
            assert (depth[i], parents[i]) >= (depth[i - 1], parents[i - 1])  # levels in order
    paths = node_paths(tokens, parents)
    score = {}
    kids: dict[int, list[int]] = {}
    for i, par in enumerate(parents):
        kids.setdefault(par, []).append(i)
    # Every node's children are its draft's top tokens, best first; q is that distribution.
    worst_kept = 1.0
    best_left = 0.0
    for node in [-1] + list(range(len(tokens))):
        prefix = paths[node] if node >= 0 else []
        dist = draft_dist(pair, SAMPLED, torch.cat([ctx, torch.tensor(prefix, dtype=torch.long)]))
        top = dist.topk(width)
        base = score[node] if node >= 0 else 1.0
        mine = kids.get(node, [])
        assert len(mine) <= width
        assert [tokens[c] for c in mine] == top.indices.tolist()[: len(mine)]
        for c in mine:
            assert torch.allclose(prop.q[c], dist, atol=1e-5)
            score[c] = base * float(dist[tokens[c]])
            worst_kept = min(worst_kept, score[c])
        for prob in top.values.tolist()[len(mine) :]:  # the children left out
            best_left = max(best_left, base * prob)
    # Best-first: nothing left out scores above anything kept.
    assert best_left <= worst_kept * (1 + 1e-5)
    if nodes >= 8:  # (a small tree of a confident draft can be a chain)
        assert any(len(v) > 1 for v in kids.values()) and max(depth) >= 1  # it really branches and deepens


@torch.inference_mode()
@pytest.mark.parametrize("settings", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
def test_after_a_round_the_cache_holds_only_the_accepted_path(settings):
    # The next proposal equals a fresh drafter's on the same context, whatever path was kept.
    pair = tiny_pair("close")
    ctx = _context(pair)
    for path_kind in ("deepest", "second-child", "none"):
        drafter = tree_drafter(pair, settings, nodes=10, width=3)
        drafter.begin(ctx)
        prop = drafter.propose(ctx, 10, always)
        parents = prop.parents
        if path_kind == "none":
            path = []
        else:
            leaf = (
                max(range(len(parents)), key=lambda i: depths(parents)[i])
                if path_kind == "deepest"
                else [i for i, par in enumerate(parents) if par == -1][1]
            )
            path = [leaf]
            while parents[path[-1]] >= 0:
                path.append(parents[path[-1]])
            path.reverse()
        drafter.accepted_path(path)
        new_ctx = torch.cat([ctx, prop.tokens[path], torch.tensor([11])])
        got = drafter.propose(new_ctx, 6, always)
        fresh = tree_drafter(pair, settings, nodes=10, width=3)
        fresh.begin(new_ctx)
        want = fresh.propose(new_ctx, 6, always)
        assert got.tokens.tolist() == want.tokens.tolist() and got.parents == want.parents, path_kind
        assert got.confidence == pytest.approx(want.confidence, abs=1e-4)


@torch.inference_mode()
def test_width_one_under_sampling_is_the_draft_argmax_chain_with_its_distributions():
    pair = tiny_pair("close")
    drafter = tree_drafter(pair, SAMPLED, nodes=4, width=1)
    ctx = _context(pair)
    drafter.begin(ctx)
    prop = drafter.propose(ctx, 4, always)
    ids = ctx
    for i, t in enumerate(prop.tokens.tolist()):
        dist = draft_dist(pair, SAMPLED, ids)
        assert t == int(dist.argmax()) and torch.allclose(prop.q[i], dist, atol=1e-5)
        assert math.isclose(prop.confidence[i], float(dist.max()), abs_tol=1e-5)
        ids = torch.cat([ids, torch.tensor([t])])


@torch.inference_mode()
def test_limits_depth_eos_and_keep_going():
    pair = tiny_pair("close")
    ctx = _context(pair)
    drafter = tree_drafter(pair, GREEDY, nodes=16, width=2)
    drafter.begin(ctx)
    prop = drafter.propose(ctx, 2, always)
    assert max(depths(prop.parents)) + 1 <= 2 and len(prop) <= 2 + 4
    drafter.accepted_path([])
    prop = drafter.propose(ctx, 5, lambda confidence: False)  # nothing may be expanded: only the root's children
    assert prop.parents == [-1] * len(prop) and 1 <= len(prop) <= 2 and prop.passes == 1
    drafter.accepted_path([])
    assert len(drafter.propose(ctx, 0, always)) == 0
    with pytest.raises(ValueError):
        drafter.accepted_path([3])  # not a path of the last proposal (it had no nodes)
