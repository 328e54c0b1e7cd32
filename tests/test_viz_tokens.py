"""The token stream HTML: classes, tooltips, escaping of hostile and invisible text."""

import re
import sys
from html.parser import HTMLParser

from viz_sample import (
    HOSTILE_IMG,
    HOSTILE_SCRIPT,
    bonus_round,
    greedy_round,
    hostile_round,
    plain_events,
    sample_rounds,
    sampled_round,
)

from specviz.events import DraftToken, RoundEvent
from specviz.viz import legend_html, tokens_html
from specviz.viz.text import token_inner_html, visible_text


class Elements(HTMLParser):
    """Every start tag with its attributes, and the text, as a browser's parser sees them."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)

    def tokens(self) -> list[dict]:
        return [a for t, a in self.tags if "tok" in a.get("class", "").split()]


def test_each_outcome_has_its_class_in_order():
    toks = Elements(tokens_html([sampled_round()])).tokens()
    assert [t["class"] for t in toks] == [
        "tok tok-accepted",
        "tok tok-accepted",
        "tok tok-rejected",
        "tok tok-rejected tok-unchecked",
        "tok tok-resampled",
    ]
    assert [t["data-pos"] for t in toks] == ["1", "2", "3", "4", "3"]
    assert {t["data-round"] for t in toks} == {"0"}
    bonus = Elements(tokens_html([bonus_round()])).tokens()
    assert bonus[-1]["class"] == "tok tok-bonus" and bonus[-1]["data-round"] == "1"


def test_all_four_outcomes_and_rounds_appear_in_a_run():
    toks = Elements(tokens_html(sample_rounds())).tokens()
    classes = {c for t in toks for c in t["class"].split()}
    assert {"tok-accepted", "tok-rejected", "tok-unchecked", "tok-resampled", "tok-bonus"} <= classes
    assert [int(t["data-round"]) for t in toks] == sorted(int(t["data-round"]) for t in toks)


def test_tooltips_give_p_q_ratio_u_and_decision():
    toks = Elements(tokens_html([sampled_round()])).tokens()
    rejected = toks[2]["title"]
    for part in ("p = 0.120", "q = 0.400", "p/q = 0.300", "u = 0.710", "rejected"):
        assert part in rejected
    assert "accepted" in toks[0]["title"] and "u = 0.410" in toks[0]["title"] and "p/q = 1.127" in toks[0]["title"]
    assert "unchecked" in toks[3]["title"]
    assert "residual" in toks[4]["title"] and "p = 0.250" in toks[4]["title"]


def test_greedy_tooltips_speak_of_the_top_choice():
    toks = Elements(tokens_html([greedy_round()])).tokens()
    assert "matches the target's top choice" in toks[0]["title"]
    assert "top choice differs" in toks[1]["title"]
    assert "u = \u2014" in toks[1]["title"]


def test_hostile_text_shows_as_text_never_as_markup():
    html = tokens_html([hostile_round()])
    assert "<script" not in html and "<img" not in html
    parsed = Elements(html)
    assert {t for t, _ in parsed.tags} == {"div", "span"}
    text = "".join(parsed.text)
    assert HOSTILE_SCRIPT in text and HOSTILE_IMG in text
    # in the tooltip attribute too: the parser gives back the original characters
    assert HOSTILE_SCRIPT in parsed.tokens()[0]["title"]


def test_quotes_in_text_cannot_end_an_attribute():
    event = sampled_round()
    event.drafted[0].text = '" onmouseover="alert(1)'
    toks = Elements(tokens_html([event])).tokens()
    assert "onmouseover" not in toks[0]
    assert '" onmouseover="alert(1)' in toks[0]["title"]


def test_whitespace_kept_newline_marked_and_controls_made_visible():
    assert token_inner_html("    return") == "    return"
    assert token_inner_html("\n") == '<span class="tok-mark" aria-hidden="true">\u21b5</span>\n'
    shown = token_inner_html("a\x07b\u202ec\u200bd\r")
    assert "\x07" not in shown and "\u202e" not in shown and "\u200b" not in shown and "\r" not in shown
    for code in ("\\x07", "\\u202e", "\\u200b", "\\r"):
        assert code in shown
    assert token_inner_html("\ud800") == '<span class="tok-ctrl">\\ud800</span>'  # a lone surrogate still encodes
    assert "\u2205" in token_inner_html("")
    assert token_inner_html("שלום") == "שלום"  # right-to-left text is kept; CSS isolates it
    assert visible_text("a\n\tb\u2028") == "a\\n\\tb\\u2028"


def test_plain_tokens_and_empty_stream():
    toks = Elements(tokens_html(plain_events(3))).tokens()
    assert [t["class"] for t in toks] == ["tok tok-plain"] * 3
    assert "p = 0.500" in toks[0]["title"]
    assert tokens_html([]) == '<div class="specviz-stream"></div>'
    assert "waiting &lt;here&gt;" in tokens_html([], empty="waiting <here>")


def test_stopped_round_without_emitted_token():
    event = RoundEvent(
        index=0,
        k=1,
        drafted=[DraftToken(id=1, text="a", p=0.5, q=0.5, u=0.1, decision="accepted")],
        emitted=None,
        positions=[],
        draft_ms=1,
        verify_ms=1,
        t_end_s=0.1,
        new_tokens=1,
    )
    assert [t["class"] for t in Elements(tokens_html([event])).tokens()] == ["tok tok-accepted"]


def test_legend_names_every_style():
    html = legend_html(plain=True)
    for cls in ("tok-accepted", "tok-rejected", "tok-unchecked", "tok-resampled", "tok-bonus", "tok-plain"):
        assert cls in html
    assert "tok-plain" not in legend_html()


def _render_counting_calls(n_rounds: int) -> tuple[str, int]:
    """The stream of n rounds, and how many function calls (Python and built-in) drawing it took."""
    rounds = [sampled_round(i) for i in range(n_rounds)]
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        calls += event in ("call", "c_call")

    sys.setprofile(count)
    try:
        html = tokens_html(rounds)
    finally:
        sys.setprofile(None)
    return html, calls


def test_stream_scales_linearly():
    # Four times the rounds must cost four times the work and the markup: redrawing or rescanning
    # earlier rounds for each new one (quadratic) would cost 16 times, even n log n about 4.9 times.
    # Counting calls instead of timing keeps the check exact on a busy machine.
    small, small_calls = _render_counting_calls(500)
    large, large_calls = _render_counting_calls(2000)
    assert len(re.findall(r'class="tok ', small)) == 500 * 5 and len(re.findall(r'class="tok ', large)) == 2000 * 5
    assert 3.9 <= large_calls / small_calls <= 4.1, (small_calls, large_calls)
    # Round numbers gain a digit or so: the markup grows a little over 4 times, never 16.
    assert 4.0 <= len(large) / len(small) <= 4.2, (len(small), len(large))
