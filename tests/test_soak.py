"""The soak command, short, on the tiny pair saved to disk; and the session bound it led to.

`scripts/soak.sh` launches the app on a pair and has users loop through the public API (see
scripts/soak.py). Here: 2 minutes, 4 users, the tiny pair's folders as `--pair`. No speed is
asserted: only that nothing failed and every greedy run repeated the first one.
"""

from __future__ import annotations

import json
import subprocess

import httpx
import pytest

from app_server import ROOT, free_port, generate_inputs, save_tiny_pair

pytestmark = pytest.mark.app

SOAK_TIMEOUT_S = 2 * 60 + 900  # the soak's 2 minutes, plus a generous bound for launch, load and a slow machine


def test_a_two_minute_soak_of_four_users_on_the_tiny_pair(tmp_path):
    spec = save_tiny_pair(tmp_path)
    done = subprocess.run(
        [str(ROOT / "scripts" / "soak.sh"), "--pair", spec, "--minutes", "2", "--users", "4", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=SOAK_TIMEOUT_S,
    )
    assert done.stdout.strip(), done.stderr[-3000:]
    report = json.loads(done.stdout)
    print(done.stderr[-2500:])
    assert report["failures"] == 0, report["failure_details"]
    assert report["greedy_identical"], report["greedy_differing"]
    assert done.returncode == 0
    # The soak did what it says: many runs, greedy ones repeated, the odd requests among them.
    assert report["pair"] == spec and report["users"] == 4
    assert report["completed"] >= 20 and report["greedy_runs"] > report["greedy_keys"] >= 2
    assert report["cancelled"] + report["abandoned"] >= 1 and report["refused"] >= 1
    assert report["requests"] == sum(report[k] for k in ("completed", "cancelled", "abandoned", "refused", "failures"))
    for key in (
        "queue_wait_p50_s",
        "queue_wait_p95_s",
        "rss_start_mb",
        "rss_end_mb",
        "rss_max_mb",
        "single_run_s",
        "seven_in_a_row_p95_s",
    ):
        assert isinstance(report[key], float) and report[key] > 0, key
    assert report["rss_max_mb"] >= report["rss_end_mb"]
    for key in ("threads", "open_files", "temp_dirs"):
        assert isinstance(report[f"{key}_start"], int) and isinstance(report[f"{key}_end"], int), key


def test_a_hostile_client_beside_eight_users_is_refused_and_the_users_are_served(tmp_path):
    """The soak's --hostile mode, short: the crowd alone, then beside one hostile client. The
    goals on wait and memory are the script's to report (a short run on a shared machine
    times nothing reliably); here, that they are reported, and that no honest request failed
    and no hostile one was served."""
    spec = save_tiny_pair(tmp_path)
    done = subprocess.run(
        [
            str(ROOT / "scripts" / "soak.sh"),
            "--pair",
            spec,
            "--minutes",
            "0.5",
            "--users",
            "8",
            "--max-new-tokens",
            "8",
            "--hostile",
            "--json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=SOAK_TIMEOUT_S,
    )
    assert done.stdout.strip(), done.stderr[-3000:]
    print(done.stderr[-2500:])
    h = json.loads(done.stdout)["hostile"]
    assert h["honest_failures"] == 0, h["honest_failure_details"]
    assert h["hostile_requests"] >= 10 and h["hostile_refused"] == h["hostile_requests"], h["hostile_not_refused"]
    for key in (
        "queue_wait_p95_without_s",
        "queue_wait_p95_with_s",
        "p95_ratio",
        "rss_start_mb",
        "rss_end_mb",
        "refusal_p95_s",
        "refusal_max_s",
    ):
        assert isinstance(h[key], float) and h[key] > 0, key
    assert set(h["goals"]) == {
        "honest_failures_0",
        "p95_within_20pct",
        "rss_within_5pct",
        "every_hostile_request_refused",
        "refusals_within_1s",
    }


def test_the_page_keeps_state_for_at_most_max_sessions_sessions(monkeypatch):
    """Every raw API call is a session with its own copy of the page's settings in Gradio;
    SPECVIZ_MAX_SESSIONS bounds how many are kept (the soak saw memory grow with them)."""
    import gradio as gr

    import app
    from specviz.app import page

    port = free_port()
    monkeypatch.setenv("GRADIO_SERVER_PORT", str(port))
    monkeypatch.setenv("GRADIO_SERVER_NAME", "127.0.0.1")
    monkeypatch.setenv("SPECVIZ_PRELOAD", "0")
    monkeypatch.setenv("SPECVIZ_MAX_SESSIONS", "3")
    built, build_page = [], page.build_page
    # app.main imports build_page when it runs (after starting the load), so it is replaced where it lives
    monkeypatch.setattr(page, "build_page", lambda config: built.append(build_page(config)) or built[-1])
    monkeypatch.setattr(gr.Blocks, "block_thread", lambda self: None)
    app.main()
    demo = built[0]
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}/", timeout=60) as http:
            # The endpoint's positional inputs, with an empty prompt: refused at once, after its session is made.
            data = generate_inputs(f"http://127.0.0.1:{port}/", prompt="", pair="qwen-coder", max_new_tokens=8)
            for _ in range(8):
                event = http.post("gradio_api/call/generate", json={"data": data}).json()["event_id"]
                body = http.get(f"gradio_api/call/generate/{event}").text
                assert "the prompt is empty" in body, body[:300]
        sessions = demo.server_app.state_holder.session_data
        assert 1 <= len(sessions) <= 3
    finally:
        demo.close()
