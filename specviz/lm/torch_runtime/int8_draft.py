"""The draft model in int8 on a CPU: a drafted token costs a fraction of an fp32 one.

A one-token pass on a CPU reads every weight once, so it costs about the model's size in
bytes. Dynamic int8 quantization (fbgemm: int8 weights with a scale per output channel,
activations quantized on the fly) makes the draft's pass several times cheaper, so drafting
pays at a lower acceptance rate. The int8 draft agrees with the target somewhat less often
than the fp32 one; a scale per channel keeps more of that agreement than one per tensor.
The measured costs and agreement are in docs/BENCHMARKS.md.

Exactness does not depend on it: q is the distribution of the model that actually drafted,
whatever its precision, and only the target's distribution decides the output. The same
quantizer makes the opt-in int8 target (`--dtype int8`, see devices.py); the target's
precision is then what plain and speculative decoding both run, so the exactness holds for
that target as run.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from copy import deepcopy

import torch

LAYERS_PER_STEP = 8


def wanted(device: torch.device, choice: bool | None) -> bool:
    """Whether a draft loaded for `device` runs in int8: `choice`, else SPECVIZ_INT8_DRAFT
    (1 / 0), else on any CPU whatever the target's precision (a GPU keeps the draft in the
    target's dtype). Only CPUs have the int8 kernels; the int8 draft is quantized from
    float32 weights and computes with float32 activations."""
    if choice is None and os.environ.get("SPECVIZ_INT8_DRAFT", "").strip() in ("0", "1"):
        choice = os.environ["SPECVIZ_INT8_DRAFT"].strip() == "1"
    if choice is not None:
        return choice and device.type == "cpu"
    return device.type == "cpu"


def quantized(model: torch.nn.Module, progress: Callable[[float, str], None] | None = None) -> torch.nn.Module:
    """An int8 copy of `model`: every linear layer, the output head included (seconds, mostly
    fbgemm packing the weights, hence the progress). `model` is left as is:
    another pair may use it unquantized, as its target. The layers are quantized a few at a
    time so that `progress(fraction, message)` can follow them."""
    from torch.ao import quantization

    copy = deepcopy(model)
    names = [name for name, m in copy.named_modules() if isinstance(m, torch.nn.Linear)]
    with warnings.catch_warnings():
        # torch.ao.quantization is deprecated in favour of torchao; torch is pinned (2.13).
        warnings.simplefilter("ignore")
        for start in range(0, len(names), LAYERS_PER_STEP):
            chunk = names[start : start + LAYERS_PER_STEP]
            quantization.quantize_dynamic(
                copy, dict.fromkeys(chunk, quantization.per_channel_dynamic_qconfig), dtype=torch.qint8, inplace=True
            )
            if progress is not None:
                done = start + len(chunk)
                progress(done / len(names), f"{done} of {len(names)} linear layers")
    copy.eval()
    return copy
