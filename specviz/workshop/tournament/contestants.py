"""Which drafters a tournament replays on the loaded pair, and how each is replayed.

Every registered drafter (`choices.DRAFTERS`) is a contestant, made through `make_drafter` so
that what the pair or its runtime cannot run is refused in the drafter's own words:

- CHAIN: a drafter that runs a model (the draft model, the target's early layers): one
  teacher-forced pass of its model gives every round (`chains.TeacherForced`), exact under
  greedy decoding;
- FREE: a drafter without a model (prompt lookup, suffix decoding, lookahead): its own code
  replays along the text, state and all;
- TREE: the draft model's tree, bounded from the draft's pass (`trees.py`);
- OUT: not replayed, with the reason (a drafter the pair cannot run; the trained head, whose
  proposals start from the target's own hidden state at every round).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from specviz.choices import DRAFT_FREE_TREE, DRAFTERS, EARLY_EXIT, FIXED, LOOKAHEAD, MODEL_TREE, SPECULATIVE
from specviz.drafters import make_drafter
from specviz.drafters.early_exit import target_share
from specviz.errors import UserError
from specviz.lm.runtime import LM
from specviz.settings import GenerationSettings

CHAIN, FREE, TREE, OUT = "teacher-forced chain", "draft-free", "bounded tree", "not replayed"
HEAD_WHY = (
    "not replayed: a head drafts from the target's hidden state at each round's start, a pass per "
    "start and depth that the tournament does not make yet"
)
LOOKAHEAD_WHY = (
    "its Jacobi window reads the target's logits at its own guesses, which the text does not hold: "
    "replayed with the window's cost but not its n-grams (exact where the window does not ride)"
)


@dataclass
class Contestant:
    name: str  # the DRAFTERS name
    label: str
    kind: str  # CHAIN, FREE, TREE or OUT
    why: str = ""  # why it is out, or what its figure leaves out
    lm: LM | None = None  # a chain drafter's model, read once over the text
    share: float = 0.0  # the early-exit drafter's D as a share of the target's one-token pass


def settings_for(settings: GenerationSettings, name: str, policy: str, k: int) -> GenerationSettings:
    return replace(settings, drafter=name, policy=policy, k=k, mode=SPECULATIVE)


def contestants(pair, settings: GenerationSettings) -> list[Contestant]:
    out = []
    for entry in DRAFTERS:
        try:
            out.append(_contestant(pair, settings, entry))
        except UserError as e:
            out.append(Contestant(entry.name, entry.label, OUT, f"not replayed: {e}"))
    return out


def _contestant(pair, settings: GenerationSettings, entry) -> Contestant:
    if entry.reads_target:
        return Contestant(entry.name, entry.label, OUT, HEAD_WHY)
    drafter = make_drafter(pair, settings_for(settings, entry.name, FIXED, 1))
    if entry.shape == MODEL_TREE:
        return Contestant(
            entry.name, entry.label, TREE, "bounded: the tree's off-text nodes follow the draft's own guesses"
        )
    if entry.shape == DRAFT_FREE_TREE:
        why = LOOKAHEAD_WHY if entry.name == LOOKAHEAD else ""
        return Contestant(entry.name, entry.label, FREE, why)
    lm = getattr(drafter, "lm", None)
    if lm is None:
        return Contestant(
            entry.name, entry.label, OUT, "not replayed: this drafter's model is not one the tournament reads"
        )
    share = 0.0
    if entry.name == EARLY_EXIT:
        share = target_share(pair, settings_for(settings, entry.name, FIXED, 1))
    return Contestant(entry.name, entry.label, CHAIN, lm=lm, share=share)
