"""The fast tier's list of what it leaves out (tests/conftest.py) names files and tests that
exist: a renamed test would otherwise drop out of the list unseen and slow the inner loop."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import SLOW, SLOW_TESTS

HERE = Path(__file__).parent


def test_every_slow_file_and_test_exists():
    assert all((HERE / name).is_file() for name in SLOW), sorted(n for n in SLOW if not (HERE / n).is_file())
    for entry in SLOW_TESTS:
        file, test = entry.split("::")
        tree = ast.parse((HERE / file).read_text())
        names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert test in names, entry
        assert file not in SLOW, f"{entry}: its whole file is already slow"
