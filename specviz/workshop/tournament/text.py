"""The text a tournament replays: a prompt's ids and an answer's, with how the answer was made.

Three ways in: the current run's trace, an uploaded trace (both through `from_trace`), or a
prompt and an answer pasted as text (`from_pasted`: an engine's production output, read by the
pair's tokenizer). Either way the answer is bounded before any pass reads it
(`limits.TOURNAMENT_TOKENS`, `TOURNAMENT_CONTEXT`, `TOURNAMENT_CHARS`).

`max_new_tokens` is what a real run on this text would have been allowed: a trace's own
setting, so its last round drafts as the recorded one did; a pasted answer's own length, since
nothing is known past its end.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from specviz import limits
from specviz.errors import UserError
from specviz.events import Trace
from specviz.lm.prompt import encode_prompt, stop_ids
from specviz.settings import GenerationSettings, from_request

TRACE, PASTED = "trace", "pasted"  # where a text came from


@dataclass(frozen=True)
class Text:
    prompt_ids: list[int]
    answer_ids: list[int]
    settings: GenerationSettings  # the run's (or the paste's) sampling settings; k and drafter are the tournament's
    eos: frozenset[int]  # the ids that end a run
    max_new_tokens: int
    source: str  # TRACE or PASTED
    label: str = ""  # what the page and the CLI call it: the trace's pair and drafter, or "pasted"

    @property
    def n(self) -> int:
        return len(self.answer_ids)

    @property
    def ids(self) -> list[int]:
        return self.prompt_ids + self.answer_ids


def checked(pair, prompt_ids: list[int], answer_ids: list[int]) -> None:
    """Refuse an empty answer or one over the tournament's bounds, before any pass."""
    if not answer_ids:
        raise UserError("the answer is empty: a tournament replays drafters over an answer's tokens")
    limits.TOURNAMENT_TOKENS.check(len(answer_ids))
    limits.TOURNAMENT_CONTEXT.check(len(prompt_ids) + len(answer_ids))
    bad = [t for t in answer_ids if not 0 <= t < pair.vocab_size]
    if bad:
        raise UserError(f"the answer holds token id {bad[0]}, outside the pair's vocabulary of {pair.vocab_size:,}")


def from_trace(pair, trace: Trace) -> Text:
    """A run's prompt (through the chat template as the run read it) and its output ids."""
    if trace.pair and trace.pair != pair.name:
        raise UserError(
            f"the trace was made with the pair {trace.pair!r}; load that pair to replay it (loaded: {pair.name!r})"
        )
    settings = from_request(trace.settings)
    prompt = trace.messages or trace.prompt
    prompt_ids = encode_prompt(pair, prompt, replace(settings, max_new_tokens=1))
    answer = list(trace.token_ids)
    checked(pair, prompt_ids, answer)
    ended = trace.summary.stop_reason in ("eos", "max_new_tokens")
    label = f"{trace.pair or pair.name}, {trace.meta.get('drafter') or settings.drafter}"
    return Text(
        prompt_ids,
        answer,
        settings,
        frozenset(stop_ids(pair)),
        settings.max_new_tokens if ended else len(answer),
        TRACE,
        label,
    )


def from_pasted(pair, prompt: str | list[dict], answer: str, settings: GenerationSettings) -> Text:
    """A prompt as a run would read it and an answer made elsewhere, read by the pair's tokenizer."""
    limits.TOURNAMENT_CHARS.check_text(answer)
    prompt_ids = encode_prompt(pair, prompt, replace(settings, max_new_tokens=1))
    answer_ids = list(pair.tokenizer(answer, add_special_tokens=False)["input_ids"])
    checked(pair, prompt_ids, answer_ids)
    return Text(prompt_ids, answer_ids, settings, frozenset(stop_ids(pair)), len(answer_ids), PASTED, "pasted")
