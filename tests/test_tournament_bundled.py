"""The tournament on the bundled pair (llama.cpp, the Q4_K_M files): for each chain drafter the
pair's runtime runs (the draft model, prompt lookup) and for suffix decoding, at k = 1, 4 and 8,
the accepted length of every round the tournament replays from one teacher-forced pass equals
the real greedy run's. Where they part, it is at a position the tournament reports as a near
tie (a top-2 logit gap under passes.NEAR_TIE, where a batched pass may round differently from
the run's one-token passes), never elsewhere.

Run under the heavy lock: flock /work/locks/heavy.lock python -m pytest tests/test_tournament_bundled.py
"""

import pytest

pytest.importorskip("llama_cpp")

from specviz import engine  # noqa: E402
from specviz.choices import FIXED, LOOKUP, MODEL, PLAIN, SUFFIX  # noqa: E402
from specviz.events import RoundEvent  # noqa: E402
from specviz.settings import GenerationSettings  # noqa: E402
from specviz.workshop.tournament.passes import near_ties  # noqa: E402
from specviz.workshop.tournament.run import Config, tournament  # noqa: E402
from specviz.workshop.tournament.text import from_trace  # noqa: E402

pytestmark = pytest.mark.bundled

NEW_TOKENS = 64
PROMPT = (
    "Rename the variable `total` to `sum_of_values` in this function and return the whole function.\n\n"
    "```python\ndef average(values):\n    total = 0\n    for v in values:\n        total += v\n"
    "    return total / len(values) if values else 0.0\n```"
)


@pytest.fixture(scope="module")
def pair():
    from specviz.engine.load import load

    return load("qwen-coder", runtime="llama.cpp")


@pytest.fixture(scope="module")
def result(pair):
    plain = engine.run(pair, PROMPT, GenerationSettings(max_new_tokens=NEW_TOKENS, mode=PLAIN))
    return tournament(pair, from_trace(pair, plain), others=(), drafters=[MODEL, LOOKUP, SUFFIX])


@pytest.mark.parametrize("drafter", [MODEL, LOOKUP, SUFFIX])
@pytest.mark.parametrize("k", [1, 4, 8])
def test_accepted_lengths_on_the_bundled_pair_are_a_real_runs(pair, result, drafter, k):
    trace = engine.run(pair, PROMPT, GenerationSettings(max_new_tokens=NEW_TOKENS, k=k, policy=FIXED, drafter=drafter))
    rounds = [e for e in trace.events if isinstance(e, RoundEvent)][1:]
    real = [sum(n.decision == "accepted" for n in (e.tree or e.drafted)) for e in rounds]
    entry = next(e for e in result.entries if e.drafter == drafter and e.config == Config(FIXED, k))
    replayed = [r.accepted for r in entry.rounds]
    ties = set(near_ties(result.target.gap)) | set(
        near_ties(result.drafts[MODEL].gap) if MODEL in result.drafts else []
    )
    parted = next((i for i, (a, b) in enumerate(zip(real, replayed)) if a != b), None)
    if parted is None:
        assert replayed == real
    else:  # only at a near tie the tournament reports
        start = entry.rounds[parted].start
        assert ties & set(range(start, start + max(real[parted], replayed[parted]) + 1)), (
            f"round {parted} (position {start}) parts from the run with no near tie there"
        )
