"""The loaded model pair that the drafters and the engine work on."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from specviz.choices import INT8, TORCH
from specviz.cost_model import CostModel


def dtype_name(dtype: torch.dtype) -> str:
    """A torch dtype's precision name, as the page and the command lines say it: "float32",
    "bfloat16", "float16", or "int8" for a target quantized to int8 (torch.qint8)."""
    return INT8 if dtype == torch.qint8 else str(dtype).removeprefix("torch.")


@dataclass(frozen=True)
class PrecisionChoice:
    """What each model of a pair runs in and why, with the figures measured to choose, for the
    page. The torch runtime's decision (`torch_runtime.precision.choose_precision`) is the
    target's half, its loader adds the draft's; on another runtime both are its files' own."""

    target: str
    reason: str
    draft: str | None = None  # None without a draft model
    draft_reason: str = ""
    measured: dict = field(default_factory=dict)  # {precision: {n: ms}} where the choice was timed


@dataclass
class ModelPair:
    """A target and (optionally) a draft model, on one device, with the target's tokenizer.

    `draft` is None for self-drafting (prompt lookup, early exit). `vocab_size` is the
    shared vocabulary: logits beyond it (LM-head padding) are ignored; for a draft with its
    own tokenizer, the target's ids.

    `dtype` is the target's precision: float32, bfloat16, float16, or torch.qint8 for a target
    quantized to int8 (its activations in float32); `precision_choice` says the target's and
    the draft's precision and why each was chosen (lm/torch_runtime/precision.py).

    On another runtime `target` and `draft` are that runtime's models (`lm.runtime.RuntimeModel`;
    on llama.cpp `LlamaCppModel`s, the GGUF files as they are), not modules; drafters and the
    engine reach either only through `lm.runtime.open_lm`.

    `draft_tokenizer` is None when the draft shares the target's vocabulary; otherwise it is
    the draft's own tokenizer and `vocab_map` (a models.alignment.vocab_map.VocabMap) lines the two
    vocabularies up (its summary is in `info["vocab"]`).
    """

    name: str
    tokenizer: Any  # a transformers PreTrainedTokenizerBase
    target: torch.nn.Module
    draft: torch.nn.Module | None
    vocab_size: int
    device: torch.device
    dtype: torch.dtype
    load_s: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)  # sources, sizes, vocabularies: for display only
    draft_tokenizer: Any = None
    vocab_map: Any = None
    runtime: str = TORCH  # the runtime its models are loaded in (choices.RUNTIMES)
    closed: bool = False  # unloaded (`close`): its loader loads it afresh when asked again
    precision_choice: PrecisionChoice | None = None
    # What its passes cost here, measured once per loaded pair (costs.measure.for_pair).
    cost_model: CostModel | None = None
    # How the runtime was chosen, with each runtime's measured rates (a costs.runtime_choice
    # Choice, set by engine.load; lm is left of costs and only carries it).
    runtime_choice: Any = None
    # The target model's label (a preset's or file's name), where a loader set it.
    target_label: str | None = None

    def close(self, *, force: bool = False) -> bool:
        """Unload this pair (`lm.resident`): its loader forgets it and its models' memory is freed
        once nothing else holds them. Not while a run uses it, unless `force`; whether it was."""
        from specviz.lm import resident

        return resident.unload(self, force=force)

    @property
    def cross_tokenizer(self) -> bool:
        """True when the draft drafts in a vocabulary of its own."""
        return self.draft is not None and self.draft_tokenizer is not None

    @property
    def precision(self) -> str:
        """The target's precision: "float32", "bfloat16", "float16" or "int8"; on another runtime
        in its own words (llama.cpp: the GGUF file's, e.g. "Q4_K - Medium")."""
        if self.runtime != TORCH:
            return self.target.precision
        return dtype_name(self.dtype)

    @property
    def draft_precision(self) -> str | None:
        """ "int8" for a draft quantized at load (lm/torch_runtime/int8_draft.py), else the precision it
        was loaded in (the target's, float32 beside an int8 target); None without a draft."""
        if self.draft is None:
            return None
        if self.precision_choice is not None:
            return self.precision_choice.draft
        if self.runtime != TORCH:
            return self.draft.precision
        return dtype_name(next(self.draft.parameters()).dtype)
