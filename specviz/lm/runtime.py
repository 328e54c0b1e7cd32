"""The model interface: what drafting and verifying ask of a model, whatever runs it.

Two runtimes implement `LM`: torch (`lm.torch_runtime.lean.LeanLM`, `lm.torch_runtime.cached.CachedLM`: transformers'
modules, with the CPU speed-ups of `lm.torch_runtime.packed` and friends) and llama.cpp
(`lm.llamacpp_runtime.lm.LlamaCppLM`: the GGUF file as llama.cpp runs it). Drafters, the engine and
the cost model see only this interface; `open_lm` is the one place a runtime's LM is made.
A runtime's `RUNTIMES` entry names its loader; the models it loads are `RuntimeModel`s, so
nothing here or in the engine names a runtime but torch, whose models (transformers' modules)
open no LM of their own: its entry names the function that does (`opens`). No module here
imports a runtime; each registers with this one through its entry.

Trees go in as tokens with their parents (`lm.tree`), never as a mask: torch turns them
into a mask, llama.cpp into sequence membership.

Capabilities name what only some runtimes can do; `RUNTIMES` says which has which, and the
page, the CLI and the bench refuse (or grey out) what the loaded runtime lacks.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

import torch

from specviz.choices import RUNTIMES, TORCH
from specviz.lazy import named

__all__ = ["LM", "RuntimeModel", "missing", "open_lm", "runtime_of"]


def missing(runtime: str, capability: str) -> str | None:
    """Why `runtime` cannot do `capability`, in words, or None when it can."""
    if capability in RUNTIMES[runtime].capabilities:
        return None
    return f"{capability} runs on the torch runtime only; this pair runs on {runtime}"


class LM(Protocol):
    """One model with its own KV cache for one run; `length` tokens are cached."""

    runtime: str
    device: torch.device
    length: int
    vocab_size: int  # width of a logits row (may exceed the tokenizer's: head padding)
    loop: str  # which loop runs its passes, as traces and the cost model's cache key name it

    def feed(self, ids: torch.Tensor, keep: int = 1) -> torch.Tensor:
        """Run the model over `ids` (1-D) after the cached tokens; logits of the last `keep`
        positions (0: all), shape (n_kept, V), float."""

    def feed_tree(self, tokens: torch.Tensor, parents: Sequence[int]) -> torch.Tensor:
        """Run the model once over tree nodes after the cached tokens (`lm.tree`); logits (n, V)."""

    def keep_path(self, path: Sequence[int]) -> None:
        """Keep the context and the open tree's nodes on `path`; drop the rest of the tree."""

    def crop(self, length: int) -> None:
        """Drop cached tokens beyond `length` (and any open tree)."""

    def reset(self) -> None:
        """Empty the cache."""


class RuntimeModel(Protocol):
    """A model loaded by a runtime other than torch (whose models are torch modules): what
    the pair, the cost model and `open_lm` ask of it."""

    runtime: str  # its RUNTIMES name
    precision: str  # in the runtime's words, e.g. llama.cpp's "Q4_K - Medium"
    vocab_size: int  # width of its logits rows
    context_window: int | None  # positions it can attend over, None where unknown
    stop_ids: frozenset[int]  # ids its own files say end generation

    def open_lm(self) -> LM:
        """A fresh LM over this model."""

    def cost_facts(self) -> dict:
        """What its pass costs depend on beyond the machine (files, threads, library version):
        part of the cost model's cache key."""


def runtime_of(model: Any) -> str:
    """The runtime a loaded model belongs to: a torch module's, or the one it names."""
    return TORCH if isinstance(model, torch.nn.Module) else model.runtime


def open_lm(model: Any, device: torch.device) -> LM:
    """A fresh LM over a loaded model: the one its runtime's entry opens (`opens`: a torch
    module gets the lean loop where its shape allows), else the model's own."""
    opens = RUNTIMES[runtime_of(model)].opens
    return named(opens)(model, device) if opens else model.open_lm()
