"""The lossless lab's bug gallery in a real browser: Debian's chromium, headless, via Playwright.

No model loads (SPECVIZ_PRELOAD=0, and the lab needs none). Screenshots go to test-artifacts/:
lossless-bugs-1280.png (desktop) and lossless-bugs-390-dark.png (phone, dark theme).
"""

from __future__ import annotations

import pytest

from app_server import ARTIFACTS


pytestmark = [pytest.mark.app, pytest.mark.browser]

RULES = ("exact", "argmax-accept", "replacement-from-p", "q-before-temperature", "p-without-temperature")
RUN_TIMEOUT_MS = 120_000  # five million draws and two figures on a busy machine, not a speed requirement


def open_lossless_tab(page) -> None:
    """Click the tab; on a phone it sits in the tab bar's "More tabs" menu."""
    page.wait_for_selector("#tabs [role=tablist]")
    tab = page.locator("#tab-lossless-button")
    if tab.count() and tab.is_visible():
        tab.click()
    else:
        page.click("#tabs [aria-label='More tabs']")
        page.locator("#tabs .overflow-dropdown button", has_text="Lossless lab").click()
    page.wait_for_selector("#lossless-bugs-run", state="visible")


def run_gallery(browser, url: str, width: int, dark: bool = False):
    page = browser.new_page(viewport={"width": width, "height": 900 if width > 600 else 844})
    page.goto(url + ("?__theme=dark" if dark else ""))
    open_lossless_tab(page)
    page.click("#lossless-bugs-run")
    page.wait_for_selector("#lossless-bugs-table table", timeout=RUN_TIMEOUT_MS)
    page.wait_for_selector("#lossless-bugs-frequencies .js-plotly-plot .barlayer", timeout=RUN_TIMEOUT_MS)
    page.wait_for_selector("#lossless-bugs-tv .js-plotly-plot .barlayer", timeout=RUN_TIMEOUT_MS)
    return page


def test_the_bug_gallery_runs_and_shows_each_mistake_off(browser, tiny_url):
    page = run_gallery(browser, tiny_url, 1280)
    rows = page.locator("#lossless-bugs-table tr")
    assert rows.count() == 1 + len(RULES)
    cells = {rows.nth(i).locator("td").first.inner_text(): rows.nth(i).inner_text() for i in range(1, rows.count())}
    assert set(cells) == set(RULES)
    # The page's defaults (p, q, 1 million draws, seed 0, T = 0.7): only the exact rule is within noise.
    assert "within noise" in cells["exact"]
    assert all("measurably off" in cells[name] for name in RULES[1:])
    assert "Sampling quietly turns greedy" in page.inner_text("#lossless-bugs-table")
    # p at T, then one bar trace per rule; one TV bar per rule.
    assert page.locator("#lossless-bugs-frequencies .barlayer .trace").count() == 1 + len(RULES)
    assert page.locator("#lossless-bugs-tv .barlayer .point").count() == len(RULES)
    page.locator("#lossless-bugs-table").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "lossless-bugs-1280.png"), full_page=True)
    page.close()


def test_the_bug_gallery_fits_a_phone_in_the_dark_theme(browser, tiny_url):
    page = run_gallery(browser, tiny_url, 390, dark=True)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"), "no sideways scroll"
    # The table fits its box too (a wider one would be cut off, not scrolled).
    assert page.evaluate("""() => { const t = document.querySelector('#lossless-bugs-table table');
        return t.getBoundingClientRect().right <= document.querySelector('#lossless-bugs-table').getBoundingClientRect().right + 1; }""")
    page.screenshot(path=str(ARTIFACTS / "lossless-bugs-390-dark.png"), full_page=True)
    page.close()
