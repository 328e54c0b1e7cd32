"""A suffix run's and a lookahead run's traces, uploaded to a page with no model loaded: the
Round inspector says where each round's candidates came from, in chromium.

Screenshots go to test-artifacts/ (suffix-inspector-1280.png, lookahead-inspector-1280.png).
"""

from __future__ import annotations

import pytest
from app_server import ARTIFACTS
from test_browser_trees import upload
from tiny_head import ensure_head
from tiny_models import tiny_pair

from specviz.engine import run
from specviz.events import RoundEvent
from specviz.settings import GenerationSettings

# Without Playwright or chromium these are skipped locally and fail in CI (tests/conftest.py).
pytestmark = [pytest.mark.app, pytest.mark.browser]

# A prompt that repeats itself, sent raw, so both drafters have something to propose.
PROMPT = "def add(a, b):\n    return a + b\n\ndef add(a, b):\n    return a + b\n\ndef add("


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    folder = tmp_path_factory.mktemp("traces")
    pair = tiny_pair(None)
    out = {}
    for name, extra in (("suffix", {}), ("lookahead", {"lookahead_window": 3, "lookahead_ngram": 3})):
        trace = run(
            pair, PROMPT, GenerationSettings(drafter=name, policy="fixed", k=4, max_new_tokens=24, raw=True, **extra)
        )
        (folder / f"{name}.json").write_text(trace.to_json())
        out[name] = (folder / f"{name}.json", trace)
    return out


def first_drafted(trace) -> RoundEvent:
    return next(e for e in trace.events if isinstance(e, RoundEvent) and e.drafted)


def test_a_suffix_round_shows_its_match_and_each_nodes_count(browser, traces, tiny_url):
    path, trace = traces["suffix"]
    event = first_drafted(trace)  # where the inspector opens
    nodes = len(event.tree or event.drafted)
    page = upload(browser, tiny_url, path)
    page.get_by_role("tab", name="Round inspector").click()
    page.wait_for_selector("#round-source .sv-source[data-method=suffix]", timeout=60_000)
    text = page.inner_text("#round-source")
    assert f"occurred {event.source.occurrences} time" in text
    items = page.locator("#round-source .sv-source-tree li")
    assert items.count() == nodes
    # Each node says how many of the matched suffix's occurrences continued through it.
    for i, count in enumerate(event.source.counts):
        assert f"{count} of {event.source.occurrences}" in items.nth(i).inner_text()
    accepted = page.locator("#round-source .sv-source-tree li[data-decision=accepted]").count()
    assert accepted == event.accepted
    page.locator("#round-source").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "suffix-inspector-1280.png"), full_page=True)
    page.close()


def test_a_lookahead_round_shows_its_window_and_the_ngrams_it_made(browser, traces, tiny_url):
    path, trace = traces["lookahead"]
    event = first_drafted(trace)
    assert event.source.window_on, "the window rides under the fixed policy"
    page = upload(browser, tiny_url, path)
    page.get_by_role("tab", name="Round inspector").click()
    page.wait_for_selector("#round-source .sv-source-window", timeout=60_000)
    # N - 1 = 2 levels of W = 3 columns, one row a level under the header row.
    rows = page.locator("#round-source .sv-source-window tr")
    assert rows.count() == 1 + len(event.source.window) == 3
    assert rows.nth(1).locator("td").count() == 3
    assert page.locator("#round-source .sv-source-ngrams li").count() == len(event.source.ngrams) == 3
    assert page.locator("#round-source .sv-source-tree li").count() == len(event.tree or event.drafted)
    page.locator("#round-source").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "lookahead-inspector-1280.png"), full_page=True)
    page.close()


def test_an_edit_example_picks_the_suffix_drafter_and_room_for_the_copy(browser, tiny_url):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(tiny_url)
    page.wait_for_selector("#run", timeout=60_000)
    page.get_by_text("Edit: rename", exact=True).click()
    page.wait_for_function(
        "document.querySelector('#prompt textarea').value.startsWith('Rename the function')", timeout=30_000
    )
    assert page.locator("#drafter input[value=suffix]").is_checked()
    assert page.locator("#max_new_tokens input[type=number]").input_value() == "256"
    page.screenshot(path=str(ARTIFACTS / "edit-example-1280.png"), full_page=True)
    # A code example takes the draft model back.
    page.get_by_text("Python: is_prime", exact=True).click()
    page.wait_for_function(
        "document.querySelector('#prompt textarea').value.startsWith('Write a Python')", timeout=30_000
    )
    assert page.locator("#drafter input[value=model]").is_checked()
    assert page.locator("#max_new_tokens input[type=number]").input_value() == "128"
    page.close()


def test_a_head_round_shows_where_its_state_came_from_and_each_tokens_q(browser, tiny_url, tmp_path):
    pair = tiny_pair(None)
    ensure_head(pair)
    trace = run(
        pair,
        PROMPT,
        GenerationSettings(drafter="head", policy="fixed", k=3, max_new_tokens=16, raw=True, temperature=0.8),
    )
    path = tmp_path / "head.json"
    path.write_text(trace.to_json())
    event = first_drafted(trace)
    page = upload(browser, tiny_url, path)
    page.get_by_role("tab", name="Round inspector").click()
    page.wait_for_selector("#round-source .sv-source[data-method=head]", timeout=60_000)
    text = page.inner_text("#round-source")
    assert "nothing to catch up" in text and f"q = {event.drafted[0].q:.2f}" in text
    page.locator("#round-source").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "head-inspector-1280.png"), full_page=True)
