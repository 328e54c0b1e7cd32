"""`lm.rows`: numpy's argmax and top-k on CPU rows agree with torch's, ties included."""

import torch

from specviz.lm import rows


def test_argmax_and_top_agree_with_torch_on_random_rows_and_take_the_first_of_a_tie():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(7, 151_936, generator=g)
    x[3, 10] = x[3, 99] = x[3].max() + 1  # a tie for the largest: the first index wins
    assert torch.equal(rows.argmax(x), x.argmax(-1)) and int(rows.argmax(x)[3]) == 10
    assert int(rows.argmax(x[5])) == int(x[5].argmax())  # one row
    values, ids = rows.top(x, 5)
    want = x.topk(5, dim=-1)
    assert torch.equal(values, want.values) and torch.equal(ids[[0, 1, 2, 4, 5, 6]], want.indices[[0, 1, 2, 4, 5, 6]])
    assert set(ids[3, :2].tolist()) == {10, 99}
    assert rows.top(x[:, :3], 5)[1].shape == (7, 3)  # k capped at the row length
    half = x.to(torch.bfloat16)  # not numpy's: torch's own
    assert torch.equal(rows.argmax(half), half.argmax(-1))


def _reference_top(x: torch.Tensor, k: int) -> list[list[int]]:
    """Each row's k largest by value, the first index on ties, by a plain sort."""
    return [sorted(range(len(row)), key=lambda i: (-row[i], i))[:k] for row in x.tolist()]


def test_top_finds_the_largest_wherever_they_lie_ties_and_tails_included():
    g = torch.Generator().manual_seed(1)
    for n in (7, 1024, 5000, 151_936):  # shorter than a block, one block, a tail, the real width
        x = torch.randn(4, n, generator=g).round(decimals=1)  # many ties
        x[1] = float("-inf")
        x[1, n - 1] = 0.0  # the only finite entry, in the tail
        x[2, : min(n, 6)] = 9.0  # a tie for the largest across the first entries
        x[3, n // 2] = x[3, n - 1] = 50.0  # the largest in a middle block and in the tail
        for k in (1, 5, 8):
            values, ids = rows.top(x, k)
            assert ids.tolist() == _reference_top(x, k), (n, k)
            assert torch.equal(values, torch.gather(x, 1, ids))
