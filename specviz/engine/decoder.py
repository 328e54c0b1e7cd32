"""What the speculative and the plain decoding loops share: the target's cache, the
sampler, the seed, the output so far and its text, the stop conditions and the tally."""

from __future__ import annotations

import time

import torch

from specviz.lm.runtime import open_lm
from specviz.lm.prompt import stop_ids
from specviz.lm.sampling import Sampler
from specviz.engine.tally import Tally
from specviz.engine.detokenizer import Detokenizer, TokenTexts
from specviz.lm.pair import ModelPair
from specviz.grammar.matcher import run_grammar
from specviz.settings import GenerationSettings


class Decoder:
    """One run. `begin()` prefills, then each `step()` returns one event until `stop_reason`
    is set ("eos" or "max_new_tokens"). Every model call happens inside a step, under
    `torch.inference_mode()`, so nothing leaks into the caller between events."""

    def __init__(self, pair: ModelPair, settings: GenerationSettings, prompt_ids: list[int], *, record: str = "full"):
        self.pair = pair
        self.settings = settings
        self.record = record
        self.device = pair.device
        self.generator = torch.Generator(device=pair.device).manual_seed(settings.seed)
        self.sampler = Sampler(settings, pair.vocab_size)
        self.eos = stop_ids(pair)
        self.grammar = run_grammar(settings, pair.tokenizer, pair.vocab_size, self.eos)
        self.detok = Detokenizer(pair.tokenizer)
        self.texts = TokenTexts(pair.tokenizer)
        # The target's KV-cached loop on the pair's runtime, one for plain decoding, chain and
        # tree rounds alike (on torch the lean one, packed weights on a CPU, where the shape allows).
        self.target = open_lm(pair.target, pair.device)
        self.ids = torch.tensor(prompt_ids, dtype=torch.long, device=pair.device)
        self.prompt_len = len(prompt_ids)
        self.tally = Tally()
        self.stop_reason = ""
        self.t0 = 0.0
        self._last_text_holder = None  # the last event part whose text is in the output
        self._pending: torch.Tensor | None = None  # the prefill's logits, for the first token

    @property
    def token_ids(self) -> list[int]:
        return self.ids[self.prompt_len :].tolist()

    @property
    def remaining(self) -> int:
        return self.settings.max_new_tokens - self.tally.new_tokens

    @torch.inference_mode()
    def begin(self) -> None:
        """Start the clock and prefill the whole prompt: its last position's logits give the
        first new token, so the first step needs no pass of its own (as in transformers'
        `generate`) and shows a token as soon as the prompt has been read."""
        self.t0 = time.perf_counter()
        self._pending = self.target.feed(self.ids)[-1]

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def say(self, holder, token_id: int) -> None:
        """Append a token to the output, setting `holder.text` (an event part) to the text it
        adds; the last holder also gets whatever is still held back when the run ends."""
        holder.text = self.detok.push(token_id)
        self._last_text_holder = holder

    def finish_text(self) -> str:
        """Flush held-back text (an incomplete character at the very end) into the last token."""
        rest = self.detok.flush()
        if rest and self._last_text_holder is not None:
            self._last_text_holder.text += rest
        return self.detok.text

    def allowed(self) -> torch.Tensor | None:
        """(1, V): the tokens the output format allows next (None: free text)."""
        return None if self.grammar is None else self.grammar.rows([()])

    def check_stop(self, new: list[int]) -> int:
        """How many of `new` join the output, setting `stop_reason` on EOS or the length limit."""
        for j, t in enumerate(new):
            if t in self.eos:
                self.stop_reason = "eos"
                return j + 1
        if len(new) >= self.remaining:
            self.stop_reason = "max_new_tokens"
            return self.remaining
        return len(new)

    def kept(self, new: list[int]) -> list[int]:
        """The tokens of `new` that join the output (`check_stop`), the grammar moved past them."""
        new = new[: self.check_stop(new)]
        if self.grammar is not None:
            self.grammar.advance(new)
        return new
