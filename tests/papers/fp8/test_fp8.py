"""Quantised rollouts on a TINY SFT base: log-prob shift, behav_logp, TIS/MIS flag wiring."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from small_model import RL, TINY

from rlvr_lab import losses
from rlvr_lab.papers.fp8 import quant
from rlvr_lab.models import transformer as T
from rlvr_lab.train import sequence, sft
from simulations.fp8 import _share_compiled

RL = dataclasses.replace(RL, steps=2, track_mismatch=True)
COARSE = quant.QuantConfig("e2m1", weight_block=None)  # FP4, per-tensor scales


@pytest.fixture(scope="module")
def prompts():
    enc = sft.encode(TINY, sft.problems(TINY, "heldout"))
    return jnp.asarray(enc.prompts), jnp.asarray(enc.prompt_valid)


def _shift(base, qcfg, prompts):
    """Mean |logp_quantised - logp_fp32| over tokens the float32 policy sampled."""
    p, v = prompts
    out = T.sample(jax.random.key(0), base, p, v, max_new_tokens=TINY.max_new_tokens)
    q = T.score(quant.quantise_policy(base, qcfg), p, v, out.tokens)
    return float(losses.masked_mean(jnp.abs(q - out.logp), out.mask))


def test_quantisation_shifts_logp_slightly_more_for_the_coarse_format(base, prompts):
    fp8 = _shift(base, quant.QuantConfig(), prompts)
    fp4 = _shift(base, COARSE, prompts)
    off = _shift(base, quant.QuantConfig("none"), prompts)
    assert off < 1e-5  # no quantisation: only float noise between sampling and scoring
    # measured on this base: e4m3 W8A8 ~0.06 nats per token, e2m1 W4A4 ~0.24
    assert 1e-5 < fp8 < 0.15, fp8
    assert fp4 > 2 * fp8, (fp4, fp8)


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


def test_without_quantisation_mismatch_is_zero_and_corrections_are_no_ops(runs):
    h = runs["off", "none"].history
    for k in ("mismatch_k1", "mismatch_k3", "mismatch_chi2"):
        assert np.abs(h[k]).max() < 1e-5, (k, h[k])
    np.testing.assert_array_equal(h["kept_frac"], 1.0)
    ref = jax.tree.leaves(runs["off", "none"].state.policy)
    # rho == 1 up to float noise: MIS keeps every token with weight ~1, the same update. Not
    # bit-equal: float32 rounding of rho ~ 1 changes gradients by ~1e-7, and Adam's first steps
    # (lr * sign(g)) turn that into a visible change where a coordinate's gradient is ~0, so
    # nearly every parameter agrees to float32 noise and none moves by more than the steps allow
    np.testing.assert_array_equal(runs["off", "mis"].history["kept_frac"], 1.0)
    for a, b in zip(ref, jax.tree.leaves(runs["off", "mis"].state.policy)):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        assert np.mean(np.abs(a - b) <= 1e-5 + 1e-4 * np.abs(a)) > 0.99
        assert np.abs(a - b).max() < 1e-2


def test_quantised_rollouts_show_mismatch_and_corrections_change_the_update(runs):
    h = runs["fp4", "none"].history
    # k3 = rho - 1 - log rho >= 0 token by token, so its mean is a mismatch measure that
    # cannot come out negative; the sampled chi^2 estimate (mean rho^2 - 1) can, so only its
    # average over the run is required to be positive
    assert np.all(h["mismatch_k3"] > 1e-3) and np.all(np.isfinite(h["mismatch_chi2"]))
    assert np.mean(h["mismatch_chi2"]) > 0
    np.testing.assert_array_equal(h["kept_frac"], 1.0)
    assert np.all(runs["fp4", "mis"].history["kept_frac"] < 1.0)
    assert np.all(runs["fp4", "tis"].history["kept_frac"] == 1.0)  # TIS truncates, keeps all
    ref = jax.tree.leaves(runs["fp4", "none"].state.policy)
    for c in ("tis", "mis"):
        diff = max(float(jnp.abs(a - b).max())
                   for a, b in zip(ref, jax.tree.leaves(runs["fp4", c].state.policy)))
        assert diff > 1e-6, c
    for run in runs.values():  # everything finite, held-out evals from the float32 policy
        assert all(np.all(np.isfinite(v)) for v in run.history.values())
        assert np.all(np.isfinite(run.evals["pass_at"]))
