"""A GGUF file loaded by llama.cpp as it is (its own quantisation, no conversion).

`LlamaCppModel` holds the llama.cpp model and the contexts (each with its KV cache) made on
it: it lends one to each run's `lm.llamacpp_runtime.lm.LlamaCppLM`, one a finished run gave
back where there is one, and frees them. llama.cpp reports a
failed load as a NULL model and a log line (`library.last_error`): the message names the
file, the runtime and llama.cpp's own reason in one line.

llama.cpp aborts the whole process on a failed internal assertion, so nothing reaches it
unchecked: the file must exist and start as a GGUF does, and `lm.llamacpp_runtime.lm` checks every
batch before decoding it.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from pathlib import Path

from specviz.choices import LLAMACPP
from specviz.models.errors import MissingModelError
from specviz.errors import UserError
from specviz.lm.llamacpp_runtime.library import (
    build_kind,
    clear_log,
    default_threads,
    extra_buffer_types,
    last_error,
    llama,
    version,
)
from specviz.lm.llamacpp_runtime.lm import BATCH, SEQUENCES, LlamaCppLM

# Positions a context is made with unless the model's own window is smaller.
DEFAULT_CONTEXT = 4096
# Cleared contexts a model keeps for later runs (about the runs at once on one page), each
# with its whole KV cache allocated; one unused for IDLE_S is freed at the next take or give.
IDLE_CONTEXTS = 4
IDLE_S = 300.0


class LlamaCppModel:
    """One GGUF file in llama.cpp. `vocab_size` is its logits row width, `context_window`
    the positions a context made on it holds, `stop_ids` its end-of-generation tokens."""

    runtime = LLAMACPP

    def __init__(self, path: str | os.PathLike, *, threads: int | None = None, context: int = DEFAULT_CONTEXT):
        self.path = Path(path)
        if not self.path.is_file():
            raise MissingModelError(f"{self.path}: no such GGUF file (runtime {LLAMACPP})")
        with open(self.path, "rb") as f:
            if f.read(4) != b"GGUF":
                raise UserError(f"{self.path}: not a GGUF file, so {LLAMACPP} cannot read it")
        L = llama()
        params = L.llama_model_default_params()
        params.n_gpu_layers = 0  # the CPU build: a GPU build of llama.cpp is not made here
        # ggml's AMX buffer type segfaults on Q4_K weights on an AMX Xeon: see library.py.
        params.use_extra_bufts = extra_buffer_types()
        clear_log()
        model = L.llama_model_load_from_file(str(self.path).encode(), params)
        if not model:
            raise UserError(f"{self.path}: {LLAMACPP} cannot load it: {last_error()}")
        self._L, self.ptr = L, model
        self.vocab = L.llama_model_get_vocab(model)
        self.vocab_size = int(L.llama_vocab_n_tokens(self.vocab))
        self.trained_context = int(L.llama_model_n_ctx_train(model))
        self.context_window = min(context, self.trained_context) if self.trained_context > 0 else context
        self.threads = threads or default_threads()
        self.stop_ids = frozenset(i for i in range(self.vocab_size) if L.llama_vocab_is_eog(self.vocab, i))
        self.description = _text(lambda buf, size: L.llama_model_desc(model, buf, size), 256)
        self.size_bytes = int(L.llama_model_size(model))
        # Contexts of finished runs, cleared, for the next run to take (`lm.llamacpp_runtime.lm`): making
        # one allocates its whole KV cache, a noticeable share of a short run.
        self._idle: list[tuple] = []  # (context, batch, when it was given back)
        self._idle_lock = threading.Lock()
        self._lent = 0  # contexts out with an LM: the model is freed only once they are back
        self._closing = False

    @property
    def precision(self) -> str:
        """The file's own quantisation: "Q4_K - Medium" from "qwen2 1.5B Q4_K - Medium"."""
        return self.description.split(" ", 2)[-1]

    def open_lm(self):
        """A fresh `LlamaCppLM` (a context with its KV cache) on this model."""
        return LlamaCppLM(self)

    def cost_facts(self) -> dict:
        return {
            "llama-cpp-python": version(),
            "build": build_kind(),
            "file": [str(self.path), self.path.stat().st_size],
            "threads": self.threads,
        }

    def lend_context(self) -> tuple:
        """A (context, batch) pair for an LM: an idle one, or a new one; given back by
        `give_context`. Refused once the model is closed (unloaded to free memory)."""
        with self._idle_lock:
            self._check_open()
            self._lent += 1
            pair = self._idle.pop()[:2] if self._idle else None
        if pair is None:
            try:
                pair = self._new_context()
            except BaseException:
                self._back()
                raise
        self.release_idle()
        return pair

    def _new_context(self) -> tuple:
        L = self._L
        params = L.llama_context_default_params()
        params.n_ctx = self.context_window
        params.n_batch = params.n_ubatch = BATCH
        params.n_seq_max = SEQUENCES
        params.kv_unified = True
        params.n_threads = params.n_threads_batch = self.threads
        params.no_perf = True
        ctx = L.llama_init_from_model(self.ptr, params)
        if not ctx:
            raise UserError(f"{self.path}: {LLAMACPP} could not make a context: {last_error()}")
        return ctx, L.llama_batch_init(BATCH, 0, SEQUENCES)

    def give_context(self, pair: tuple, *, reuse: bool = True) -> None:
        """Keep a cleared (context, batch) pair for the next run, or free it when enough are
        kept, it is not to be reused (an aborted decode's), or the model is closing."""
        with self._idle_lock:
            keep = reuse and not self._closing and len(self._idle) < IDLE_CONTEXTS
            if keep:
                self._idle.append((*pair, time.monotonic()))
        if not keep:
            self._free_context(pair)
        self._back()
        self.release_idle()

    def release_idle(self, older_than_s: float = IDLE_S) -> int:
        """Free the idle contexts unused for `older_than_s` seconds (0: all); how many were freed."""
        now = time.monotonic()
        with self._idle_lock:
            old = [p for p in self._idle if now - p[2] >= older_than_s]
            self._idle = [p for p in self._idle if now - p[2] < older_than_s]
        for p in old:
            self._free_context(p[:2])
        return len(old)

    def _back(self) -> None:
        """A lent context is back (or was never made): free the model if it is closing and none is out."""
        with self._idle_lock:
            self._lent -= 1
            last = self._closing and self._lent == 0
        if last:
            self._free_model()

    def _free_context(self, pair: tuple) -> None:
        ctx, batch = pair
        self._L.llama_batch_free(batch)
        self._L.llama_free(ctx)

    def tokenize(self, text: str, *, special: bool = True) -> list[int]:
        """llama.cpp's own tokenizer (no BOS added: the chat template carries its specials)."""
        self._check_open()
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
        """Free the model and its idle contexts; with contexts still out (a run finishing its
        pass), the model goes when the last comes back. No context is lent after this."""
        if not getattr(self, "ptr", None):
            return
        with self._idle_lock:
            self._closing = True
            free_now = self._lent == 0
        self.release_idle(0.0)
        if free_now:
            self._free_model()

    @property
    def closed(self) -> bool:
        return self._closing or not self.ptr

    def _check_open(self) -> None:
        if self.closed:
            raise UserError(f"{self.path.name} was unloaded to free memory: run again to load it")

    def _free_model(self) -> None:
        with self._idle_lock:
            ptr, self.ptr = self.ptr, None
        if ptr:
            self._L.llama_model_free(ptr)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"LlamaCppModel({self.path.name}, {self.description})"


def _text(write, size: int) -> str | None:
    """The string a llama.cpp function writes into a buffer: `write(buffer, size)` returns its
    length, negative where there is none."""
    buf = ctypes.create_string_buffer(size)
    return buf.value.decode("utf-8", "replace") if write(buf, size) >= 0 else None
