"""Packed linear layers (specviz/lm/torch_runtime/packed.py): the same products as the layers' own,
one packed copy per model, and none where memory or the device does not allow it."""

import pytest
import torch
import torch.nn.functional as F

from specviz.lm.torch_runtime.lean import LeanLM
from specviz.lm.torch_runtime import packed
from tiny_models import tiny_model

needs_onednn = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="torch built without oneDNN")


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(96, 160), torch.nn.Linear(160, 64, bias=False))


@needs_onednn
@pytest.mark.parametrize("rows", [1, 2, 3, 5, 8, 17, 40])
def test_packed_product_equals_the_layers_own(rows):
    model = _model()
    table = packed.packed_linears(model)
    assert table is not None and set(table) == set(model)
    x = torch.randn(rows, 96, generator=torch.Generator().manual_seed(rows))
    with torch.inference_mode():
        first, second = model
        h = table[first](x)
        torch.testing.assert_close(h, F.linear(x, first.weight, first.bias), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(table[second](h[None]), F.linear(h, second.weight)[None], atol=1e-5, rtol=1e-5)


@needs_onednn
def test_one_packed_copy_per_model_and_its_bytes_counted():
    model = _model()
    assert packed.packed_bytes(model) == 0  # nothing packed before first use
    assert packed.packed_linears(model) is packed.packed_linears(model)
    assert packed.packed_bytes(model) == sum(m.weight.numel() * 4 for m in model)


def test_no_packing_without_the_memory_for_it(monkeypatch):
    model = _model()
    monkeypatch.setattr(packed, "ram_available", lambda: packed.HEADROOM)  # less than headroom + weights
    assert packed.packed_linears(model) is None
    assert packed.packed_bytes(model) == 0


def test_no_packing_for_weights_oneDNN_does_not_take():
    half = _model().half()
    assert packed.packed_linears(half) is None


@needs_onednn
def test_lean_loop_says_whether_it_runs_packed(monkeypatch):
    model = tiny_model(77, layers=2)  # seeds no other test loads: packing state is per model object
    assert LeanLM(model, torch.device("cpu")).loop == "lean, packed weights"
    other = tiny_model(78, layers=2)
    monkeypatch.setattr(packed, "ram_available", lambda: 0)
    assert LeanLM(other, torch.device("cpu")).loop == "lean"
