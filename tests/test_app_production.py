"""The page's production panels: the Live run tab's export of the run, the Labs tab's
metrics read back (views called as the page calls them), and the page's tools served over
MCP by the launched app."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from specviz import engine
from specviz.workshop.production import panels as production
from specviz.errors import UserError
from specviz.settings import GenerationSettings
from tiny_models import tiny_pair

DATA = Path(__file__).parent / "data" / "production"


@pytest.fixture(scope="module")
def trace():
    t = engine.run(tiny_pair("close"), "def reverse(s):", GenerationSettings(max_new_tokens=24, k=4, policy="fixed"))
    t.pair = "qwen-coder"  # the export names the preset's models (no weights are loaded for it)
    return t


def test_the_export_panel_writes_the_runs_pair_drafter_and_k_for_each_engine(trace):
    code, notes = production.export_views(trace, "vllm")
    assert "Qwen/Qwen2.5-Coder-0.5B-Instruct" in code.value and "num_speculative_tokens" in code.value
    code, _ = production.export_views(trace, "llamacpp")
    assert "qwen2.5-coder-0.5b-instruct.gguf" in code.value and "--spec-draft-n-max" in code.value
    code, notes = production.export_views(None, "vllm")
    assert code.value == "" and "Run a generation" in notes


def test_the_metrics_section_draws_an_engines_positions_and_judges_them(trace):
    payload = (DATA / "vllm_two_models.prom").read_text()
    fig, words = production.metrics_views(payload, None, "typed", 10.0, 0.0, None, None)
    assert [list(b.y) for b in fig.data if b.type == "bar"][0] == pytest.approx(
        [0.9, 30 / 45, 0.5]
    )  # model-a, conditional
    assert "model-a" in words and "model-b" in words and "This drafter helps: 2.80x" in words
    # With the run's measured costs, the source is named.
    _, words = production.metrics_views(None, str(DATA / "vllm_request.json"), "run", None, None, None, trace)
    assert "measured on qwen-coder" in words
    with pytest.raises(UserError, match="no run to take a cost model from"):
        production.metrics_views(payload, None, "run", None, None, None, None)
    with pytest.raises(UserError, match="no speculative decoding counters"):
        production.metrics_views("up 1", None, "typed", 10.0, 0.0, None, None)


@pytest.mark.app
def test_the_launched_app_lists_its_tools_over_mcp_and_answers_two_calls():
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    from app_server import launched_app

    async def talk(url: str):
        async with streamable_http_client(url) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = {t.name: t for t in (await session.list_tools()).tools}
                speed = await session.call_tool("speedup", {"alpha": 0.8, "k": 4, "target_ms": 30, "draft_ms": 5})
                bad = await session.call_tool("best_k", {"alpha": 0.8, "target_ms": -1, "draft_ms": 5})
                return tools, speed, bad

    with launched_app({"SPECVIZ_PRELOAD": "0"}, "app-mcp") as url:
        tools, speed, bad = asyncio.run(talk(f"{url}gradio_api/mcp/"))
    names = set(tools)
    assert {"speedup", "best_k", "lossless_check", "export_settings", "read_metrics", "generate_summary"} <= names, (
        names
    )
    assert "Returns" in tools["speedup"].description or "speedup" in tools["speedup"].description
    # (1 - 0.8^5) / 0.2 = 3.3616 tokens a round for 4 * 5 + 30 = 50 ms against 30 a token: 2.017x.
    got = json.loads(speed.content[0].text)
    assert got["tokens_per_round"] == pytest.approx(3.3616) and got["speedup"] == pytest.approx(3.3616 * 30 / 50)
    assert bad.isError and "target_ms must be above 0" in bad.content[0].text
