"""The acceptance rule: exact cases, the residual's fallback, and statistical losslessness.

Statistical tests: N independent rounds (fixed seed, so the test is deterministic); each
token expected at least 5 times must have an observed frequency within 5 standard errors,
sqrt(p (1 - p) / N), of its target probability; the rarer tokens are pooled into one bucket
held to the same bound; tokens with p = 0 must never appear.
"""

import math

import pytest
import torch

from specviz.lm.sampling import Sampler
from specviz.engine.verify import residual_distribution, verify
from specviz.settings import GenerationSettings
from tiny_models import single_thread, tiny_pair  # noqa: F401 (single_thread: a fixture)

pytestmark = pytest.mark.usefixtures("single_thread")

SIGMAS = 5


def assert_matches(counts: torch.Tensor, p: torch.Tensor, n: int) -> None:
    p = p.double()
    assert torch.all(counts[p == 0] == 0), "a token with target probability 0 came out"
    common = p * n >= 5
    buckets_p = torch.cat([p[common], p[~common].sum().view(1)])
    buckets_c = torch.cat([counts[common], counts[~common].sum().view(1)]).double()
    se = torch.sqrt(buckets_p * (1 - buckets_p) / n)
    worst = ((buckets_c / n - buckets_p).abs() - SIGMAS * se).max().item()
    assert worst <= 1e-12, f"frequencies {(buckets_c / n).tolist()} vs p {buckets_p.tolist()} (N={n})"


def test_residual_is_normalised_positive_part():
    p = torch.tensor([0.5, 0.3, 0.2, 0.0])
    q = torch.tensor([0.2, 0.6, 0.1, 0.1])
    assert torch.allclose(residual_distribution(p, q), torch.tensor([0.3, 0.0, 0.1, 0.0]) / 0.4)


def test_residual_falls_back_to_p_when_p_equals_q():
    p = torch.tensor([[0.25, 0.75], [0.5, 0.5]])
    q = torch.tensor([[0.25, 0.75], [0.9, 0.1]])
    r = residual_distribution(p, q)
    assert torch.equal(r[0], p[0])  # p == q: no division by zero, p itself
    assert torch.allclose(r[1], torch.tensor([0.0, 1.0]))
    assert not torch.isnan(r).any()


def test_greedy_accepts_the_argmax_prefix_then_emits_argmax():
    logits = torch.tensor([[0.0, 3.0, 1.0], [2.0, 0.0, 1.0], [0.0, 0.0, 5.0], [1.0, 0.0, 0.0]])
    v = verify(torch.tensor([1, 0, 1]), logits, greedy=True)
    assert (v.n_accepted, v.emitted, v.emitted_kind) == (2, 2, "resampled")
    assert v.decisions == ["accepted", "accepted", "rejected"]
    assert v.p == [1.0, 1.0, 0.0] and v.u == [None] * 3
    v = verify(torch.tensor([1, 0, 2]), logits, greedy=True)
    assert (v.n_accepted, v.emitted, v.emitted_kind) == (3, 0, "bonus")
    assert v.new_tokens == [1, 0, 2, 0]


def test_no_drafts_is_a_plain_step():
    p = torch.tensor([[0.0, 1.0, 0.0]])
    v = verify(torch.tensor([], dtype=torch.long), p, torch.empty(0, 3), generator=torch.Generator().manual_seed(0))
    assert (v.n_accepted, v.emitted, v.emitted_kind, v.new_tokens) == (0, 1, "bonus", [1])


def test_a_token_the_target_rules_out_is_always_rejected():
    p = torch.tensor([[0.0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    q = torch.tensor([[1.0, 0.0, 0.0]])
    g = torch.Generator().manual_seed(0)
    for _ in range(200):
        v = verify(torch.tensor([0]), p, q, generator=g)
        assert v.n_accepted == 0 and v.emitted in (1, 2)


def test_records_p_q_and_u_per_checked_position():
    p = torch.tensor([[0.2, 0.8], [0.6, 0.4], [0.5, 0.5]])
    q = torch.tensor([[0.5, 0.5], [0.5, 0.5]])
    v = verify(torch.tensor([1, 0]), p, q, generator=torch.Generator().manual_seed(1))
    assert v.p == pytest.approx([0.8, 0.6]) and v.q == pytest.approx([0.5, 0.5])
    assert v.n_accepted == 2 and all(0 <= u < 1 for u in v.u)  # p/q >= 1: always accepted


def test_same_seed_same_outcome():
    p = torch.softmax(torch.randn(5, 11, generator=torch.Generator().manual_seed(0)), -1)
    q = torch.softmax(torch.randn(4, 11, generator=torch.Generator().manual_seed(1)), -1)
    x = torch.tensor([1, 2, 3, 4])
    a = verify(x, p, q, generator=torch.Generator().manual_seed(7))
    b = verify(x, p, q, generator=torch.Generator().manual_seed(7))
    assert a == b


def _first_tokens(p, q, n, seed, point_mass=None):
    """Run n rounds (drafts sampled from q, or the fixed `point_mass` drafts with q None) and
    count the first output token, and the second one in rounds whose first draft was accepted."""
    g = torch.Generator().manual_seed(seed)
    vocab = p.shape[-1]
    first = torch.zeros(vocab, dtype=torch.long)
    second = torch.zeros(vocab, dtype=torch.long)
    if point_mass is None:
        drafts = torch.multinomial(q, n, replacement=True, generator=g).T  # (n, k): all rounds' drafts at once
    else:
        drafts = point_mass.expand(n, -1)
    for x in drafts:
        v = verify(x, p, q, generator=g)
        out = v.new_tokens
        first[out[0]] += 1
        if v.n_accepted >= 1:
            second[out[1]] += 1
    return first, second


def test_lossless_on_hand_made_distributions():
    # N = 8,000 rounds of k = 2 over 5 tokens; zeros on both sides, p != q everywhere.
    n = 8_000
    p = torch.tensor(
        [[0.5, 0.2, 0.2, 0.1, 0.0], [0.1, 0.1, 0.1, 0.1, 0.6], [0.2, 0.2, 0.2, 0.2, 0.2]], dtype=torch.float64
    )
    q = torch.tensor([[0.1, 0.1, 0.1, 0.2, 0.5], [0.0, 0.3, 0.3, 0.4, 0.0]], dtype=torch.float64)
    first, second = _first_tokens(p, q, n, seed=0)
    assert_matches(first, p[0], n)
    # Given x_1 accepted, the next output token is x_2 or its replacement: distributed as p_2.
    assert_matches(second, p[1], int(second.sum()))


def test_lossless_with_point_mass_drafts():
    # Prompt lookup proposes with certainty; the rule must still give p. N = 8,000.
    n = 8_000
    p = torch.tensor([[0.3, 0.6, 0.1, 0.0], [0.25, 0.25, 0.25, 0.25]], dtype=torch.float64)
    first, _ = _first_tokens(p, None, n, seed=1, point_mass=torch.tensor([1]))
    assert_matches(first, p[0], n)


def test_equal_draft_and_target_accept_everything():
    p = torch.softmax(torch.randn(4, 9, generator=torch.Generator().manual_seed(3)), -1)
    g = torch.Generator().manual_seed(0)
    for _ in range(100):
        x = torch.multinomial(p[:3], 1, generator=g).squeeze(-1)
        v = verify(x, p, p[:3].clone(), generator=g)
        assert v.n_accepted == 3 and v.emitted_kind == "bonus"


@pytest.mark.parametrize(
    "settings",
    [GenerationSettings(temperature=0.7, top_k=12), GenerationSettings(temperature=1.3, top_k=40, top_p=0.8)],
    ids=["t0.7-topk12", "t1.3-topk40-topp0.8"],
)
def test_lossless_on_a_tiny_model_next_token_distribution(settings):
    # p and q: a tiny target's and a tiny draft's processed next-token distributions at the
    # same context. N = 5,000 rounds of k = 1.
    n = 5_000
    pair = tiny_pair("close")
    sampler = Sampler(settings, pair.vocab_size)
    ids = pair.tokenizer("def reverse(s):\n    return", return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        lp = pair.target(input_ids=ids).logits[0, -1:]
        lq = pair.draft(input_ids=ids).logits[0, -1:]
    p1 = sampler.distribution(lp)[0].double()
    p = torch.stack([p1, torch.full_like(p1, 1 / p1.numel())])  # row 2: any bonus distribution
    q = sampler.distribution(lq).double()
    assert 0.05 < torch.minimum(p1, q[0]).sum() < 0.999  # draft and target genuinely differ
    first, _ = _first_tokens(p, q, n, seed=2)
    assert_matches(first, p1, n)
    assert math.isclose(float(first.sum()), n)
