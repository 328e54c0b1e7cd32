"""The edits an answer made to the text it copies, made again where the copy meets that text.

An edit request repeats one change through a text (a name renamed everywhere, a quote style).
Where a copy broke off and picked up again after a few source tokens, the answer replaced
them: that substitution (the source tokens, alone as its key; the answer's own tokens, so
their tokenization is kept) is made wherever a later copy meets the same tokens. Insertions,
with no source tokens to key on, are not learnt. A substitution whose first token the target
checks and rejects is forgotten: that edit was one place's, not the text's."""

from __future__ import annotations

from typing import Callable, Sequence

MAX_EDIT = 8  # the most tokens an edit replaces, and the most it writes
MAX_EDITS = 64  # substitutions kept; the oldest goes first

Key = tuple[int, ...]  # the source tokens replaced
Read = tuple[list[int], list[int], list[tuple[int, Key]]]  # tokens, their sources, where each edit begins
Reader = Callable[[int, int, int], Read]  # (document, index, depth) -> a read along it


class CopyEdits:
    def __init__(self):
        self.subs: dict[Key, tuple[int, ...]] = {}  # key -> what the answer wrote instead
        self._offered: list[tuple[int, int, Key]] = []  # the last proposal's (node, parent, key) beginning an edit

    def learn(self, replaced: Sequence[int], written: Sequence[int]) -> None:
        """The answer wrote `written` where the source had `replaced`."""
        key, value = tuple(int(t) for t in replaced), tuple(int(t) for t in written)
        if 1 <= len(key) <= MAX_EDIT and len(value) <= MAX_EDIT and key != value:
            self.subs.pop(key, None)
            self.subs[key] = value
            while len(self.subs) > MAX_EDITS:
                del self.subs[next(iter(self.subs))]

    def read(self, doc: Sequence[int], at: int, depth: int) -> Read:
        """Up to `depth` tokens read along `doc` from `at`, the substitutions made: the tokens,
        the source index each stands for (a written one: the last token it replaced), and
        (index, key) where each substitution begins."""
        if not self.subs:  # a plain copy
            piece = doc[at : at + depth]
            tokens = piece.tolist() if hasattr(piece, "tolist") else [int(t) for t in piece]
            return tokens, list(range(at, at + len(tokens))), []
        tokens, sources, begins = [], [], []
        p = at
        while len(tokens) < depth and p < len(doc):
            key = self._key_at(doc, p)
            if key is None:
                tokens.append(int(doc[p]))
                sources.append(p)
                p += 1
                continue
            begins.append((len(tokens), key))
            tokens.extend(self.subs[key])
            sources.extend([p + len(key) - 1] * len(self.subs[key]))
            p += len(key)
        return tokens[:depth], sources[:depth], [(i, key) for i, key in begins if i < depth]

    def _key_at(self, doc: Sequence[int], p: int) -> Key | None:
        """The longest substitution whose source tokens start at `p`."""
        found = None
        for key in self.subs:
            if key[0] == doc[p] and p + len(key) <= len(doc) and (found is None or len(key) > len(found)):
                if all(int(doc[p + j]) == key[j] for j in range(1, len(key))):
                    found = key
        return found

    def offered(self, begins: Sequence[tuple[int, int, Key]]) -> None:
        """The round verifies these nodes (node, its parent, key) where a substitution begins."""
        self._offered = list(begins)

    def heard(self, path: Sequence[int]) -> None:
        """The target accepted `path` (node indices) of the last proposal."""
        on_path = set(path)
        for node, parent, key in self._offered:
            if (parent < 0 or parent in on_path) and node not in on_path:  # checked, rejected
                self.subs.pop(key, None)
        self._offered = []
