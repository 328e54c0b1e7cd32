"""The core's budget: the algorithm a round runs (the engine's round, the drafters, the model
interface and sampling, the cost model and theory) stays small enough to read whole. It is
`CORE` below, its line and statement counts are printed, and it may not pass `BUDGET` lines:
new features grow the workshop and the page instead (docs/ARCHITECTURE.md, "The core and its
budget")."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The core, once: every file a round's algorithm is written in.
CORE = (
    "specviz/engine/*.py",
    "specviz/drafters/*.py",
    "specviz/lm/runtime.py",
    "specviz/lm/sampling.py",
    "specviz/cost_model.py",
    "specviz/theory.py",
)
BUDGET = 4_800  # lines


def core_files(root: Path = ROOT) -> list[Path]:
    return sorted({p for pattern in CORE for p in root.glob(pattern)})


def counts(paths: list[Path]) -> tuple[int, int]:
    """(lines, statements) of `paths`: every line of each file, and every statement at any
    depth that is not a docstring."""
    lines = statements = 0
    for path in paths:
        text = path.read_text()
        lines += len(text.splitlines())
        for node in ast.walk(ast.parse(text)):
            docstring = (
                isinstance(node, ast.Expr)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            )
            statements += isinstance(node, ast.stmt) and not docstring
    return lines, statements


def test_the_core_stays_within_its_budget():
    files = core_files()
    lines, statements = counts(files)
    print(f"core: {len(files)} files, {lines:,} lines, {statements:,} statements (budget {BUDGET:,} lines)")
    assert lines <= BUDGET, (
        f"the core holds {lines:,} lines, over its budget of {BUDGET:,}: move what a round does not run out"
    )


def test_the_core_is_every_file_it_names_and_the_counts_count(tmp_path):
    assert {p.relative_to(ROOT).as_posix() for p in core_files()} >= {
        "specviz/engine/verify.py",
        "specviz/drafters/cost_aware.py",
        "specviz/lm/runtime.py",
        "specviz/theory.py",
    }
    assert not any("workshop" in p.parts or "app" in p.parts for p in core_files())
    probe = tmp_path / "probe.py"
    probe.write_text('"""Doc."""\n\n\ndef f(x):\n    """Doc."""\n    if x:\n        return 1\n    return 2\n')
    assert counts([probe]) == (8, 4)  # def, if, two returns; the docstrings are not statements
