"""The labs tab in a real browser (Debian's chromium, headless): a trace upload draws the
acceptance views; the sweep and batching buttons run on the tiny pair. Screenshots go to
test-artifacts/labs-*.png."""

from __future__ import annotations

from pathlib import Path

import pytest

from app_server import ARTIFACTS, free_port, save_tiny_pair


pytestmark = [pytest.mark.app, pytest.mark.browser]

TRACE = Path(__file__).parent / "data" / "viz_trace_greedy.json"
TIMEOUT_MS = 300_000  # a bound for a busy machine, not a speed requirement


@pytest.fixture(scope="module")
def labs_url(tmp_path_factory):
    import torch

    import labs_page

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    port = free_port()
    demo = labs_page.launch(save_tiny_pair(tmp_path_factory.mktemp("tiny-pair")), port)
    yield f"http://127.0.0.1:{port}/"
    demo.close()
    torch.set_num_threads(threads)


def upload(page) -> None:
    page.set_input_files("#trace-upload input[type=file]", str(TRACE))
    page.wait_for_selector("#labs-positions .js-plotly-plot .barlayer .point", timeout=60_000)


def test_an_uploaded_trace_draws_the_acceptance_views_and_the_buttons_measure(browser, labs_url):
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(labs_url)
    upload(page)
    # 4 positions, two bars each (conditional and unconditional)
    assert page.locator("#labs-positions .barlayer .point").count() == 8
    assert "with the bonus token" in page.inner_text("#labs-lengths-text")
    assert "no cost model" in page.inner_text("#labs-hindsight-text")
    page.fill("#labs-temperatures textarea", "0,1")
    page.click("#labs-sweep")
    page.wait_for_function(
        "() => document.querySelector('#labs-sweep-text').innerText.includes('T = 1')", timeout=TIMEOUT_MS
    )
    assert page.locator("#labs-sweep-plot .scatterlayer .trace").count() >= 3
    page.click("#labs-batching")
    page.wait_for_function(
        "() => document.querySelector('#labs-batching-text').innerText.includes('GB/s')", timeout=TIMEOUT_MS
    )
    assert page.locator("#labs-batch-costs .scatterlayer .trace").count() == 5
    page.screenshot(path=str(ARTIFACTS / "labs-desktop-1280.png"), full_page=True)
    page.close()


def test_the_labs_fit_a_phone_in_the_dark_theme(browser, labs_url):
    page = browser.new_page(viewport={"width": 390, "height": 844})
    page.goto(labs_url + "?__theme=dark")
    upload(page)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    page.screenshot(path=str(ARTIFACTS / "labs-phone-390-dark.png"), full_page=True)
    page.close()
