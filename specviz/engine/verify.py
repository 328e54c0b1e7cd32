"""The acceptance rule of speculative decoding, as a pure function.

Given k drafted tokens x_1..x_k, the draft distributions q_1..q_k they were sampled from
and the target distributions p_1..p_{k+1} (all after the same temperature / top-k / top-p
processing), `verify` decides, position by position:

    accept x_i  with probability min(1, p_i(x_i) / q_i(x_i))
    at the first rejection i: emit a token from the residual norm(max(0, p_i - q_i))
    if all k were accepted:   emit a bonus token from p_{k+1}

The tokens that come out are distributed exactly as p (see `tests/test_verify.py` for the
Monte Carlo check). Greedy decoding is the limit case: accept while x_i == argmax p_i, then
emit argmax p at the first mismatch (or the bonus position).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from specviz.lm import rows
from specviz.lm.sampling import draw


def residual_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """norm(max(0, p - q)) over the last dimension, row by row.

    Where a row's residual is all zeros (p <= q everywhere, i.e. p == q for distributions),
    a rejection cannot happen in exact arithmetic; if rounding makes one happen anyway, the
    right fallback is p itself, so that row returns p instead of dividing by zero.
    """
    r = (p - q).clamp_min(0)
    mass = r.sum(-1, keepdim=True)
    return torch.where(mass > 0, r / torch.where(mass > 0, mass, torch.ones_like(mass)), p)


def remove_token(dist: torch.Tensor, token: int | torch.Tensor) -> torch.Tensor:
    """dist with `token` removed and renormalised: the residual after a point-mass draft is
    rejected. dist itself if nothing would be left (then the rejection was a rounding
    artefact: the token held all the mass)."""
    mass = torch.zeros_like(dist)
    mass[token] = 1.0
    return residual_distribution(dist, mass)


@dataclass
class Verification:
    """The outcome of verifying one round's drafts (plain Python values, one sync)."""

    tokens: list[int]  # the drafted tokens, as given
    p: list[float]  # p_i(x_i) under the distribution actually sampled from (greedy: 1 or 0)
    q: list[float]  # q_i(x_i) (greedy or point-mass drafts: 1.0)
    u: list[float | None]  # the uniform draw per position; None in greedy and after the rejection
    n_accepted: int  # length of the accepted prefix
    emitted: int  # the resampled token (after a rejection) or the bonus token
    emitted_p: float  # p of the emitted token at its position (greedy: 1.0)
    emitted_kind: Literal["resampled", "bonus"]

    @property
    def decisions(self) -> list[Literal["accepted", "rejected", "unchecked"]]:
        n = self.n_accepted
        return ["accepted" if i < n else "rejected" if i == n else "unchecked" for i in range(len(self.tokens))]

    @property
    def new_tokens(self) -> list[int]:
        """What this round adds to the output: the accepted drafts, then the emitted token."""
        return self.tokens[: self.n_accepted] + [self.emitted]


def verify(
    draft_tokens: torch.Tensor,
    p: torch.Tensor,
    q: torch.Tensor | None = None,
    *,
    generator: torch.Generator | None = None,
    greedy: bool = False,
) -> Verification:
    """Apply the acceptance rule to one round.

    draft_tokens: (k,) token ids, k >= 0.
    p: (k+1, V) target distributions at the k drafted positions and the bonus position.
       In greedy mode only the argmax of each row is used, so logits do as well.
    q: (k, V) draft distributions the tokens were sampled from, or None when each token was
       proposed with certainty (greedy drafting, prompt lookup): q_i is a point mass on x_i.
    generator: the source of the uniform draws and of the emitted token's sample.
    """
    k = draft_tokens.numel()
    if p.shape[0] != k + 1:
        raise ValueError(f"p needs k+1 = {k + 1} rows, got {p.shape[0]}")
    if q is not None and q.shape[0] != k:
        raise ValueError(f"q needs k = {k} rows, got {q.shape[0]}")
    draft_tokens = draft_tokens.to(p.device)
    if greedy:
        return _verify_greedy(draft_tokens, p)

    rows = torch.arange(k, device=p.device)
    px = p[rows, draft_tokens]
    qx = q[rows, draft_tokens] if q is not None else torch.ones_like(px)
    u = torch.rand(k, generator=generator, device=p.device, dtype=p.dtype)
    # u < p/q without dividing: q > 0 because x was sampled from q; p == 0 never accepts.
    accepted = u * qx < px
    n = int(accepted.long().cumprod(0).sum())
    if n < k:
        dist = residual_distribution(p[n], q[n]) if q is not None else remove_token(p[n], draft_tokens[n])
        kind = "resampled"
    else:
        dist, kind = p[k], "bonus"
    emitted = draw(dist, generator)
    px_l, qx_l, u_l = px.tolist(), qx.tolist(), u.tolist()
    return Verification(
        tokens=draft_tokens.tolist(),
        p=px_l,
        q=qx_l,
        u=[u_l[i] if i <= n else None for i in range(k)],
        n_accepted=n,
        emitted=int(emitted),
        emitted_p=float(p[n, emitted]),
        emitted_kind=kind,
    )


def _verify_greedy(draft_tokens: torch.Tensor, p: torch.Tensor) -> Verification:
    k = draft_tokens.numel()
    best = rows.argmax(p)
    match = draft_tokens == best[:k]
    n = int(match.long().cumprod(0).sum())
    best_l = best.tolist()
    return Verification(
        tokens=draft_tokens.tolist(),
        p=[float(m) for m in match.tolist()],
        q=[1.0] * k,
        u=[None] * k,
        n_accepted=n,
        emitted=best_l[n],
        emitted_p=1.0,
        emitted_kind="bonus" if n == k else "resampled",
    )
