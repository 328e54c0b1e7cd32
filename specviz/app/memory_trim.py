"""Give freed heap memory back to the system while the page is up.

A large request (a body at the size limit, a trace upload) is parsed into Python objects
that are freed once it is answered, but glibc's allocator keeps the pages it grew for them:
without a trim, the app's resident memory stays at the highest peak any request reached. A
daemon thread reads the resident size every few seconds and, when it has grown by
`GROWTH_BYTES` since the last trim or `EVERY_S` have passed, asks the allocator to return its
free pages (`malloc_trim(0)`: walks the heap, milliseconds even on a large one). Where the C library has
no `malloc_trim` (musl, macOS, Windows) nothing is started.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
import time

PERIOD_S = 5.0
GROWTH_BYTES = 16 * 2**20
EVERY_S = 30.0  # memory freed later (sessions forgotten once idle, app/sessions.py) is returned too
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_started = threading.Event()


def resident_bytes() -> int | None:
    """This process's resident set size (Linux), or None where /proc is not there."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def _malloc_trim():
    name = ctypes.util.find_library("c")
    try:
        trim = getattr(ctypes.CDLL(name), "malloc_trim")
    except (OSError, AttributeError, TypeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def trim_now() -> bool:
    """Return the allocator's free pages now; False where this C library cannot."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


def start(period_s: float = PERIOD_S, growth_bytes: int = GROWTH_BYTES, every_s: float = EVERY_S) -> bool:
    """Start the trimming thread once per process; False where there is nothing to call."""
    trim = _malloc_trim()
    if trim is None or resident_bytes() is None:
        return False
    if _started.is_set():
        return True
    _started.set()

    def loop() -> None:
        last, last_t = resident_bytes() or 0, time.monotonic()
        while True:
            time.sleep(period_s)
            now = resident_bytes() or 0
            if now > last + growth_bytes or time.monotonic() - last_t >= every_s:
                trim(0)
                last, last_t = resident_bytes() or now, time.monotonic()
            elif now < last:
                last = now

    threading.Thread(target=loop, name="specviz-memory-trim", daemon=True).start()
    return True
