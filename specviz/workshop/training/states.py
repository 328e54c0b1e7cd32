"""The target's hidden states over the corpus: what a head learns to run ahead.

Each window is read by the target through the run's own LM (`lm.runtime.open_lm`), so the
states are the ones a head reads when it drafts on that runtime: for every position, the
final hidden state (`features`), the token there, and the target's likeliest next tokens
with their probabilities.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from specviz.lm import rows
from specviz.lm.runtime import open_lm

# Tokens one pass reads (a window goes in pieces of this size, the cache carrying on).
PIECE = 256
# The target's likeliest next tokens kept per position, with their probabilities: what the
# head's distribution is taught (the rest of the vocabulary holds little of the mass).
TEACHER_TOP = 16


# The longest answer the target writes to one request.
ANSWER_TOKENS = 256


@dataclass
class States:
    features: torch.Tensor  # (N, H) float16
    tokens: torch.Tensor  # (N,) the token at each position
    top_ids: torch.Tensor  # (N, TEACHER_TOP) the target's likeliest next tokens, likeliest first
    top_p: torch.Tensor  # (N, TEACHER_TOP) float16, their probabilities
    window: torch.Tensor  # (N,) which window each position belongs to
    files: list[str]  # one per window

    def __len__(self) -> int:
        return self.tokens.numel()

    @property
    def argmax(self) -> torch.Tensor:
        """(N,) the target's greedy choice after each position."""
        return self.top_ids[:, 0]

    @staticmethod
    def joined(parts: list["States"], align: int) -> "States":
        """One set of states from several, each part's windows renumbered from a multiple of
        `align` (so a window's number modulo `align` is what it was in its part)."""
        offset, windows, files = 0, [], []
        for part in parts:
            windows.append(part.window + offset)
            files += part.files + [""] * (-len(part.files) % align)
            offset = len(files)
        fields = ("features", "tokens", "top_ids", "top_p")
        return States(*(torch.cat([getattr(p, f) for p in parts]) for f in fields), torch.cat(windows), files)


class Recorder:
    """Collects, position by position, what a head learns from: the state, the token there and
    the target's next-token choices after it."""

    def __init__(self):
        self.feats, self.toks, self.top_ids, self.top_p, self.which, self.files = [], [], [], [], [], []

    def add(self, features: torch.Tensor, logits: torch.Tensor, tokens: torch.Tensor) -> None:
        p, ids = rows.top(logits.float().cpu().softmax(-1), TEACHER_TOP)
        self.feats.append(features.to("cpu", torch.float16))
        self.top_ids.append(ids)
        self.top_p.append(p.half())
        self.toks.append(tokens.cpu())
        self.which.append(torch.full((len(tokens),), len(self.files)))

    def end_window(self, name: str) -> None:
        self.files.append(name)

    @property
    def read(self) -> int:
        return sum(len(t) for t in self.toks)

    def states(self) -> States:
        parts = (self.feats, self.toks, self.top_ids, self.top_p, self.which)
        return States(*(torch.cat(x) for x in parts), self.files)


def collect(pair, windows, budget: int, progress=None, deadline: float | None = None) -> States:
    """The target's states over `windows` ((name, ids) pairs) until `budget` tokens (or the
    `deadline`, a perf_counter time) are read."""
    lm = open_lm(pair.target, pair.device)
    lm.keep_features()
    rec = Recorder()
    for name, ids in windows:
        if rec.read >= budget or (deadline is not None and time.perf_counter() > deadline):
            break
        ids = ids[: budget - rec.read]
        lm.reset()
        for lo in range(0, len(ids), PIECE):
            piece = torch.tensor(ids[lo : lo + PIECE], dtype=torch.long, device=pair.device)
            logits = lm.feed(piece, keep=0)[:, : pair.vocab_size]
            rec.add(lm.features, logits, piece)
        rec.end_window(name)
        if progress is not None:
            progress(rec.read / budget, f"the target read {rec.read:,} of {budget:,} tokens")
    _close(lm)
    return rec.states()


def answer(pair, requests, budget: int, progress=None, deadline: float | None = None) -> States:
    """The target's own greedy answers to chat `requests`, with its states along them (from
    the request's last token on), until `budget` answer tokens (or the `deadline`)."""
    from specviz.lm.prompt import encode_prompt, stop_ids
    from specviz.settings import GenerationSettings

    settings, stops = GenerationSettings(), stop_ids(pair)
    lm = open_lm(pair.target, pair.device)
    lm.keep_features()
    rec = Recorder()
    for text in requests:
        if rec.read >= budget or (deadline is not None and time.perf_counter() > deadline):
            break
        lm.reset()
        ids = torch.tensor(encode_prompt(pair, text, settings), dtype=torch.long, device=pair.device)
        logits = lm.feed(ids, keep=1)[:, : pair.vocab_size]
        token = ids[-1:]
        for _ in range(min(ANSWER_TOKENS, budget - rec.read)):
            rec.add(lm.features, logits, token)
            token = rows.argmax(logits.float().cpu()).to(pair.device)
            if int(token) in stops:
                break
            logits = lm.feed(token, keep=1)[:, : pair.vocab_size]
        rec.end_window(text)
        if progress is not None:
            progress(
                rec.read / budget, f"the target answered {len(rec.files):,} requests: {rec.read:,} of {budget:,} tokens"
            )
    _close(lm)
    return rec.states()


def _close(lm) -> None:
    close = getattr(lm, "close", None)
    if close is not None:
        close()
