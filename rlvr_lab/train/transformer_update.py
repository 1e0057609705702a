"""The pieces of a transformer RL update that every small-model trainer shares, and the one
wrapper that maps an update (or a whole step) over a leading seed axis.

Users: :func:`rlvr_lab.train.sequence.update` (the trainer), ROLL's scored update
(:mod:`rlvr_lab.papers.roll.mapping`), the CuRES/E3 driver (:mod:`rlvr_lab.papers.cures.small`)
and the staleness study (:mod:`rlvr_lab.papers.systems.stale`). Each writes only what its
update does differently (which log-probs are the proximal ones, its loss, its metrics):

- :func:`make_optimizer` -- Adam with clipping and warm-up, from the config;
- :func:`score` -- per-token log-probs of a batch of rows under a policy;
- :func:`row_advantages` -- advantages ``[B, G]`` from rewards, flattened to rows, and the
  token mask of the rows they keep;
- :func:`optimize` -- the config's epochs x minibatches of optax steps over the rows
  (:func:`rlvr_lab.train.core.update`);
- :func:`seed_mapped` -- ``jax.jit(seed_map(fn, in_axes))``: ``fn`` for every seed (or run) in
  one compiled call.

Layer: above :mod:`~rlvr_lab.train.core` and :mod:`~rlvr_lab.train.seed_axis`, below
:mod:`~rlvr_lab.train.sequence`; configs are read by field name (a
:class:`~rlvr_lab.train.sequence.SequenceRLConfig` or anything with those fields).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax.typing import ArrayLike

from rlvr_lab import advantages
from rlvr_lab.models import transformer
from rlvr_lab.train import core
from rlvr_lab.train.seed_axis import seed_map


def make_optimizer(config: Any) -> optax.GradientTransformation:
    """Adam with global-norm clipping and a linear warm-up over ``warmup_steps`` updates
    (Adam's first, bias-corrected steps are otherwise full-size on noisy RL gradients)."""
    updates_per_step = config.num_iterations * config.num_minibatches
    lr = optax.linear_schedule(0.0, config.learning_rate,
                               max(config.warmup_steps * updates_per_step, 1))
    if config.warmup_steps == 0:
        lr = config.learning_rate
    return optax.chain(optax.clip_by_global_norm(config.max_grad_norm), optax.adam(lr))


def score(policy: transformer.Policy, rows: Any, temperature: ArrayLike,
          group: int | None = None) -> jax.Array:
    """Log-probs ``[R, N]`` of ``rows.tokens`` after ``rows.prompts`` (``rows``: a
    ``RolloutBatch`` or anything with ``prompts``, ``prompt_valid`` and ``tokens``) under
    ``softmax(logits / temperature)``; ``temperature`` may be traced. ``group``: rows come in
    groups of that many with one prompt, whose pass they share (:func:`rlvr_lab.models.
    transformer.score`)."""
    return transformer.score(policy, rows.prompts, rows.prompt_valid, rows.tokens,
                             temperature=temperature, group=group)


class RowAdvantages(NamedTuple):
    """:func:`row_advantages`: the estimator's output ``[B, G]``, its advantages as rows
    ``[B*G]`` (rows ordered ``b*G + g``) and the token mask ``[B*G, N]`` of the kept rows."""

    groups: advantages.Advantages
    rows: jax.Array
    token_mask: jax.Array


def row_advantages(config: core.EstimatorConfig, rewards: ArrayLike, mask: jax.Array,
                   group_mask: ArrayLike | None = None, *, tokens: jax.Array | None = None,
                   float32: bool = False) -> RowAdvantages:
    """The configured estimator on ``rewards [B, G]`` (``group_mask``: the valid rollouts of
    a stage), broadcast to the rows' tokens: the token mask is ``mask [B*G, N]`` on the rows
    the estimator keeps. With ``tokens`` (TRL's ``mask_truncated_completions``) a row without
    EOS is dropped too. ``float32`` casts the advantages (rewards of another dtype)."""
    adv = core.estimator(config)(rewards, group_mask)
    flat = adv.adv.reshape(-1)
    if float32:
        flat = flat.astype(jnp.float32)
    token_mask = mask & adv.keep.reshape(-1)[:, None]
    if tokens is not None:
        finished = jnp.any((tokens == transformer.EOS_ID) & mask, axis=-1)
        token_mask = token_mask & finished[:, None]
    return RowAdvantages(adv, flat, token_mask)


def optimize(key: jax.Array, policy: transformer.Policy, opt_state: optax.OptState,
             data: Any, objective: Callable[[Any, Any], tuple[jax.Array, dict[str, jax.Array]]],
             config: Any, *, shuffle: bool | None = None
             ) -> tuple[transformer.Policy, optax.OptState, dict[str, jax.Array]]:
    """``config.num_iterations`` epochs x ``config.num_minibatches`` minibatches of
    :func:`make_optimizer` steps of ``objective(policy, minibatch)`` over the rows of ``data``
    (:func:`rlvr_lab.train.core.update`). Rows are shuffled at every epoch when ``shuffle``;
    None shuffles only with several minibatches (one minibatch: any order gives the same
    update)."""
    if shuffle is None:
        shuffle = config.num_minibatches > 1
    return core.update(key, policy, opt_state, data, objective, make_optimizer(config),
                       num_epochs=config.num_iterations, num_minibatches=config.num_minibatches,
                       permutation=jax.random.permutation if shuffle else None)


def seed_mapped(fn: Callable[..., Any], in_axes: Sequence[int | None], *,
                static_argnums: int | Sequence[int] = (),
                vectorized: bool = False) -> Callable[..., Any]:
    """``jax.jit(seed_map(fn, in_axes), static_argnums=...)``: ``fn`` over a leading seed (or
    run) axis, one seed after another inside one compiled program
    (:func:`rlvr_lab.train.seed_axis.seed_map`: ``in_axes`` entries 0 or None, keyword
    arguments mapped); ``static_argnums`` are positions of ``fn``'s static arguments (a config),
    which must be shared (``None`` in ``in_axes``). Every trainer and driver of the small model
    maps its update or step through this one wrapper; one wrapper (e.g. the module-level
    :data:`rlvr_lab.train.sequence.mapped_update`) compiles once per shapes and static
    arguments for every caller.

    ``vectorized=True`` batches the seeds with ``jax.vmap(fn, in_axes)`` instead: one batched
    program, whose float rounding differs from the per-seed one (and which is slower per seed
    on XLA:CPU, see :func:`~rlvr_lab.train.seed_axis.seed_map`). Only ROLL's device-mapped
    update uses it, so that its numbers stay those measured with it."""
    if any(ax not in (0, None) for ax in in_axes):
        raise ValueError(f"in_axes={tuple(in_axes)!r} is not allowed; entries must be 0 or None")
    mapped = jax.vmap(fn, in_axes=tuple(in_axes)) if vectorized else seed_map(fn, in_axes)
    return jax.jit(mapped, static_argnums=static_argnums)
