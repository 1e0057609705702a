"""Closed forms and exact computations behind the papers' claims.

Submodules: ``dars`` (cumulative advantage), ``brorl`` (mass balance), ``sign_flip``
(MC-GRPO sign flips), and more. Names are loaded lazily so each submodule stays independent.
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    "cumulative_advantage": "dars",
    "expected_cumulative_advantage": "dars",
    "mass_balance": "brorl",
    "sign_flip_probability": "sign_flip",
}


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_EXPORTS))
