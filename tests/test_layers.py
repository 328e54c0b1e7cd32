"""Imports flow one way, in the order of `ORDER`: models -> lm -> costs -> drafters -> engine
-> viz -> app -> workshop. No module imports a layer to its right (function-level imports
included). The leaves (`LEAVES`: events, settings, errors, theory, run_stats, choices,
cost_model, lazy, limits, yes_no, grammar) may be imported by any layer and import only leaves. The
workshop (bench, labs, production, head training, the lossless lab, the command line, and the
tabs, panels and tools that show them on the page) sits above the page: the page names its
parts in `app/parts.py` and never imports it.

Inside a layer no import runs back up either: a module does not import a module of a
subpackage of its own package (the generic its specialisations: `lm/` its runtimes, which
register with it instead), and a tab or panel does not import another (they reach each other
through the page). There is no import circle anywhere."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "specviz"
ORDER = ["models", "lm", "costs", "drafters", "engine", "viz", "app", "workshop"]
TOP = {"__main__", "__init__"}
LEAVES = {
    "events",
    "settings",
    "errors",
    "theory",
    "run_stats",
    "choices",
    "cost_model",
    "lazy",
    "limits",
    "yes_no",
    "grammar",
}


def layer(module: str) -> str:
    """The layer of `specviz.x.y` (its first part), or of a top-level module file."""
    return module.split(".")[1] if module.count(".") else "__init__"


def rank(part: str) -> int:
    if part in LEAVES:
        return -1
    if part in TOP:
        return len(ORDER)
    return ORDER.index(part)


def imports(path: Path, package: str | None = None) -> set[str]:
    """The specviz modules `path` imports; `package` resolves relative imports (default: the
    file's own package under specviz/)."""
    tree = ast.parse(path.read_text())
    found = set()
    package = package or ".".join(("specviz", *path.relative_to(ROOT).with_suffix("").parts[:-1]))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("specviz.")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                name = f"{base}.{node.module}" if node.module else base
            else:
                name = node.module or ""
            if name == "specviz":
                found |= {f"specviz.{a.name}" for a in node.names}
            elif name.startswith("specviz."):
                found.add(name)
                found |= {f"{name}.{a.name}" for a in node.names}  # a submodule, where one is named
    return found


def test_no_module_imports_a_layer_to_its_right():
    wrong = []
    for path in sorted(ROOT.rglob("*.py")):
        own = path.relative_to(ROOT).parts[0].removesuffix(".py")
        for name in imports(path):
            other = layer(name)
            if other == own:
                continue
            if rank(other) > rank(own) or (own in LEAVES and other not in LEAVES):
                wrong.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not wrong, "\n".join(wrong)


def test_every_package_has_a_layer():
    parts = {
        p.relative_to(ROOT).parts[0].removesuffix(".py") for p in ROOT.rglob("*.py") if "__pycache__" not in p.parts
    }
    unplaced = {p for p in parts if p not in ORDER and p not in TOP and p not in LEAVES}
    assert not unplaced, f"place these in the layer order of this test and docs/ARCHITECTURE.md: {unplaced}"


def test_the_checker_catches_a_backward_import(tmp_path):
    # The same walk over a module that breaks the rule must report it.
    bad = tmp_path / "probe.py"
    bad.write_text("def f():\n    from specviz.engine import start\n    from ..viz import text\n")
    found = imports(bad, package="specviz.drafters")
    assert found == {"specviz.engine", "specviz.engine.start", "specviz.viz", "specviz.viz.text"}
    assert all(rank(layer(name)) > rank("drafters") for name in found)


def _module_name(path: Path) -> str:
    parts = ("specviz", *path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of `graph` (module -> the modules it imports): each strongly
    connected group of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in list(graph):
        if v not in index:
            visit(v)
    return found


def import_graph() -> dict[str, set[str]]:
    """Every specviz module -> the specviz modules it imports (function-level imports included)."""
    paths = [p for p in ROOT.rglob("*.py") if "__pycache__" not in p.parts]
    modules = {_module_name(p) for p in paths}
    graph = {}
    for p in paths:
        own = _module_name(p)
        package = own if p.name == "__init__.py" else own.rsplit(".", 1)[0]
        graph[own] = {m for m in imports(p, package) if m in modules and m != own}
    return graph


def panel_modules() -> set[str]:
    """The modules that define a tab or a panel of the page (a subclass of `Tab` or `Panel`;
    app/tab.py, which defines the two, is not one)."""
    found = set()
    for p in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if (
                isinstance(node, ast.ClassDef)
                and node.name not in ("Tab", "Panel")
                and any(getattr(b, "id", getattr(b, "attr", None)) in ("Tab", "Panel") for b in node.bases)
            ):
                found.add(_module_name(p))
    return found


def running_back_up(graph: dict[str, set[str]], panels: set[str], packages: set[str]) -> list[str]:
    """The imports of `graph` that run back up inside a layer: a module of package P importing
    a module of a subpackage of P (the generic its specialisation; a package's `__init__`, its
    face, may name its own parts), and a tab or panel module importing another."""
    wrong = []
    for own, found in graph.items():
        package = own if own in packages else own.rsplit(".", 1)[0]
        for other in sorted(found):
            deeper = own not in packages and package != "specviz" and other.startswith(package + ".")
            if deeper and other.rsplit(".", 1)[0] != package:
                wrong.append(f"{own} imports {other}, in a subpackage of its own package")
            elif own in panels and other in panels:
                wrong.append(f"{own} imports {other}: a tab or panel importing another")
    return wrong


def test_no_import_runs_back_up_and_there_is_no_circle():
    # Function-level imports count: a circle broken only by importing late is still one.
    graph = import_graph()
    packages = {_module_name(p) for p in ROOT.rglob("__init__.py")}
    back = running_back_up(graph, panel_modules(), packages)
    circles = cycles(graph)
    print(f"imports running back up inside a layer: {len(back)}; import circles: {len(circles)}")
    assert back == [], "\n".join(back)
    assert circles == []


def test_the_back_up_finder_finds_a_specialisation_and_a_tab_importing_another():
    graph = {
        "specviz.lm.runtime": {"specviz.lm.torch_runtime.lean", "specviz.lm.rows"},
        "specviz.lm.torch_runtime.lean": {"specviz.lm.runtime"},
        "specviz.lm": {"specviz.lm.torch_runtime.loader"},
        "specviz.app.inspector": {"specviz.app.live", "specviz.app.tab"},
        "specviz.app.live": {"specviz.app.tab"},
        "specviz.__main__": {"specviz.workshop.cli"},
    }
    packages = {"specviz", "specviz.lm", "specviz.lm.torch_runtime", "specviz.app"}
    assert running_back_up(graph, {"specviz.app.inspector", "specviz.app.live"}, packages) == [
        "specviz.lm.runtime imports specviz.lm.torch_runtime.lean, in a subpackage of its own package",
        "specviz.app.inspector imports specviz.app.live: a tab or panel importing another",
    ]


def test_the_page_and_its_drawing_never_import_the_workshop():
    """The page reaches the workshop's tabs, panels and tools only by name (`app/parts.py`)."""
    wrong = [
        f"{path.relative_to(ROOT)} imports {name}"
        for part in ("app", "viz")
        for path in sorted((ROOT / part).rglob("*.py"))
        for name in imports(path)
        if name == "specviz.workshop" or name.startswith("specviz.workshop.")
    ]
    assert not wrong, "\n".join(wrong)
    named = (ROOT / "app" / "parts.py").read_text()
    assert "specviz.workshop." in named  # and it does name them there


def test_the_circle_finder_finds_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


MAX_FUNCTION_LINES = 60


def long_functions(path: Path, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """The functions of a module longer than `limit` lines, from `def` to their last line."""
    tree = ast.parse(path.read_text())
    return [
        f"{path.name}:{n.lineno} {n.name} ({n.end_lineno - n.lineno + 1} lines)"
        for n in ast.walk(tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > limit
    ]


def test_no_function_is_longer_than_a_screen():
    long = [f for p in sorted(ROOT.rglob("*.py")) if "__pycache__" not in p.parts for f in long_functions(p)]
    assert not long, "split these:\n" + "\n".join(long)


def test_the_length_check_finds_a_long_function(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def short():\n    pass\n\n\ndef long():\n" + "    x = 1\n" * 61)
    assert long_functions(probe) == ["probe.py:5 long (62 lines)"]


def test_one_round_reads_through_at_most_15_files_that_exist():
    """docs/ARCHITECTURE.md opens with the files a newcomer reads to follow one round."""
    import re

    doc = (ROOT.parent / "docs" / "ARCHITECTURE.md").read_text()
    section = doc.split("## One round, file by file", 1)[1].split("\n## ", 1)[0]
    files = re.findall(r"`(specviz/[\w/]+\.py)`", section)
    assert 10 <= len(set(files)) <= 15 + 1  # the pass itself names one file per runtime
    missing = [f for f in files if not (ROOT.parent / f).is_file()]
    assert not missing, missing
