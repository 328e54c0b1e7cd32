"""One teacher-forced pass per model over the text: what each model would say at every position.

The target and every draft model read the prompt, then the answer in chunks of CHUNK tokens
(logits for every row), each position i conditioned on the prompt and answer[:i] exactly as a
run's context is once its earlier tokens are out. From each row the tournament keeps only
what it needs, so memory stays one chunk of rows per model:

- the target: its argmax and top-2 logit gap (does it agree with the text, and how nearly
  tied is it), and under sampling the TARGET_TOP most likely tokens of the distribution sampled
  from, for a copied token's chance p(x);
- a draft model (the draft, the target's early layers): its greedy choice and confidence
  (the top probability a drafter ranks by, `drafters.base.ranked`), its top-2 logit gap, its
  TREE_WIDTH most likely tokens with their probabilities and the text token's probability (a
  tree's shape), and under sampling the overlap sum_x min(p(x), q(x)) with the target.

A batched pass can round differently from the one-token passes of a run, so a near tie
(a top-2 gap under NEAR_TIE) is where a replayed choice may differ from a run's: `near_ties`
lists them and the tournament shows them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from specviz.drafters.base import ranked
from specviz.lm import rows
from specviz.lm.runtime import LM
from specviz.lm.sampling import Sampler
from specviz.workshop.tournament.text import Text

CHUNK = 64  # answer positions per pass: one chunk of logits rows per model in memory
TREE_WIDTH = 8  # the most children a draft-model tree takes per node (settings' tree_width span)
TARGET_TOP = 64  # the target's likeliest tokens kept per position under sampling
# A top-2 logit gap this small may flip between a batched pass and a run's one-token passes:
# llama.cpp's quantised products round a pass over several tokens differently from a one-token
# pass (tests/test_runtime_llamacpp_bundled.py holds greedy output to the same bound), as bf16 does.
NEAR_TIE = 0.5

Progress = Callable[[float, str], None]


@dataclass
class TargetRows:
    argmax: np.ndarray  # (n,) the target's greedy choice at each answer position
    gap: np.ndarray  # (n,) its top-2 logit gap there
    top_ids: np.ndarray | None = None  # (n, TARGET_TOP) under sampling: its likeliest tokens
    top_p: np.ndarray | None = None  # (n, TARGET_TOP) and their probabilities
    prefill_ms: float = 0.0  # the pass over the prompt, as timed here
    pass_ms: float = 0.0  # the pass over the answer

    def p_of(self, i: int, token: int) -> float:
        """The target's probability of `token` at position i (0 outside its TARGET_TOP likeliest)."""
        hit = np.flatnonzero(self.top_ids[i] == token)
        return float(self.top_p[i, hit[0]]) if hit.size else 0.0


@dataclass
class DraftRows:
    name: str
    argmax: np.ndarray  # (n,) greedy choice given the text before each position
    confidence: np.ndarray  # (n,) the top probability it ranks by
    gap: np.ndarray  # (n,) top-2 logit gap
    top_ids: np.ndarray  # (n, TREE_WIDTH) its likeliest tokens, best first
    top_p: np.ndarray  # (n, TREE_WIDTH) their probabilities (ranked)
    text_p: np.ndarray  # (n,) the probability it gives the text's token
    overlap: np.ndarray | None = None  # (n,) under sampling: sum min(p, q)
    pass_ms: float = 0.0
    prefill_ms: float = 0.0  # its read of the prompt, as timed here

    def matches(self, answer: list[int]) -> np.ndarray:
        return self.argmax == np.asarray(answer)


@dataclass
class Reader:
    """One model's LM and what is kept of its rows."""

    name: str
    lm: LM
    kept: dict[str, list[np.ndarray]] = field(default_factory=dict)
    ms: float = 0.0

    def keep(self, **arrays: np.ndarray) -> None:
        for k, v in arrays.items():
            self.kept.setdefault(k, []).append(v)

    def joined(self, key: str) -> np.ndarray:
        return np.concatenate(self.kept[key])


def top2_gap(logits: torch.Tensor) -> np.ndarray:
    values, _ = rows.top(logits, 2)
    return (values[:, 0] - values[:, 1]).numpy().astype(np.float64)


def _read_target(reader: Reader, logits: torch.Tensor, sampler: Sampler) -> torch.Tensor | None:
    reader.keep(argmax=rows.argmax(logits).numpy(), gap=top2_gap(logits))
    if sampler.greedy:
        return None
    p = sampler.distribution(logits)
    values, ids = rows.top(p, TARGET_TOP)
    reader.keep(top_ids=ids.numpy(), top_p=values.numpy())
    return p


def _read_draft(reader: Reader, logits: torch.Tensor, sampler: Sampler, answer: np.ndarray, p) -> None:
    dist = ranked(sampler, logits)
    values, ids = rows.top(dist, TREE_WIDTH)
    reader.keep(
        argmax=rows.argmax(logits).numpy(),
        confidence=values[:, 0].numpy().astype(np.float64),
        gap=top2_gap(logits),
        top_ids=ids.numpy(),
        top_p=values.numpy().astype(np.float64),
        text_p=dist[torch.arange(len(answer)), torch.from_numpy(answer)].numpy().astype(np.float64),
    )
    if p is not None:
        reader.keep(overlap=torch.minimum(p, sampler.distribution(logits)).sum(-1).numpy().astype(np.float64))


def _timed_feed(reader: Reader, ids: list[int], keep: int) -> torch.Tensor:
    start = time.perf_counter()
    out = reader.lm.feed(torch.tensor(ids, dtype=torch.long, device=reader.lm.device), keep=keep)
    reader.ms += (time.perf_counter() - start) * 1000
    return out


@torch.inference_mode()
def read_all(
    text: Text, target: LM, drafts: dict[str, LM], sampler: Sampler, progress: Progress | None = None
) -> tuple[TargetRows, dict[str, DraftRows]]:
    """Every model over the text: the prompt, then the answer CHUNK positions at a time."""
    readers = [Reader("target", target)] + [Reader(name, lm) for name, lm in drafts.items()]
    for lm in (r.lm for r in readers):
        lm.reset()
    prefill_ms = {}
    for r in readers:  # the prompt but its last token, whose row is the answer's first
        if len(text.prompt_ids) > 1:
            _timed_feed(r, text.prompt_ids[:-1], 1)
        prefill_ms[r.name], r.ms = r.ms, 0.0
    fed = [text.prompt_ids[-1]] + text.answer_ids[:-1]
    for lo in range(0, text.n, CHUNK):
        hi = min(lo + CHUNK, text.n)
        if progress:
            progress(lo / text.n, f"reading the answer's tokens {lo + 1}-{hi} of {text.n}")
        answer = np.asarray(text.answer_ids[lo:hi], dtype=np.int64)
        p = _read_target(readers[0], sampler.logits(_timed_feed(readers[0], fed[lo:hi], 0)), sampler)
        for r in readers[1:]:
            _read_draft(r, sampler.logits(_timed_feed(r, fed[lo:hi], 0)), sampler, answer, p)
    t = readers[0]
    target_rows = TargetRows(
        t.joined("argmax"),
        t.joined("gap"),
        t.joined("top_ids") if "top_ids" in t.kept else None,
        t.joined("top_p") if "top_p" in t.kept else None,
        prefill_ms=prefill_ms["target"],
        pass_ms=t.ms,
    )
    return target_rows, {r.name: _draft_rows(r, prefill_ms[r.name]) for r in readers[1:]}


def _draft_rows(r: Reader, prefill_ms: float) -> DraftRows:
    keys = ("argmax", "confidence", "gap", "top_ids", "top_p", "text_p")
    overlap = r.joined("overlap") if "overlap" in r.kept else None
    return DraftRows(r.name, *(r.joined(k) for k in keys), overlap=overlap, pass_ms=r.ms, prefill_ms=prefill_ms)


def near_ties(gap: np.ndarray) -> list[int]:
    """The positions whose top-2 logit gap is under NEAR_TIE."""
    return np.flatnonzero(gap < NEAR_TIE).tolist()
