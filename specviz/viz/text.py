"""Model and user text made safe and visible, for HTML and for Plotly strings, and the few
HTML blocks of plain sentences and tables that every text panel is built from.

Everything a model or a user wrote passes through here before it is drawn: HTML special
characters are escaped (quotes too, so text can sit in attributes), and characters that are
invisible or that would disturb the layout (control, zero-width, bidi-override, line
separator, lone surrogate) become visible escapes such as \\x07 or \\u202e.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Iterable, Sequence

# Anything but tab and printable ASCII may need care; most code tokens never reach the slow path.
_MAYBE_SPECIAL = re.compile(r"[^\t\x20-\x7e]")
_INVISIBLE = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}
_NAMED = {"\r": "\\r", "\x0b": "\\v", "\x0c": "\\f", "\x00": "\\0"}

NEWLINE_MARK = "\u21b5"  # the ↵ shown before each newline in the token stream
EMPTY_MARK = "\u2205"  # ∅: a token whose text is empty (e.g. the first byte of a split character)
MISSING_HTML = '<span class="sv-muted">\u2014</span>'  # a dash where a list of tokens is empty


def esc(text: object) -> str:
    """HTML-escape anything, quotes included."""
    return html.escape(str(text), quote=True)


def escape_code(ch: str) -> str | None:
    """The visible escape for an invisible or layout-breaking character, else None."""
    if ch in _NAMED:
        return _NAMED[ch]
    if unicodedata.category(ch) not in _INVISIBLE:
        return None
    cp = ord(ch)
    return f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}" if cp < 0x10000 else f"\\U{cp:08x}"


def visible_text(text: str) -> str:
    """Plain text with newlines as \\n, tabs as \\t and invisible characters as escapes.

    For one-line places: tooltips, narratives, axis labels. Not HTML-escaped.
    """
    out, last = [], 0
    for m in _MAYBE_SPECIAL.finditer(text):
        ch = m.group()
        code = "\\n" if ch == "\n" else escape_code(ch)
        if code is not None:
            out += [text[last : m.start()], code]
            last = m.end()
    out.append(text[last:])
    return "".join(out).replace("\t", "\\t")


def quoted(text: str) -> str:
    """A token as a reader should see it in a sentence: visible, in double quotes."""
    return f'"{visible_text(text)}"'


def plotly_text(text: object) -> str:
    """Text from a trace, a payload or a model for any Plotly string (title, legend, axis,
    annotation, hover): visible (one line), with <, > and & escaped, since Plotly reads tags
    (<a href> renders a link) and entities. Quotes stay, as Plotly shows &quot; as typed; and
    "%{" is broken up so a hover template does not read it as a field."""
    return html.escape(visible_text(str(text)), quote=False).replace("%{", "%&#123;")


def label_html(text: str, limit: int = 24) -> str:
    """A token for a Plotly label: visible, shortened, escaped (`plotly_text`)."""
    shown = visible_text(text).replace(" ", "\u2423")  # spaces as ␣: " foo" and "foo" differ
    if len(shown) > limit:
        shown = shown[: limit - 1] + "\u2026"
    return plotly_text(shown)


def token_inner_html(text: str) -> str:
    """A token's text as the inside of its element in the stream (white-space: pre-wrap).

    Whitespace is kept as is, each newline gets a ↵ mark before it, invisible characters
    become escapes in a `tok-ctrl` span, and an empty token shows as ∅ so it stays hoverable.
    """
    if not text:
        return f'<span class="tok-mark">{EMPTY_MARK}</span>'
    out, last = [], 0
    for m in _MAYBE_SPECIAL.finditer(text):
        ch = m.group()
        if ch == "\n":
            rep = f'<span class="tok-mark" aria-hidden="true">{NEWLINE_MARK}</span>\n'
        else:
            code = escape_code(ch)
            if code is None:
                continue
            rep = f'<span class="tok-ctrl">{esc(code)}</span>'
        out += [esc(text[last : m.start()]), rep]
        last = m.end()
    out.append(esc(text[last:]))
    return "".join(out)


def plural(count: int, noun: str) -> str:
    """ "1 token", "3 tokens", "2 passes": a count with its noun."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}{'es' if noun.endswith('s') else 's'}"


def paragraphs_html(sentences: Iterable[str], cls: str = "") -> str:
    """Plain sentences as escaped <p> elements, each of class `cls` where one is given."""
    attr = f' class="{cls}"' if cls else ""
    return "".join(f"<p{attr}>{esc(s)}</p>" for s in sentences)


def panel_html(*parts: str) -> str:
    """A text panel around HTML parts (each escaped already), in order."""
    return f'<div class="specviz-text">{"".join(parts)}</div>'


def words_html(sentences: Iterable[str], muted: Iterable[str] = ()) -> str:
    """A text panel: the sentences, then the muted ones, each escaped in its own <p>."""
    return panel_html(paragraphs_html(sentences), paragraphs_html(muted, "sv-muted"))


def table_html(head: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A `specviz-table` of plain-text cells, all escaped: a header row, then the rows."""

    def row(tag: str, cells: Sequence[str]) -> str:
        return "<tr>" + "".join(f"<{tag}>{esc(c)}</{tag}>" for c in cells) + "</tr>"

    return f'<table class="specviz-table">{row("th", head)}{"".join(row("td", r) for r in rows)}</table>'
