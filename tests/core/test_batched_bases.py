"""Several SFT bases of one arm as one run (``bases.BatchedBases``): each seed gets the numbers
of its base's own run, bit for bit with two seeds per base; what it refuses."""
import dataclasses

import jax
import numpy as np
import pytest

from rlvr_lab.train import bases, sequence
from small_model import RL

BASES = (0, 2)   # not 0..n-1: a seed's keys and data must follow its base id, not its position


def _equal_runs(a: sequence.Run, b: sequence.Run, exact: bool):
    check = (np.testing.assert_array_equal if exact
             else lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-5))
    assert a.steps_done == b.steps_done
    assert sorted(a.history) == sorted(b.history)
    for k in a.history:
        check(np.asarray(a.history[k]), np.asarray(b.history[k]))
    np.testing.assert_array_equal(a.evals["step"], b.evals["step"])
    check(np.asarray(a.evals["pass_at"]), np.asarray(b.evals["pass_at"]))
    x, y = (np.concatenate([np.asarray(v).ravel() for v in jax.tree.leaves(r.state.policy)])
            for r in (a, b))
    if exact:
        np.testing.assert_array_equal(x, y)
    else:
        # Adam normalises each coordinate's gradient, so where a gradient is near zero float
        # rounding can move that coordinate by up to the learning rate: nearly all agree
        assert np.mean(np.abs(x - y) > 1e-5) < 1e-3


def test_batched_bases_equal_each_base_own_run_bitwise():
    """Two seeds per base: every seed runs the program of its base's own run (beta > 0, so
    each seed's reference must be its own base's policy)."""
    config, key = RL.replace(beta=0.05), jax.random.key(5)
    looped = bases.run_bases(config, key, BASES, 2, batch=False)
    batched = bases.run_bases(config, key, BASES, 2, batch=True)
    assert len(batched) == len(BASES)
    for a, b in zip(looped, batched):
        _equal_runs(a, b, exact=True)
    # the bases differ (else the test could not tell a base's data from another's)
    assert not np.array_equal(looped[0].history["loss"], looped[1].history["loss"])


def test_batched_bases_one_seed_per_base_agree_to_rounding():
    """One seed per base: the base's own run splits the seed's rows over threads, the batched
    run does not; the numbers agree to float rounding."""
    key = jax.random.key(6)
    config = RL.replace(steps=2)
    looped = bases.run_bases(config, key, BASES, 1, batch=False)
    batched = bases.run_bases(config, key, BASES, 1)        # the default batches
    for a, b in zip(looped, batched):
        _equal_runs(a, b, exact=False)


def test_split_run_inverts_concat_runs():
    runs = bases.run_bases(RL.replace(steps=2), jax.random.key(7), BASES, 1)
    again = bases.split_run(bases.concat_runs(runs), len(runs))
    for a, b in zip(runs, again):
        _equal_runs(a, b, exact=True)
        assert b.seconds == pytest.approx(sum(r.seconds for r in runs) / len(runs))
    with pytest.raises(ValueError, match="num_runs=3"):
        bases.split_run(bases.concat_runs(runs), 3)


def test_batchable_and_refusals():
    assert bases.batchable(RL)
    assert not bases.batchable(RL.replace(rollout="dynamic_sampling"))
    assert not bases.batchable(RL.replace(data_parallel=True))
    trainers = [sequence.Trainer(bases.with_base(RL, b)) for b in BASES]
    with pytest.raises(ValueError, match="one trainer per base"):
        bases.BatchedBases(trainers, (0,), 2)
    with pytest.raises(ValueError, match="seeds_per_base=0"):
        bases.BatchedBases(trainers, BASES, 0)
    other = [trainers[0], sequence.Trainer(bases.with_base(RL.replace(learning_rate=1e-2), 2))]
    with pytest.raises(ValueError, match="another config"):
        bases.BatchedBases(other, BASES, 2)
    staged = [sequence.Trainer(bases.with_base(RL.replace(rollout="dynamic_sampling"), b))
              for b in BASES]
    with pytest.raises(ValueError, match="dynamic_sampling"):
        bases.BatchedBases(staged, BASES, 2)
    batched = bases.BatchedBases(trainers, BASES, 2)
    with pytest.raises(ValueError, match="num_seeds=3"):
        batched.init_state(3)
    assert dataclasses.replace(batched.config, base=RL.base) == RL
