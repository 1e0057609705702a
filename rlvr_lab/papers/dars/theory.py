"""Cumulative advantage of a GRPO group: the depth bias that DARS corrects (the DARS paper).

For ``n`` binary rollouts with empirical accuracy ``a`` and advantages ``A_i = r_i - a``,
``c = a n`` rollouts have ``|A| = 1 - a`` and ``n - c`` have ``|A| = a``, so

    sum_i |A_i| = 2 n a (1 - a)                      (scale "none", DARS/Dr.GRPO default)
    sum_i |A_i| = 2 n sqrt(a (1 - a))                (scale "std", divided by the population std)

Both peak at ``a = 0.5`` and vanish at ``a = 0`` and ``a = 1``: a hard prompt gets almost no
gradient weight. The *plug-in* value ``cumulative_advantage(p, n)`` is not what a prompt of true
accuracy ``p`` receives on average: the group accuracy is ``Binomial(n, p) / n``, and

    E[2 n â (1 - â)] = 2 (n - 1) p (1 - p)           (since E[â²] = p² + p(1-p)/n)

i.e. the plug-in overstates it by a factor ``n / (n - 1)``; with std scaling there is no closed
form (an exact binomial sum), and Jensen plus the all-fail groups push it further below the
plug-in for hard prompts (e.g. ``n p << 1``: most groups are all-wrong and carry zero).
:func:`expected_cumulative_advantage_dars` adds DARS's second stage to the same exact sum.
"""
from __future__ import annotations

import functools
import operator

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike
from jax.scipy.stats import binom

from rlvr_lab._registry import check_choice
from rlvr_lab.utils import check_unit_interval

SCALES = ("none", "std")


def _check_n(n, what="n") -> int:
    try:
        n_i = operator.index(n)
    except TypeError:
        raise ValueError(f"{what} must be a Python int (static); got {what}={n!r}") from None
    if n_i < 1:
        raise ValueError(f"{what}={n_i} is not allowed; a group needs >= 1 rollout")
    return n_i



def _float(x):
    x = jnp.asarray(x)
    return x if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(jnp.result_type(float))


def _spread(acc, scale):
    """Per-rollout mean |A| divided by 2: a(1-a) or sqrt(a(1-a)); a clipped to [0, 1]."""
    v = acc * (1 - acc)
    return v if scale == "none" else jnp.sqrt(jnp.maximum(v, 0))


def cumulative_advantage(acc: ArrayLike, n: ArrayLike, *, scale: str = "none") -> jax.Array:
    """``sum_i |A_i|`` for a group of ``n`` binary rollouts with empirical accuracy ``acc``.

    ``2 n acc (1 - acc)`` for ``scale="none"``; ``2 n sqrt(acc (1 - acc))`` for ``"std"``
    (advantages divided by the population std; the ``eps`` of GRPO is ignored, and an all-equal
    group gives 0, as GRPO's advantages are then 0). Broadcasts over ``acc``; ``n`` may be an
    int or an array (> 0). Concrete ``acc`` outside [0, 1] raises ValueError; traced values are
    clipped to [0, 1].
    """
    check_choice("scale", scale, SCALES)
    check_unit_interval(acc, "acc")
    acc = jnp.clip(_float(acc), 0, 1)
    return 2 * jnp.asarray(n, acc.dtype) * _spread(acc, scale)


def expected_cumulative_advantage(p: ArrayLike, n: int, *, scale: str = "none") -> jax.Array:
    """``E[cumulative_advantage(C / n, n)]`` with ``C ~ Binomial(n, p)`` (exact).

    ``scale="none"``: the closed form ``2 (n - 1) p (1 - p)`` (vs the plug-in ``2 n p (1-p)``).
    ``scale="std"``: the exact sum ``sum_c P(C = c) 2 sqrt(c (n - c))`` over c = 0..n.
    ``n`` is a static int >= 1 (n = 1 gives 0: a lone rollout has no group contrast).
    Broadcasts over ``p``; concrete ``p`` outside [0, 1] raises ValueError, traced is clipped.
    """
    check_choice("scale", scale, SCALES)
    n = _check_n(n)
    check_unit_interval(p, "p")
    p = jnp.clip(_float(p), 0, 1)
    if scale == "none":
        return 2 * (n - 1) * p * (1 - p)
    return _expected_std(p, n)


@functools.partial(jax.jit, static_argnums=1)
def _expected_std(p, n):
    c = jnp.arange(n + 1, dtype=p.dtype)
    pmf = binom.pmf(c, n, p[..., None])
    return jnp.sum(pmf * 2 * jnp.sqrt(c * (n - c)), axis=-1)


def expected_cumulative_advantage_dars(p: ArrayLike, n: int, n_max: int, *,
                                       schedule: str | None = "et",
                                       scale: str = "none") -> tuple[jax.Array, jax.Array]:
    """Exact expected ``sum |A|`` of the merged DARS group, and the expected rollouts spent.

    Stage 1 draws ``C1 ~ Binomial(n, p)``; the prompt then gets
    ``d = dars_extra_rollouts(C1 / n, n, n_max, schedule, scale)`` more with
    ``C2 ~ Binomial(d, p)``; the merged group of ``n + d`` rollouts has accuracy
    ``(C1 + C2) / (n + d)`` and cumulative advantage ``cumulative_advantage`` of it (groups with
    accuracy 0 or 1 carry 0, as DARS drops them). ``schedule=None`` is plain GRPO with ``n``.
    Returns ``(expected_sum_abs_adv, expected_rollouts)``, each of ``p``'s shape; exact double
    binomial sum (``n``, ``n_max`` static).
    """
    check_choice("scale", scale, SCALES)
    if schedule is not None:
        check_choice("schedule", schedule, ("et", "hw"))
    n = _check_n(n)
    n_max = n if schedule is None else _check_n(n_max, "n_max")
    if n_max < n:
        raise ValueError(f"n_max={n_max} is not allowed; it must be >= n={n}")
    check_unit_interval(p, "p")
    return _expected_dars(jnp.clip(_float(p), 0, 1), n, n_max, schedule, scale)


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4))
def _expected_dars(p, n, n_max, schedule, scale):
    from rlvr_lab.papers.dars.allocation import dars_extra_rollouts

    p = p[..., None, None]
    c1 = jnp.arange(n + 1, dtype=p.dtype)
    if schedule is None:
        extra = jnp.zeros(n + 1, jnp.int32)
    else:
        extra = dars_extra_rollouts(c1 / n, n, n_max, schedule=schedule, scale=scale)
    c2 = jnp.arange(max(n_max - n, 0) + 1, dtype=p.dtype)
    d = extra.astype(p.dtype)[:, None]                       # [n+1, 1]
    w = binom.pmf(c1[:, None], n, p) * jnp.where(c2 <= d, binom.pmf(c2, d, p), 0)
    total = n + d
    acc = (c1[:, None] + c2) / total
    sum_abs = 2 * total * _spread(jnp.clip(acc, 0, 1), scale)
    expected = jnp.sum(w * sum_abs, axis=(-2, -1))
    rollouts = jnp.sum(binom.pmf(c1, n, p[..., 0]) * (n + extra), axis=-1)
    return expected, rollouts
