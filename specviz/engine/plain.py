"""Plain decoding of the target alone, one token per pass, with the same processing and
seed as the speculative loop: the baseline it is compared with.

Per token it does what transformers' greedy `generate` does and no more: one pass over the
last token, an argmax (or one draw from the processed distribution when sampling), the text
the token adds. The prompt's prefill (`Decoder.begin`) gives the first new token, as in
`generate`: no extra one-token pass per run. The new ids are a Python list
and each pass is fed from a preallocated buffer instead of a tensor grown by torch.cat.
"""

from __future__ import annotations

import time

import torch

from specviz.engine.decoder import Decoder
from specviz.lm import rows
from specviz.events import PlainTokenEvent


class PlainDecoder(Decoder):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._new: list[int] = []
        self._next = torch.zeros(1, dtype=torch.long, device=self.device)  # the token each pass feeds

    @property
    def token_ids(self) -> list[int]:
        return list(self._new)

    @torch.inference_mode()
    def step(self) -> PlainTokenEvent:
        start = time.perf_counter()
        first = self._pending is not None
        if first:
            raw, self._pending = self._pending, None
        else:
            raw = self.target.feed(self._next)[-1]
        raw = self.sampler.masked(raw[: self.sampler.vocab_size], self.allowed())
        if self.sampler.greedy:
            # the argmax of the raw logits is the argmax of the processed ones: no copy, no softmax
            token, p = int(rows.argmax(raw)), 1.0
        else:
            dist = self.sampler.distribution(raw)
            token = int(self.sampler.choose(dist, self.generator))
            p = float(dist[token])
        ms = (time.perf_counter() - start) * 1000
        self.kept([token])
        self._new.append(token)
        self._next.fill_(token)

        t = self.tally
        if first:
            t.count_first(1)
        else:  # a plain step is a round of one token that drafted nothing
            t.count_round(new=1, target_ms=ms)
        event = PlainTokenEvent(index=t.new_tokens - 1, id=token, text="", p=p, ms=ms, t_end_s=self.elapsed())
        self.say(event, token)
        return event
