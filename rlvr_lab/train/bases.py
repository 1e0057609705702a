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
(same base, same RL key, same held-out problems).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import jax
import numpy as np

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


def run_bases(config: sequence.SequenceRLConfig, key: jax.Array, bases: Sequence[int],
              seeds_per_base: int, *,
              trainer: Callable[[sequence.SequenceRLConfig], sequence.Trainer] | None = None,
              verbose: bool = False) -> list[sequence.Run]:
    """One :class:`~rlvr_lab.train.sequence.Run` of ``seeds_per_base`` seeds per base, in the
    order of ``bases``. ``trainer(config)`` builds the trainer of a base's config (default:
    :class:`~rlvr_lab.train.sequence.Trainer`), e.g. with a custom rollout function."""
    make = trainer or (lambda cfg: sequence.Trainer(cfg, verbose=verbose))
    runs = []
    for b in bases:
        cfg = with_base(config, b)
        runs.append(sequence.run(cfg, base_key(key, b), seeds_per_base, trainer=make(cfg),
                                 verbose=verbose))
    return runs


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
