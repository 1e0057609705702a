"""Rollout-budget allocators: how many rollouts each prompt of a batch gets.

Submodules: ``dars`` (DARS equal-treatment / hardness-weighted schedules), ``cures`` (Neyman
allocation from per-prompt gradient scale), ``e3`` (rank-based allocation). Names are loaded
lazily so each submodule stays independent.
"""
from __future__ import annotations

from rlvr_lab._lazy import lazy_exports

_EXPORTS = {
    "dars_extra_rollouts": "dars",
}


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
