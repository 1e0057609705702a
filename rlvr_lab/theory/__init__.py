"""Closed forms and exact computations behind the papers' claims.

Submodules: ``dars`` (cumulative advantage), ``brorl`` (mass balance), ``sign_flip``
(MC-GRPO sign flips), and more. Names are loaded lazily so each submodule stays independent.
"""
from __future__ import annotations

from rlvr_lab._lazy import lazy_exports

_EXPORTS = {
    "cumulative_advantage": "dars",
    "expected_cumulative_advantage": "dars",
    "expected_cumulative_advantage_dars": "dars",
    "mass_balance": "brorl",
    "sign_flip_probability": "sign_flip",
    "zeroing_probability": "sign_flip",
    "flip_statistics": "sign_flip",
    "sign_flip_monte_carlo": "sign_flip",
    "monte_carlo_sweep": "sign_flip",
    "bank_gradient_moments": "cures",
    "allocation_variance": "cures",
    "mc_allocation_variance": "cures",
    "neyman_variance": "cures",
    "is_efficiency": "cures",
    "optimal_is_distribution": "cures",
    "mean_field_descent": "cures",
}


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
