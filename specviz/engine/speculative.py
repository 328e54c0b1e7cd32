"""The speculative decoding loop: draft, verify in one target pass, keep what was accepted.

Per round, with the context ids[0..L) and the target's cache holding ids[0..L-1):

1. the drafter proposes a chain x_1..x_m or a tree of m nodes (m <= k, and m < tokens still
   allowed, so that the round's new tokens never overshoot the limit);
2. `tree_round`: one target pass over [ids[L-1], the drafts], the rule (`verify`) accepts a
   path and emits one more token (resampled or bonus), and the target's cache keeps
   ids + the path, leaving the emitted token pending for the next pass;
3. the drafter hears the path so it can keep its own cache, and the round's one `Outcome`
   becomes its `RoundEvent`, chain and tree alike.

The prompt's prefill covers its last token too, and its logits give the first token: the
first round drafts nothing and needs no pass of its own, so a token shows as soon as the
prompt has been read, and the state after it is the state after any round.
"""

from __future__ import annotations

import time
import torch

import specviz.drafters as drafters
from specviz.engine import position_info
from specviz.engine.decoder import Decoder
from specviz.engine.tree_round import Round, decide, tree_round
from specviz.engine.verify import Outcome, children_of
from specviz.events import DraftToken, EmittedToken, RoundEvent, TreeNode
from specviz.grammar.positions import annotate
from specviz.grammar.walk import walk
from specviz.lm.tree import depths


class SpeculativeDecoder(Decoder):
    def __init__(self, *args, history: list[list[int]] | None = None, **kw):
        super().__init__(*args, **kw)
        self.drafter = drafters.make_drafter(
            self.pair, self.settings, generator=self.generator, history=history or (), target=self.target
        )
        self.length = drafters.make_length(self.pair, self.settings)
        if self.grammar is not None:
            self.drafter.constrain(self.grammar)
        self.index = 0
        self._drafter_begun = False

    @torch.inference_mode()
    def step(self) -> RoundEvent:
        greedy = self.sampler.greedy
        if self._pending is not None:
            # The prefill's logits give the first token: a round that drafted nothing, shown
            # before the drafter has read the prompt; the drafter and the policy take no part.
            start = time.perf_counter()
            logits, self._pending = self.sampler.logits(self._pending[None]), None
            proposal = drafters.Proposal.empty(self.ids, allowed=self.allowed())
            return self._event(
                proposal, decide(self.sampler, proposal, logits, start, self.generator, greedy), first=True
            )
        if not self._drafter_begun:
            self.drafter.begin(self.ids)
            self._drafter_begun = True
        forced = min(len(self.grammar.forced()), self.remaining - 1) if self.grammar is not None else 0
        limit = self.length.limit(self.drafter.unread(self.ids.numel()), self.remaining, forced)
        proposal = self.drafter.propose(self.ids, min(limit, self.remaining - 1), self.length.keep_going, self.length)
        walked = walk(self.grammar, proposal, self.remaining - 1) if self.grammar is not None else None
        proposal = walked.proposal if walked is not None else proposal
        r = tree_round(self.target, self.sampler, proposal, int(self.ids[-1]), self.generator, greedy)
        path = r.outcome.path
        if r.ride_logits is not None and r.ride_logits.shape[0]:
            self.drafter.observe(r.ride_logits)
        self.drafter.accepted_path(path if walked is None else walked.heard(path))
        return self._event(proposal, r)

    def _event(self, proposal: drafters.Proposal, r: Round, *, first: bool = False) -> RoundEvent:
        """The round told: keep the new tokens (up to a stop), show the accepted ones, name the
        rest, with display data and counts. `drafted` is the chain a reader follows (the
        accepted path, then below it the first child and its first children, the first of them
        rejected): a chain whole, a one-wide tree exactly as a chain; a tree's `tree` lists
        every node with its decision."""
        o = r.outcome
        n = len(o.path)
        shown = _shown(o)
        drafted = [
            DraftToken(id=o.tokens[i], text="", p=o.p[i], q=o.q[i], u=o.u[i], decision=o.decisions[i]) for i in shown
        ]
        kept = len(self.kept(o.new_tokens))  # < n + 1 only when an accepted draft was a stop token
        self.ids = torch.cat([self.ids, torch.tensor(o.new_tokens[:kept], dtype=torch.long, device=self.device)])
        accepted = min(n, kept)
        n_pos = min(n + 1, kept)  # verified positions that count: up to the rejection / bonus
        tested = min(n_pos, len(drafted))
        chain = proposal.parents is None
        if chain:  # a chain's positions past a stop were never reached (a tree says so per node)
            for d in drafted[tested:]:
                d.decision, d.u = "unchecked", None
        for d in drafted[:accepted]:
            self.say(d, d.id)
        for d, text in zip(drafted[accepted:], self.detok.peek([d.id for d in drafted[accepted:]])):
            d.text = text or self.texts(d.id)  # shown struck through: never empty
        emitted = None
        if kept == n + 1:
            emitted = EmittedToken(id=o.emitted, text="", p=o.emitted_p, kind=o.emitted_kind)
            self.say(emitted, emitted.id)
        # The target's rows along the path; the draft's q rows where the rule read them (a chain).
        logits, dist = _along(r.logits, o.path), None if r.dist is None else _along(r.dist, o.path)
        q = proposal.q if chain else None
        x = torch.tensor([o.tokens[i] for i in shown], dtype=torch.long, device=r.logits.device)
        overlap = position_info.overlaps(dist, None if q is None else q[:tested], x[:tested], logits)
        positions = (
            position_info.positions(n_pos, logits, dist, q, x, overlap, self.texts) if self.record == "full" else []
        )
        if proposal.allowed is not None and positions:
            annotate(positions, _along(proposal.allowed, o.path), _along(r.unmasked, o.path), self.sampler)
        if first:
            self.tally.count_first(kept)
        else:  # the drafter and the policy had no part in the first round
            self._count(proposal, r, drafted, kept, tested, accepted, overlap)
        return self._told(
            proposal, drafted, emitted, positions, r.verify_ms, [] if chain else self._tree(o, proposal), first
        )

    def _count(self, proposal, r: Round, drafted, kept: int, tested: int, accepted: int, overlap) -> None:
        """The round in the policy's and the tally's counts: the tokens an output format forced
        (marked on `drafted`) are counted apart from the drafter's own, which alone the policy hears."""
        shown = _shown(r.outcome)
        own = [i not in proposal.forced for i in shown]
        for d, mine in zip(drafted, own):
            d.forced = not mine
        mine, got = sum(own[:tested]), sum(own[:accepted])
        # A pass that also verified forced tokens is not one V(n) prices: the policy is not told its time.
        target_ms = None if proposal.forced else r.target_ms
        self.length.update(sum(own), got, setup_ms=proposal.setup_ms, target_ms=target_ms)
        self.tally.count_round(
            new=kept,
            tested=mine,
            accepted=got,
            overlap=[b for b, m in zip(overlap, own) if m],
            target_ms=r.target_ms,
            draft_ms=proposal.ms,
            draft_passes=proposal.passes,
            draft_tokens=len(r.outcome.tokens) - len(proposal.forced),
            forced=(tested - mine, accepted - got),
        )

    def _told(self, proposal, drafted, emitted, positions, verify_ms: float, tree: list[TreeNode], first) -> RoundEvent:
        event = RoundEvent(
            index=self.index,
            k=len(drafted),
            drafted=drafted,
            emitted=emitted,
            positions=positions,
            draft_ms=proposal.ms,
            verify_ms=verify_ms,
            t_end_s=self.elapsed(),
            new_tokens=self.tally.new_tokens,
            alignment=list(proposal.alignment or []),
            tree=tree,
            source=position_info.source(proposal.source, self.texts),
            policy_note="" if first else self.length.why,
        )
        self.index += 1
        return event

    def _tree(self, o: Outcome, proposal: drafters.Proposal) -> list[TreeNode]:
        """Every node of a tree round, the target's p where it checked the node."""
        depth = depths(o.parents)
        return [
            TreeNode(
                parent=o.parents[i],
                token=t,
                text=self.texts(t),
                depth=depth[i] + 1,
                q=o.q[i],
                p=None if o.decisions[i] == "unchecked" else o.p[i],
                decision=o.decisions[i],
                forced=i in proposal.forced,
            )
            for i, t in enumerate(o.tokens)
        ]


def _shown(o: Outcome) -> list[int]:
    """The accepted path, then below its last node the first child, that child's first child,
    and so on."""
    kids = children_of(o.parents)
    shown, at = list(o.path), o.path[-1] if o.path else -1
    while kids[at + 1]:
        at = kids[at + 1][0]
        shown.append(at)
    return shown


def _along(t: torch.Tensor, path: list[int]) -> torch.Tensor:
    """Rows of `t` after the root and after each node of `path`: a view when they are the
    first rows, as always for a chain."""
    if path == list(range(len(path))):
        return t[: len(path) + 1]
    return t[torch.tensor([0] + [i + 1 for i in path], device=t.device)]
