"""The target drafts for itself: a trained head (`head_model.DraftHead`) runs its state ahead.

Each round starts from the target's own hidden state at the last accepted position (the
verify pass computed it; the LM keeps it in `features`) and the token the target emitted
after it. The head guesses the next state, reads out q over its vocabulary subset, draws a
token from q, and goes on from its own guess. Nothing is cached: a round after any other
(accepted, rejected, or drafting nothing) starts from the newest verified state, so there is
no draft KV cache to catch up.

Heads live in the cache under `heads/`, one per target, trained by
`python -m specviz train-head` (`specviz.workshop.training`).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import torch

from specviz.choices import HEAD
from specviz.drafters.base import ChainDrafting, KeepGoing, Proposal, Sampling, SourceNote, TreeBudget, draft_chain
from specviz.drafters.head_model import DraftHead, HeadInfo, load
from specviz.errors import UserError
from specviz.lm.sampling import Sampler

# Per head file: its modification time when read, the head and its info, and D by thread count.
_loaded: dict[str, tuple[float, DraftHead, HeadInfo, dict[int, float]]] = {}


def target_label(pair) -> str:
    """The name a target's head is filed under: its model's label, else the pair's name."""
    return getattr(pair, "target_label", None) or pair.name


def head_path(label: str) -> Path:
    from specviz.models.files.cache import cache_root

    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-").lower() or "target"
    return cache_root() / "heads" / f"{slug}.safetensors"


def train_command(pair) -> str:
    return f"python -m specviz train-head --pair {pair.name}"


def _entry(pair) -> tuple[float, DraftHead, HeadInfo, dict[int, float]]:
    """This pair's target's head file as read (again once the file changes)."""
    path = head_path(target_label(pair))
    if not path.is_file():
        raise UserError(
            f"no draft head is trained for {target_label(pair)} yet: {train_command(pair)} "
            f"trains one on this machine (minutes; see docs/DRAFTERS.md)"
        )
    mtime = path.stat().st_mtime
    if _loaded.get(str(path), (None,))[0] != mtime:
        _loaded[str(path)] = (mtime, *load(path), {})
    entry = _loaded[str(path)]
    if entry[1].vocab_size < pair.vocab_size:
        raise UserError(
            f"{path}: a head for a vocabulary of {entry[1].vocab_size:,}, this target has {pair.vocab_size:,}"
        )
    return entry


def head_for(pair) -> tuple[DraftHead, HeadInfo]:
    """The trained head for this pair's target."""
    _, head, info, _ = _entry(pair)
    return head, info


def draft_ms(pair, settings=None) -> float:
    """What one drafted token costs here (its `DRAFTERS` entry's price): the head's step and readout,
    timed as every pass is (`lm.timing.median_ms`), once per head file and thread count."""
    from specviz.lm.timing import median_ms

    _, head, _, costs = _entry(pair)
    threads = torch.get_num_threads()
    if threads not in costs:
        state, token = head.readout[:1].clone(), head.subset[:1]

        @torch.inference_mode()
        def step(n: int) -> None:
            head(state, token)

        costs[threads] = median_ms(step, [1], device=head.readout.device)[1]
    return costs[threads]


class HeadDrafter(Sampling, ChainDrafting):
    def __init__(
        self, name: str, head: DraftHead, target, sampler: Sampler, generator: torch.Generator | None, eos_ids: set[int]
    ):
        keep = getattr(target, "keep_features", None)
        if keep is None:
            raise UserError(
                "the head drafter reads the target's hidden states: this target's loop does not give them "
                "(the lean torch loop and llama.cpp do)"
            )
        self.name = name
        self._head = head
        self._target = target
        self._sampler = sampler
        self._generator = generator
        self._eos = eos_ids
        self._state: torch.Tensor | None = None

    def begin(self, prompt_ids: torch.Tensor) -> None:
        # Hidden states from here on: the prompt was read as plain decoding reads it (on
        # llama.cpp keeping them changes how a batch is read out, and so its rounding), so
        # this round drafts nothing and its pass gives the first state.
        self._target.keep_features()
        self._state = None

    def propose(
        self, context: torch.Tensor, k: int, keep_going: KeepGoing, budget: TreeBudget | None = None
    ) -> Proposal:
        start = time.perf_counter()
        if k <= 0 or self._state is None:
            return Proposal.empty(context)
        state = self._state[None]

        def step(fed: torch.Tensor) -> torch.Tensor:
            nonlocal state
            for token in fed.split(1):  # a drafted token, then any the grammar forced after it
                state, logits = self._head(state, token.to(state.device))
            return self._sampler.logits(self._head.full_row(logits[0]))

        return draft_chain(
            step, context[-1:], k, keep_going, self._eos, self._sampler, self._generator, start, source=SourceNote(HEAD)
        )

    def accepted(self, n: int) -> None:
        # The verify pass's row after the last accepted token.
        self._state = self._target.features[n].to(self._head.readout.device, torch.float32)


def make(pair, settings, *, generator=None, history=(), target=None) -> HeadDrafter:
    from specviz.lm.prompt import stop_ids

    head, info = head_for(pair)
    head.to(pair.device)
    return HeadDrafter(
        f"head-{info.subset}", head, target, Sampler(settings, pair.vocab_size), generator, stop_ids(pair)
    )
