"""Every name the scripts, app.py and the tests import from specviz exists: a rename that
leaves a script behind fails here, not when someone next runs the script."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted([*ROOT.glob("scripts/*.py"), *ROOT.glob("tests/*.py"), ROOT / "app.py"])


def _imported(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, module, name) of each `from specviz... import name` and `import specviz...`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "specviz":
            found += [(node.lineno, node.module, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name, None) for a in node.names if a.name.split(".")[0] == "specviz"]
    return found


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_what_a_file_imports_from_specviz_exists(path: Path):
    missing = []
    for line, module, name in _imported(path):
        mod = importlib.import_module(module)
        if name is not None and not hasattr(mod, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ModuleNotFoundError:
                missing.append(f"line {line}: {module}.{name}")
    assert not missing, missing


def test_a_missing_name_is_caught(tmp_path: Path):
    script = tmp_path / "old.py"
    script.write_text("from specviz.lm.tree import TreeLM\nfrom specviz.engine import run\n")
    assert _imported(script) == [(1, "specviz.lm.tree", "TreeLM"), (2, "specviz.engine", "run")]
    with pytest.raises(AssertionError, match="specviz.lm.tree.TreeLM"):
        test_what_a_file_imports_from_specviz_exists(script)
