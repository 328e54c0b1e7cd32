"""The drafter protocol: propose up to k tokens with their q; hear back how many were accepted.

Every drafting strategy (a small model, prompt lookup, the target's own early layers, a
suffix index, lookahead's Jacobi window) sits behind these methods, as in transformers'
`CandidateGenerator`. The engine owns the target and the acceptance rule; a drafter owns
only its guesses and its own cache.

A proposal is a chain, or a tree when it has `parents`. A tree proposal may also carry
`ride` nodes: tokens that go through the same target pass under the same tree mask but are
not candidates (lookahead's Jacobi window). The acceptance rule never sees them; their logits go
back to the drafter through `observe`, and the cache keeps none of them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, NamedTuple, Protocol, Sequence

import torch
from torch.nn.functional import one_hot

from specviz.drafters.length import DraftLength
from specviz.events import AlignedToken
from specviz.lm import rows
from specviz.lm.sampling import Sampler
from specviz.lm.timing import sync
from specviz.lm.tree import chain_parents

# Called after each drafted token with the drafter's confidence in it (its top probability
# at that position); returning False ends drafting for this round.
KeepGoing = Callable[[float], bool]


# How a draft-free tree drafter sizes its rounds: the draft-length policy's `tree_nodes` and
# `pays` (`tree_cost.TreeCost` where the policy adapts).
TreeBudget = DraftLength


@dataclass
class SourceNote:
    """Where a draft-free round's candidates came from (or that a draft head proposed them), in
    token ids; the engine writes it out in text as `events.CandidateSource`, whose fields say
    what each holds."""

    method: str
    matched: list[int] = field(default_factory=list)
    occurrences: int = 0
    counts: list[int] = field(default_factory=list)
    window: list[list[int]] = field(default_factory=list)
    ngrams: list[list[int]] = field(default_factory=list)
    origins: list[str] = field(default_factory=list)
    window_on: bool = False
    ride: int = 0
    note: str = ""


@dataclass
class Proposal:
    """Up to k drafted tokens and the distributions they were drawn from."""

    tokens: torch.Tensor  # (m,) long, 0 <= m <= k
    q: torch.Tensor | None  # (m, V) processed draft distributions; None: point masses on `tokens`
    ms: float = 0.0  # wall time spent drafting this round, setup_ms included
    # Of `ms`, what the run pays once rather than per round (a drafter's prefill of the prompt).
    setup_ms: float = 0.0
    passes: int = 0  # draft forward passes this round
    confidence: list[float] = field(default_factory=list)  # the draft's top probability per token
    # Cross-tokenizer drafters: each draft token of the round with the indices into `tokens`
    # of the target tokens it became; None otherwise.
    alignment: list[AlignedToken] | None = None
    # A token tree: parents[i] is the index in `tokens` of node i's parent, -1 for a child of
    # the root (the last token of the context); parents come before children. None: a chain.
    parents: list[int] | None = None
    # Ride nodes (tree proposals only): tokens and parents, -1 for a child of the root and
    # j >= 0 for ride node j (earlier); never a candidate's child, nor a candidate theirs.
    ride: torch.Tensor | None = None
    ride_parents: list[int] | None = None
    # Where the candidates came from, for the Round inspector.
    source: SourceNote | None = None
    # The nodes the run's output format forced (point masses, no drafting), by index in `tokens`,
    # and (n + 1, V) its mask per row of the target's pass (set by `grammar.walk`).
    forced: list[int] = field(default_factory=list)
    allowed: torch.Tensor | None = None

    def __len__(self) -> int:
        return self.tokens.numel()

    @classmethod
    def empty(cls, context: torch.Tensor, **fields) -> "Proposal":
        """A round that drafts nothing: the target decodes one token plainly."""
        return cls(tokens=context[:0], q=None, **fields)


class Drafter(Protocol):
    name: str

    def begin(self, prompt_ids: torch.Tensor) -> None:
        """Start a new run on this prompt (1-D ids): reset and prefill any cache."""

    def propose(
        self, context: torch.Tensor, k: int, keep_going: KeepGoing, budget: TreeBudget | None = None
    ) -> Proposal:
        """Propose up to k tokens to follow `context` (the prompt and all output so far); a
        tree drafter sizes its tree with `budget` where given (at most k deep)."""

    def accepted(self, n: int) -> None:
        """The first n proposed tokens were accepted; roll back to the context plus those n."""

    def accepted_path(self, path: list[int]) -> None:
        """A tree round accepted these nodes of the last proposal (a path from a child of the
        root down): the tree form of `accepted`, which a chain drafter answers with len(path)."""

    def observe(self, logits: torch.Tensor) -> None:
        """The target's logits (vocabulary-cut, one row per ride node) at the last proposal's ride
        nodes, before `accepted_path` is called; a drafter without ride nodes ignores it."""

    def unread(self, context_len: int) -> int:
        """How many of the context's `context_len` tokens the drafter has still to read before
        it can draft (0 for a drafter without a cache): what a round that drafts pays first."""

    def constrain(self, grammar) -> None:
        """The run has an output format (`grammar.matcher.Grammar`): a drafter that samples from
        a model draws from q masked by it; the engine prunes what any drafter proposes."""


def point_masses(
    tokens: list[int],
    parents: list[int],
    chances: list[float],
    start: float,
    source: SourceNote,
    ride: Sequence[int] = (),
    ride_parents: list[int] | None = None,
) -> Proposal:
    """A draft-free drafter's candidates (none: a plain round), each certain (q None), timed
    from `start`. A tree one wide without ride nodes is stated as a chain, so it takes the
    chain pass (what V(n) measured) and the chain rule; a draft model's tree keeps its tree
    pass, since its draft cache follows it."""
    return Proposal(
        tokens=torch.tensor(tokens, dtype=torch.long),
        q=None,
        ms=ms_since(start),
        confidence=chances,
        parents=None if not ride and parents == chain_parents(len(parents)) else parents,
        ride=torch.tensor(ride, dtype=torch.long) if ride else None,
        ride_parents=ride_parents if ride else None,
        source=source,
    )


class Trie(NamedTuple):
    """Token sequences merged into a tree (`trie`), per node: its token, its parent, the tag of
    the sequence that first reached it, its depth (1 under the root) and how many sequences
    pass through it."""

    tokens: list[int]
    parents: list[int]
    tags: list
    depths: list[int]
    counts: list[int]


def trie(sequences: Iterable[tuple[Sequence[int], object]]) -> Trie:
    """(tokens, tag) sequences merged into a tree, nodes in the order first met, so earlier
    sequences' siblings come first."""
    out = Trie([], [], [], [], [])
    child: dict[tuple[int, int], int] = {}
    for tokens, tag in sequences:
        at = -1
        for depth, token in enumerate(tokens, 1):
            node = child.get((at, token))
            if node is None:
                node = child[(at, token)] = len(out.tokens)
                for column, value in zip(out, (token, at, tag, depth, 0)):
                    column.append(value)
            out.counts[node] += 1
            at = node
    return out


def nodes_paid(budget: TreeBudget | None, chances: Sequence[float], ride: int = 0) -> int:
    """How many of a draft-free drafter's candidates (their chances, best first) the round
    verifies: as many as the policy's budget pays for, all of them without one."""
    return budget.tree_nodes(chances, ride) if budget is not None else len(chances)


def ms_since(start: float) -> float:
    """Wall ms since `start`, a `time.perf_counter()` reading."""
    return (time.perf_counter() - start) * 1000


class Drafting:
    """The protocol's defaults: no cache of its own to catch up, no ride nodes to read."""

    def observe(self, logits: torch.Tensor) -> None:
        pass

    def unread(self, context_len: int) -> int:
        return 0

    def constrain(self, grammar) -> None:
        pass


class Sampling:
    """`constrain` for a drafter that draws from its own `Sampler` (`self._sampler`)."""

    def constrain(self, grammar) -> None:
        self._sampler.grammar = grammar


class ChainDrafting(Drafting):
    """The tree-round half of the protocol for a drafter whose proposals are chains."""

    def accepted_path(self, path: list[int]) -> None:
        self.accepted(len(path))


class TreeDrafting(Drafting):
    """The chain half of the protocol for a tree drafter: n accepted tokens of a chain are
    the path through its first n nodes."""

    def accepted(self, n: int) -> None:
        self.accepted_path(list(range(n)))


def ranked(sampler: Sampler, logits: torch.Tensor) -> torch.Tensor:
    """The distribution a drafter ranks tokens by and takes its confidence from: the processed
    one, or under greedy decoding the plain softmax (a one-hot argmax would give every token
    a confidence, and every tree path a score, of 1 or 0)."""
    return logits.softmax(-1) if sampler.greedy else sampler.distribution(logits)


def next_token(
    sampler: Sampler, logits: torch.Tensor, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """A drafted token from a row of logits (`Sampler.logits`), its confidence and the
    distribution it was drawn from: under greedy decoding the argmax, the plain softmax's top
    probability and None; else a draw from the processed distribution and its top probability."""
    dist = ranked(sampler, logits)
    if sampler.greedy:
        return rows.argmax(logits).to(logits.device), dist.max(), None
    return sampler.choose(dist, generator), dist.max(), dist


def draft_chain(
    step: Callable[[torch.Tensor], torch.Tensor],
    fed: torch.Tensor,
    k: int,
    keep_going: KeepGoing,
    eos: set[int],
    sampler: Sampler,
    generator: torch.Generator | None,
    start: float,
    **fields,
) -> Proposal:
    """Up to k tokens drafted one after another, one pass each: `step(fed)` gives the logits
    after `fed` (first the given tokens, then each drafted token). Drafting stops after a
    token whose confidence `keep_going` refuses, or an end of sequence. The proposal is on
    `fed`'s device and timed from `start`; `fields` are its other fields.

    Under the sampler's grammar each q is masked at its place, and the tokens the grammar
    forces (where the round starts, and after a drafted token) join the chain as point masses,
    fed with the next pass: they cost no pass, and the policy (`keep_going`) hears the drafted
    tokens only."""
    tokens, dists, confidence, forced, device, passes = [], [], [], [], fed.device, 0
    grammar = sampler.grammar
    lead = grammar.forced() if grammar is not None and k > 0 else []
    if lead:  # forced where the round starts: they lead the chain, fed with the context, drafted by no pass
        forced, tokens, confidence = list(range(len(lead))), list(lead), [1.0] * len(lead)
        fed = torch.cat([fed, torch.tensor(lead, dtype=torch.long, device=fed.device)])
    while passes < k:
        logits = step(fed)
        passes += 1
        if grammar is not None:
            logits = sampler.masked(logits, grammar.allowed(tokens))
        token, conf, dist = next_token(sampler, logits, generator)
        tokens.append(int(token))
        confidence.append(float(conf))
        dists.append(dist)
        fed = token.view(1)
        if not keep_going(confidence[-1]) or tokens[-1] in eos:
            break
        ahead = grammar.forced(tokens) if grammar is not None else []
        forced += range(len(tokens), len(tokens) + len(ahead))
        tokens += ahead
        confidence += [1.0] * len(ahead)
        dists += [None if dist is None else one_hot(torch.tensor(t), dist.numel()).to(dist) for t in ahead]
        fed = torch.tensor(tokens[-1 - len(ahead) :], dtype=torch.long, device=fed.device)
    if lead and dists[0] is not None:
        dists = [one_hot(torch.tensor(t), dists[0].numel()).to(dists[0]) for t in lead] + dists
    elif lead:
        dists = [None] * len(lead) + dists
    ids = torch.tensor(tokens, dtype=torch.long, device=device)
    sync(ids)
    return Proposal(
        tokens=ids,
        q=torch.stack(dists).to(device) if dists and dists[0] is not None else None,
        ms=ms_since(start),
        passes=passes,
        confidence=confidence,
        forced=forced,
        **fields,
    )
