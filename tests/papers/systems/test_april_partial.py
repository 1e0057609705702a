"""APRIL partial rollouts on the tiny transformer: round plan, prefix bookkeeping, the driver."""
import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from small_model import RL, TINY

from rlvr_lab import random_streams
from rlvr_lab.models import transformer as T
from rlvr_lab.models.transformer import PAD_ID
from rlvr_lab.papers.systems import partial
from rlvr_lab.train import sequence, sft

APRIL = partial.PartialConfig(RL, over_provision=2.0)


@pytest.fixture(scope="module")
def trainer(cache):
    return sequence.Trainer(RL, base_policy=sft.load_or_train(TINY, verbose=False))


@pytest.fixture(scope="module")
def driver(trainer):
    return partial.Driver(APRIL, trainer=trainer)


@pytest.fixture(scope="module")
def april_run(driver):
    key = jax.random.key(5)
    return partial.run(APRIL, key, 2, driver=driver), key


# ----------------------------------------------------------------------------- pure pieces
def _plan_reference(finish, n):
    """Brute force: the n groups first in (finish time, slot) order; t* = the last one's."""
    order = sorted(range(len(finish)), key=lambda i: (finish[i], i))[:n]
    return sorted(order), max(finish[i] for i in order)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 12), min_size=1, max_size=12), st.data())
def test_plan_round_matches_brute_force(finish, data):
    n = data.draw(st.integers(1, len(finish)))
    batch, t_stop = partial.plan_round(np.array(finish), n)
    ref_batch, ref_t = _plan_reference(finish, n)
    assert batch.tolist() == ref_batch and t_stop == ref_t
    # every group left out finishes no earlier than t*: the round cannot stop sooner
    assert all(finish[i] >= t_stop for i in range(len(finish)) if i not in ref_batch)


def _hand_group(prefix_len, n=6, version=3):
    g = len(prefix_len)
    grp = partial.new_group(7, g, n)
    k = np.array(prefix_len)
    cols = np.arange(n)[None] < k[:, None]
    return grp._replace(tokens=np.where(cols, 10 + np.arange(n)[None], PAD_ID).astype(np.int32),
                        logp=np.where(cols, -0.5, 0.0).astype(np.float32),
                        entropy=np.where(cols, 0.25, 0.0).astype(np.float32),
                        version=np.where(cols, version, partial.UNSET), length=k)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=1, max_size=5), st.data())
def test_advance_conserves_every_token(prefix_len, data):
    n = 6
    grp = _hand_group(prefix_len, n)
    k = grp.length
    length = np.array([data.draw(st.integers(int(x), n)) for x in k])  # sampled, incl. EOS
    t_stop = data.draw(st.integers(0, n))
    # sampler output: prefix forced, then new tokens 30+col, EOS at length-1 when < n
    cols = np.arange(n)[None]
    tokens = np.where(cols < k[:, None], grp.tokens, 30 + cols)
    tokens = np.where(cols < length[:, None], tokens, PAD_ID)
    logp = np.where(cols < length[:, None], -1.0 - cols, 0.0)
    after = partial.advance(grp, tokens, logp, logp / 10, length, t_stop, version=5)
    for i in range(len(k)):
        new_len = min(length[i], k[i] + t_stop)
        assert after.length[i] == new_len and after.complete[i] == (new_len == length[i])
        # the carried prefix is untouched: tokens, log-probs as generated, versions
        np.testing.assert_array_equal(after.tokens[i, :k[i]], grp.tokens[i, :k[i]])
        np.testing.assert_array_equal(after.logp[i, :k[i]], grp.logp[i, :k[i]])
        assert (after.version[i, :k[i]] == 3).all()
        # then exactly the new tokens of this round, nothing lost or duplicated, PAD after
        np.testing.assert_array_equal(after.tokens[i, k[i]:new_len], tokens[i, k[i]:new_len])
        np.testing.assert_array_equal(after.logp[i, k[i]:new_len], logp[i, k[i]:new_len])
        assert (after.version[i, k[i]:new_len] == 5).all()
        assert (after.tokens[i, new_len:] == PAD_ID).all()
        assert (after.version[i, new_len:] == partial.UNSET).all()
    arrays = partial.batch_arrays([after], version=5)
    np.testing.assert_array_equal(arrays["mask"].sum(1), after.length)
    np.testing.assert_array_equal(arrays["stale"],
                                  np.arange(n)[None] < np.minimum(k, after.length)[:, None])


def test_sampler_prefix_is_forced_and_scored_like_a_prefill(trainer):
    policy = trainer.base_policy
    prompts, valid = trainer.pool_prompts[:6], trainer.pool_valid[:6]
    n = TINY.max_new_tokens
    key = jax.random.key(0)
    free = T.sample(key, policy, prompts, valid, max_new_tokens=n)
    other = T.sample(jax.random.key(9), policy, prompts, valid, max_new_tokens=n)
    k = jnp.array([0, 1, 2, 3, 0, n])
    forced = T.sample(key, policy, prompts, valid, max_new_tokens=n, prefix=other.tokens,
                      prefix_len=k)
    cols = np.arange(n)[None] < np.asarray(k)[:, None]
    np.testing.assert_array_equal(np.asarray(forced.tokens)[cols], np.asarray(other.tokens)[cols])
    for row in (0, 4):   # no prefix: exactly the unforced sample
        for a, b in zip(free, forced):
            np.testing.assert_array_equal(np.asarray(a)[row], np.asarray(b)[row])
    # log-probs of the whole forced completion = one full causal pass (re-prefill) over it
    ref = T.score(policy, prompts, valid, forced.tokens)
    m = np.asarray(forced.mask)
    np.testing.assert_allclose(np.asarray(forced.logp)[m], np.asarray(ref)[m], atol=2e-5)
    with pytest.raises(ValueError, match="prefix"):
        T.sample(key, policy, prompts, valid, max_new_tokens=n, prefix=other.tokens)


# ----------------------------------------------------------------------------- the driver
def test_rounds_keep_prefixes_fifo_and_flag_stale_tokens(driver):
    state, buffers = driver.init(2)
    key = jax.random.key(3)
    n_run = APRIL.groups_per_round
    saw_partial = False
    for step in range(4):
        keys = jax.random.split(jax.random.fold_in(key, step), 2)
        rounds = driver.rollout(keys, state.policy, buffers, step)
        for buf, r in zip(buffers, rounds):
            # FIFO: the buffer is served first, in order; then fresh problems
            assert len(r.running) == n_run and all(a is b for a, b in zip(r.running, buf))
            tokens = r.tokens.reshape(n_run, RL.num_generations, -1)
            for i, (before, after) in enumerate(zip(r.running, r.after)):
                k = before.length
                cols = np.arange(tokens.shape[-1])[None] < k[:, None]
                # the sampler reproduced the buffered prefix; the group keeps it unchanged
                np.testing.assert_array_equal(tokens[i][cols], before.tokens[cols])
                np.testing.assert_array_equal(after.tokens[cols], before.tokens[cols])
                np.testing.assert_array_equal(after.logp[cols], before.logp[cols])
                assert (after.length >= k).all()
                saw_partial |= bool((~after.complete).any())
            # the next buffer: every group not trained, in slot order (arrival order kept)
            left = [i for i in range(n_run) if i not in set(r.batch.tolist())]
            assert len(r.buffer) == len(left)
            for gr, i in zip(r.buffer, left):
                np.testing.assert_array_equal(gr.tokens, r.after[i].tokens)
                np.testing.assert_array_equal(gr.length, r.after[i].length)
            # stale flags exactly on the carried prefix of the trained groups
            batch = [r.after[i] for i in r.batch]
            arrays = partial.batch_arrays(batch, step)
            carried = np.concatenate([r.running[i].length for i in r.batch])
            n = arrays["mask"].shape[1]
            np.testing.assert_array_equal(arrays["stale"],
                                          np.arange(n)[None] < carried[:, None])
            assert all(gr.complete.all() for gr in batch)
            assert len(r.batch) == RL.num_prompts
        buffers = [r.buffer for r in rounds]
    assert saw_partial   # the round budget does cut responses on this task


def test_april_run_is_deterministic_and_reports_staleness(april_run, driver):
    run, key = april_run
    again = partial.run(APRIL, key, 2, driver=driver)
    for name in run.history:
        np.testing.assert_array_equal(run.history[name], again.history[name], err_msg=name)
    np.testing.assert_array_equal(run.evals["pass_at"], again.evals["pass_at"])
    h = run.history
    assert (h["stale_token_frac"][0] == 0).all()     # nothing is buffered before step 0
    assert h["stale_token_frac"][1:].max() > 0       # partial prefixes are trained on
    np.testing.assert_allclose(h["stale_frac"], h["stale_token_frac"], atol=1e-6)
    stale = h["stale_token_frac"] > 0
    assert (h["lag_mean"][stale] >= 1).all() and (h["lag_max"][~stale] == 0).all()
    for name in ("stale_k3", "stale_chi2", "round_steps", "round_tokens", "buffer_groups"):
        assert np.isfinite(h[name]).all(), name
    assert (h["buffer_groups"] == APRIL.groups_per_round - RL.num_prompts).all()
    assert set(run.frame().metric) >= {"pass1", "stale_token_frac", "lag_mean", "stale_k3"}


def test_one_times_provisioning_is_synchronous_grpo(trainer):
    # r = 1: all N groups must finish, nothing is buffered, and the round is exactly
    # sequence.Trainer's rollout for the same key (same problems, tokens, log-probs)
    # (checked end to end too: partial.run(r=1) reproduces sequence.run's history bit for bit,
    # left out here to keep this file fast -- it compiles a second update)
    config = partial.PartialConfig(RL, over_provision=1.0)
    driver = partial.Driver(config, trainer=trainer)
    policy = trainer.init_state(2).policy
    keys = jax.random.split(jax.random.key(7), 2)
    rounds = driver.rollout(keys, policy, [[], []], 0)
    for s, r in enumerate(rounds):
        key = keys[s]
        idx = jax.random.choice(random_streams.stream(key, random_streams.PROMPTS),
                                trainer.pool_prompts.shape[0], (RL.num_prompts,),
                                replace=False)
        ref = sequence.rollout(random_streams.stream(key, random_streams.SAMPLES),
                               trainer.base_policy,
                               trainer.pool_prompts[idx], trainer.pool_valid[idx], RL)
        assert [gr.problem for gr in r.running] == np.asarray(idx).tolist()
        assert r.batch.tolist() == list(range(RL.num_prompts)) and r.buffer == []
        arrays = partial.batch_arrays([r.after[i] for i in r.batch], 0)
        np.testing.assert_array_equal(arrays["tokens"], ref.tokens)
        np.testing.assert_array_equal(arrays["mask"], ref.mask)
        # (float noise only: the driver's sampler runs vmapped over seeds, the reference not)
        np.testing.assert_allclose(arrays["behav_logp"], ref.behav_logp, atol=1e-5)
        np.testing.assert_allclose(arrays["entropy"], ref.entropy, atol=1e-5)
        assert not arrays["stale"].any()


def test_resume_delay_ages_prefixes_and_treatments_share_a_trainer(driver, trainer):
    key = jax.random.key(11)
    cfg = dataclasses.replace(APRIL, resume_delay=1)
    run = partial.run(cfg, key, 2, driver=partial.Driver(cfg, trainer=trainer))
    lag = run.history["lag_max"]
    # a group cut at step 0 waits one extra step: resumed at step 2 with a 2-version lag
    assert (lag[:2] == 0).all() and (lag[2] == 2).all()
    # another treatment (a loss setting) may reuse the trainer's pool and evaluation
    masked = partial.PartialConfig(dataclasses.replace(RL, mask_stale=True))
    assert partial.Driver(masked, trainer=trainer).trainer is trainer


def test_bad_configs_raise_one_line_errors(trainer):
    for r in (0.5, math.inf, math.nan, True, "2"):
        with pytest.raises(ValueError, match="over_provision"):
            partial.PartialConfig(RL, over_provision=r)
    for d in (-1, 1.5):
        with pytest.raises(ValueError, match="resume_delay"):
            partial.PartialConfig(RL, resume_delay=d)
    with pytest.raises(ValueError, match="data_parallel"):
        partial.PartialConfig(dataclasses.replace(RL, data_parallel=True))
    with pytest.raises(ValueError, match="num_generations"):
        partial.Driver(partial.PartialConfig(dataclasses.replace(RL, num_generations=2)),
                       trainer=trainer)
    with pytest.raises(ValueError, match="pool has"):
        partial.Driver(partial.PartialConfig(RL, over_provision=100.0), trainer=trainer)
    with pytest.raises(ValueError, match="n_target"):
        partial.plan_round(np.array([1, 2]), 3)
    with pytest.raises(ValueError) as err:
        partial.PartialConfig(RL, over_provision=0.0)
    assert "\n" not in str(err.value)
