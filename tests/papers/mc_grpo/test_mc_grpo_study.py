"""MC-GRPO study pieces: the compute-matched estimator, study configs, the mad pitfall."""
from __future__ import annotations

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_lab import advantages
from rlvr_lab.papers.mc_grpo import study as M
from rlvr_lab.papers.mc_grpo.estimators import grpo_drop_one


def _drop_one_reference(rewards, mask, eps=1e-6):
    """Plain loops: GRPO over the valid entries, the last valid one left out of the loss."""
    adv = np.zeros_like(rewards)
    keep = np.zeros(rewards.shape, bool)
    for b in range(rewards.shape[0]):
        idx = [i for i in range(rewards.shape[1]) if mask[b, i]]
        if len(idx) >= 2:
            vals = [rewards[b, i] for i in idx]
            mean = sum(vals) / len(vals)
            std = (sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) ** 0.5
            for i in idx:
                adv[b, i] = (rewards[b, i] - mean) / (std + eps)
            for i in idx[:-1]:
                keep[b, i] = True
        else:
            for i in idx:
                keep[b, i] = True
    return adv, keep


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_grpo_drop_one_matches_loops(data):
    b, n = 4, 5  # one shape: no recompilation per example; masks give every group size 0..5
    rewards = np.array(data.draw(st.lists(st.sampled_from([0.0, 1.5, 2.0, -1.0]),
                                          min_size=b * n, max_size=b * n))).reshape(b, n)
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=b * n,
                                       max_size=b * n))).reshape(b, n)
    with jax.enable_x64(True):
        adv, keep = grpo_drop_one(rewards, mask)
        want_adv, want_keep = _drop_one_reference(rewards, mask)
        np.testing.assert_allclose(np.asarray(adv), want_adv, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(np.asarray(keep), want_keep)


def test_grpo_drop_one_registered_and_keeps_g():
    assert "grpo_drop_one" in advantages.names()
    out = advantages.compute("grpo_drop_one", np.array([[0.0, 1.5, 2.0]]))
    np.testing.assert_array_equal(np.asarray(out.keep), [[True, True, False]])
    assert np.isfinite(np.asarray(out.adv)).all()


def test_study_configs_group_sizes():
    cfgs = M.study_configs(M.study_base(quick=True), (2, 4))
    assert cfgs[("GRPO", 2)].num_generations == 2
    assert cfgs[("MC-GRPO mad", 4)].num_generations == 5
    assert dict(cfgs[("MC-GRPO std", 2)].advantage_options) == {"scale": "std"}
    assert cfgs[("GRPO G+1 drop 1", 2)].advantage == "grpo_drop_one"
    # the format bank has the repo's levels {0, 1.5, 2}
    from rlvr_lab.envs import prompt_bank
    bank = prompt_bank.make_bank(M.format_bank())
    assert set(np.unique(np.asarray(bank.reward_table)).tolist()) == {0.0, 1.5, 2.0}


def test_bank_flip_rates_match_direct_law():
    """bank_flip_rates on a one-prompt bank equals the exact function on that prompt's law."""
    from rlvr_lab.envs import prompt_bank
    from rlvr_lab.papers.mc_grpo import sign_flip as sf
    cfg = M.format_bank(num_prompts=1, vocab_size=6)
    bank = prompt_bank.make_bank(cfg)
    pi = np.asarray(jax.nn.softmax(bank.logits0[0]), np.float64)
    r = np.asarray(bank.reward_table[0], np.float64)
    got = M.bank_flip_rates(cfg, 2)
    assert got["median (G+1)"] == pytest.approx(
        sf.sign_flip_probability(r, pi / pi.sum(), 2, baseline="median"), abs=1e-12)
    assert got["mean (G)"] == pytest.approx(sf.sign_flip_probability(r, pi / pi.sum(), 2),
                                            abs=1e-12)


def test_mad_pitfall_first_step():
    """Binary rewards, G+1=5: |A| = 1000 under mad; one SGD step overshoots the clip range."""
    bank = M.binary_bank(num_prompts=16, vocab_size=6, difficulty_a=2.0, difficulty_b=2.0)
    mad = M.first_step_stats(jax.random.key(0), bank, 4, "mad", "sgd", 1.0, num_batches=2)
    std = M.first_step_stats(jax.random.key(0), bank, 4, "std", "sgd", 1.0, num_batches=2)
    np.testing.assert_allclose(mad["max_abs_adv"], 1000.0, rtol=1e-4)
    assert np.all(std["max_abs_adv"] < 3.0)
    assert np.all(mad["clipped_frac"] > 0.9) and np.all(std["clipped_frac"] < 0.1)
    assert np.all(mad["kl"] > 100 * std["kl"])
