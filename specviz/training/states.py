"""The target's hidden states over the corpus: what a head learns to run ahead.

Each window is read by the target through the run's own LM (`lm.runtime.open_lm`), so the
states are the ones a head reads when it drafts on that runtime: for every position, the
final hidden state (`features`), the token there, and the target's argmax after it.
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


@dataclass
class States:
    features: torch.Tensor  # (N, H) float16
    tokens: torch.Tensor  # (N,) the token at each position
    argmax: torch.Tensor  # (N,) the target's greedy choice after each position
    top_ids: torch.Tensor  # (N, TEACHER_TOP) its likeliest next tokens, likeliest first
    top_p: torch.Tensor  # (N, TEACHER_TOP) float16, their probabilities
    window: torch.Tensor  # (N,) which window each position belongs to
    files: list[str]  # one per window

    def __len__(self) -> int:
        return self.tokens.numel()


def collect(pair, windows, budget: int, progress=None, deadline: float | None = None) -> States:
    """The target's states over `windows` ((name, ids) pairs) until `budget` tokens (or the
    `deadline`, a perf_counter time) are read."""
    lm = open_lm(pair.target, pair.device)
    lm.keep_features()
    feats, toks, best, which, files, top_ids, top_p = [], [], [], [], [], [], []
    read = 0
    for name, ids in windows:
        if read >= budget or (deadline is not None and time.perf_counter() > deadline):
            break
        ids = ids[: budget - read]
        lm.reset()
        for lo in range(0, len(ids), PIECE):
            piece = torch.tensor(ids[lo: lo + PIECE], dtype=torch.long, device=pair.device)
            logits = lm.feed(piece, keep=0)[:, : pair.vocab_size].float()
            p, ids_top = rows.top(logits.cpu().softmax(-1), TEACHER_TOP)
            best.append(ids_top[:, 0])
            top_ids.append(ids_top.int())
            top_p.append(p.half())
            feats.append(lm.features.to("cpu", torch.float16))
        toks.append(torch.tensor(ids))
        which.append(torch.full((len(ids),), len(files)))
        files.append(name)
        read += len(ids)
        if progress is not None:
            progress(read / budget, f"the target read {read:,} of {budget:,} tokens")
    close = getattr(lm, "close", None)
    if close is not None:
        close()
    return States(torch.cat(feats), torch.cat(toks), torch.cat(best), torch.cat(top_ids).long(), torch.cat(top_p),
                  torch.cat(which), files)
