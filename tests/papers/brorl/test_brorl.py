"""BroRL mass balance (rlvr_lab.papers.brorl.theory) against plain-Python loops, float64."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_lab import theory
from rlvr_lab.papers.brorl import sweep as S
from rlvr_lab.papers.brorl import theory as mb
from rlvr_lab.papers.brorl import training

HYP = settings(max_examples=25, deadline=None)

# jitted once per shape (eager JAX would compile every primitive for every new size)
mass_balance_jit = jax.jit(lambda z, c, s, rc, rw, lr, n: theory.mass_balance(
    z, c, s, r_correct=rc, r_wrong=rw, lr=lr, n=n))
idealised_update_jit = jax.jit(lambda z, c, s, rc, rw, lr, n: mb.idealised_update(
    z, c, s, r_correct=rc, r_wrong=rw, lr=lr, n=n))
pg_update_jit = jax.jit(lambda z, c, m, rc, rw, lr: mb.sampled_pg_update(
    z, c, m, r_correct=rc, r_wrong=rw, lr=lr))
pg_balance_jit = jax.jit(lambda z, c, m, rc, rw, lr: mb.sampled_pg_mass_balance(
    z, c, m, r_correct=rc, r_wrong=rw, lr=lr))


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


# ----------------------------------------------------------------------------- references
def softmax_loop(z):
    m = max(z)
    e = [math.exp(v - m) for v in z]
    s = sum(e)
    return [v / s for v in e]


def reference_idealised(z, correct, sampled, rc, rw, lr, n):
    """Terms by explicit loops over the four cells, dz by the update's definition."""
    p = softmax_loop(z)
    V = len(z)
    q_pos = sum(p[j] for j in range(V) if correct[j])
    q_neg = sum(p[j] for j in range(V) if not correct[j])
    s_r = sum((rc if correct[i] else rw) * p[i] for i in range(V) if sampled[i])
    a2 = sum(p[j] ** 2 for j in range(V) if correct[j] and sampled[j])
    b2 = sum(p[j] ** 2 for j in range(V) if not correct[j] and sampled[j])
    u_pos2 = sum(p[j] ** 2 for j in range(V) if correct[j] and not sampled[j])
    u_neg2 = sum(p[j] ** 2 for j in range(V) if not correct[j] and not sampled[j])
    k = lr / n
    terms = {"sampled_correct": k * (rc - s_r) * q_neg * a2,
                 "sampled_wrong": k * (s_r - rw) * q_pos * b2,
                 "unsampled": k * s_r * (q_pos * u_neg2 - q_neg * u_pos2)}
    # dz = (lr/n) sum_{i in S} R_i p_i (e_i - p), summed token by token
    dz = [0.0] * V
    for i in range(V):
        if sampled[i]:
            r = rc if correct[i] else rw
            for j in range(V):
                dz[j] += k * r * p[i] * ((1.0 if j == i else 0.0) - p[j])
    first_order = sum(p[j] * ((1.0 if correct[j] else 0.0) - q_pos) * dz[j] for j in range(V))
    # rounding in the loop sum (and in c_j - Q_pos, which is pure rounding when C or W is
    # empty) is relative to this size, not to the result
    size = sum(abs(p[j] * dz[j]) for j in range(V))
    return terms, dz, first_order, size


def reference_sampled_pg(z, correct, draws, rc, rw, lr):
    """dz = (lr/N) sum_n R(a_n) (e_{a_n} - p), one rollout at a time."""
    p = softmax_loop(z)
    V, N = len(z), len(draws)
    dz = [0.0] * V
    for a in draws:
        r = rc if correct[a] else rw
        for j in range(V):
            dz[j] += lr / N * r * ((1.0 if j == a else 0.0) - p[j])
    q_pos = sum(p[j] for j in range(V) if correct[j])
    first_order = sum(p[j] * ((1.0 if correct[j] else 0.0) - q_pos) * dz[j] for j in range(V))
    size = sum(abs(p[j] * dz[j]) for j in range(V))
    return dz, first_order, size


def naive_exact(z, correct, dz):
    p0, p1 = softmax_loop(z), softmax_loop([a + b for a, b in zip(z, dz)])
    return sum(p1[j] - p0[j] for j in range(len(z)) if correct[j])


# a few fixed sizes so each jitted function compiles only a few times
problem = st.sampled_from([2, 7, 24]).flatmap(lambda V: st.tuples(
    st.lists(st.floats(-6, 6), min_size=V, max_size=V),
    st.lists(st.booleans(), min_size=V, max_size=V),
    st.lists(st.booleans(), min_size=V, max_size=V),
    st.floats(0, 3), st.floats(-3, 0), st.floats(1e-3, 2), st.integers(1, 64)))


# ----------------------------------------------------------------------------- identities
@HYP
@given(problem)
def test_idealised_terms_match_loop_reference(args):
    z, correct, sampled, rc, rw, lr, n = args
    ref_terms, ref_dz, ref_first, size = reference_idealised(z, correct, sampled, rc, rw, lr, n)
    out = mass_balance_jit(jnp.array(z), jnp.array(correct), jnp.array(sampled), rc, rw, lr, n)
    scale = sum(abs(v) for v in ref_terms.values()) + 1e-300
    for k, v in ref_terms.items():
        assert abs(float(out[k]) - v) <= 1e-12 * scale + 1e-300, k
    # the three-term sum is the first-order change along the update
    assert abs(float(out["total"]) - ref_first) <= 1e-11 * (scale + size) + 1e-300
    dz = idealised_update_jit(jnp.array(z), jnp.array(correct), jnp.array(sampled), rc, rw, lr,
                              n)
    np.testing.assert_allclose(np.asarray(dz), ref_dz, rtol=1e-12, atol=1e-15)
    # exact change against naive difference of masses (fine in float64 at these sizes)
    assert abs(float(out["exact"]) - naive_exact(z, correct, ref_dz)) <= 1e-13


@HYP
@given(problem, st.integers(0, 2 ** 31 - 1))
def test_sampled_pg_matches_loop_reference(args, seed):
    z, correct, _, rc, rw, lr, n = args
    V = len(z)
    draws = list(np.random.default_rng(seed).integers(0, V, size=n))
    counts = np.bincount(draws, minlength=V)
    ref_dz, ref_first, size = reference_sampled_pg(z, correct, draws, rc, rw, lr)
    dz = pg_update_jit(jnp.array(z), jnp.array(correct), jnp.array(counts, float), rc, rw, lr)
    np.testing.assert_allclose(np.asarray(dz), ref_dz, rtol=1e-12, atol=1e-14)
    out = pg_balance_jit(jnp.array(z), jnp.array(correct), jnp.array(counts, float), rc, rw, lr)
    scale = sum(abs(float(out[t])) for t in mb.TERMS) + 1e-300
    assert abs(float(out["total"]) - ref_first) <= 1e-11 * (scale + size) + 1e-300
    assert abs(float(out["exact"]) - naive_exact(z, correct, ref_dz)) <= 1e-13


@HYP
@given(problem)
def test_sampled_terms_never_negative(args):
    z, correct, sampled, rc, rw, lr, n = args
    out = mass_balance_jit(jnp.array(z), jnp.array(correct), jnp.array(sampled), rc, rw, lr, n)
    assert float(out["sampled_correct"]) >= 0
    assert float(out["sampled_wrong"]) >= 0


def test_sampled_pg_terms_can_be_negative():
    # documented difference to the idealised update: a correct token drawn once out of 4 while
    # p = 0.6 and the mean reward is positive is pushed down
    z = jnp.log(jnp.array([0.6, 0.1, 0.3]))
    correct = jnp.array([True, True, False])
    out = mb.sampled_pg_mass_balance(z, correct, jnp.array([1, 3, 0]))
    assert float(out["sampled_correct"]) < 0


@pytest.mark.parametrize("update", ["idealised", "sampled_pg"])
def test_first_order_vs_exact_as_lr_to_zero(update):
    rng = np.random.default_rng(0)
    V = 200
    z = jnp.array(rng.normal(size=V) * 2)
    correct = jnp.array(rng.random(V) < 0.1)
    counts = jnp.array(np.bincount(rng.integers(0, V, 32), minlength=V))
    errs = []
    lrs = [1e-1, 1e-2, 1e-3]
    for lr in lrs:
        if update == "idealised":
            out = theory.mass_balance(z, correct, counts > 0, lr=lr, n=32)
        else:
            out = mb.sampled_pg_mass_balance(z, correct, counts, lr=lr)
        errs.append(abs(float(out["exact"] - out["total"])))
        assert abs(float(out["exact"] / out["total"]) - 1) < 10 * lr
    # second-order remainder: error falls ~100x per 10x smaller lr
    assert 50 < errs[0] / errs[1] < 200 and 50 < errs[1] / errs[2] < 200


def test_exact_change_accurate_for_tiny_steps():
    # Q expm1(d log Q) keeps digits that the plain difference of masses loses in float32
    z = jnp.array([3.0, 0.0, -1.0, 2.0], jnp.float32)
    correct = jnp.array([False, True, True, False])
    dz = jnp.array([0.0, 1e-6, 0.0, 0.0], jnp.float32)
    with jax.enable_x64(True):
        ref = float(mb.exact_mass_change(z.astype(jnp.float64), correct, dz.astype(jnp.float64)))
    got = float(mb.exact_mass_change(z, correct, dz))
    assert abs(got - ref) <= 1e-4 * abs(ref)


# ----------------------------------------------------------------------------- degenerate
def test_degenerate_inputs_are_finite_zero():
    z = jnp.array([0.5, -1.0, 2.0])
    for correct, sampled in [([False] * 3, [True, False, True]), ([True] * 3, [True] * 3),
                             ([True, False, False], [False] * 3)]:
        out = theory.mass_balance(z, jnp.array(correct), jnp.array(sampled), n=4)
        for k in mb.KEYS:
            assert float(out[k]) == 0.0, (k, correct, sampled)
    out = mb.sampled_pg_mass_balance(z, jnp.array([True, False, False]), jnp.zeros(3))
    assert all(float(out[k]) == 0.0 for k in mb.KEYS)
    # n=None uses |S|; the update of one sampled token equals n=1
    a = theory.mass_balance(z, jnp.array([True, False, False]), jnp.array([True, False, False]))
    b = theory.mass_balance(z, jnp.array([True, False, False]), jnp.array([True, False, False]),
                            n=1)
    assert float(a["total"]) == float(b["total"]) > 0
    assert float(mb.fraction_correct_decreased(z, jnp.zeros(3, bool), jnp.ones(3))) == 0.0


def test_bad_inputs_raise():
    z = jnp.zeros(4)
    c = jnp.array([True, False, False, False])
    with pytest.raises(ValueError, match="sampled"):
        theory.mass_balance(z, c, jnp.ones(3, bool))
    with pytest.raises(ValueError, match="logits"):
        theory.mass_balance(jnp.zeros((2, 4)), c, c)
    with pytest.raises(ValueError, match="r_correct"):
        theory.mass_balance(z, c, c, r_correct=-1.0)
    with pytest.raises(ValueError, match="r_wrong"):
        theory.mass_balance(z, c, c, r_wrong=0.5)
    with pytest.raises(ValueError, match="counts"):
        mb.sampled_pg_mass_balance(z, c, jnp.array([1, -1, 0, 0]))


def test_jit_vmap_and_dtypes():
    key = jax.random.key(0)
    z = jax.random.normal(key, (5, 50))
    c = jnp.arange(50)[None, :] < jnp.array([1, 3, 5, 7, 9])[:, None]
    s = jax.random.bernoulli(jax.random.key(1), 0.3, (5, 50))
    f = jax.jit(jax.vmap(lambda z, c, s, lr: theory.mass_balance(z, c, s, lr=lr, n=16)))
    out = f(z, c, s, jnp.linspace(0.1, 1, 5))
    assert out["total"].shape == (5,) and out["total"].dtype == jnp.float64
    out32 = theory.mass_balance(z[0].astype(jnp.float32), c[0], s[0], n=16)
    assert out32["total"].dtype == jnp.float32
    np.testing.assert_allclose(float(out32["total"]), float(out["total"][0] / 0.1),
                               rtol=1e-4)


def test_sample_counts_prefixes():
    z = jnp.log(jnp.array([0.5, 0.25, 0.125, 0.125]))
    full = mb.sample_counts(jax.random.key(3), z, 64)
    part = mb.sample_counts(jax.random.key(3), z, 64, 10)
    assert float(full.sum()) == 64 and float(part.sum()) == 10
    assert bool(jnp.all(part <= full))


# ----------------------------------------------------------------------------- simulation
def test_make_logits_hits_target_mass_and_sweep_runs():
    for fam in (0, 1):
        z, c = S.make_logits(jax.random.key(fam), fam, 2.0, 5, 0.03, 300)
        assert int(c.sum()) == 5
        assert abs(float(mb.correct_mass(z, c)) - 0.03) < 1e-12
    cfg = S.SweepConfig(vocab_size=64, families=(("zipf", 1.1),), num_correct=(4,),
                        q0=(0.05,), n_values=(4, 256), trials=3, batch_size=3,
                        first_order_etas=())
    df = S.one_step_sweep(jax.random.key(0), cfg)
    assert len(df) == 6 and np.isfinite(df.select_dtypes("number").to_numpy()).all()
    # coverage grows with N; P(dQ<0) summaries are probabilities
    summary = S.summarise_one_step(df)
    big = summary[summary.N == 256]
    assert (big.unsampled_correct_mass <= summary[summary.N == 4].unsampled_correct_mass.max()
            ).all()
    assert summary.p_decrease.between(0, 1).all()
    with pytest.raises(ValueError, match="family"):
        S.SweepConfig(families=(("cauchy", 1.0),))


def test_first_n_below():
    summary = pd.DataFrame({"vocab_size": 1, "setting": ["a"] * 4 + ["b"] * 4, "update": "u",
                                "N": [4, 16, 64, 256] * 2,
                                "p": [0.3, 0.0, 0.02, 0.0, 0.3, 0.2, 0.1, 0.05]})
    out = S.first_n_below(summary, "p", 0.01).set_index("setting")["n_below"]
    assert out["a"] == 256 and np.isinf(out["b"])


def test_throughput_measure_counts_tokens():
    from simulations.brorl_throughput import NEW_TOKENS, measure_throughput

    df = measure_throughput([1, 3], d_model=32, n_layers=1, repeats=1)
    assert df.rollouts.tolist() == [1, 3]
    np.testing.assert_allclose(df.tokens_per_s * df.seconds, df.rollouts * NEW_TOKENS)
    assert (df.tokens_per_s > 0).all()


def test_throughput_ratio_pairs_are_interleaved_and_finite():
    """The claim's ratios: one log ratio per pair; equal sizes on both sides give ratios near 1
    (loose: only timing noise separates them)."""
    from simulations.brorl_throughput import log_throughput_ratios

    logs = log_throughput_ratios(2, 2, d_model=32, n_layers=1, pairs=4)
    assert logs.shape == (4,) and np.isfinite(logs).all()
    assert abs(np.median(logs)) < np.log(10.0)


# ----------------------------------------------------------------------------- claim numbers
def _trials(exact_by_setting):
    """A one-step trial frame: ``{(vocab, setting, q0): {N: [exact per trial]}}``, the same
    values for both updates."""
    rows = []
    for (v, s, q0), by_n in exact_by_setting.items():
        for n, values in by_n.items():
            for t, x in enumerate(values):
                rows.append({"vocab_size": v, "setting": s, "q0": q0, "N": n, "trial": t,
                             "exact_idealised": x, "exact_sampled_pg": x})
    return pd.DataFrame(rows)


def test_p_decrease_trials_follow_the_hardest_setting():
    # among the hard prompts (q0 0.01), "b" decreases most often at N=16; at N=64 it never
    # does; "easy" (q0 0.5) decreases always but is not a hard setting
    df = _trials({(8, "a", 0.01): {16: [1, -1, 1, 1], 64: [1, 1, 1, 1]},
                  (8, "b", 0.01): {16: [-1, -1, -1, 1], 64: [1, 1, 1, 1]},
                  (8, "easy", 0.5): {16: [-1] * 4, 64: [-1] * 4}})
    summary = pd.DataFrame([{"vocab_size": v, "setting": s, "q0": q0, "N": n, "update": u,
                             "p_decrease": float(np.mean(np.asarray(g["exact_idealised"]) < 0))}
                            for (v, s, q0, n), g in df.groupby(["vocab_size", "setting", "q0",
                                                                "N"])
                            for u in S.UPDATES])
    assert S.hardest_setting(summary, "idealised") == (8, "b")
    np.testing.assert_array_equal(S.p_decrease_trials(df, summary, "sampled_pg", 16),
                                  [1, 1, 1, 0])
    np.testing.assert_array_equal(S.p_decrease_trials(df, summary, "idealised", 64), [0] * 4)


def test_all_up_trials_take_the_rarest_setting():
    trials = pd.DataFrame({"setting": ["a"] * 4 + ["b"] * 4, "N": [4, 4, 64, 64] * 2,
                           "all_up_idealised": [0, 0, 1, 1, 1, 1, 1, 0]})
    relaxed = pd.DataFrame({"setting": ["a", "a", "b", "b"], "N": [4, 64, 4, 64],
                            "update": "idealised", "p_all_up": [0.0, 1.0, 1.0, 0.5]})
    np.testing.assert_array_equal(S.all_up_trials(trials, relaxed, 64), [1, 0])


def test_first_order_errors_are_relative_to_each_tolerance():
    row = {}
    for u in S.UPDATES:
        row.update({f"{t}_{u}": 1.0 for t in mb.TERMS})
        row.update({f"total_{u}": 3.0, f"first_order_{u}": 3.0 + 3e-11, f"rich_{u}": 5e-7})
    err = S.first_order_errors(pd.DataFrame([row]))
    np.testing.assert_allclose(np.sort(err), [0.1, 0.1, 0.5, 0.5], rtol=1e-4)
    row["rich_sampled_pg"] = 2e-6        # one error above its tolerance: the claim must fail
    assert S.first_order_errors(pd.DataFrame([row])).max() == pytest.approx(2.0)


def test_training_seed_numbers_are_paired_differences():
    study = training.TrainingStudy(phase1_steps=10, phase2_steps=4, budget_steps=1,
                                   n_large=32)
    rows = []
    for branch, n, acc, filt in (("N=16", 14, 0.5, 0.9), ("N=32", 14, 0.7, 0.4)):
        for seed in range(2):
            for step in range(n):
                late = step >= 10
                rows.append({"branch": branch, "seed": seed, "step": step,
                             "accuracy": (acc if late else 0.5) + 0.01 * seed,
                             "filtered": filt if late else 0.9})
    got = training.seed_numbers(pd.DataFrame(rows), study)
    np.testing.assert_allclose(got["gain"], [0.2, 0.2])
    np.testing.assert_allclose(got["filtered"], [-0.5, -0.5])


def test_training_equal_rollout_arms_are_read_at_equal_phase2_rollouts():
    """``budget_small`` / ``budget_large`` (the bank's brorl_revival_equal_rollouts): each arm's
    accuracy read where the two have spent the same phase-2 rollouts, checked on a real run
    (rollouts counted by the trainer) and on a frame whose accuracy encodes the step."""
    study = training.TrainingStudy(num_prompts=8, vocab_size=16, phase1_steps=6,
                                   phase2_steps=3, budget_steps=2, n_small=4, n_large=8)
    res = training.training_study(jax.random.key(0), study, 2)
    df = training.training_frame(res, study)
    got = training.seed_numbers(df, study)
    s1 = study.phase1_steps
    small = df[(df.branch == "N=4") & (df.step == s1 - 1 + study.ratio * study.budget)]
    large = df[(df.branch == "N=8") & (df.step == s1 - 1 + study.budget)]
    np.testing.assert_array_equal(small.phase2_rollouts.to_numpy(),
                                  large.phase2_rollouts.to_numpy())
    assert small.phase2_rollouts.iloc[0] == study.budget * study.n_large * study.num_prompts
    np.testing.assert_array_equal(got["budget_small"], small.accuracy.to_numpy())
    np.testing.assert_array_equal(got["budget_large"], large.accuracy.to_numpy())
