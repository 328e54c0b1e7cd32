"""The loaded model pair that the drafters and the engine work on."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class ModelPair:
    """A tokenizer shared by a target and (optionally) a draft model, on one device.

    `draft` is None for self-drafting (prompt lookup, early exit). `vocab_size` is the
    shared vocabulary: logits beyond it (LM-head padding) are ignored.
    """

    name: str
    tokenizer: Any  # a transformers PreTrainedTokenizerBase
    target: torch.nn.Module
    draft: torch.nn.Module | None
    vocab_size: int
    device: torch.device
    dtype: torch.dtype
    load_s: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)  # sources, sizes, cache state: for display

    @property
    def draft_precision(self) -> str | None:
        """"int8" for a draft quantized at load (models/int8_draft.py), else the pair's dtype;
        None without a draft."""
        if self.draft is None:
            return None
        return self.info.get("draft", {}).get("precision") or str(self.dtype).replace("torch.", "")
