"""The target's own embedding and LM head rows, which a head reads its input and output through.

On torch they are the loaded modules' weights; on llama.cpp they are read from the GGUF file
and dequantised, only the rows asked for.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from specviz.lm.runtime import runtime_of
from specviz.choices import TORCH

Rows = Callable[[torch.Tensor], torch.Tensor]  # ids (S,) -> rows (S, H) float32


def target_tables(pair) -> tuple[Rows, Rows, int]:
    """(embedding rows, LM head rows, the width of a logits row) of the pair's target."""
    if runtime_of(pair.target) == TORCH:
        embed = pair.target.get_input_embeddings().weight
        head = pair.target.get_output_embeddings().weight
        return (
            lambda ids: embed[ids.to(embed.device)].detach().float().cpu(),
            lambda ids: head[ids.to(head.device)].detach().float().cpu(),
            int(head.shape[0]),
        )
    return _gguf_tables(pair.target.path, pair.target.vocab_size)


def _gguf_tables(path, vocab_size: int) -> tuple[Rows, Rows, int]:
    from gguf import GGUFReader
    from gguf.quants import dequantize

    tensors = {t.name: t for t in GGUFReader(str(path)).tensors}
    embed = tensors["token_embd.weight"]
    head = tensors.get("output.weight", embed)  # a tied head is the embedding

    def rows(t) -> Rows:
        return lambda ids: torch.from_numpy(
            np.ascontiguousarray(dequantize(t.data[ids.numpy()], t.tensor_type), dtype=np.float32)
        )

    return rows(embed), rows(head), vocab_size
