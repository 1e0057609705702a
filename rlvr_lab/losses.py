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

AGG_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm",
             "token-sum")
# verl's conventions, available by option (our defaults differ; docs/config.md says how):
VERL_LOG_RATIO_CLAMP = 20.0    # ``log_ratio_clamp=``: verl clamps log(pi/pi_old) to +-20
VERL_K3_CLAMP = (20.0, 10.0)   # ``kl_k3(clamp=)``: verl clamps k3's input to +-20, output to +-10
EMPTY_ROWS = ("count", "skip")  # ``aggregate(empty_rows=)``: "skip" is verl's and tunix's


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
              mode: str = "token-mean", *, empty_rows: str = "count",
              loss_scale_factor: float | None = None) -> jax.Array:
    """Reduce a per-token loss ``[B, T]`` to a scalar (``loss_agg_mode`` of verl/TRL).

    - ``"token-mean"``: ``sum(l*m) / sum(m)`` (DAPO; TRL "dapo"/"bnpo");
    - ``"seq-mean-token-mean"``: ``mean_b(sum_t l*m / sum_t m)`` (original GRPO); rows with no
      valid token are left out of the mean over b (as verl does);
    - ``"seq-mean-token-sum"``: ``mean_b(sum_t l*m)``;
    - ``"seq-mean-token-sum-norm"``: ``sum(l*m) / (B*T)`` (Dr.GRPO, constant normaliser);
    - ``"token-sum"``: ``sum(l*m)`` (no normaliser).

    ``empty_rows``: how ``seq-mean-token-sum`` and ``seq-mean-token-sum-norm`` count rows with
    no valid token: ``"count"`` (default) divides by all B rows; ``"skip"`` by the non-empty
    rows only, as verl and tunix do (``seq-mean-token-mean`` always skips them).
    ``loss_scale_factor`` replaces T in ``seq-mean-token-sum-norm`` (verl's option of that
    name: a constant normaliser across batches of different padded lengths).

    A fully masked batch gives 0.
    """
    check_choice("loss_agg_mode", mode, AGG_MODES)
    check_choice("empty_rows", empty_rows, EMPTY_ROWS)
    check_number(loss_scale_factor, "loss_scale_factor", "> 0", lambda v: v > 0, optional=True)
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
    if mode == "token-sum":
        return masked.sum()
    non_empty = jnp.maximum((mf.sum(-1) > 0).sum(), 1).astype(token_loss.dtype)
    if mode == "seq-mean-token-mean":
        count = mf.sum(-1)
        has = count > 0
        per_seq = jnp.where(has, rows / jnp.maximum(count, 1), 0)
        return per_seq.sum() / jnp.maximum(has.sum(), 1).astype(token_loss.dtype)
    if mode == "seq-mean-token-sum":
        return rows.sum() / non_empty if empty_rows == "skip" else rows.mean()
    batch, length = token_loss.shape
    if loss_scale_factor is not None:
        length = loss_scale_factor
    if empty_rows == "skip":
        batch = non_empty
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
def ratio(log_prob: ArrayLike, old_log_prob: ArrayLike, *,
          clamp: float | None = None) -> jax.Array:
    """Importance ratio ``pi_theta / pi_old`` per token; ``clamp=c`` clips the log-ratio to
    ``[-c, c]`` first (verl: :data:`VERL_LOG_RATIO_CLAMP`, so a runaway ratio cannot overflow;
    the clipped tokens get no gradient). None (default): not clipped."""
    log_ratio = log_prob - old_log_prob
    if clamp is None:
        return jnp.exp(log_ratio)
    return jnp.exp(jnp.clip(log_ratio, -clamp, clamp))


def _check_clamp(clamp):
    check_number(clamp, "log_ratio_clamp", "> 0", lambda v: v > 0, optional=True)


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
    """Vanilla REINFORCE: ``-A * log pi_theta`` (the behaviour policy is not used).

    Also registered as ``gpg``: GPG's loss (arXiv:2504.02546) and verl's ``gpg``."""
    _check_tokens(mask, log_prob=log_prob, advantages=advantages)
    return -jnp.broadcast_to(advantages, jnp.shape(log_prob)) * log_prob


@_POLICY.register("ppo_clip")
def ppo_clip(log_prob: ArrayLike, old_log_prob: ArrayLike, advantages: ArrayLike,
             mask: ArrayLike | None = None, *, epsilon: float = 0.2,
             epsilon_high: float | None = None, clip_ratio_c: float | None = None,
             dual_clip: float | None = None,
             log_ratio_clamp: float | None = None) -> jax.Array:
    """PPO clipped surrogate ``-min(rho*A, clip(rho, 1-eps, 1+eps_high)*A)`` per token.

    ``epsilon_high`` (DAPO clip-higher; default ``epsilon``). Dual clip: with
    ``clip_ratio_c=c`` (alias ``dual_clip``; verl uses 3) the loss of tokens with A<0 is
    bounded above by ``-c*A``; ``c > 1`` (verl's assertion: below 1 it would cut into the
    clipped surrogate itself). ``log_ratio_clamp`` (None: off; verl: 20, see :func:`ratio`).

    Registered as ``ppo_clip`` and as verl's ``vanilla`` (PPO, arXiv:1707.06347 Eq. 7; dual
    clip arXiv:1912.09729; clip-higher DAPO arXiv:2503.14476). verl's
    ``vanilla`` also clamps the log-ratio at 20 and applies the dual clip with c = 3 by
    default; here both are off unless asked for.
    """
    _check_epsilon(epsilon, epsilon_high)
    _check_clamp(log_ratio_clamp)
    if clip_ratio_c is not None and dual_clip is not None and clip_ratio_c is not dual_clip:
        raise ValueError(f"clip_ratio_c={clip_ratio_c!r} and dual_clip={dual_clip!r} are both "
                         "given; they are one option, pass one of them")
    c = clip_ratio_c if clip_ratio_c is not None else dual_clip
    check_number(c, "clip_ratio_c", "> 1", lambda v: v > 1, optional=True)
    _check_tokens(mask, log_prob=log_prob, old_log_prob=old_log_prob, advantages=advantages)
    eps_high = epsilon if epsilon_high is None else epsilon_high
    rho = ratio(log_prob, old_log_prob, clamp=log_ratio_clamp)
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
          epsilon_high: float = 4.0, log_ratio_clamp: float | None = None) -> jax.Array:
    """CISPO: ``-sg(clip(rho, 1-eps, 1+eps_high)) * A * log pi_theta``.

    Only the importance weight is clipped, so every token keeps a gradient. By default there
    is no lower bound (``epsilon=None``), as in MiniMax-M1. The cap is ``1 + epsilon_high``
    (MiniMax-M1's form); TRL clamps at ``epsilon_high`` itself and recommends 5, which the
    default ``epsilon_high=4`` reproduces. ``epsilon`` in [0, 1] (1: no lower bound).

    verl's ``cispo`` clips from below too, at ``1 - clip_ratio_low`` (0.2 by default): pass
    ``epsilon=0.2`` for that (a trainer config's ``epsilon`` is not passed to CISPO, so a verl
    config copied here has no lower clip unless the loss is given one), and
    ``log_ratio_clamp=20`` for verl's clamp. MiniMax-M1, arXiv:2506.13585 (CISPO objective).
    """
    _check_epsilon(epsilon, epsilon_high, upper_closed=True)
    _check_clamp(log_ratio_clamp)
    _check_tokens(mask, log_prob=log_prob, old_log_prob=old_log_prob, advantages=advantages)
    rho = ratio(log_prob, old_log_prob, clamp=log_ratio_clamp)
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
def kl_k3(log_prob: ArrayLike, ref_log_prob: ArrayLike, *,
          clamp: tuple[float, float] | None = None) -> jax.Array:
    """``exp(-x) + x - 1`` (Schulman's low-variance, non-negative estimator).

    ``clamp=(c_in, c_out)`` clips ``x`` to ``[-c_in, c_in]`` and the estimate to
    ``[-c_out, c_out]`` (verl's ``low_var_kl``: :data:`VERL_K3_CLAMP` = (20, 10)); None
    (default): no clip."""
    x = log_prob - ref_log_prob
    if clamp is None:
        return jnp.expm1(-x) + x
    c_in, c_out = clamp
    x = jnp.clip(x, -c_in, c_in)
    return jnp.clip(jnp.expm1(-x) + x, -c_out, c_out)


def kl(name: str, log_prob: jax.Array, ref_log_prob: jax.Array, **options: Any) -> jax.Array:
    """Per-token KL estimate by estimator name (``"k1"``, ``"k2"``, ``"k3"``, verl's ``"kl"``,
    ``"mse"``, ``"low_var_kl"``, ``"abs"``, and the ``+`` variants); ``options`` go to the
    estimator (``clamp=`` for k3).

    Concrete log-probs must be finite everywhere (there is no mask: pass finite padding).
    """
    fn = _KL.get(name)
    _check_tokens(None, log_prob=log_prob, ref_log_prob=ref_log_prob)
    return fn(log_prob, ref_log_prob, **options)


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


# ----------------------------------------------------------------------------- the verl zoo
# Policy losses and KL estimators that verl, TRL or tunix offer beyond the ones above, each
# under our name and verl's (docs/config.md has the table of names and conventions).
_POLICY.register("vanilla", ppo_clip)   # verl's name of the PPO clipped surrogate
_POLICY.register("gspo-token", gspo)   # tunix's loss_algo name of the same token-level GSPO
# GPG (arXiv:2504.02546): the plain policy gradient -A * log pi on GPG's advantages
# (rlvr_lab.advantages.gpg); verl's ``gpg`` loss is exactly ``pg``
_POLICY.register("gpg", pg)


def _masked_token_mean(x, m):
    """Mean of ``x`` over the valid tokens of the whole batch (0 when none), no checks."""
    return jnp.where(m, x, 0).sum() / jnp.maximum(m.sum(), 1)


def _rank(priority):
    """Rank of each entry of ``priority`` in ascending order (0 = smallest; ties by position)."""
    flat = priority.reshape(-1)
    return jnp.argsort(jnp.argsort(flat, stable=True), stable=True).reshape(priority.shape)


def _token_covariance(log_prob, adv, m):
    """Per-token ``(A - mean A) * (log pi - mean log pi)`` over the batch's valid tokens, no
    gradient (Cui et al. 2025, arXiv:2505.22617: the covariance that drives entropy)."""
    lp = jax.lax.stop_gradient(log_prob)
    a = jax.lax.stop_gradient(adv)
    return (a - _masked_token_mean(a, m)) * (lp - _masked_token_mean(lp, m))


def _selected_count(ratio_, m, dtype):
    """``max(floor(ratio * valid tokens), 1)`` as verl counts the tokens to clip or penalise."""
    return jnp.maximum(jnp.floor(ratio_ * m.sum().astype(dtype)), 1)


@_POLICY.register("clip_cov")
def clip_cov(log_prob: ArrayLike, old_log_prob: ArrayLike, advantages: ArrayLike,
             mask: ArrayLike | None = None, *, epsilon: float = 0.2,
             epsilon_high: float | None = None, clip_cov_ratio: float = 2e-4,
             clip_cov_lb: float = 1.0, clip_cov_ub: float = 5.0,
             key: jax.Array | None = None) -> jax.Array:
    """Clip-Cov (Cui et al. 2025, arXiv:2505.22617, the Clip-Cov objective): PPO's clipped
    loss, with the gradient of a few high-covariance tokens removed.

    Among valid tokens that PPO's clip leaves active and whose covariance
    (:func:`_token_covariance`, over the batch) lies in ``(clip_cov_lb, clip_cov_ub)``,
    ``max(floor(clip_cov_ratio * valid), 1)`` get loss 0 (detached). verl draws them at
    random; here ``key=None`` takes them in row-major order (deterministic), a PRNG ``key``
    draws them uniformly. Defaults are verl's.
    """
    _check_epsilon(epsilon, epsilon_high)
    check_number(clip_cov_ratio, "clip_cov_ratio", "> 0", lambda v: v > 0)
    _check_tokens(mask, log_prob=log_prob, old_log_prob=old_log_prob, advantages=advantages)
    log_prob = jnp.asarray(log_prob)
    m = _mask_like(log_prob, mask)
    eps_high = epsilon if epsilon_high is None else epsilon_high
    rho = ratio(log_prob, old_log_prob)
    adv = jnp.broadcast_to(advantages, rho.shape)
    unclipped = -adv * rho
    clipped = -adv * jnp.clip(rho, 1 - epsilon, 1 + eps_high)
    cov = _token_covariance(log_prob, adv, m)
    eligible = m & ~(clipped > unclipped) & (cov > clip_cov_lb) & (cov < clip_cov_ub)
    order = (jnp.arange(rho.size, dtype=rho.dtype).reshape(rho.shape) if key is None
             else jax.random.uniform(key, rho.shape))
    rank = _rank(jnp.where(eligible, order, jnp.inf))
    dropped = eligible & (rank < _selected_count(clip_cov_ratio, m, rho.dtype))
    return jnp.where(dropped, 0.0, jnp.maximum(unclipped, clipped))


@_POLICY.register("kl_cov")
def kl_cov(log_prob: ArrayLike, old_log_prob: ArrayLike, advantages: ArrayLike,
           mask: ArrayLike | None = None, *, kl_cov_ratio: float = 2e-4,
           ppo_kl_coef: float = 0.1) -> jax.Array:
    """KL-Cov (Cui et al. 2025, arXiv:2505.22617, the KL-Cov objective): the unclipped surrogate
    ``-rho * A``, plus ``ppo_kl_coef * |log rho|`` on the ``max(floor(kl_cov_ratio * valid),
    1)`` valid tokens of largest covariance (over the batch; ties by position).

    Defaults are verl's config (``kl_cov_ratio`` 2e-4, ``ppo_kl_coef`` 0.1).
    """
    check_number(kl_cov_ratio, "kl_cov_ratio", "> 0", lambda v: v > 0)
    check_number(ppo_kl_coef, "ppo_kl_coef", ">= 0", lambda v: v >= 0)
    _check_tokens(mask, log_prob=log_prob, old_log_prob=old_log_prob, advantages=advantages)
    log_prob = jnp.asarray(log_prob)
    m = _mask_like(log_prob, mask)
    log_ratio = log_prob - old_log_prob
    adv = jnp.broadcast_to(advantages, log_ratio.shape)
    cov = _token_covariance(log_prob, adv, m)
    rank = _rank(jnp.where(m, -cov, jnp.inf))
    top = m & (rank < _selected_count(kl_cov_ratio, m, log_ratio.dtype))
    return -adv * jnp.exp(log_ratio) + jnp.where(top, ppo_kl_coef * jnp.abs(log_ratio), 0.0)


@_POLICY.register("gmpo")
def gmpo(log_prob: ArrayLike, old_log_prob: ArrayLike, advantages: ArrayLike,
         mask: ArrayLike | None = None, *, epsilon: float = 0.4,
         epsilon_high: float | None = None) -> jax.Array:
    """GMPO (Zhao et al. 2025, arXiv:2507.20673, the GMPO objective): the geometric mean of the
    token ratios, clipped in log space per token, ``-mean_t(A) * exp(mean_t sgn(A) min(sgn(A) x_t,
    sgn(A) clip(x_t, -epsilon, epsilon_high)))`` with ``x_t = log rho_t`` over valid tokens.

    One loss per sequence; every token carries it, so aggregate with
    ``"seq-mean-token-mean"`` for the paper's (and verl's ``geo_mean``) mean over sequences
    (verl's mean also counts empty rows, with loss 0). ``epsilon`` is a log-ratio bound: the
    paper's default 0.4 is ``rho in (e^-0.4, e^0.4)``; verl passes its ``clip_ratio`` (0.2).
    """
    _check_epsilon(epsilon, epsilon_high)
    _check_tokens(mask, log_prob=log_prob, old_log_prob=old_log_prob, advantages=advantages)
    log_prob = jnp.asarray(log_prob)
    m = _mask_like(log_prob, mask)
    eps_high = epsilon if epsilon_high is None else epsilon_high
    x = log_prob - old_log_prob
    adv = jnp.broadcast_to(advantages, x.shape)
    sign = jnp.sign(adv)
    kept = sign * jnp.minimum(sign * x, sign * jnp.clip(x, -epsilon, eps_high))
    count = jnp.maximum(m.sum(-1, keepdims=True), 1)
    seq_ratio = jnp.exp(jnp.where(m, kept, 0).sum(-1, keepdims=True) / count)
    seq_adv = jnp.where(m, adv, 0).sum(-1, keepdims=True) / count
    return jnp.broadcast_to(-seq_adv * seq_ratio, x.shape)


_POLICY.register("geo_mean", gmpo)


@_POLICY.register("sapo")
def sapo(log_prob: ArrayLike, old_log_prob: ArrayLike, advantages: ArrayLike,
         mask: ArrayLike | None = None, *, tau_pos: float = 1.0, tau_neg: float = 1.05,
         log_ratio_clamp: float | None = None) -> jax.Array:
    """SAPO (Gao et al. 2025, arXiv:2511.20347, the soft-gated objective): a soft gate instead
    of a hard clip, ``-g_tau(rho) * A`` with ``g_tau(rho) = (4 / tau) * sigmoid(tau * (rho -
    1))``, ``tau = tau_pos`` where ``A > 0`` and ``tau_neg`` elsewhere (its gradient at
    ``rho = 1`` is the policy gradient's). Defaults are verl's (1.0, 1.05); verl recommends
    ``"seq-mean-token-mean"``. ``log_ratio_clamp`` as :func:`ppo_clip` (verl: 20).
    """
    for name, tau in (("tau_pos", tau_pos), ("tau_neg", tau_neg)):
        check_number(tau, name, "> 0", lambda v: v > 0)
    _check_clamp(log_ratio_clamp)
    _check_tokens(mask, log_prob=log_prob, old_log_prob=old_log_prob, advantages=advantages)
    rho = ratio(log_prob, old_log_prob, clamp=log_ratio_clamp)
    adv = jnp.broadcast_to(advantages, rho.shape)
    tau = jnp.where(adv > 0, tau_pos, tau_neg).astype(rho.dtype)
    return -(4.0 / tau) * jax.nn.sigmoid(tau * (rho - 1)) * adv


@_KL.register("abs")
def kl_abs(log_prob: ArrayLike, ref_log_prob: ArrayLike) -> jax.Array:
    """``|x|`` (verl's and TRL's ``abs``; not an estimator of the KL, a penalty)."""
    return jnp.abs(jnp.asarray(log_prob) - ref_log_prob)


def _k2_gradient(value: jax.Array, log_prob: ArrayLike, ref_log_prob: ArrayLike) -> jax.Array:
    """``value`` in the forward pass, the gradient of k2 in the backward pass (straight-through:
    k2's gradient is the unbiased gradient of KL(pi || ref); k1's and k3's are not)."""
    k2 = kl_k2(log_prob, ref_log_prob)
    return k2 - jax.lax.stop_gradient(k2) + jax.lax.stop_gradient(value)


@_KL.register("k1+")
def kl_k1_plus(log_prob: ArrayLike, ref_log_prob: ArrayLike) -> jax.Array:
    """k1's value with k2's gradient (verl's ``k1+`` / ``kl+``, its ``kl_penalty``; Schulman
    2020, "Approximating KL divergence": the estimators k1, k2, k3)."""
    return _k2_gradient(kl_k1(log_prob, ref_log_prob), log_prob, ref_log_prob)


@_KL.register("k3+")
def kl_k3_plus(log_prob: ArrayLike, ref_log_prob: ArrayLike, *,
               clamp: tuple[float, float] | None = None) -> jax.Array:
    """k3's value (``clamp`` as :func:`kl_k3`) with k2's gradient (verl's ``k3+`` /
    ``low_var_kl+``)."""
    return _k2_gradient(kl_k3(log_prob, ref_log_prob, clamp=clamp), log_prob, ref_log_prob)


# verl's kl_loss_type / kl_penalty names
for _verl, _ours in (("kl", kl_k1), ("mse", kl_k2), ("low_var_kl", kl_k3), ("kl+", kl_k1_plus),
                     ("low_var_kl+", kl_k3_plus)):
    _KL.register(_verl, _ours)
del _verl, _ours


# ----------------------------------------------------------------------------- sequence-level corrections, KL control
def _sequence_log_ratio_sum(train_log_prob, rollout_log_prob, mask):
    """``sum_t log(pi_train / pi_rollout)`` over valid tokens, ``[B, 1]``, clipped to
    ``+-VERL_LOG_RATIO_CLAMP`` (verl's safety bound before ``exp``)."""
    m = _mask_like(train_log_prob, mask)
    diff = jnp.where(m, jnp.asarray(train_log_prob) - rollout_log_prob, 0)
    total = diff.sum(-1, keepdims=True)
    return jnp.clip(total, -VERL_LOG_RATIO_CLAMP, VERL_LOG_RATIO_CLAMP)


def sequence_tis_weights(train_log_prob: ArrayLike, rollout_log_prob: ArrayLike,
                         mask: ArrayLike | None = None, *, cap: float = 2.0) -> jax.Array:
    """Sequence-level truncated importance sampling: ``min(prod_t rho_t, cap)`` per sequence
    (``rho_t = pi_train / pi_rollout`` over valid tokens), broadcast over its tokens, no
    gradient; verl's ``rollout_is="sequence"`` (the summed log-ratio clipped to +-20 first).
    The token-level form is :func:`tis_weights`. ``cap >= 1``."""
    _check_cap(cap)
    _check_tokens(mask, train_log_prob=train_log_prob, rollout_log_prob=rollout_log_prob)
    w = jnp.minimum(jnp.exp(_sequence_log_ratio_sum(train_log_prob, rollout_log_prob, mask)), cap)
    return jax.lax.stop_gradient(jnp.broadcast_to(w, jnp.shape(train_log_prob)))


def sequence_mis_weights(train_log_prob: ArrayLike, rollout_log_prob: ArrayLike,
                         mask: ArrayLike | None = None, *,
                         cap: float = 2.0) -> tuple[jax.Array, jax.Array]:
    """Sequence-level rejection sampling: ``(weights, accepted)`` with the sequence ratio
    ``prod_t rho_t`` where it lies in ``[1/cap, cap]`` and 0 elsewhere, broadcast over the
    sequence's tokens (no gradient). A rejected sequence should leave the aggregation
    (``mask & accepted``), as :func:`mis_weights` for tokens. verl's ``rollout_rs="seq_sum_k1"``
    with threshold ``cap`` keeps the same sequences. ``cap >= 1``."""
    _check_cap(cap)
    _check_tokens(mask, train_log_prob=train_log_prob, rollout_log_prob=rollout_log_prob)
    log_w = _sequence_log_ratio_sum(train_log_prob, rollout_log_prob, mask)
    accepted = jnp.broadcast_to(jnp.abs(log_w) <= jnp.log(cap), jnp.shape(train_log_prob))
    w = jnp.broadcast_to(jnp.exp(log_w), accepted.shape)
    return jax.lax.stop_gradient(jnp.where(accepted, w, 0.0)), accepted


def adaptive_kl_coef(coef: ArrayLike, current_kl: ArrayLike, n_steps: ArrayLike, *,
                     target_kl: float, horizon: float) -> jax.Array:
    """One update of the adaptive KL controller (Ziegler et al. 2019, arXiv:1909.08593,
    Sec. 2.2; verl's ``AdaptiveKLController``): ``coef * (1 + e * n_steps / horizon)`` with
    ``e = clip(current_kl / target_kl - 1, -0.2, 0.2)``. Pure (carry ``coef`` in a scan);
    ``target_kl > 0``, ``horizon > 0``."""
    check_number(target_kl, "target_kl", "> 0", lambda v: v > 0)
    check_number(horizon, "horizon", "> 0", lambda v: v > 0)
    error = jnp.clip(jnp.asarray(current_kl) / target_kl - 1, -0.2, 0.2)
    return jnp.asarray(coef) * (1 + error * n_steps / horizon)


def kl_penalized_rewards(rewards: ArrayLike, kl_per_token: ArrayLike,
                         mask: ArrayLike | None = None, *, beta: float) -> jax.Array:
    """KL in the reward (verl's ``use_kl_in_reward``, InstructGPT's penalty): each outcome
    reward ``[B]`` minus ``beta`` times the sequence's summed per-token KL estimate ``[B, T]``
    over valid tokens (what verl's per-token penalty sums to over a response at
    ``gamma = 1``). ``beta >= 0``."""
    check_number(beta, "beta", ">= 0", lambda v: v >= 0)
    _check_tokens(mask, kl_per_token=kl_per_token)
    m = _mask_like(kl_per_token, mask)
    return jnp.asarray(rewards) - beta * jnp.where(m, kl_per_token, 0).sum(-1)
