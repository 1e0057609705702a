"""Group advantage estimators for outcome rewards.

Every estimator takes ``rewards`` of shape ``[B, G]`` (B prompts, G rollouts each) and an
optional boolean ``mask`` of the same shape marking valid rollouts (variable group sizes,
groups dropped by a filter). Results have the dtype of ``rewards``; masked entries are 0.
A group with fewer than two valid rollouts carries no relative signal and gets advantage 0
(verl instead uses mean 0 / std 1 for a lone rollout, i.e. A = r; we keep the group-relative
meaning: no comparison, no update).

All functions are pure and jittable, in float32 and float64.

Input checks (one-line ``ValueError``): ``rewards`` must be ``[B, G]`` with ``B, G >= 1`` (also
under ``jit``: shapes are static); on concrete inputs every valid reward must be finite (masked
entries may hold anything, NaN padding included) and ``eps`` a finite number ``>= 0``. Under
``jit`` the value checks are skipped and a NaN reward gives NaN advantages in its group (the
whole batch for ``scale="batch"`` and ``reinforce_pp_baseline``); wrap the estimator in
:func:`rlvr_lab.utils.checked` to keep the checks inside ``jit``.

Degenerate but valid inputs give 0, never NaN: a group of equal rewards, a group with one
valid rollout (``G = 1`` included), a fully masked group or batch, ``eps = 0`` with a zero scale.
``rewards`` must be real (complex, text: one-line TypeError). ``grpo`` stays finite for rewards
up to the dtype's largest value (``[[3e38, -3e38, 0]]`` in float32): its statistics are then
computed on ``rewards / s`` with a power of two ``s`` (``s = 1``, bit for bit the plain formula,
for every reward below ``sqrt(max / size) / 2``, about 1e18 in float32).
The estimators in :data:`NOT_GROUP_RELATIVE` (REINFORCE++ without baseline, ReMax) compare a
rollout with the batch or with a greedy response, not with its group: there a lone rollout or
a group of equal rewards can get a non-zero (always finite) advantage.
"""
from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from rlvr_lab._registry import Registry, check_choice
from rlvr_lab.utils import check_finite, check_number, check_real, is_traced

_REGISTRY: Registry = Registry("estimator", "advantage estimator")
# registered names whose baseline is not the group (see the module docstring)
NOT_GROUP_RELATIVE = frozenset({"reinforce_pp", "reinforce_plus_plus", "remax"})
# registered names with an option that has no default: name -> that option
REQUIRED_OPTIONS = {"remax": "baseline"}


class Advantages(NamedTuple):
    """Uniform output of :func:`compute`: advantages and which rollouts enter the loss."""

    adv: jnp.ndarray
    keep: jnp.ndarray


def _prepare(rewards, mask):
    check_real(rewards, "rewards")
    rewards = jnp.asarray(rewards)
    if not jnp.issubdtype(rewards.dtype, jnp.floating):
        rewards = rewards.astype(jnp.float32)
    if rewards.ndim != 2:
        raise ValueError(f"rewards must have shape [B, G]; got shape {rewards.shape}")
    if 0 in rewards.shape:
        raise ValueError(f"rewards of shape {rewards.shape} is empty; it needs B >= 1 groups "
                         "of G >= 1 rollouts (mask out rollouts instead of dropping them)")
    if mask is None:
        mask = jnp.ones(rewards.shape, dtype=bool)
    else:
        check_real(mask, "mask")
        mask = jnp.asarray(mask, dtype=bool)
        if mask.shape != rewards.shape:
            raise ValueError(f"mask shape {mask.shape} does not match rewards shape "
                             f"{rewards.shape}")
    check_finite(rewards, "rewards", where=mask)
    return rewards, mask


def _group_stats(rewards, mask):
    """Masked group count, mean and sample std (ddof=1); safe for empty groups.

    The mean is accumulated relative to the group's first valid reward, so a group of equal
    rewards gets exactly that mean: a plain sum/n rounds, and dividing the rounding error by
    a std of the same size gave |A| ~ 0.1 for an all-equal float32 group.
    """
    m = mask.astype(rewards.dtype)
    n = m.sum(-1, keepdims=True)
    first = jnp.take_along_axis(rewards, jnp.argmax(mask, axis=-1)[:, None], axis=-1)
    shifted = jnp.where(mask, rewards - first, 0)
    mean = first + shifted.sum(-1, keepdims=True) / jnp.maximum(n, 1)
    dev = jnp.where(mask, rewards - mean, 0)
    var = (dev * dev).sum(-1, keepdims=True) / jnp.maximum(n - 1, 1)
    return n, mean, jnp.sqrt(var)


def _batch_std(values, mask):
    m = mask.astype(values.dtype)
    n = m.sum()
    # where, not values * m: a masked NaN (padding) must stay out, as in _group_stats
    mean = jnp.where(mask, values, 0).sum() / jnp.maximum(n, 1)
    dev = jnp.where(mask, values - mean, 0)
    return jnp.sqrt((dev * dev).sum() / jnp.maximum(n - 1, 1)), mean


def _divide(centred, scale):
    """``centred / scale``, and 0 where either is 0: with ``eps=0`` an all-equal group is 0
    (not 0/0), and so is a zero MAD (no finite scale exists; documented, never inf/NaN)."""
    safe = jnp.where(scale == 0, jnp.ones_like(scale), scale)
    return jnp.where((centred == 0) | (scale == 0), jnp.zeros_like(centred), centred / safe)


def _overflow_scale(rewards, mask, per_group=True):
    """Powers of two ``s`` (per group ``[B, 1]``, or one for the batch) such that the
    statistics of ``rewards / s`` cannot overflow; exactly 1 unless the valid rewards come
    within ``sqrt(max / n) / 2`` of the dtype's largest value (then dividing by ``s`` is
    exact, and ``A(r, eps) = A(r / s, eps / s)`` for every std-scaled estimator)."""
    info = jnp.finfo(rewards.dtype)
    big = jnp.abs(jnp.where(mask, rewards, 0)).max(axis=-1 if per_group else None,
                                                   keepdims=per_group)
    limit = math.sqrt(float(info.max) / (rewards.shape[-1] if per_group else rewards.size)) / 2
    # |rewards / s| < 4; 1 / s stays a normal number (XLA flushes subnormals to zero)
    exponent = jnp.minimum(jnp.floor(jnp.log2(jnp.maximum(big, 1))), info.maxexp - 2)
    s = jnp.ldexp(jnp.ones((), rewards.dtype), exponent.astype(jnp.int32))
    return jnp.where(big > limit, s, jnp.ones((), rewards.dtype))


def _check_eps(eps):
    check_number(eps, "eps", ">= 0", lambda v: v >= 0)


def _finish(adv, n, mask):
    """Zero masked entries and groups with fewer than two valid rollouts."""
    return jnp.where(mask & (n >= 2), adv, jnp.zeros_like(adv))


@_REGISTRY.register("grpo")
def grpo(rewards: ArrayLike, mask: ArrayLike | None = None, *, scale: str = "std",
         eps: float = 1e-6) -> jax.Array:
    """GRPO: ``(r - group mean) / (scale + eps)``.

    scale: ``"std"`` the group's sample std (ddof=1, as verl and TRL); ``"none"`` no scaling
    (Dr.GRPO); ``"batch"`` the sample std of all valid rewards in the batch (TRL
    ``scale_rewards="batch"``).
    """
    check_choice("scale", scale, ("std", "none", "batch"))
    rewards, mask = _prepare(rewards, mask)
    _check_eps(eps)
    s = _overflow_scale(rewards, mask, scale != "batch")   # 1 unless rewards are huge
    rewards, eps = rewards / s, eps / s
    n, mean, std = _group_stats(rewards, mask)
    centred = rewards - mean
    if scale == "std":
        adv = _divide(centred, std + eps)
    elif scale == "batch":
        adv = _divide(centred, _batch_std(rewards, mask)[0] + eps)
    else:
        adv = centred * s
    return _finish(adv, n, mask)


@_REGISTRY.register("dr_grpo")
def dr_grpo(rewards: ArrayLike, mask: ArrayLike | None = None) -> jax.Array:
    """Dr.GRPO: ``r - group mean`` (no std scaling); equals ``grpo(scale="none")``."""
    return grpo(rewards, mask, scale="none")


@_REGISTRY.register("rloo")
def rloo(rewards: ArrayLike, mask: ArrayLike | None = None) -> jax.Array:
    """RLOO: ``r_i - mean_{j != i} r_j = G/(G-1) * (r_i - group mean)`` over valid rollouts."""
    rewards, mask = _prepare(rewards, mask)
    n, mean, _ = _group_stats(rewards, mask)
    adv = (rewards - mean) * n / jnp.maximum(n - 1, 1)
    return _finish(adv, n, mask)


@_REGISTRY.register("reinforce_pp_baseline")
def reinforce_pp_baseline(rewards: ArrayLike, mask: ArrayLike | None = None, *,
                          eps: float = 1e-8) -> jax.Array:
    """REINFORCE++-baseline: centre by the group mean, then whiten over the whole batch.

    Whitening is verl's ``masked_whiten``: ``(a - mean_batch) / sqrt(var_batch + eps)`` with
    the unbiased variance over valid rollouts that belong to groups of at least two (verl
    whitens over tokens, i.e. weights each rollout by its length; here one rollout = one entry).
    """
    rewards, mask = _prepare(rewards, mask)
    _check_eps(eps)
    n, mean, _ = _group_stats(rewards, mask)
    valid = mask & (n >= 2)
    centred = jnp.where(valid, rewards - mean, 0)
    m = valid.astype(rewards.dtype)
    count = m.sum()
    bmean = (centred * m).sum() / jnp.maximum(count, 1)
    dev = (centred - bmean) * m
    var = (dev * dev).sum() / jnp.maximum(count - 1, 1)
    adv = _divide(centred - bmean, jnp.sqrt(var + eps))
    return jnp.where(valid, adv, jnp.zeros_like(adv))


def lower_median(values: jax.Array, mask: jax.Array) -> jax.Array:
    """Lower median of the valid entries of each row (``torch.median`` convention).

    Rows without a valid entry give 0.
    """
    big = jnp.finfo(values.dtype).max
    n = mask.sum(-1)
    ordered = jnp.sort(jnp.where(mask, values, big), axis=-1)
    idx = jnp.maximum((n - 1) // 2, 0)
    med = jnp.take_along_axis(ordered, idx[:, None], axis=-1)
    return jnp.where(n[:, None] > 0, med, jnp.zeros_like(med))


def mc_grpo(rewards: ArrayLike, mask: ArrayLike | None = None, *, scale: str = "mad",
            eps: float = 1e-3) -> Advantages:
    """MC-GRPO: median-centred advantages on groups of G+1 rollouts.

    ``m`` is the lower median of each group's valid rewards. The pivot is the first valid
    index whose reward equals ``m``; it is excluded from backpropagation so G rollouts
    contribute, as in plain G-rollout GRPO. Other rollouts tied with ``m`` keep A=0.

    scale: ``"mad"`` ``(r - m) / (median|r - m| + eps)`` as the authors' code (with binary
    rewards the lower-median MAD is 0 for every group size, so the minority side gets
    |A| = 1/eps; with ``eps=0`` it gets 0 rather than inf);
    ``"std"`` ``(r - m) / (sample std + eps)``; ``"none"`` ``r - m``.

    Returns ``Advantages(adv [B, G+1], keep [B, G+1])`` (a named pair); ``keep`` is False at
    the pivot and at masked entries. Groups with fewer than two valid rollouts get A=0.
    """
    check_choice("scale", scale, ("mad", "std", "none"))
    _check_eps(eps)
    rewards, mask = _prepare(rewards, mask)
    med = lower_median(rewards, mask)
    is_med = mask & (rewards == med)
    first = jnp.argmax(is_med, axis=-1)
    pivot = (jnp.arange(rewards.shape[-1])[None, :] == first[:, None]) & is_med
    centred = rewards - med
    n, _, std = _group_stats(rewards, mask)
    if scale == "mad":
        adv = _divide(centred, lower_median(jnp.abs(centred), mask) + eps)
    elif scale == "std":
        adv = _divide(centred, std + eps)
    else:
        adv = centred
    adv = _finish(adv, n, mask)
    keep = mask & ~pivot
    return Advantages(adv, keep)


_REGISTRY.register("mc_grpo", mc_grpo)


def get(name: str) -> Callable[..., jax.Array | Advantages]:
    """The estimator registered under ``name``; ValueError listing valid names otherwise."""
    return _REGISTRY.get(name)


def names() -> list[str]:
    """Names of all registered estimators."""
    return _REGISTRY.names()


def register(name: str, fn: Callable[..., jax.Array | Advantages] | None = None, *,
             overwrite: bool = False) -> Callable[..., Any]:
    """Register a new estimator ``fn(rewards, mask=None, **kw)`` (usable as a decorator).

    Return either the advantages or ``Advantages(adv, keep)`` like :func:`mc_grpo`.
    ``overwrite=True`` replaces an estimator already registered under ``name``.
    """
    return _REGISTRY.register(name, fn, overwrite=overwrite)


def options(name: str | Callable[..., Any]) -> tuple[str, ...] | None:
    """Keyword options an estimator (a registered name or a callable) accepts: its parameters
    after ``rewards, mask``; None when it takes ``**kwargs`` (anything is passed through)."""
    params = list(inspect.signature(_REGISTRY.resolve(name)).parameters.values())
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return tuple(p.name for p in params[2:]
                 if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


def check_options(name: str | Callable[..., Any], kwargs: Mapping[str, Any]) -> None:
    """One-line ValueError naming an option the estimator does not accept."""
    allowed = options(name)
    if allowed is None:
        return
    for key in kwargs:
        if key not in allowed:
            raise ValueError(f"unknown option {key!r} for advantage estimator "
                             f"{getattr(name, '__name__', name)!r}; valid: "
                             f"{', '.join(allowed) or 'none (it takes no options)'}")


def compute(name: str | Callable[..., Any], rewards: ArrayLike, mask: ArrayLike | None = None,
            **kwargs: Any) -> Advantages:
    """Run an estimator (a registered name or a callable) and return ``Advantages(adv, keep)``.

    ``keep`` marks rollouts that enter the loss: the mask, minus the pivot for ``mc_grpo``.
    An option the estimator does not accept is a ValueError (:func:`check_options`).
    """
    check_options(name, kwargs)
    out = _REGISTRY.resolve(name)(rewards, mask, **kwargs)
    if isinstance(out, tuple):
        return Advantages(*out)
    rewards, mask = _prepare(rewards, mask)
    return Advantages(out, mask)


# ----------------------------------------------------------------------------- the verl zoo
# Estimators that verl, TRL or tunix offer beyond the ones above. Each is registered under our
# name and, where verl's spelling differs, under verl's ``algorithm.adv_estimator`` name too
# (docs/config.md has the table of names and conventions).

def _shifted_mean(values, weights):
    """Weighted mean of each row, accumulated relative to the row's first weighted entry, so
    a row of equal values gets exactly that value (as :func:`_group_stats`)."""
    first = jnp.take_along_axis(values, jnp.argmax(weights > 0, axis=-1)[:, None], axis=-1)
    total = weights.sum(-1, keepdims=True)
    shifted = jnp.where(weights > 0, values - first, 0) * weights
    return first + shifted.sum(-1, keepdims=True) / jnp.where(total > 0, total, 1)


def _whiten(values, valid, eps):
    """verl's ``masked_whiten`` over the valid entries of the whole batch: ``(x - mean) /
    sqrt(var + eps)``, unbiased variance; 0 at invalid entries and where ``x == mean``."""
    flat_v = values.reshape(1, -1)
    flat_m = valid.reshape(1, -1)
    mean = _shifted_mean(flat_v, flat_m.astype(values.dtype))[0, 0]
    count = flat_m.sum().astype(values.dtype)
    dev = jnp.where(valid, values - mean, 0)
    var = (dev * dev).sum() / jnp.maximum(count - 1, 1)
    return jnp.where(valid, _divide(dev, jnp.sqrt(var + eps)), jnp.zeros_like(values))


@_REGISTRY.register("reinforce_pp")
def reinforce_pp(rewards: ArrayLike, mask: ArrayLike | None = None, *,
                 eps: float = 1e-8) -> jax.Array:
    """REINFORCE++ (Hu 2025, arXiv:2501.03262, the globally normalised advantage): no baseline
    per group; the outcome rewards are whitened over the whole batch,
    ``(r - mean_batch) / sqrt(var_batch + eps)`` (unbiased variance over valid rollouts).

    With an outcome reward and ``gamma = 1`` the token return is the reward itself, so this is
    verl's ``reinforce_plus_plus`` with one entry per rollout (verl whitens over tokens, which
    weights each rollout by its length). Not group-relative: a lone rollout still gets an
    advantage. A batch of equal rewards, or with fewer than two valid rollouts, gives 0.
    """
    rewards, mask = _prepare(rewards, mask)
    _check_eps(eps)
    return _whiten(rewards, mask, eps)


_REGISTRY.register("reinforce_plus_plus", reinforce_pp)
_REGISTRY.register("reinforce_plus_plus_baseline", reinforce_pp_baseline)
# verl's vectorised spellings of the same estimators, and tunix's name of Dr.GRPO
_REGISTRY.register("grpo_vectorized", grpo)
_REGISTRY.register("rloo_vectorized", rloo)
_REGISTRY.register("drgrpo", dr_grpo)


@_REGISTRY.register("remax")
def remax(rewards: ArrayLike, mask: ArrayLike | None = None, *,
          baseline: ArrayLike | None = None) -> jax.Array:
    """ReMax (Li et al. 2023, arXiv:2310.10505, Algorithm 1): ``A = r - b`` with ``b``
    the reward of the greedy (argmax-decoded) response to the same prompt.

    ``baseline`` is that greedy reward per prompt, shape ``[B]`` or ``[B, 1]`` (required: the
    estimator cannot decode; a trainer computes it). Not group-relative: every valid rollout,
    a lone one included, gets ``r - b`` (as verl's ``remax``); masked entries are 0.
    """
    rewards, mask = _prepare(rewards, mask)
    if baseline is None:
        raise ValueError("remax needs baseline= (the reward of the greedy response to each "
                         "prompt, shape [B] or [B, 1])")
    b = jnp.asarray(baseline, rewards.dtype).reshape(-1, 1)
    if b.shape[0] != rewards.shape[0]:
        raise ValueError(f"baseline has {b.shape[0]} entries for {rewards.shape[0]} prompts")
    check_finite(b, "baseline")
    return jnp.where(mask, rewards - b, jnp.zeros_like(rewards))


@_REGISTRY.register("opo")
def opo(rewards: ArrayLike, mask: ArrayLike | None = None, *,
        lengths: ArrayLike | None = None) -> jax.Array:
    """OPO (arXiv:2505.23585, the optimal reward baseline):
    ``A = r - b``, ``b = sum_j l_j r_j / sum_j l_j`` over the group's valid rollouts (the
    rollout itself included), ``l_j`` the response length in tokens.

    ``lengths`` ``[B, G]`` (non-negative; None: all equal, then ``b`` is the group mean and
    OPO equals Dr.GRPO). A group whose valid lengths sum to 0 falls back to equal weights.
    Groups with fewer than two valid rollouts get 0 (verl: baseline 0, ``A = r``).
    """
    rewards, mask = _prepare(rewards, mask)
    if lengths is None:
        weights = mask.astype(rewards.dtype)
    else:
        lengths = jnp.asarray(lengths, rewards.dtype)
        if lengths.shape != rewards.shape:
            raise ValueError(f"lengths shape {lengths.shape} does not match rewards shape "
                             f"{rewards.shape}")
        check_finite(lengths, "lengths", where=mask)
        weights = jnp.where(mask, lengths, 0)
        if not is_traced(weights) and bool(jnp.any(weights < 0)):
            raise ValueError("lengths must be >= 0 at valid rollouts")
        empty = weights.sum(-1, keepdims=True) <= 0
        weights = jnp.where(empty & mask, 1, weights)
    n = mask.sum(-1, keepdims=True)
    adv = rewards - _shifted_mean(rewards, weights)
    return _finish(adv, n, mask)


@_REGISTRY.register("gpg")
def gpg(rewards: ArrayLike, mask: ArrayLike | None = None, *, f_norm: float = 1.0,
        alpha: str = "informative") -> jax.Array:
    """GPG (Chu et al. 2025, arXiv:2504.02546, the corrected group advantage):
    ``alpha * (r - group mean) / f_norm``, the group-mean advantage rescaled for the rollouts
    that carry no gradient.

    ``alpha``: ``"informative"`` (the paper: ``B / (B - M)``, ``B`` valid rollouts, ``M`` those
    in groups of equal rewards or of one rollout, whose advantage is 0; the authors' code takes
    the same ratio over groups, ``1 / inverse_alpha``, equal for full groups);
    ``"nonzero_reward"`` (verl's ``gpg``: ``B / max(#nonzero rewards, 1)``). ``f_norm``
    (``> 0``) is the paper's optional normaliser (1: none). Groups with fewer than two valid
    rollouts get 0 (verl: a lone rollout gets ``alpha * r``).
    """
    check_choice("alpha", alpha, ("informative", "nonzero_reward"))
    check_number(f_norm, "f_norm", "> 0", lambda v: v > 0)
    rewards, mask = _prepare(rewards, mask)
    n, mean, std = _group_stats(rewards, mask)
    total = mask.sum().astype(rewards.dtype)
    if alpha == "informative":
        useful = mask & (n >= 2) & (std > 0)
    else:
        useful = mask & (rewards != 0)
    a = total / jnp.maximum(useful.sum(), 1).astype(rewards.dtype)
    return _finish(a * (rewards - mean) / f_norm, n, mask)


@_REGISTRY.register("grpo_passk")
def grpo_passk(rewards: ArrayLike, mask: ArrayLike | None = None, *, scale: str = "std",
               eps: float = 1e-6) -> jax.Array:
    """GRPO for pass@k (max@k) training, as verl's ``grpo_passk`` (which cites
    arXiv:2503.19595, Tang et al. 2025, the leave-one-out gradient of the group's maximum):
    only the best rollout of each group gets an advantage, ``r_max - r_second``, divided by
    ``group std + eps`` when ``scale="std"`` (``"none"``: not divided).

    Ties at the maximum give 0 (``r_max = r_second``), so which tied rollout is "best" does
    not matter. Groups with fewer than two valid rollouts get 0 (verl raises).
    """
    check_choice("scale", scale, ("std", "none"))
    rewards, mask = _prepare(rewards, mask)
    _check_eps(eps)
    n, _, std = _group_stats(rewards, mask)
    low = jnp.finfo(rewards.dtype).min
    ordered = jnp.sort(jnp.where(mask, rewards, low), axis=-1)
    if rewards.shape[1] >= 2:
        gap = jnp.where(n >= 2, ordered[:, -1:] - ordered[:, -2:-1], 0)
    else:
        gap = jnp.zeros_like(ordered[:, :1])
    if scale == "std":
        gap = _divide(gap, std + eps)
    best = jnp.arange(rewards.shape[1])[None, :] == jnp.argmax(
        jnp.where(mask, rewards, low), axis=-1)[:, None]
    return _finish(jnp.where(best, gap, 0), n, mask)


def realized_energy(logits: ArrayLike, tokens: ArrayLike) -> jax.Array:
    """The per-token "realized energy" of the optimal token baseline (verl's logit-gradient
    proxy): ``w_t = ||e_{a_t} - pi_t||^2 = 1 - 2 pi_t(a_t) + sum_v pi_t(v)^2``, the squared
    norm of the gradient of ``log pi_t(a_t)`` with respect to the logits of step ``t``.

    ``logits [..., T, V]`` (the policy that sampled the tokens, at its sampling temperature),
    ``tokens [..., T]`` -> ``[..., T]``, in ``[0, 2)``; 0 only where ``pi_t`` puts all its mass
    on ``a_t``. ``sum pi^2`` is computed as ``exp(logsumexp(2 log pi))`` (verl's formula)."""
    logits = jnp.asarray(logits)
    if not jnp.issubdtype(logits.dtype, jnp.floating):
        logits = logits.astype(jnp.float32)
    logp = jax.nn.log_softmax(logits, axis=-1)
    chosen = jnp.take_along_axis(logp, jnp.asarray(tokens, jnp.int32)[..., None], axis=-1)[..., 0]
    sum_sq = jnp.exp(jax.nn.logsumexp(2 * logp, axis=-1))
    return jnp.maximum(1 - 2 * jnp.exp(chosen) + sum_sq, 0)


@_REGISTRY.register("optimal_token_baseline")
def optimal_token_baseline(rewards: ArrayLike, mask: ArrayLike | None = None, *,
                           energy: ArrayLike | None = None,
                           token_mask: ArrayLike | None = None,
                           eps: float = 0.0) -> jax.Array:
    """The optimal token baseline (OTB; verl ``algorithm.adv_estimator=optimal_token_baseline``,
    ``verl/trainer/ppo/core_algos.py`` ``compute_optimal_token_baseline_advantage``, verl's
    ``docs/algo/otb.md`` and the blog it cites, richardli.xyz/optimal-token-baseline; no arXiv
    paper found. It is the variance-minimising constant baseline of a score-function gradient,
    ``E[||s||^2 R] / E[||s||^2]``, which OPO, arXiv:2505.23585, derives per sequence with the
    length as the proxy of ``||s||^2``; OTB takes it per token with the logit-gradient proxy).

    With an outcome reward and ``gamma = 1`` every token's return is the rollout's reward
    ``r``, and the baseline of token ``t`` is the group's energy-weighted mean reward
    ``b_t = sum_j W_t^j r_j / sum_j W_t^j`` over the rollouts ``j`` still alive at ``t``, with
    ``W_t = sum_{s <= t} w_s`` the cumulative realized energy (:func:`realized_energy`).
    ``A_t = r - b_t``.

    ``energy``: None (all weights equal: ``b`` is the group mean and OTB equals Dr.GRPO,
    ``[B, G]`` out); ``[B, G]`` one weight per rollout (its total energy ``W_T``; with
    one-token answers, as on the prompt bank, this is verl's estimator exactly; ``[B, G]``
    out); or ``[B, G, T]`` the per-token ``w_t`` (not cumulated) with ``token_mask [B, G, T]``
    (default all valid): verl's token-level estimator, ``[B, G, T]`` out, 0 at masked tokens
    (the trainers broadcast a ``[B, G]`` advantage over tokens; a token-level one is for
    callers that aggregate themselves, e.g. :mod:`rlvr_lab.papers.zoo.small`).
    Energies must be finite and ``>= 0`` at valid entries.

    ``eps``: 0 (default) divides by ``sum W`` itself; ``eps > 0`` is verl's
    ``sum W r / (sum W + eps)`` (verl: ``1e-8``), which shrinks the baseline towards 0 and so
    leaves a group of equal rewards a tiny non-zero advantage.

    Degenerate inputs (finite, documented): a group of equal rewards gets exactly 0 (with
    ``eps = 0``); a group (or, token-level, a position) whose valid energies sum to 0 falls
    back to equal weights (those rollouts' gradients are 0 anyway); a group with fewer than two
    valid rollouts, ``G = 1`` included, gets 0 (verl: ``A = r``); a fully masked row gets 0.
    Token-level, a position where only one rollout is still alive gets 0 there (verl's
    ``handle_zero_tail`` option, baseline 0 on the longest response's tail, is not offered).
    """
    _check_eps(eps)
    rewards, mask = _prepare(rewards, mask)
    n = mask.sum(-1, keepdims=True)
    if energy is None:
        energy = mask.astype(rewards.dtype)
    energy = jnp.asarray(energy, rewards.dtype)
    token_level = energy.ndim == 3
    if energy.shape[:2] != rewards.shape or energy.ndim not in (2, 3):
        raise ValueError(f"energy shape {energy.shape} must be [B, G] or [B, G, T] with "
                         f"[B, G] = {rewards.shape}")
    if token_level:
        tmask = (jnp.ones(energy.shape, bool) if token_mask is None
                 else jnp.asarray(token_mask, bool))
        if tmask.shape != energy.shape:
            raise ValueError(f"token_mask shape {tmask.shape} does not match energy shape "
                             f"{energy.shape}")
        valid = tmask & mask[..., None]
    else:
        valid = mask
    check_finite(energy, "energy", where=valid)
    if not is_traced(energy) and bool(jnp.any(jnp.where(valid, energy, 0) < 0)):
        raise ValueError("energy must be >= 0 at valid entries")
    w = jnp.where(valid, energy, 0)
    if token_level:
        w = jnp.where(valid, jnp.cumsum(w, axis=-1), 0)            # W_t, [B, G, T]
        w, r, alive = jnp.swapaxes(w, 1, 2), rewards[:, None, :], jnp.swapaxes(valid, 1, 2)
        b, t = w.shape[0], w.shape[1]
        w, alive = w.reshape(b * t, -1), alive.reshape(b * t, -1)   # rows: (prompt, position)
        r = jnp.broadcast_to(r, (b, t, rewards.shape[1])).reshape(b * t, -1)
    else:
        r, alive = rewards, valid
    if eps > 0:
        base = (w * jnp.where(alive, r, 0)).sum(-1, keepdims=True) / (w.sum(-1, keepdims=True)
                                                                      + eps)
    else:
        empty = w.sum(-1, keepdims=True) <= 0
        base = _shifted_mean(jnp.where(alive, r, 0), jnp.where(empty & alive, 1, w))
    adv = jnp.where(alive, r - base, 0)
    if token_level:
        count = alive.sum(-1, keepdims=True)
        adv = jnp.where(count >= 2, adv, 0)
        adv = jnp.swapaxes(adv.reshape(b, t, -1), 1, 2)              # [B, G, T]
        keep = valid & (n >= 2)[..., None]
        return jnp.where(keep, adv, jnp.zeros_like(adv))
    return _finish(adv, n, mask)


_REGISTRY.register("otb", optimal_token_baseline)


def overlong_penalty(lengths: ArrayLike, *, max_length: float, buffer: float,
                     penalty: float = 1.0) -> jax.Array:
    """DAPO's soft overlong punishment (Yu et al. 2025, arXiv:2503.14476, "Overlong Reward
    Shaping"), a reward term per response: 0 up to ``max_length - buffer`` tokens, then
    falling linearly to ``-penalty`` at ``max_length``, ``min(-(l - (max_length - buffer)) /
    buffer * penalty, 0)`` (tunix's ``overlong_buffer`` and verl's DAPO reward manager; neither
    floors it beyond ``max_length``, nor does this). Add it to the rewards before an
    estimator. ``0 < buffer <= max_length``, ``penalty >= 0``."""
    check_number(max_length, "max_length", "> 0", lambda v: v > 0)
    check_number(buffer, "buffer", "in (0, max_length]", lambda v: (v > 0) & (v <= max_length))
    check_number(penalty, "penalty", ">= 0", lambda v: v >= 0)
    lengths = jnp.asarray(lengths)
    if not jnp.issubdtype(lengths.dtype, jnp.floating):
        lengths = lengths.astype(jnp.float32)
    exceed = lengths - (max_length - buffer)
    return jnp.minimum(-exceed / buffer * penalty, 0.0)
