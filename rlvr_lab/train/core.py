"""The update core shared by every trainer: advantages, the policy objective, and
epochs x minibatches of optax updates.

- :func:`estimator` — the configured advantage estimator as ``fn(rewards, mask) ->
  Advantages``, whatever the estimator returns natively; it reads its options from the config
  (``scale_rewards`` for ``grpo``, as verl's ``norm_adv_by_std_in_grpo``) and
  ``advantage_options``.
- :func:`policy_loss` — the configured per-token loss as ``fn(log_prob, old_log_prob,
  advantages, mask) -> [B, T]``; a loss reads the config fields named like its keyword
  options (``epsilon``, ``epsilon_high``, ``clip_ratio_c``), a None field leaving the loss's
  own default (verl's ``core_algos`` pass the whole actor config the same way).
- :func:`objective` — per-token loss x weight, aggregated by ``loss_agg_mode``, plus
  ``beta`` x KL to a reference, and the clip fraction.
- :func:`update` — ``num_epochs`` passes of ``num_minibatches`` minibatches over a batch
  (leading axis = the unit that is shuffled: groups on the bank, rows on the transformer),
  one optax step each; returns the mean of the loss function's metrics and the gradient norm.

All are pure and jittable; the bank trainer, the transformer trainer, the stale-rollout
coupling of the systems simulator and E3's temperature loop use them.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, NamedTuple, Protocol, TypeVar

import jax
import jax.numpy as jnp
import optax
from jax.typing import ArrayLike

from rlvr_lab import advantages, losses



class EstimatorConfig(Protocol):
    """What :func:`estimator` reads of a trainer's config (``BanditConfig`` and
    ``SequenceRLConfig`` both have it); a protocol, so this module, which both trainers build
    on, imports neither."""

    advantage: Any
    advantage_options: Any
    scale_rewards: Any

_P = TypeVar("_P")

# scale_rewards (TRL's vocabulary) -> the grpo estimator's ``scale``
_GRPO_SCALE = {"group": "std", "batch": "batch", "none": "none"}
# what an estimator reads from the config besides ``advantage_options``
_ESTIMATOR_READS: dict[Callable, Callable[[Any], dict]] = {
    advantages.grpo: lambda config: {"scale": _GRPO_SCALE[config.scale_rewards]},
}
# config fields a policy loss may read (matched against its keyword-only parameters)
LOSS_OPTIONS = ("epsilon", "epsilon_high", "clip_ratio_c")
# losses that read fewer: CISPO has no lower clip by default (MiniMax-M1; TRL clamps only
# from above), so the PPO epsilon of the config must not give it one
_LOSS_READS: dict[Callable, tuple[str, ...]] = {losses.cispo: ("epsilon_high",)}


class LossOptions(NamedTuple):
    """The clip options a loss may read; None keeps the loss's default. Values may be traced
    arrays (swept under vmap)."""

    epsilon: Any = None
    epsilon_high: Any = None
    clip_ratio_c: Any = None


def estimator(config: EstimatorConfig) -> Callable[..., advantages.Advantages]:
    """``fn(rewards, mask=None) -> Advantages`` for ``config.advantage`` (name or callable)."""
    fn = advantages._REGISTRY.resolve(config.advantage)
    options = _ESTIMATOR_READS.get(fn, lambda c: {})(config)
    options.update(dict(config.advantage_options))
    return functools.partial(advantages.compute, fn, **options)


@functools.lru_cache(maxsize=None)
def _keyword_options(fn) -> tuple[str, ...]:
    params = inspect.signature(fn).parameters.values()
    return tuple(p.name for p in params if p.kind is p.KEYWORD_ONLY and p.name in LOSS_OPTIONS)


def policy_loss(name_or_fn: str | Callable[..., jax.Array], options: LossOptions) -> Callable:
    """``fn(log_prob, old_log_prob, advantages, mask) -> [B, T]`` with the options the loss
    declares (its keyword-only parameters among :data:`LOSS_OPTIONS`) taken from ``options``."""
    fn = losses._POLICY.resolve(name_or_fn)
    names = _LOSS_READS.get(fn) or _keyword_options(fn)
    kw = {k: getattr(options, k) for k in names if getattr(options, k) is not None}
    return lambda log_prob, old, adv, mask: fn(log_prob, old, adv, mask, **kw)


def objective(loss_fn: Callable[..., jax.Array], log_prob: jax.Array, old_log_prob: ArrayLike,
              adv: ArrayLike, mask: ArrayLike, *, agg_mode: str, options: LossOptions,
              weight: ArrayLike | None = None, ref_log_prob: jax.Array | None = None,
              beta: ArrayLike = 0.0, kl_estimator: str = "k3"
              ) -> tuple[jax.Array, dict[str, jax.Array]]:
    """``(loss, {"loss", "clip_frac"})`` for per-token inputs ``[B, T]`` (``adv`` broadcast).

    ``weight`` multiplies the per-token loss (rollout corrections); ``ref_log_prob`` adds
    ``beta * aggregate(KL)``. The clip fraction is PPO's at ``epsilon`` (0.2 when unset).
    """
    token_loss = loss_fn(log_prob, old_log_prob, adv, mask)
    if weight is not None:
        token_loss = token_loss * weight
    total = losses.aggregate(token_loss, mask, agg_mode)
    if ref_log_prob is not None:
        total = total + beta * losses.aggregate(
            losses.kl(kl_estimator, log_prob, ref_log_prob), mask, agg_mode)
    eps = 0.2 if options.epsilon is None else options.epsilon
    clipped = losses.is_clipped(log_prob, old_log_prob, adv, epsilon=eps,
                                epsilon_high=options.epsilon_high)
    return total, {"loss": total,
                   "clip_frac": losses.masked_mean(clipped.astype(log_prob.dtype), mask)}


def update(key: jax.Array, params: _P, opt_state: optax.OptState, batch: Any,
           loss_fn: Callable[[_P, Any], tuple[jax.Array, dict[str, jax.Array]]],
           optimizer: optax.GradientTransformation, *, num_epochs: int, num_minibatches: int,
           permutation: Callable[[jax.Array, int], jax.Array] | None = None
           ) -> tuple[_P, optax.OptState, dict[str, jax.Array]]:
    """``num_epochs`` x ``num_minibatches`` optax steps of ``loss_fn(params, minibatch) ->
    (loss, metrics)`` over ``batch`` (a pytree; its leading axis is split into minibatches).

    ``permutation(key, n)`` reorders the leading axis at every epoch (None: in order).
    Returns ``(params, opt_state, metrics)``: each metric and ``grad_norm`` averaged over all
    steps.
    """
    n = jax.tree.leaves(batch)[0].shape[0]
    if n % num_minibatches:
        raise ValueError(f"num_minibatches={num_minibatches} must divide the {n} units of "
                         "a batch")
    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

    def minibatch(carry, idx):
        params, opt_state = carry
        (_, metrics), grads = grad_fn(params, jax.tree.map(lambda x: x[idx], batch))
        updates, opt_state = optimizer.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        return (params, opt_state), dict(metrics, grad_norm=optax.tree.norm(grads))

    if num_epochs == 1 and num_minibatches == 1 and permutation is None:
        # one full-batch step in order: the same numbers without the loops and the gather
        (_, metrics), grads = grad_fn(params, batch)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state,
                dict(metrics, grad_norm=optax.tree.norm(grads)))

    def epoch(carry, k):
        order = jnp.arange(n) if permutation is None else permutation(k, n)
        return jax.lax.scan(minibatch, carry, order.reshape(num_minibatches, -1))

    (params, opt_state), metrics = jax.lax.scan(epoch, (params, opt_state),
                                                jax.random.split(key, num_epochs))
    return params, opt_state, jax.tree.map(jnp.mean, metrics)
