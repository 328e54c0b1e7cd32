"""Drafting for a target whose tokenizer differs from the draft's.

Both drafters propose in the TARGET's ids, so the engine's loop and acceptance rule stay as
they are; each keeps the draft's own tokens and KV cache in step with the committed text.

    text          the draft writes k tokens of its own; their bytes are re-encoded with the
                  target's tokenizer behind a look-behind window of committed target tokens
                  (a draft token may end mid-word, a target token may span two draft tokens),
                  and the target tokens that come out are proposed as point masses (q = None),
                  which the rule verifies exactly at any temperature.
    intersection  the draft's processed distribution restricted to the tokens both
                  vocabularies have (renormalised) and mapped to target ids: the draft samples
                  from exactly that q, so the rule stays exact; tokens outside the
                  intersection are never proposed (arXiv 2502.05202, token-level intersection).

After a round the draft's tokens are brought in step with the target's committed tokens: the
new committed text is re-encoded in draft tokens behind a look-behind window (or, for the
intersection, mapped id for id when every new token is shared), the cache is cropped to the
common prefix and the rest is fed with the next round's first draft pass.

Each Proposal carries `alignment`: one `events.AlignedToken` per draft token of the round,
whose candidates are the indices into `Proposal.tokens` of the target tokens its bytes became.
"""

from __future__ import annotations

import os
import time
from typing import Callable

import torch

from specviz.choices import INTERSECTION, TEXT
from specviz.drafters.base import ChainDrafting, KeepGoing, Proposal, TreeBudget, ms_since, next_token
from specviz.errors import UserError, shown
from specviz.lm.runtime import LM, open_lm
from specviz.lm.prompt import model_stop_ids, stop_ids
from specviz.lm.sampling import Sampler
from specviz.lm.pair import ModelPair
from specviz.events import AlignedToken
from specviz.models.alignment.vocab import head_rows
from specviz.models.alignment.vocab_map import METHODS, TokenText, VocabMap, vocab_map
from specviz.settings import GenerationSettings

# Tokens re-encoded behind new text, on either side: enough to cover a word that a token
# boundary cut (BPE merges do not cross pre-tokenised words).
LOOKBEHIND = 8


class DraftSide:
    """The draft model's view of the committed text: its own token ids `ids` standing for the
    target's committed ids `context[:t_len]`, and the KV cache holding a prefix of them (and of
    the last round's drafts)."""

    def __init__(self, lm: LM, draft_text: TokenText, target_text: TokenText):
        self.lm = lm
        self.d = draft_text
        self.t = target_text
        self.ids: list[int] = []
        self.t_len = 0
        self.cached: list[int] = []  # what the cache holds, id for id

    def begin(self, prompt_ids: list[int]) -> None:
        self.lm.reset()
        self.cached = []
        self.ids = self.d.encode(self.t.bytes(prompt_ids))
        if not self.ids:
            raise UserError("the draft's tokenizer turns the prompt into no tokens at all")
        self.t_len = len(prompt_ids)
        if len(self.ids) > 1:
            self.feed(self.ids[:-1])

    def sync(self, context: list[int], direct: Callable[[list[int]], list[int] | None] | None = None) -> list[int]:
        """Catch up with the target's committed `context`; return the draft ids still to feed
        (at least one: the draft needs the logits after the last committed token)."""
        new = context[self.t_len :]
        if new:
            mapped = direct(new) if direct is not None else None
            if mapped is not None:
                self.ids = self.ids + mapped
            else:
                b = window_start(self.ids, self.d)
                self.ids = self.ids[:b] + self.d.encode(self.d.bytes(self.ids[b:]) + self.t.bytes(new))
            self.t_len = len(context)
        keep = min(len(os.path.commonprefix([self.cached, self.ids])), len(self.ids) - 1)
        self.lm.crop(keep)
        del self.cached[keep:]
        return self.ids[keep:]

    def feed(self, ids: list[int]) -> torch.Tensor:
        """Run the draft over `ids`; the logits after the last one."""
        logits = self.lm.feed(torch.tensor(ids, dtype=torch.long))[-1]
        self.cached.extend(ids)
        return logits


def window_start(ids: list[int], text: TokenText, lookbehind: int = LOOKBEHIND) -> int:
    """Where a re-encoding window over the last `lookbehind` tokens of `ids` starts: moved back
    until it starts on a whole character."""
    b = max(0, len(ids) - lookbehind)
    while b > 0 and text.starts_mid_character(ids[b]):
        b -= 1
    return b


def to_target(target_text: TokenText, context: list[int], drafted: bytes) -> tuple[list[int], list[tuple[int, int]]]:
    """Target ids for the bytes `drafted` written after the committed `context`, and each
    one's byte span within `drafted`.

    The last few committed tokens are re-encoded with the new bytes, so a target token that
    spans the join comes out whole; if that re-encoding would change a committed token (the
    committed ids cannot change), the new bytes are encoded on their own.
    """
    a = window_start(context, target_text)
    tail = context[a:]
    ids = target_text.encode(target_text.bytes(tail) + drafted)
    if ids[: len(tail)] == tail:
        new = ids[len(tail) :]
    else:
        new = target_text.encode(drafted)
    return new, _spans(target_text, new)


def overlapping(span: tuple[int, int], spans: list[tuple[int, int]]) -> list[int]:
    """Indices of `spans` that share at least one byte with `span` (or touch an empty one)."""
    lo, hi = span
    return [j for j, (s, e) in enumerate(spans) if (s < hi and lo < e) or (s == e and lo <= s <= hi)]


class _OwnTokens(ChainDrafting):
    """What both cross-tokenizer drafters share: the draft's own side (its tokens and cache,
    kept in step with the committed text at the start of each round), the sampler and the
    generator."""

    def __init__(
        self, lm: LM, draft_text: TokenText, target_text: TokenText, sampler: Sampler, generator: torch.Generator | None
    ):
        self.side = DraftSide(lm, draft_text, target_text)
        self._sampler = sampler
        self._generator = generator

    def begin(self, prompt_ids: torch.Tensor) -> None:
        self.side.begin(prompt_ids.tolist())

    def accepted(self, n: int) -> None:
        """Nothing to do now: the next round's sync brings the draft up to what the target committed."""

    def unread(self, context_len: int) -> int:
        return context_len - self.side.t_len  # in target tokens: about as many of the draft's


class TextDrafter(_OwnTokens):
    """Drafts in the draft's own tokens; proposes their text re-encoded in target tokens."""

    def __init__(
        self,
        lm: LM,
        draft_text: TokenText,
        target_text: TokenText,
        sampler: Sampler,
        generator: torch.Generator | None,
        *,
        draft_eos: set[int],
        target_eos: int | None,
        max_draft_factor: int = 2,
    ):
        super().__init__(lm, draft_text, target_text, sampler, generator)
        self.name = "model-text"
        self.method = TEXT
        self._draft_eos = draft_eos
        self._target_eos = target_eos
        self._factor = max_draft_factor

    def propose(
        self, context: torch.Tensor, k: int, keep_going: KeepGoing, budget: TreeBudget | None = None
    ) -> Proposal:
        start = time.perf_counter()
        if k <= 0:
            return Proposal.empty(context, alignment=[])
        ctx = context.tolist()
        pending = self.side.sync(ctx)
        drafted: list[int] = []
        conf: list[float] = []
        judged = 0  # target candidates keep_going has been asked about
        stopped = eos = False
        cands: list[int] = []
        spans: list[tuple[int, int]] = []
        d_spans: list[tuple[int, int]] = []
        while len(drafted) < self._factor * k + 2:
            y, c = self._next(pending)
            pending = [y]
            if y in self._draft_eos:
                eos = True
                break
            drafted.append(y)
            conf.append(c)
            d_spans = _spans(self.side.d, drafted)
            cands, spans = to_target(self.side.t, ctx, self.side.d.bytes(drafted))
            settled = len(cands) - 1  # the last target token may still grow with the next draft
            while judged < min(settled, k) and not stopped:
                stopped = not keep_going(_confidence(spans[judged], d_spans, conf))
                judged += 1
            if stopped or settled >= k:
                break
        passes = len(drafted) + eos
        n = judged if stopped else len(cands)
        tokens, spans = cands[:n], spans[:n]
        if eos and len(tokens) == len(cands) and self._target_eos is not None:
            tokens = tokens + [self._target_eos]
        tokens = tokens[:k]
        confidence = [_confidence(s, d_spans, conf) for s in spans[: len(tokens)]]
        if len(confidence) < len(tokens):  # the target's EOS standing for the draft's
            confidence.append(conf[-1] if conf else 1.0)
        return Proposal(
            tokens=context.new_tensor(tokens, dtype=torch.long),
            q=None,
            ms=ms_since(start),
            passes=passes,
            confidence=confidence,
            alignment=self._alignment(drafted, d_spans, spans, tokens, pending[0] if eos else None),
        )

    def _alignment(
        self,
        drafted: list[int],
        d_spans: list[tuple[int, int]],
        spans: list[tuple[int, int]],
        tokens: list[int],
        eos: int | None,
    ) -> list[AlignedToken]:
        """Each drafted token (and the draft's EOS, where it stopped on one) with the proposed
        target tokens its text overlaps."""
        text = self.side.d.text
        alignment = [
            AlignedToken(y, text([y]), [j for j in overlapping(d_spans[i], spans) if j < len(tokens)])
            for i, y in enumerate(drafted)
        ]
        if eos is not None:
            ends = [len(tokens) - 1] if tokens and tokens[-1] == self._target_eos else []
            alignment.append(AlignedToken(eos, text([eos]), ends))
        return alignment

    def _next(self, pending: list[int]) -> tuple[int, float]:
        token, conf, _ = next_token(self._sampler, self._sampler.logits(self.side.feed(pending)), self._generator)
        return int(token), float(conf)


def _spans(text: TokenText, ids: list[int]) -> list[tuple[int, int]]:
    out, at = [], 0
    for i in ids:
        n = len(text.bytes([i]))
        out.append((at, at + n))
        at += n
    return out


def _confidence(span: tuple[int, int], d_spans: list[tuple[int, int]], conf: list[float]) -> float:
    """The draft's confidence in a target token: the least confident draft token it overlaps."""
    hit = overlapping(span, d_spans)
    return min((conf[i] for i in hit), default=conf[-1] if conf else 1.0)


class IntersectionDrafter(_OwnTokens):
    """Drafts from the draft's distribution restricted to the shared tokens, in target ids."""

    def __init__(
        self,
        lm: LM,
        vmap: VocabMap,
        draft_text: TokenText,
        target_text: TokenText,
        sampler: Sampler,
        generator: torch.Generator | None,
        *,
        target_eos: set[int],
    ):
        if vmap.shared == 0:
            raise UserError(
                "the draft and the target share no token: the intersection method cannot propose anything; use vocab method text"
            )
        super().__init__(lm, draft_text, target_text, sampler, generator)
        self.name = "model-intersection"
        self.method = INTERSECTION
        self._eos = target_eos
        self._d2t = vmap.draft_to_target
        self._t2d = vmap.target_to_draft
        self._target_rows = vmap.target_rows
        self._allowed = vmap.allowed

    def propose(
        self, context: torch.Tensor, k: int, keep_going: KeepGoing, budget: TreeBudget | None = None
    ) -> Proposal:
        start = time.perf_counter()
        if k <= 0:
            return Proposal.empty(context, alignment=[])
        pending = self.side.sync(context.tolist(), self._direct)
        drafted, tokens, dists, confidence = [], [], [], []
        for _ in range(k):
            logits = self._sampler.logits(self.side.feed(pending))
            qd = self._draft_distribution(logits)
            y = int(self._sampler.choose(qd, self._generator))
            if self._sampler.greedy:
                masked = logits.masked_fill(~self._allowed[: logits.shape[-1]], float("-inf"))
                conf = float(masked.softmax(-1).max())
            else:
                conf = float(qd.max())
                dists.append(self._to_target(qd))
            x = int(self._d2t[y])
            drafted.append(y)
            tokens.append(x)
            confidence.append(conf)
            if not keep_going(conf) or x in self._eos:
                break
            pending = [y]
        alignment = [AlignedToken(y, self.side.d.text([y]), [i]) for i, y in enumerate(drafted)]
        return Proposal(
            tokens=context.new_tensor(tokens, dtype=torch.long),
            q=torch.stack(dists).to(context.device) if dists else None,
            ms=ms_since(start),
            passes=len(drafted),
            confidence=confidence,
            alignment=alignment,
        )

    def _draft_distribution(self, logits: torch.Tensor) -> torch.Tensor:
        """The draft's processed distribution over its own ids, restricted to the
        intersection: ids outside it are masked before temperature / top-k / top-p, so the
        softmax renormalises over the shared ids (greedy: a one-hot on the shared argmax)."""
        masked = logits.masked_fill(~self._allowed[: logits.shape[-1]].to(logits.device), float("-inf"))
        return self._sampler.distribution(masked)

    def _to_target(self, qd: torch.Tensor) -> torch.Tensor:
        """q over target ids: each shared draft id's probability moved to its target id."""
        q = qd.new_zeros(self._target_rows)
        d = torch.nonzero(self._allowed[: qd.shape[-1]]).squeeze(-1)
        q[self._d2t[d]] = qd[d]
        return q

    def _direct(self, new: list[int]) -> list[int] | None:
        """The draft ids of new target tokens, id for id, when all of them are shared."""
        out = [int(self._t2d[x]) if 0 <= x < self._t2d.numel() else -1 for x in new]
        return None if any(i < 0 for i in out) else out


def make_cross_drafter(
    pair: ModelPair, settings: GenerationSettings, generator: torch.Generator | None = None, method: str | None = None
):
    """The text or intersection drafter for a pair whose draft has its own tokenizer
    (`pair.draft_tokenizer`); `method` None: the pair's default (`pair.vocab_map.method`)."""
    if pair.draft is None or pair.draft_tokenizer is None:
        raise UserError(f"the pair {pair.name!r} has no draft with its own tokenizer")
    rows = head_rows(pair.draft)
    if pair.vocab_map is None:  # a pair built by hand: map it once and keep the map with the pair
        pair.vocab_map = vocab_map(pair.draft_tokenizer, pair.tokenizer, draft_rows=rows, target_rows=pair.vocab_size)
    vmap = pair.vocab_map
    method = method or vmap.method
    if method not in METHODS:
        raise UserError(f"vocab method must be one of {', '.join(METHODS)} (got {shown(method)})")
    lm = open_lm(pair.draft, pair.device)
    draft_text, target_text = vmap.draft_text, vmap.target_text
    sampler = Sampler(settings, min(rows, vmap.draft_to_target.numel()))
    if method == INTERSECTION:
        return IntersectionDrafter(lm, vmap, draft_text, target_text, sampler, generator, target_eos=stop_ids(pair))
    return TextDrafter(
        lm,
        draft_text,
        target_text,
        sampler,
        generator,
        draft_eos=model_stop_ids(pair.draft_tokenizer, pair.draft),
        target_eos=_target_eos(pair),
    )


def _target_eos(pair: ModelPair) -> int | None:
    """The target id a draft EOS stands for: the target tokenizer's EOS if it stops a run."""
    stops = stop_ids(pair)
    eos = getattr(pair.tokenizer, "eos_token_id", None)
    if isinstance(eos, int) and eos in stops:
        return eos
    return min(stops) if stops else None
