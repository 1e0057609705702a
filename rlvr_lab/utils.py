"""Small shared helpers."""
from __future__ import annotations

import jax


def enable_x64():
    """Context manager turning on float64 (``jax.enable_x64`` in new JAX, experimental before)."""
    if callable(getattr(jax, "enable_x64", None)):
        return jax.enable_x64(True)
    from jax.experimental import enable_x64 as legacy  # JAX < 0.7
    return legacy()

