"""GRPO-family training on the prompt bank, purejaxrl style.

``make_train(config) -> train(key, hparams=None) -> (state, metrics)``; the whole loop is one
``lax.scan`` over steps, so ``jax.jit(jax.vmap(train))`` trains many seeds at once and
:func:`train_seeds` shards the seed axis over the available devices.

One step: rollout stage (prompts, G rollouts each, behaviour log-probs; any stage of
:mod:`rlvr_lab.train.rollout` on a :class:`~rlvr_lab.train.rollout.BankSampler`) -> advantage
estimator -> the update core (:func:`rlvr_lab.train.core.update`): ``num_iterations`` PPO
epochs of ``num_minibatches`` minibatches of whole groups, each a policy loss aggregated by
``loss_agg_mode`` (+ ``beta`` x KL to the initial policy) and an optax update. Every
estimator, loss, aggregation mode, KL estimator, rollout stage and optax optimizer is picked
by name (or passed as a callable).

Metrics are recorded for the policy that generated each step's rollouts (step 0 is the
initial policy) and are exact where the bank allows: ``accuracy`` (mean success probability
over all prompts), ``pass@k`` (population ``1-(1-p)^k``), ``entropy``, ``kl_ref``.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pandas as pd
from jax.typing import ArrayLike

from rlvr_lab import losses, metrics
from rlvr_lab import _registry
from rlvr_lab._registry import check_choice
from rlvr_lab.envs import prompt_bank
from rlvr_lab.envs.prompt_bank import PromptBankConfig
from rlvr_lab.models import tabular
from rlvr_lab.train.config import (SCALE_REWARDS, above_one, below_one, boolean, check_rollouts,
                                   choice, instance_of, non_negative, option, optional, pairs,
                                   positive, positive_int, positive_ints, registered, rl_config,
                                   strings)
from rlvr_lab.train import core
from rlvr_lab.train import rollout as rollout_stages
from rlvr_lab.utils import _short, check_key, jit_cpu_options, loop_options

_OPTIMIZERS = ("adam", "adamw", "sgd", "rmsprop", "adagrad", "lion", "adafactor", "nadam")


@rl_config
class BanditConfig:
    """Trainer configuration (frozen, validated per field; vocabulary of
    :mod:`rlvr_lab.train.config`, TRL and verl names accepted as aliases).

    Static fields fix shapes and the program (steps, prompts, group size, names); the dynamic
    ones (``learning_rate``, ``epsilon``, ``epsilon_high``, ``beta``) can also be passed as
    arrays through :class:`Hparams` to sweep them under ``vmap``.
    ``num_prompts`` prompts per step (B), ``num_generations`` rollouts per prompt (G+1 for
    ``mc_grpo``). ``scale_rewards`` is read by the ``grpo`` estimator: "group" (std), "batch"
    or "none". ``advantage``, ``policy_loss`` and ``rollout`` take a registered name or a
    callable (a :class:`~rlvr_lab.train.rollout.RolloutStage` for ``rollout``).
    ``mask_truncated_completions`` and ``allow_truncated_completions`` are accepted for a
    shared vocabulary: bank answers are never truncated. ``metrics`` names the per-step metrics to record (None: all of
    :func:`metric_names`); the others are not computed (~13% of the bench's step on CPU).
    """

    bank: PromptBankConfig = option(PromptBankConfig(), instance_of(PromptBankConfig))
    steps: int = option(100, positive_int)
    num_prompts: int = option(64, positive_int)
    num_generations: int = option(8, positive_int)
    temperature: float = option(1.0, positive)
    rollout: Any = option("uniform", registered("stage", rollout_stages.RolloutStage))
    rollout_options: tuple = option((), pairs)
    advantage: Any = option("grpo", registered("estimator"))
    scale_rewards: str = option("group", choice(*SCALE_REWARDS))
    advantage_options: tuple = option((), pairs)
    policy_loss: Any = option("ppo_clip", registered("loss"))
    epsilon: float = option(0.2, below_one)
    epsilon_high: float | None = option(None, optional(positive))
    clip_ratio_c: float | None = option(None, optional(above_one))
    loss_agg_mode: str = option("token-mean", choice(*losses.AGG_MODES))
    beta: float = option(0.0, non_negative)
    kl_estimator: str = option("k3", registered("kl"))
    optimizer: str = option("adam", choice(*_OPTIMIZERS))
    learning_rate: float = option(0.05, positive)
    max_grad_norm: float | None = option(None, optional(positive))
    num_iterations: int = option(1, positive_int)
    num_minibatches: int = option(1, positive_int)
    mask_truncated_completions: bool = option(False, boolean)
    allow_truncated_completions: bool = option(False, boolean)
    eval_ks: tuple = option((1, 8, 64), positive_ints)
    metrics: tuple | None = option(None, optional(strings))

    def __post_init__(self):
        check_rollouts(self)
        if self.num_prompts > self.bank.num_prompts:
            raise ValueError(f"num_prompts={self.num_prompts} must be <= bank.num_prompts="
                             f"{self.bank.num_prompts}")
        if self.metrics is not None:
            allowed = _every_metric(self.eval_ks)
            for name in self.metrics:
                check_choice("metrics entry", name, allowed)

    # read-only spellings of earlier versions
    num_steps = property(lambda self: self.steps)
    batch_size = property(lambda self: self.num_prompts)


class Hparams(NamedTuple):
    """Dynamic hyper-parameters; arrays here can be vmapped for sweeps."""

    learning_rate: Any
    epsilon: Any
    epsilon_high: Any
    beta: Any

    @classmethod
    def from_config(cls, config: BanditConfig) -> "Hparams":
        high = config.epsilon if config.epsilon_high is None else config.epsilon_high
        return cls(*(jnp.asarray(v, jnp.float32) for v in (
            config.learning_rate, config.epsilon, high, config.beta)))

    def loss_options(self, config: BanditConfig, swept: bool) -> core.LossOptions:
        """The clip options the loss reads; an unset ``epsilon_high`` stays unset unless it
        is swept (then it is an array like the others)."""
        high = self.epsilon_high if swept or config.epsilon_high is not None else None
        return core.LossOptions(self.epsilon, high, config.clip_ratio_c)


class TrainState(NamedTuple):
    """``logits [K, V]`` when returned by ``train``; ``opt_state`` is over the flattened
    ``[K*V]`` logits (``[K, V]`` for adafactor, which factors 2-D parameters)."""

    logits: jnp.ndarray
    opt_state: Any
    rollout_state: Any


def make_optimizer(config: BanditConfig, learning_rate: ArrayLike) -> optax.GradientTransformation:
    # adafactor branches on min_dim_size_to_factor in Python: it must not become an array
    static = ("min_dim_size_to_factor",) if config.optimizer == "adafactor" else ()
    opt = optax.inject_hyperparams(getattr(optax, config.optimizer), static_args=static)(
        learning_rate=learning_rate)
    if config.max_grad_norm is not None:
        opt = optax.chain(optax.clip_by_global_norm(config.max_grad_norm), opt)
    return opt


def step_metrics(config: BanditConfig, bank: prompt_bank.PromptBank, logits: ArrayLike) -> dict:
    """Exact metrics of the sampling policy ``softmax(logits / T)`` on the whole bank."""
    logp = tabular.log_policy(logits, config.temperature)
    ref_logp = tabular.log_policy(bank.logits0, config.temperature)
    pi = jnp.exp(logp)
    p = jnp.sum(jnp.where(bank.correct, pi, 0.0), axis=-1)
    out = {
        "accuracy": p.mean(),
        "expected_reward": jnp.sum(pi * bank.reward_table, axis=-1).mean(),
        "entropy": metrics.entropy(logits / config.temperature).mean(),
        "kl_ref": jnp.sum(jnp.where(pi > 0, pi * (logp - ref_logp), 0.0), axis=-1).mean(),
    }
    for k in config.eval_ks:
        out[f"pass@{k}"] = metrics.pass_at_k_exact(p, k).mean()
    return out


# what the update core and the batch add to the exact metrics of :func:`step_metrics`
_UPDATE_METRICS = ("loss", "clip_frac", "grad_norm")
_BATCH_METRICS = ("rollouts", "batch_reward", "valid_frac", "zero_adv_frac")


def _every_metric(eval_ks: tuple[int, ...]) -> tuple[str, ...]:
    exact = ("accuracy", "expected_reward", "entropy", "kl_ref", *(f"pass@{k}" for k in eval_ks))
    return exact + _UPDATE_METRICS + _BATCH_METRICS


def metric_names(config: BanditConfig) -> tuple[str, ...]:
    """The per-step metrics ``train`` records for ``config`` (all when ``config.metrics`` is
    None); ``train`` returns them as a dict (sorted by name, as JAX orders dict keys)."""
    every = _every_metric(config.eval_ks)
    return every if config.metrics is None else tuple(n for n in every if n in config.metrics)


def make_train(config: BanditConfig
               ) -> Callable[..., tuple[TrainState, dict[str, jax.Array]]]:
    """Build ``train(key, hparams=None, init_logits=None) -> (TrainState, metrics)``.

    ``metrics`` maps the names of :func:`metric_names` to arrays of shape ``[num_steps]``.
    """
    bank = prompt_bank.make_bank(config.bank)
    stage = rollout_stages.get(config.rollout)
    stage_opts = dict(config.rollout_options)
    shape = rollout_stages.StageShape(config.num_prompts, config.num_generations)
    estimate = core.estimator(config)
    recorded = metric_names(config)

    def sampler(logits):
        return rollout_stages.BankSampler(logits, bank, config.temperature)

    def train(key, hparams: Hparams | None = None, init_logits=None):
        """``init_logits`` continues from a given policy (a fresh optimizer state); the KL
        reference stays the bank's initial policy."""
        hp = Hparams.from_config(config) if hparams is None else hparams
        optimizer = make_optimizer(config, hp.learning_rate)
        options = hp.loss_options(config, swept=hparams is not None)
        policy_loss = core.policy_loss(config.policy_loss, options)
        # a zero KL coefficient known at trace time drops the KL term, whose value and
        # gradient would be multiplied by 0 (same numbers while finite), saving its work
        use_kl = hparams is not None or config.beta != 0
        logits0 = bank.logits0 if init_logits is None else init_logits
        num_prompts, vocab = bank.logits0.shape
        # the optimizer sees the logits flattened to [K*V] (adafactor aside: it factors 2-D
        # parameters). Same per-parameter numbers, but under vmap XLA:CPU vectorises the
        # elementwise Adam loop only along a long innermost axis: [S, K*V] runs ~4x faster
        # than [S, K, V] with V=16, where the inner loop is unrolled into scalar code
        param_shape = (num_prompts, vocab) if config.optimizer == "adafactor" else (-1,)
        params0 = logits0.reshape(param_shape)
        state = TrainState(params0, optimizer.init(params0),
                           stage.init(sampler(logits0), shape, **stage_opts))
        ref_log_policy = tabular.log_policy(bank.logits0, config.temperature)

        def loss_fn(params, minibatch):
            # log-softmax of the minibatch's prompt rows only ([groups, V]); the gradient is
            # scattered back into the [K, V] logits, rows of other prompts get exactly 0.
            # With the flat optimizer this beats a log-softmax of all K rows (~1.3x per step)
            rows = tabular.log_policy(params.reshape(num_prompts, vocab)[minibatch["prompts"]],
                                      config.temperature)
            logp = jnp.take_along_axis(rows, minibatch["answers"], axis=-1).reshape(-1, 1)
            ref_logp = (ref_log_policy[minibatch["prompts"][:, None],
                                       minibatch["answers"]].reshape(-1, 1)
                        if use_kl else None)
            return core.objective(policy_loss, logp, minibatch["old_logp"].reshape(-1, 1),
                                  minibatch["adv"].reshape(-1, 1),
                                  minibatch["keep"].reshape(-1, 1),
                                  agg_mode=config.loss_agg_mode, options=options,
                                  ref_log_prob=ref_logp, beta=hp.beta,
                                  kl_estimator=config.kl_estimator)

        def step(state: TrainState, key):
            k_roll, k_perm = jax.random.split(key)
            logits = state.logits.reshape(num_prompts, vocab)
            metrics = step_metrics(config, bank, logits)
            batch, rollout_state = stage.sample(k_roll, sampler(logits), shape,
                                                state.rollout_state, **stage_opts)
            adv = estimate(batch.rewards, batch.mask)
            groups = {
                "prompts": batch.prompts,
                "answers": batch.answers,
                "old_logp": batch.behav_log_prob,
                "adv": adv.adv.astype(jnp.float32),
                "keep": adv.keep,
            }
            # minibatches are whole groups, reshuffled each epoch (a permutation of the B
            # groups; shuffling single rollouts would cost a permutation of B*G)
            params, opt_state, update_metrics = core.update(
                k_perm, state.logits, state.opt_state, groups, loss_fn, optimizer,
                num_epochs=config.num_iterations, num_minibatches=config.num_minibatches,
                permutation=rollout_stages.shuffle)
            valid_groups = batch.mask.sum(-1) >= 1
            zero_adv = jnp.all(jnp.where(adv.keep, adv.adv == 0, True), axis=-1)
            metrics.update(
                update_metrics,
                rollouts=batch.spent.astype(jnp.float32),
                batch_reward=losses.masked_mean(batch.rewards, batch.mask),
                valid_frac=batch.mask.mean(),
                zero_adv_frac=(zero_adv & valid_groups).sum() / jnp.maximum(valid_groups.sum(), 1),
            )
            # unrecorded metrics are dead code that XLA removes
            return TrainState(params, opt_state, rollout_state), {n: metrics[n] for n in recorded}

        state, metrics = jax.lax.scan(step, state, jax.random.split(key, config.steps))
        return state._replace(logits=state.logits.reshape(num_prompts, vocab)), metrics

    return train


def seed_keys(key: jax.Array, num_seeds: int) -> jax.Array:
    """One key per seed; the first n keys do not depend on ``num_seeds``."""
    return jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(num_seeds))


def train_seeds(config: BanditConfig, key: jax.Array, num_seeds: int,
                hparams: Hparams | None = None, *, devices: Iterable[jax.Device] | None = None
                ) -> tuple[TrainState, dict[str, jax.Array]]:
    """``jit(vmap(train))`` over ``num_seeds`` seeds, the seed axis sharded over ``devices``.

    Returns ``(states, metrics)`` with a leading seed axis. The numbers do not depend on the
    number of devices: each seed's key is ``fold_in(key, seed)`` and the seed axis is padded
    to a multiple of the device count, then cut back.
    """
    if not isinstance(config, BanditConfig):
        raise TypeError(f"config={_short(config)} is not allowed; pass a BanditConfig")
    check_key(key)
    _registry.positive_int("num_seeds", num_seeds)
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    devices = list(jax.devices() if devices is None else devices)
    padded = -(-num_seeds // len(devices)) * len(devices)
    keys = seed_keys(key, padded)
    if len(devices) > 1:
        mesh = Mesh(np.array(devices), ("seed",))
        keys = jax.device_put(keys, NamedSharding(mesh, PartitionSpec("seed")))
    level = loop_options(table_cells(config, padded))["xla_backend_optimization_level"]
    out = _vmapped_train(config, level)(keys, hparams)
    return jax.tree.map(lambda x: x[:num_seeds], out)


def table_cells(config: BanditConfig, runs: int) -> int:
    """Array cells ``runs`` training loops of ``config`` touch: per step the rollout rows of
    every epoch and the [K, V] tables of the exact metrics (for :func:`utils.loop_options`)."""
    rows = config.num_prompts * config.num_generations * config.num_iterations
    return runs * config.steps * (rows + config.bank.num_prompts * config.bank.vocab_size)


@functools.lru_cache(maxsize=64)
def _vmapped_train(config: BanditConfig, level: int):
    """One compiled ``jit(vmap(train))`` per config and XLA:CPU level, reused across calls."""
    return jit_cpu_options(jax.vmap(make_train(config), in_axes=(0, None)),
                            options={"xla_backend_optimization_level": level})


def metrics_frame(metrics: dict, **labels: Any) -> pd.DataFrame:
    """Long-form DataFrame (``seed, step, metric, value`` + label columns) from metrics of
    shape ``[steps]`` or ``[seeds, steps]``."""
    frames = []
    for name, values in metrics.items():
        arr = np.asarray(values)
        if arr.ndim == 1:
            arr = arr[None]
        seeds, steps = np.meshgrid(np.arange(arr.shape[0]), np.arange(arr.shape[1]),
                                   indexing="ij")
        frames.append(pd.DataFrame({"seed": seeds.ravel(), "step": steps.ravel(),
                                    "metric": name, "value": arr.ravel()}))
    df = pd.concat(frames, ignore_index=True)
    for k, v in labels.items():
        df.insert(0, k, v)
    return df
