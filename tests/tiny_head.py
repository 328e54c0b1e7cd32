"""A draft head for the tiny target, trained in a few seconds and filed where the head drafter
looks for a pair's head (in the tests' own cache): `ensure_head(pair)` before a run of the
`head` drafter on a tiny pair, torch or llama.cpp (the same weights)."""

from __future__ import annotations

import functools

from specviz.drafters import head as headmod
from specviz.drafters.head_model import save
from specviz.workshop.training import states, train
from specviz.workshop.training.tables import target_tables
from tiny_models import CORPUS, tiny_pair


@functools.lru_cache(maxsize=None)
def _trained():
    pair = tiny_pair(None)
    ids = pair.tokenizer("\n".join(CORPUS * 10), add_special_tokens=False)["input_ids"]
    got = states.collect(pair, iter([(f"w{i}", ids[i : i + 96]) for i in range(0, len(ids) - 96, 96)]), 1500)
    return train.train_head(
        {"source": got},
        target_tables(pair),
        train.Plan(subset=300, steps=60, batch=64),
        label="tiny",
        runtime="torch",
        corpus="tiny corpus",
    )


def ensure_head(pair) -> None:
    """The tiny target's head, saved under `pair`'s target label unless one is there."""
    path = headmod.head_path(headmod.target_label(pair))
    if not path.is_file():
        save(*_trained(), path)
