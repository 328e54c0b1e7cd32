"""Per-position display data: the top tokens of p and q, their overlap, the target's top-2 gap.

Only a top-k over each row and a gather are computed here, never a loop over the
vocabulary. In greedy mode p and q are the point masses actually sampled from (argmax p,
and the drafted token), so the top list shows the target's best tokens by logit with
p = 1 on its choice, and the overlap is 1 exactly when the draft matched.
"""

from __future__ import annotations

import torch

from specviz.drafters.base import SourceNote
from specviz.engine.detokenizer import TokenTexts
from specviz.lm import rows
from specviz.events import CandidateSource, PositionInfo, TopToken

TOP = 5


def overlaps(
    p: torch.Tensor | None, q: torch.Tensor | None, draft_tokens: torch.Tensor, target_logits: torch.Tensor
) -> list[float]:
    """beta_i = sum_x min(p_i(x), q_i(x)) for each drafted position.

    p, q: processed distributions (k+1, V) and (k, V); q None means point masses on the
    drafted tokens; p None means greedy (point masses on argmax of `target_logits`).
    """
    k = draft_tokens.numel()
    if k == 0:
        return []
    if p is None:
        return (rows.argmax(target_logits[:k]).cpu() == draft_tokens.cpu()).double().tolist()
    if q is None:
        return p[torch.arange(k, device=p.device), draft_tokens].tolist()
    return torch.minimum(p[:k], q).sum(-1).tolist()


def positions(
    n_pos: int,
    target_logits: torch.Tensor,
    p: torch.Tensor | None,
    q: torch.Tensor | None,
    draft_tokens: torch.Tensor,
    overlap: list[float],
    texts: TokenTexts,
) -> list[PositionInfo]:
    """PositionInfo for the first `n_pos` verified positions of a round.

    Rows 0..k-1 are drafted positions, row k (when reached) the bonus position, where there
    is no draft distribution: q = 0 and overlap 0 there. p None means greedy; q None means
    point masses on the drafted tokens.
    """
    if n_pos == 0:
        return []
    k = draft_tokens.numel()
    m = min(n_pos, k)  # rows with a drafted token
    logits = target_logits[:n_pos]
    # One top-k over the logits gives the top-2 gap and, in greedy mode, the candidates:
    # over a 150k vocabulary each top-k costs about as much as the rest of a round's upkeep.
    top_values, top_ids = rows.top(logits, TOP)
    # Where an output format allows one token there is no second: no tie to flip (a large gap).
    gaps = (top_values[:, 0] - top_values[:, min(1, top_values.shape[1] - 1)]).nan_to_num(posinf=1e9).tolist()
    drafted = draft_tokens[:m].tolist()

    # Candidates: the target's top tokens, then the draft's (its top tokens, or the drafted token
    # for point masses), each once. A few per row: lists, not small tensors, which cost more to make.
    p_ids = (top_ids if p is None else rows.top(p[:n_pos], TOP)[1]).tolist()
    q_ids = rows.top(q[:m], TOP)[1].tolist() if q is not None and m else [[t] for t in drafted]
    cand = [list(dict.fromkeys(p_ids[i] + (q_ids[i] if i < m else []))) for i in range(n_pos)]
    width = max(map(len, cand))
    idx = torch.tensor([c + c[:1] * (width - len(c)) for c in cand], device=logits.device)  # padded: row's first
    lv = torch.gather(logits, 1, idx).tolist()
    # p: the point mass on the argmax (greedy) or p's values; q: zero where nothing was drafted.
    pv = [[float(t == c[0]) for t in c] for c in cand] if p is None else torch.gather(p[:n_pos], 1, idx).tolist()
    qv = (
        torch.gather(q[:m], 1, idx[:m]).tolist()
        if q is not None and m
        else [[float(t == d) for t in c] for c, d in zip(cand, drafted)]
    )

    out = []
    for i, c in enumerate(cand):
        q_row = qv[i] if i < m else [0.0] * len(c)
        ranked = sorted(zip(c, pv[i], q_row, lv[i]), key=lambda v: (-v[1], -v[3]))  # by p, then logit
        tops = [TopToken(id=t, text=texts(t), p=pp, q=qq) for t, pp, qq, _ in ranked]
        out.append(PositionInfo(top=tops, overlap=overlap[i] if i < k else 0.0, top2_logit_gap=gaps[i]))
    return out


def source(note: SourceNote | None, texts: TokenTexts) -> CandidateSource | None:
    """A draft-free drafter's note on where its candidates came from (token ids), in text."""
    if note is None:
        return None

    def words(ids) -> list[str]:
        return [texts(int(i)) for i in ids]

    return CandidateSource(
        method=note.method,
        matched=words(note.matched),
        occurrences=note.occurrences,
        counts=list(note.counts),
        window=[words(level) for level in note.window],
        ngrams=[words(g) for g in note.ngrams],
        origins=list(note.origins),
        window_on=note.window_on,
        ride=note.ride,
        note=note.note,
    )
