"""The few-row product of small_batch.py: one-token and long passes unchanged bit for bit,
few-token passes equal up to float rounding, and greedy speculative text still the target's."""

import copy

import pytest
import torch
import torch.nn.functional as F

from specviz import engine
from specviz.lm.torch_runtime.small_batch import FEW_ROWS, cheapest_rows, use_few_rows_product
from specviz.settings import GenerationSettings
from tiny_models import single_thread, tiny_pair  # noqa: F401 (single_thread: a fixture)

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.mark.parametrize("bias", [False, True])
def test_a_linear_layer_gives_the_same_products(bias):
    torch.manual_seed(0)
    layer = torch.nn.Linear(96, 200, bias=bias)
    plain = copy.deepcopy(layer)
    assert use_few_rows_product(layer) == 1
    for rows in (1, 40):  # the usual call: identical
        x = torch.randn(1, rows, 96)
        assert torch.equal(layer(x), plain(x))
    for rows in (2, 5, 17):  # the transposed product: same shape, rounding-level differences
        x = torch.randn(1, rows, 96)
        y = layer(x)
        assert y.shape == (1, rows, 200)
        torch.testing.assert_close(y, F.linear(x, plain.weight, plain.bias), rtol=1e-5, atol=1e-5)


def test_rows_padded_to_a_cheaper_count_give_the_same_products():
    torch.manual_seed(0)
    layer = torch.nn.Linear(96, 200)
    plain = copy.deepcopy(layer)
    use_few_rows_product(layer, rows_to={3: 4, 5: 8})
    for rows in (3, 5):
        x = torch.randn(1, rows, 96)
        y = layer(x)
        assert y.shape == (1, rows, 200)  # the zero rows added for the product are not returned
        torch.testing.assert_close(y, F.linear(x, plain.weight, plain.bias), rtol=1e-5, atol=1e-5)


def test_the_padding_table_only_pads_upwards_within_the_few_row_sizes():
    table = cheapest_rows(torch.randn(512, 256), repeats=2)
    assert sorted(table) == list(FEW_ROWS)
    assert all(n <= m <= FEW_ROWS[-1] for n, m in table.items())


def test_only_fp32_cpu_layers_change():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8).to(torch.bfloat16))
    assert use_few_rows_product(model) == 1


@pytest.mark.parametrize("k", [1, 4, 8])
def test_greedy_speculative_text_is_still_the_targets(k):
    pair = copy.deepcopy(tiny_pair("close"))
    use_few_rows_product(pair.target)
    use_few_rows_product(pair.draft)
    s = GenerationSettings(max_new_tokens=40, k=k)
    plain = engine.run(
        pair, "Write a function that reverses a string", GenerationSettings(max_new_tokens=40, mode="plain")
    )
    spec = engine.run(pair, "Write a function that reverses a string", s)
    assert spec.token_ids == plain.token_ids
    unpatched = engine.run(
        tiny_pair("close"),
        "Write a function that reverses a string",
        GenerationSettings(max_new_tokens=40, mode="plain"),
    )
    assert plain.token_ids == unpatched.token_ids, "one-token passes are unchanged"
