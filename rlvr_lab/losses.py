"""Per-token policy losses, loss aggregation, KL estimators and rollout corrections.

Shapes: ``log_prob``, ``old_log_prob``: ``[B, T]`` per-token log-probabilities of the sampled
tokens under the current and the behaviour (old) policy; ``advantages``: ``[B, T]`` or
``[B, 1]`` (an outcome advantage broadcast over the tokens); ``mask``: ``[B, T]`` bool of
valid tokens. Policy losses return the per-token loss ``[B, T]`` (to be *minimised*);
combine it with :func:`aggregate`. Masked tokens are not zeroed by the loss functions —
:func:`aggregate` applies the mask.

Every function is pure and jittable in float32 and float64.

Input checks (one-line ``ValueError``, see :mod:`rlvr_lab.utils`): options always
(``0 <= epsilon < 1``, ``epsilon_high >= 0``, ``clip_ratio_c > 1``, caps ``>= 1``, all finite,
booleans rejected) unless traced; on concrete inputs the log-probs, advantages and token losses
must be finite at valid tokens (masked tokens may hold anything, ``-inf`` padding included);
batches must not be empty. Shapes and dtypes are checked always (also under ``jit``): the
per-token arrays of one call share a shape (``advantages`` and ``mask`` may broadcast to it)
and hold real numbers (complex or text: TypeError). Under ``jit`` the value checks are skipped
(NaN propagates); wrap a function in :func:`rlvr_lab.utils.checked` to keep them.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from rlvr_lab._registry import Registry, check_choice
from rlvr_lab.utils import check_finite, check_number, check_real, check_shapes

_POLICY: Registry = Registry("loss", "policy loss")
_KL: Registry = Registry("kl", "KL estimator")

AGG_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")


def _mask_like(x, mask):
    return jnp.ones(x.shape, dtype=bool) if mask is None else jnp.asarray(mask, dtype=bool)


def _check_epsilon(epsilon, epsilon_high=None, *, upper_closed=False):
    """PPO-style clip range ``[1 - epsilon, 1 + epsilon_high]``: ``0 <= epsilon < 1`` (the
    lower end stays positive; ``<= 1`` when ``upper_closed``), ``epsilon_high >= 0``."""
    if upper_closed:
        check_number(epsilon, "epsilon", "in [0, 1]", lambda v: (v >= 0) & (v <= 1),
                     optional=True)
    else:
        check_number(epsilon, "epsilon", "in [0, 1)", lambda v: (v >= 0) & (v < 1))
    check_number(epsilon_high, "epsilon_high", ">= 0", lambda v: v >= 0, optional=True)


def _check_cap(cap, what="cap"):
    check_number(cap, what, ">= 1", lambda v: v >= 1)


def _check_tokens(mask, **arrays):
    """Finite values at valid tokens; ``advantages`` may be ``[B, 1]`` (broadcast)."""
    for name, x in arrays.items():
        if x is None:
            raise ValueError(f"{name} is required (got None)")
        check_real(x, name)
    first = next(iter(arrays))
    shape = jnp.shape(arrays[first])
    for name, x in arrays.items():   # advantages may be [B, 1] or a scalar (broadcast)
        check_shapes(shape, f"{name} (against {first})", jnp.shape(x),
                     broadcast=name == "advantages")
    if mask is not None:
        check_real(mask, "mask")
        check_shapes(shape, f"mask (against {first})", jnp.shape(mask), broadcast=True)
    where = None if mask is None else jnp.broadcast_to(jnp.asarray(mask, bool), shape)
    for name, x in arrays.items():
        check_finite(jnp.broadcast_to(x, shape) if name == "advantages" else x, name, where)


# ----------------------------------------------------------------------------- aggregation
def aggregate(token_loss: ArrayLike, mask: ArrayLike | None,
              mode: str = "token-mean") -> jax.Array:
    """Reduce a per-token loss ``[B, T]`` to a scalar (``loss_agg_mode`` of verl/TRL).

    - ``"token-mean"``: ``sum(l*m) / sum(m)`` (DAPO; TRL "dapo"/"bnpo");
    - ``"seq-mean-token-mean"``: ``mean_b(sum_t l*m / sum_t m)`` (original GRPO); rows with no
      valid token are left out of the mean over b (as verl does);
    - ``"seq-mean-token-sum"``: ``mean_b(sum_t l*m)``;
    - ``"seq-mean-token-sum-norm"``: ``sum(l*m) / (B*T)`` (Dr.GRPO, constant normaliser).

    A fully masked batch gives 0.
    """
    check_choice("loss_agg_mode", mode, AGG_MODES)
    check_real(token_loss, "token_loss")
    token_loss = jnp.asarray(token_loss)
    if token_loss.ndim != 2:
        raise ValueError(f"token_loss must have shape [B, T]; got shape {token_loss.shape}")
    if 0 in token_loss.shape:
        raise ValueError(f"token_loss of shape {token_loss.shape} is empty; it needs B >= 1 "
                         "rows of T >= 1 tokens (mask out tokens instead of dropping them)")
    m = _mask_like(token_loss, mask)
    if m.shape != token_loss.shape:
        raise ValueError(f"mask shape {m.shape} does not match token_loss shape {token_loss.shape}")
    check_finite(token_loss, "token_loss", where=m)
    mf = m.astype(token_loss.dtype)
    masked = jnp.where(m, token_loss, 0)
    rows = masked.sum(-1)
    if mode == "token-mean":
        return masked.sum() / jnp.maximum(mf.sum(), 1)
    if mode == "seq-mean-token-mean":
        count = mf.sum(-1)
        has = count > 0
        per_seq = jnp.where(has, rows / jnp.maximum(count, 1), 0)
        return per_seq.sum() / jnp.maximum(has.sum(), 1).astype(token_loss.dtype)
    if mode == "seq-mean-token-sum":
        return rows.mean()
    batch, length = token_loss.shape
    return masked.sum() / (batch * length)


def masked_mean(x: ArrayLike, mask: ArrayLike | None = None) -> jax.Array:
    """Mean of ``x`` over valid entries; 0 when none is valid (valid entries must be finite).
    ``mask`` must broadcast with ``x`` (one-line ValueError otherwise)."""
    check_real(x, "x")
    x = jnp.asarray(x)
    m = _mask_like(x, mask)
    try:
        np.broadcast_shapes(x.shape, m.shape)
    except ValueError:
        raise ValueError(f"mask of shape {m.shape} is not allowed; it must broadcast with x "
                         f"of shape {x.shape}") from None
    check_finite(x, "x", where=m)
    # where, not x * mask: inf/NaN garbage at padded positions must stay out (as in aggregate)
    return jnp.where(m, x, 0).sum() / jnp.maximum(m.sum(), 1)


# ----------------------------------------------------------------------------- policy losses
def ratio(log_prob: ArrayLike, old_log_prob: ArrayLike) -> jax.Array:
    """Importance ratio ``pi_theta / pi_old`` per token."""
    return jnp.exp(log_prob - old_log_prob)


def is_clipped(log_prob: ArrayLike, old_log_prob: ArrayLike, advantages: ArrayLike, *,
               epsilon: float = 0.2, epsilon_high: float | None = None) -> jax.Array:
    """Where PPO's clip is active (the clipped surrogate is the larger loss), as verl counts it."""
    _check_epsilon(epsilon, epsilon_high)
    for name, x in (("log_prob", log_prob), ("old_log_prob", old_log_prob),
                    ("advantages", advantages)):
        check_real(x, name)
    eps_high = epsilon if epsilon_high is None else epsilon_high
    rho = ratio(log_prob, old_log_prob)
    adv = jnp.broadcast_to(advantages, rho.shape)
    return -adv * jnp.clip(rho, 1 - epsilon, 1 + eps_high) > -adv * rho


@_POLICY.register("pg")
def pg(log_prob: ArrayLike, old_log_prob: ArrayLike | None = None,
       advantages: ArrayLike | None = None, mask: ArrayLike | None = None) -> jax.Array:
    """Vanilla REINFORCE: ``-A * log pi_theta`` (the behaviour policy is not used)."""
    _check_tokens(mask, log_prob=log_prob, advantages=advantages)
    return -jnp.broadcast_to(advantages, jnp.shape(log_prob)) * log_prob


@_POLICY.register("ppo_clip")
def ppo_clip(log_prob: ArrayLike, old_log_prob: ArrayLike, advantages: ArrayLike,
             mask: ArrayLike | None = None, *, epsilon: float = 0.2,
             epsilon_high: float | None = None, clip_ratio_c: float | None = None,
             dual_clip: float | None = None) -> jax.Array:
    """PPO clipped surrogate ``-min(rho*A, clip(rho, 1-eps, 1+eps_high)*A)`` per token.

    ``epsilon_high`` (DAPO clip-higher; default ``epsilon``). Dual clip: with
    ``clip_ratio_c=c`` (alias ``dual_clip``; verl uses 3) the loss of tokens with A<0 is
    bounded above by ``-c*A``; ``c > 1`` (verl's assertion: below 1 it would cut into the
    clipped surrogate itself).
    """
    _check_epsilon(epsilon, epsilon_high)
    if clip_ratio_c is not None and dual_clip is not None and clip_ratio_c is not dual_clip:
        raise ValueError(f"clip_ratio_c={clip_ratio_c!r} and dual_clip={dual_clip!r} are both "
                         "given; they are one option, pass one of them")
    c = clip_ratio_c if clip_ratio_c is not None else dual_clip
    check_number(c, "clip_ratio_c", "> 1", lambda v: v > 1, optional=True)
    _check_tokens(mask, log_prob=log_prob, old_log_prob=old_log_prob, advantages=advantages)
    eps_high = epsilon if epsilon_high is None else epsilon_high
    rho = ratio(log_prob, old_log_prob)
    adv = jnp.broadcast_to(advantages, rho.shape)
    loss = jnp.maximum(-adv * rho, -adv * jnp.clip(rho, 1 - epsilon, 1 + eps_high))
    if c is not None:
        loss = jnp.where(adv < 0, jnp.minimum(loss, -c * adv), loss)
    return loss


def sequence_log_ratio(log_prob: ArrayLike, old_log_prob: ArrayLike,
                       mask: ArrayLike | None = None) -> jax.Array:
    """Per-sequence ``mean_t (log pi_theta - log pi_old)`` over valid tokens, shape ``[B, 1]``."""
    _check_tokens(mask, log_prob=log_prob, old_log_prob=old_log_prob)
    m = _mask_like(log_prob, mask)
    diff = jnp.where(m, log_prob - old_log_prob, 0)
    return diff.sum(-1, keepdims=True) / jnp.maximum(m.sum(-1, keepdims=True), 1)


@_POLICY.register("gspo")
def gspo(log_prob: ArrayLike, old_log_prob: ArrayLike, advantages: ArrayLike,
         mask: ArrayLike | None = None, *, epsilon: float = 3e-4,
         epsilon_high: float = 4e-4) -> jax.Array:
    """GSPO: one length-normalised ratio ``s = exp(mean_t log rho_t)`` per sequence, clipped.

    As in verl, each token carries ``s_t = sg(s) * pi_theta(t) / sg(pi_theta(t))``: its value is
    the sequence ratio while its gradient flows through that token's log-prob.
    Defaults are the GSPO paper's (3e-4, 4e-4). As in verl the sequence log-ratio is capped at
    10 so a runaway ratio cannot overflow. Padded positions are ignored in the value, but
    their log-probs must be finite for the gradient to be.
    """
    _check_epsilon(epsilon, epsilon_high)
    _check_tokens(mask, log_prob=log_prob, old_log_prob=old_log_prob, advantages=advantages)
    seq = jnp.minimum(sequence_log_ratio(log_prob, old_log_prob, mask), 10.0)
    log_s = jax.lax.stop_gradient(seq) + log_prob - jax.lax.stop_gradient(log_prob)
    s = jnp.exp(log_s)
    adv = jnp.broadcast_to(advantages, s.shape)
    return jnp.maximum(-adv * s, -adv * jnp.clip(s, 1 - epsilon, 1 + epsilon_high))


@_POLICY.register("cispo")
def cispo(log_prob: ArrayLike, old_log_prob: ArrayLike, advantages: ArrayLike,
          mask: ArrayLike | None = None, *, epsilon: float | None = None,
          epsilon_high: float = 4.0) -> jax.Array:
    """CISPO: ``-sg(clip(rho, 1-eps, 1+eps_high)) * A * log pi_theta``.

    Only the importance weight is clipped, so every token keeps a gradient. By default there
    is no lower bound (``epsilon=None``), as in MiniMax-M1. The cap is ``1 + epsilon_high``
    (MiniMax-M1's form); TRL clamps at ``epsilon_high`` itself and recommends 5, which the
    default ``epsilon_high=4`` reproduces. ``epsilon`` in [0, 1] (1: no lower bound).
    """
    _check_epsilon(epsilon, epsilon_high, upper_closed=True)
    _check_tokens(mask, log_prob=log_prob, old_log_prob=old_log_prob, advantages=advantages)
    rho = ratio(log_prob, old_log_prob)
    low = 0.0 if epsilon is None else 1 - epsilon
    weight = jax.lax.stop_gradient(jnp.clip(rho, low, 1 + epsilon_high))
    return -weight * jnp.broadcast_to(advantages, rho.shape) * log_prob


def decoupled_ppo(log_prob: ArrayLike, prox_log_prob: ArrayLike, behav_log_prob: ArrayLike,
                  advantages: ArrayLike, mask: ArrayLike | None = None, *,
                  epsilon: float = 0.2, epsilon_high: float | None = None,
                  behav_cap: float | None = None) -> jax.Array:
    """AReaL's decoupled PPO: ``-w * min(u*A, clip(u, 1-eps, 1+eps_high)*A)``.

    ``w = pi_prox / pi_behav`` (no gradient; tokens with ``w > behav_cap`` get weight 0 when a
    cap is given; ``behav_cap >= 1``), ``u = pi_theta / pi_prox``. With ``pi_prox = pi_behav``
    it is PPO.
    """
    if behav_cap is not None:
        _check_cap(behav_cap, "behav_cap")
    _check_tokens(mask, log_prob=log_prob, prox_log_prob=prox_log_prob,
                  behav_log_prob=behav_log_prob, advantages=advantages)
    w = jax.lax.stop_gradient(ratio(prox_log_prob, behav_log_prob))
    if behav_cap is not None:
        w = jnp.where(w > behav_cap, 0.0, w)
    return w * ppo_clip(log_prob, prox_log_prob, advantages, mask, epsilon=epsilon,
                        epsilon_high=epsilon_high)


# ----------------------------------------------------------------------------- KL estimators
@_KL.register("k1")
def kl_k1(log_prob: jax.Array, ref_log_prob: jax.Array) -> jax.Array:
    """``x = log pi - log pi_ref``; unbiased for KL(pi || ref) under samples of pi."""
    return log_prob - ref_log_prob


@_KL.register("k2")
def kl_k2(log_prob: jax.Array, ref_log_prob: jax.Array) -> jax.Array:
    """``x**2 / 2``."""
    x = log_prob - ref_log_prob
    return 0.5 * x * x


@_KL.register("k3")
def kl_k3(log_prob: ArrayLike, ref_log_prob: ArrayLike) -> jax.Array:
    """``exp(-x) + x - 1`` (Schulman's low-variance, non-negative estimator)."""
    x = log_prob - ref_log_prob
    return jnp.expm1(-x) + x


def kl(name: str, log_prob: jax.Array, ref_log_prob: jax.Array) -> jax.Array:
    """Per-token KL estimate by estimator name (``"k1"``, ``"k2"``, ``"k3"``).

    Concrete log-probs must be finite everywhere (there is no mask: pass finite padding).
    """
    fn = _KL.get(name)
    _check_tokens(None, log_prob=log_prob, ref_log_prob=ref_log_prob)
    return fn(log_prob, ref_log_prob)


# ----------------------------------------------------------------------------- rollout corrections
def tis_weights(train_log_prob: ArrayLike, rollout_log_prob: ArrayLike, *,
                cap: float = 2.0) -> jax.Array:
    """Truncated importance sampling: ``min(pi_train / pi_rollout, cap)``, no gradient.

    ``cap`` is a finite number >= 1; concrete log-probs must be finite (no mask here).
    """
    _check_cap(cap)
    _check_tokens(None, train_log_prob=train_log_prob, rollout_log_prob=rollout_log_prob)
    return jax.lax.stop_gradient(jnp.minimum(ratio(train_log_prob, rollout_log_prob), cap))


def mis_weights(train_log_prob: ArrayLike, rollout_log_prob: ArrayLike, *,
                cap: float = 2.0) -> tuple[jax.Array, jax.Array]:
    """Masked importance sampling: ``rho * 1[1/cap <= rho <= cap]`` and that acceptance mask.

    Returns ``(weights, accepted)``; rejected tokens should leave both the numerator and the
    denominator of the aggregation (``mask & accepted``). ``cap`` is a finite number >= 1
    (``cap = 1`` accepts only ``rho = 1``); concrete log-probs must be finite (no mask here).
    """
    _check_cap(cap)
    _check_tokens(None, train_log_prob=train_log_prob, rollout_log_prob=rollout_log_prob)
    rho = jax.lax.stop_gradient(ratio(train_log_prob, rollout_log_prob))
    accepted = (rho >= 1.0 / cap) & (rho <= cap)
    return jnp.where(accepted, rho, 0.0), accepted


def mismatch_metrics(train_log_prob: ArrayLike, rollout_log_prob: ArrayLike,
                     mask: ArrayLike | None = None) -> dict[str, jax.Array]:
    """Train/rollout mismatch: k1 = E[log pi_rollout - log pi_train], k3 = E[rho - log rho - 1],
    chi2 = E[rho^2] - 1 with ``rho = pi_train / pi_rollout``, over valid tokens."""
    _check_tokens(mask, train_log_prob=train_log_prob, rollout_log_prob=rollout_log_prob)
    log_rho = train_log_prob - rollout_log_prob
    rho = jnp.exp(log_rho)
    return {
        "k1": masked_mean(-log_rho, mask),
        "k3": masked_mean(rho - log_rho - 1, mask),
        "chi2": masked_mean(rho * rho, mask) - 1,
    }


# ----------------------------------------------------------------------------- registry
def get(name: str) -> Callable[..., jax.Array]:
    """Policy loss by name (``pg``, ``ppo_clip``, ``gspo``, ``cispo``, or a registered one)."""
    return _POLICY.get(name)


def names() -> list[str]:
    return _POLICY.names()


def kl_names() -> list[str]:
    return _KL.names()


def register(name: str, fn: Callable[..., jax.Array] | None = None, *,
             overwrite: bool = False) -> Callable[..., Any]:
    """Register ``fn(log_prob, old_log_prob, advantages, mask=None, **kw) -> [B, T]``.

    Trainers call it through :func:`rlvr_lab.train.core.policy_loss`, which passes the
    options the loss declares (``epsilon``, ``epsilon_high``, ``clip_ratio_c``) from the config.
    """
    return _POLICY.register(name, fn, overwrite=overwrite)
