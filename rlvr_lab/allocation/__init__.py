"""Rollout-budget allocators: how many rollouts each prompt of a batch gets.

Submodules: ``dars`` (DARS equal-treatment / hardness-weighted schedules), ``cures`` (Neyman
allocation from per-prompt gradient scale), ``e3`` (rank-based allocation). Names are loaded
lazily so each submodule stays independent.
"""
from __future__ import annotations

from rlvr_lab._lazy import lazy_exports

_EXPORTS = {
    "dars_extra_rollouts": "dars",
    "dars_total_rollouts": "dars",
    "rollout_gradient_variance": "cures",
    "neyman_sigma": "cures",
    "neyman_allocation": "cures",
    "cures_allocation": "cures",
    "neyman_allocation_code": "cures",
    "e3_schedule": "e3",
    "e3_ranks": "e3",
    "e3_allocation": "e3",
    "e3_counts": "e3",
    "e3_temperature_update": "e3",
    "e3_target_entropy": "e3",
    "uniform_allocation": "uniform",
    "proportional_allocation": "uniform",
    "largest_remainder": "uniform",
}


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
