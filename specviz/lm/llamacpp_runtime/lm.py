"""The llama.cpp runtime's `lm.runtime.LM`: one llama.cpp context with its KV cache.

Through llama-cpp-python's classic batch API: a `llama_batch` with a logits flag per token,
`llama_decode`, the logits rows of the flagged tokens, `llama_memory_seq_rm` for a crop.

A tree is sequence membership, as in llama.cpp's own lookahead example. The context is
sequence 0. Tree node j is sequence j + 1: before the pass its sequence is copied from the
sequence of its nearest ancestor already cached (or from the context), which makes the
cached cells it may see carry its id; in the batch its token carries its own id first (the
one its attention is masked by) and the ids of its descendants in the same batch, so they
see it. Positions are context + depth. Keeping a path adds sequence 0 to the path's cells
and removes every node's sequence: cells that belong to no sequence are free, and the cache
is what a chain over the path would have left. The cache is unified (`kv_unified`), so
copying a sequence shares cells instead of copying them.

llama.cpp aborts the process on a bad sequence id, position or token, so `_check` tests
each batch before `llama_decode`, and a non-zero return becomes an error that says why.

A prompt goes in batches of BATCH tokens with the run's stop check between them, and a long
batch can be aborted while it runs (`abort`); an aborted decode leaves the KV cache partly
written, so the LM is spent: its context is freed when it closes, never given to another run.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from specviz.errors import UserError
from specviz.choices import LLAMACPP
from specviz.lm import interrupt
from specviz.lm.tree import OpenTrees
from specviz.lm.llamacpp_runtime.abort import abortable
from specviz.lm.llamacpp_runtime.library import clear_log, last_error

# Sequence ids a context can hold: the context's own and one per node of an open tree.
SEQUENCES = 256
# Tokens one decode may take (a prompt goes in chunks of this size; a tree in one).
BATCH = 512


class LlamaCppLM(OpenTrees):
    runtime = loop = LLAMACPP

    def __init__(self, model):
        """`model`: a `llamacpp_runtime.model.LlamaCppModel`."""
        L = model._L
        self._L, self.model = L, model
        self.device = torch.device("cpu")
        self.vocab_size = model.vocab_size
        self._ctx, self._batch = model.lend_context()
        self._cells = int(L.llama_n_ctx(self._ctx))
        self._mem = L.llama_get_memory(self._ctx)
        self._spent = False  # a decode was aborted: the cache holds a part of a batch
        self.length = 0
        self._width = int(L.llama_model_n_embd(model.ptr))
        self._features = False  # llama.cpp returns the hidden states too (`keep_features`)
        self.features: torch.Tensor | None = None  # (n_kept, hidden) of the last pass, once kept

    # -- the interface ------------------------------------------------------------------

    def keep_features(self) -> None:
        """Keep each pass's final hidden states (after the output norm, what the LM head reads)
        in `features`: llama.cpp's embeddings of the flagged tokens, with no pooling (switched
        on for each decode that keeps rows, in `_decode`)."""
        self._features = True

    def reset(self) -> None:
        self._L.llama_memory_clear(self._mem, True)
        self._tree = None
        self.length = 0

    def crop(self, length: int) -> None:
        if self._tree is not None:
            self._drop(self._tree)
            self._tree = None
        if length < self.length:
            self._L.llama_memory_seq_rm(self._mem, 0, length, -1)
            self.length = max(0, length)

    def feed(self, ids: torch.Tensor, keep: int = 1) -> torch.Tensor:
        if self._tree is not None:
            raise RuntimeError("a tree is open: keep a path or crop before feeding a chain")
        toks = [int(t) for t in ids.reshape(-1).tolist()]
        n = len(toks)
        first_kept = 0 if keep <= 0 else max(0, n - keep)
        self._check_room(n)
        rows = []
        # Batches of BATCH tokens; with hidden states kept, the kept tail goes in a batch of its
        # own, since llama.cpp then reads out every token of a batch (the LM head over a whole prompt).
        cuts = sorted({*range(0, n, BATCH), *([first_kept] if self._features and 0 < first_kept < n else [])}) + [n]
        for lo, hi in zip(cuts, cuts[1:]):
            if lo:
                interrupt.check_now()
            chunk = toks[lo:hi]
            seqs = [(0,)] * len(chunk)
            positions = [self.length + i for i in range(len(chunk))]
            flags = [lo + i >= first_kept for i in range(len(chunk))]
            out = self._decode(chunk, positions, seqs, flags)
            self.length += len(chunk)
            if out is not None:
                rows.append(out)
        if not rows:
            return torch.empty(0, self.vocab_size)
        return torch.from_numpy(rows[0] if len(rows) == 1 else np.concatenate(rows))

    def _feed_nodes(self, tree, tokens: torch.Tensor, every: list[int], positions: list[int]) -> torch.Tensor:
        old, n = len(tree), len(positions)
        if 1 + old + n > SEQUENCES:
            raise UserError(
                f"a tree of {old + n} nodes is more than the {SEQUENCES - 1} the {LLAMACPP} runtime holds at once"
            )
        if n > BATCH:
            raise UserError(f"{n} tree nodes in one pass: the {LLAMACPP} runtime takes at most {BATCH}")
        self._check_room(n)
        seqs: list[list[int]] = [[1 + old + i] for i in range(n)]
        for i in range(n):
            j, a = old + i, every[old + i]
            while a >= old:  # ancestors in this batch also carry j's sequence
                seqs[a - old].append(1 + j)
                a = every[a]
            self._L.llama_memory_seq_cp(self._mem, 0 if a < 0 else 1 + a, 1 + j, -1, -1)
        toks = [int(t) for t in tokens.reshape(-1).tolist()]
        out = self._decode(toks, positions, [tuple(s) for s in seqs], [True] * n)
        self.length += n
        return torch.from_numpy(out)

    def keep_path(self, path: Sequence[int]) -> None:
        tree, path = self.close_tree(path)
        if path:  # the path's cells join the context's sequence
            self._L.llama_memory_seq_cp(self._mem, 1 + path[-1], 0, tree.context_len, -1)
        self._drop(tree)
        self.length = tree.context_len + len(path)

    # -- llama.cpp ------------------------------------------------------------------------

    def _drop(self, tree) -> None:
        """Free the cells of `tree`'s nodes; the cache holds the context it was opened at."""
        for j in range(len(tree)):
            self._L.llama_memory_seq_rm(self._mem, 1 + j, -1, -1)
        self.length = tree.context_len

    def _check_room(self, n: int) -> None:
        if self.length + n > self._cells:
            raise UserError(
                f"{self.model.path.name}: {self.length + n:,} positions are more than the {self._cells:,}-token context "
                f"of the {LLAMACPP} runtime"
            )

    def _check(self, toks: list[int], positions: list[int], seqs: list[tuple[int, ...]]) -> None:
        """What llama.cpp would otherwise abort on: bad ids, sequences, positions."""
        if not toks or len(toks) > BATCH:
            raise ValueError(f"a batch takes 1 to {BATCH} tokens, not {len(toks)}")
        bad = [t for t in toks if not 0 <= t < self.vocab_size]
        if bad:
            raise UserError(f"token id {bad[0]} is outside {self.model.path.name}'s vocabulary of {self.vocab_size:,}")
        for s in seqs:
            if not s or any(not 0 <= q < SEQUENCES for q in s):
                raise ValueError(f"sequence ids {s} outside 0..{SEQUENCES - 1}")
        if any(not 0 <= p < self._cells for p in positions):
            raise ValueError(f"positions {min(positions)}..{max(positions)} outside the context of {self._cells}")

    def _decode(self, toks, positions, seqs, flags) -> np.ndarray | None:
        """One llama_decode; the logits rows of the flagged tokens, (n_flagged, V), or None."""
        self._check(toks, positions, seqs)
        b = self._batch
        for i, (t, p, s, f) in enumerate(zip(toks, positions, seqs, flags)):
            b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = t, p, len(s), f
            for k, q in enumerate(s):
                b.seq_id[i][k] = q
        b.n_tokens = len(toks)
        if self._spent:
            raise RuntimeError("this context's last decode was aborted: its run has ended")
        if self._features:  # hidden states only where rows are kept (see `feed`)
            self._L.llama_set_embeddings(self._ctx, any(flags))
        clear_log()
        with abortable(self._L, self._ctx, interrupt.current(), len(toks)) as aborted:
            rc = self._L.llama_decode(self._ctx, b)
            reason = aborted() if rc == 2 else ""
        if reason:
            self._spent = True
            raise interrupt.Interrupted(reason)
        if rc != 0:
            why = "no room left in its KV cache" if rc == 1 else f"llama_decode returned {rc}: {last_error()}"
            raise UserError(f"{self.model.path.name}: the {LLAMACPP} runtime could not run this pass: {why}")
        kept = [i for i, f in enumerate(flags) if f]
        if not kept:
            return None
        # llama.cpp outputs the flagged tokens' rows; with hidden states on, every token's.
        out, rows = (len(toks), kept) if self._features else (len(kept), slice(None))
        if self._features:
            embd = np.ctypeslib.as_array(self._L.llama_get_embeddings(self._ctx), shape=(out, self._width))
            self.features = torch.from_numpy(embd[rows].copy())
        return np.ctypeslib.as_array(self._L.llama_get_logits(self._ctx), shape=(out, self.vocab_size))[rows].copy()

    def close(self) -> None:
        """Give the context back to the model, cleared, for the next run; a spent one is freed."""
        if getattr(self, "_ctx", None):
            pair, self._ctx = (self._ctx, self._batch), None
            if self._features:  # the next run's context starts as any other
                self._L.llama_set_embeddings(pair[0], False)
            if self._spent:
                self.model.give_context(pair, reuse=False)
                return
            self._L.llama_memory_clear(self._mem, True)
            self.model.give_context(pair)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
