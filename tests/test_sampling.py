"""Sampling settings: the distribution actually sampled from, for draft and target alike."""

import math

import pytest
import torch
from transformers import DynamicCache, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from specviz.drafters import make_drafter
from specviz.drafters.early_exit import EarlyExitForward
from specviz.lm.sampling import Sampler, draw, processors
from specviz.settings import GenerationSettings
from tiny_models import single_thread, tiny_pair  # noqa: F401 (single_thread: a fixture)

pytestmark = pytest.mark.usefixtures("single_thread")

LOGITS = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0, -3.0]])
V = LOGITS.shape[-1]


def test_processors_follow_generate_order():
    procs = processors(GenerationSettings(temperature=0.5, top_k=3, top_p=0.9))
    assert [type(p) for p in procs] == [TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper]
    assert len(processors(GenerationSettings(temperature=0))) == 0
    assert len(processors(GenerationSettings(temperature=1.0))) == 0  # T = 1, no top-k/p: plain softmax


def test_greedy_is_a_point_mass_on_the_argmax():
    d = Sampler(GenerationSettings(temperature=0), V).distribution(LOGITS)
    assert d.tolist() == [[1.0, 0, 0, 0, 0, 0]]


def test_temperature_scales_logits():
    d = Sampler(GenerationSettings(temperature=0.5), V).distribution(LOGITS)
    assert torch.allclose(d, torch.softmax(LOGITS / 0.5, -1))


def test_top_k_keeps_the_k_best_renormalised():
    d = Sampler(GenerationSettings(temperature=1.0, top_k=2), V).distribution(LOGITS)[0]
    e = torch.exp(LOGITS[0, :2])
    assert torch.allclose(d[:2], e / e.sum()) and d[2:].sum() == 0


def test_top_p_keeps_the_smallest_set_reaching_p():
    probs = torch.softmax(LOGITS[0], -1)  # 0.57, 0.21, 0.13, 0.08, 0.03, 0.004
    d = Sampler(GenerationSettings(temperature=1.0, top_p=0.85), V).distribution(LOGITS)[0]
    # 0.57 + 0.21 = 0.78 < 0.85, so the third token is needed; the fourth is not.
    assert (d > 0).tolist() == [True, True, True, False, False, False]
    assert torch.allclose(d[:3], probs[:3] / probs[:3].sum())


def test_combined_settings_match_the_warpers_applied_by_hand():
    s = GenerationSettings(temperature=0.7, top_k=4, top_p=0.8)
    scores = TopPLogitsWarper(0.8)(None, TopKLogitsWarper(4)(None, TemperatureLogitsWarper(0.7)(None, LOGITS.clone())))
    assert torch.allclose(Sampler(s, V).distribution(LOGITS), torch.softmax(scores, -1))


def test_logits_beyond_the_shared_vocabulary_are_cut():
    padded = torch.cat([LOGITS, torch.full((1, 2), 50.0)], dim=1)  # LM-head padding rows
    sampler = Sampler(GenerationSettings(temperature=1.0), vocab_size=6)
    assert torch.allclose(sampler.distribution(padded), torch.softmax(LOGITS, -1))


def test_low_precision_logits_are_processed_in_float32():
    d = Sampler(GenerationSettings(temperature=1.0), 6).distribution(LOGITS.bfloat16())
    assert d.dtype == torch.float32 and math.isclose(float(d.sum()), 1.0, rel_tol=1e-6)


def test_q_of_an_int8_draft_is_the_int8_models_own():
    """A draft quantized at load drafts from its own int8 distribution, and q must be that
    one, not the fp32 model's it was made from. Dynamic int8 quantizes each pass's
    activations together, so the check replays the drafter's own passes: the prompt but its
    last token, then one token at a time."""
    pair, full = tiny_pair("close-int8"), tiny_pair("close").draft
    settings = GenerationSettings(
        temperature=2.0
    )  # the tiny models are peaked: flatten (the most allowed) to tell q apart
    sampler = Sampler(settings, pair.vocab_size)
    d = make_drafter(pair, settings, generator=torch.Generator().manual_seed(0))
    context = torch.tensor(pair.tokenizer("def reverse(s):")["input_ids"])

    def replayed(model, ids):
        cache = DynamicCache(config=model.config)
        with torch.inference_mode():
            model(input_ids=context[None, :-1], cache=cache, use_cache=True)
            for t in ids[len(context) - 1 :]:
                logits = model(input_ids=t.view(1, 1), cache=cache, use_cache=True).logits[0, -1]
        return sampler.distribution(logits)

    with torch.inference_mode():
        d.begin(context)
        proposal = d.propose(context, 3, lambda c: True)
    for i in range(3):
        prefix = torch.cat([context, proposal.tokens[:i]])
        assert torch.allclose(proposal.q[i], replayed(pair.draft, prefix), atol=1e-6)
        assert not torch.allclose(proposal.q[i], replayed(full, prefix), atol=1e-3)


@pytest.mark.parametrize("drafter", ["model", "early-exit"])
def test_q_is_the_processed_draft_distribution(drafter):
    """q must be what the draft sampled from after temperature / top-k / top-p, not its raw
    softmax; checked against fresh forwards over the same prefixes, across two rounds so the
    draft's kept cache is exercised too."""
    pair = tiny_pair("close")
    settings = GenerationSettings(temperature=0.8, top_k=20, top_p=0.9, drafter=drafter, early_exit_layers=2)
    sampler = Sampler(settings, pair.vocab_size)
    d = make_drafter(pair, settings, generator=torch.Generator().manual_seed(0))
    context = torch.tensor(pair.tokenizer("def reverse(s):")["input_ids"])
    early_exit = EarlyExitForward(pair.target, 2)

    def fresh_logits(ids):
        with torch.inference_mode():
            if drafter == "model":
                return pair.draft(input_ids=ids[None]).logits[0, -1]
            return early_exit(ids[None], DynamicCache(config=pair.target.config), 1)[0, -1]

    with torch.inference_mode():
        d.begin(context)
        for round_ in range(2):
            proposal = d.propose(context, 3, lambda c: True)
            assert proposal.q is not None and proposal.q.shape == (3, pair.vocab_size)
            for i in range(3):
                logits = fresh_logits(torch.cat([context, proposal.tokens[:i]]))
                expected = sampler.distribution(logits)
                assert torch.allclose(proposal.q[i], expected, atol=1e-5)
                assert not torch.allclose(proposal.q[i], torch.softmax(logits, -1), atol=1e-3)
                assert proposal.q[i, proposal.tokens[i]] > 0
            # Pretend the target accepted one draft and emitted a token of its own.
            d.accepted(1)
            context = torch.cat([context, proposal.tokens[:1], torch.tensor([7])])


def test_draw_follows_the_distribution():
    # 200,000 draws from a 6-token distribution with zeros at both ends and in the middle;
    # the standard error of a frequency is at most sqrt(0.25 / n) = 0.0011, so 0.006 is over
    # five of them, while a draw off by one token (or uniform over the support) misses by
    # 0.05 or more.
    dist = torch.tensor([0.0, 0.1, 0.0, 0.55, 0.35, 0.0])
    g = torch.Generator().manual_seed(1)
    n = 200_000
    rows = dist.expand(n, -1)
    counts = torch.bincount(draw(rows, g), minlength=6).double() / n
    assert counts[[0, 2, 5]].sum() == 0
    assert torch.allclose(counts, dist.double(), atol=0.006)


def test_draw_takes_unnormalised_weights_and_one_row():
    g = torch.Generator().manual_seed(2)
    weights = torch.tensor([0.0, 3.0, 1.0])  # shares 0.75 and 0.25
    got = torch.stack([draw(weights, g) for _ in range(4000)])
    assert got.shape == (4000,)
    share = (got == 1).double().mean().item()
    assert 0 not in got.tolist()
    assert abs(share - 0.75) < 0.03  # sd sqrt(0.75 * 0.25 / 4000) = 0.0068


def test_draw_never_picks_a_zero_weight_at_the_top_edge(monkeypatch):
    # A uniform that rounds up to the total would land past the last positive weight.
    monkeypatch.setattr(torch, "rand", lambda shape, **kw: torch.ones(shape, dtype=kw.get("dtype")))
    assert draw(torch.tensor([[0.25, 0.75, 0.0, 0.0]]), None).tolist() == [1]


def test_draw_refuses_an_empty_distribution():
    with pytest.raises(ValueError, match="positive"):
        draw(torch.zeros(4), None)


def test_the_grammars_mask_comes_before_temperature_top_k_and_top_p():
    # LOGITS 2, 1, 0.5, 0, -1, -3; the grammar allows tokens 1, 2, 4 and 5 (not the best, 0).
    allowed = torch.tensor([[False, True, True, False, True, True]])
    sampler = Sampler(GenerationSettings(temperature=0.5, top_k=2, top_p=0.9), V)
    d = sampler.distribution(sampler.masked(LOGITS, allowed))[0]
    # By hand: the mask first, then logits / 0.5 over what is left: 2, 1, -2, -6; top-k 2 keeps the
    # two best allowed tokens (1 and 2, not token 0, which the mask removed), weights e^2 and e^1;
    # top-p 0.9: e^2 / (e^2 + e) = 0.731 < 0.9, so both stay.
    w = torch.tensor([0.0, math.exp(2.0), math.exp(1.0), 0.0, 0.0, 0.0])
    assert torch.allclose(d, w / w.sum())
    # Top-k before the mask would keep tokens 0 and 1, and the mask would then leave token 1 alone.
    assert d[2] > 0.2


def test_a_greedy_choice_under_the_mask_is_the_best_allowed_token():
    sampler = Sampler(GenerationSettings(temperature=0), V)
    allowed = torch.tensor([False, False, True, True, False, False])
    assert sampler.distribution(sampler.masked(LOGITS[0], allowed)).tolist() == [0, 0, 1.0, 0, 0, 0]
    assert sampler.masked(LOGITS, None) is LOGITS  # free text: the logits untouched
