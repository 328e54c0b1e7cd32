"""Drafters: prompt lookup, the draft model, early exit, and the draft-length policies."""

import pytest
import torch
from transformers import DynamicCache

from specviz.drafters import DraftLength, HeuristicLength, make_drafter, make_length
from specviz.drafters.early_exit import EarlyExitForward, default_layers
from specviz.drafters.lookup import LookupDrafter
from specviz.errors import UserError
from specviz.settings import GenerationSettings
from tiny_models import single_thread, tiny_pair  # noqa: F401 (single_thread: a fixture)

pytestmark = pytest.mark.usefixtures("single_thread")

ALWAYS = lambda confidence: True  # noqa: E731


def ids(*xs):
    return torch.tensor(xs, dtype=torch.long)


def find_continuation(context, k):
    """What a fresh prompt-lookup drafter proposes (no copy evidence yet): up to k tokens."""
    return LookupDrafter().propose(context, k, ALWAYS).tokens


def test_lookup_continues_the_latest_match_of_the_longest_ngram():
    #            0  1  2  3  4  5  6  7  8  9 10 11
    context = ids(5, 6, 7, 1, 2, 5, 6, 8, 9, 3, 5, 6)
    # "5 6" occurs at 0 and 5; the latest (5) continues with 8 9 3.
    assert find_continuation(context, 3).tolist() == [8, 9, 3]
    assert find_continuation(context, 10).tolist() == [8, 9, 3, 5, 6]  # up to the context's end
    # A 3-gram match wins over a later 1-gram one.
    context = ids(1, 2, 3, 4, 9, 3, 8, 1, 2, 3)
    assert find_continuation(context, 2).tolist() == [4, 9]


def test_lookup_without_a_match_proposes_nothing():
    assert find_continuation(ids(1, 2, 3, 4), 4).numel() == 0
    assert find_continuation(ids(1), 4).numel() == 0
    assert find_continuation(ids(1, 2, 1), 0).numel() == 0


def test_lookup_drafter_proposes_point_masses():
    d = LookupDrafter()
    d.begin(ids(1, 2, 3))
    p = d.propose(ids(4, 5, 6, 4, 5), 2, ALWAYS)
    assert p.tokens.tolist() == [6, 4] and p.q is None and p.passes == 0


def test_the_draft_model_feeds_the_prompt_only_at_the_first_round_that_drafts():
    pair = tiny_pair("close")
    d = make_drafter(pair, GenerationSettings(), generator=torch.Generator().manual_seed(0))
    prompt = torch.tensor(pair.tokenizer("def reverse(s):")["input_ids"])
    d.begin(prompt)
    context = torch.cat([prompt, torch.tensor([5, 6])])  # two plain rounds' tokens
    assert d.propose(context, 0, ALWAYS).tokens.numel() == 0 and d._lm.length == 0  # nothing fed
    p = d.propose(context, 2, ALWAYS)
    assert 0 < p.setup_ms <= p.ms and len(p) == 2
    with torch.inference_mode():
        fresh = pair.draft(input_ids=context[None]).logits[0, -1]
    assert p.tokens[0] == fresh.argmax()  # what a draft that saw the whole context drafts first


def test_early_exit_through_all_layers_is_the_target():
    pair = tiny_pair(None)
    full = EarlyExitForward(pair.target, pair.target.config.num_hidden_layers)
    x = torch.tensor([pair.tokenizer("for i in range(10):")["input_ids"]])
    with torch.inference_mode():
        expected = pair.target(input_ids=x).logits[0]
        cache = DynamicCache(config=pair.target.config)
        head = full(x[:, :-3], cache, 0)[0]
        tail = full(x[:, -3:], cache, 0)[0]  # on top of the cache: same positions, same masks
        whole = full(x, DynamicCache(config=pair.target.config), 0)[0]
    assert torch.equal(whole, expected)
    assert torch.allclose(torch.cat([head, tail]), expected, atol=1e-4)  # cached: rounding only


def test_early_exit_cache_matches_a_fresh_pass():
    pair = tiny_pair(None)
    shallow = EarlyExitForward(pair.target, 1)
    x = torch.tensor([pair.tokenizer("The quick brown fox")["input_ids"]])
    with torch.inference_mode():
        fresh = shallow(x, DynamicCache(config=pair.target.config), 1)[0, -1]
        cache = DynamicCache(config=pair.target.config)
        shallow(x[:, :-1], cache, 1)
        step = shallow(x[:, -1:], cache, 1)[0, -1]
        full = pair.target(input_ids=x).logits[0, -1]
    assert torch.allclose(step, fresh, atol=1e-4)
    assert not torch.allclose(step, full, atol=1e-2)  # one layer of four is a different model


def test_early_exit_layers_are_checked():
    pair = tiny_pair(None)
    assert default_layers(pair.target) == 1
    with pytest.raises(UserError, match="from 1 to 4"):
        EarlyExitForward(pair.target, 5)
    with pytest.raises(UserError, match="from 1 to 4"):
        make_drafter(pair, GenerationSettings(drafter="early-exit", early_exit_layers=9))


def test_model_drafter_needs_a_draft_model():
    with pytest.raises(UserError, match="no draft model"):
        make_drafter(tiny_pair(None), GenerationSettings(drafter="model"))


def test_greedy_model_drafter_proposes_the_drafts_own_greedy_continuation():
    pair = tiny_pair("random")
    context = torch.tensor(pair.tokenizer("def reverse(s):")["input_ids"])
    d = make_drafter(pair, GenerationSettings(temperature=0))
    with torch.inference_mode():
        d.begin(context)
        p = d.propose(context, 5, ALWAYS)
        expected = pair.draft.generate(context[None], max_new_tokens=5, do_sample=False, eos_token_id=None)[
            0, context.numel() :
        ]
    assert p.tokens.tolist() == expected.tolist()
    assert p.q is None and p.passes == 5 and len(p.confidence) == 5


def test_model_drafter_stops_when_told_to():
    pair = tiny_pair("random")
    context = torch.tensor(pair.tokenizer("def reverse(s):")["input_ids"])
    d = make_drafter(pair, GenerationSettings(temperature=0))
    seen = []
    with torch.inference_mode():
        d.begin(context)
        p = d.propose(context, 5, lambda c: seen.append(c) or len(seen) < 2)
    assert len(p) == 2 and len(seen) == 2 and all(0 < c <= 1 for c in seen)


def test_fixed_length_never_changes():
    length = make_length(tiny_pair("close"), GenerationSettings(k=3, policy="fixed"))
    assert type(length) is DraftLength
    for drafted, accepted in [(3, 0), (3, 3), (1, 1)]:
        length.update(drafted, accepted)
        assert length.limit() == 3 and length.keep_going(0.0)


def test_heuristic_length_follows_acceptance_and_confidence():
    length = make_length(tiny_pair("close"), GenerationSettings(k=6, policy="heuristic", adaptive_threshold=0.5))
    assert isinstance(length, HeuristicLength) and length.limit() == 6
    length.update(6, 2)
    assert length.limit() == 5
    for _ in range(10):
        length.update(length.limit(), 0)
    assert length.limit() == 1
    length.update(1, 1)
    assert length.limit() == 3
    for _ in range(5):
        length.update(length.limit(), length.limit())
    assert length.limit() == 6  # capped at k
    length.update(0, 0)  # nothing drafted: nothing learned
    assert length.limit() == 6
    assert length.keep_going(0.5) and not length.keep_going(0.49)
