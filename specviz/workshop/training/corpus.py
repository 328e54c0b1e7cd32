"""The training text: Python source of the packages installed here, read locally.

Never this project's own files (its bench prompts and the text its tests check live there):
only the standard library's and site-packages' `.py` files outside `specviz`, in an order
fixed by the seed, each file cut into windows of whole tokens (`windows`), and requests made
from the documented functions in them (`requests`), which the target answers itself.
"""

from __future__ import annotations

import ast
import random
import sysconfig
from collections.abc import Iterator
from pathlib import Path

DESCRIPTION = "Python source of the installed packages (standard library and site-packages, not specviz)"
# Files larger than this are mostly data (tables, generated code): skipped.
MAX_FILE_BYTES = 200_000
MIN_FILE_BYTES = 500


def source_files(seed: int = 0, roots: list[Path] | None = None) -> list[Path]:
    """Every `.py` file under the standard library and site-packages (or `roots`), outside
    `specviz`, shuffled by `seed`."""
    if roots is None:
        paths = sysconfig.get_paths()
        roots = sorted({Path(paths[k]) for k in ("stdlib", "purelib", "platlib") if k in paths})
    files = sorted(
        {
            p
            for r in roots
            if r.is_dir()
            for p in r.rglob("*.py")
            if "specviz" not in p.parts and MIN_FILE_BYTES <= _size(p) <= MAX_FILE_BYTES
        }
    )
    random.Random(seed).shuffle(files)
    return files


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def windows(files: list[Path], tokenizer, window: int) -> Iterator[tuple[str, list[int]]]:
    """(file name, token ids) windows of `window` tokens (a file's last shorter piece too, if
    it holds at least a quarter of a window), file after file. Every other window is read as a
    chat answer (`as_answer`): the target's states inside its own replies differ from those in
    a bare file, and reading is several times faster than writing answers."""
    n = 0
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        for lo in range(0, len(ids), window):
            piece = ids[lo : lo + window]
            if len(piece) >= max(8, window // 4):
                n += 1
                yield str(path), as_answer(tokenizer, path, piece) if n % 2 and tokenizer.chat_template else piece


def as_answer(tokenizer, path: Path, piece: list[int]) -> list[int]:
    """`piece` as the assistant's reply, in a code block, to a request for the file's code."""
    ask = [{"role": "user", "content": f"Show me the code of {path.name}."}]
    lead = tokenizer.apply_chat_template(ask, add_generation_prompt=True, tokenize=True)
    if not isinstance(lead, list):  # a BatchEncoding in some versions
        lead = lead["input_ids"]
    return list(lead) + tokenizer("Here it is:\n```python\n", add_special_tokens=False)["input_ids"] + piece


def requests(files: list[Path]) -> Iterator[str]:
    """A chat request per documented function of the files, in the files' order: write a
    function with its name, arguments and the first line of its docstring."""
    for path in files:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
                continue
            doc = (ast.get_docstring(node) or "").strip().split("\n")[0].strip()
            if len(doc) < 12:
                continue
            args = ", ".join(a.arg for a in node.args.args)
            yield f"Write a Python function `{node.name}({args})`: {doc}"
