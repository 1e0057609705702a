"""Rollout-budget allocators (how many rollouts each prompt of a batch gets): a thin namespace.

DARS's schedules live in ``rlvr_lab.papers.dars``, CurES's Neyman allocation in
``rlvr_lab.papers.cures``, E3's rank-based rule in ``rlvr_lab.papers.e3`` and the uniform /
proportional rounding in ``rlvr_lab.train.budget``; this module re-exports the public names.
"""
from rlvr_lab.papers.cures.allocation import (
    cures_allocation,
    neyman_allocation,
    neyman_allocation_code,
    neyman_sigma,
    rollout_gradient_variance,
)
from rlvr_lab.papers.dars.allocation import dars_extra_rollouts, dars_total_rollouts
from rlvr_lab.papers.e3.allocation import (
    e3_allocation,
    e3_counts,
    e3_ranks,
    e3_schedule,
    e3_target_entropy,
    e3_temperature_update,
)
from rlvr_lab.train.budget import largest_remainder, proportional_allocation, uniform_allocation

__all__ = [
    "cures_allocation", "dars_extra_rollouts", "dars_total_rollouts", "e3_allocation",
    "e3_counts", "e3_ranks", "e3_schedule", "e3_target_entropy", "e3_temperature_update",
    "largest_remainder", "neyman_allocation", "neyman_allocation_code", "neyman_sigma",
    "proportional_allocation", "rollout_gradient_variance", "uniform_allocation",
]
