"""Lazy re-exports for packages whose submodules stay independent of each other."""
from __future__ import annotations

import importlib


def lazy_exports(package: str, exports: dict[str, str], namespace: dict):
    """``(__getattr__, __dir__)`` for ``package``: ``exports`` maps a name to its submodule."""

    def __getattr__(name):
        if name in exports:
            return getattr(importlib.import_module(f"{package}.{exports[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted(list(namespace) + list(exports))

    return __getattr__, __dir__
