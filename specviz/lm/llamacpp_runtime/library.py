"""llama-cpp-python itself: the module with its backend started, its version, and llama.cpp's
log, kept in a small buffer (not the terminal) so that a failure names llama.cpp's own reason
in one line (`last_error`)."""

from __future__ import annotations

import collections
import ctypes
import threading
from pathlib import Path

from specviz.errors import UserError

_lock = threading.Lock()
_log: collections.deque[str] = collections.deque(maxlen=40)
_callback = None  # kept alive: llama.cpp holds the pointer


class LlamaCppUnavailable(UserError):
    """llama-cpp-python is not installed."""


def llama():
    """The llama_cpp module with its backend started and its log captured, once a process."""
    global _callback
    try:
        import llama_cpp
    except ImportError as e:
        raise LlamaCppUnavailable(f"the llama.cpp runtime needs llama-cpp-python (pip install -r requirements.txt): {e}") from None
    with _lock:
        if _callback is None:
            @llama_cpp.llama_log_callback
            def keep(level, text, user_data):
                _log.append((text or b"").decode("utf-8", "replace"))

            _callback = keep
            llama_cpp.llama_log_set(_callback, ctypes.c_void_p(0))
            llama_cpp.llama_backend_init()
    return llama_cpp


def version() -> str:
    return getattr(llama(), "__version__", "unknown")


def clear_log() -> None:
    """Forget what llama.cpp logged so far: `last_error` then tells the next call's reason."""
    _log.clear()


def last_error() -> str:
    """The first error-looking line llama.cpp logged since the log was last cleared (the
    cause; later lines only say that loading failed), without its function-name prefix."""
    lines = [line.strip() for line in _log if line.strip()]
    for line in lines:
        if any(w in line.lower() for w in ("error", "unknown", "failed", "invalid", "unsupported")):
            return line.split(": ", 1)[-1] if line.startswith("llama") else line
    return lines[-1] if lines else "no reason given"


def cpu_has_amx() -> bool:
    try:
        return " amx_tile" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


def default_threads() -> int:
    import torch

    return max(1, torch.get_num_threads())
