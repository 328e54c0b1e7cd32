"""The draft/verify engine: runs on a model pair and yields events, never formats them.

    generation = start(pair, prompt, settings)   # validated, prompt encoded, nothing run yet
    for event in generation: ...                 # RoundEvent / PlainTokenEvent as they happen
    trace = generation.trace()

    trace = run(pair, prompt, settings)          # the same, to the end
"""

from specviz.engine.generation import Generation, run, start
from specviz.engine.prompt import encode_prompt, stop_ids

__all__ = ["Generation", "start", "run", "encode_prompt", "stop_ids"]
