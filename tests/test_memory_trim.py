"""The page returns freed heap memory to the system (app/memory_trim.py): without a trim,
glibc keeps the pages a large request grew the heap by, and the app's resident memory stays
at its highest peak."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from specviz.app import memory_trim

FREED = textwrap.dedent(
    """
    import time
    from specviz.app import memory_trim as m
    {setup}
    blocks = [bytearray(60_000) for _ in range(4000)]  # 240 MB in heap chunks (below mmap's threshold)
    pinned = bytearray(60_000)  # above them: the heap's top stays, so nothing is returned on free
    del blocks
    before = m.resident_bytes()
    {action}
    print(before, m.resident_bytes())
    """
)


def freed_then(action: str, setup: str = "") -> tuple[int, int]:
    code = FREED.format(action=action, setup=setup)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    before, after = map(int, out.split())
    return before, after


needs_trim = pytest.mark.skipif(memory_trim._malloc_trim() is None, reason="this C library has no malloc_trim")


@needs_trim
def test_trim_returns_freed_heap_pages():
    before, after = freed_then("m.trim_now()")
    assert before > 200 * 2**20, before  # the freed blocks were still resident
    assert after < before - 150 * 2**20, (before, after)


@needs_trim
def test_the_thread_trims_after_the_heap_grew():
    """Started before the blocks: it sees the growth (and no time-based trim is due)."""
    start = "assert m.start(period_s=0.2, growth_bytes=2**20, every_s=3600)"
    before, after = freed_then("time.sleep(1.0)", setup=start)
    assert after < before - 150 * 2**20, (before, after)


@needs_trim
def test_the_thread_trims_on_its_clock_what_was_freed_later():
    """Started after the growth (as memory freed when idle sessions are forgotten): the
    periodic trim returns it."""
    before, after = freed_then("assert m.start(period_s=0.05, growth_bytes=2**40, every_s=0.2); time.sleep(1.0)")
    assert after < before - 150 * 2**20, (before, after)


@needs_trim
def test_without_a_trim_the_freed_pages_stay():
    """What the thread is for: the same blocks freed and left alone stay resident."""
    before, after = freed_then("time.sleep(0.5)")
    assert after > before - 50 * 2**20, (before, after)


def test_the_page_trims_unless_told_not_to():
    from specviz.app.config import PageConfig

    assert PageConfig.from_env({}).memory_trim is True
    assert PageConfig.from_env({"SPECVIZ_MEMORY_TRIM": "0"}).memory_trim is False
