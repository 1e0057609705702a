"""Past one process: the seed-sweep and sequence trainers under ``jax.distributed``.

JAX's multi-controller runtime runs the *same program* in every process; after
:func:`initialize` ``jax.devices()`` lists the devices of all processes and a jitted function
whose inputs are sharded over a global mesh runs on all of them (each process computes its
shard). ROLL runs its workers with Ray; the JAX equivalent of "more GPUs than one process
drives" is this runtime, and the seed axis of a study is the natural thing to spread.

- :func:`bank_train_seeds` — :func:`rlvr_lab.train.bandit.train_seeds`'s program (one
  ``jit(vmap(train))`` over the seeds' keys) with the seed axis sharded over
  ``jax.devices()``, i.e. over every process's devices; results gathered onto every process
  with ``multihost_utils.process_allgather``. (``train_seeds`` itself ``device_put``s keys
  held by one local device, which JAX refuses for another process's devices: "device_put's
  second argument must be a Device or a Sharding which represents addressable devices"; here
  every process builds its shards with ``jax.make_array_from_callback``.)
- :func:`sequence_run` — :func:`rlvr_lab.train.sequence.run` on a contiguous block of seeds
  per process (the verifier is Python on each host, so each process trains its own seeds
  with :class:`SeedBlockTrainer`, whose per-seed keys are those of the single-process run),
  histories and evaluations gathered.

Either gives the numbers of a single-process run with the same key and seed count (up to
float noise from vectorising a different number of seeds). On CPU the cross-process
collectives need gloo: :func:`initialize` sets ``jax_cpu_collectives_implementation``.
See ``docs/scaling.md`` for what to set on GPUs and several hosts.
"""
from __future__ import annotations

import functools
import math
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from rlvr_lab.models import transformer
from rlvr_lab.train import bandit, sequence


def initialize(coordinator_address: str, num_processes: int, process_id: int,
               **kwargs: Any) -> None:
    """``jax.distributed.initialize`` (call before any other JAX work); on CPU also selects
    the gloo collectives that cross-process gathers need."""
    platforms = (jax.config.jax_platforms or "").split(",")
    if "cpu" in platforms or platforms == [""]:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=coordinator_address,
                               num_processes=num_processes, process_id=process_id, **kwargs)


def seed_block(num_seeds: int, process_index: int | None = None,
               process_count: int | None = None) -> tuple[int, int, int]:
    """``(start, count, padded)``: this process's contiguous block of the seeds padded to a
    multiple of the process count (the padding seeds are computed and dropped)."""
    if isinstance(num_seeds, bool) or not isinstance(num_seeds, int) or num_seeds < 1:
        raise ValueError(f"num_seeds={num_seeds!r} is not allowed; use an int >= 1")
    p = jax.process_index() if process_index is None else process_index
    n = jax.process_count() if process_count is None else process_count
    count = math.ceil(num_seeds / n)
    return p * count, count, count * n


def gather(tree: Any, axis: int = 0) -> Any:
    """Every process's leaves concatenated along ``axis`` (same shapes in every process)."""
    def one(x):
        x = np.asarray(x)
        if jax.process_count() == 1:
            return x
        stacked = np.asarray(multihost_utils.process_allgather(x, tiled=False))
        return np.concatenate(list(stacked), axis=axis)
    return jax.tree.map(one, tree)


def bank_train_seeds(config: bandit.BanditConfig, key: jax.Array, num_seeds: int
                     ) -> tuple[bandit.TrainState, dict[str, np.ndarray]]:
    """:func:`bandit.train_seeds` over every process's devices; ``(states, metrics)`` as
    NumPy arrays on every process, leading seed axis (the numbers of one process)."""
    devices = jax.devices()
    padded = -(-num_seeds // len(devices)) * len(devices)
    data = np.asarray(jax.random.key_data(bandit.seed_keys(key, padded)))   # same everywhere
    sharding = NamedSharding(Mesh(np.array(devices), ("seed",)), P("seed"))
    keys = jax.make_array_from_callback(data.shape, sharding, lambda idx: data[idx])
    out = _bank_program(config)(keys)
    if jax.process_count() > 1:
        out = jax.tree.map(lambda x: multihost_utils.process_allgather(x, tiled=True), out)
    return jax.tree.map(lambda x: np.asarray(x)[:num_seeds], out)


@functools.lru_cache(maxsize=16)
def _bank_program(config: bandit.BanditConfig):
    train = bandit.make_train(config)
    return jax.jit(jax.vmap(lambda k: train(jax.random.wrap_key_data(k))))


class SeedBlockTrainer(sequence.Trainer):
    """A :class:`sequence.Trainer` for seeds ``start .. start+count-1`` of a ``total``-seed
    run: its per-seed keys are the single-process run's (``split(fold_in(key, step),
    total)``; padding seeds past ``total`` repeat the last one)."""

    def __init__(self, config, total: int, start: int, **kwargs):
        super().__init__(config, **kwargs)
        self.total, self.start = int(total), int(start)

    def step_keys(self, key: jax.Array, step: int, num_seeds: int) -> jax.Array:
        keys = jax.random.split(jax.random.fold_in(key, step), self.total)
        idx = np.minimum(np.arange(self.start, self.start + num_seeds), self.total - 1)
        return keys[idx]


def sequence_run(config: sequence.SequenceRLConfig, key: jax.Array, num_seeds: int, *,
                 base_policy: transformer.Policy | None = None,
                 verbose: bool = False) -> sequence.Run:
    """:func:`sequence.run` with the seeds split into one block per process; the returned
    run's ``history`` and ``evals`` hold all ``num_seeds`` seeds (gathered), its ``state``
    only this process's block."""
    start, count, _ = seed_block(num_seeds)
    trainer = SeedBlockTrainer(config, num_seeds, start, base_policy=base_policy,
                               verbose=verbose)
    run = sequence.run(config, key, count, trainer=trainer, verbose=verbose)
    history = {k: gather(v, axis=1)[:, :num_seeds] for k, v in sorted(run.history.items())}
    evals = {"step": run.evals["step"],
             "pass_at": gather(run.evals["pass_at"], axis=1)[:, :num_seeds]}
    return run._replace(history=history, evals=evals)
