"""The output format in a real browser: a JSON schema typed on the Live tab constrains the run,
the tokens it forced are drawn striped, the stats count them and check the answer, and the
inspector says how many tokens the grammar allowed at a position."""

from __future__ import annotations

import json

import pytest

from app_server import ARTIFACTS
from test_browser import RUN_TIMEOUT_MS, open_page

pytestmark = [pytest.mark.app, pytest.mark.browser]

SCHEMA = json.dumps(
    {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}},
        "required": ["name", "age"],
        "additionalProperties": False,
    }
)


def test_a_json_schema_on_the_live_tab_forces_tokens_the_page_draws_and_counts(browser, tiny_url):
    page = open_page(browser, tiny_url, 1280)
    page.locator("#policy label", has_text="Fixed k").click()
    page.locator("#output_format label", has_text="JSON (schema)").click()
    page.fill("#output_spec textarea", SCHEMA)
    page.fill("#prompt textarea", "hello")
    page.click("#run")
    page.wait_for_selector("#tokens [data-state=done]", timeout=RUN_TIMEOUT_MS)
    forced = page.locator("#tokens .tok-forced")
    assert forced.count() >= 2  # the key names and their quotes
    assert "forced by the output format" in forced.first.get_attribute("title")
    stats = page.inner_text("#stats")
    assert "forced" in stats and "grammar / token" in stats
    text = "".join(page.locator("#tokens .tok:not(.tok-rejected)").all_inner_texts())
    assert '"name"' in text.replace(" ", "") or "name" in text
    page.screenshot(path=str(ARTIFACTS / "live-json-schema.png"), full_page=True)
    forced.first.click()  # the inspector at a forced token's round: the grammar's count there
    page.wait_for_selector("#position-bars .js-plotly-plot")
    assert "the grammar allowed" in page.inner_text("body")
    page.close()
