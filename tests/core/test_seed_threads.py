"""Seed ranges on host threads: the split covers every seed once and changes no number."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from small_model import RL

from rlvr_lab.train import seed_threads, sequence


@given(st.integers(1, 64), st.integers(1, 16))
def test_seed_ranges_cover_every_seed_once_in_near_equal_parts(num_seeds, workers):
    ranges = seed_threads.seed_ranges(num_seeds, workers)
    assert len(ranges) == min(num_seeds, workers)
    assert ranges[0][0] == 0 and ranges[-1][1] == num_seeds
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    sizes = [hi - lo for lo, hi in ranges]
    assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1


def _fn(key, x, w):
    noise = jax.random.normal(key, x.shape)
    return {"y": jnp.tanh((x + noise) @ w), "n": jax.lax.fori_loop(0, 3, lambda i, c: c * 0.5
                                                                    + x.sum(), 0.0)}


@pytest.mark.parametrize("workers", [1, 2, 3, 8])
def test_threaded_seed_map_equals_one_compiled_seed_map(monkeypatch, workers):
    monkeypatch.setattr(seed_threads, "host_workers", lambda: workers)
    keys = jax.random.split(jax.random.key(0), 5)
    x = jax.random.normal(jax.random.key(1), (5, 6, 4))
    w = jax.random.normal(jax.random.key(2), (4, 3))
    want = jax.jit(sequence.seed_map(_fn, (0, 0, None)))(keys, x, w)
    got = seed_threads.threaded_seed_map(_fn, (0, 0, None), {})(keys, x, w)
    for name in want:
        assert got[name].shape == want[name].shape
        np.testing.assert_array_equal(np.asarray(got[name]), np.asarray(want[name]))


def test_seed_threads_setting(monkeypatch):
    monkeypatch.setenv("RLVR_LAB_SEED_THREADS", "3")
    assert seed_threads.host_workers() == 3
    for bad in ("0", "two", "-1", ""):
        monkeypatch.setenv("RLVR_LAB_SEED_THREADS", bad)
        with pytest.raises(ValueError, match=f"RLVR_LAB_SEED_THREADS={bad!r} is not allowed"):
            seed_threads.host_workers()


def test_seed_map_range_maps_only_those_seeds():
    x = jnp.arange(12.0).reshape(4, 3)
    out = sequence.seed_map(lambda v, c: v * c, (0, None), seeds=(1, 3))(x, 2.0)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(x[1:3] * 2.0))


def _rows_fn(key, x, w, rows=None, row_start=None):
    noise = jax.random.normal(key, x.shape)   # drawn for all rows, then cut: same draws
    y = jnp.tanh((x + noise) @ w)
    total = x.sum()
    if rows is not None:
        start = rows[0] if row_start is None else row_start + rows[0]
        y = jax.lax.dynamic_slice_in_dim(y, start, rows[1] - rows[0])
    return {"y": y, "total": total}


def test_seed_ranges_of_one_size_share_one_compiled_program(monkeypatch):
    monkeypatch.setattr(seed_threads, "host_workers", lambda: 2)
    traced = []

    def counted(v, c):
        traced.append(v.shape)
        return v * c

    x = jnp.arange(4.0)
    out = seed_threads.threaded_seed_map(counted, (0, None), {})(x, 2.0)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(x * 2.0))
    assert len(traced) == 1, f"one program for both seed ranges, traced {len(traced)}"


def test_row_ranges_of_one_size_share_one_compiled_program(monkeypatch):
    monkeypatch.setattr(seed_threads, "host_workers", lambda: 2)
    keys = jax.random.split(jax.random.key(0), 1)
    x = jax.random.normal(jax.random.key(1), (1, 8, 4))   # 8 rows: two ranges of 4
    w = jax.random.normal(jax.random.key(2), (4, 3))
    traced = []

    def counted(*args, **kwargs):     # runs once per trace, i.e. once per compiled program
        traced.append(kwargs.get("rows"))
        return _rows_fn(*args, **kwargs)

    got = seed_threads.threaded_seed_map(counted, (0, 0, None), {}, num_rows=8,
                                         row_axes={"y": 0, "total": None})(keys, x, w)
    want = jax.jit(sequence.seed_map(_rows_fn, (0, 0, None)))(keys, x, w)
    np.testing.assert_array_equal(np.asarray(got["y"]), np.asarray(want["y"]))
    assert traced == [(0, 4)], f"one program for both ranges, traced {traced}"


@pytest.mark.parametrize("workers", [1, 2, 3, 8])
def test_one_seed_is_split_into_row_ranges(monkeypatch, workers):
    monkeypatch.setattr(seed_threads, "host_workers", lambda: workers)
    keys = jax.random.split(jax.random.key(0), 1)
    x = jax.random.normal(jax.random.key(1), (1, 7, 4))   # 7 rows: at most 3 ranges
    w = jax.random.normal(jax.random.key(2), (4, 3))
    want = jax.jit(sequence.seed_map(_rows_fn, (0, 0, None)))(keys, x, w)
    got = seed_threads.threaded_seed_map(_rows_fn, (0, 0, None), {}, num_rows=7,
                                         row_axes={"y": 0, "total": None})(keys, x, w)
    assert got["y"].shape == (1, 7, 3) and got["total"].shape == (1,)
    np.testing.assert_array_equal(np.asarray(got["y"]), np.asarray(want["y"]))
    np.testing.assert_array_equal(np.asarray(got["total"]), np.asarray(want["total"]))


@pytest.mark.parametrize("num_seeds,workers", [(3, 2), (1, 2), (1, 3)])
def test_trainer_rollouts_do_not_depend_on_the_thread_split(base, monkeypatch, num_seeds,
                                                            workers):
    """Seeds sampled (training rollouts and held-out evaluation) in one call and split over
    threads -- by seeds, or one seed in row ranges fixed by the row count -- give bitwise the
    same tokens, log-probs and hence parameters after a step."""
    key = jax.random.key(5)
    out = {}
    for w in (1, workers):
        monkeypatch.setattr(seed_threads, "host_workers", lambda w=w: w)
        trainer = sequence.Trainer(RL, base_policy=base)
        state = trainer.init_state(num_seeds)
        state, metrics = trainer.train_step(key, state, 0)
        out[w] = (jax.tree.leaves(state.policy), metrics, trainer.evaluate(key, state, 1))
    (p1, m1, e1), (p2, m2, e2) = out[1], out[workers]
    for a, b in zip(p1, p2):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    for name in m1:
        np.testing.assert_array_equal(m1[name], m2[name], err_msg=name)
    np.testing.assert_array_equal(e1, e2)
