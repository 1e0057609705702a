"""ROLL's scheduler: lifecycle invariants, the batch rule against independent references, and
exact token accounting (hypothesis over lengths, rewards, batch sizes and engine settings)."""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_lab.papers.roll import scheduler as S
from rlvr_lab.train import rollout


@st.composite
def rounds(draw, max_groups=10, max_group=5, max_len=12):
    R = draw(st.integers(1, max_groups))
    G = draw(st.integers(1, max_group))
    B = draw(st.integers(1, R))
    lengths = np.array(draw(st.lists(st.integers(1, max_len), min_size=R * G,
                                     max_size=R * G))).reshape(R, G)
    rewards = np.array(draw(st.lists(st.sampled_from([0.0, 1.0, 0.5]), min_size=R * G,
                                     max_size=R * G))).reshape(R, G)
    return lengths, rewards, B


ENGINE = dict(order=st.sampled_from(S.ORDERS), abort=st.booleans(),
              max_running=st.one_of(st.none(), st.integers(1, 4)),
              reward_delay=st.integers(0, 3), granularity=st.integers(1, 4),
              lag=st.integers(0, 4))


@settings(max_examples=150, deadline=None)
@given(rounds(), st.fixed_dictionaries(ENGINE))
def test_invariants_hold(case, engine):
    lengths, rewards, B = case
    out = S.schedule(lengths, rewards, B, **engine)
    sched = out.scheduler
    assert S.check(sched, B, lengths) == []
    # no group used before all its samples are rewarded
    for g in out.batch:
        assert np.all(sched.t_reward[g] >= 0) and sched.t_used >= sched.t_reward[g].max()
        assert np.all(sched.state[g] == S.USED)
    # token counts add up, per state and in total
    c = out.counts
    assert c["tokens_generated"] == (c["tokens_used"] + c["tokens_aborted"]
                                     + c["tokens_filtered"] + c["tokens_surplus"])
    assert c["tokens_wasted"] == c["tokens_generated"] - c["tokens_used"]
    assert sum(c[f"samples_{n}"] for n in S.STATE_NAMES) == lengths.size
    assert c["tokens_used"] == int(lengths[out.batch].sum())
    assert np.all(sched.tokens <= lengths) and np.all(sched.tokens >= 0)


def _info(rewards):
    """Independent of the code under test: a group is informative when its rewards take more
    than one value."""
    return np.array([len(set(row.tolist())) > 1 for row in rewards], bool)


def test_informative_matches_the_core_filter():
    rng = np.random.default_rng(0)
    for G in (1, 2, 5):
        r = rng.choice([0.0, 0.5, 1.0], size=(64, G))
        np.testing.assert_array_equal(S.informative(r),
                                      np.asarray(rollout.informative_groups(jnp.asarray(r))))
        np.testing.assert_array_equal(S.informative(r), _info(r))


def _completion_reference(lengths, rewards, B, reward_delay=0):
    """All groups start at 0: group g completes at max(L_g) + delay; the first B informative
    ones by (completion time, slot)."""
    done = lengths.max(1) + reward_delay
    info = _info(rewards)
    order = sorted(range(len(done)), key=lambda g: (done[g], g))
    chosen = [g for g in order if info[g]][:B]
    t_star = done[chosen[-1]] if len(chosen) == B else None
    return sorted(chosen), t_star


@settings(max_examples=150, deadline=None)
@given(rounds(), st.integers(0, 3), st.integers(1, 4), st.integers(0, 4))
def test_completion_order_batch_and_exact_tokens(case, delay, k, lag):
    lengths, rewards, B = case
    ref, t_star = _completion_reference(lengths, rewards, B, delay)
    out = S.schedule(lengths, rewards, B, reward_delay=delay, granularity=k, lag=lag)
    assert out.batch.tolist() == ref
    assert out.decided_at == t_star
    last = int((lengths.max(1) + delay).max())
    # float64/int reference of every sample's tokens: min(L, stop) in flight, L if it ended
    stop = last if t_star is None else min(math.ceil(t_star / k) * k + lag, last)
    np.testing.assert_array_equal(out.scheduler.tokens, np.minimum(lengths, stop))
    full = S.schedule(lengths, rewards, B, reward_delay=delay, abort=False)
    assert full.batch.tolist() == ref
    assert full.counts["tokens_generated"] == lengths.sum()
    assert out.counts["tokens_generated"] <= full.counts["tokens_generated"]
    assert out.counts["tokens_used"] == full.counts["tokens_used"]


@settings(max_examples=150, deadline=None)
@given(rounds(), st.booleans(), st.one_of(st.none(), st.integers(1, 4)))
def test_slot_order_is_the_dapo_filter(case, abort, max_running):
    """order="slot" keeps the first B informative groups in slot order: DAPO's
    finish-everything filter."""
    lengths, rewards, B = case
    info = _info(rewards)
    want = np.flatnonzero(info)[:B].tolist()
    out = S.schedule(lengths, rewards, B, order="slot", abort=abort, max_running=max_running)
    assert out.batch.tolist() == want
    assert S.check(out.scheduler, B, lengths) == []


@settings(max_examples=100, deadline=None)
@given(rounds(), st.one_of(st.none(), st.integers(1, 4)), st.integers(0, 2))
def test_short_batch_keeps_every_informative_group(case, max_running, delay):
    """When fewer than B groups are informative nothing is aborted in flight and every
    informative group is trained on."""
    lengths, rewards, B = case
    info = _info(rewards)
    out = S.schedule(lengths, rewards, B, max_running=max_running, reward_delay=delay)
    if info.sum() < B:
        assert out.batch.tolist() == np.flatnonzero(info).tolist()
        assert out.counts["tokens_aborted"] == 0
        assert out.decided_at is None


@settings(max_examples=80, deadline=None)
@given(rounds(), st.sampled_from(S.ORDERS), st.one_of(st.none(), st.integers(1, 4)))
def test_batch_does_not_depend_on_abort_or_engine_lag(case, order, max_running):
    lengths, rewards, B = case
    ref = S.schedule(lengths, rewards, B, order=order, abort=False, max_running=max_running)
    for k, lag in ((1, 0), (3, 3), (2, 5)):
        out = S.schedule(lengths, rewards, B, order=order, max_running=max_running,
                         granularity=k, lag=lag)
        assert out.batch.tolist() == ref.batch.tolist()


def test_degenerate_inputs_are_finite():
    # one sample per group: never informative -> empty batch, nothing aborted, no NaN
    out = S.schedule(np.full((4, 1), 3), np.ones((4, 1)), 2)
    assert out.batch.size == 0 and out.counts["tokens_generated"] == 12
    # all rewards equal: every group filtered
    out = S.schedule(np.arange(1, 9).reshape(4, 2), np.zeros((4, 2)), 4)
    assert out.counts["samples_filtered"] == 8 and out.counts["tokens_wasted"] == 36
    assert S.check(out.scheduler, 4, np.arange(1, 9).reshape(4, 2)) == []
    assert S.informative(np.zeros((0, 3))).shape == (0,)


def test_manual_driving_and_misuse():
    sch = S.Scheduler(2, 2, 1)
    sch.start([0, 1], 0)
    sch.finish(1, 0, 0, 1)
    sch.reward(1, 0, 0, 1.0)
    with pytest.raises(ValueError, match="earlier"):
        sch.finish(0, 0, 1, 1)
    with pytest.raises(ValueError, match="not finished"):
        sch.reward(2, 1, 0, 0.0)
    sch.finish(3, 0, 1, 3)
    assert not sch.advance(3)          # group 0 not rewarded yet
    with pytest.raises(RuntimeError, match="before all its samples were rewarded"):
        sch.committed.append(0)
        sch.hand_over(3)


@pytest.mark.parametrize("kwargs, match", [
    (dict(n_groups=2, group_size=2, batch_size=3), "batch_size"),
    (dict(n_groups=2, group_size=2, batch_size=1, order="fifo"), "order"),
    (dict(n_groups=0, group_size=2, batch_size=1), "n_groups"),
])
def test_config_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        S.Scheduler(**kwargs)


def test_schedule_rejects_bad_lengths():
    with pytest.raises(ValueError, match="lengths must be >= 1"):
        S.schedule(np.zeros((2, 2)), np.zeros((2, 2)), 1)
    with pytest.raises(ValueError, match="granularity"):
        S.schedule(np.ones((2, 2)), np.zeros((2, 2)), 1, granularity=0)
