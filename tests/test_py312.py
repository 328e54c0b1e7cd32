"""The code behaves alike on Python 3.11 (these machines) and 3.12 (a ZeroGPU Space).

3.12 cannot be installed here, so the code is read instead: no module that 3.12 removed, no
call that 3.12 removed or turned into a warning, and no branch on the running version (which
would make 3.12 run code that no test here runs). scripts/check_py312.py checks the other half:
that every pinned package installs on CPython 3.12.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
REMOVED_MODULES = {"distutils", "imp", "asynchat", "asyncore", "smtpd"}
# Attribute names 3.12 removed, or deprecated with a warning a test run here would not see.
CHANGED_CALLS = {
    "utcnow": "datetime.utcnow() warns on 3.12: use datetime.now(timezone.utc)",
    "utcfromtimestamp": "datetime.utcfromtimestamp() warns on 3.12: use fromtimestamp(t, timezone.utc)",
    "get_event_loop": "asyncio.get_event_loop() without a running loop warns on 3.12: use get_running_loop()",
    "wrap_socket": "ssl.wrap_socket() is gone in 3.12: use SSLContext.wrap_socket()",
    "SafeConfigParser": "configparser.SafeConfigParser is gone in 3.12",
    "ImpImporter": "pkgutil.ImpImporter is gone in 3.12",
    "getdefaultlocale": "locale.getdefaultlocale() warns on 3.12",
    "assertEquals": "unittest's assertEquals alias is gone in 3.12",
}


def findings(source: str, name: str = "<code>") -> list[str]:
    """What in `source` would behave differently on 3.12, one line each."""
    out = []
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.Import):
            mods = [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mods = [(node.module or "").split(".")[0]]
        else:
            mods = []
        out += [f"{name}:{node.lineno}: imports {m}, removed in 3.12" for m in mods if m in REMOVED_MODULES]
        if isinstance(node, ast.Attribute) and node.attr in CHANGED_CALLS:
            out.append(f"{name}:{node.lineno}: {CHANGED_CALLS[node.attr]}")
        if isinstance(node, ast.Attribute) and node.attr == "version_info":
            out.append(f"{name}:{node.lineno}: branches on sys.version_info (3.12 would run what no test here runs)")
    return out


def project_files() -> list[Path]:
    return [REPO / "app.py", *sorted((REPO / "specviz").rglob("*.py")), *sorted((REPO / "scripts").glob("*.py"))]


def test_no_code_that_behaves_differently_on_python_312():
    found = [f for path in project_files() for f in findings(path.read_text(), str(path.relative_to(REPO)))]
    assert not found, "\n".join(found)


def test_the_reader_finds_each_kind_of_difference():
    sample = (
        "import distutils.util\nfrom asyncore import loop\nimport sys\n"
        "x = datetime.datetime.utcnow()\nif sys.version_info >= (3, 12): pass\n"
    )
    got = findings(sample)
    assert len(got) == 4, got
    assert any("distutils" in f for f in got) and any("asyncore" in f for f in got)
    assert any("utcnow" in f for f in got) and any("version_info" in f for f in got)
