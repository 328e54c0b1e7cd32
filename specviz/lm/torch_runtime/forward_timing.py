"""transformers' forward itself, timed: passes over n new tokens on a warm cache, for several
sequences at once (the batching lab), for a torch pair without a draft model the target's own
one-token pass as its D (`costs.measure`), and beside the engine's loop in the scripts that
compare the two. Everything else is timed through the engine's loop (`lm.timing`), with the
same warm-ups and medians (`median_ms`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from specviz.lm.timing import MEASURE_CONTEXT, REPEATS, median_ms
from specviz.lm.torch_runtime.keep import logits_to_keep


@torch.inference_mode()
def measure_pass_ms(
    model: torch.nn.Module,
    sizes: list[int],
    *,
    vocab_size: int,
    context: int = MEASURE_CONTEXT,
    repeats: int = REPEATS,
    seed: int = 0,
    batch: int = 1,
    should_stop: Callable[[], bool] | None = None,
) -> dict[int, float]:
    """Median ms of one forward pass over n new tokens after `context` cached tokens, for
    each n in `sizes`, with logits for every new position (as a verify pass needs). Sizes
    are interleaved within each repeat so machine drift hits them alike; untimed sweeps
    first warm the kernels up. `batch` sequences go through each pass side by side;
    `should_stop()` true ends the measurement with a UserError."""
    from transformers import DynamicCache

    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(seed)
    ctx = torch.randint(0, vocab_size, (batch, context), generator=gen).to(device)
    cache = DynamicCache(config=model.config)
    model(input_ids=ctx, cache=cache, use_cache=True, logits_to_keep=logits_to_keep(context, 1, device))

    def one_pass(n: int) -> None:
        model(input_ids=torch.randint(0, vocab_size, (batch, n), generator=gen).to(device), cache=cache, use_cache=True)
        cache.crop(-n)

    return median_ms(one_pass, sizes, device=device, repeats=repeats, should_stop=should_stop)
