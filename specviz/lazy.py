"""Names a package exports but imports only on first use, so that `python -m specviz ... --help`
and reading a package's docstring do not wait for torch."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_exports(package: str, names: dict[str, str]) -> Callable[[str], object]:
    """A module `__getattr__` for `package` that imports each of `names` (name -> module) when it is read."""

    def __getattr__(name: str):
        if name in names:
            return getattr(importlib.import_module(names[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
