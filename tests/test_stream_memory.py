"""A long streamed run leaves one trace behind, not every message: a 512-token tree run on the
tiny pair through MCP, through the raw API as Gradio's MCP client calls it, and posted to
/call/generate and read late (scripts/stream_memory.py measures the app's memory meanwhile).
The tiny pair's run ends in seconds, so the late read comes READ_AFTER_S after the post, well
after the run's end, instead of after the 20 s the app gives a reader that never comes (that
stop is tests/test_app_background.py's)."""

from __future__ import annotations

import json
import subprocess

import pytest

from app_server import ROOT, save_tiny_pair

pytestmark = pytest.mark.app

TIMEOUT_S = 1200  # launch, load, four 512-token runs and a wait, on a slow shared machine
# The run takes a few seconds here; a read that came before its end would be sent the rest
# as it streams (many messages) and fail the bound below, never pass it by mistake.
READ_AFTER_S = 12.0
# What the app may grow by while one call runs: a few copies of the finished trace (the
# message, its JSON, the client's copy) and the run's own work, far below one trace per message.
GROWTH_TRACES = 8
GROWTH_SLACK_MB = 48


def test_a_long_tree_run_keeps_one_trace_for_an_mcp_caller_and_for_an_unread_job(tmp_path):
    spec = save_tiny_pair(tmp_path)
    done = subprocess.run(
        ["python3.11", str(ROOT / "scripts" / "stream_memory.py"), "--pair", spec, "--max-new-tokens", "512", "--json"]
        + ["--read-after-s", str(READ_AFTER_S)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 0 and done.stdout.strip(), done.stderr[-3000:]
    r = json.loads(done.stdout)
    print(json.dumps(r, indent=1))
    warm = r["warm_run"]
    # A reader that keeps up is sent the trace as it grows (many messages), the last finished.
    assert warm["last_stop_reason"] in ("eos", "max_new_tokens") and warm["trace_messages"] >= 3
    trace_mb = warm["last_bytes"] / 2**20  # the finished trace, the largest message

    mcp = r["mcp"]
    assert mcp["error"] is None and mcp["stop_reason"] in ("eos", "max_new_tokens")
    assert mcp["new_tokens"] == warm["last_new_tokens"]  # greedy: the same run
    # Gradio's MCP client is sent the finished trace alone (the stream's "complete" repeats it).
    marked = r["mcp_marked_raw"]
    assert marked["events"].count("generating") == 1 and marked["events"][-1] == "complete"
    assert marked["last_stop_reason"] in ("eos", "max_new_tokens")

    unread = r["unread_call"]
    # Read late, a job holds at most the first update and the newest one, not one per round.
    assert 1 <= unread["trace_messages"] <= 2 < warm["trace_messages"]
    bound_mb = GROWTH_TRACES * trace_mb + GROWTH_SLACK_MB
    for name in ("mcp", "mcp_marked_raw", "unread_call"):
        assert r[name]["rss_peak_growth_mb"] <= bound_mb, (name, r[name], bound_mb)
