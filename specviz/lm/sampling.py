"""From logits to the distribution actually sampled from, identically for draft and target.

Speculative decoding is lossless only if q and p are the distributions the tokens are
really drawn from: after temperature, top-k and top-p. (Using the draft's raw softmax for q
while sampling from a processed one is a known bug that silently biases the output.) The
processing uses transformers' own logits warpers, in the order `generate` applies them.

Under an output format the grammar's mask comes first: the tokens it forbids get logit -inf
(`masked`), then temperature, top-k and top-p run on what is left, as vLLM and SGLang apply
their grammar bitmask to the logits before their sampling parameters. So top-k keeps the k
most likely allowed tokens, and q and p are both the masked, processed distributions the
tokens are drawn from (tests/test_sampling.py checks it against a hand computation).
"""

from __future__ import annotations

import torch
from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from specviz.settings import GenerationSettings

_NO_IDS = torch.empty(0, dtype=torch.long)  # the warpers used here ignore input_ids


def processors(settings: GenerationSettings) -> LogitsProcessorList:
    """The warpers for these settings (empty for greedy, where only the argmax matters)."""
    procs = LogitsProcessorList()
    if settings.greedy:
        return procs
    if settings.temperature != 1.0:
        procs.append(TemperatureLogitsWarper(float(settings.temperature)))
    if settings.top_k > 0:
        procs.append(TopKLogitsWarper(top_k=settings.top_k))
    if settings.top_p < 1.0:
        procs.append(TopPLogitsWarper(top_p=float(settings.top_p)))
    return procs


class Sampler:
    """Turns rows of logits (n, V) into processed distributions and draws from them.

    `vocab_size` cuts off LM-head padding beyond the shared vocabulary. Computation runs in
    at least float32 (bf16 logits are promoted; float64 stays float64).
    """

    def __init__(self, settings: GenerationSettings, vocab_size: int):
        self.greedy = settings.greedy
        self.vocab_size = vocab_size
        self._procs = processors(settings)
        # The run's grammar (`grammar.matcher.Grammar`), where a drafter draws under one: its
        # `allowed(path)` masks the draft's rows (`Drafter.constrain`).
        self.grammar = None

    def masked(self, logits: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
        """`logits` (vocabulary-cut, (n, V) or (V,)) with the tokens `allowed` (bool, as many
        entries) forbids set to -inf: the grammar's mask, before any processing."""
        if allowed is None:
            return logits
        return logits.masked_fill(~allowed.to(logits.device).reshape(logits.shape), float("-inf"))

    def logits(self, logits: torch.Tensor) -> torch.Tensor:
        logits = logits[..., : self.vocab_size]
        return logits.to(torch.promote_types(logits.dtype, torch.float32))

    def distribution(self, logits: torch.Tensor) -> torch.Tensor:
        """The processed distribution per row; a one-hot on the argmax when greedy."""
        scores = self.logits(logits)
        if scores.dim() == 1:
            return self.distribution(scores[None])[0]
        if self.greedy:
            return torch.zeros_like(scores).scatter_(-1, scores.argmax(-1, keepdim=True), 1.0)
        return self._procs(_NO_IDS, scores).softmax(-1)

    def choose(self, dist: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        """One token per row of `dist` (from `distribution`): argmax when greedy, else a sample."""
        if self.greedy:
            return dist.argmax(-1)
        return draw(dist, generator)


def draw(dist: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One index per row of `dist` (non-negative weights, any positive total), drawn with
    probability weight / total: one uniform per row against the row's cumulative sum.

    torch.multinomial draws a single sample by an exponential race, one exponential variate
    per token from one sequential generator, which over a 150k vocabulary costs more than a
    cumulative sum and a binary search (docs/BENCHMARKS.md, "Figures behind the code"). The sum runs in float64 (float32 on devices
    without it), so a token's share differs from its weight by rounding only; a zero weight
    is never drawn.
    """
    wide = torch.float32 if dist.device.type == "mps" else torch.float64
    cdf = dist.cumsum(-1, dtype=wide)
    total = cdf[..., -1:].contiguous()
    if not bool((total > 0).all()) or not bool(torch.isfinite(total).all()):
        raise ValueError("cannot draw from a distribution whose total is not a positive number")
    u = torch.rand(total.shape, generator=generator, dtype=wide, device=dist.device) * total
    index = torch.searchsorted(cdf, u, right=True)
    # u * total can round up to total itself: keep to the last index with positive weight.
    last = torch.searchsorted(cdf, total, right=False)
    return torch.minimum(index, last).squeeze(-1)
