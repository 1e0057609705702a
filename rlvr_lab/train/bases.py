"""Seeds nested in independently trained SFT bases (the small model's unit of replication).

A small-model claim compares RL arms that start from an SFT base. One base is one draw of
everything SFT decides (its data, its initialisation, its rounding); seeds that share it are
not independent draws of what the paper's claim is about. Studies therefore train several
bases, each from its own seed, and run several RL seeds from each: base ``b`` of a preset is
the preset with ``seed = preset.seed + b`` (base 0 is the preset itself, so its cached
checkpoint is reused), and it brings its own SFT data, held-out set and training pool.
The engine (:mod:`rlvr_lab.claims`) forms intervals over base means.

``run_bases`` runs a :class:`~rlvr_lab.train.sequence.SequenceRLConfig` from each base; every
arm of a study calls it with the same ``key`` and base ids, so arms are paired within a seed
(same base, same RL key, same held-out problems). Where it can (the ``uniform`` rollout stage,
no ``data_parallel``), it runs the seeds of all the bases as one run, :class:`BatchedBases`:
one compiled program per phase of a step (rollout, update, held-out evaluation) for every
seed of every base, instead of a Python loop over bases; each seed gets the numbers it gets
in its base's own run (see :class:`BatchedBases`).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from rlvr_lab import _registry
from rlvr_lab import random_streams as streams
from rlvr_lab.train import sequence, sft


def _check_base(base: int) -> int:
    if isinstance(base, bool) or not isinstance(base, (int, np.integer)) or base < 0:
        raise ValueError(f"base={base!r} is not allowed; must be an integer >= 0")
    return int(base)


def base_config(preset: sft.SFTConfig, base: int) -> sft.SFTConfig:
    """The SFT config of base ``base`` of ``preset`` (base 0: the preset itself)."""
    base = _check_base(base)
    return preset if base == 0 else dataclasses.replace(preset, seed=preset.seed + base)


def with_base(config: sequence.SequenceRLConfig, base: int) -> sequence.SequenceRLConfig:
    """``config`` trained from base ``base`` of its SFT preset."""
    return dataclasses.replace(config, base=base_config(config.base, base))


def base_key(key: jax.Array, base: int) -> jax.Array:
    """The RL key of base ``base``: every arm gets the same one, so arms are paired."""
    return jax.random.fold_in(key, _check_base(base))


def labels(bases: Sequence[int], seeds_per_base: int) -> np.ndarray:
    """The base of each seed when ``seeds_per_base`` seeds run from each of ``bases``."""
    return np.repeat(np.asarray(list(bases), dtype=int), int(seeds_per_base))


class BatchedBases(sequence.Trainer):
    """The trainers of several SFT bases of one arm (``trainers[i]`` built for
    ``with_base(config, base_ids[i])``) as one trainer over ``len(base_ids) *
    seeds_per_base`` seeds, in the order :func:`labels` gives. Use it with
    :func:`rlvr_lab.train.sequence.run` and the arm's key, as :func:`run_bases` does.

    Each step samples, verifies and updates every seed of every base in one call per phase:
    a seed carries its base's policy, reference policy, training pool and held-out problems;
    its keys are those of its base's own run (:func:`base_key`). The compiled calls are those
    of ``trainers[0]`` (the bases' configs differ only in the SFT seed, which they do not
    read; trainers with a custom ``rollout_fn`` must all sample alike); prompts are drawn by
    each base's own draw (its pool size is static in it). A base's data (pool, held-out
    problems) stay on its trainer, ``trainers[i]``.

    The numbers: every compiled call maps seeds one after another
    (:func:`rlvr_lab.train.seed_axis.seed_map`), so with two or more seeds per base each seed
    runs the program it runs in its base's own run, and gets the same numbers bit for bit
    (``tests/core/test_batched_bases.py``). A base's own run with one seed splits that seed's
    rows over host threads (:mod:`rlvr_lab.train.seed_threads`), which rounds differently, so
    with one seed per base the numbers agree up to float rounding.

    Only the ``uniform`` rollout stage without ``data_parallel``: a rollout stage draws from
    the pool inside its compiled program, where the pool size is static (each base's pool
    has its own size), and a data-parallel run shards its rows over devices.
    """

    def __init__(self, trainers: Sequence[sequence.Trainer], base_ids: Sequence[int],
                 seeds_per_base: int):
        # not Trainer.__init__: the data are the per-base trainers', the compiled calls the
        # first one's
        trainers, base_ids = list(trainers), [_check_base(b) for b in base_ids]
        if not trainers or len(trainers) != len(base_ids):
            raise ValueError(f"BatchedBases needs one trainer per base; got {len(trainers)} "
                             f"trainers for base_ids={base_ids!r}")
        _registry.positive_int("seeds_per_base", seeds_per_base)
        self.seeds_per_base = int(seeds_per_base)
        first = trainers[0]
        for tr, b in zip(trainers, base_ids):
            if not batchable(tr.config):
                raise ValueError(f"rollout={tr.config.rollout!r}, data_parallel="
                                 f"{tr.config.data_parallel} is not allowed in BatchedBases; "
                                 "only the 'uniform' stage without data_parallel batches bases")
            if dataclasses.replace(tr.config, base=first.config.base) != first.config:
                raise ValueError(f"the trainer of base {b} has another config than the first "
                                 "base's (besides the SFT seed); one arm per BatchedBases")
        self.trainers, self.base_ids = tuple(trainers), tuple(base_ids)
        self.config = first.config
        self.stage, self.mesh = None, None
        self._rollout, self._eval_each = first._rollout, first._eval_each
        self._pass_at, self._init_opt = first._pass_at, first._init_opt
        spb = self.seeds_per_base
        self._slices = [slice(i * spb, (i + 1) * spb) for i in range(len(trainers))]
        self._ref = None
        self._eval_prompts, self._eval_valid = self._stack_bases(
            [(t.eval_prompts, t.eval_valid) for t in trainers])
        self._eval_problems = [list(t.eval_problems) for t in trainers for _ in range(spb)]

    def _stack_bases(self, trees: list):
        """One tree per base -> one tree with a leading seed axis (each base's ``spb`` times)."""
        spb = self.seeds_per_base
        return jax.tree.map(lambda *xs: jnp.concatenate(
            [jnp.broadcast_to(x, (spb,) + jnp.shape(x)) for x in xs]), *trees)

    @property
    def num_seeds(self) -> int:
        return len(self.trainers) * self.seeds_per_base

    @property
    def base_policy(self):
        """The SFT base of every seed (a leading seed axis): each seed's base's policy."""
        if self._ref is None:
            self._ref = self._stack_bases([t.base_policy for t in self.trainers])
        return self._ref

    def init_state(self, num_seeds: int) -> sequence.TrainState:
        self._check_seeds(num_seeds)
        policy = self.base_policy
        return sequence.TrainState(policy, self._init_opt(policy), None)

    def _check_seeds(self, num_seeds: int) -> None:
        if num_seeds != self.num_seeds:
            raise ValueError(f"num_seeds={num_seeds} is not allowed; this BatchedBases runs "
                             f"{len(self.trainers)} bases x {self.seeds_per_base} seeds = "
                             f"{self.num_seeds}")

    def step_keys(self, key: jax.Array, step: int, num_seeds: int) -> jax.Array:
        """Each base's seeds get the keys of its own run (:func:`base_key`)."""
        self._check_seeds(num_seeds)
        return jnp.concatenate([t.step_keys(base_key(key, b), step, self.seeds_per_base)
                                for t, b in zip(self.trainers, self.base_ids)])

    def sample_batch(self, keys, policy):
        idx = [t._draw(keys[sl]) for t, sl in zip(self.trainers, self._slices)]
        prompts = jnp.concatenate([t.pool_prompts[i] for t, i in zip(self.trainers, idx)])
        valid = jnp.concatenate([t.pool_valid[i] for t, i in zip(self.trainers, idx)])
        return jnp.concatenate(idx), self._rollout(keys, policy, prompts, valid)

    def verify(self, idx, tokens):
        """Each seed's rollouts verified against its base's pool (its trainer's ``verify``)."""
        tokens = np.asarray(tokens)
        parts = [t.verify(idx[sl], tokens[sl]) for t, sl in zip(self.trainers, self._slices)]
        return tuple(np.concatenate(p) for p in zip(*parts))

    def update_from_batch(self, keys, state, batch, rewards, group_mask=None):
        if group_mask is not None:
            raise ValueError("group_mask is not allowed in BatchedBases (uniform stage only)")
        return sequence.mapped_update_each_ref(keys, state, self.base_policy, batch,
                                               jnp.asarray(rewards), self.config)

    def evaluate(self, key, state, step):
        keys = streams.each(self.step_keys(key, step, self.num_seeds), streams.EVALUATION)
        tokens = self._eval_each(keys, state.policy, self._eval_prompts, self._eval_valid)
        return self.heldout_pass_at(tokens, self._eval_problems)


def batchable(config: sequence.SequenceRLConfig) -> bool:
    """Whether :func:`run_bases` can run ``config``'s bases as one :class:`BatchedBases`."""
    return config.rollout == "uniform" and not config.data_parallel


def split_run(run: sequence.Run, num_runs: int) -> list[sequence.Run]:
    """A run of ``num_runs`` equal blocks of seeds as one run per block (the inverse of
    :func:`concat_runs`); each gets an equal share of the wall time."""
    num_seeds = np.asarray(run.evals["pass_at"]).shape[1]
    _registry.positive_int("num_runs", num_runs)
    if num_seeds % num_runs:
        raise ValueError(f"num_runs={num_runs!r} is not allowed; it must be a positive "
                         f"integer that divides the run's {num_seeds} seeds")
    size = num_seeds // num_runs
    part = lambda i: lambda x: np.asarray(x)[i * size:(i + 1) * size]  # noqa: E731
    cols = lambda i: lambda x: np.asarray(x)[:, i * size:(i + 1) * size]  # noqa: E731
    return [sequence.Run(state=jax.tree.map(part(i), run.state), steps_done=run.steps_done,
                         history={k: cols(i)(v) for k, v in run.history.items()},
                         evals={"step": np.asarray(run.evals["step"]),
                                "pass_at": cols(i)(run.evals["pass_at"])},
                         seconds=run.seconds / num_runs)
            for i in range(num_runs)]


def run_bases(config: sequence.SequenceRLConfig, key: jax.Array, bases: Sequence[int],
              seeds_per_base: int, *,
              trainer: Callable[[sequence.SequenceRLConfig], sequence.Trainer] | None = None,
              batch: bool | None = None, verbose: bool = False) -> list[sequence.Run]:
    """One :class:`~rlvr_lab.train.sequence.Run` of ``seeds_per_base`` seeds per base, in the
    order of ``bases``. ``trainer(config)`` builds the trainer of a base's config (default:
    :class:`~rlvr_lab.train.sequence.Trainer`), e.g. with a custom rollout function.

    ``batch`` (default: where :func:`batchable`): run every base's seeds as one
    :class:`BatchedBases` run; ``False`` runs the bases one after another (each run's
    ``seconds`` its own; batched, each base gets an equal share of the whole)."""
    make = trainer or (lambda cfg: sequence.Trainer(cfg, verbose=verbose))
    bases = list(bases)            # run_trainers checks them
    trainers = [make(with_base(config, b)) for b in bases]
    return run_trainers(trainers, key, bases, seeds_per_base, batch=batch, verbose=verbose)


def run_trainers(trainers: Sequence[sequence.Trainer], key: jax.Array, bases: Sequence[int],
                 seeds_per_base: int, *, batch: bool | None = None,
                 verbose: bool = False) -> list[sequence.Run]:
    """:func:`run_bases` with the trainers already built: ``trainers[i]`` is the arm's
    trainer from base ``bases[i]`` (e.g. trainers that share compiled calls with other
    arms). ``batch`` as in :func:`run_bases`."""
    bases = [_check_base(b) for b in bases]
    if len(trainers) != len(bases):
        raise ValueError(f"run_trainers needs one trainer per base; got {len(trainers)} "
                         f"trainers for bases={bases!r}")
    if batch is None:
        batch = len(bases) > 1 and all(batchable(t.config) for t in trainers)
    if batch:
        batched = BatchedBases(trainers, bases, seeds_per_base)
        run = sequence.run(batched.config, key, batched.num_seeds, trainer=batched,
                           verbose=verbose)
        return split_run(run, len(bases))
    return [sequence.run(t.config, base_key(key, b), seeds_per_base, trainer=t,
                         verbose=verbose) for t, b in zip(trainers, bases)]


def per_seed(runs: Sequence[sequence.Run], fn: Callable[[sequence.Run], np.ndarray]
             ) -> np.ndarray:
    """``fn(run)`` (one value per seed of a run) concatenated over the runs of several
    bases, in the order :func:`labels` gives."""
    return np.concatenate([np.asarray(fn(r), dtype=np.float64).reshape(-1) for r in runs])


def concat_runs(runs: Sequence[sequence.Run]) -> sequence.Run:
    """The runs of several bases as one :class:`~rlvr_lab.train.sequence.Run` with all their
    seeds (seed axis: the order :func:`labels` gives), for figures and tables."""
    if not runs:
        raise ValueError("concat_runs needs at least one run")
    first = runs[0]
    cat = lambda axis: lambda *xs: np.concatenate([np.asarray(x) for x in xs], axis)  # noqa: E731
    return sequence.Run(
        state=jax.tree.map(cat(0), *[r.state for r in runs]),
        steps_done=first.steps_done,
        history={k: np.concatenate([np.asarray(r.history[k]) for r in runs], axis=1)
                 for k in first.history},
        evals={"step": np.asarray(first.evals["step"]),
               "pass_at": np.concatenate([np.asarray(r.evals["pass_at"]) for r in runs],
                                         axis=1)},
        seconds=float(sum(r.seconds for r in runs)))
