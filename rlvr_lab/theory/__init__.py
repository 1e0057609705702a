"""Closed forms and exact computations behind the papers' claims: a thin namespace.

Everything here lives in the paper packages (``rlvr_lab.papers.<paper>``); this module
re-exports the public names so ``from rlvr_lab import theory`` keeps working.
"""
from rlvr_lab.papers.brorl.theory import mass_balance
from rlvr_lab.papers.cures.theory import (
    allocation_variance,
    bank_gradient_moments,
    is_efficiency,
    mc_allocation_variance,
    mean_field_descent,
    neyman_variance,
    optimal_is_distribution,
)
from rlvr_lab.papers.dars.theory import (
    cumulative_advantage,
    expected_cumulative_advantage,
    expected_cumulative_advantage_dars,
)
from rlvr_lab.papers.mc_grpo.sign_flip import (
    flip_statistics,
    monte_carlo_sweep,
    sign_flip_monte_carlo,
    sign_flip_probability,
    zeroing_probability,
)

__all__ = [
    "allocation_variance", "bank_gradient_moments", "cumulative_advantage",
    "expected_cumulative_advantage", "expected_cumulative_advantage_dars", "flip_statistics",
    "is_efficiency", "mass_balance", "mc_allocation_variance", "mean_field_descent",
    "monte_carlo_sweep", "neyman_variance", "optimal_is_distribution",
    "sign_flip_monte_carlo", "sign_flip_probability", "zeroing_probability",
]
