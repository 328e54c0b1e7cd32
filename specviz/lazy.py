"""Names imported only on first use, so that `python -m specviz ... --help` and reading a
package's docstring do not wait for torch: a package's exports (`lazy_exports`), and the
"module:attr" names registries hold (`named`: the choices' factories, the page's tabs, panels
and tools)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def named(name: str) -> Any:
    """What a "module:attr" name names, its module imported now."""
    module, _, attr = name.partition(":")
    return getattr(importlib.import_module(module), attr)


def lazy_exports(package: str, names: dict[str, str]) -> Callable[[str], object]:
    """A module `__getattr__` for `package` that imports each of `names` (name -> module) when it is read."""

    def __getattr__(name: str):
        if name in names:
            return getattr(importlib.import_module(names[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
