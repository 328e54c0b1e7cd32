"""The cost-aware draft-length policy: the most expected tokens per measured ms.

A round that drafts m tokens costs C(m) = m*D + V(m+1) (`CostModel.round_ms`), priced on what
the run measures now (`costs.current`: the load-time costs moved by the run's own timed rounds):

- break-even first: where no draft length pays even if every draft were accepted (gains
  BREAK_EVEN_MARGIN over plain decoding), the round drafts nothing;
- else the draft length with the most tokens_per_round(alpha, m) / C(m) at the running
  acceptance estimate alpha sets the rate R to beat; where m = 0 (plain decoding) wins, also
  at alpha one standard error higher, the round drafts nothing;
- a round that would draft nothing drafts after all to check (the acceptance, and D and V(n)
  now) where the check's price, the draft's catch-up included, is a small share of the plain
  rounds since the last check, or, before the run has drafted at all, of the rest of the run;
- the model's promise is checked against the run itself: where the rounds that drafted have
  given fewer tokens per ms than the rounds that did not (each over its recent rounds), the
  round decodes plainly, as when m = 0 wins, probes included. The acceptance estimate rests
  on the tokens the policy chose to draft, which flatters it; the clock does not;
- after each drafted token, drafting goes on only while the expected gain in tokens of the
  next j drafts (j >= 1), sum of P(all drafts so far accepted) * a^i, per ms they add,
  C(n+j) - C(n), beats R for some j. P and a use the draft's confidence in each token,
  calibrated online against the target's verdicts: a confident draft runs long, a
  hesitant one stops early.

Why a round drafts nothing, or drafts only to check, is `why` (`events.POLICY_NOTES`), which
the engine keeps in the round's event.
"""

from __future__ import annotations

import functools
import time

import numpy as np

from specviz import theory
from specviz.cost_model import BREAK_EVEN_MARGIN, CostModel
from specviz.costs.current import RunCosts
from specviz.drafters.length import DraftLength
from specviz.choices import COST_AWARE
from specviz.events import CATCH_UP, CHECK, DRAFTING_LOST, LOW_ACCEPTANCE, NO_DRAFT_PAYS

# The policy's clock: rounds are timed with it (tests replace it to make runs repeatable).
CLOCK = time.perf_counter

# Running acceptance: each round's counts weigh this much less per round that follows
# (about the last ten rounds count), starting from a prior of PRIOR_ALPHA over PRIOR_WEIGHT
# tested tokens. With a prior of two tokens one accepted probe put the optimistic estimate at
# 1.0, and where drafting pays only at long rounds (llama.cpp's Q4 passes on a CPU) the run
# drafted long rounds the acceptance did not carry: 0.91x plain in a simulated 64-token run
# at alpha 0.85, against 0.99x with four (tests/test_cost_model.py).
ALPHA_MEMORY = 0.9
PRIOR_ALPHA = 0.6
PRIOR_WEIGHT = 4.0
# Calibration of the draft's confidence: acceptance counts per confidence bin, each bin
# starting from a prior that acceptance equals confidence, worth CALIBRATION_PRIOR tokens.
CONFIDENCE_BINS = 10
CALIBRATION_PRIOR = 3.0
# While drafting does not pay, a check drafts again (a probe of the acceptance, a timing of the
# draft): it costs a draft pass, a larger verify pass and the draft's catch-up over every token
# it skipped, which grows with the plain stretch, and it is made only once that price is at most
# CHECK_SHARE of the plain rounds since the last (MOVED_SHARE once the one-token pass has moved
# by more than MOVED since), so a run that drafts nothing stays within a few percent of plain
# decoding and a machine that changes is still noticed.
CHECK_SHARE = 0.02
MOVED_SHARE = 0.1
MOVED = 0.2
# Until a run has tested LOOK_TOKENS drafts, where some draft length could pay, its rounds look
# at the acceptance, one drafted token each, while the look's price (the draft's read of the
# prompt, at first) is at most FIRST_LOOK of decoding the rest of the run plainly. On llama.cpp's
# Q4 passes on a 2-core CPU a probe every 8 rounds, each paying the draft's catch-up, cost prose
# 10 % of plain decoding; a longer look made the optimistic estimate draft long rounds that a
# simulated run at acceptance 0.85 could not carry (tests/test_cost_model.py).
FIRST_LOOK = 0.05
LOOK_TOKENS = 2
# Realised tokens per ms of drafting and of plain rounds: each round weighs this much less per
# round of its kind that follows (about the last twenty count); compared once each kind has
# this many rounds, and drafting counts as losing only below this share of the plain rate, so
# that the spread of a few rounds' token counts does not stop drafting that pays.
REALISED_MEMORY = 0.95
REALISED_ROUNDS = 8
REALISED_MARGIN = 0.97


@functools.lru_cache(maxsize=256)
def _tokens(alpha: float, k_max: int) -> np.ndarray:
    """Expected tokens of rounds drafting 0..k_max at `alpha`: every round asks at 1, plain ones again at the same alpha."""
    return np.asarray(theory.tokens_per_round(alpha, np.arange(k_max + 1)))


class CostAwareLength(DraftLength):
    """Adaptive k that maximises expected tokens per ms (see the module docstring).

    A round that drafts m tokens costs C(m): m drafted tokens and a verify pass over m+1,
    plus everything else the engine does per round. C starts from the measured cost model,
    C(m) = m*D + V(m+1), and then follows the run's own timed rounds (`costs.current`), so
    what it optimises is what the user waits for, on this machine, at this moment.

    `draft_ms` overrides the model's D (a drafter other than the draft model: its registry
    entry's price). `confidence` says whether the drafter reports a meaningful confidence per
    token: without it each round drafts the best fixed k.
    """

    name = COST_AWARE

    def __init__(
        self, cost: CostModel, k_max: int, *, draft_ms: float | None = None, confidence: bool = True, clock=None
    ):
        super().__init__(k_max)
        self.k_max = k_max
        self.use_confidence = confidence
        self.costs = RunCosts(cost, k_max, draft_ms)
        self._clock = clock or CLOCK
        self._accepted, self._tested = PRIOR_ALPHA * PRIOR_WEIGHT, PRIOR_WEIGHT
        self._bin_acc = np.array([(i + 0.5) / CONFIDENCE_BINS * CALIBRATION_PRIOR for i in range(CONFIDENCE_BINS)])
        self._bin_n = np.full(CONFIDENCE_BINS, CALIBRATION_PRIOR)
        self._round_conf: list[float] = []
        self._p_all, self._rate = 1.0, 0.0
        self._idle_ms, self._checked_level = 0.0, 1.0  # plain ms since a round drafted, the level then
        self._tested_here = 0  # drafts this run has tested
        self._unread = 0
        largest = max(cost.verify)  # the draft's ms per token read in one pass, priced until measured
        self._feed_ms = cost.verify_ms(largest) / largest * cost.draft / cost.target
        self._forced = 0  # tokens the output format forces where this round starts
        self._ks = np.arange(k_max + 1)
        self._c = self.costs.round_ms(self._ks)  # C(0..k_max), priced once a round (limit)
        self._started: float | None = None
        self._last: tuple[int, float | None, float | None] | None = None  # drafted, target ms, catch-up ms
        self._last_tokens = 1
        self._realised = {True: [0.0, 0.0, 0], False: [0.0, 0.0, 0]}  # drafted?: [tokens, ms, rounds]

    @property
    def alpha(self) -> float:
        """Running estimate of the probability that a drafted token is accepted."""
        return self._accepted / self._tested

    @property
    def alpha_high(self) -> float:
        """alpha one standard error higher, from the tokens it rests on."""
        a = self.alpha
        return min(1.0, a + (a * (1 - a) / self._tested) ** 0.5)

    def round_ms(self, m: int) -> float:
        """C(m): what a round drafting m tokens costs, as this run measures it now, its pass
        carrying the tokens the output format forces where the round starts."""
        return float(self._c[m]) if 0 <= m <= self.k_max else self.costs.now.round_ms(m, self._forced)

    def plain_token_ms(self) -> float:
        """What a token costs in a round that drafts nothing (forced tokens share its pass)."""
        return self.round_ms(0) / (1 + self._forced)

    def priced(self) -> CostModel:
        return self.costs.now

    def choose(self, alpha: float) -> tuple[int, float]:
        """The draft length with the most expected tokens per ms, and that rate."""
        rates = (self._forced + _tokens(alpha, self.k_max)) / self._c
        return int(np.argmax(rates)), float(rates.max())

    def limit(self, unread: int = 0, remaining: int | None = None, forced: int = 0) -> int:
        """Start a round: the most tokens it may draft (0: decode plainly this round), the
        drafter having `unread` tokens of the context still to read before it can draft, the
        run at most `remaining` tokens still to make (None: unbounded) and `forced` tokens
        forced by the output format where the round starts: sure tokens whose pass drafts share
        and no one drafts, so every draft length is priced with them."""
        now, self._forced = self._clock(), forced
        if self._started is not None and self._last is not None:
            ms, (drafted, target_ms, catch_up) = (now - self._started) * 1000, self._last
            if target_ms is not None:
                self.costs.observe(drafted, ms, target_ms, catch_up)
            self._realise(drafted > 0, self._last_tokens, ms)
        self._c = self.costs.round_ms(self._ks, forced)
        self._unread, self._started, self._last = unread, now, None
        self._round_conf, self._p_all = [], 1.0
        # Break-even first, on the passes alone (time outside them, timed on plain rounds, drafting rounds pay too).
        best = (self._forced + _tokens(1.0, self.k_max)) / (self._c - self.costs.overhead)
        best_k = int(np.argmax(best)) if best.max() >= (1 + BREAK_EVEN_MARGIN) * best[0] else 0
        k, self._rate, hope_rate, self.why = 0, float(best[best_k]), float(best[best_k]), NO_DRAFT_PAYS
        if best_k:
            (k, self._rate), self.why = self.choose(self.alpha), ""
            # Plain only while an optimistic alpha agrees: plain rounds teach nothing, so bad luck would end drafting.
            hope_k, hope_rate = self.choose(self.alpha_high)
            if k == 0:
                k, self.why = hope_k, "" if hope_k else LOW_ACCEPTANCE
        if k and self.drafting_loses():
            k, self.why = 0, DRAFTING_LOST
        if k and unread > 2 and remaining is not None:  # the draft reads what it skipped before drafting
            plain = self.plain_token_ms()
            saved = remaining * max(plain - 1 / hope_rate, FIRST_LOOK * plain)
            k, self.why = (0, CATCH_UP) if self.catch_up_ms(unread) > saved else (k, self.why)
        if k == 0:
            self._idle_ms += self.round_ms(0)
            if not self._check_due(unread, remaining):
                self.k = 0
                return 0
            k, self.why = 1, CHECK
        self._idle_ms, self._checked_level = 0.0, self.costs.level
        self.k = self.k_max if self.use_confidence and self.why != CHECK else k  # a check drafts one token
        return self.k

    def _check_due(self, unread: int, remaining: int | None) -> bool:
        """Whether this plain round should draft instead, to ask again whether drafting pays."""
        price = self.round_ms(1) - self.round_ms(0) + self.catch_up_ms(unread)
        if self._tested_here < LOOK_TOKENS and self.why != NO_DRAFT_PAYS:
            return remaining is None or price <= FIRST_LOOK * remaining * self.plain_token_ms()
        moved = abs(self.costs.level / self._checked_level - 1) > MOVED
        return price <= (MOVED_SHARE if moved else CHECK_SHARE) * self._idle_ms

    def catch_up_ms(self, unread: int) -> float:
        """What the draft reading `unread` tokens in one pass costs: as measured at its first
        read, else priced from the cost model (the target's per-token cost over its largest
        measured pass, times D / T), which the batching of long reads tends to overstate."""
        return max(unread, 0) * self._feed_ms

    def keep_going(self, confidence: float) -> bool:
        """Draft one more token only if its expected tokens per added ms beat the rate."""
        self._round_conf.append(confidence)
        if not self.use_confidence:
            return True
        self._p_all *= self._calibrated(confidence)
        n = len(self._round_conf)
        # Look ahead past the next token: on a CPU the cost curve is steep for small passes
        # and flat after, so one more token may not pay where several more do.
        # The drafts to come are taken to be as likely accepted as this one (a confident
        # draft tends to stay confident), so a confident probe can show that drafting pays.
        a_next = self._calibrated(confidence)
        p, gain, base = self._p_all, 0.0, self.round_ms(n)
        for j in range(n + 1, self.k_max + 1):
            p *= a_next
            gain += p
            added_ms = self.round_ms(j) - base
            if added_ms <= 0 or gain / added_ms >= self._rate:
                return True
        return False

    def update(self, drafted: int, accepted: int, *, setup_ms: float = 0.0, target_ms: float | None = None) -> None:
        # The next limit() times the whole round, less `setup_ms`, which the run pays once
        # (the draft's prefill of the prompt); past that first read, the draft's catch-up over
        # more than the usual one or two tokens is priced, so D is what drafting itself costs.
        if self._started is not None:
            self._started += setup_ms / 1000
        if setup_ms > 0 and self._unread > 0:
            self._feed_ms = setup_ms / self._unread
        catch_up = None if setup_ms > 0 else self.catch_up_ms(self._unread - 2) if drafted else 0.0
        self._last = (drafted, target_ms, catch_up)
        self._last_tokens = accepted + 1
        if drafted == 0:
            return
        tested = min(accepted + 1, drafted)
        self._tested_here += tested
        self._accepted = ALPHA_MEMORY * self._accepted + accepted
        self._tested = ALPHA_MEMORY * self._tested + tested
        for i, c in enumerate(self._round_conf[:tested]):
            b = self._bin(c)
            self._bin_n[b] += 1
            self._bin_acc[b] += i < accepted

    def drafting_loses(self) -> bool:
        """Whether the recent drafting rounds gave fewer tokens per ms than the plain ones."""
        (dt, dms, dn), (pt, pms, pn) = self._realised[True], self._realised[False]
        return dn >= REALISED_ROUNDS and pn >= REALISED_ROUNDS and dt / dms < REALISED_MARGIN * pt / pms

    def _realise(self, drafted: bool, tokens: int, ms: float) -> None:
        r = self._realised[drafted]
        r[0] = REALISED_MEMORY * r[0] + tokens
        r[1] = REALISED_MEMORY * r[1] + ms
        r[2] += 1

    def _bin(self, confidence: float) -> int:
        return min(int(confidence * CONFIDENCE_BINS), CONFIDENCE_BINS - 1)

    def _calibrated(self, confidence: float) -> float:
        b = self._bin(confidence)
        return float(self._bin_acc[b] / self._bin_n[b])


def make(pair, settings, drafter) -> CostAwareLength:
    """The cost-aware policy over the pair's measured cost model, a drafted token first priced as
    `drafter` (a `choices.DRAFTERS` entry) states."""
    from specviz.costs.measure import for_pair

    return CostAwareLength(for_pair(pair), settings.k, draft_ms=drafter.draft_ms(pair, settings))
