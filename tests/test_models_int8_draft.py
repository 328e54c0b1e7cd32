"""The draft's int8 copy: quantized a few layers at a time, yet the same as in one pass."""

from __future__ import annotations

import warnings

import torch
from tiny_models import tiny_model

from specviz.lm.torch_runtime.int8_draft import LAYERS_PER_STEP, quantized


def test_layers_quantized_a_few_at_a_time_match_one_pass_and_report_progress():
    from torch.ao import quantization
    from torch.ao.nn.quantized.dynamic import Linear as Int8Linear

    model = tiny_model(3, layers=2)
    linears = sum(isinstance(m, torch.nn.Linear) for m in model.modules())
    assert linears > LAYERS_PER_STEP  # so the copy is made in more than one step
    seen = []
    copy = quantized(model, lambda f, m: seen.append((f, m)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = quantization.quantize_dynamic(
            model, {torch.nn.Linear: quantization.per_channel_dynamic_qconfig}, dtype=torch.qint8
        )
    assert sum(isinstance(m, Int8Linear) for m in copy.modules()) == linears
    assert not any(isinstance(m, Int8Linear) for m in model.modules())  # the original is left as is
    ids = torch.tensor([[5, 17, 42, 8, 99, 3]])
    with torch.inference_mode():
        assert torch.equal(copy(ids).logits, whole(ids).logits)
        assert not torch.equal(copy(ids).logits, model(ids).logits)
    fractions = [f for f, _ in seen]
    assert len(seen) == -(-linears // LAYERS_PER_STEP) and fractions == sorted(fractions) and fractions[-1] == 1.0
    assert seen[-1][1] == f"{linears} of {linears} linear layers"
