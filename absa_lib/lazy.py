"""Names a package imports when first asked for (PEP 562), so that importing it stays light: ``absa --help``
and the run_all driver load no torch."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_names(package: str, where: dict[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package``: ``where`` maps each name to the submodule defining it."""

    def __getattr__(name: str):
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{where[name]}"), name)
        vars(importlib.import_module(package))[name] = value      # looked up once
        return value

    return __getattr__
