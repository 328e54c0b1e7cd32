"""What the page keeps on disk and per session goes again: written traces are pruned by age and
count, Gradio's files for the page are deleted on a schedule, and a session's traces expire."""

from __future__ import annotations

import os
import time

from specviz.app import traces


def test_written_traces_go_when_old_and_past_the_count(tmp_path):
    now = time.time()
    paths = []
    for i in range(6):
        path = tmp_path / f"specviz-speculative-run-{i}.json"
        path.write_text("{}")
        os.utime(path, (now - 10 * i, now - 10 * i))  # file i is 10*i seconds old
        paths.append(path)
    other = tmp_path / "not-a-trace.txt"
    other.write_text("kept")
    assert traces.prune_traces(tmp_path, age_s=35, kept=3) == 3
    assert [p.exists() for p in paths] == [True, True, True, False, False, False]
    assert traces.prune_traces(tmp_path, age_s=15, kept=10) == 1  # now only the age: 20 s is too old
    assert [p.exists() for p in paths[:3]] == [True, True, False] and other.exists()


def test_the_page_deletes_its_files_and_expires_session_state():
    from specviz.app.config import PageConfig
    from specviz.app.page import DELETE_CACHE, STATE_TTL_S, build_page

    demo = build_page(PageConfig(preload=False))
    assert demo.delete_cache == DELETE_CACHE and 0 < DELETE_CACHE[0] <= DELETE_CACHE[1]
    states = [b for b in demo.blocks.values() if type(b).__name__ == "State"]
    assert states and all(s.time_to_live == STATE_TTL_S for s in states)
