"""The page's header: the model pair's load, what its models run in and on, and what the
runtimes measured here. Plain values in (the page reads them off the pair's typed fields),
HTML out; all model and user text escaped."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from specviz.choices import method_phrase
from specviz.viz.text import esc

if TYPE_CHECKING:
    from specviz.lm.pair import PrecisionChoice


def idle_html(name: str) -> str:
    return f'<div class="sv-load sv-load-idle">Model pair <b>{esc(name)}</b> loads when you press Run.</div>'


def error_html(name: str, error: str) -> str:
    return f'<div class="sv-load sv-load-error" role="alert"><b>{esc(name)}</b> could not load: {esc(error)}</div>'


def loading_html(name: str, message: str, fraction: float, waited_s: float, cache: str = "") -> str:
    """A progress bar with the step under way."""
    pct = round(100 * fraction)
    return (
        f'<div class="sv-load sv-load-busy" role="status">Loading <b>{esc(name)}</b>: {esc(message)} '
        f'({pct}%, {waited_s:.0f} s){cache}<div class="sv-load-bar"><div style="width:{pct}%"></div></div></div>'
    )


def ready_html(name: str, precision: str, details: str) -> str:
    """`precision` (`precision_html`) and `details` (the other pieces here, joined) are HTML."""
    return f'<div class="sv-load sv-load-ready">Model pair <b>{esc(name)}</b> is ready{precision}.{details}</div>'


def precision_html(p: PrecisionChoice | None) -> str:
    """ ": target in bf16 (measured faster), draft in int8 (the default on a CPU)", the
    reason in full as a tooltip; empty for a pair that does not say."""
    if p is None:
        return ""
    reason = p.reason or ""
    parts = [f'<span title="{esc(reason)}">target in {esc(p.target)} ({esc(reason.split(" (")[0])})</span>']
    if p.draft:
        parts.append(f"draft in {esc(p.draft)} ({esc(p.draft_reason or '')})")
    return ": " + ", ".join(parts)


def vocab_html(vocab: Mapping | None) -> str:
    """For a draft with its own tokenizer (`vocab`: the vocabulary check's summary): the
    overlap and the method, with the check's message as a tooltip; empty when both share one."""
    if not isinstance(vocab, Mapping) or not method_phrase(vocab.get("method")):
        return ""
    overlap = vocab.get("overlap")
    share = (
        f"{overlap:.1%} of the target's vocabulary matches the draft's"
        if isinstance(overlap, (int, float))
        else "vocabularies differ"
    )
    return (
        f' <span class="sv-vocab" title="{esc(vocab.get("message") or vocab.get("reason") or "")}">Its draft has another tokenizer: '
        f"{esc(share)}; by default it drafts {esc(method_phrase(vocab['method']))} ({esc(vocab['method'])}).</span>"
    )


def runtime_html(
    runtime: str, reason: str, rates: Mapping, preparing: Sequence[str] = (), note: str | None = None, try_it: str = ""
) -> str:
    """Which runtime runs the pair and why, each runtime's measured rates (plain, and drafting
    at its best k for a typical acceptance), a sentence for each background timing of another
    runtime, and `note` where some runtime's plain decoding beats drafting everywhere, with
    `try_it` (how to see it) where the note names the drafter that pays on edit work."""
    measured = "; ".join(
        f"{esc(r)}: plain {v['plain']:.1f} tok/s, drafting {v['speculative']:.1f} (k={v['k']})"
        for r, v in sorted(rates.items())
        if isinstance(v, Mapping)
    )
    out = f' <span class="sv-runtime">Runtime <b>{esc(runtime)}</b> ({esc(reason)})'
    out += f"; measured here: {measured}." if measured else "."
    for sentence in preparing:
        out += f' <span class="sv-runtime-prep">{esc(sentence)}.</span>'
    if note:
        out += f' <b class="sv-runtime-note">Note: {esc(note)}.</b>'
    if note and "Edit examples" in note:
        out += f' <span class="sv-runtime-try">{esc(try_it)}</span>'
    return out + "</span>"


def head_html(acceptance: Mapping[str, Sequence[float]], draft_ms: float, target_ms: float | None) -> str:
    """The target's trained draft head: its held-out acceptance of its first token by part of
    the text, and what a drafted token costs against a target pass, both measured here."""
    share = f", {draft_ms / target_ms:.2f} of a target pass" if target_ms else ""
    held = "; ".join(f"{part} {rates[0]:.2f}" for part, rates in acceptance.items() if rates)
    return (
        f' <span class="sv-head">Draft head (drafter <b>head</b>): trained here, held-out acceptance of its first '
        f"token {esc(held)}; a drafted token costs {draft_ms:.1f} ms{share}.</span>"
    )


def head_unreadable_html(error: str) -> str:
    return f' <span class="sv-head">The draft head cannot be read: {esc(error)}.</span>'


def cache_html(folder: str, why: str) -> str:
    """Where converted models and measurements are kept, and why there."""
    return f' <span class="sv-cache">Cache: <code>{esc(folder)}</code> ({esc(why)}).</span>'
