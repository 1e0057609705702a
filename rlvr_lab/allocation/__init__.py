"""Rollout-budget allocators: how many rollouts each prompt of a batch gets.

Submodules: ``dars`` (DARS equal-treatment / hardness-weighted schedules), ``cures`` (Neyman
allocation from per-prompt gradient scale), ``e3`` (rank-based allocation). Names are loaded
lazily so each submodule stays independent.
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    "dars_extra_rollouts": "dars",
}


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_EXPORTS))
