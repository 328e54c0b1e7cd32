"""Tree attention on a tiny Qwen2, through both loops (transformers' forward over a
DynamicCache, and the lean loop over packed weights): one pass over a tree equals running
each branch as a chain, and keeping a path leaves the cache a chain of that path would have left.

Tolerance: 1e-4 absolute on fp32 logits and cached keys/values of magnitude up to ~20,
i.e. ~5e-6 relative. That is the fp32 floor here: the same chain fed through the cache in one
piece and run as one full forward already differ by up to 4e-5 (matmuls of other shapes sum
in another order), while a wrong mask or a wrong position moves logits by whole units.
"""

import pytest
import torch

from specviz.lm.torch_runtime.cached import cached_lm, float_mask
from specviz.lm.torch_runtime.lean import LeanLM
from specviz.lm.tree import ancestry, check_path, depths
from tiny_models import single_thread, tiny_pair  # noqa: F401 (single_thread: a fixture)

pytestmark = pytest.mark.usefixtures("single_thread")
LOOPS = {"transformers": cached_lm, "lean": LeanLM}

ATOL = 1e-4

# A tree under the root (node 0): root -> 1, 2, 3; 1 -> 4, 5; 2 -> 6; 4 -> 7; 6 -> 8.
TOKENS = [0, 41, 17, 230, 9, 41, 88, 5, 17]  # node 0 gets the root token below; 41 and 17 repeat on purpose
PARENTS = [-1, 0, 0, 0, 1, 1, 2, 4, 6]


def _context(pair):
    return pair.tokenizer("def reverse(s):\n    return", return_tensors="pt")["input_ids"][0]


def _lm(model, ids=None, loop="transformers"):
    lm = LOOPS[loop](model, torch.device("cpu"))
    if ids is not None and ids.numel():
        lm.feed(ids)
    return lm


def _kv(lm):
    """The cached keys and values, one (keys, values) per layer, whichever loop holds them."""
    if isinstance(lm, LeanLM):
        return [(lm._keys[i, :, : lm.length], lm._values[i, :, : lm.length]) for i in range(lm._keys.shape[0])]
    return [(layer.keys[0], layer.values[0]) for layer in lm.cache.layers]


def _branch(parents, leaf):
    path = [leaf]
    while parents[path[-1]] >= 0:
        path.append(parents[path[-1]])
    return path[::-1]


def test_mask_shape_values_and_positions():
    allowed = ancestry([-1, 0, 0, 1])
    expected = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 0, 1]], dtype=torch.bool)
    assert torch.equal(allowed, expected)
    mask = float_mask(torch.cat([torch.ones(4, 3, dtype=torch.bool), allowed], 1), torch.float32)
    assert mask.shape == (1, 1, 4, 7)
    assert torch.all(mask[0, 0, :, :3] == 0)
    assert mask[0, 0, 2, 4].item() == torch.finfo(torch.float32).min and mask[0, 0, 2, 5].item() == 0
    assert depths([-1, 0, 0, 1, -1]) == [0, 1, 1, 2, 0]
    with pytest.raises(ValueError):
        depths([-1, 2, 0])  # a parent after its child


@torch.inference_mode()
@pytest.mark.parametrize("loop", LOOPS)
def test_tree_pass_equals_each_branch_run_as_a_chain(loop):
    pair = tiny_pair("close")
    model = pair.target
    ctx = _context(pair)
    tokens = torch.tensor([int(ctx[-1])] + TOKENS[1:])
    lm = _lm(model, ctx[:-1], loop)
    logits = lm.feed_tree(tokens, PARENTS)
    assert logits.shape[0] == len(TOKENS)
    for leaf in (3, 5, 7, 8):
        branch = _branch(PARENTS, leaf)
        full = torch.cat([ctx[:-1], tokens[branch]])
        ref = model(input_ids=full[None]).logits[0, -len(branch) :]
        assert torch.allclose(logits[branch], ref, atol=ATOL, rtol=0), f"branch {branch}"
    assert lm.length == ctx.numel() - 1 + len(TOKENS)


@torch.inference_mode()
@pytest.mark.parametrize("loop", LOOPS)
def test_a_chain_shaped_tree_is_exactly_the_chain_pass(loop):
    pair = tiny_pair("close")
    model = pair.target
    ctx = _context(pair)
    chain = torch.cat([ctx[-1:], torch.tensor([5, 9, 77, 100, 3])])
    a = _lm(model, ctx[:-1], loop).feed(chain, keep=0)
    b = _lm(model, ctx[:-1], loop).feed_tree(chain, list(range(-1, chain.numel() - 1)))
    assert torch.equal(a, b)


@torch.inference_mode()
@pytest.mark.parametrize("leaf", [7, 8, 3, 0])
@pytest.mark.parametrize("loop", LOOPS)
def test_after_keeping_a_path_the_cache_is_the_chains(leaf, loop):
    pair = tiny_pair("close")
    model = pair.target
    ctx = _context(pair)
    tokens = torch.tensor([int(ctx[-1])] + TOKENS[1:])
    path = _branch(PARENTS, leaf)
    lm = _lm(model, ctx[:-1], loop)
    lm.feed_tree(tokens, PARENTS)
    lm.keep_path(path)
    ref = _lm(model, ctx[:-1], loop)
    ref.feed(tokens[path])
    assert lm.length == ref.length == ctx.numel() - 1 + len(path)
    for (keys, values), (want_keys, want_values) in zip(_kv(lm), _kv(ref), strict=True):
        assert keys.shape == want_keys.shape
        assert torch.allclose(keys, want_keys, atol=ATOL) and torch.allclose(values, want_values, atol=ATOL)
    nxt = torch.tensor([33, 12, 7])
    assert torch.allclose(lm.feed(nxt, keep=0), ref.feed(nxt, keep=0), atol=ATOL, rtol=0)


@torch.inference_mode()
@pytest.mark.parametrize("loop", LOOPS)
def test_levels_fed_in_separate_passes_see_earlier_levels_and_keep_a_path(loop):
    # How the drafter uses it: level 1 in one pass, level 2 (children of level 1) in the next.
    pair = tiny_pair("close")
    model = pair.target
    ctx = _context(pair)
    lm = _lm(model, ctx, loop)
    lm.feed_tree(torch.tensor([41, 17, 230]), [-1, -1, -1])
    second = lm.feed_tree(torch.tensor([9, 88, 5]), [0, 1, 1])  # nodes 3, 4, 5
    ref = model(input_ids=torch.cat([ctx, torch.tensor([17, 5])])[None]).logits[0, -1]
    assert torch.allclose(second[2], ref, atol=ATOL, rtol=0)
    lm.keep_path([1, 5])
    chain = _lm(model, ctx, loop)
    chain.feed(torch.tensor([17, 5]))
    nxt = torch.tensor([12])
    assert torch.allclose(lm.feed(nxt), chain.feed(nxt), atol=ATOL, rtol=0)


@torch.inference_mode()
@pytest.mark.parametrize("loop", LOOPS)
def test_keep_path_refuses_what_is_not_a_path(loop):
    pair = tiny_pair("close")
    model = pair.target
    ctx = _context(pair)
    lm = _lm(model, ctx, loop)
    lm.feed_tree(torch.tensor(TOKENS), PARENTS)
    with pytest.raises(ValueError):
        lm.keep_path([1, 4])  # node 1's parent is node 0
    with pytest.raises(ValueError):
        lm.keep_path([0, 2, 4])  # node 4's parent is node 1


def test_a_path_is_a_chain_of_the_trees_nodes_from_a_child_of_the_root():
    parents = [-1, 0, -1, 2, 2]  # two branches: 0-1 and 2-(3, 4)
    assert check_path(parents, (2, 4)) == [2, 4] and check_path(parents, []) == []
    for wrong in ([1], [0, 3], [2, 4, 3], [5], [-1]):
        with pytest.raises(ValueError, match="is not a path"):
            check_path(parents, wrong)
