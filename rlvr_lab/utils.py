"""Small shared helpers."""
from __future__ import annotations

import jax
import numpy as np


def enable_x64():
    """Context manager turning on float64 (``jax.enable_x64`` in new JAX, experimental before)."""
    if callable(getattr(jax, "enable_x64", None)):
        return jax.enable_x64(True)
    from jax.experimental import enable_x64 as legacy  # JAX < 0.7
    return legacy()


def check_unit_interval(value, what: str) -> None:
    """One-line ValueError naming the first entry of ``value`` outside [0, 1] (NaN included).

    Traced values cannot be checked and pass through.
    """
    if isinstance(value, jax.core.Tracer):
        return
    v = np.asarray(value, dtype=float)
    bad = ~((v >= 0) & (v <= 1))
    if np.any(bad):
        raise ValueError(f"{what}={v.ravel()[np.flatnonzero(bad.ravel())[0]]} is not allowed; "
                         f"it must lie in [0, 1]")
