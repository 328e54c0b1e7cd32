"""The edits an answer made to the text it copies, made again where the copy meets that text
(specviz/drafters/copy_edits.py), and suffix decoding reading its copies through them."""

from __future__ import annotations

import torch

from specviz.drafters.copy_edits import MAX_EDIT, CopyEdits
from specviz.drafters.length import DraftLength
from specviz.drafters.suffix import SuffixDrafter
from specviz.settings import GenerationSettings
from specviz.workshop.tournament.replay import greedy_path, replay
from specviz.workshop.tournament.text import PASTED, Text


def test_a_learnt_edit_is_made_wherever_the_copy_meets_its_tokens():
    edits = CopyEdits()
    source = [1, 2, 3, 4, 5, 2, 3, 6, 2, 7]
    assert edits.read(source, 0, 10) == (source, list(range(10)), [])  # nothing learnt: a plain copy
    edits.learn([2, 3], [9])  # the two tokens 2 3 became 9
    tokens, sources, begins = edits.read(source, 0, 10)
    assert tokens == [1, 9, 4, 5, 9, 6, 2, 7]  # 2 alone (before 7) is not the edit's tokens
    assert sources == [0, 2, 3, 4, 6, 7, 8, 9]  # a written token stands for the last token it replaced
    assert begins == [(1, (2, 3)), (4, (2, 3))]
    assert edits.read(source, 0, 3) == ([1, 9, 4], [0, 2, 3], [(1, (2, 3))])
    edits.learn([2], [8, 8])  # a shorter edit of the same start: the longer match wins where both do
    assert edits.read(source, 0, 10)[0] == [1, 9, 4, 5, 9, 6, 8, 8, 7]


def test_what_is_not_a_replacement_is_not_learnt():
    edits = CopyEdits()
    edits.learn([], [5])  # an insertion: no source tokens to find the next one by
    edits.learn([4], [4])  # nothing changed
    edits.learn([1] * (MAX_EDIT + 1), [2])  # too long to be an edit
    assert len(edits.subs) == 0
    edits.learn([4, 5], [])  # a deletion is a replacement by nothing
    assert edits.read([3, 4, 5, 6], 0, 4)[0] == [3, 6]


def test_an_edit_whose_first_token_is_rejected_is_forgotten():
    edits = CopyEdits()
    edits.learn([2], [9])
    edits.offered([(1, 0, (2,))])  # node 1 begins the edit, under node 0
    edits.heard([])  # node 0 rejected: node 1 was never checked
    assert len(edits.subs) == 1
    edits.offered([(1, 0, (2,))])
    edits.heard([0, 1])  # checked and accepted
    assert len(edits.subs) == 1
    edits.offered([(1, 0, (2,))])
    edits.heard([0])  # checked (its parent accepted) and rejected
    assert len(edits.subs) == 0


def _renamed_text() -> Text:
    """A prompt holding a block that names X three times, 30 tokens apart, and an answer that
    copies it with X renamed: source name tokens (50, 51), answer's (60)."""
    block = [10, 11, 50, 51, *range(100, 130), 50, 51, *range(130, 160), 50, 51, 29]
    prompt = [1, 2, 3, *block, 4]
    answer = [t for t in block if t != 51]
    answer = [60 if t == 50 else t for t in answer] + [99]
    return Text(prompt, answer, GenerationSettings(), frozenset({99}), len(answer), PASTED)


def test_suffix_decoding_writes_a_rename_it_has_seen_and_its_copy_no_longer_breaks_there():
    text = _renamed_text()
    drafted: list[list[int]] = []
    drafter = SuffixDrafter()
    propose = drafter.propose

    def noted(context, k, keep_going, budget=None):
        proposal = propose(context, k, keep_going, budget)
        drafted.append(proposal.tokens.tolist())
        return proposal

    drafter.propose = noted
    rounds = replay(text, drafter, DraftLength(16), greedy_path(text.answer_ids))
    assert len(drafter.edits.subs) == 1  # learnt from the first place: (50, 51) became (60)
    # After it, a proposal reads the source's later (50, 51) as 60: the copy runs through the name.
    assert any(60 in tokens and 50 not in tokens for tokens in drafted[1:])
    # The answer after the first rename is copied in long rounds: no round there accepts nothing.
    first = text.answer_ids.index(60)
    later = [r for r in rounds if r.start > first + 2]
    assert later and all(r.accepted > 0 for r in later[:-1])
    assert sum(r.tokens for r in rounds) == text.n - 1


def test_without_a_learnt_edit_suffix_decoding_proposes_as_it_did():
    drafter = SuffixDrafter()
    drafter.begin(torch.tensor([1, 2, 3]))
    context = torch.tensor([5, 6, 7, 8, 5, 6])
    proposal = drafter.propose(context, 4, lambda *a: True)
    assert proposal.tokens.tolist() == [7, 8, 5, 6]


def test_the_copy_gap_script_replays_the_calibration_corpus_against_the_copy_oracle():
    """scripts/copy_gap.py on the corpus whose answers ship with specviz (no model loaded): a row
    per text; prompt lookup, which copies earlier text as it stands, never passes the copy
    oracle (the best copy of earlier text each round, drafted for free)."""
    import sys

    from app_server import ROOT

    sys.path.insert(0, str(ROOT / "scripts"))
    import copy_gap

    from specviz.workshop.tournament.curves import stored

    curve = next(c for c in stored() if c.name == "AMD EPYC, llama.cpp")
    rows = copy_gap.rows("calib", curve)
    assert len(rows) == 12 and {r["group"] for r in rows} == {"calib"}
    for r in rows:
        assert r["oracle_speedup"] > 1 and r["suffix_speedup"] > 0.5, r
        assert 0 < r["lookup_of_oracle"] <= 1, r
