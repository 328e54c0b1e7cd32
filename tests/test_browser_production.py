"""The production panels in a real browser: a run's settings exported in the Live run tab, and
an engine's metrics read back in the Labs tab. Screenshots go to test-artifacts/production-*.png."""

from __future__ import annotations

from pathlib import Path

import pytest

from app_server import ARTIFACTS

pytestmark = [pytest.mark.app, pytest.mark.browser]

PAYLOAD = Path(__file__).parent / "data" / "production" / "llamacpp_metrics.prom"
RUN_TIMEOUT_MS = 300_000  # a bound for a busy machine, not a speed requirement


def test_a_run_exports_to_each_engine_and_an_engines_metrics_read_back(browser, tiny_url):
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(tiny_url)
    page.wait_for_selector("#run", timeout=60_000)
    page.locator("#policy label", has_text="Fixed k").click()
    page.fill("#prompt textarea", "for i in range(10):")
    page.click("#run")
    page.wait_for_selector("#tokens [data-state=done]", timeout=RUN_TIMEOUT_MS)
    page.click("#export-panel button")  # open the accordion
    # the page redraws every tab from the new trace after the run: wait for it before picking a format
    # (the accordion's contents appear a moment after the click, so the element may not exist yet)
    page.wait_for_function(
        "() => { const e = document.querySelector('#export-notes');"
        " return e && !e.innerText.includes('Run a generation'); }",
        timeout=60_000,
    )
    page.locator("#export-format label", has_text="vLLM").click()
    page.wait_for_function(
        "() => document.querySelector('#export-code').innerText.includes('num_speculative_tokens')", timeout=60_000
    )
    assert "tiny-draft" in page.inner_text("#export-code")
    assert "k = " in page.inner_text("#export-notes")
    page.locator("#export-format label", has_text="llama-cpp-python").click()
    page.wait_for_function(
        "() => document.querySelector('#export-notes').innerText.includes('nothing to export')", timeout=60_000
    )
    page.locator("#export-panel").screenshot(path=str(ARTIFACTS / "production-export.png"))

    page.click("#tab-labs-button")
    page.fill("#metrics-text textarea", PAYLOAD.read_text())
    page.locator("#metrics-cost label", has_text="Typed in").click()
    page.click("#metrics-read")
    page.wait_for_function(
        "() => document.querySelector('#metrics-words').innerText.includes('This drafter')", timeout=60_000
    )
    words = page.inner_text("#metrics-words")
    assert "steps that drafted: 17" in words and "drafted tokens: 49, accepted: 30" in words
    # The default typed costs, T = 30, D = 5 and the verify pass as T: 2.765 tokens for
    # 2.88 * 5 + 30 = 44.4 ms against 30 a token, 1.87x.
    assert "This drafter helps: 1.87x" in words
    assert page.locator("#metrics-positions .barlayer .point").count() == 6  # 3 positions, both definitions
    page.locator("#metrics-positions").screenshot(path=str(ARTIFACTS / "production-metrics.png"))
    page.locator("#metrics-words").screenshot(path=str(ARTIFACTS / "production-metrics-words.png"))
    page.fill("#metrics-text textarea", '{"choices": []}')
    page.click("#metrics-read")
    page.wait_for_selector(".toast-body", timeout=60_000)  # the one-line message, and the page keeps serving
    assert "no speculative metrics in this JSON" in page.inner_text(".toast-body")
    page.close()
