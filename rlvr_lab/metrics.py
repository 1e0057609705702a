"""Evaluation metrics: unbiased pass@k, token entropy, probability mass on the correct set.

Input checks (one-line ``ValueError`` on concrete inputs; skipped under ``jit`` unless wrapped
in :func:`rlvr_lab.utils.checked`, see :mod:`rlvr_lab.utils`): counts are whole numbers
(booleans rejected), probabilities lie in [0, 1], logits are not NaN or ``+inf`` (``-inf``
masks a token) and every distribution keeps at least one finite logit; shapes are checked
(``n, c, k`` broadcast together, counts at most 2**31 - 1; ``axis`` exists; masks and
``correct`` broadcast to the logits' rows). Degenerate valid inputs
are exact: ``pass_at_k`` gives 0 for ``c = 0`` and 1 for ``n - c < k``; ``pass_at_k_exact``
gives 0 at ``p = 0`` or ``k = 0`` and 1 at ``p = 1``; a one-hot distribution has entropy 0.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from rlvr_lab.utils import _staged, check_number, check_real, check_shapes, is_traced


def _is_concrete(*xs) -> bool:
    return not is_traced(*xs)


def _check_logits(logits, axis=-1, where=None):
    """No NaN or +inf logit, and a finite one in every distribution (rows where ``where``)."""
    check_real(logits, "logits")
    ndim = jnp.ndim(logits)
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) \
            or not -max(ndim, 1) <= axis < max(ndim, 1):
        raise ValueError(f"axis={axis!r} is not allowed for logits of shape "
                         f"{jnp.shape(logits)}; choose an integer in "
                         f"{-max(ndim, 1)}..{max(ndim, 1) - 1}")
    if is_traced(logits, where):
        x = jnp.asarray(logits)
        ok = jnp.all(~jnp.isnan(x) & (x != jnp.inf), axis=axis) & jnp.any(jnp.isfinite(x),
                                                                          axis=axis)
        if where is not None:
            ok = ok | ~jnp.asarray(where, bool)
        _staged(ok, "logits must be finite or -inf, with a finite logit in every row", ok)
        return
    x = np.asarray(logits, dtype=float)
    if x.ndim == 0 or x.shape[axis] == 0:
        raise ValueError(f"logits of shape {x.shape} hold no distribution along axis {axis}")
    rows = np.ones(np.delete(x.shape, axis % x.ndim), bool) if where is None else \
        np.broadcast_to(np.asarray(where, bool), np.delete(x.shape, axis % x.ndim))
    bad_value = (np.isnan(x) | (x == np.inf)) & np.expand_dims(rows, axis)
    if bad_value.any():
        i = np.unravel_index(np.flatnonzero(bad_value.ravel())[0], x.shape)
        raise ValueError(f"logits={x[i]} at index {tuple(int(j) for j in i)} is not allowed; "
                         "logits must be finite or -inf (a masked token)")
    empty = ~np.any(np.isfinite(x), axis=axis) & rows
    if empty.any():
        i = np.unravel_index(np.flatnonzero(empty.ravel())[0], empty.shape)
        raise ValueError(f"logits row {tuple(int(j) for j in i)} is all -inf; a distribution "
                         "needs at least one finite logit")


_MAX_COUNT = 2**31 - 1   # counts are int32 on the device


def _largest(value) -> str:
    v = np.asarray(value).ravel()
    return repr(v[np.argmax(np.abs(v.astype(float)))].item())


def pass_at_k(n: ArrayLike, c: ArrayLike, k: ArrayLike) -> jax.Array:
    """Unbiased pass@k ``1 - C(n-c, k) / C(n, k)`` (Chen et al. 2021), vectorised.

    ``n`` samples of which ``c`` are correct; broadcasts over arrays. Exact cases: ``c == 0``
    gives 0 and ``n - c < k`` gives 1. Requires whole numbers ``0 <= c <= n`` and
    ``1 <= k <= n`` (booleans rejected): concrete inputs outside that raise ValueError; traced
    ones give NaN outside the ranges (a non-integer traced count is not detected).
    The ratio is evaluated as a sum of ``min(k, c)`` log1p terms (no cancelling log-gammas), in
    the default float dtype (float64 when x64 is on).
    """
    for name, value in (("n", n), ("c", c), ("k", k)):
        check_number(value, name, integer=True)   # ranges: the joint check below
        if _is_concrete(value) and np.max(np.abs(np.asarray(value, float))) > _MAX_COUNT:
            raise ValueError(f"{name}={_largest(value)} is not allowed; counts must be at "
                             f"most {_MAX_COUNT} (2**31 - 1)")
    try:
        np.broadcast_shapes(*(np.shape(x) for x in (n, c, k)))
    except ValueError:
        raise ValueError(f"n, c and k of shapes {np.shape(n)}, {np.shape(c)}, {np.shape(k)} "
                         "are not allowed; they must broadcast together") from None
    n, c, k = jnp.asarray(n), jnp.asarray(c), jnp.asarray(k)
    if _is_concrete(n, c, k):
        nn, cc, kk = np.broadcast_arrays(np.asarray(n), np.asarray(c), np.asarray(k))
        bad = (cc < 0) | (cc > nn) | (kk < 1) | (kk > nn)
        if np.any(bad):
            i = np.flatnonzero(bad.ravel())[0]
            raise ValueError(
                f"pass_at_k needs 0 <= c <= n and 1 <= k <= n; got n={nn.ravel()[i]}, "
                f"c={cc.ravel()[i]}, k={kk.ravel()[i]}")
    return _pass_at_k(n, c, k)


@jax.jit
def _pass_at_k(n, c, k):
    dtype = jnp.result_type(float)
    nf, cf, kf = jnp.broadcast_arrays(*(x.astype(dtype) for x in (n, c, k)))
    invalid = (cf < 0) | (cf > nf) | (kf < 1) | (kf > nf)
    certain = (nf - cf < kf) | (cf == 0) | invalid
    # C(n-c,k)/C(n,k) = prod_{j<k} (1 - c/(n-j)) = prod_{j<c} (1 - k/(n-j)): take the shorter
    by_k = kf <= cf
    terms = jnp.where(certain, 0, jnp.where(by_k, kf, cf))
    step = jnp.where(by_k, cf, kf)

    def body(state: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        j, log_ratio = state
        factor = jnp.log1p(-step / jnp.maximum(nf - j, 1))
        return j + 1, log_ratio + jnp.where(j < terms, factor, 0)

    _, log_ratio = jax.lax.while_loop(
        lambda state: state[0] < jnp.max(terms, initial=0), body,
        (jnp.zeros((), dtype), jnp.zeros(nf.shape, dtype)))
    value = jnp.where(nf - cf < kf, 1.0, -jnp.expm1(log_ratio))
    value = jnp.where(cf == 0, 0.0, value)
    return jnp.where(invalid, jnp.nan, value).astype(dtype)


_P_SLACK = 1e-6   # a float32 sum of probabilities may exceed 1 by a few ulps


def pass_at_k_exact(p: ArrayLike, k: ArrayLike) -> jax.Array:
    """Population pass@k of a prompt with success probability ``p``: ``1 - (1 - p)^k``.

    ``p`` in [0, 1] and ``k`` a whole number >= 0 (``k = 0`` gives 0); concrete inputs outside
    raise ValueError, except that ``p`` may overshoot [0, 1] by float32 rounding (1e-6, e.g. a
    sum of probabilities); ``p`` is then clipped to [0, 1], as traced ``p`` always is.
    """
    check_number(p, "p", "in [0, 1]", lambda v: (v >= -_P_SLACK) & (v <= 1 + _P_SLACK))
    check_number(k, "k", ">= 0", lambda v: v >= 0, integer=True)
    p = jnp.asarray(p)
    k = jnp.asarray(k)
    # k = 0 draws never succeed; the guard also avoids 0 * log(0) at p = 1
    return jnp.where(k == 0, 0.0, -jnp.expm1(k * jnp.log1p(-jnp.clip(p, 0, 1))))


def entropy(logits: ArrayLike, axis: int = -1) -> jax.Array:
    """Entropy ``-sum p log p`` of softmax(logits) along ``axis`` (0 log 0 = 0).

    ``-inf`` logits mask tokens; NaN, ``+inf`` and all ``-inf`` rows are rejected (concrete).
    """
    _check_logits(logits, axis)
    return _entropy(logits, axis)


def _entropy(logits, axis=-1):
    logp = jax.nn.log_softmax(logits, axis=axis)
    p = jnp.exp(logp)
    # zero log p (not p log p) where p = 0: the product's gradient then stays finite for
    # -inf logits (0 * -inf in the untaken branch made the whole gradient NaN)
    return -jnp.sum(p * jnp.where(p > 0, logp, 0.0), axis=axis)


def mean_token_entropy(logits: ArrayLike, mask: ArrayLike | None = None) -> jax.Array:
    """Mean entropy over valid positions: ``logits [..., V]``, ``mask`` ``logits.shape[:-1]``."""
    if mask is not None:
        check_real(mask, "mask")
        check_shapes(jnp.shape(logits)[:-1], "mask", jnp.shape(mask), broadcast=True)
    m = None if mask is None else jnp.asarray(mask, bool)
    _check_logits(logits, -1, m)   # padded rows may hold anything
    h = _entropy(logits)
    m = jnp.ones(h.shape, bool) if m is None else m
    mf = m.astype(h.dtype)
    # where, not h * mask: a NaN entropy at a padded position (an all -inf row) must stay out
    return jnp.where(m, h, 0.0).sum() / jnp.maximum(mf.sum(), 1)


def correct_mass(logits: ArrayLike, correct: ArrayLike) -> jax.Array:
    """Probability mass that softmax(logits) puts on the boolean ``correct`` set, per row.
    ``correct`` must broadcast to the shape of ``logits``."""
    _check_logits(logits)
    check_real(correct, "correct")
    check_shapes(jnp.shape(logits), "correct", jnp.shape(correct), broadcast=True)
    p = jax.nn.softmax(logits, axis=-1)
    return jnp.sum(jnp.where(correct, p, 0.0), axis=-1)
