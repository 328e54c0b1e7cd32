"""The logits a pass keeps: gathered rows with their own storage, the same values as the
full pass's last rows.

Why it matters: on a CPU, a bf16 matmul over `hidden[:, -keep:]` (a view that keeps the whole
sequence's batch stride) takes a slow path, about 60x slower for the LM head of a prompt's
last position (specviz/lm/torch_runtime/keep.py). The speed is not asserted here; the layout that
avoids it and the values are.
"""

import torch

from specviz.lm.torch_runtime.cached import CachedLM, model_forward
from specviz.lm.torch_runtime.keep import last_rows, logits_to_keep
from tiny_models import tiny_pair


def test_keep_argument_is_an_index_only_when_it_drops_positions():
    assert logits_to_keep(51, 0, "cpu") == 0
    assert logits_to_keep(3, 3, "cpu") == 0 and logits_to_keep(3, 5, "cpu") == 0
    assert torch.equal(logits_to_keep(51, 1, "cpu"), torch.tensor([50]))
    assert torch.equal(logits_to_keep(10, 3, "cpu"), torch.tensor([7, 8, 9]))


def test_last_rows_have_their_own_storage():
    hidden = torch.randn(1, 51, 16)
    for keep in (1, 4):
        rows = last_rows(hidden, keep)
        assert rows.shape == (1, keep, 16)
        assert rows.stride() == (keep * 16, 16, 1)  # a plain slice keeps (51 * 16, 16, 1)
        assert torch.equal(rows, hidden[:, -keep:])
    assert last_rows(hidden, 0) is hidden and last_rows(hidden, 51) is hidden


@torch.inference_mode()
def test_kept_logits_equal_the_full_pass():
    pair = tiny_pair("close")
    ids = pair.tokenizer("def reverse(s):\n    return s[::-1]", return_tensors="pt")["input_ids"][0]
    full = CachedLM(model_forward(pair.target), pair.target.config, torch.device("cpu")).feed(ids, keep=0)
    for keep in (1, 3):
        lm = CachedLM(model_forward(pair.target), pair.target.config, torch.device("cpu"))
        kept = lm.feed(ids, keep=keep)
        assert kept.shape == (keep, full.shape[-1])
        torch.testing.assert_close(kept, full[-keep:], atol=1e-4, rtol=0)
        assert lm.length == ids.numel()
