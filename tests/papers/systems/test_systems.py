"""Rollout-system simulator: hand-checkable cases, an independent token-by-token reference,
conservation, the AReaL rule, broadcast formulas, the capacity model and determinism."""
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_lab.papers.systems import agents, echo
from rlvr_lab.papers.systems.engine import DONE, Engine, EngineConfig, TrainerConfig
from rlvr_lab.papers.systems.lengths import Empirical, HeavyTailMix, LogNormal, as_rng, constant
from rlvr_lab.papers.systems.policies import (Workload, areal_admits, run_async, run_partial,
                                              run_sync)

NO_CTX = dict(tau2=0.0, prefill_per_token=0.0)


# ----------------------------------------------------------------------------- references
def reference_single_worker(cfg: EngineConfig, prompts, lengths):
    """Plain-loop token-by-token simulation of one worker (shared FIFO queue, K slots).

    Admissions happen at step boundaries and stall the worker for the prefill of the admitted
    prompts; every step costs tau0 + tau1*b + tau2*sum(ctx) and adds one token to each.
    """
    queue = list(range(len(lengths)))
    active = {}   # id -> [remaining, ctx]
    finish = [None] * len(lengths)
    t = 0.0

    def admit():
        nonlocal t
        tokens = 0
        while queue and len(active) < cfg.max_concurrency:
            i = queue.pop(0)
            active[i] = [int(lengths[i]), int(prompts[i])]
            tokens += int(prompts[i])
        t += cfg.prefill_per_token * tokens

    admit()
    while active:
        b = len(active)
        ctx = sum(v[1] for v in active.values())
        t += cfg.tau0 + cfg.tau1 * b + cfg.tau2 * ctx
        done = []
        for i, v in active.items():
            v[0] -= 1
            v[1] += 1
            if v[0] == 0:
                done.append(i)
        for i in done:
            finish[i] = t
            del active[i]
        if done:
            admit()
    return np.array(finish)


def engine_finish_times(cfg, prompts, lengths, n_workers=1):
    eng = Engine(cfg, n_workers)
    ids = np.concatenate([eng.req.add(int(p), [int(n)], 0, 0.0)
                          for p, n in zip(prompts, lengths)])
    eng.submit(ids, 0.0)
    while True:
        t, got = eng.pop()
        if not got.size:
            break
        eng.dispatch(t)
    return eng.req.t_finish[: eng.req.n], eng


# ----------------------------------------------------------------------------- cost model
def test_one_worker_k1_time_is_sum_of_lengths_times_step_time():
    cfg = EngineConfig(tau0=0.01, tau1=0.002, max_concurrency=1, **NO_CTX)
    lengths = [5, 17, 3, 40]
    finish, _ = engine_finish_times(cfg, [0] * 4, lengths)
    assert finish.max() == pytest.approx(sum(lengths) * (0.01 + 0.002), rel=1e-12)
    assert np.allclose(finish, np.cumsum(lengths) * 0.012)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 400), st.integers(1, 64), st.integers(0, 10**6),
       st.floats(1e-4, 1e-1), st.floats(0, 1e-3), st.floats(0, 1e-6))
def test_steps_time_closed_form_matches_loop_and_inverse(n, b, c, t0, t1, t2):
    cfg = EngineConfig(tau0=t0, tau1=t1, tau2=t2)
    loop = sum(t0 + t1 * b + t2 * (c + b * j) for j in range(n))
    assert cfg.steps_time(n, b, c) == pytest.approx(loop, rel=1e-9, abs=1e-12)
    dt = loop * 0.999 if n else 0.0
    m = cfg.steps_started_before(dt, b, c)
    brute = next(k for k in range(n + 2) if cfg.steps_time(k, b, c) >= dt)
    assert m == brute


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=12),
       st.lists(st.integers(0, 50), min_size=12, max_size=12), st.integers(1, 4))
def test_engine_matches_token_by_token_reference(lengths, prompts, k):
    cfg = EngineConfig(tau0=0.01, tau1=0.001, tau2=1e-5, prefill_per_token=1e-4,
                       max_concurrency=k)
    prompts = prompts[: len(lengths)]
    ref = reference_single_worker(cfg, prompts, lengths)
    got, eng = engine_finish_times(cfg, prompts, lengths)
    np.testing.assert_allclose(got, ref, rtol=1e-9)
    assert eng.tokens_generated == sum(lengths)


def test_workers_share_load_and_each_matches_reference():
    cfg = EngineConfig(tau0=0.01, tau1=0.001, tau2=1e-5, prefill_per_token=1e-4,
                       max_concurrency=4)
    lengths = np.arange(1, 13) * 3
    got, eng = engine_finish_times(cfg, [10] * 12, lengths, n_workers=3)
    for w in range(3):   # 12 requests, 3 x 4 slots: every worker gets 4 at t = 0
        mine = np.flatnonzero(eng.req.worker[:12] == w)
        assert mine.size == 4
        ref = reference_single_worker(cfg, [10] * 4, lengths[mine])
        np.testing.assert_allclose(got[mine], ref, rtol=1e-9)


def test_bad_configs_raise_one_line_errors():
    with pytest.raises(ValueError, match="max_concurrency"):
        EngineConfig(max_concurrency=0)
    with pytest.raises(ValueError, match="tau0"):
        EngineConfig(tau0=-1.0)
    with pytest.raises(ValueError, match="sigma"):
        LogNormal(sigma=-0.1)
    with pytest.raises(ValueError, match="tail_frac"):
        HeavyTailMix(tail_frac=1.5)
    with pytest.raises(ValueError, match="lengths"):
        Empirical(())
    with pytest.raises(ValueError, match="n_groups"):
        Workload(n_groups=0)
    with pytest.raises(ValueError, match="mode"):
        run_partial(0, mode="bogus")
    with pytest.raises(ValueError, match="eta"):
        run_async(0, eta=-1)
    with pytest.raises(ValueError, match="mode"):
        echo.broadcast_delays(3, 1.0, 1.0, mode="tree")
    with pytest.raises(ValueError, match="seed"):
        as_rng("abc")


@settings(max_examples=30, deadline=None)
@given(st.floats(1, 5000), st.floats(0, 2), st.integers(1, 10000), st.floats(0, 1))
def test_length_laws_stay_in_range(median, sigma, l_max, frac):
    for law in (LogNormal(median, sigma, l_max), HeavyTailMix(median, sigma, frac, 0.8, l_max)):
        x = law.sample(0, 500)
        assert x.dtype == np.int64 and x.min() >= 1 and x.max() <= l_max


def test_sigma_zero_is_constant_and_empirical_resamples():
    assert np.all(LogNormal(300, 0.0, 1000).sample(1, 50) == 300)
    assert set(Empirical((4, 9)).sample(2, 200)) == {4, 9}


# ----------------------------------------------------------------------------- policies
SMALL = dict(tau0=0.01, tau1=1e-4, tau2=1e-7, prefill_per_token=1e-5, max_concurrency=16)


def test_all_lengths_equal_sync_equals_april_throughput():
    cfg = EngineConfig(**SMALL)
    wl = Workload(n_groups=8, group_size=4, prompt_len=32, lengths=constant(100))
    sync = run_sync(0, wl, cfg, n_workers=2, steps=4).summary()
    april = run_partial(0, wl, cfg, n_workers=2, steps=4, over_provision=2.0).summary()
    assert april["rollout_throughput"] == pytest.approx(sync["rollout_throughput"], rel=1e-9)
    assert april["time_per_step"] == pytest.approx(sync["time_per_step"], rel=1e-9)
    assert april["off_policy_token_fraction"] == 0.0


def test_april_conserves_tokens_and_recycles_partials():
    cfg = EngineConfig(**SMALL)
    wl = Workload(n_groups=6, group_size=4, prompt_len=16,
                  lengths=HeavyTailMix(200, 0.7, 0.1, 0.8, 2000))
    run = run_partial(3, wl, cfg, n_workers=2, steps=6, over_provision=2.0)
    req, eng, n = run.requests, run.engine, run.requests.n
    gen = req.generated[:n]
    assert np.all(gen <= req.target[:n])
    assert np.all(gen[req.status[:n] == DONE] == req.target[:n][req.status[:n] == DONE])
    seg_tokens = np.array([sum(k for _, k in s) for s in req.segments[:n]])
    np.testing.assert_array_equal(seg_tokens, gen)           # every token has a version
    assert gen.sum() == eng.tokens_generated                 # generated once, never twice
    consumed = run.steps["consumed_tokens"].sum()
    waiting = np.isin(req.group[:n], run.extra["buffer"])
    in_buffer = int(gen[waiting].sum())
    assert not np.isin(req.status[:n][~waiting], [0, 1, 3]).any()   # all else consumed
    assert consumed + in_buffer == eng.tokens_generated      # consumed or waiting, never lost
    assert (req.prefills[:n] > 1).any()                      # some partials were resumed
    assert run.summary()["off_policy_token_fraction"] > 0


def test_drop_mode_wastes_what_it_aborts():
    cfg = EngineConfig(**SMALL)
    wl = Workload(n_groups=6, group_size=4, lengths=HeavyTailMix(200, 0.7, 0.1, 0.8, 2000))
    run = run_partial(3, wl, cfg, n_workers=2, steps=5, over_provision=2.0, mode="drop")
    s = run.summary()
    assert s["off_policy_token_fraction"] == 0 and s["max_staleness"] == 0
    total = run.steps["consumed_tokens"].sum() + run.steps["wasted_tokens"].sum()
    assert total == run.engine.tokens_generated


def test_async_eta0_equals_synchronous():
    cfg = EngineConfig(**SMALL)
    tr = TrainerConfig(seconds_per_token=1e-5, overhead_s=0.5, weight_sync_s=0.2)
    wl = Workload(n_groups=5, group_size=4, prompt_len=8, lengths=LogNormal(120, 0.8, 1500))
    sync = run_sync(7, wl, cfg, tr, n_workers=2, train_gpus=3, steps=5)
    asyn = run_async(7, wl, cfg, tr, n_workers=2, train_gpus=3, steps=5, eta=0, warmup=0)
    np.testing.assert_allclose(asyn.steps["t_end"], sync.steps["t_end"], rtol=1e-9)
    assert asyn.summary()["max_staleness"] == 0


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 5), st.integers(1, 4), st.integers(0, 1000))
def test_areal_rule_holds_at_every_admission(eta, n_groups, seed):
    cfg = EngineConfig(**SMALL)
    wl = Workload(n_groups=n_groups, group_size=2, prompt_len=4,
                  lengths=LogNormal(60, 1.0, 800))
    run = run_async(seed, wl, cfg, n_workers=2, train_gpus=1, steps=6, eta=eta)
    for n_before, v in run.extra["admissions"]:
        assert (n_before + 1 - 1) // n_groups <= v + eta
        assert areal_admits(n_before, v, n_groups, eta)


@pytest.mark.parametrize("eta", [0, 1, 3])
def test_staleness_never_exceeds_eta_when_completions_are_in_order(eta):
    cfg = EngineConfig(**SMALL)
    wl = Workload(n_groups=4, group_size=4, prompt_len=4, lengths=constant(50))
    run = run_async(0, wl, cfg, n_workers=2, train_gpus=1, steps=10, eta=eta, warmup=0)
    stale = np.concatenate(run.staleness)
    assert stale.max() <= eta
    if eta:   # the bound is reached: generation runs ahead of the trainer
        assert stale.max() == eta


def test_deterministic_for_a_fixed_key():
    import jax
    wl = Workload(n_groups=4, group_size=4, lengths=HeavyTailMix(200, 0.7, 0.1, 0.8, 2000))
    cfg = EngineConfig(**SMALL)
    a = run_partial(jax.random.key(3), wl, cfg, n_workers=2, steps=3)
    b = run_partial(jax.random.key(3), wl, cfg, n_workers=2, steps=3)
    c = run_partial(jax.random.key(4), wl, cfg, n_workers=2, steps=3)
    assert a.steps.equals(b.steps)
    assert not a.steps.equals(c.steps)


# ----------------------------------------------------------------------------- ECHO-2
@pytest.mark.parametrize("n,m,c", [(1, 8e9, 64e6), (7, 1e9, 1e8), (20, 3e9, 5e8)])
def test_pipelined_broadcast_formula_matches_chunk_simulation(n, m, c):
    formula = echo.broadcast_delays(n, m, 1.25e9, mode="pipelined", chunk_bytes=c)
    np.testing.assert_allclose(formula, echo.pipelined_broadcast_sim(n, m, 1.25e9, c),
                               rtol=1e-9)


def test_one_to_many_broadcast_is_linear_in_workers():
    d = echo.broadcast_delays(10, 2e9, 1e9, mode="one_to_many")
    np.testing.assert_allclose(d, 2.0 * np.arange(1, 11))


def test_capacity_model_limits():
    # plenty of throughput and staleness: the learner is always busy
    assert echo.predict_utilisation(1e9, 10.0, 1e5, 1.0, 5.0, 8) == 1.0
    # throughput-bound: T_step = B_tok / Theta
    assert echo.predict_utilisation(1e4, 10.0, 2e5, 0.0, 0.0, 8) == pytest.approx(0.5)
    # S = 0 is synchronous: T_step = T + D + L
    assert echo.predict_utilisation(1e9, 10.0, 1e5, 4.0, 6.0, 0) == pytest.approx(0.5)
    assert echo.predict_utilisation(0.0, 10.0, 1e5, 4.0, 6.0, 0) == 0.0


def test_provisioning_picks_cheapest_throughput_first():
    meas = {"a": (100.0, 10.0), "b": (100.0, 10.0)}
    cheap = echo.WorkerType("a", 1.0, 8, 1.0)
    dear = echo.WorkerType("b", 1.0, 8, 3.0)
    wl = Workload(n_groups=2, group_size=2, prompt_len=0, lengths=constant(100))
    tr = TrainerConfig(seconds_per_token=1e-3, overhead_s=0.0, weight_sync_s=0.0)
    net = echo.Network(model_bytes=1.0, bandwidth=1e9)
    active, _ = echo.provision([dear, cheap, dear, cheap], meas, wl, tr, 1, net, 8,
                                  target=0.99)
    assert [w.name for w in active][:2] == ["a", "a"]


# ----------------------------------------------------------------------------- agents
def test_agents_zero_latency_single_turn_modes_agree():
    wl = agents.AgentWorkload(concurrency=4, min_turns=1, max_turns=1, obs_tokens=10,
                              action_lengths=constant(20), env=agents.Latency(0.0, 0.0, 0.0))
    cfg = EngineConfig(**SMALL)
    a = agents.run_agents(0, wl, cfg, n_episodes=8, mode="async")
    b = agents.run_agents(0, wl, cfg, n_episodes=8, mode="naive")
    assert a["wall_time"] == pytest.approx(b["wall_time"], rel=1e-9)


def test_agents_async_beats_lockstep_with_slow_environment():
    wl = agents.AgentWorkload(concurrency=8, max_turns=6, env=agents.Latency(5.0, 0.8, 60))
    s = agents.speedup(0, wl, EngineConfig(**SMALL), n_episodes=32)
    assert s > 1.5 and math.isfinite(s)


def test_refined_capacity_model_limits_and_monotone_in_s():
    wl = Workload(n_groups=4, group_size=4, prompt_len=0, lengths=LogNormal(100, 0.5, 1000))
    tr = TrainerConfig(seconds_per_token=1e-3, overhead_s=1.0, weight_sync_s=0.0)
    net = echo.Network(model_bytes=1e6, bandwidth=1e9)
    fast = echo.WorkerType("fast", 1.0, 64, 1.0)
    meas = {"fast": (1e6, 0.01)}
    t_train = echo.learner_step_time(wl, tr, 1)
    u, t_step, kept = echo.predict_for_refined([fast], meas, wl, t_train, net, tr, 4)
    assert u == 1.0 and t_step == t_train and kept == 1.0
    slow = {"fast": (50.0, 20.0)}
    us = [echo.predict_for_refined([fast] * 3, slow, wl, t_train, net, tr, s)[0]
          for s in range(6)]
    assert all(0 < a <= b + 1e-9 for a, b in itertools.pairwise(us)) and us[-1] <= 1


# ----------------------------------------------------------------------------- learning
def test_staleness_distribution_folds_the_tail():
    from rlvr_lab.papers.systems.learning import staleness_distribution
    p = staleness_distribution([1, 1, 0, 2], 2)
    np.testing.assert_allclose(p, [0.25, 0.25, 0.5])
    with pytest.raises(ValueError, match="counts"):
        staleness_distribution([0, 0], 3)


def test_stale_training_zero_staleness_losses_agree_and_ring_serves_old_versions():
    import jax

    from rlvr_lab.envs.prompt_bank import PromptBankConfig
    from rlvr_lab.papers.systems import learning
    from rlvr_lab.train.bandit import BanditConfig
    base = BanditConfig(bank=PromptBankConfig(num_prompts=8, vocab_size=4), num_steps=6,
                        batch_size=4, num_generations=4, num_minibatches=2,
                        learning_rate=0.2, eval_ks=(1,))
    cfg = learning.StaleConfig(base, max_staleness=3)
    probs = np.stack([np.eye(4)[0], np.eye(4)[3]])
    _, m = learning.train_grid(cfg, jax.random.key(0), 1, probs)
    acc = np.asarray(m["accuracy"])                        # [corr, dist, seed, step]
    assert np.all(np.isfinite(acc))
    np.testing.assert_allclose(acc[0, 0], acc[1, 0], rtol=1e-6)   # no staleness: same PPO
    stale = np.asarray(m["mean_staleness"])[:, 1, 0]
    np.testing.assert_array_equal(stale[0], np.minimum(3, np.arange(6)))
    ratio = np.asarray(m["behav_ratio_max"])
    assert np.all(ratio[:, 0] == 1.0) and np.all(ratio[:, 1, 0, 3:] > 1.0)
    with pytest.raises(ValueError, match="correction"):
        learning.StaleConfig(base, correction="tis")
