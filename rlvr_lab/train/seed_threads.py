"""Seed-mapped compiled calls split over host threads, for the small model's decoding.

XLA:CPU runs a decoding loop on one core: each of its steps is a chain of small matmuls that
the runtime does not spread over cores (measured: the ``rl_step_mfu`` rollout takes 28 ms on
one core and 26-28 ms on two). Independent seeds need not wait for each other, so
:func:`threaded_seed_map` compiles ``fn`` over a contiguous range of seeds
(:func:`rlvr_lab.train.seed_axis.seed_map` with ``seeds=(lo, hi)``) and runs one range per
host thread, up to one per core; each seed runs the same per-seed program as in a single call,
so the numbers do not depend on the split. A backend other than CPU runs in one call.

One seed has no seeds to split: functions whose work is independent rows (sampling a batch of
completions) may instead take a static ``rows=(lo, hi)`` and compute only those rows, which
:func:`threaded_seed_map` then runs as :data:`ROW_RANGES` ranges on the threads
(``row_axes``). A row's matmuls, softmaxes and draws do not read the other rows, but YNNPACK's
matrix kernels (XLA:CPU's default) round a row differently depending on how many rows a call
has (measured: an entropy metric off by 6e-8 between one 32-row call and two 16-row halves),
so the ranges depend only on the row count, never on the number of cores or threads: a
one-seed run gives the same numbers on any CPU with the same kernels. Measured on the
``rl_step_mfu`` rollout (64 rows, 2 cores): 24 ms in one call (XLA's own kernels), 15-17 ms
as two 32-row halves with YNNPACK (see :data:`rlvr_lab.utils.DECODE_COMPILE`).
"""
from __future__ import annotations

import concurrent.futures
import functools
import os
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from rlvr_lab.train.seed_axis import seed_map
from rlvr_lab.utils import jit_cpu_options


def seed_ranges(num_seeds: int, workers: int) -> list[tuple[int, int]]:
    """``min(num_seeds, workers)`` contiguous ``(lo, hi)`` ranges covering ``0..num_seeds-1``,
    sizes differing by at most one."""
    parts = max(1, min(num_seeds, workers))
    bounds = [num_seeds * i // parts for i in range(parts + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


# row ranges of a one-seed call on CPU (fixed: the numbers must not depend on the core count)
ROW_RANGES = 2


def host_workers() -> int:
    """Threads to split seeds over: ``RLVR_LAB_SEED_THREADS`` if set (a positive integer; 1
    turns the seed split off and runs a one-seed call's row ranges one after the other), else
    the cores on a CPU backend and 1 on other backends."""
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


def _is_axis(x) -> bool:
    return x is None or isinstance(x, int)


def threaded_seed_map(fn: Callable[..., Any], in_axes: Sequence[int | None],
                      options: dict | None = None, *, num_rows: int | None = None,
                      row_axes: Any = 0) -> Callable[..., Any]:
    """``jit(seed_map(fn, in_axes))`` (compiled with :func:`rlvr_lab.utils.jit_cpu_options`
    ``options``) whose seeds are split into ranges run concurrently on host threads; outputs
    are concatenated along the seed axis.

    ``num_rows``: ``fn`` also accepts a static keyword ``rows=(lo, hi)`` and a traced
    ``row_start`` and then returns only rows ``row_start+lo .. row_start+hi-1`` of its
    ``num_rows`` (called here as ``rows=(0, size)``, so ranges of one size compile once); a
    one-seed call on CPU is split into
    :data:`ROW_RANGES` row ranges (of at least 2 rows) instead, whatever the thread count.
    ``row_axes`` (a prefix of ``fn``'s output tree, like ``vmap``'s ``out_axes``) says which
    outputs are rows (0: concatenated) and which every range returns whole (None: taken from
    the first range).
    """
    first = next(i for i, ax in enumerate(in_axes) if ax == 0)
    # a range of seeds or rows is (0, size) shifted by a traced start: ranges of one size
    # share one compiled program (a static (lo, hi) compiled every range on its own, the same
    # work once per thread)
    ranged = jit_cpu_options(
        lambda seeds, size, seed_start, row_start, *args: seed_map(
            fn if size is None else functools.partial(fn, rows=(0, size), row_start=row_start),
            in_axes, seeds=(0, seeds), seed_start=seed_start)(*args),
        options, static_argnums=(0, 1))

    def merge(parts, axis: int):
        # parts carry the seed axis in front, so a per-seed row axis is axis 1
        return jax.tree.map(lambda *xs: jnp.concatenate(xs, axis=1 + axis), *parts)

    def call(*args):
        num_seeds = jax.tree.leaves(args[first])[0].shape[0]
        workers = host_workers()
        by_rows = (num_seeds == 1 and num_rows is not None
                   and jax.default_backend() == "cpu")
        # ranges of at least 2 rows: one row runs matrix-vector kernels, which round differently
        calls = ([(1, hi - lo, None, jnp.int32(lo))
                  for lo, hi in seed_ranges(num_rows, min(ROW_RANGES, num_rows // 2))]
                 if by_rows
                 else [(hi - lo, None, jnp.int32(lo), None)
                       for lo, hi in seed_ranges(num_seeds, workers)])
        if len(calls) == 1:
            return ranged(num_seeds, None, None, None, *args)
        # block inside each worker: XLA:CPU runs a program on the thread that waits for it.
        # One pool per worker count (not per number of ranges), reused across seed counts
        outs = list(_pool(workers).map(
            lambda c: jax.block_until_ready(ranged(*c, *args)), calls))
        if not by_rows:
            return jax.tree.map(lambda *xs: jnp.concatenate(xs), *outs)
        return jax.tree.map(lambda axis, *parts: parts[0] if axis is None else merge(parts, axis),
                            row_axes, *outs, is_leaf=_is_axis)

    return call
