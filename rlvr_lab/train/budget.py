"""Rollout budgets: uniform allocation and the exact-budget rounding of proportional allocators.

:func:`proportional_allocation` turns non-negative weights into integer rollout counts
``n_i`` with ``sum n_i == budget`` exactly, ``min_per_prompt <= n_i <= max_per_prompt``, and
``n_i`` as close as possible to ``n_i ∝ w_i``:

1. real targets ``x_i = clip(c w_i, lo, hi)`` with the scale ``c`` found by bisection (in log
   space) so that ``sum x_i = budget`` (water filling: prompts pinned at a bound leave the
   rest of the budget to the others, still in proportion);
2. largest-remainder rounding: every prompt gets ``floor(x_i)``, then the ``budget - sum
   floor(x_i)`` prompts with the largest fractional parts (and room below ``hi``) get one more.

Hence ``|n_i - x_i| < 1`` and ``w_i >= w_j`` implies ``n_i >= n_j - 1``. Zero weights get the
minimum; if all weights are zero the allocation is uniform. A tiny positive floor on the
weights (1e-6 of the largest) keeps the bisection solvable when zero-weight prompts and the
cap leave no room — those prompts then absorb the remainder evenly.

Jittable: ``budget`` may be traced; the bounds must be static ints. Concrete budgets outside
``[B * lo, B * hi]`` raise ValueError.
"""
from __future__ import annotations

import operator

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

_BISECTION_STEPS = 80


def _static_int(name: str, value, minimum: int = 0) -> int:
    try:
        v = operator.index(value)
    except TypeError:
        raise ValueError(f"{name}={value!r} is not allowed; it must be a Python int") from None
    if v < minimum:
        raise ValueError(f"{name}={v} is not allowed; it must be >= {minimum}")
    return v


def _check_budget(budget, num_prompts: int, lo: int, hi: int | None) -> None:
    if isinstance(budget, jax.core.Tracer):
        return
    b = int(budget)
    if b < num_prompts * lo:
        raise ValueError(f"budget={b} is not allowed; with {num_prompts} prompts and "
                         f"min_per_prompt={lo} it must be >= {num_prompts * lo}")
    if hi is not None and b > num_prompts * hi:
        raise ValueError(f"budget={b} is not allowed; with {num_prompts} prompts and "
                         f"max_per_prompt={hi} it must be <= {num_prompts * hi}")


def largest_remainder(targets: ArrayLike, budget: ArrayLike, *,
                      max_per_prompt: int | None = None) -> jax.Array:
    """Round real ``targets`` (summing to at most ``budget``) to ints summing to ``budget``.

    Each entry gets ``floor(target)``; the leftover units go one each to the entries with the
    largest fractional part (ties: lower index first) that are below ``max_per_prompt``.
    """
    targets = jnp.asarray(targets)
    floor = jnp.floor(targets)
    extra = jnp.asarray(budget, floor.dtype) - floor.sum()
    room = jnp.ones(targets.shape, bool) if max_per_prompt is None else floor < max_per_prompt
    priority = jnp.where(room, targets - floor, -1.0)
    order = jnp.argsort(-priority, stable=True)
    rank = jnp.zeros(targets.shape, jnp.int32).at[order].set(
        jnp.arange(targets.shape[0], dtype=jnp.int32))
    return (floor + (rank < extra)).astype(jnp.int32)


def proportional_allocation(weights: ArrayLike, budget: ArrayLike, *, min_per_prompt: int = 1,
                            max_per_prompt: int | None = None) -> jax.Array:
    """Integer counts ``n_i ∝ weights_i`` with an exact total and per-prompt bounds (int32).

    See the module docstring for the method and guarantees.
    """
    w = jnp.asarray(weights)
    if w.ndim != 1 or w.shape[0] == 0:
        raise ValueError(f"weights must have shape [B] with B >= 1; got shape {w.shape}")
    lo = _static_int("min_per_prompt", min_per_prompt)
    hi = None if max_per_prompt is None else _static_int("max_per_prompt", max_per_prompt, lo)
    _check_budget(budget, w.shape[0], lo, hi)
    dtype = w.dtype if jnp.issubdtype(w.dtype, jnp.floating) else jnp.result_type(float)
    w = jnp.nan_to_num(jnp.maximum(w.astype(dtype), 0.0))
    wmax = w.max()
    w = jnp.where(wmax > 0, jnp.maximum(w, 1e-6 * wmax), jnp.ones_like(w))
    total = jnp.asarray(budget, dtype)
    cap = total if hi is None else jnp.asarray(hi, dtype)

    def fill(log_c):
        return jnp.clip(jnp.exp(log_c) * w, lo, cap)

    # f(c) = sum clip(c w, lo, cap) rises from B*lo (c -> 0) to B*cap (c -> inf).
    log_lo = jnp.log(jnp.maximum(lo, 1e-3) / w.max()) - 1.0
    log_hi = jnp.log(cap / w.min()) + 1.0

    def step(_, bracket):
        a, b = bracket
        mid = 0.5 * (a + b)
        under = fill(mid).sum() <= total
        return jnp.where(under, mid, a), jnp.where(under, b, mid)

    log_c, _ = jax.lax.fori_loop(0, _BISECTION_STEPS, step, (log_lo, log_hi))
    return largest_remainder(fill(log_c), budget, max_per_prompt=hi)


def uniform_allocation(num_prompts: int, budget: ArrayLike) -> jax.Array:
    """``budget`` rollouts spread as evenly as possible over ``num_prompts`` (int32 ``[B]``).

    Every prompt gets ``budget // B``; the first ``budget % B`` prompts get one more.
    """
    b = _static_int("num_prompts", num_prompts, 1)
    _check_budget(budget, b, 0, None)
    budget = jnp.asarray(budget, jnp.int32)
    return (budget // b + (jnp.arange(b) < budget % b)).astype(jnp.int32)
