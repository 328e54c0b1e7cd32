"""llama-cpp-python itself: the module with its backend started, its version, and llama.cpp's
log, kept in a small buffer (not the terminal) so that a failure names llama.cpp's own reason
in one line (`last_error`).

requirements.txt builds llama-cpp-python portably: ggml's CPU backend as one loadable library
per instruction set (`GGML_BACKEND_DL`, `GGML_CPU_ALL_VARIANTS`), so an image built on one CPU
runs right on another. Such a build finds no backend by itself (ggml looks beside the Python
executable), so `llama()` loads one: the best this CPU runs, never an AMX one. llama.cpp's AMX
buffer type segfaults on passes over more than one token on AMX Xeons; without it the weight
repacking ("extra buffer types") is safe there and decodes faster than going without both
(`extra_buffer_types`). A build with the backend linked in (`GGML_NATIVE`) is used as it is.
"""

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
        raise LlamaCppUnavailable(
            f"the llama.cpp runtime needs llama-cpp-python (pip install -r requirements.txt): {e}"
        ) from None
    with _lock:
        if _callback is None:

            @llama_cpp.llama_log_callback
            def keep(level, text, user_data):
                _log.append((text or b"").decode("utf-8", "replace"))

            _callback = keep
            llama_cpp.llama_log_set(_callback, ctypes.c_void_p(0))
            _load_cpu_backend(Path(llama_cpp.__file__).parent / "lib")
            llama_cpp.llama_backend_init()
    return llama_cpp


# The CPU backend that `llama()` loaded from a portable build ("zen4", "haswell", ...), or
# None for a build with its backend linked in.
CPU_VARIANT: str | None = None
_AMX_VARIANTS = ("sapphirerapids",)  # GGML_CPU_ALL_VARIANTS' variants built with AMX


def cpu_variants(lib: Path) -> dict[str, Path]:
    """A portable build's CPU backends by variant name; empty for a native build."""
    return {f.name[len("libggml-cpu-") :].split(".so")[0]: f for f in sorted(lib.glob("libggml-cpu-*.so"))}


def choose_variant(scores: dict[str, int]) -> str | None:
    """The variant with the highest score ggml gives it on this CPU (0: it cannot run here),
    leaving out the AMX ones."""
    usable = {name: score for name, score in scores.items() if score > 0 and name not in _AMX_VARIANTS}
    return max(usable, key=lambda name: (usable[name], name)) if usable else None


def _load_cpu_backend(lib: Path) -> None:
    global CPU_VARIANT
    variants = cpu_variants(lib)
    if not variants:
        return
    scores = {}
    for name, path in variants.items():
        module = ctypes.CDLL(str(path))  # its static set-up only; the score reads CPUID
        module.ggml_backend_score.restype = ctypes.c_int
        scores[name] = int(module.ggml_backend_score())
    chosen = choose_variant(scores)
    if chosen is None:
        raise LlamaCppUnavailable(f"none of llama.cpp's CPU backends in {lib} runs on this CPU (scores {scores})")
    ggml = ctypes.CDLL(str(_loaded_ggml(lib)))
    ggml.ggml_backend_load.restype = ctypes.c_void_p
    ggml.ggml_backend_load.argtypes = [ctypes.c_char_p]
    if not ggml.ggml_backend_load(str(variants[chosen]).encode()):
        raise LlamaCppUnavailable(f"llama.cpp's CPU backend {variants[chosen]} did not load")
    CPU_VARIANT = chosen


def _loaded_ggml(lib: Path) -> Path:
    """The libggml file llama.cpp's library itself loaded. A wheel stores libggml.so,
    libggml.so.0 and libggml.so.0.x as three copies, not links, each with a backend registry
    of its own: a backend must be registered in the copy libllama uses."""
    try:
        maps = Path("/proc/self/maps").read_text().split()
    except OSError:
        maps = []
    linked = sorted({Path(m) for m in maps if Path(m).name.startswith("libggml.so") and Path(m).parent == lib})
    return linked[0] if linked else lib / "libggml.so"


def extra_buffer_types() -> bool:
    """Whether models load with llama.cpp's extra buffer types (weights repacked for the CPU's
    instructions): off only where a native build has AMX in it, which crashes on this CPU."""
    llama()
    return CPU_VARIANT is not None or not cpu_has_amx()


def build_kind() -> str:
    """ "portable (CPU backend zen4)" or "native", for the status and the bench's notes."""
    llama()
    return f"portable (CPU backend {CPU_VARIANT})" if CPU_VARIANT else "native"


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
    from specviz.lm.timing import cpu_flags

    return "amx_tile" in cpu_flags()


def default_threads() -> int:
    import torch

    return max(1, torch.get_num_threads())
