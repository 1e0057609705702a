"""Quantised rollouts on a TINY SFT base: log-prob shift, behav_logp, TIS/MIS flag wiring.

Assertions hold by construction (float32 noise bounds, inequalities every estimate obeys), not
by what a particular trained base happens to sample: the quantisation-size test uses a fixed
random policy and fixed tokens, the trainer runs only need a base whose groups get rewards.
"""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from small_model import RL, TINY

from rlvr_lab import losses
from rlvr_lab.models import transformer as T
from rlvr_lab.papers.fp8 import mismatch, quant
from rlvr_lab.train import sequence, sft
from rlvr_lab.papers.fp8.study import share_compiled as _share_compiled

RL = dataclasses.replace(RL, steps=2, track_mismatch=True)
COARSE = quant.QuantConfig("e2m1", weight_block=None)  # FP4, per-tensor scales


@pytest.fixture(scope="module")
def prompts():
    enc = sft.encode(TINY, sft.problems(TINY, "heldout"))
    return jnp.asarray(enc.prompts), jnp.asarray(enc.prompt_valid)


def test_quantisation_mismatch_is_zero_off_and_larger_for_the_coarser_format():
    # a fixed random policy (scaled up so its logits are far from uniform) and fixed tokens
    policy = T.init(jax.random.key(0), TINY.model_config())
    policy = T.Policy(policy.config, jax.tree.map(lambda x: 8 * x, policy.params))
    tokens = jax.random.randint(jax.random.key(1), (16, 10), 3, TINY.model_config().vocab_size)
    p, v, c = tokens[:, :4], jnp.ones((16, 4), bool), tokens[:, 4:]
    ref = T.completion_logits(policy, p, v, c)

    def kl(qcfg):
        logits = T.completion_logits(quant.quantise_policy(policy, qcfg), p, v, c)
        return float(mismatch.vocab_mismatch(logits, ref)["kl_mean"])

    assert kl(quant.QuantConfig("none")) == 0.0  # the identity format: the same function
    fp8, fp4 = kl(quant.QuantConfig("e4m3")), kl(COARSE)
    # 3 vs 1 mantissa bits: ~4x the rounding error, ~16x the KL (second order in it)
    assert 0 < fp8 and fp4 > 2 * fp8, (fp8, fp4)


def test_rollout_fn_fills_the_quantised_engines_logp(base, prompts):
    p, v = prompts
    rollout = quant.make_rollout_fn(COARSE)
    batch = jax.jit(rollout, static_argnums=4)(jax.random.key(1), base, p[:4], v[:4], RL)
    assert batch.tokens.shape == (4 * RL.num_generations, TINY.max_new_tokens)
    engine = T.score(quant.quantise_policy(base, COARSE), batch.prompts, batch.prompt_valid,
                     batch.tokens)
    trainer = T.score(base, batch.prompts, batch.prompt_valid, batch.tokens)
    m = np.asarray(batch.mask)
    np.testing.assert_allclose(np.asarray(batch.behav_logp)[m], np.asarray(engine)[m],
                               atol=1e-5)
    assert np.abs(np.asarray(batch.behav_logp - trainer)[m]).max() > 1e-3
    # the trainer's mismatch metrics on this batch against float64 NumPy
    got = losses.mismatch_metrics(trainer, batch.behav_logp, batch.mask)
    log_rho = (np.asarray(trainer, np.float64) - np.asarray(batch.behav_logp, np.float64))[m]
    rho = np.exp(log_rho)
    np.testing.assert_allclose(got["k1"], np.mean(-log_rho), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got["k3"], np.mean(rho - log_rho - 1), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got["chi2"], np.mean(rho ** 2) - 1, rtol=1e-4, atol=1e-5)
    # the same float32 batch; mean(rho^2) - 1 is unbiased but may be negative on a batch,
    # mean((rho - 1)^2) (same expectation, as E[rho] = 1 under the engine) never is
    assert np.mean((rho - 1) ** 2) >= 0
    # the same key with float32 rollouts: sequence.rollout's own sampler
    plain = sequence.rollout(jax.random.key(1), base, p[:4], v[:4], RL)
    fp_none = quant.make_rollout_fn(quant.QuantConfig("none"))(jax.random.key(1), base, p[:4],
                                                                v[:4], RL)
    np.testing.assert_array_equal(plain.tokens, fp_none.tokens)


def _run(base, qcfg, correction, built):
    cfg = dataclasses.replace(RL, rollout_correction=correction)
    trainer = sequence.Trainer(cfg, base_policy=base, rollout_fn=quant.make_rollout_fn(qcfg))
    _share_compiled(trainer, qcfg, built)  # as the experiment does (fewer compiles)
    return sequence.run(cfg, jax.random.key(3), 2, trainer=trainer)


@pytest.fixture(scope="module")
def runs(base):
    # e2m1 with per-tensor scales and W4A4: a large mismatch, so MIS must drop tokens
    built = {}
    todo = [("off", "none"), ("off", "mis"), ("fp4", "none"), ("fp4", "tis"), ("fp4", "mis")]
    qcfgs = {"off": quant.QuantConfig("none"), "fp4": COARSE}
    return {(name, c): _run(base, qcfgs[name], c, built) for name, c in todo}


def _update(run, base, seed):
    """The parameter change of one seed over the run, flattened."""
    return np.concatenate([
        (np.asarray(a)[seed] - np.asarray(b)).ravel()
        for a, b in zip(jax.tree.leaves(run.state.policy), jax.tree.leaves(base))])


def test_without_quantisation_mismatch_is_zero_and_corrections_are_no_ops(runs, base):
    h = runs["off", "none"].history
    # the KV-cache sampler and the full-pass scorer sum in different orders: per-token log-prob
    # differences of float32 rounding (~1e-6), far below any quantisation effect
    for k in ("mismatch_k1", "mismatch_k3", "mismatch_chi2"):
        assert np.abs(h[k]).max() < 1e-4, (k, h[k])
    np.testing.assert_array_equal(h["kept_frac"], 1.0)
    # rho == 1 up to that noise: MIS keeps every token with weight ~1, the same update
    np.testing.assert_array_equal(runs["off", "mis"].history["kept_frac"], 1.0)
    # Compared as a whole update, not parameter by parameter: Adam's first steps move each
    # parameter by about lr * sign(gradient), so a parameter whose gradient is at the noise
    # level can move by +-lr in either run; such parameters are few.
    for seed in range(2):
        a = _update(runs["off", "none"], base, seed)
        b = _update(runs["off", "mis"], base, seed)
        cos = a @ b / (np.linalg.norm(a) * np.linalg.norm(b))
        assert cos > 0.999, cos
        assert np.linalg.norm(a - b) < 0.05 * np.linalg.norm(a)


def test_quantised_rollouts_show_mismatch_and_corrections_change_the_update(runs):
    h = runs["fp4", "none"].history
    # k3 is a mean of rho - log rho - 1 >= 0, positive once any token's rho != 1
    assert np.all(h["mismatch_k3"] > 0)
    # chi2 = mean(rho^2) - 1 is unbiased but can be negative on one batch; it always obeys
    # mean(rho^2) >= mean(rho)^2 with mean(rho) = k3 - k1 + 1 (k3 = mean(rho) + k1 - 1)
    mean_rho = h["mismatch_k3"] - h["mismatch_k1"] + 1
    assert np.all(h["mismatch_chi2"] >= mean_rho ** 2 - 1 - 1e-5)
    np.testing.assert_array_equal(h["kept_frac"], 1.0)
    mis = runs["fp4", "mis"].history["kept_frac"]
    assert np.all(mis <= 1.0) and np.any(mis < 1.0)  # MIS drops tokens with rho off [1/2, 2]
    np.testing.assert_array_equal(runs["fp4", "tis"].history["kept_frac"], 1.0)  # TIS keeps
    ref = jax.tree.leaves(runs["fp4", "none"].state.policy)
    for c in ("tis", "mis"):
        diff = max(float(jnp.abs(a - b).max())
                   for a, b in zip(ref, jax.tree.leaves(runs["fp4", c].state.policy)))
        assert diff > 1e-6, c
    for run in runs.values():  # everything finite, held-out evals from the float32 policy
        assert all(np.all(np.isfinite(v)) for v in run.history.values())
        assert np.all(np.isfinite(run.evals["pass_at"]))


def test_placement_trends_is_one_rank_correlation_per_base_and_placement():
    """Each (base, placement) gives the rank correlation of block rank with its KL, computed
    here by hand (ranks by argsort, Pearson of ranks, no ties) in float64."""
    from rlvr_lab.papers.fp8.study import placement_trends
    rng = np.random.default_rng(0)
    rows = []
    for b in (0, 1):
        for placement in range(3):
            kl = rng.permutation(5).astype(float) + 0.1 * rng.random(5)
            for rank in range(5):
                rows.append(dict(kind="weights", format="e4m3", magnitude=8.0, base=b,
                                 placement=placement, block_rank=rank, kl=kl[rank]))
            rows.append(dict(kind="activations", format="e4m3", magnitude=8.0, base=b,
                             placement=placement, block_rank=0, kl=99.0))
    table = pd.DataFrame(rows).sample(frac=1.0, random_state=1)    # row order must not matter
    rho, base = placement_trends(table, "weights", "e4m3", magnitude=8.0)
    want = []
    for b in (0, 1):
        for placement in range(3):
            g = [r for r in rows if r["base"] == b and r["placement"] == placement
                 and r["kind"] == "weights"]
            x = np.arange(5, dtype=float)
            y = np.argsort(np.argsort([r["kl"] for r in g])).astype(float)
            want.append(np.corrcoef(x, y)[0, 1])
    np.testing.assert_allclose(rho, want, atol=1e-12)
    np.testing.assert_array_equal(base, [0, 0, 0, 1, 1, 1])
    # a constant metric has no trend: 0, not NaN
    flat = table.assign(kl=1.0)
    assert np.all(placement_trends(flat, "weights", "e4m3", magnitude=8.0)[0] == 0.0)


def test_treatments_of_several_bases_equal_each_bases_own_run():
    """``train_treatments_bases`` (every base's seeds of a treatment in one run) gives each
    base's frame of ``train_treatments`` from that base, bit for bit (2 seeds per base)."""
    from rlvr_lab.papers.fp8 import study
    from rlvr_lab.train import bases

    chosen = {"fp4+TIS": (COARSE, "tis")}     # a quantised engine and a corrected update
    key, ids = jax.random.key(4), (0, 1)
    trainers: list = []
    together = study.train_treatments_bases(key, ids, 2, RL, chosen=chosen, trainers=trainers)
    assert len(together) == len(ids) and [sorted(t) for t in trainers] == [sorted(chosen)] * 2
    for b, df in zip(ids, together):
        alone = study.train_treatments(bases.base_key(key, b), 2, bases.with_base(RL, b),
                                       chosen=chosen)
        pd.testing.assert_frame_equal(df, alone, check_exact=True)
    assert not together[0].value.equals(together[1].value)
