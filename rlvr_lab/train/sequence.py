"""Sequence-level RLVR for the tiny transformer: rollouts -> verifier -> advantages -> loss.

One step, for every seed at once (seeds are a leading axis, mapped by :func:`seed_map`):

1. draw ``num_prompts`` training problems and sample ``num_generations`` completions each with
   the KV-cache sampler (behaviour log-probs stored);
2. verify the decoded completions on the host (:mod:`rlvr_lab.envs.tasks`) -> rewards ``[B, G]``;
3. ``advantages.compute(config.advantage, rewards)`` (any registered estimator; ``keep`` drops
   e.g. the MC-GRPO pivot), broadcast over tokens;
4. ``num_iterations`` epochs x ``num_minibatches`` minibatches of
   ``losses.get(config.loss)`` aggregated with ``losses.aggregate(..., loss_agg_mode)`` plus an
   optional ``beta * KL(pi || ref)`` (``losses.kl``, k1/k2/k3) to the SFT base; optax update.

The verifier runs in Python, so the loop is a Python loop over two jitted functions
(``rollout`` and ``update``); every step's randomness is ``fold_in(key, step)``, so a run stopped
after step ``s`` (:func:`run` with ``stop_after``) and resumed from its checkpoint reproduces the
uninterrupted run exactly. With ``data_parallel=True`` rollout and update batches are sharded
over all devices (``Mesh`` + ``NamedSharding`` on the batch axis; parameters replicated).

Per-step metrics (per seed): ``pass1`` (mean correctness of the batch), ``pass_at_G``, ``reward``,
``response_length``, ``incorrect_length`` / ``correct_length`` (mean length of the rollouts
with reward <= 0 / > 0; 0 when there are none), ``entropy``, ``clip_frac``, ``zero_adv_frac``,
``kl`` (k3 to the base), ``loss``, ``grad_norm``. Held-out evaluations every ``eval_every``
steps: pass@k for k = 1..``eval_samples`` (unbiased estimator).
"""
from __future__ import annotations

import dataclasses
import functools
import time
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from flax import struct
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from jax.typing import ArrayLike

from rlvr_lab import allocator
from rlvr_lab import io as _io
from rlvr_lab import random_streams as streams
from rlvr_lab import losses, metrics
from rlvr_lab import _registry
from rlvr_lab.envs import tasks
from rlvr_lab.models import transformer
from rlvr_lab.train import checkpoint, core, sft, transformer_update
from rlvr_lab.train.config import (SCALE_REWARDS, above_one, below_one, boolean, check_rollouts,
                                   choice, describe, instance_of, non_negative, non_negative_int,
                                   open_unit_interval, option, optional, pairs, positive,
                                   positive_int, registered, rl_config)
from rlvr_lab.train import rollout as rollout_stages
from rlvr_lab.train.seed_axis import seed_map  # noqa: F401 - part of this module's API
from rlvr_lab.train.seed_threads import threaded_seed_map
from rlvr_lab.train.transformer_update import make_optimizer  # also part of this module's API
from rlvr_lab.utils import DECODE_COMPILE, check_key


ROLLOUT_CORRECTIONS = ("none", "tis", "mis")


@rl_config
class SequenceRLConfig:
    """RL hyper-parameters, in the vocabulary of :mod:`rlvr_lab.train.config` (the bank
    trainer's; TRL and verl names accepted as aliases). All fields are static.

    A loss reads the clip options it declares (``epsilon``, ``epsilon_high``,
    ``clip_ratio_c``); ``None`` keeps the loss's own default. ``scale_rewards`` is read by the
    ``grpo`` estimator; ``advantage_options`` is a tuple of ``(name, value)`` pairs for the
    estimator, e.g. ``(("scale", "mad"),)``. ``rollout`` picks a rollout stage (``uniform``,
    ``dynamic_sampling``, ``dars``, ``cures``, ``e3``, ``brorl_schedule`` or a
    :class:`~rlvr_lab.train.rollout.RolloutStage`) with ``rollout_options``; a stage other
    than ``uniform`` runs jitted on a :class:`SequenceSampler` whose verifier is a host
    callback. A completion without EOS (cut off by ``base.max_new_tokens``) is not correct and
    scores reward 0 (:func:`rlvr_lab.envs.tasks.score_completions`), in training and held-out
    evaluation; ``allow_truncated_completions=True`` scores its text as written instead (the
    behaviour before 2026-12, and TRL's). ``mask_truncated_completions`` (TRL) drops
    completions without EOS from the loss.

    Train/rollout mismatch (the rollout engine's ``behav_logp`` differ from the trainer's, e.g.
    FP8 rollouts, stale prefixes, reused responses): the PPO ratio always uses the trainer's own
    log-probs at the start of the step (veRL's recomputed ``old_log_prob``); with
    ``rollout_correction="tis"`` each token's loss is weighted by ``min(rho, correction_cap)``,
    with ``"mis"`` by ``rho`` where ``1/cap <= rho <= cap`` and dropped elsewhere
    (``rho = pi_train / pi_rollout``, :func:`rlvr_lab.losses.tis_weights` / ``mis_weights``).
    ``mask_stale`` drops tokens flagged in ``RolloutBatch.stale`` from the loss (APRIL's
    "mask" treatment). ``track_mismatch`` (implied by a correction) reports ``mismatch_k1``,
    ``mismatch_k3``, ``mismatch_chi2`` per step at the cost of one extra scoring pass.

    ``kl`` (the k3 estimate of KL(pi || ref) on the rollouts, ref = the SFT base) is reported
    when ``beta > 0`` (the loss scores the reference on every row anyway) or ``track_kl``; with
    ``beta = 0`` and no ``track_kl`` the reference is not scored at all, as TRL's GRPO trainer
    does not load it then. ``track_kl`` alone scores it on the first completion of each group:
    the same estimate from 1/G of the rows.

    ``share_prompt_prefix`` (default True): the update's scoring passes run each prompt once
    for its group of ``num_generations`` completions instead of once per row (where the rows
    keep that layout: :func:`prompt_group`), the same log-probs up to float rounding and
    fewer FLOPs. TRL, verl and tunix score every row's prompt + completion; ``False`` does so
    too. The studies pin ``False`` (:func:`simulations.tiny_grpo.rl_config`): their committed
    numbers were computed with the per-row pass, and float rounding would move them.
    """

    base: sft.SFTConfig = option(sft.PRESETS["quick"], instance_of(sft.SFTConfig))
    steps: int = option(40, positive_int)
    num_prompts: int = option(16, positive_int)
    num_generations: int = option(8, positive_int)
    temperature: float = option(1.0, positive)
    top_p: float = option(1.0, open_unit_interval)
    learning_rate: float = option(2e-4, positive)
    warmup_steps: int = option(10, non_negative_int)
    max_grad_norm: float = option(1.0, positive)
    rollout: Any = option("uniform", registered("stage", rollout_stages.RolloutStage))
    rollout_options: tuple = option((), pairs)
    advantage: Any = option("grpo", registered("estimator"))
    scale_rewards: str = option("group", choice(*SCALE_REWARDS))
    advantage_options: tuple = option((), pairs)
    policy_loss: Any = option("ppo_clip", registered("loss"))
    epsilon: float | None = option(0.2, optional(below_one))
    epsilon_high: float | None = option(None, optional(positive))
    clip_ratio_c: float | None = option(None, optional(above_one))
    loss_agg_mode: str = option("token-mean", choice(*losses.AGG_MODES))
    beta: float = option(0.0, non_negative)
    kl_estimator: str = option("k3", registered("kl"))
    num_iterations: int = option(1, positive_int)
    num_minibatches: int = option(1, positive_int)
    mask_truncated_completions: bool = option(False, boolean)
    allow_truncated_completions: bool = option(False, boolean)
    reward_scheme: str = option("binary", choice(*tasks.REWARD_SCHEMES))
    num_train_problems: int = option(4096, positive_int)
    eval_every: int = option(10, positive_int)
    eval_problems: int = option(64, positive_int)
    eval_samples: int = option(8, positive_int)
    data_parallel: bool = option(False, boolean)
    rollout_correction: str = option("none", choice(*ROLLOUT_CORRECTIONS))
    correction_cap: float = option(2.0, above_one)
    mask_stale: bool = option(False, boolean)
    track_mismatch: bool = option(False, boolean)
    track_kl: bool = option(False, boolean)
    share_prompt_prefix: bool = option(True, boolean)

    def __post_init__(self):
        check_rollouts(self)
        rollouts = self.num_prompts * self.num_generations
        if rollouts % self.num_minibatches:
            raise ValueError(f"num_minibatches={self.num_minibatches} must divide "
                             f"num_prompts*num_generations={rollouts}")
        if self.eval_problems > self.base.num_heldout:
            raise ValueError(f"eval_problems={self.eval_problems} exceeds the base's "
                             f"num_heldout={self.base.num_heldout}")
        if self.data_parallel and self.rollout != "uniform":
            raise ValueError(f"rollout={self.rollout!r} is not allowed with data_parallel=True;"
                             " only 'uniform' shards its rollouts")

    def loss_options(self) -> core.LossOptions:
        return core.LossOptions(self.epsilon, self.epsilon_high, self.clip_ratio_c)

    def hash(self) -> str:
        fields = {k: (describe(v) if callable(v) or isinstance(v, rollout_stages.RolloutStage)
                      else v) for k, v in dataclasses.asdict(self).items()}
        return _io.stable_hash({"rl": fields, "version": 2})

    # read-only spellings of earlier versions
    loss = property(lambda self: self.policy_loss)
    advantage_kwargs = property(lambda self: self.advantage_options)


# ----------------------------------------------------------------------------- state
@struct.dataclass
class TrainState:
    policy: transformer.Policy
    opt_state: Any
    rollout_state: Any = None   # a rollout stage's state (None for "uniform")


class RolloutBatch(NamedTuple):
    prompts: jnp.ndarray       # [BG, P]
    prompt_valid: jnp.ndarray  # [BG, P]
    tokens: jnp.ndarray        # [BG, N]
    mask: jnp.ndarray          # [BG, N]
    behav_logp: jnp.ndarray    # [BG, N]
    entropy: jnp.ndarray       # [BG, N]
    stale: Any = None          # optional [BG, N] bool: token generated by an older policy


def _mesh():
    return Mesh(np.array(jax.devices()), ("data",))


def _shard(x, mesh, axis: int):
    spec = [None] * x.ndim
    spec[axis] = "data"
    return jax.device_put(x, NamedSharding(mesh, P(*spec)))


# the per-step key schedule as compiled calls: eager vmaps of fresh lambdas re-traced at every
# step (~2.4 ms of host time per step, while the device waits)
@functools.partial(jax.jit, static_argnums=2)
def _split_step(key: jax.Array, step: ArrayLike, num_seeds: int) -> jax.Array:
    return jax.random.split(jax.random.fold_in(key, step), num_seeds)


# ----------------------------------------------------------------------------- pure pieces
def rollout(key: jax.Array, policy: transformer.Policy, prompts: ArrayLike,
            prompt_valid: ArrayLike, config: SequenceRLConfig,
            mesh: Mesh | None = None, *, rows: tuple[int, int] | None = None,
            row_start: ArrayLike | None = None) -> RolloutBatch:
    """``num_generations`` completions for each of the ``B`` prompts, rows ordered b*G + g.

    With a ``mesh`` the ``B*G`` rows are sharded over its ``"data"`` axis. ``rows=(lo, hi)``
    returns only rows ``lo..hi-1``, the same numbers as those rows of the whole batch
    (``transformer.sample``'s ``rows``).
    """
    g = config.num_generations
    prompts = jnp.repeat(prompts, g, axis=0)
    prompt_valid = jnp.repeat(prompt_valid, g, axis=0)
    if mesh is not None:
        sharded = NamedSharding(mesh, P("data"))
        prompts = jax.lax.with_sharding_constraint(prompts, sharded)
        prompt_valid = jax.lax.with_sharding_constraint(prompt_valid, sharded)
    out = transformer.sample(key, policy, prompts, prompt_valid,
                             max_new_tokens=config.base.max_new_tokens,
                             temperature=config.temperature, top_p=config.top_p, rows=rows,
                             row_start=row_start)
    if rows is not None:
        cut = functools.partial(transformer.row_cut, lo=rows[0], size=rows[1] - rows[0],
                                start=row_start)
        prompts, prompt_valid = cut(prompts), cut(prompt_valid)
    return RolloutBatch(prompts, prompt_valid, out.tokens, out.mask, out.logp, out.entropy)


class SequenceSampler(NamedTuple):
    """The transformer policy as a :class:`~rlvr_lab.train.rollout.Sampler`, for rollout
    stages under ``jit``/``vmap``: generation is traced, the verifier (Python, on decoded
    text) is a ``jax.pure_callback`` returning ``[B, n]`` rewards and verdicts, so a stage's
    shapes stay static. ``answers`` of the returned rollouts hold the token rows
    (``prompts``, ``prompt_valid``, ``tokens``, ``mask``, ``entropy``, each ``[B, n, ...]``);
    ``behav_log_prob`` is per token ``[B, n, N]``."""

    policy: Any
    pool_prompts: jnp.ndarray
    pool_valid: jnp.ndarray
    config: Any          # SequenceRLConfig (static)
    sample_fn: Any       # rollout(key, policy, prompts, valid, config, mesh) -> RolloutBatch
    verify_fn: Any       # host: (pool idx [B], tokens [n, B, N]) -> (rewards, correct) [n, B]

    @property
    def num_prompts(self) -> int:
        return self.pool_prompts.shape[0]

    def choose(self, key: jax.Array, batch_size: int) -> jax.Array:
        return jax.random.choice(key, self.num_prompts, (batch_size,), replace=False)

    def sample(self, key: jax.Array, prompts: jax.Array, num: int) -> rollout_stages.Rollout:
        cfg = dataclasses.replace(self.config, num_generations=num, num_minibatches=1)
        rows = self.sample_fn(key, self.policy, self.pool_prompts[prompts],
                              self.pool_valid[prompts], cfg, None)
        b = prompts.shape[0]
        groups = lambda x: x.reshape((b, num) + x.shape[1:])  # noqa: E731  (rows b*n + g)
        tokens = groups(rows.tokens)
        out_shape = (jax.ShapeDtypeStruct((b, num), jnp.float32),
                     jax.ShapeDtypeStruct((b, num), jnp.bool_))
        rewards, correct = jax.pure_callback(self.verify_fn, out_shape, prompts, tokens,
                                             vmap_method="sequential")
        answers = {"prompts": groups(rows.prompts), "prompt_valid": groups(rows.prompt_valid),
                   "tokens": tokens, "mask": groups(rows.mask), "entropy": groups(rows.entropy)}
        return rollout_stages.Rollout(prompts, answers, rewards, jnp.ones((b, num), bool),
                                      groups(rows.behav_logp), jnp.asarray(b * num, jnp.int32),
                                      correct)

    def draw(self, key: jax.Array, batch_size: int, num: int) -> rollout_stages.Rollout:
        # the keys of Trainer's own uniform draw: prompts from fold_in 0, samples from fold_in 1
        prompts = self.choose(streams.stream(key, streams.PROMPTS), batch_size)
        return self.sample(streams.stream(key, streams.SAMPLES), prompts, num)

    def success_probability(self) -> None:
        return None    # unknown for a sampled policy


def rows_of(stage_out: rollout_stages.Rollout) -> RolloutBatch:
    """A stage's ``[B, G_max]`` groups of a :class:`SequenceSampler` as ``[B*G_max]`` rows."""
    a = stage_out.answers
    flat = lambda x: x.reshape((-1,) + x.shape[2:])  # noqa: E731
    return RolloutBatch(flat(a["prompts"]), flat(a["prompt_valid"]), flat(a["tokens"]),
                        flat(a["mask"]), flat(stage_out.behav_log_prob), flat(a["entropy"]))


def prompt_group(config: SequenceRLConfig, model: transformer.TransformerConfig,
                 group_size: int) -> int | None:
    """The group size over which the update's scoring passes share each prompt's pass
    (``share_prompt_prefix``; :func:`rlvr_lab.models.transformer.score`'s ``group``), or None
    for the plain pass.

    Shared only where the rows keep the layout ``b*G + g`` with one prompt per group through
    the whole update: the ``uniform`` stage, one minibatch (rows are shuffled with several),
    no row sharding (``data_parallel``) and no activation hook (a hook that sees a whole
    tensor, e.g. a per-tensor quantisation scale, would see the prompts and completions
    apart)."""
    shared = (config.share_prompt_prefix and config.num_minibatches == 1
              and config.rollout == "uniform" and not config.data_parallel
              and model.act_hook is None and group_size > 1)
    return group_size if shared else None


def update(key: jax.Array, state: TrainState, ref_policy: transformer.Policy,
           batch: RolloutBatch, rewards: jax.Array, config: SequenceRLConfig,
           group_mask: ArrayLike | None = None) -> tuple[TrainState, dict[str, jax.Array]]:
    """Advantages from ``rewards [B, G]`` (``group_mask [B, G]``: valid rollouts, from a
    rollout stage), then the update core's epochs x minibatches of optax updates.

    Returns ``(state, metrics)`` with scalar metrics (means over minibatches for the loss).
    """
    options = config.loss_options()
    loss_fn = core.policy_loss(config.policy_loss, options)
    group = prompt_group(config, state.policy.config, rewards.shape[-1])
    score = lambda pol, rows: transformer_update.score(  # noqa: E731
        pol, rows, config.temperature, group=group)

    adv, flat_adv, kept_rows = transformer_update.row_advantages(
        config, rewards, batch.mask, group_mask,
        tokens=batch.tokens if config.mask_truncated_completions else None)
    token_mask = kept_rows
    if config.mask_stale and batch.stale is not None:
        token_mask = token_mask & ~batch.stale
    # a single full-batch pass is exactly on-policy: pi_old = sg(pi_theta), no extra forward
    on_policy = config.num_iterations == 1 and config.num_minibatches == 1
    correct = config.rollout_correction != "none"
    need_train_logp = not on_policy or correct or config.track_mismatch
    train_logp = (jax.lax.stop_gradient(score(state.policy, batch)) if need_train_logp
                  else batch.behav_logp)
    old_logp = batch.behav_logp if on_policy else train_logp
    weight = jnp.ones_like(batch.behav_logp)
    if config.rollout_correction == "tis":
        weight = losses.tis_weights(train_logp, batch.behav_logp, cap=config.correction_cap)
    elif config.rollout_correction == "mis":
        weight, accepted = losses.mis_weights(train_logp, batch.behav_logp,
                                              cap=config.correction_cap)
        token_mask = token_mask & accepted
    # the reference pass: on every row when the loss needs it (beta > 0); when KL is only
    # reported (track_kl), on the first completion of each group; else not at all
    kl_rows = ref_logp = None
    if config.beta > 0:
        kl_rows = batch
    elif config.track_kl:
        kl_rows = jax.tree.map(lambda x: None if x is None else x[::rewards.shape[-1]], batch)
    if kl_rows is not None:
        # track_kl's rows are one per group, so they share no prompt
        ref_logp = jax.lax.stop_gradient(transformer_update.score(
            ref_policy, kl_rows, config.temperature, group=group if config.beta > 0 else None))

    def objective(policy, minibatch):
        logp = score(policy, minibatch["batch"])
        old = jax.lax.stop_gradient(logp) if on_policy else minibatch["old"]
        return core.objective(loss_fn, logp, old, minibatch["adv"][:, None], minibatch["mask"],
                              agg_mode=config.loss_agg_mode, options=options,
                              weight=minibatch.get("weight"),
                              ref_log_prob=minibatch["ref"] if config.beta > 0 else None,
                              beta=config.beta, kl_estimator=config.kl_estimator)

    data = {"batch": batch, "adv": flat_adv, "mask": token_mask}
    if not on_policy:
        data["old"] = old_logp
    if config.beta > 0:
        data["ref"] = ref_logp
    if config.rollout_correction != "none":
        data["weight"] = weight
    # rows are shuffled only when there are several minibatches
    policy, opt_state, out = transformer_update.optimize(key, state.policy, state.opt_state,
                                                         data, objective, config)
    valid = batch.mask
    out.update(
        reward=rewards.mean() if group_mask is None else losses.masked_mean(rewards, group_mask),
        response_length=losses.masked_mean(valid.sum(-1), adv.keep.reshape(-1))
        if group_mask is not None else valid.sum(-1).mean(),
        entropy=losses.masked_mean(batch.entropy, valid),
        # Dr.GRPO's length bias is about the length of wrong answers (reward <= 0)
        incorrect_length=losses.masked_mean(
            valid.sum(-1), adv.keep.reshape(-1) & (rewards.reshape(-1) <= 0)),
        correct_length=losses.masked_mean(
            valid.sum(-1), adv.keep.reshape(-1) & (rewards.reshape(-1) > 0)),
        zero_adv_frac=((flat_adv == 0) & adv.keep.reshape(-1)).sum()
        / jnp.maximum(adv.keep.sum(), 1),
    )
    if kl_rows is not None:
        out["kl"] = losses.masked_mean(losses.kl("k3", kl_rows.behav_logp, ref_logp),
                                       kl_rows.mask)
    if need_train_logp and (correct or config.track_mismatch):
        mismatch = losses.mismatch_metrics(train_logp, batch.behav_logp, valid)
        out.update({f"mismatch_{k}": v for k, v in mismatch.items()})
        out["kept_frac"] = token_mask.sum() / jnp.maximum(kept_rows.sum(), 1)
    if batch.stale is not None:
        out["stale_frac"] = losses.masked_mean(batch.stale, valid)
    return state.replace(policy=policy, opt_state=opt_state), out


# every seed of a run through :func:`update` in one jitted call: ``(keys [S], state [S], ref,
# batch [S], rewards [S], config, group_mask=[S] or None)``. Module level, so that trainers and
# drivers with the same config and shapes share one compiled program.
mapped_update = transformer_update.seed_mapped(update, (0, 0, None, 0, 0, None),
                                               static_argnums=5)
# the same with a reference policy per seed (seeds from several SFT bases, each its own
# reference: rlvr_lab.train.bases.BatchedBases)
mapped_update_each_ref = transformer_update.seed_mapped(update, (0, 0, 0, 0, 0, None),
                                                        static_argnums=5)


# ----------------------------------------------------------------------------- the runner
class Run(NamedTuple):
    """A finished (or stopped) run: final states (leading seed axis) and metric tables."""

    state: TrainState
    steps_done: int
    history: dict   # metric -> [steps_done, S]
    evals: dict     # "step" -> [E]; "pass_at" -> [E, S, eval_samples] (k = 1..n)
    seconds: float

    def frame(self) -> pd.DataFrame:
        """Long-form per-step metrics: (seed, step, metric, value)."""
        rows = []
        for name, values in self.history.items():
            arr = np.asarray(values)
            for s in range(arr.shape[1] if arr.ndim == 2 else 0):
                for t in range(arr.shape[0]):
                    rows.append((s, t, name, float(arr[t, s])))
        return pd.DataFrame(rows, columns=["seed", "step", "metric", "value"])

    def eval_frame(self) -> pd.DataFrame:
        """Long-form held-out evaluations: (seed, step, k, pass_at_k)."""
        rows = []
        pa = np.asarray(self.evals["pass_at"])
        for e, step in enumerate(self.evals["step"]):
            for s in range(pa.shape[1]):
                for k in range(pa.shape[2]):
                    rows.append((s, int(step), k + 1, float(pa[e, s, k])))
        return pd.DataFrame(rows, columns=["seed", "step", "k", "pass_at_k"])


class Trainer:
    """Holds the task data and the jitted functions for one config; see :func:`run`."""

    def __init__(self, config: SequenceRLConfig, base_policy=None, verbose: bool = False,
                 rollout_fn=None):
        """``rollout_fn`` replaces :func:`rollout` (same signature and ``RolloutBatch``), e.g.
        sampling from a quantised copy of the policy.

        Building a trainer trains nothing: the SFT base (``base_policy``, or the cached
        checkpoint of ``config.base``) is loaded, or trained and cached, on first use of
        :attr:`base_policy` (by :meth:`init` or :func:`run`)."""
        # the command line's malloc settings, applied in this process (scripts, notebooks)
        allocator.tune_in_process()
        self.config = config
        base = config.base
        self._base_policy = base_policy
        self._verbose = verbose
        heldout = sft.problems(base, "heldout")
        self.eval_problems = heldout[:config.eval_problems]
        seen = {p.prompt for p in heldout}
        pool = tasks.generate(base.task, np.random.default_rng([base.seed, 2]),
                              config.num_train_problems, base.difficulties)
        self.pool = [p for p in pool if p.prompt not in seen]
        enc = sft.encode(base, self.pool)
        self.pool_prompts = jnp.asarray(enc.prompts)
        self.pool_valid = jnp.asarray(enc.prompt_valid)
        ev = sft.encode(base, self.eval_problems)
        n = config.eval_samples
        self.eval_prompts = jnp.tile(jnp.asarray(ev.prompts), (n, 1))
        self.eval_valid = jnp.tile(jnp.asarray(ev.prompt_valid), (n, 1))
        self.mesh = _mesh() if config.data_parallel else None
        if self.mesh is not None:
            devices = self.mesh.devices.size
            if (config.num_prompts * config.num_generations) % devices:
                raise ValueError(f"num_prompts*num_generations must be divisible by the "
                                 f"{devices} devices for data_parallel=True")
        opt = make_optimizer(config)
        cfg = config

        mesh = self.mesh
        sample_fn = rollout if rollout_fn is None else rollout_fn

        # The prompts are drawn by a small program of their own: its shapes depend on this
        # base's pool size (each SFT base brings its own pool), while the decoding program
        # only sees the drawn [B, P] prompts, so every base of an arm runs one compiled
        # decoder (the persistent compile cache serves the bases after the first). Same
        # draws and same numbers as drawing inside the decoder.
        pool_size = self.pool_prompts.shape[0]
        self._draw = jax.jit(jax.vmap(lambda key: jax.random.choice(
            streams.stream(key, streams.PROMPTS), pool_size, (cfg.num_prompts,),
            replace=False)))

        def rollout_one(key, policy, prompts, valid, rows=None, row_start=None):
            args = (streams.stream(key, streams.SAMPLES), policy, prompts, valid, cfg, mesh)
            return (sample_fn(*args) if rows is None
                    else rollout(*args, rows=rows, row_start=row_start))

        def eval_one(key, policy, prompts, valid, rows=None, row_start=None):
            return transformer.sample(key, policy, prompts, valid,
                                      max_new_tokens=cfg.base.max_new_tokens,
                                      temperature=cfg.temperature, top_p=cfg.top_p,
                                      rows=rows, row_start=row_start).tokens

        # one seed: its rows split over host threads (same numbers), unless sampling is
        # replaced (rollout_fn) or sharded over devices
        split_rows = rollout_fn is None and mesh is None
        # data enter as arguments (not closure constants, which XLA would constant-fold)
        self._rollout = threaded_seed_map(
            rollout_one, (0, 0, 0, 0), DECODE_COMPILE,
            num_rows=cfg.num_prompts * cfg.num_generations if split_rows else None,
            row_axes=0)
        # group_mask (a stage's valid rollouts) goes by keyword: mapped over seeds (axis 0)
        self._update = mapped_update
        # a rollout stage other than uniform: sampling, host verification (callback) and the
        # stage's own logic in one jitted, seed-mapped call
        self.stage = (None if cfg.rollout == "uniform"
                      else rollout_stages.get(cfg.rollout))
        self.stage_shape = rollout_stages.StageShape(cfg.num_prompts, cfg.num_generations)
        stage_options = dict(cfg.rollout_options)

        def sampler(policy, pool_prompts, pool_valid):
            return SequenceSampler(policy, pool_prompts, pool_valid, cfg, sample_fn,
                                   self._verify_groups)

        def stage_one(key, policy, stage_state, pool_prompts, pool_valid):
            return self.stage.sample(key, sampler(policy, pool_prompts, pool_valid),
                                     self.stage_shape, stage_state, **stage_options)

        self._stage_init = lambda: self.stage.init(
            sampler(self.base_policy, self.pool_prompts, self.pool_valid), self.stage_shape,
            **stage_options)
        self._stage = threaded_seed_map(stage_one, (0, 0, 0, None, None), DECODE_COMPILE)
        self._eval = threaded_seed_map(eval_one, (0, 0, None, None), DECODE_COMPILE,
                                       num_rows=self.eval_prompts.shape[0])
        # the same evaluation with held-out prompts per seed (seeds from several SFT bases,
        # rlvr_lab.train.bases.BatchedBases); compiled only when called
        self._eval_each = threaded_seed_map(eval_one, (0, 0, 0, 0), DECODE_COMPILE,
                                            num_rows=self.eval_prompts.shape[0])
        self._pass_at = jax.jit(metrics.pass_at_k)
        self._init_opt = jax.jit(jax.vmap(opt.init))

    # -- pieces

    @property
    def base_policy(self):
        """The SFT base: the one given to the constructor, else ``config.base``'s cached
        checkpoint, trained (and cached) here on first use."""
        if self._base_policy is None:
            self._base_policy = sft.load_or_train(self.config.base, verbose=self._verbose)
        return self._base_policy

    @base_policy.setter
    def base_policy(self, policy) -> None:
        self._base_policy = policy

    def init_state(self, num_seeds: int) -> TrainState:
        per_seed = lambda tree: jax.tree.map(  # noqa: E731
            lambda x: jnp.broadcast_to(x, (num_seeds,) + jnp.shape(x)), tree)
        policy = per_seed(self.base_policy)
        rollout_state = None if self.stage is None else per_seed(self._stage_init())
        return TrainState(policy, self._init_opt(policy), rollout_state)

    def step_keys(self, key: jax.Array, step: int, num_seeds: int) -> jax.Array:
        return _split_step(key, step, num_seeds)

    def verify(self, idx: jax.Array, tokens: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Rewards and correctness ``[S, B, G]`` for sampled tokens ``[S, B*G, N]``."""
        cfg = self.config
        s, b, g = idx.shape[0], cfg.num_prompts, cfg.num_generations
        tokens = np.asarray(tokens).reshape(s, b, g, -1).transpose(0, 2, 1, 3)
        rewards = np.zeros((s, g, b), np.float32)
        correct = np.zeros((s, g, b), bool)
        for i in range(s):
            probs = [self.pool[j] for j in np.asarray(idx[i])]
            rewards[i], correct[i] = tasks.score_completions(
                probs, tokens[i], cfg.reward_scheme,
                allow_truncated=cfg.allow_truncated_completions)
        return rewards.transpose(0, 2, 1), correct.transpose(0, 2, 1)

    def _verify_groups(self, pool_idx, tokens):
        """Host callback of :class:`SequenceSampler`: ``pool_idx [B]``, ``tokens [B, n, N]``
        -> rewards float32 and verdicts bool, ``[B, n]``."""
        probs = [self.pool[j] for j in np.asarray(pool_idx)]
        rewards, correct = tasks.score_completions(
            probs, np.asarray(tokens).transpose(1, 0, 2), self.config.reward_scheme,
            allow_truncated=self.config.allow_truncated_completions)
        return (np.asarray(rewards, np.float32).T.copy(), np.asarray(correct, bool).T.copy())

    def sample_batch(self, keys: jax.Array,
                     policy: transformer.Policy) -> tuple[jax.Array, RolloutBatch]:
        """The uniform rollout phase of a step: per-seed keys ``[S]`` -> pool indices of the
        sampled prompts ``[S, B]`` and their completions (rows ``[S, B*G, ...]``)."""
        idx = self._draw(keys)
        return idx, self._rollout(keys, policy, self.pool_prompts[idx], self.pool_valid[idx])

    def update_from_batch(self, keys: jax.Array, state: TrainState, batch: RolloutBatch,
                          rewards: ArrayLike, group_mask: ArrayLike | None = None
                          ) -> tuple[TrainState, dict[str, jax.Array]]:
        """The update phase of a step: per-seed keys ``[S]``, a sampled batch and its rewards
        ``[S, B, G]`` (``group_mask``: the valid rollouts of a stage) -> new state and the
        update's metrics. The batch stays where it is: :meth:`train_step` spreads a uniform
        step's rows over a data-parallel mesh first (a stage's ``B * G_max`` rows need not
        divide among the devices)."""
        extra = {} if group_mask is None else {"group_mask": group_mask}
        return self._update(keys, state, self.base_policy, batch, jnp.asarray(rewards),
                            self.config, **extra)

    def train_step(self, key: jax.Array, state: TrainState,
                   step: int) -> tuple[TrainState, dict[str, np.ndarray]]:
        if self.stage is not None:
            return self._stage_step(key, state, step)
        num_seeds = jax.tree.leaves(state.opt_state)[0].shape[0]
        keys = self.step_keys(key, step, num_seeds)
        idx, batch = self.sample_batch(streams.each(keys, streams.ROLLOUT), state.policy)
        rewards, correct = self.verify(idx, batch.tokens)
        if self.mesh is not None:
            batch = jax.tree.map(lambda x: _shard(x, self.mesh, 1), batch)
        state, out = self.update_from_batch(streams.each(keys, streams.UPDATE), state, batch,
                                            rewards)
        out = {k: np.asarray(v) for k, v in out.items()}
        g = self.config.num_generations
        out["pass1"] = correct.mean(axis=(1, 2))
        out[f"pass_at_{g}"] = correct.any(axis=2).mean(axis=1)
        return state, out

    def _stage_step(self, key, state, step: int):
        """One step through the configured rollout stage (same key schedule as uniform)."""
        num_seeds = jax.tree.leaves(state.opt_state)[0].shape[0]
        keys = self.step_keys(key, step, num_seeds)
        groups, rollout_state = self._stage(streams.each(keys, streams.ROLLOUT),
                                            state.policy, state.rollout_state,
                                            self.pool_prompts, self.pool_valid)
        batch = jax.vmap(rows_of)(groups)
        state, out = self.update_from_batch(streams.each(keys, streams.UPDATE),
                                            state.replace(rollout_state=rollout_state), batch,
                                            groups.rewards, group_mask=groups.mask)
        out = {k: np.asarray(v) for k, v in out.items()}
        mask = np.asarray(groups.mask)
        correct = np.asarray(groups.correct) & mask
        g = self.config.num_generations
        out["pass1"] = correct.sum(axis=(1, 2)) / np.maximum(mask.sum(axis=(1, 2)), 1)
        out[f"pass_at_{g}"] = correct.any(axis=2).mean(axis=1)
        out["rollouts"] = np.asarray(groups.spent, np.float32)
        out["valid_frac"] = mask.mean(axis=(1, 2))
        return state, out

    def evaluate(self, key: jax.Array, state: TrainState, step: int) -> np.ndarray:
        """pass@k on the held-out problems, ``[S, eval_samples]`` for k = 1..n."""
        num_seeds = jax.tree.leaves(state.opt_state)[0].shape[0]
        keys = streams.each(self.step_keys(key, step, num_seeds), streams.EVALUATION)
        tokens = self._eval(keys, state.policy, self.eval_prompts, self.eval_valid)
        return self.heldout_pass_at(tokens, [self.eval_problems] * num_seeds)

    def heldout_pass_at(self, tokens: ArrayLike,
                        problems: list[list[tasks.Problem]]) -> np.ndarray:
        """pass@k ``[S, n]`` (k = 1..n, n = ``eval_samples``, unbiased estimator, mean over
        problems) of sampled held-out tokens ``[S, n*m, N]`` (rows: sample-major), where
        ``problems[s]`` are seed ``s``'s ``m`` problems."""
        tokens = np.asarray(tokens)
        n = self.config.eval_samples
        ks = np.arange(1, n + 1)
        out = np.zeros((tokens.shape[0], n))
        for s, probs in enumerate(problems):
            _, correct = tasks.score_completions(
                probs, tokens[s].reshape(n, len(probs), -1),
                allow_truncated=self.config.allow_truncated_completions)
            counts = correct.sum(0)
            out[s] = np.asarray(self._pass_at(n, counts[:, None], ks[None, :])).mean(0)
        return out


def _ckpt_meta(config, num_seeds, key, steps_done, history, evals):
    return {"config_hash": config.hash(), "num_seeds": num_seeds,
            "key": np.asarray(jax.random.key_data(key)).tolist(), "steps_done": steps_done,
            "history": {k: np.asarray(v).tolist() for k, v in history.items()},
            "evals": {"step": list(evals["step"]),
                      "pass_at": np.asarray(evals["pass_at"]).tolist()}}


def run(config: SequenceRLConfig, key: jax.Array, num_seeds: int = 1, *,
        trainer: Trainer | None = None, checkpoint_path: str | Path | None = None,
        stop_after: int | None = None, resume: bool = True, verbose: bool = False) -> Run:
    """Train ``num_seeds`` seeds (one compiled program, :func:`seed_map`) from the SFT base
    for ``config.steps`` steps.

    ``checkpoint_path``: save state + metrics there after every evaluation and at the end;
    with ``resume`` an existing matching checkpoint is continued (a mismatched or corrupted
    one is reported and ignored). ``stop_after``: stop once that many steps are done (to
    simulate an interruption). Held-out evaluation at step 0, every ``eval_every`` steps and
    at the end.
    """
    if not isinstance(config, SequenceRLConfig):
        raise TypeError(f"config={str(config)[:60]!r} is not allowed; pass a SequenceRLConfig")
    check_key(key)
    _registry.positive_int("num_seeds", num_seeds)
    trainer = trainer or Trainer(config, verbose=verbose)
    start = time.perf_counter()
    state = trainer.init_state(num_seeds)
    history: dict[str, list] = {}
    evals = {"step": [], "pass_at": []}
    steps_done = 0
    if checkpoint_path is not None and resume:
        try:
            meta = checkpoint.read_meta(checkpoint_path)
            expect = {"config_hash": config.hash(), "num_seeds": num_seeds,
                      "key": np.asarray(jax.random.key_data(key)).tolist()}
            loaded = checkpoint.load(checkpoint_path, state, expect)
            # the metadata is parsed in full before anything is used (a forged field is a
            # rejected checkpoint, not a crash or a half-resumed run)
            done = meta["steps_done"]
            non_negative_int("steps_done", done)
            loaded_history = {k: [np.asarray(r) for r in v] for k, v in meta["history"].items()}
            loaded_evals = {"step": list(meta["evals"]["step"]),
                            "pass_at": [np.asarray(p) for p in meta["evals"]["pass_at"]]}
            state, steps_done, history, evals = loaded, done, loaded_history, loaded_evals
        except FileNotFoundError:
            pass
        except (checkpoint.CheckpointError, KeyError, TypeError, ValueError,
                AttributeError) as err:
            import warnings
            warnings.warn(f"RL checkpoint not used ({err}); starting from the SFT base",
                          stacklevel=2)

    def save():
        if checkpoint_path is not None:
            checkpoint.save(checkpoint_path, state,
                            _ckpt_meta(config, num_seeds, key, steps_done, history, evals))

    def evaluate_now():
        evals["step"].append(steps_done)
        evals["pass_at"].append(trainer.evaluate(key, state, steps_done))

    if steps_done == 0 and not evals["step"]:
        evaluate_now()
    last = config.steps if stop_after is None else min(stop_after, config.steps)
    while steps_done < last:
        state, out = trainer.train_step(key, state, steps_done)
        for k, v in out.items():
            history.setdefault(k, []).append(np.asarray(v))
        steps_done += 1
        if steps_done % config.eval_every == 0 or steps_done == config.steps:
            evaluate_now()
            save()
        if verbose:
            print(f"step {steps_done}: pass1 {np.mean(out['pass1']):.3f} "
                  f"reward {np.mean(out['reward']):.3f}"
                  + (f" kl {np.mean(out['kl']):.4f}" if "kl" in out else ""))
    save()
    return Run(state=state, steps_done=steps_done,
               history={k: np.stack(v) for k, v in history.items()},
               evals={"step": np.asarray(evals["step"]),
                      "pass_at": np.stack(evals["pass_at"])},
               seconds=time.perf_counter() - start)
