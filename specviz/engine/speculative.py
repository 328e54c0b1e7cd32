"""The speculative decoding loop: draft, verify in one target pass, keep what was accepted.

Per round, with the context ids[0..L) and the target's cache holding ids[0..L-1):

1. the drafter proposes x_1..x_m (m <= k, and m < tokens still allowed, so that the round's
   m+1 tokens never overshoot the limit);
2. one target pass over [ids[L-1], x_1..x_m] gives p_1..p_{m+1};
3. `verify` accepts x_1..x_n and emits one more token (resampled or bonus);
4. the target's cache is cropped to ids + x_1..x_n, leaving the emitted token pending for
   the next pass, and the drafter hears n so it can crop its own.
"""

from __future__ import annotations

import time

import torch

import specviz.drafters as drafters
from specviz.engine import display
from specviz.engine.decoder import Decoder
from specviz.engine.verify import verify
from specviz.events import DraftToken, EmittedToken, RoundEvent


class SpeculativeDecoder(Decoder):
    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.drafter = drafters.make_drafter(self.pair, self.settings, generator=self.generator)
        self.length = drafters.make_length(self.pair, self.settings)
        self.index = 0

    @torch.inference_mode()
    def begin(self) -> None:
        super().begin()
        self.drafter.begin(self.ids)

    @torch.inference_mode()
    def step(self) -> RoundEvent:
        greedy = self.sampler.greedy
        context_len = self.ids.numel()
        proposal = self.drafter.propose(self.ids, min(self.length.limit(), self.remaining - 1), self.length.keep_going)
        x = proposal.tokens.to(self.device)
        m = x.numel()

        start = time.perf_counter()
        logits = self.sampler.logits(self.target.feed(torch.cat([self.ids[-1:], x]), keep=0))
        self.sync()
        target_ms = (time.perf_counter() - start) * 1000
        p = None if greedy else self.sampler.distribution(logits)
        v = verify(x, logits if greedy else p, proposal.q, generator=self.generator, greedy=greedy)
        self.sync()
        verify_ms = (time.perf_counter() - start) * 1000

        n = v.n_accepted
        kept = self.check_stop(v.new_tokens)  # < n + 1 only when an accepted draft was EOS
        n_pos = min(n + 1, kept)  # verified positions that count: up to the rejection / bonus
        tested = min(n_pos, m)
        accepted = min(n, kept)
        self.ids = torch.cat([self.ids, torch.tensor(v.new_tokens[:kept], dtype=torch.long, device=self.device)])
        self.target.crop(context_len + n)
        self.drafter.accepted(n)
        self.length.update(m, n, verify_ms=target_ms, draft_ms=proposal.ms)

        drafted = [
            DraftToken(id=t, text="", p=v.p[i], q=v.q[i], u=v.u[i] if i < tested else None, decision=d if i < tested else "unchecked")
            for i, (t, d) in enumerate(zip(v.tokens, v.decisions))
        ]
        for d in drafted[:accepted]:
            self.say(d, d.id)
        for d, text in zip(drafted[accepted:], self.detok.peek(v.tokens[accepted:])):
            d.text = text or self.texts(d.id)  # shown struck through: never empty
        emitted = None
        if kept == n + 1:
            emitted = EmittedToken(id=v.emitted, text="", p=v.emitted_p, kind=v.emitted_kind)
            self.say(emitted, v.emitted)

        overlap = display.overlaps(p, proposal.q, x, logits)[:tested]
        positions = []
        if self.record == "full":
            positions = display.positions(n_pos, logits, p, proposal.q, x, overlap, self.texts)

        t = self.tally
        t.new_tokens += kept
        t.rounds += 1
        t.target_passes += 1
        t.draft_passes += proposal.passes
        t.drafted += tested
        t.accepted += accepted
        t.overlap_sum += sum(overlap)
        t.target_ms += target_ms
        t.draft_ms += proposal.ms
        t.draft_tokens += m

        event = RoundEvent(
            index=self.index,
            k=m,
            drafted=drafted,
            emitted=emitted,
            positions=positions,
            draft_ms=proposal.ms,
            verify_ms=verify_ms,
            t_end_s=self.elapsed(),
            new_tokens=t.new_tokens,
        )
        self.index += 1
        return event
