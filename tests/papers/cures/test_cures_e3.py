"""CurES / E3: posterior tracker, samplers, dynamic-sampling filter, allocations, theory.

References are independent: plain NumPy/Python loops, exact enumeration or Monte Carlo in
float64, and a port of the authors' E3 allocation loop.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_lab.papers.cures import posterior as cur
from rlvr_lab.train import rollout as rollout_groups
from rlvr_lab.papers.cures import allocation as cures_alloc
from rlvr_lab.papers.e3 import allocation as e3
from rlvr_lab.train.budget import proportional_allocation, uniform_allocation
from rlvr_lab.utils import enable_x64

SETTINGS = settings(max_examples=25, deadline=None)


# ----------------------------------------------------------------------------- posterior
def test_posterior_updates_match_numpy_loop():
    rng = np.random.default_rng(0)
    k, b, g = 7, 12, 5
    state = cur.init_posterior(k)
    acc_ref = np.zeros(k)
    all_ref = np.zeros(k)
    for _ in range(4):
        ids = rng.integers(0, k, b)  # repeats on purpose
        succ = rng.random((b, g)) < 0.4
        mask = rng.random((b, g)) < 0.8
        state = cur.update_posterior(state, ids, succ, mask)
        for i in range(b):
            for j in range(g):
                if mask[i, j]:
                    all_ref[ids[i]] += 1
                    acc_ref[ids[i]] += succ[i, j]
    np.testing.assert_allclose(state.successes, acc_ref)
    np.testing.assert_allclose(state.trials, all_ref)
    mean_ref = [(a + 1) / (n + 2) for a, n in zip(acc_ref, all_ref)]
    np.testing.assert_allclose(cur.posterior_mean(state), mean_ref, rtol=1e-6)
    from scipy import stats
    var_ref = [stats.beta(a + 1, n - a + 1).var() for a, n in zip(acc_ref, all_ref)]
    np.testing.assert_allclose(cur.posterior_variance(state), var_ref, rtol=1e-5)


def test_posterior_decay_forgets_only_touched_prompts():
    state = cur.BetaPosterior(jnp.array([4.0, 2.0, 1.0]), jnp.array([8.0, 4.0, 2.0]))
    new = cur.update_posterior(state, jnp.array([0, 0]), jnp.array([[1, 0], [1, 1]]),
                               decay=0.5)
    # prompt 0: counts halved once (not once per group), then 3 of 4 added
    np.testing.assert_allclose(new.successes, [2.0 + 3.0, 2.0, 1.0])
    np.testing.assert_allclose(new.trials, [4.0 + 4.0, 4.0, 2.0])
    with pytest.raises(ValueError, match="decay"):
        cur.update_posterior(state, jnp.array([0]), jnp.ones((1, 2)), decay=1.5)


def test_posterior_jittable_and_init_from_rollouts():
    key = jax.random.key(0)
    p = jnp.array([0.0, 0.5, 1.0])
    state, spent = cur.init_posterior_from_rollouts(key, p)
    assert spent == 12
    np.testing.assert_allclose(state.trials, [4, 4, 4])
    assert state.successes[0] == 0 and state.successes[2] == 4
    upd = jax.jit(cur.update_posterior)(state, jnp.array([1]), jnp.ones((1, 3)))
    assert float(upd.trials[1]) == 7.0
    # degenerate counts give finite posteriors
    assert np.all(np.isfinite(cur.posterior_variance(cur.init_posterior(3))))


# ----------------------------------------------------------------------------- samplers
def test_cures_code_temperature_is_nearly_uniform():
    rng = np.random.default_rng(1)
    for _ in range(20):
        n = rng.integers(0, 50, 30).astype(float)
        acc = np.floor(rng.random(30) * (n + 1))
        state = cur.BetaPosterior(jnp.asarray(acc), jnp.asarray(n))
        ratio = float(cur.max_probability_ratio(cur.cures_code_prompt_probs(state)))
        assert 1.0 <= ratio <= math.exp(0.005) + 1e-6
    # an explicit temperature makes a real curriculum
    q = cur.cures_prompt_probs(jnp.array([0.0, 0.5, 1.0]), 0.05)
    np.testing.assert_allclose(float(q[1] / q[0]), math.exp(10.0), rtol=1e-4)
    assert q[0] == pytest.approx(float(q[2]))


def test_cures_prompt_probs_reference_and_errors():
    p = np.array([0.1, 0.3, 0.5, 0.95])
    t = 0.2
    s = np.array([math.exp(math.sqrt(x * (1 - x)) / t) for x in p])
    np.testing.assert_allclose(cur.cures_prompt_probs(jnp.asarray(p), t), s / s.sum(), rtol=1e-5)
    with pytest.raises(ValueError, match="temperature"):
        cur.cures_prompt_probs(jnp.asarray(p), 0.0)


def test_sample_prompts_frequencies():
    probs = jnp.array([0.1, 0.2, 0.3, 0.4])
    ids = cur.sample_prompts(jax.random.key(3), probs, 20000, replace=True)
    np.testing.assert_allclose(np.bincount(np.asarray(ids), minlength=4) / 20000, probs,
                               atol=0.015)
    ids = cur.sample_prompts(jax.random.key(4), probs, 4)
    assert sorted(np.asarray(ids).tolist()) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="batch_size"):
        cur.sample_prompts(jax.random.key(0), probs, 5)


# ----------------------------------------------------------------------------- filter
def test_dynamic_sampling_filter():
    rewards = jnp.array([[1.0, 1, 1], [0, 0, 0], [0, 1, 0], [1, 0, 0], [0, 0, 1]])
    mask = jnp.array([[1, 1, 1], [1, 1, 1], [1, 1, 1], [1, 0, 0], [0, 0, 0]], bool)
    info = rollout_groups.informative_groups(rewards, mask)
    assert info.tolist() == [False, False, True, False, False]
    kept = rollout_groups.dynamic_sampling_filter(rewards, mask)
    assert kept.sum() == 3 and kept[2].all()
    all_c, all_w = rollout_groups.group_outcomes(rewards, mask)
    assert all_c.tolist() == [True, False, False, True, False]
    assert all_w.tolist() == [False, True, False, False, False]


@SETTINGS
@given(st.lists(st.lists(st.integers(0, 2), min_size=4, max_size=4), min_size=5, max_size=5),
       st.integers(0, 2 ** 16))
def test_informative_groups_matches_loop(rows, seed):
    r = np.array(rows, float)
    mask = np.random.default_rng(seed).random(r.shape) < 0.7
    got = np.asarray(rollout_groups.informative_groups(jnp.asarray(r), jnp.asarray(mask)))
    ref = [len(set(r[i][mask[i]].tolist())) >= 2 for i in range(r.shape[0])]
    assert got.tolist() == ref


# ----------------------------------------------------------------------------- Neyman sigma
def _bank_moments_loop(logits, correct):
    """E|g_c|^2, E|g_w|^2, |E g_c - E g_w|^2 and p by plain loops (g = e_y - pi)."""
    pi = np.exp(logits - logits.max())
    pi /= pi.sum()
    v = len(pi)
    p = sum(pi[y] for y in range(v) if correct[y])
    ec2 = ew2 = 0.0
    mc = np.zeros(v)
    mw = np.zeros(v)
    for y in range(v):
        g = -pi.copy()
        g[y] += 1.0
        if correct[y]:
            ec2 += pi[y] / p * float(g @ g)
            mc += pi[y] / p * g
        else:
            ew2 += pi[y] / (1 - p) * float(g @ g)
            mw += pi[y] / (1 - p) * g
    return p, pi, ec2, ew2, float((mc - mw) @ (mc - mw))


def test_neyman_variance_equals_var_of_baselined_gradient_exact_and_mc():
    rng = np.random.default_rng(5)
    for _ in range(3):
        v = 6
        logits = rng.normal(size=v) * 1.5
        correct = np.zeros(v, bool)
        correct[rng.choice(v, 2, replace=False)] = True
        p, pi, ec2, ew2, gap2 = _bank_moments_loop(logits, correct)
        with enable_x64():
            formula = float(cures_alloc.rollout_gradient_variance(p, ec2, ew2, gap2))
        # exact: enumerate the V outcomes of one rollout, X = (r - p)(e_y - pi)
        xs = []
        for y in range(v):
            g = -pi.copy()
            g[y] += 1.0
            xs.append((float(correct[y]) - p) * g)
        xs = np.array(xs)
        mean = pi @ xs
        exact = float(pi @ (xs * xs).sum(-1) - mean @ mean)
        assert formula == pytest.approx(exact, rel=1e-9)
        # Monte Carlo in float64
        n = 200_000
        ys = rng.choice(v, n, p=pi)
        samples = xs[ys]
        mc = samples.var(axis=0).sum()
        se = np.sqrt(((samples - samples.mean(0)) ** 2).sum(-1).var() / n)
        assert abs(mc - formula) < 5 * se + 1e-12


def test_neyman_sigma_scalar_norms_mc():
    rng = np.random.default_rng(6)
    a = 0.3
    # norms of correct / wrong rollouts are random: g_c ~ U(1, 3), g_w ~ U(0.5, 1)
    n = 400_000
    r = rng.random(n) < a
    g = np.where(r, rng.uniform(1, 3, n), rng.uniform(0.5, 1, n))
    x = (r - a) * g
    sigma = float(cures_alloc.neyman_sigma(a, (1 + 3 + 9) / 3, (0.25 + 0.5 + 1) / 3, 2.0, 0.75))
    assert x.var() == pytest.approx(sigma ** 2, rel=0.02)
    # equal unit norms: sqrt(p(1-p)); p in {0, 1}: 0, never NaN
    np.testing.assert_allclose(cures_alloc.neyman_sigma(jnp.array([0.0, 0.25, 1.0])),
                               [0.0, math.sqrt(0.25 * 0.75), 0.0], rtol=1e-6)


# ----------------------------------------------------------------------------- allocation
def _waterfill_reference(w, budget, lo):
    """Exact real Neyman targets with a minimum: sort-based water filling (plain Python)."""
    w = [max(x, 0.0) for x in w]
    if sum(w) == 0:
        return [budget / len(w)] * len(w)
    floor = [False] * len(w)
    while True:
        free = [i for i in range(len(w)) if not floor[i]]
        left = budget - lo * sum(floor)
        sw = sum(w[i] for i in free)
        c = left / sw if sw > 0 else float("inf")
        newly = [i for i in free if c * w[i] < lo]
        if not newly:
            return [lo if floor[i] else c * w[i] for i in range(len(w))]
        for i in newly:
            floor[i] = True


_JITTED = {}


def _alloc(w, budget, lo, hi=None):
    """jit-compiled allocation, one compile per (size, bounds): keeps hypothesis fast."""
    key = (len(w), lo, hi)
    if key not in _JITTED:
        _JITTED[key] = jax.jit(lambda w, n: proportional_allocation(
            w, n, min_per_prompt=lo, max_per_prompt=hi))
    return np.asarray(_JITTED[key](jnp.asarray(w, jnp.float32), jnp.int32(budget)))


def _weights(sizes=(1, 5, 24), zero_frac=0.3):
    elem = st.one_of(st.just(0.0), st.floats(0.01, 10.0))
    return st.sampled_from(sizes).flatmap(lambda n: st.lists(elem, min_size=n, max_size=n))


@SETTINGS
@given(_weights(), st.sampled_from([0, 2]), st.integers(0, 40))
def test_neyman_allocation_budget_min_and_targets(sigma, lo, extra):
    b = len(sigma)
    budget = b * lo + extra
    n = _alloc(sigma, budget, lo)
    assert n.sum() == budget
    assert n.min() >= lo
    if max(sigma) > 0 and min(s for s in sigma if s > 0) > 1e-3 * max(sigma) or max(sigma) == 0:
        ref = _waterfill_reference(sigma, budget, lo)
        assert np.all(np.abs(n - np.array(ref)) < 1.0 + 1e-4)
    order = np.argsort(sigma, kind="stable")
    assert np.all(np.diff(n[order]) >= -1)  # larger sigma never gets 2 fewer


@SETTINGS
@given(_weights((3, 16)), st.sampled_from([(0, 4), (2, 8)]), st.floats(0, 1))
def test_proportional_allocation_with_cap(w, bounds, frac):
    lo, hi = bounds
    b = len(w)
    budget = int(b * lo + frac * b * (hi - lo))
    n = _alloc(w, budget, lo, hi)
    assert n.sum() == budget and n.min() >= lo and n.max() <= hi


def test_neyman_allocation_public_function_agrees_with_jitted():
    sigma = [0.0, 0.3, 0.1, 2.0, 0.5]
    np.testing.assert_array_equal(
        cures_alloc.neyman_allocation(jnp.asarray(sigma), 30, min_per_prompt=2),
        _alloc(sigma, 30, 2))


def test_allocation_errors_and_degenerate():
    with pytest.raises(ValueError, match="budget"):
        cures_alloc.neyman_allocation(jnp.ones(4), 7, min_per_prompt=2)
    with pytest.raises(ValueError, match="budget"):
        proportional_allocation(jnp.ones(4), 50, max_per_prompt=10)
    with pytest.raises(ValueError, match="weights"):
        proportional_allocation(jnp.ones((2, 2)), 8)
    np.testing.assert_array_equal(cures_alloc.neyman_allocation(jnp.zeros(4), 10), [3, 3, 2, 2])
    np.testing.assert_array_equal(uniform_allocation(3, 10), [4, 3, 3])
    jitted = jax.jit(lambda s, n: cures_alloc.neyman_allocation(s, n))
    assert int(jitted(jnp.array([0.1, 0.5, 0.2]), jnp.int32(30)).sum()) == 30


def test_code_rounding_drops_prompts_ours_does_not():
    p = jnp.array([0.0, 0.01, 0.3, 0.5, 0.7, 0.99, 1.0])
    sigma = cures_alloc.neyman_sigma(p)
    code = np.asarray(cures_alloc.neyman_allocation_code(sigma, 32))
    ours = np.asarray(cures_alloc.neyman_allocation(sigma, 32, min_per_prompt=2))
    assert (code == 0).sum() >= 2
    assert ours.sum() == 32 and ours.min() >= 2


# ----------------------------------------------------------------------------- E3
def _e3_code_reference(rank, total, n_min, n_max):
    """Port of get_rollout_n_per_prompt from the E3 code (plain loop)."""
    rank = list(rank)
    counts = [float(n_min)] * len(rank)
    rank = [0.0 if r == -100 else r for r in rank]
    s = sum(rank)
    if s > 0:
        rank = [r / s for r in rank]
    counts = [math.floor(c + (total - n_min * len(rank)) * r) for c, r in zip(counts, rank)]
    diff = total - sum(counts)
    for i in sorted(range(len(rank)), key=lambda i: -rank[i]):
        if diff <= 0:
            break
        if counts[i] < n_max:
            add = min(diff, n_max - counts[i])
            counts[i] += add
            diff -= add
    return counts


_E3_JITTED = {}


def _e3_jit(size, n_min, n_max, cap):
    key = (size, n_min, n_max, cap)
    if key not in _E3_JITTED:
        _E3_JITTED[key] = jax.jit(lambda r, n: e3.e3_allocation(r, n, n_min, n_max,
                                                                cap_at_max=cap))
    return _E3_JITTED[key]


def test_e3_schedule_values():
    assert [e3.e3_schedule(k) for k in range(4)] == [(8, 8), (6, 10), (4, 12), (4, 12)]
    assert e3.e3_schedule(1, 8, n_update=4, n_low=2, n_high=16) == (4, 12)
    with pytest.raises(ValueError):
        e3.e3_schedule(0, 8, n_low=9)


@SETTINGS
@given(st.sampled_from([1, 4, 16]).flatmap(lambda n: st.lists(
    st.one_of(st.just(-100.0), st.integers(0, 63).map(lambda k: k / 64)), min_size=n,
    max_size=n)), st.sampled_from([(8, 8), (6, 10), (4, 12)]))
def test_e3_allocation_matches_code(rank, bounds):
    n_min, n_max = bounds
    total = 8 * len(rank)
    got = np.asarray(_e3_jit(len(rank), n_min, n_max, False)(jnp.asarray(rank, jnp.float32),
                                                              total))
    assert got.tolist() == _e3_code_reference(rank, total, n_min, n_max)
    assert got.sum() == total and got.min() >= n_min
    capped = np.asarray(_e3_jit(len(rank), n_min, n_max, True)(jnp.asarray(rank), total))
    assert capped.sum() == total and capped.max() <= n_max and capped.min() >= n_min


def test_e3_ranks():
    r = e3.e3_ranks(jnp.array([0.9, 0.1, 0.5, 0.5, 0.0]), jnp.array([1, 1, 1, 1, 0], bool))
    np.testing.assert_allclose(r, [0.0, 0.6, 0.2, 0.2, 0.0])


def test_e3_temperature_rule():
    v = 1000
    scale = math.log(v) + math.log(math.log(v))
    assert float(e3.e3_temperature_update(0.7, 1.3, 1.3, v)) == pytest.approx(0.7)  # fixed point
    t = float(e3.e3_temperature_update(0.8, 1.0, 2.0, v))
    assert t == pytest.approx(0.8 * (1 + 0.8 * math.log(2.0) / scale))
    assert float(e3.e3_temperature_update(1.0, 3.0, 2.0, v)) < 1.0
    assert np.isfinite(float(e3.e3_temperature_update(1.0, 0.0, 2.0, v)))
    h = e3.e3_target_entropy(jnp.array([0, 59, 60, 80, 100]), 2.0, 100)
    np.testing.assert_allclose(h, [2.0, 2.0, 2.0, 2.0 * 0.95, 1.8], rtol=1e-6)


# ----------------------------------------------------------------------------- theory
def test_bank_gradient_moments_match_loops_and_trainer_gradient():
    from rlvr_lab.envs import prompt_bank as pb
    from rlvr_lab.papers.cures import theory as th

    rng = np.random.default_rng(7)
    logits = rng.normal(size=(5, 7)) * 1.3
    correct = np.zeros((5, 7), bool)
    correct[:, :2] = True
    correct[4, :] = False
    correct[4, 0] = True
    with enable_x64():
        mom = th.bank_gradient_moments(jnp.asarray(logits), jnp.asarray(correct))
        grad = pb.exact_policy_gradient(jnp.asarray(logits), jnp.asarray(correct, float),
                                        jnp.ones(5))
        for i in range(5):
            p, _, ec2, ew2, gap2 = _bank_moments_loop(logits[i], correct[i])
            assert float(mom.p[i]) == pytest.approx(p, rel=1e-12)
            assert float(mom.sq_norm_correct[i]) == pytest.approx(ec2, rel=1e-10)
            assert float(mom.sq_norm_wrong[i]) == pytest.approx(ew2, rel=1e-10)
            assert float(mom.mean_gap_sq[i]) == pytest.approx(gap2, rel=1e-10)
            assert float(mom.grad_sq[i]) == pytest.approx(float((grad[i] ** 2).sum()),
                                                          rel=1e-10)
        # degenerate prompts (p = 1 exactly, p = 0 exactly): finite, sigma = 0
        edge = th.bank_gradient_moments(jnp.array([[0.0, -jnp.inf], [-jnp.inf, 0.0]]),
                                        jnp.array([[True, False], [True, False]]))
        assert np.all(np.isfinite(np.asarray(edge))) and np.all(edge.sigma_sq == 0)


def test_allocation_variance_analytic_vs_monte_carlo():
    from rlvr_lab.papers.cures import theory as th

    rng = np.random.default_rng(8)
    logits = rng.normal(size=(6, 5))
    correct = np.zeros((6, 5), bool)
    correct[:, 0] = True
    counts = np.array([2, 3, 5, 8, 4, 2])
    with enable_x64():
        mom = th.bank_gradient_moments(jnp.asarray(logits), jnp.asarray(correct))
        analytic = float(th.allocation_variance(mom.sigma_sq, counts))
    mc = th.mc_allocation_variance(rng, logits, correct, counts, draws=20000)
    assert mc == pytest.approx(analytic, rel=0.05)
    # Neyman is optimal for the oracle baseline among allocations with the same total
    with enable_x64():
        ney = cures_alloc.neyman_allocation(jnp.sqrt(mom.sigma_sq), int(counts.sum()),
                                            min_per_prompt=1)
        assert float(th.allocation_variance(mom.sigma_sq, ney)) <= analytic + 1e-12
        assert float(th.allocation_variance(mom.sigma_sq, ney)) >= float(
            th.neyman_variance(mom.sigma_sq, counts.sum())) - 1e-12
    assert np.isinf(float(th.allocation_variance(jnp.array([0.1, 0.2]), jnp.array([0, 3]))))
    with pytest.raises(ValueError, match="baseline"):
        th.mc_allocation_variance(rng, logits, correct, counts, baseline="median")


@SETTINGS
@given(st.lists(st.floats(0.0, 3.0), min_size=4, max_size=4),
       st.lists(st.floats(0.01, 1.0), min_size=4, max_size=4))
def test_is_efficiency_at_most_one_and_optimum(m, q):
    from rlvr_lab.papers.cures import theory as th

    m = np.array(m)
    q = np.array(q) / np.sum(q)
    with enable_x64():
        eff = float(th.is_efficiency(jnp.asarray(q), jnp.asarray(m)))
        if m.sum() > 0:
            assert eff <= 1.0 + 1e-9
            best = float(th.is_efficiency(th.optimal_is_distribution(jnp.asarray(m)),
                                          jnp.asarray(m)))
            assert best == pytest.approx(1.0, rel=1e-9)


def test_mean_field_descent_one_step_and_steps_to_target():
    from rlvr_lab.envs import prompt_bank as pb
    from rlvr_lab.papers.cures import theory as th

    bank = pb.make_bank(pb.PromptBankConfig(num_prompts=6, vocab_size=5))
    uniform = lambda p, g: jnp.full_like(p, 1 / p.shape[0])  # noqa: E731
    curve = th.mean_field_descent(bank.logits0, bank.correct, uniform, lr=0.5, batch_size=3,
                                  num_steps=1)
    # one step of z += lr * B / K * grad p, i.e. plain gradient ascent on mean_i p_i
    grad = pb.exact_policy_gradient(bank.logits0, bank.reward_table) * 6
    z1 = bank.logits0 + 0.5 * 3 / 6 * grad
    np.testing.assert_allclose(curve[1], pb.success_probability(z1, bank.correct).mean(),
                               rtol=1e-5)
    assert th.steps_to_target([0.1, 0.3, 0.5], 0.3) == 1
    assert th.steps_to_target([0.1, 0.3], 0.9) == 2


# ----------------------------------------------------------------------------- stages
def test_cures_and_e3_stages_keep_the_budget():
    from rlvr_lab.envs.prompt_bank import PromptBankConfig
    from rlvr_lab.train import bandit
    from rlvr_lab.papers.cures.stage import all_incorrect_fraction

    base = bandit.BanditConfig(bank=PromptBankConfig(num_prompts=8, vocab_size=6),
                               num_steps=6, batch_size=4, num_generations=4,
                               optimizer="sgd", learning_rate=1.0, eval_ks=(1,))
    cfg = base.replace(rollout="cures", rollout_options=(("sampling_temperature", 0.1),))
    state, m = bandit.make_train(cfg)(jax.random.key(0))
    spent = np.asarray(m["rollouts"])
    assert spent[0] == 4 * 4 + 8 * 4 and np.all(spent[1:] == 16)  # stage 0 charged once
    assert float(state.rollout_state.counters.spent) == spent.sum()
    assert float(state.rollout_state.posterior.trials.sum()) == spent.sum()
    assert 0 <= float(all_incorrect_fraction(state.rollout_state)) <= 1
    cfg = base.replace(rollout="e3", rollout_options=(("steps_per_epoch", 1),))
    state, m = bandit.make_train(cfg)(jax.random.key(1))
    assert np.all(np.asarray(m["rollouts"]) == 16)
    assert float(state.rollout_state.reward_count.sum()) == 16 * 6
    from rlvr_lab.envs.prompt_bank import make_bank
    from rlvr_lab.train import rollout as rollout_stages

    with pytest.raises(ValueError, match="sampling"):
        rollout_stages.get("cures").init(
            rollout_stages.BankSampler(make_bank(base.bank).logits0, make_bank(base.bank)),
            rollout_stages.StageShape(base.batch_size, base.num_generations), sampling="x")


def test_temperature_train_fixed_and_e3():
    from rlvr_lab.envs.prompt_bank import PromptBankConfig
    from rlvr_lab.papers.e3.stage import TemperatureConfig, make_temperature_train

    cfg = TemperatureConfig(bank=PromptBankConfig(num_prompts=8, vocab_size=6), num_steps=30,
                            batch_size=8, learning_rate=0.2)
    _, fixed = make_temperature_train(cfg.replace(rule="fixed"))(jax.random.key(0))
    assert np.all(np.asarray(fixed["temperature"]) == 1.0)
    _, adapt = make_temperature_train(cfg)(jax.random.key(0))
    t = np.asarray(adapt["temperature"])
    assert t[0] == t[1] == 1.0 and np.all(np.isfinite(t)) and t[-1] > 1.0
    with pytest.raises(ValueError, match="rule"):
        TemperatureConfig(rule="linear")
