"""Drive the real page on the bundled pair in headless chromium: time the default run and
take the screenshots of the README and docs/.

    python scripts/page_tour.py [--out assets] [--max-new-tokens 128] [--no-labs] [--draft-free-only]

Launches app.py (the default pair, preloaded, default precision), waits until the pair is
ready, then clicks Run on the first example with the page's defaults and prints the
seconds from the click to the first coloured token and to the end of the run, and the same
for plain decoding on the Side by side tab. Then it opens the Labs tab (acceptance by
position, hindsight k, the temperature sweep at 0 and 0.7, the batching lab) and the
Lossless lab's bug gallery, saving a screenshot of each, and the Theory tab's pass costs by runtime.
Last, it runs the suffix and the lookahead drafters on the bench's "rewrite with type hints"
prompt and saves the Round inspector's source view of a round of each (inspector-suffix.png,
inspector-lookahead.png; `--draft-free-only` does only this). Needs Playwright and Debian's
chromium (/usr/bin/chromium). Nothing here is a test: it prints what it measured.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "assets"))
    ap.add_argument("--max-new-tokens", type=int, default=None, help="set the slider (default: the page's default)")
    ap.add_argument("--no-labs", action="store_true", help="time the runs only")
    ap.add_argument("--draft-free-only", action="store_true", help="only the suffix and lookahead inspector views")
    ap.add_argument("--ready-timeout-s", type=float, default=1800)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    from playwright.sync_api import sync_playwright

    port = free_port()
    env = {**os.environ, "GRADIO_SERVER_PORT": str(port), "GRADIO_ANALYTICS_ENABLED": "False"}
    env.pop("PORT", None)
    log = open("/tmp/page_tour_app.log", "w")
    app = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    figures: dict[str, float | str] = {}
    try:
        url = f"http://127.0.0.1:{port}/"
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-background-networking"]
            )
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            t0 = time.monotonic()
            while True:
                try:
                    page.goto(url)
                    break
                except Exception:
                    if time.monotonic() - t0 > 120:
                        raise
                    time.sleep(1)
            page.wait_for_selector("#model-status .sv-load-ready", timeout=args.ready_timeout_s * 1000)
            figures["page answered and pair ready after launch (s)"] = round(time.monotonic() - t0, 1)
            figures["status"] = page.inner_text("#model-status")
            if args.max_new_tokens:
                box = page.locator("#max_new_tokens input[type=number]")
                box.fill(str(args.max_new_tokens))
                box.blur()
                time.sleep(1)

            def timed_run(click: str, first: str, done: str, key: str) -> None:
                start = time.monotonic()
                page.click(click)
                page.wait_for_selector(first, timeout=600_000)
                figures[f"{key}: click to first token (s)"] = round(time.monotonic() - start, 2)
                page.wait_for_selector(done, timeout=600_000)
                figures[f"{key}: click to done (s)"] = round(time.monotonic() - start, 2)

            if args.draft_free_only:
                draft_free_views(page, out, figures)
                browser.close()
                return print(json.dumps(figures, indent=1)) or 0
            timed_run("#run", "#tokens .tok", "#tokens [data-state=done]", "speculative run")
            figures["speculative stats"] = page.inner_text("#stats").replace("\n", " ")
            page.screenshot(path=str(out / "screenshot.png"), full_page=False)
            page.get_by_role("tab", name="Side by side").click()
            timed_run("#compare-run", "#race-plain .tok", "#compare-table table", "plain run")
            figures["side by side"] = page.inner_text("#compare-table").replace("\n", " ")
            page.get_by_role("tab", name="Theory").click()
            page.wait_for_selector("#theory-measured table")
            figures["theory"] = page.inner_text("#theory-measured").replace("\n", " ")
            page.wait_for_selector("#theory-pass-cost .js-plotly-plot")
            page.wait_for_timeout(1000)
            page.locator("#theory-pass-cost").screenshot(path=str(out / "theory-pass-cost.png"))
            if not args.no_labs:
                page.get_by_role("tab", name="Labs").click()
                page.wait_for_selector("#labs-positions .js-plotly-plot")
                page.locator("#labs-positions").screenshot(path=str(out / "lab-positions.png"))
                page.locator("#labs-hindsight").screenshot(path=str(out / "lab-hindsight.png"))
                page.fill("#labs-temperatures textarea, #labs-temperatures input", "0, 0.7")
                page.click("#labs-sweep")
                # while it runs, the text ends with "temperatures run…"
                page.wait_for_function(
                    "() => { const t = document.querySelector('#labs-sweep-text').innerText;"
                    " return t.includes('T = 0.7') && !t.includes('\\u2026'); }",
                    timeout=1_200_000,
                )
                page.wait_for_timeout(2000)
                page.locator("#labs-sweep-plot").screenshot(path=str(out / "lab-sweep.png"))
                figures["sweep"] = page.inner_text("#labs-sweep-text").replace("\n", " ")[:600]
                page.click("#labs-batching")
                # the lab times batched passes on torch; on another runtime it says so in a message
                page.wait_for_selector("#labs-batching-plot .point, .toast-body", timeout=1_200_000)
                page.wait_for_timeout(2000)
                if page.locator(".toast-body").count():
                    figures["batching"] = "refused: " + page.inner_text(".toast-body").replace("\n", " ")
                else:
                    page.locator("#labs-batching-plot").screenshot(path=str(out / "lab-batching.png"))
                    figures["batching"] = page.inner_text("#labs-batching-text").replace("\n", " ")[:600]
                page.get_by_role("tab", name="Lossless lab").click()
                page.click("#lossless-bugs-run")
                page.wait_for_selector("#lossless-bugs-table table", timeout=300_000)
                page.wait_for_timeout(1500)
                page.locator("#lossless-bugs-tv").screenshot(path=str(out / "lab-bugs.png"))
            page.get_by_role("tab", name="Live run").click()
            draft_free_views(page, out, figures)
            browser.close()
    finally:
        app.terminate()
        app.wait(timeout=30)
    print(json.dumps(figures, indent=1))
    return 0


# What each draft-free view waits for in the inspector's source: lookahead's window table.
DRAFT_FREE_VIEWS = {"suffix": ("Suffix", ".sv-source-tree"), "lookahead": ("Lookahead", ".sv-source-window")}


def draft_free_views(page, out: Path, figures: dict) -> None:
    """Run each draft-free drafter on a repetitive prompt, then step the Round inspector to
    the first round showing what its view is about and save that view."""
    prompts = json.loads((ROOT / "assets" / "bench_prompts.json").read_text())
    prompts = prompts if isinstance(prompts, list) else prompts["prompts"]
    prompt = next(p["prompt"] for p in prompts if p["id"] == "rep-typehints")
    for drafter, (label, wanted) in DRAFT_FREE_VIEWS.items():
        page.get_by_role("tab", name="Live run").click()
        page.fill("#prompt textarea", prompt)
        page.locator("#drafter label", has_text=label).click()
        page.wait_for_timeout(500)
        page.click("#run")
        # The previous run's finished stream stays until this run's first round replaces it.
        page.wait_for_selector("#tokens [data-state=done]", state="detached", timeout=120_000)
        page.wait_for_selector("#tokens [data-state=done]", timeout=600_000)
        figures[f"{drafter} stats"] = page.inner_text("#stats").replace("\n", " ")
        page.get_by_role("tab", name="Round inspector").click()
        page.wait_for_selector("#round-story p", timeout=60_000)
        for _ in range(200):
            if page.locator(f"#round-source {wanted}").count():
                break
            page.click("#round-next")
            page.wait_for_timeout(400)
        page.wait_for_timeout(800)
        page.locator("#round-source").screenshot(path=str(out / f"inspector-{drafter}.png"))
        figures[f"{drafter} source"] = page.inner_text("#round-source").replace("\n", " ")[:400]


if __name__ == "__main__":
    raise SystemExit(main())
