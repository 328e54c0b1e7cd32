"""Record the traces the viz tests replay: `python tests/data/record_viz_traces.py`.

Tiny random models (tests/tiny_models.py), so the tokens are gibberish, but every number in
the events comes from the real engine. Re-record when the event contract changes.
"""

from pathlib import Path
import sys

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parents[1])]

from tiny_models import tiny_pair  # noqa: E402

from specviz.engine.generation import run  # noqa: E402
from specviz.settings import GenerationSettings  # noqa: E402

PROMPT = "def reverse(s):"
RUNS = {
    "viz_trace_sampled.json": GenerationSettings(temperature=1.0, k=4, max_new_tokens=40, seed=3, raw=True),
    "viz_trace_greedy.json": GenerationSettings(temperature=0.0, k=4, max_new_tokens=40, raw=True),
    "viz_trace_plain.json": GenerationSettings(temperature=0.0, max_new_tokens=40, mode="plain", raw=True),
}

if __name__ == "__main__":
    pair = tiny_pair("close")
    for name, settings in RUNS.items():
        trace = run(pair, PROMPT, settings)
        (HERE / name).write_text(trace.to_json(indent=1))
        print(name, trace.summary.new_tokens, "tokens", trace.summary.rounds, "rounds")
