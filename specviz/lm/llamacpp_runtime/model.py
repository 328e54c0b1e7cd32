"""A GGUF file loaded by llama.cpp as it is (its own quantisation, no conversion).

`LlamaCppModel` holds the llama.cpp model; `lm.llamacpp_runtime.lm.LlamaCppLM` makes a context with
a KV cache on it for each run, or takes one a finished run gave back. llama.cpp reports a
failed load as a NULL model and a log line; the log goes to a small buffer here (not the
terminal) so that a failed load names the file, the runtime and llama.cpp's own reason in
one line.

llama.cpp aborts the whole process on a failed internal assertion, so nothing reaches it
unchecked: the file must exist and start as a GGUF does, and `lm.llamacpp_runtime.lm` checks every
batch before decoding it.
"""

from __future__ import annotations

import collections
import ctypes
import os
import threading
from pathlib import Path

from specviz.choices import LLAMACPP
from specviz.models.errors import MissingModelError
from specviz.errors import UserError

RUNTIME = LLAMACPP
# Positions a context is made with unless the model's own window is smaller.
DEFAULT_CONTEXT = 4096
# Cleared contexts a model keeps for later runs (about the runs at once on one page).
IDLE_CONTEXTS = 4

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


class LlamaCppModel:
    """One GGUF file in llama.cpp. `vocab_size` is its logits row width, `context_window`
    the positions a context made on it holds, `stop_ids` its end-of-generation tokens."""

    runtime = RUNTIME

    def __init__(self, path: str | os.PathLike, *, threads: int | None = None, context: int = DEFAULT_CONTEXT):
        self.path = Path(path)
        if not self.path.is_file():
            raise MissingModelError(f"{self.path}: no such GGUF file (runtime {RUNTIME})")
        with open(self.path, "rb") as f:
            if f.read(4) != b"GGUF":
                raise UserError(f"{self.path}: not a GGUF file, so {RUNTIME} cannot read it")
        L = llama()
        params = L.llama_model_default_params()
        params.n_gpu_layers = 0  # the CPU build: a GPU build of llama.cpp is not made here
        # ggml's AMX buffer type (one of the "extra" ones) segfaults in its matrix product on
        # Q4_K weights on an AMX Xeon (ggml_backend_amx_mul_mat), so CPUs with AMX go without.
        params.use_extra_bufts = not cpu_has_amx()
        clear_log()
        model = L.llama_model_load_from_file(str(self.path).encode(), params)
        if not model:
            raise UserError(f"{self.path}: {RUNTIME} cannot load it: {last_error()}")
        self._L, self.ptr = L, model
        self.vocab = L.llama_model_get_vocab(model)
        self.vocab_size = int(L.llama_vocab_n_tokens(self.vocab))
        self.trained_context = int(L.llama_model_n_ctx_train(model))
        self.context_window = min(context, self.trained_context) if self.trained_context > 0 else context
        self.threads = threads or default_threads()
        self.stop_ids = frozenset(i for i in range(self.vocab_size) if L.llama_vocab_is_eog(self.vocab, i))
        buf = ctypes.create_string_buffer(256)
        L.llama_model_desc(model, buf, len(buf))
        self.description = buf.value.decode("utf-8", "replace")
        self.size_bytes = int(L.llama_model_size(model))
        self.architecture = self.meta("general.architecture") or "unknown"
        # Contexts of finished runs, cleared, for the next run to take (`lm.llamacpp_runtime.lm`): making
        # one allocates its whole KV cache, a noticeable share of a short run.
        self._idle: list[tuple] = []
        self._idle_lock = threading.Lock()

    def take_context(self) -> tuple | None:
        """An idle (context, batch) pair made on this model, or None."""
        with self._idle_lock:
            return self._idle.pop() if self._idle else None

    def give_context(self, pair: tuple) -> None:
        """Keep a cleared (context, batch) pair for the next run, or free it when enough are
        kept or the model is closed."""
        with self._idle_lock:
            if self.ptr and len(self._idle) < IDLE_CONTEXTS:
                self._idle.append(pair)
                return
        self._free_context(pair)

    def _free_context(self, pair: tuple) -> None:
        ctx, batch = pair
        self._L.llama_batch_free(batch)
        self._L.llama_free(ctx)

    def meta(self, key: str) -> str | None:
        buf = ctypes.create_string_buffer(512)
        n = self._L.llama_model_meta_val_str(self.ptr, key.encode(), buf, len(buf))
        return buf.value.decode("utf-8", "replace") if n >= 0 else None

    def tokenize(self, text: str, *, special: bool = True) -> list[int]:
        """llama.cpp's own tokenizer (no BOS added: the chat template carries its specials)."""
        L, data = self._L, text.encode("utf-8")
        cap = len(data) + 16
        out = (L.llama_token * cap)()
        n = L.llama_tokenize(self.vocab, data, len(data), out, cap, False, special)
        if n < 0:
            cap = -n
            out = (L.llama_token * cap)()
            n = L.llama_tokenize(self.vocab, data, len(data), out, cap, False, special)
        return list(out[:n])

    def close(self) -> None:
        if getattr(self, "ptr", None):
            with self._idle_lock:
                idle, self._idle = self._idle, []
            for pair in idle:
                self._free_context(pair)
            self._L.llama_model_free(self.ptr)
            self.ptr = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"LlamaCppModel({self.path.name}, {self.description})"
