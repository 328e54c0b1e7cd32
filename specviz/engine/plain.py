"""Plain decoding of the target alone, one token per pass, with the same processing and
seed as the speculative loop: the baseline it is compared with."""

from __future__ import annotations

import time

import torch

from specviz.engine.decoder import Decoder
from specviz.events import PlainTokenEvent


class PlainDecoder(Decoder):
    @torch.inference_mode()
    def step(self) -> PlainTokenEvent:
        start = time.perf_counter()
        logits = self.sampler.logits(self.target.feed(self.ids[-1:])[-1])
        if self.sampler.greedy:
            token, p = int(logits.argmax()), 1.0
        else:
            dist = self.sampler.distribution(logits)
            token = int(self.sampler.choose(dist, self.generator))
            p = float(dist[token])
        ms = (time.perf_counter() - start) * 1000
        self.check_stop([token])
        self.ids = torch.cat([self.ids, torch.tensor([token], dtype=torch.long, device=self.device)])

        t = self.tally
        t.new_tokens += 1
        t.rounds += 1  # a plain step is a round of one token
        t.target_passes += 1
        t.target_ms += ms
        event = PlainTokenEvent(index=t.new_tokens - 1, id=token, text="", p=p, ms=ms, t_end_s=self.elapsed())
        self.say(event, token)
        return event
