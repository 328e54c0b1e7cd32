"""Lookahead decoding: the target's own Jacobi iterations guess n-grams; one pass verifies
earlier guesses and makes the next ones (Fu et al., 2024; llama.cpp's examples/lookahead).

A window of W columns and N - 1 levels of guessed future tokens rides in every target pass
beside the candidates, as ride nodes (`drafters.base.Proposal.ride`). As a tree under the
root (the last context token, which stands in for level 0's first column):

    level 0     root -> g[0][1] -> g[0][2] -> ... -> g[0][W-1]      a chain
    level j     g[j][i] under g[j-1][i] (g[0][0] is the root)       one branch per column

so g[j][i] sits at position root + i + j, after a guessed prefix of its own. The target's
argmax after g[N-2][i] is the next guess for column i; with it the column yields an n-gram
(g[0][i], g[1][i], ..., g[N-2][i], new), which goes into the pool under its first token, and
the levels shift down one (level 0 drops out, the new guesses become the last level).

The candidates of a round are the pool's n-grams that start with the root, and the
context's own (what followed the root's earlier occurrences, as prompt lookup finds them),
merged into a trie: siblings are distinct tokens, chosen from the past alone, so the tree is
verified with the point-mass tree rule and the output stays the target's. The window's
logits never decide anything of the round they ride in.

Cost: the window makes every pass W * (N - 1) - 1 nodes larger. Where a pass over many
tokens costs little more than one (bf16 on a CPU with AMX, any GPU) that is cheap; where it
costs several one-token passes (llama.cpp's Q4 on a small CPU) the window cannot pay, and
where even a perfect round (a whole n-gram accepted) would not pay for it, it never rides. The
drafter measures what its window rounds give (tokens per round) and asks the policy whether
that pays for their pass (`TreeBudget.pays`); if not, the window stops riding and is tried
again after PROBE_WAIT rounds, the wait doubling each time it still does not pay. Without the
window the pool's and the context's n-grams are still proposed, sized by the policy.
"""

from __future__ import annotations

import random
import time

import torch

from specviz.drafters.base import KeepGoing, Proposal, SourceNote, TreeBudget, TreeDrafting, nodes_paid, point_masses
from specviz.drafters.base import trie
from specviz.lm import rows
from specviz.choices import LOOKAHEAD

# A node's chance of acceptance: a running acceptance per depth (the share of checked nodes
# at that depth the target accepted), from this prior worth PRIOR_WEIGHT nodes; a node's
# later siblings get SIBLING_SHARE of the one before.
PRIOR_ACCEPT = 0.3
PRIOR_WEIGHT = 2.0
MEMORY = 0.95
SIBLING_SHARE = 0.5
# The window's trial: this many rounds with it riding before its yield is judged; then, if
# it does not pay, this many rounds without it before it is tried again (doubling each time).
TRIAL_ROUNDS = 8
PROBE_WAIT = 16
MAX_PROBE_WAIT = 256


class LookaheadDrafter(TreeDrafting):
    name = LOOKAHEAD

    def __init__(self, window: int = 4, ngram: int = 3, candidates: int = 4, *, seed: int = 0):
        if window < 1 or ngram < 3 or candidates < 1:
            raise ValueError(
                "lookahead needs a window of 1 or more, n-grams of 3 or more tokens and 1 or more candidates"
            )
        self.W, self.N, self.G = window, ngram, candidates
        self._seed = seed
        self.begin(torch.zeros(1, dtype=torch.long))

    # -- the protocol ---------------------------------------------------------------------

    def begin(self, prompt_ids: torch.Tensor) -> None:
        ids = [int(t) for t in prompt_ids.reshape(-1).tolist()] or [0]
        rng = random.Random(self._seed)  # the window starts from the prompt's own tokens, as llama.cpp's does
        self.levels = [[rng.choice(ids) for _ in range(self.W)] for _ in range(self.N - 1)]
        self.pool: dict[int, list[tuple[int, ...]]] = {}
        self._acc = [[PRIOR_ACCEPT * PRIOR_WEIGHT, PRIOR_WEIGHT] for _ in range(self.N)]  # per depth: accepted, checked
        self._window_on = True
        self._trial: list[int] = []  # tokens per round of the current trial
        self._wait = 0
        self._probe_wait = PROBE_WAIT
        self._last: dict | None = None
        self._budget: TreeBudget | None = None

    def propose(
        self, context: torch.Tensor, k: int, keep_going: KeepGoing, budget: TreeBudget | None = None
    ) -> Proposal:
        start = time.perf_counter()
        self._budget = budget
        ctx = [int(t) for t in context.reshape(-1).tolist()]
        root = ctx[-1]
        grams = self._candidates(ctx, root, k)
        tokens, parents, origins, depth, _ = trie(grams)
        chances = self._chances(parents, depth)
        riding = self._window_on and k > 0 and self._could_pay(budget, k)
        ride_tokens, ride_parents = self._ride() if riding else ([], [])
        self._last_root = root  # level 0's first column in this pass
        n = nodes_paid(budget, chances, len(ride_tokens))
        tokens, parents, origins, depth = tokens[:n], parents[:n], origins[:n], depth[:n]
        window_shown = [[root, *self.levels[0][1:]], *[list(level) for level in self.levels[1:]]]
        source = SourceNote(
            LOOKAHEAD,
            window=window_shown if riding else [],
            origins=origins,
            window_on=riding,
            ride=len(ride_tokens),
            note="" if n or riding else "no n-gram starts with the last token, and the window is resting",
        )
        self._last = {"parents": parents, "depth": depth, "riding": riding, "source": source}
        return point_masses(tokens, parents, chances[:n], start, source, ride_tokens, ride_parents)

    def observe(self, logits: torch.Tensor) -> None:
        """The window's logits: one Jacobi step, and the n-grams it completes."""
        if self._last is None or not self._last["riding"]:
            return
        last = [self._index[(self.N - 2, i)] for i in range(self.W)]  # the window's last level
        new = rows.argmax(logits[last]).tolist()
        made = []
        for i in range(self.W):
            first = self._last_root if i == 0 else self.levels[0][i]
            gram = tuple([*(self.levels[j][i] for j in range(1, self.N - 1)), int(new[i])])
            made.append([first, *gram])
            self._remember(first, gram)
        self.levels = [*self.levels[1:], [int(t) for t in new]]
        self._last["source"].ngrams = made

    def accepted_path(self, path: list[int]) -> None:
        last, self._last = self._last, None
        if last is None:
            self._count_round(1, riding=False)
            return
        accepted = set(path)
        for i, d in enumerate(last["depth"]):
            par = last["parents"][i]
            if par < 0 or par in accepted:  # checked: its parent was on the path
                pair = self._acc[min(d, self.N - 1)]
                pair[0] = pair[0] * MEMORY + (i in accepted)
                pair[1] = pair[1] * MEMORY + 1
        self._count_round(len(path) + 1, riding=last["riding"], nodes=len(last["parents"]))

    # -- candidates and the window ----------------------------------------------------------

    def _candidates(self, ctx: list[int], root: int, k: int) -> list[tuple[tuple[int, ...], str]]:
        """Up to G n-gram continuations of the root, each cut to k tokens: the pool's newest
        first, then the context's latest, each sequence once."""
        if k <= 0:
            return []
        seen, out = set(), []
        for gram in reversed(self.pool.get(root, [])):
            g = gram[:k]
            if g not in seen:
                seen.add(g)
                out.append((g, "window"))
        for at in range(len(ctx) - 2, -1, -1):
            if len(out) >= self.G:
                break
            if ctx[at] == root:
                g = tuple(ctx[at + 1 : at + self.N])[:k]
                if g and g not in seen:
                    seen.add(g)
                    out.append((g, "context"))
        return out[: self.G]

    def _chances(self, parents: list[int], depth: list[int]) -> list[float]:
        out, siblings = [], {}
        for i, (par, d) in enumerate(zip(parents, depth)):
            acc, checked = self._acc[min(d, self.N - 1)]
            before = siblings.get(par, 0)
            siblings[par] = before + 1
            out.append((out[par] if par >= 0 else 1.0) * acc / checked * SIBLING_SHARE**before)
        return out

    def _ride(self) -> tuple[list[int], list[int]]:
        """The window as ride nodes: level 0's columns 1..W-1 as a chain under the root, then
        each higher level's column i under the level below's column i."""
        tokens, parents, index = [], [], {(0, 0): -1}
        for i in range(1, self.W):
            index[(0, i)] = len(tokens)
            tokens.append(self.levels[0][i])
            parents.append(index[(0, i - 1)])
        for j in range(1, self.N - 1):
            for i in range(self.W):
                index[(j, i)] = len(tokens)
                tokens.append(self.levels[j][i])
                parents.append(index[(j - 1, i)])
        self._index = index
        return tokens, parents

    def _could_pay(self, budget: TreeBudget | None, k: int) -> bool:
        """Whether even a perfect round (a whole n-gram accepted, and the target's token
        after it) would pay for the window's share of the pass: where a pass over many
        tokens costs several one-token passes, it cannot, and the window never rides."""
        return budget is None or budget.pays(min(k, self.N - 1) + 1, self.W * (self.N - 1) - 1)

    def _remember(self, first: int, gram: tuple[int, ...]) -> None:
        grams = self.pool.setdefault(first, [])
        if gram in grams:
            grams.remove(gram)
        grams.append(gram)
        del grams[: -self.G]  # the G newest

    def _count_round(self, tokens: int, *, riding: bool, nodes: int = 0) -> None:
        """The window's schedule: judge a trial after TRIAL_ROUNDS rounds; rest, then retry."""
        if riding:
            self._trial.append(tokens)
            if len(self._trial) >= TRIAL_ROUNDS and self._budget is not None:
                mean = sum(self._trial[-TRIAL_ROUNDS:]) / TRIAL_ROUNDS
                if not self._budget.pays(mean, self.W * (self.N - 1) - 1 + nodes):
                    self._window_on, self._wait, self._trial = False, self._probe_wait, []
                    self._probe_wait = min(MAX_PROBE_WAIT, self._probe_wait * 2)
            return
        if not self._window_on:
            self._wait -= 1
            if self._wait <= 0:
                self._window_on = True


def make(pair, settings, *, generator=None, history=()) -> LookaheadDrafter:
    return LookaheadDrafter(settings.lookahead_window, settings.lookahead_ngram, settings.lookahead_candidates)
