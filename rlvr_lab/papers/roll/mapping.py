"""AutoDeviceMapping on ``jax.sharding``: which devices generate, score and update.

ROLL (arXiv:2506.06122) assigns each worker cluster (``actor_infer`` for generation,
``reference``/``actor_train`` log-probs for scoring, ``actor_train`` for the update) a
device set: all clusters on all GPUs (*colocated*, switching between stages) or separate
GPUs (*disaggregated*, the new weights sent to the generation GPUs after every update). Here
a :class:`DeviceMapping` names the device indices of three stages of the transformer trainer;
each stage runs on its own 1-D :class:`jax.sharding.Mesh` (axis ``"data"``) with the rows of
the batch sharded over it and the parameters replicated, and the arrays move between the
meshes with ``jax.device_put`` (the parameter transfer of a disaggregated mapping is counted
in bytes per step).

:class:`MappedTrainer` runs :mod:`rlvr_lab.train.sequence`'s step, stage by stage:

1. generation (generation mesh): ``sequence.rollout`` of ``num_prompts x num_generations``
   rows, the same keys as :class:`sequence.Trainer`;
2. the verifier on the host;
3. scoring (scoring mesh): reference log-probs (the SFT base) and the trainer's own log-probs
   of the sampled tokens (veRL's recomputed ``old_log_prob``);
4. update (update mesh): the update core (:func:`rlvr_lab.train.core.update`) with the
   advantages and the scored log-probs, as :func:`sequence.update` does for
   ``rollout_correction="none"``;
5. the new parameters go back to the generation mesh.

Every row is computed independently and the reductions are over the whole batch, so the
numbers do not depend on the mapping beyond the order of floating-point sums (measured in the
``roll`` experiment and ``tests/papers/roll``). Use ``XLA_FLAGS=
--xla_force_host_platform_device_count=4`` to try mappings on one CPU; ``python -m
rlvr_lab.papers.roll.mapping`` runs the comparison and prints JSON.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from rlvr_lab import losses
from rlvr_lab.models import transformer
from rlvr_lab.train import core, sequence, transformer_update
from rlvr_lab import random_streams as streams

STAGES = ("generation", "scoring", "update")


def _indices(name, value):
    if (not isinstance(value, tuple) or not value
            or any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in value)
            or len(set(value)) != len(value)):
        raise ValueError(f"{name}={value!r} is not allowed; use a non-empty tuple of distinct "
                         "device indices >= 0")


@dataclasses.dataclass(frozen=True)
class DeviceMapping:
    """Device indices (into ``jax.devices()``) of each stage; validated at construction."""

    generation: tuple
    scoring: tuple
    update: tuple
    name: str = ""

    def __post_init__(self):
        for stage in STAGES:
            _indices(stage, getattr(self, stage))

    @classmethod
    def colocated(cls, n: int) -> "DeviceMapping":
        """Every stage on devices ``0..n-1``."""
        every = tuple(range(n))
        return cls(every, every, every, f"colocated {n}")

    @classmethod
    def disaggregated(cls, n_generation: int, n_train: int) -> "DeviceMapping":
        """Generation on the first ``n_generation`` devices; scoring and update (the training
        cluster) on the next ``n_train``."""
        gen = tuple(range(n_generation))
        train = tuple(range(n_generation, n_generation + n_train))
        return cls(gen, train, train, f"disaggregated {n_generation}+{n_train}")

    @property
    def colocated_stages(self) -> bool:
        return self.generation == self.update

    def meshes(self, devices: Iterable[jax.Device] | None = None) -> dict:
        """``{stage: Mesh}`` over ``devices`` (default ``jax.devices()``)."""
        devices = list(jax.devices() if devices is None else devices)
        out = {}
        for stage in STAGES:
            idx = getattr(self, stage)
            if max(idx) >= len(devices):
                raise ValueError(f"{stage}={idx!r} needs {max(idx) + 1} devices; only "
                                 f"{len(devices)} devices are available")
            out[stage] = Mesh(np.array([devices[i] for i in idx]), ("data",))
        return out


def _replicated(tree, mesh):
    return jax.device_put(tree, NamedSharding(mesh, P()))


def _rows(tree, mesh, axis: int = 1):
    """Shard every leaf's ``axis`` (rows; axis 0 is seeds) over the mesh's devices."""
    def put(x):
        spec = [None] * x.ndim
        spec[axis] = "data"
        return jax.device_put(x, NamedSharding(mesh, P(*spec)))
    return jax.tree.map(put, tree)


def param_bytes(policy: Any) -> int:
    return int(sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(policy)))


def update_scored(key: jax.Array, state: sequence.TrainState, batch: sequence.RolloutBatch,
                  rewards: jax.Array, old_logp: jax.Array, ref_logp: jax.Array,
                  config: sequence.SequenceRLConfig
                  ) -> tuple[sequence.TrainState, dict[str, jax.Array]]:
    """:func:`sequence.update` (``rollout_correction="none"``) with the log-probs of the
    trainer (``old_logp``) and of the reference (``ref_logp``) computed by the scoring stage."""
    options = config.loss_options()
    loss_fn = core.policy_loss(config.policy_loss, options)
    _, flat_adv, token_mask = transformer_update.row_advantages(
        config, rewards, batch.mask,
        tokens=batch.tokens if config.mask_truncated_completions else None)
    on_policy = config.num_iterations == 1 and config.num_minibatches == 1

    def objective(policy, minibatch):
        logp = transformer_update.score(policy, minibatch["batch"], config.temperature)
        old = jax.lax.stop_gradient(logp) if on_policy else minibatch["old"]
        return core.objective(loss_fn, logp, old, minibatch["adv"][:, None], minibatch["mask"],
                              agg_mode=config.loss_agg_mode, options=options,
                              ref_log_prob=minibatch["ref"] if config.beta > 0 else None,
                              beta=config.beta, kl_estimator=config.kl_estimator)

    data = {"batch": batch, "old": old_logp, "ref": ref_logp, "adv": flat_adv, "mask": token_mask}
    policy, opt_state, out = transformer_update.optimize(key, state.policy, state.opt_state,
                                                         data, objective, config)
    valid = batch.mask
    out.update(reward=rewards.mean(), entropy=losses.masked_mean(batch.entropy, valid),
               kl=losses.masked_mean(losses.kl("k3", batch.behav_logp, ref_logp), valid))
    return state.replace(policy=policy, opt_state=opt_state), out


# module-level jits with the config and the mesh static: mappings that share a stage's
# devices share its compiled code
@functools.partial(jax.jit, static_argnames=("config", "mesh"))
def _generate(keys, policy, pool_prompts, pool_valid, *, config, mesh):
    def one(key, policy):
        idx = jax.random.choice(streams.stream(key, streams.PROMPTS), pool_prompts.shape[0],
                                (config.num_prompts,), replace=False)
        return idx, sequence.rollout(streams.stream(key, streams.SAMPLES), policy,
                                     pool_prompts[idx], pool_valid[idx], config, mesh)
    return jax.vmap(one)(keys, policy)


@functools.partial(jax.jit, static_argnames=("config",))
def _score(policy, ref, batch, *, config):
    def one(policy, batch):
        return (transformer_update.score(policy, batch, config.temperature),
                transformer_update.score(ref, batch, config.temperature))
    return jax.vmap(one)(policy, batch)


# vectorized (one batched program over the seeds), as measured in the roll experiment
_update = transformer_update.seed_mapped(update_scored, (0, 0, 0, 0, 0, 0, None),
                                         static_argnums=6, vectorized=True)


class MappedTrainer:
    """:class:`sequence.Trainer`'s step with its stages placed by a :class:`DeviceMapping`.

    ``trainer`` supplies the problem pool, the verifier and the SFT base (its config must not
    use ``data_parallel``, which this class replaces); ``ref_policy`` replaces the base as the
    KL reference. Only ``rollout="uniform"`` and ``rollout_correction="none"`` are supported.
    """

    def __init__(self, config: sequence.SequenceRLConfig, mapping: DeviceMapping, *,
                 trainer: sequence.Trainer | None = None, base_policy=None, ref_policy=None,
                 devices=None):
        if config.rollout != "uniform" or config.rollout_correction != "none" \
                or config.mask_stale or config.data_parallel:
            raise ValueError("MappedTrainer supports rollout='uniform', "
                             "rollout_correction='none', mask_stale=False, data_parallel=False")
        self.config, self.mapping = config, mapping
        self.trainer = trainer or sequence.Trainer(config, base_policy=base_policy)
        self.meshes = mapping.meshes(devices)
        rows = config.num_prompts * config.num_generations
        for stage, mesh in self.meshes.items():
            if rows % mesh.devices.size:
                raise ValueError(f"num_prompts*num_generations={rows} must be divisible by the "
                                 f"{mesh.devices.size} devices of the {stage} stage")
        base = self.trainer.base_policy
        self.gen_pool = _replicated((self.trainer.pool_prompts, self.trainer.pool_valid),
                                    self.meshes["generation"])
        # the KL reference: the SFT base unless given
        self.ref = _replicated(base if ref_policy is None else ref_policy, self.meshes["scoring"])
        gen_devices = set(mapping.generation)
        # a disaggregated mapping copies the weights to every generation device that does not
        # hold the updated replica
        self.transfer_bytes = param_bytes(base.params) * len(gen_devices - set(mapping.update))

    def init_state(self, num_seeds: int) -> sequence.TrainState:
        state = self.trainer.init_state(num_seeds)
        return _replicated(state, self.meshes["update"])

    def train_step(self, key: jax.Array, state: sequence.TrainState, step: int
                   ) -> tuple[sequence.TrainState, dict[str, np.ndarray], sequence.RolloutBatch]:
        cfg, m = self.config, self.meshes
        num_seeds = jax.tree.leaves(state.opt_state)[0].shape[0]
        keys = self.trainer.step_keys(key, step, num_seeds)
        gen_policy = _replicated(state.policy, m["generation"])   # the parameter transfer
        idx, batch = _generate(streams.each(keys, streams.ROLLOUT),
                               gen_policy, *self.gen_pool, config=cfg, mesh=m["generation"])
        rewards, correct = self.trainer.verify(idx, batch.tokens)
        scored = _rows(batch, m["scoring"])
        old_logp, ref_logp = _score(_replicated(state.policy, m["scoring"]), self.ref, scored,
                                    config=cfg)
        upd = _rows((batch, old_logp, ref_logp), m["update"])
        state, out = _update(streams.each(keys, streams.UPDATE), state,
                             *upd[:1], jnp.asarray(rewards), *upd[1:], cfg)
        out = {k: np.asarray(v) for k, v in out.items()}
        out["pass1"] = correct.mean(axis=(1, 2))
        out["transfer_bytes"] = np.full(num_seeds, float(self.transfer_bytes))
        return state, out, batch


def compare(config: sequence.SequenceRLConfig, mappings: Iterable[DeviceMapping], key: jax.Array,
            *, num_seeds: int = 2, steps: int = 2,
            base_policy: transformer.Policy | None = None,
            ref_policy: transformer.Policy | None = None) -> dict:
    """Train ``steps`` steps under every mapping from the same key; per mapping the metrics
    ``[steps, S]``, the sampled tokens' equality with the first mapping (and how many differ),
    the largest absolute differences of metrics and final parameters against the first
    mapping, and ``param_rel_diff``: the norm of the final parameters' difference from the
    first mapping's over the norm of the first mapping's update (final - start), all seeds."""
    trainer = sequence.Trainer(config, base_policy=base_policy)
    results = {}
    for mp in mappings:
        mt = MappedTrainer(config, mp, trainer=trainer, ref_policy=ref_policy)
        state = mt.init_state(num_seeds)
        hist, tokens = {}, []
        for t in range(steps):
            state, out, batch = mt.train_step(key, state, t)
            for k, v in out.items():
                hist.setdefault(k, []).append(v)
            tokens.append(np.asarray(batch.tokens))
        leaf = jax.tree.leaves(state.policy)[0]
        results[mp.name] = {"metrics": {k: np.stack(v) for k, v in hist.items()},
                            "tokens": np.stack(tokens),
                            "params": [np.asarray(x) for x in jax.tree.leaves(state.policy)],
                            "devices": len(leaf.sharding.device_set),
                            "transfer_bytes": mt.transfer_bytes}
    first = next(iter(results.values()))
    # the first mapping's update: its final parameters minus the starting ones (every seed)
    start = [np.asarray(x) for x in jax.tree.leaves(trainer.base_policy)]
    update_norm = float(np.sqrt(sum(np.sum((a - b[None].astype(np.float64)) ** 2)
                                    for a, b in zip(first["params"], start))))
    summary = {}
    for name, r in results.items():
        diff_norm = float(np.sqrt(sum(np.sum((a.astype(np.float64) - b) ** 2)
                                      for a, b in zip(r["params"], first["params"]))))
        metric_diff = {k: float(np.max(np.abs(v - first["metrics"][k])))
                       for k, v in r["metrics"].items() if k != "transfer_bytes"}
        summary[name] = {
            "tokens_equal": bool(np.array_equal(r["tokens"], first["tokens"])),
            "token_diffs": int(np.sum(r["tokens"] != first["tokens"])),
            "param_rel_diff": diff_norm / update_norm if update_norm > 0 else float("nan"),
            "update_norm": update_norm,
            "max_metric_diff": max(metric_diff.values()),
            "metric_diff": metric_diff,
            "max_param_diff": float(max(np.max(np.abs(a - b)) for a, b in
                                        zip(r["params"], first["params"]))),
            "max_param_abs": float(max(np.max(np.abs(a)) for a in r["params"])),
            "update_devices": r["devices"], "transfer_bytes": r["transfer_bytes"],
            "loss": r["metrics"]["loss"].tolist(), "reward": r["metrics"]["reward"].tolist()}
    return summary


def _tiny_model():
    from rlvr_lab.train import sft
    # single-digit sums, d_model=32 (the test suite's TINY setting); used untrained by
    # ``main("random")``
    return sft.SFTConfig(difficulties=(1,), d_model=32, n_layers=2, n_heads=2, steps=300,
                         batch_size=32, learning_rate=1e-2, warmup_steps=10, num_train=400,
                         num_heldout=32, gen_slack=1)


TINY_MODEL = _tiny_model()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rlvr_lab.papers.roll.mapping [steps] [seeds] [base] [quick|full]``:
    compare mappings on all devices (at least 2) and print one JSON line.

    ``base``: an SFT preset of :mod:`rlvr_lab.train.sft` (trained or loaded from the cache;
    GRPO on its rewards), or ``"random"``: a freshly initialised tiny transformer
    (:data:`TINY_MODEL`) pulled by a KL term (``beta=0.1``) towards a second random one, so
    every stage computes without an SFT run (its rewards are 0: the update is the KL's).
    ``quick``: colocated on the first half of the devices vs generation and scoring there and
    the update on the other half (generation and scoring compile once for both); ``full``:
    colocated on all devices, half/half and 1/(n-1) disaggregated (scoring with the update).
    """
    from rlvr_lab.train import sft

    args = sys.argv[1:] if argv is None else argv
    steps = int(args[0]) if args else 2
    seeds = int(args[1]) if len(args) > 1 else 2
    which_base = args[2] if len(args) > 2 else "search"
    which = args[3] if len(args) > 3 else "full"
    n = jax.device_count()
    if n < 2 or which not in ("quick", "full"):
        raise SystemExit(f"need >= 2 devices (got {n}) and quick|full (got {which!r})")
    random_base = which_base == "random"
    base = TINY_MODEL if random_base else sft.PRESETS[which_base]
    config = sequence.SequenceRLConfig(base=base, num_prompts=6, num_generations=4,
                                       learning_rate=5e-4, warmup_steps=0, steps=steps,
                                       eval_problems=8, eval_samples=2,
                                       beta=0.1 if random_base else 0.0,
                                       num_train_problems=64 if random_base else 256,
                                       # its mapped update scores every row (update_scored)
                                       share_prompt_prefix=False)
    half = n // 2
    if which == "quick":
        # the scoring stage stays on the generation devices (as a reference model colocated
        # with inference): generation and scoring compile once for both mappings
        gen, train = tuple(range(half)), tuple(range(half, n))
        mappings = [DeviceMapping.colocated(half),
                    DeviceMapping(gen, gen, train, f"disaggregated {half}+{n - half}")]
    else:
        mappings = [DeviceMapping.colocated(n), DeviceMapping.disaggregated(half, n - half),
                    DeviceMapping.disaggregated(1, n - 1)]
    if random_base:
        policy = transformer.init(jax.random.key(1), base.model_config())
        ref = transformer.init(jax.random.key(2), base.model_config())
    else:
        policy, ref = sft.load_or_train(base, verbose=False), None
    summary = compare(config, mappings, jax.random.key(7), num_seeds=seeds, steps=steps,
                      base_policy=policy, ref_policy=ref)
    print(json.dumps({"devices": n, "steps": steps, "seeds": seeds,
                      "learning_rate": config.learning_rate, "base": which_base,
                      "rows": config.num_prompts * config.num_generations, "mappings": summary}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__: Any = ["DeviceMapping", "MappedTrainer", "compare", "param_bytes", "update_scored"]
