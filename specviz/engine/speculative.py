"""The speculative decoding loop: draft, verify in one target pass, keep what was accepted.

Per round, with the context ids[0..L) and the target's cache holding ids[0..L-1):

1. the drafter proposes x_1..x_m (m <= k, and m < tokens still allowed, so that the round's
   m+1 tokens never overshoot the limit);
2. one target pass over [ids[L-1], x_1..x_m] gives p_1..p_{m+1};
3. `verify` accepts x_1..x_n and emits one more token (resampled or bonus);
4. the target's cache is cropped to ids + x_1..x_n, leaving the emitted token pending for
   the next pass, and the drafter hears n so it can crop its own.

The prompt's prefill covers its last token too, and its logits give the first token: the
first round drafts nothing and needs no pass of its own, so a token shows as soon as the
prompt has been read, and the state after it is the state after any round.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

import specviz.drafters as drafters
from specviz.engine import display
from specviz.engine.decoder import Decoder
from specviz.engine.tree_round import tree_round
from specviz.engine.verify import verify
from specviz.events import AlignedToken, DraftToken, EmittedToken, RoundEvent, TreeNode


class SpeculativeDecoder(Decoder):
    def __init__(self, *args, history: list[list[int]] | None = None, **kw):
        super().__init__(*args, **kw)
        self.drafter = drafters.make_drafter(
            self.pair, self.settings, generator=self.generator, history=history or (), target=self.target
        )
        self.length = drafters.make_length(self.pair, self.settings)
        self.index = 0
        self._drafter_begun = False

    @torch.inference_mode()
    def step(self) -> RoundEvent:
        if self._pending is not None:
            # The prefill's logits give the first token: a round that drafted nothing, shown
            # before the drafter has read the prompt.
            start = time.perf_counter()
            logits, self._pending = self.sampler.logits(self._pending[None]), None
            return self._round(drafters.Proposal(tokens=self.ids.new_empty(0), q=None), logits, start, first=True)
        if not self._drafter_begun:
            self.drafter.begin(self.ids)
            self._drafter_begun = True
        limit = self.length.limit(self.drafter.unread(self.ids.numel()), self.remaining)
        proposal = self.drafter.propose(self.ids, min(limit, self.remaining - 1), self.length.keep_going, self.length)
        if proposal.parents is not None:
            return self._tree_step(proposal)
        start = time.perf_counter()
        logits = self.sampler.logits(
            self.target.feed(torch.cat([self.ids[-1:], proposal.tokens.to(self.device)]), keep=0)
        )
        return self._round(proposal, logits, start)

    def _round(
        self, proposal: drafters.Proposal, logits: torch.Tensor, start: float, *, first: bool = False
    ) -> RoundEvent:
        """Verify a chain `proposal` against the target's `logits` (its m+1 rows, processed),
        the pass having started at `start`; keep what was accepted and tell the round."""
        greedy = self.sampler.greedy
        context_len = self.ids.numel()
        x = proposal.tokens.to(self.device)
        self.sync()
        target_ms = (time.perf_counter() - start) * 1000
        p = None if greedy else self.sampler.distribution(logits)
        v = verify(x, logits if greedy else p, proposal.q, generator=self.generator, greedy=greedy)
        self.sync()
        verify_ms = (time.perf_counter() - start) * 1000
        self.target.crop(context_len + v.n_accepted)
        if not first:  # the drafter and the policy had no part in the first round
            self.drafter.accepted(v.n_accepted)
            self.length.update(
                x.numel(), v.n_accepted, verify_ms=target_ms, draft_ms=proposal.ms, setup_ms=proposal.setup_ms
            )
        drafted = [
            DraftToken(id=t, text="", p=v.p[i], q=v.q[i], u=v.u[i], decision=d)
            for i, (t, d) in enumerate(zip(v.tokens, v.decisions))
        ]
        verdict = Verdict(
            drafted,
            v.new_tokens,
            v.n_accepted,
            (v.emitted, v.emitted_p, v.emitted_kind),
            logits,
            p,
            proposal.q,
            x,
            target_ms,
            verify_ms,
            x.numel(),
        )
        return self._finish(proposal, verdict, first=first)

    def _tree_step(self, proposal: drafters.Proposal) -> RoundEvent:
        """One round over a token tree: one target pass over every node (`tree_round`), the
        accepted path kept in both caches. The round's `drafted` is the chain a reader follows
        (the accepted path, then below it the draft's first choice and its first choices, the
        first of them rejected), so a one-wide tree shows exactly as a chain; `tree` lists
        every node with its decision."""
        greedy = self.sampler.greedy
        r = tree_round(self.target, self.sampler, proposal, int(self.ids[-1]), self.generator, greedy)
        self.sync()
        if r.ride_logits is not None and r.ride_logits.shape[0]:
            self.drafter.observe(r.ride_logits)
        self.drafter.accepted_path(r.path)
        shown = r.path + _first_descendants(r.parents, r.path[-1] if r.path else -1)
        self.length.update(
            len(shown), len(r.path), verify_ms=r.target_ms, draft_ms=proposal.ms, setup_ms=proposal.setup_ms
        )
        drafted = [
            DraftToken(
                id=r.tokens[i],
                text="",
                p=r.p[i] if r.p[i] is not None else 0.0,
                q=r.q[i],
                u=r.u[i],
                decision=r.decision[i],
            )
            for i in shown
        ]
        # Along the shown chain: the target's distribution after the root and after each path node.
        rows = torch.tensor([0] + [i + 1 for i in r.path], device=r.logits.device)
        x = torch.tensor([r.tokens[i] for i in shown], dtype=torch.long, device=r.logits.device)
        tree = [
            TreeNode(
                parent=r.parents[i],
                token=r.tokens[i],
                text=self.texts(r.tokens[i]),
                depth=r.depth[i],
                q=r.q[i],
                p=r.p[i],
                decision=r.decision[i],
            )
            for i in range(len(r.tokens))
        ]
        verdict = Verdict(
            drafted,
            r.new_tokens,
            len(r.path),
            (r.emitted, r.emitted_p, r.emitted_kind),
            r.logits[rows],
            None if greedy else r.dist[rows],
            None,
            x,
            r.target_ms,
            r.verify_ms,
            len(r.tokens),
            tree,
        )
        return self._finish(proposal, verdict)

    def _finish(self, proposal: drafters.Proposal, v: "Verdict", *, first: bool = False) -> RoundEvent:
        """The tail every round shares: keep the new tokens (up to a stop), show the accepted
        ones, name the rest, and tell the round with its display data and counts."""
        n = v.accepted
        kept = self.check_stop(v.new_tokens)  # < n + 1 only when an accepted draft was a stop token
        self.ids = torch.cat([self.ids, torch.tensor(v.new_tokens[:kept], dtype=torch.long, device=self.device)])
        accepted = min(n, kept)
        n_pos = min(n + 1, kept)  # verified positions that count: up to the rejection / bonus
        tested = min(n_pos, len(v.drafted))
        if v.tree is None:  # a chain's positions past a stop were never reached (a tree says so per node)
            for d in v.drafted[tested:]:
                d.decision, d.u = "unchecked", None
        for d in v.drafted[:accepted]:
            self.say(d, d.id)
        for d, text in zip(v.drafted[accepted:], self.detok.peek([d.id for d in v.drafted[accepted:]])):
            d.text = text or self.texts(d.id)  # shown struck through: never empty
        emitted = None
        if kept == n + 1:
            emitted = EmittedToken(id=v.emitted[0], text="", p=v.emitted[1], kind=v.emitted[2])
            self.say(emitted, emitted.id)
        q = None if v.q is None else v.q[:tested]
        overlap = display.overlaps(v.p, q, v.x[:tested], v.logits)
        positions = (
            display.positions(n_pos, v.logits, v.p, v.q, v.x, overlap, self.texts) if self.record == "full" else []
        )
        t = self.tally
        if first:
            t.count_first(kept)
        else:
            t.count_round(
                new=kept,
                tested=tested,
                accepted=accepted,
                overlap=overlap,
                target_ms=v.target_ms,
                draft_ms=proposal.ms,
                draft_passes=proposal.passes,
                draft_tokens=v.draft_tokens,
            )
        alignment = [
            AlignedToken(id=int(a["id"]), text=str(a["text"]), candidates=[int(c) for c in a["candidates"]])
            for a in proposal.alignment or []
        ]
        event = RoundEvent(
            index=self.index,
            k=len(v.drafted),
            drafted=v.drafted,
            emitted=emitted,
            positions=positions,
            draft_ms=proposal.ms,
            verify_ms=v.verify_ms,
            t_end_s=self.elapsed(),
            new_tokens=t.new_tokens,
            alignment=alignment,
            tree=v.tree or [],
            source=display.source(proposal.source, self.texts),
        )
        self.index += 1
        return event


@dataclass
class Verdict:
    """What a chain or tree round decided, as the shared tail reads it."""

    drafted: list[DraftToken]  # the chain shown: drafted tokens in order, text not yet filled
    new_tokens: list[int]  # the accepted tokens and the emitted one
    accepted: int
    emitted: tuple[int, float, str]  # the emitted token, its probability, resampled or bonus
    logits: torch.Tensor  # the target's rows along the shown chain (processed)
    p: torch.Tensor | None  # their distributions; None when greedy
    q: torch.Tensor | None  # the draft's, None for point masses
    x: torch.Tensor  # the shown chain's tokens
    target_ms: float
    verify_ms: float
    draft_tokens: int  # tokens the draft proposed (a tree's every node)
    tree: list[TreeNode] | None = None


def _first_descendants(parents: list[int], node: int) -> list[int]:
    """Below `node` (-1: the root), its first child, that child's first child, and so on."""
    out = []
    while True:
        child = next((i for i, par in enumerate(parents) if par == node), None)
        if child is None:
            return out
        out.append(child)
        node = child
