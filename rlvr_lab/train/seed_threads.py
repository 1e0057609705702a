"""Seed-mapped compiled calls split over host threads, for the small model's decoding.

XLA:CPU runs a decoding loop on one core: each of its steps is a chain of small matmuls that
the runtime does not spread over cores (measured: the ``rl_step_mfu`` rollout takes 28 ms on
one core and 26-28 ms on two). Independent seeds need not wait for each other, so
:func:`threaded_seed_map` compiles ``fn`` over a contiguous range of seeds
(:func:`rlvr_lab.train.sequence.seed_map` with ``seeds=(lo, hi)``) and runs one range per
host thread, up to one per core; each seed runs the same per-seed program as in a single call,
so the numbers do not depend on the split. One seed, or a backend other than CPU, runs in one
call as before.
"""
from __future__ import annotations

import concurrent.futures
import functools
import os
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from rlvr_lab.utils import jit_cpu_options


def seed_ranges(num_seeds: int, workers: int) -> list[tuple[int, int]]:
    """``min(num_seeds, workers)`` contiguous ``(lo, hi)`` ranges covering ``0..num_seeds-1``,
    sizes differing by at most one."""
    parts = max(1, min(num_seeds, workers))
    bounds = [num_seeds * i // parts for i in range(parts + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def host_workers() -> int:
    """Threads to split seeds over: ``RLVR_LAB_SEED_THREADS`` if set (a positive integer; 1
    turns the split off), else the cores on a CPU backend and 1 on other backends."""
    value = os.environ.get("RLVR_LAB_SEED_THREADS")
    if value is not None:
        if not value.strip().isdigit() or int(value) < 1:
            raise ValueError(f"RLVR_LAB_SEED_THREADS={value!r} is not allowed; it must be a "
                             "positive integer")
        return int(value)
    return (os.cpu_count() or 1) if jax.default_backend() == "cpu" else 1


@functools.lru_cache(maxsize=1)
def _pool(workers: int) -> concurrent.futures.ThreadPoolExecutor:
    return concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="rlvr-seeds")


def threaded_seed_map(fn: Callable[..., Any], in_axes: Sequence[int | None],
                      options: dict | None = None) -> Callable[..., Any]:
    """``jit(seed_map(fn, in_axes))`` (compiled with :func:`rlvr_lab.utils.jit_cpu_options`
    ``options``) whose seeds are split into ranges run concurrently on host threads; outputs
    are concatenated along the seed axis."""
    from rlvr_lab.train.sequence import seed_map

    first = next(i for i, ax in enumerate(in_axes) if ax == 0)
    ranged = jit_cpu_options(
        lambda lo, hi, *args: seed_map(fn, in_axes, seeds=(lo, hi))(*args), options,
        static_argnums=(0, 1))

    def call(*args):
        num_seeds = jax.tree.leaves(args[first])[0].shape[0]
        workers = host_workers()
        ranges = seed_ranges(num_seeds, workers)
        if len(ranges) == 1:
            return ranged(0, num_seeds, *args)
        # block inside each worker: XLA:CPU runs a program on the thread that waits for it.
        # One pool per worker count (not per number of ranges), reused across seed counts
        outs = list(_pool(workers).map(
            lambda r: jax.block_until_ready(ranged(*r, *args)), ranges))
        return jax.tree.map(lambda *xs: jnp.concatenate(xs), *outs)

    return call
