"""The zoo study's computations: exact expected-gradient scales against brute-force
enumeration, ReMax's single-rollout errors against their closed form, the arena's equal
rollouts, and the declarations of simulations/zoo.py."""
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_lab import advantages, experiments
from rlvr_lab.envs.prompt_bank import PromptBankConfig
from rlvr_lab.papers.zoo import arena, gradient
from rlvr_lab.utils import enable_x64


def enumerated_scale(estimator, pi, correct, group):
    """E[(1/G) sum_i A_i (e_{a_i} - pi)] by summing over all V^G answer tuples (float64),
    divided component-wise by the exact gradient of p (a plain loop, no conditioning on k)."""
    pi = np.asarray(pi, np.float64)
    v = len(pi)
    p = sum(pi[a] for a in range(v) if correct[a])
    expected = np.zeros(v)
    for answers in itertools.product(range(v), repeat=group):
        prob = math.prod(pi[a] for a in answers)
        rewards = np.array([[1.0 if correct[a] else 0.0 for a in answers]])
        with enable_x64():
            adv = np.asarray(advantages.compute(estimator, jnp.asarray(rewards)).adv)[0]
        for i, a in enumerate(answers):
            onehot = np.eye(v)[a]
            expected += prob * adv[i] * (onehot - pi) / group
    exact = np.array([pi[a] * ((1.0 if correct[a] else 0.0) - p) for a in range(v)])
    return expected, exact


@pytest.mark.parametrize("estimator", ["grpo", "rloo", "dr_grpo", "grpo_passk", "opo"])
@pytest.mark.parametrize("group", [2, 3])
def test_gradient_scale_matches_enumeration(estimator, group):
    pi = np.array([0.3, 0.5, 0.2])
    correct = [True, False, False]
    expected, exact = enumerated_scale(estimator, pi, correct, group)
    scale = gradient.gradient_scale(estimator, np.array([0.3]), group)[0]
    np.testing.assert_allclose(expected, scale * exact, rtol=1e-10, atol=1e-14)


@settings(max_examples=15, deadline=None)
@given(st.floats(0.01, 0.99), st.sampled_from([2, 4, 8, 16]))
def test_gradient_scale_closed_forms(p, group):
    assert gradient.gradient_scale("rloo", np.array([p]), group)[0] == pytest.approx(1, abs=1e-9)
    assert gradient.gradient_scale("dr_grpo", np.array([p]), group)[0] == pytest.approx(
        (group - 1) / group, abs=1e-9)


def test_direction_error():
    bank_logits = np.log(np.array([[0.1, 0.9], [0.5, 0.5], [0.8, 0.2]]))
    correct = np.array([[True, False]] * 3)
    assert abs(gradient.direction_error("rloo", bank_logits, correct, 8)) < 1e-12
    assert abs(gradient.direction_error("dr_grpo", bank_logits, correct, 8)) < 1e-12
    assert gradient.direction_error("grpo", bank_logits, correct, 8) > 1e-4
    # at G = 2 GRPO's only informative group (k = 1) has a fixed std: parallel again
    assert abs(gradient.direction_error("grpo", bank_logits, correct, 2)) < 1e-12


def test_single_rollout_errors_match_closed_form():
    logits = jnp.log(jnp.array([[0.2, 0.5, 0.3], [0.6, 0.1, 0.3]]))
    table = jnp.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.5]])
    for baseline in (np.zeros(2), np.array([1.0, 0.0])):
        errs = gradient.single_rollout_errors(jax.random.key(0), logits, table, baseline, 4000)
        pi, r = np.exp(np.asarray(logits, np.float64)), np.asarray(table, np.float64)
        k = pi.shape[0]
        exact = pi * (r - (pi * r).sum(-1, keepdims=True)) / k
        second = 0.0
        for row in range(k):
            for a in range(pi.shape[1]):
                g = (r[row, a] - baseline[row]) * (np.eye(pi.shape[1])[a] - pi[row]) / k
                second += pi[row, a] * (g @ g)
        want = (second - (exact * exact).sum()) / (exact * exact).sum()
        se = errs.std(ddof=1) / np.sqrt(errs.size)
        assert abs(errs.mean() - want) < 5 * se


def test_arena_arms_and_equal_rollouts():
    arms = arena.arms()
    assert {a.estimator for a in arms} == set(arena.ESTIMATORS)
    assert {a.loss for a in arms} == set(arena.LOSSES)
    assert len({a.label for a in arms}) == len(arms)
    for group in arena.GROUPS:
        assert (arena.ROLLOUTS_PER_STEP // group) * group == arena.ROLLOUTS_PER_STEP
    for name in arena.ESTIMATORS:
        assert advantages.get(name)


def test_arena_runs_and_learns():
    cfg = arena.ArenaConfig(PromptBankConfig(num_prompts=32, vocab_size=4), steps=3)
    curves = arena.run(cfg, jax.random.key(0), 1)
    assert curves.shape == (len(arena.arms()), len(arena.GROUPS), 1, 4)
    assert np.all(np.isfinite(curves))
    np.testing.assert_allclose(curves[..., 0], curves[0, 0, 0, 0])   # same start everywhere
    assert np.all(curves[:, :, :, -1] != curves[:, :, :, 0])


def test_arena_subset_of_arms_is_the_same_runs():
    """Quick runs train a subset of the arms, compiled with their branches only: each arm's
    curves must not depend on which other arms ran beside it (seeds paired by key), beyond
    float rounding: XLA rounds a vmapped batch differently by its size (measured: 3e-5 after
    3 steps), against differences of order 1e-2 between arms."""
    cfg = arena.ArenaConfig(PromptBankConfig(num_prompts=32, vocab_size=4), steps=3)
    from simulations import zoo
    full = arena.run(cfg, jax.random.key(1), 2)
    quick = arena.run(cfg, jax.random.key(1), 2, zoo.QUICK_ARMS)
    rows = [arena.arms().index(a) for a in zoo.QUICK_ARMS]
    assert arena.branches(zoo.QUICK_ARMS) == (("grpo", "gpg"), ("vanilla", "gpg"))
    np.testing.assert_allclose(quick, full[rows], rtol=0, atol=2e-4)
    assert np.abs(full[rows[0]] - full[rows[1]]).max() > 1e-2   # the arms do differ


def test_declarations():
    experiments.load_all()
    exp = experiments.registry()["zoo"]
    ids = {c.id: c for c in exp.declared}
    assert set(ids) == {"zoo_grpo_learns", "zoo_rloo_unbiased", "zoo_grpo_biased",
                        "zoo_remax_variance", "zoo_opo_length_baseline", "zoo_gpg_beats_grpo"}
    assert ids["zoo_grpo_learns"].control
    assert ids["zoo_rloo_unbiased"].rule == "exact"
    assert ids["zoo_opo_length_baseline"].not_applicable
    assert ids["zoo_remax_variance"].direction == "<"
