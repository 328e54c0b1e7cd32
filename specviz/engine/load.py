"""Loading a pair for the engine: the models, then the costs of their passes.

Every entry point (the page, the CLI, the bench) loads through `load`, so the cost model
that the cost-aware policy and every speedup read is there before the first run, measured
behind the same progress bar as the models (or read from its cache and checked with a few
one-token passes).
"""

from __future__ import annotations

from dataclasses import replace

from specviz.costs.measure import for_pair, is_cached
from specviz.choices import AUTO
from specviz.costs import runtime_choice
from specviz.engine import runtime_prepare
from specviz import lm
from specviz.lm.pair import ModelPair
from specviz.models.progress import Progress
from specviz.lm.torch_runtime.devices import cuda_emulated, spread_over

# Share of the progress bar for the models; the cost model takes the rest.
MODELS_SHARE = 0.9


def load(
    spec,
    *,
    with_draft: bool = True,
    progress: Progress | None = None,
    runtime: str = AUTO,
    prepare_untimed: bool = False,
    **options,
) -> ModelPair:
    """`lm.load_pair(spec, ...)` and the pair's cost model, on the runtime `runtime`
    names ("auto": `runtime_choice.choose`; what was chosen and why, and the rates measured
    on each runtime, go to `pair.runtime_choice`). `options` are load_pair's
    (device, dtype, int8_draft, device_map, max_memory). load_pair is looked up at each
    call, so a test that replaces it replaces it here too, and only while it does.
    `prepare_untimed` (a long-lived process: the page): start timing, in the background, the
    runtimes `auto` could not judge yet (engine.runtime_prepare)."""

    def models_progress(fraction: float, message: str) -> None:
        if progress is not None:
            progress(MODELS_SHARE * fraction, message)

    choice = runtime_choice.choose(spec, runtime, options=options)
    pair = lm.load_pair(spec, with_draft=with_draft, progress=models_progress, runtime=choice.runtime, **options)
    if cuda_emulated():
        # The first run on a lent GPU times the passes (engine.generation's for_pair) and caches them.
        pair.runtime_choice = replace(choice, requested=runtime, spec=str(spec))
        if progress is not None:
            progress(1.0, "ready (the first run on the GPU times its passes)")
        return pair
    if pair.cost_model is None and progress is not None:
        progress(MODELS_SHARE, _timing_message(pair))
    with runtime_prepare.held():  # timed without this process's own background preparation
        cost = for_pair(pair)
    # A drafting rate needs a draft model's D. Costs timed at a busy moment price this load
    # only: the rates kept for choosing a runtime stay the undisturbed ones.
    if pair.draft is not None and not cost.busy:
        runtime_choice.record(spec, pair.runtime, cost)
    measured = runtime_choice.recorded(spec)
    preparing = []
    if prepare_untimed and runtime_prepare.enabled():
        preparing = [r for r in choice.untimed if r not in measured]
        for other in preparing:
            runtime_prepare.start(str(spec), other)
    pair.runtime_choice = replace(choice, requested=runtime, spec=str(spec), rates=measured, preparing=tuple(preparing))
    if progress is not None:
        progress(1.0, "ready")
    return pair


def _timing_message(pair: ModelPair) -> str:
    """What the progress bar says while the pair's pass costs are measured or checked."""
    if is_cached(pair):
        return "checking the cached pass costs with a few one-token passes"
    fewer = "; the target is spread by a device map, so fewer passes are timed" if spread_over(pair.target) else ""
    return f"timing the target's and the draft's passes (once per machine, then cached{fewer})"
