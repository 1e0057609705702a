"""DARS rollout schedules: how many extra rollouts a prompt gets from its stage-1 accuracy.

DARS (Difficulty Adaptive Rollout Sampling, the DARS paper) rebalances the cumulative
advantage ``sum_i |A_i| = N * S(a)`` of a group of N binary rollouts at accuracy ``a`` —
``S(a) = 2a(1-a)`` without std scaling, ``2 sqrt(a(1-a))`` with it — which vanishes for hard
prompts. After a first stage of N rollouts, a prompt with ``a < 0.5`` gets ``dN`` extra ones:

* equal treatment (ET): enough rollouts to reach the peak ``A_peak = N * S(0.5)``,
  ``dN = ceil((A_peak - N S(a)) / S(a))``;
* hardness weighted (HW): a target that grows as the prompt gets harder,
  ``dN = ceil((2(1-a) A_peak - N S(a)) / S(a))``;

with ``a = 0`` replaced by ``0.5 / N`` (we floor any ``a < 0.5/N`` there), no extra rollouts
for ``a >= 0.5``, and ``dN`` capped at
``n_max - N``. With N = 8 and no std: a = 0 -> ET 24 / HW 56 (capped, n_max 32 / 64),
1/8 -> 11 / 24, 2/8 -> 3 / 8, 3/8 -> 1 / 3, 4/8 -> 0 / 0.

Exactness: several schedule values are exact integers (HW at 1/8 is 24.0), so a naive
``ceil(float expression)`` can land one too high after rounding. We write ``a = k2 / (2N)``
(``k2`` is an integer for every stage-1 accuracy ``k/N`` and for the ``0.5/N`` substitute),
reduce each schedule to a ratio of small integer polynomials in ``k2``, take the ceiling of the
float ratio, and then correct it by one using the exact integer inequality that defines the
ceiling. This is exact whenever those products stay below 2^24 (float32; 2^53 under x64),
e.g. any ``N <= 32`` with ``n_max <= 64`` in float32.
"""
from __future__ import annotations

import functools
import operator

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from rlvr_lab._registry import check_choice
from rlvr_lab.utils import check_unit_interval

SCHEDULES = ("et", "hw")
SCALES = ("none", "std")


def _check_sizes(n, n_max) -> tuple[int, int]:
    try:
        n_i, n_max_i = operator.index(n), operator.index(n_max)
    except TypeError:
        raise ValueError(f"n and n_max must be Python ints (static); got n={n!r}, "
                         f"n_max={n_max!r}") from None
    if n_i < 1:
        raise ValueError(f"n={n_i} is not allowed; the stage-1 group size must be >= 1")
    if n_max_i < n_i:
        raise ValueError(f"n_max={n_max_i} is not allowed; it must be >= n={n_i}")
    return n_i, n_max_i



def _meets_ceiling(m, k2, n, schedule, scale):
    """Exact test of ``m >= x(a)`` (x the real-valued schedule) by integer polynomials in k2."""
    if scale == "none":
        if schedule == "et":   # x = n (n - k2)^2 / (k2 (2n - k2))
            return m * k2 * (2 * n - k2) >= n * (n - k2) ** 2
        return m * k2 >= n * (n - k2)                      # x = n (n - k2) / k2
    if schedule == "et":       # x = n^2 / sqrt(k2 (2n - k2)) - n
        return (m + n) ** 2 * k2 * (2 * n - k2) >= n ** 4
    return (m + n) ** 2 * k2 >= n ** 2 * (2 * n - k2)     # x = n sqrt((2n - k2) / k2) - n


def _schedule_value(k2, n, schedule, scale):
    """Real-valued extra-rollout count ``x(a)`` with ``a = k2 / (2n)``, ``0 < k2 < n``."""
    if scale == "none":
        if schedule == "et":
            return n * (n - k2) ** 2 / (k2 * (2 * n - k2))
        return n * (n - k2) / k2
    if schedule == "et":
        return n * n / jnp.sqrt(k2 * (2 * n - k2)) - n
    return n * jnp.sqrt((2 * n - k2) / k2) - n


@functools.partial(jax.jit, static_argnums=(3, 4))
def _extra(acc, n, n_max, schedule, scale):
    # n and n_max are traced (no shape depends on them): one compile per dtype and shape
    n = n.astype(acc.dtype)
    n_max = n_max.astype(acc.dtype)
    a = jnp.clip(acc, 0, 1)
    needs_extra = (a < 0.5) & (n_max > n)      # False for NaN too
    # a = k2 / (2n); snap k2 to the integer lattice when it is within rounding of it, so
    # accuracies like 3/7 (inexact in binary) still hit the exact integer path.
    k2 = 2 * n * a
    k2_int = jnp.round(k2)
    k2 = jnp.where(jnp.abs(k2 - k2_int) <= 1e-4, k2_int, k2)
    # a = 0 -> 0.5 / n (the paper's rule); off-lattice 0 < a < 0.5/n are floored there too,
    # which keeps the schedule monotone in a
    k2 = jnp.maximum(k2, 1)
    k2 = jnp.where(needs_extra, k2, jnp.full_like(k2, n / 2))  # keep dead lanes finite
    m = jnp.ceil(_schedule_value(k2, n, schedule, scale))
    m = jnp.clip(m, 0, n_max - n + 1)                      # bounded before the exact fix-up
    m = jnp.where((m > 0) & _meets_ceiling(m - 1, k2, n, schedule, scale), m - 1, m)
    m = jnp.where(_meets_ceiling(m, k2, n, schedule, scale), m, m + 1)
    m = jnp.clip(m, 0, n_max - n)
    return jnp.where(needs_extra, m, 0).astype(jnp.int32)


def dars_extra_rollouts(acc: ArrayLike, n: int, n_max: int, *, schedule: str = "et",
                        scale: str = "none") -> jax.Array:
    """Extra stage-2 rollouts per prompt under the DARS ET or HW schedule (int32 array).

    Args:
      acc: stage-1 empirical accuracy per prompt, any shape, values in [0, 1].
      n: stage-1 group size N (static Python int >= 1).
      n_max: cap on the total rollouts per prompt (static int >= n); extra <= n_max - n.
      schedule: ``"et"`` (equal treatment) or ``"hw"`` (hardness weighted).
      scale: ``"none"`` (S(a) = 2a(1-a), DARS default) or ``"std"`` (S(a) = 2 sqrt(a(1-a))).

    Returns an int32 array of ``acc``'s shape. ``acc >= 0.5`` gives 0; ``acc == 0`` is treated
    as ``0.5 / n`` (and so is any ``acc < 0.5 / n``, which keeps the schedule monotone).
    Concrete accuracies outside [0, 1] (or NaN) raise ValueError; traced ones are clipped to
    [0, 1] (NaN gives 0). Jittable and vectorised (``n``, ``n_max`` static).
    """
    check_choice("schedule", schedule, SCHEDULES)
    check_choice("scale", scale, SCALES)
    n, n_max = _check_sizes(n, n_max)
    check_unit_interval(acc, "acc")
    acc = jnp.asarray(acc)
    dtype = acc.dtype if jnp.issubdtype(acc.dtype, jnp.floating) else jnp.result_type(float)
    return _extra(acc.astype(dtype), jnp.asarray(n), jnp.asarray(n_max), schedule, scale)


def dars_total_rollouts(acc: ArrayLike, n: int, n_max: int, *, schedule: str = "et",
                        scale: str = "none") -> jax.Array:
    """Total rollouts per prompt, ``n + dars_extra_rollouts(...)`` (int32)."""
    return n + dars_extra_rollouts(acc, n, n_max, schedule=schedule, scale=scale)
