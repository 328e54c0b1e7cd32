"""The draft/verify engine: runs on a model pair and yields events, never formats them.

    generation = start(pair, prompt, settings)   # prompt encoded, nothing run yet
    for event in generation: ...                 # RoundEvent / PlainTokenEvent as they happen
    trace = generation.trace()

    trace = run(pair, prompt, settings)          # the same, to the end

The names below are imported on first use, so `python -m specviz generate --help` does not
wait for torch.
"""

from specviz.lazy import lazy_exports

_LAZY = {
    "Generation": "specviz.engine.generation",
    "start": "specviz.engine.generation",
    "run": "specviz.engine.generation",
}

__all__ = list(_LAZY)
__getattr__ = lazy_exports(__name__, _LAZY)
