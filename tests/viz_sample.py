"""Hand-built events for the viz tests: a short sampled run, a greedy round, hostile text."""

from __future__ import annotations

from specviz.events import (
    DraftToken,
    EmittedToken,
    PlainTokenEvent,
    PositionInfo,
    RoundEvent,
    RunSummary,
    TopToken,
    Trace,
)

HOSTILE_SCRIPT = "<script>alert(1)</script>"
HOSTILE_IMG = "<img src=x onerror=alert(1)>"


_VOCAB: dict[str, int] = {}


def tid(text: str) -> int:
    """A stable token id per text, so a token has the same id in drafts and in top lists."""
    return _VOCAB.setdefault(text, len(_VOCAB) + 1)


def pos(overlap: float, *top: tuple[str, float, float], gap: float = 1.0) -> PositionInfo:
    return PositionInfo(
        top=[TopToken(id=tid(t), text=t, p=p, q=q) for t, p, q in top], overlap=overlap, top2_logit_gap=gap
    )


def draft(text: str, p: float, q: float, u: float | None, decision: str) -> DraftToken:
    return DraftToken(id=tid(text), text=text, p=p, q=q, u=u, decision=decision)


def emitted(text: str, p: float, kind: str) -> EmittedToken:
    return EmittedToken(id=tid(text), text=text, p=p, kind=kind)


def sampled_round(index: int = 0, t_end_s: float = 0.5, new_tokens: int = 3) -> RoundEvent:
    """k=4: two accepted, the third rejected (u=0.71 > p/q=0.30), one unchecked, a replacement."""
    return RoundEvent(
        index=index,
        k=4,
        drafted=[
            draft("def", 0.62, 0.55, 0.41, "accepted"),
            draft(" foo", 0.30, 0.40, 0.20, "accepted"),
            draft("(", 0.12, 0.40, 0.71, "rejected"),
            draft("x", 0.05, 0.30, None, "unchecked"),
        ],
        emitted=emitted("[", 0.25, "resampled"),
        positions=[
            pos(0.9, ("def", 0.62, 0.55), ("class", 0.2, 0.3)),
            pos(0.7, (" foo", 0.30, 0.40), (" bar", 0.28, 0.1)),
            pos(0.52, ("[", 0.25, 0.05), ("(", 0.12, 0.40), (":", 0.10, 0.02)),
            pos(0.6, ("x", 0.05, 0.30)),
        ],
        draft_ms=120.0,
        verify_ms=344.0,
        t_end_s=t_end_s,
        new_tokens=new_tokens,
    )


def bonus_round(index: int = 1, t_end_s: float = 1.0, new_tokens: int = 6) -> RoundEvent:
    """k=2: both accepted, then a bonus newline."""
    return RoundEvent(
        index=index,
        k=2,
        drafted=[draft("x", 0.9, 0.8, 0.5, "accepted"), draft("]", 0.95, 0.9, 0.99, "accepted")],
        emitted=emitted("\n", 0.7, "bonus"),
        positions=[pos(0.9, ("x", 0.9, 0.8)), pos(0.95, ("]", 0.95, 0.9)), pos(0.0, ("\n", 0.7, 0.0))],
        draft_ms=60.0,
        verify_ms=350.0,
        t_end_s=t_end_s,
        new_tokens=new_tokens,
    )


def greedy_round(index: int = 2, t_end_s: float = 1.5, new_tokens: int = 8) -> RoundEvent:
    """Greedy k=3: first accepted, second is not the target's top choice, third unchecked."""
    return RoundEvent(
        index=index,
        k=3,
        drafted=[
            draft("    return", 0.8, 1.0, None, "accepted"),
            draft(" None", 0.3, 1.0, None, "rejected"),
            draft("\n", 0.1, 1.0, None, "unchecked"),
        ],
        emitted=emitted(" x", 0.6, "resampled"),
        positions=[
            pos(1.0, ("    return", 0.8, 1.0)),
            pos(0.0, (" x", 0.6, 0.0), (" None", 0.3, 1.0), gap=0.8),
            pos(0.0, ("\n", 0.1, 1.0)),
        ],
        draft_ms=90.0,
        verify_ms=360.0,
        t_end_s=t_end_s,
        new_tokens=new_tokens,
    )


def hostile_round(index: int = 3, t_end_s: float = 2.0, new_tokens: int = 9) -> RoundEvent:
    """Model text that must show as text: a script tag rejected, an img tag put in its place."""
    return RoundEvent(
        index=index,
        k=1,
        drafted=[draft(HOSTILE_SCRIPT, 0.01, 0.5, 0.9, "rejected")],
        emitted=emitted(HOSTILE_IMG, 0.4, "resampled"),
        positions=[pos(0.1, (HOSTILE_IMG, 0.4, 0.05), (HOSTILE_SCRIPT, 0.01, 0.5))],
        draft_ms=30.0,
        verify_ms=340.0,
        t_end_s=t_end_s,
        new_tokens=new_tokens,
    )


def sample_rounds() -> list[RoundEvent]:
    return [sampled_round(), bonus_round(), greedy_round(), hostile_round()]


# The output of sample_rounds(), token by token: what plain greedy decoding must reproduce.
SAMPLE_OUTPUT = ["def", " foo", "[", "x", "]", "\n", "    return", " x", HOSTILE_IMG]


def plain_events(n: int = 9, ms: float = 300.0) -> list[PlainTokenEvent]:
    texts = [SAMPLE_OUTPUT[i % len(SAMPLE_OUTPUT)] for i in range(n)]
    return [
        PlainTokenEvent(index=i, id=tid(t), text=t, p=0.5, ms=ms, t_end_s=(i + 1) * ms / 1000)
        for i, t in enumerate(texts)
    ]


def spec_trace() -> Trace:
    rounds = sample_rounds()
    return Trace(
        prompt="write f",
        settings={"temperature": 0.7, "k": 4},
        text="",
        token_ids=[],
        events=rounds,
        summary=RunSummary(
            new_tokens=9, rounds=4, target_passes=4, wall_s=2.0, tokens_per_s=4.5, target_ms=348.5, draft_ms=30.0
        ),
    )


def plain_trace(n: int = 9) -> Trace:
    ev = plain_events(n)
    return Trace(
        prompt="write f",
        settings={"temperature": 0.7},
        text="",
        token_ids=[e.id for e in ev],
        events=ev,
        mode="plain",
        summary=RunSummary(
            new_tokens=n, target_passes=n, wall_s=ev[-1].t_end_s, tokens_per_s=n / ev[-1].t_end_s, target_ms=300.0
        ),
    )
