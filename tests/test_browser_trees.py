"""A tree run's and a cross-tokenizer run's traces, uploaded to a page with no model loaded:
the round inspector draws the tree, its attention mask and the alignment in chromium.

Screenshots go to test-artifacts/ (tree-inspector-1280.png, alignment-inspector-1280.png).
"""

from __future__ import annotations

import pytest
from app_server import ARTIFACTS
from tiny_models import tiny_pair

from specviz.engine import run
from specviz.events import RoundEvent
from specviz.settings import GenerationSettings

# Without Playwright or chromium these are skipped locally and fail in CI (tests/conftest.py).
pytestmark = [pytest.mark.app, pytest.mark.browser]

TREE = GenerationSettings(drafter="tree", tree_nodes=8, tree_width=2, policy="fixed", k=8, max_new_tokens=32)


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    from test_cross_vocab import cross_pair

    from specviz.costs.measure import for_pair

    folder = tmp_path_factory.mktemp("traces")
    tree = run(tiny_pair("close"), "for i in range(10):", TREE)
    pair = cross_pair()
    pair.cost_model = for_pair(tiny_pair("close"))  # the same target's costs
    cross = run(
        pair, "def reverse(s):", GenerationSettings(vocab_method="text", k=4, policy="fixed", max_new_tokens=16)
    )
    (folder / "tree.json").write_text(tree.to_json())
    (folder / "cross.json").write_text(cross.to_json())
    return {"tree": (folder / "tree.json", tree), "cross": (folder / "cross.json", cross)}


def upload(browser, url: str, path) -> object:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(url)
    page.wait_for_selector("#run", timeout=60_000)
    page.get_by_role("tab", name="Traces").click()
    page.set_input_files("#trace-upload input[type=file]", str(path))
    page.wait_for_selector("#trace-summary td", timeout=60_000)
    return page


def test_an_uploaded_tree_round_shows_its_tree_and_mask(browser, traces, tiny_url):
    path, trace = traces["tree"]
    # The inspector opens on the first round that drafted (round 0 is the prefill's token).
    first = next(e for e in trace.events if isinstance(e, RoundEvent) and e.drafted)
    assert first.tree, "a tree round"
    page = upload(browser, tiny_url, path)
    page.get_by_role("tab", name="Round inspector").click()
    page.wait_for_selector("#round-tree .js-plotly-plot .scatterlayer", timeout=60_000)
    page.wait_for_selector("#round-tree-mask .js-plotly-plot .heatmaplayer", timeout=60_000)
    # One label per drafted node, the root and the emitted token.
    labels = page.locator("#round-tree .scatterlayer .textpoint").count()
    assert labels == len(first.tree) + 1 + (first.emitted is not None)
    assert "tree attention mask" in page.locator("#round-tree-mask .gtitle").text_content()
    assert not page.locator("#round-alignment").is_visible()
    page.locator("#round-tree").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "tree-inspector-1280.png"), full_page=True)
    # The live run shows the latest tree round under the replayed stream.
    page.get_by_role("tab", name="Live run").click()
    page.wait_for_selector("#live-tree .js-plotly-plot .scatterlayer", timeout=60_000)
    page.screenshot(path=str(ARTIFACTS / "tree-live-1280.png"), full_page=True)
    # The theory tab says whether the tree pays.
    page.get_by_role("tab", name="Theory").click()
    page.wait_for_selector("#theory-tree-plot .js-plotly-plot", timeout=60_000)
    assert "On this machine" in page.inner_text("#theory-tree-text")
    page.locator("#theory-tree-box").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "tree-theory-1280.png"), full_page=True)
    page.close()


def test_an_uploaded_cross_tokenizer_round_shows_its_alignment(browser, traces, tiny_url):
    path, trace = traces["cross"]
    first = next(e for e in trace.events if isinstance(e, RoundEvent) and e.drafted)
    assert first.alignment
    page = upload(browser, tiny_url, path)
    page.get_by_role("tab", name="Round inspector").click()
    page.wait_for_selector("#round-alignment .sv-align-row", timeout=60_000)
    assert page.locator("#round-alignment .sv-align-draft-tok").count() == len(first.alignment)
    assert page.locator("#round-alignment .sv-align-bottom [data-pos]").count() == len(first.drafted)
    assert not page.locator("#round-tree-box").is_visible()
    page.locator("#round-alignment").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "alignment-inspector-1280.png"), full_page=True)
    page.close()
