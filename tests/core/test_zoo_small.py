"""The small-model zoo (``zoo_small``): its declarations, the equal-rollout group layout, and a
smoke run of the driver on the TINY setting."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_lab import advantages, experiments, losses
from rlvr_lab.papers.zoo import small, small_losses
from rlvr_lab.train import sequence
from small_model import RL


def test_declared_claims():
    exp = experiments.get("zoo_small")
    assert exp.setting == "small model" and exp.sft_bases == ("quick",)
    assert exp.plan is not None and exp.quick_plan is not None
    specs = {d.id: d for d in exp.declared}
    quick = {"zoo_small_grpo_learns", "zoo_small_gpg_beats_grpo", "zoo_small_drgrpo_keeps_pass1"}
    assert set(specs) == quick | {d.id for d in small_losses.CLAIMS} == set(small_losses.NEEDS)
    assert specs["zoo_small_grpo_learns"].control
    for cid, d in specs.items():        # the loss claims are full-only, the quick ones are not
        assert bool(d.full_only) == (cid not in quick), cid
        if d.full_only:
            assert (d.rule, d.threshold, d.fail_threshold) == ("superiority", 0.0, 0.0), cid
    assert (specs["zoo_small_gpg_beats_grpo"].rule, specs["zoo_small_gpg_beats_grpo"].threshold
            ) == ("superiority", 0.0)
    assert (specs["zoo_small_drgrpo_keeps_pass1"].rule,
            specs["zoo_small_drgrpo_keeps_pass1"].threshold) == ("non_inferiority", -0.05)
    for d in exp.declared:
        assert d.paper_ref and (d.paper_ref == "derived" or "arXiv:" in d.paper_ref)
    # quick and full differ only in seeds: one config (steps, arms, evaluation) for both
    from simulations import zoo
    assert zoo.small_config().steps == zoo.SMALL_STEPS
    assert {a.label for a in small.ARMS} >= {"GRPO", "GPG", "Dr.GRPO", "OTB"}
    # quick trains the arms its claims read; a full run (every claim open) trains all 15
    assert [a.label for a in small_losses.arms_for(quick)] == ["GRPO", "Dr.GRPO", "GPG"]
    assert small_losses.arms_for(specs) == list(small.ALL_ARMS)
    assert len({a.label for a in small.ALL_ARMS}) == len(small.ALL_ARMS) == 15
    for labels in small_losses.NEEDS.values():
        assert set(labels) <= {a.label for a in small.ALL_ARMS}


def test_every_arm_names_a_registered_piece():
    for arm in small.ALL_ARMS:
        assert arm.estimator in advantages.names()
        assert arm.loss in small.LOSSES and arm.agg in small.AGGREGATIONS
    for registered, _ in small.LOSS_FAMILIES.values():
        assert registered in losses.names()
    assert {a.loss for a in small.ALL_ARMS} == set(small.LOSSES)   # every family has an arm
    spec = small.specs(small.ARMS[:2], (2, 8), 3)
    assert spec.group.shape == (12,)
    np.testing.assert_array_equal(spec.group[:6], [2, 2, 2, 8, 8, 8])
    # a subset of arms switches between its own branches only, indexed into them
    names = small.branches((small.ALL_ARMS[0], small.LOSS_ARMS[4]))      # GRPO, GSPO
    assert names == small.Branches(("grpo",), ("vanilla", "gspo"),
                                   ("token-mean", "seq-mean-token-mean"))
    spec = small.specs((small.LOSS_ARMS[4],), (2,), 1, names)
    assert (int(spec.estimator[0]), int(spec.loss[0]), int(spec.agg[0])) == (0, 1, 1)


# ----------------------------------------------------------------------------- loss arms
def _batch():
    """Ratios from 0.2 to 4.5 (both clip sides, the dual clip's c = 3, CISPO's cap 5 unseen),
    advantages of both signs, ragged rows; float32 as in the engine."""
    rng = np.random.default_rng(3)
    lp = rng.uniform(-3.0, -0.2, (8, 6))
    x = rng.uniform(-1.6, 1.5, (8, 6))                         # log ratio
    adv = np.array([[1.3], [-0.7], [0.4], [-1.9], [2.0], [-0.3], [0.9], [-1.1]])
    lengths = np.array([6, 3, 5, 1, 4, 6, 2, 5])
    mask = np.arange(6)[None, :] < lengths[:, None]
    lp[0, 0], x[0, 0], adv[0, 0] = -0.1, 0.05, 6.0            # one high-covariance token
    return lp, lp - x, adv, mask


def _ppo(lp, old, adv, lo, hi, c=None):
    r = np.exp(lp - old)
    loss = np.maximum(-adv * r, -adv * np.clip(r, 1 - lo, 1 + hi))
    return loss if c is None else np.where(adv < 0, np.minimum(loss, -c * adv), loss)


def _cov(lp, adv, mask):
    a = np.broadcast_to(adv, lp.shape)
    return (a - a[mask].mean()) * (lp - lp[mask].mean())


def _reference(name, lp, old, adv, mask):
    """float64 NumPy per-token losses with each paper's options written out here."""
    x, r = lp - old, np.exp(lp - old)
    a = np.broadcast_to(adv, lp.shape)
    n = mask.sum(-1, keepdims=True)
    if name in ("vanilla", "clip_higher", "dual_clip"):
        return _ppo(lp, old, adv, 0.2, 0.28 if name == "clip_higher" else 0.2,
                    3.0 if name == "dual_clip" else None)
    if name == "gpg":
        return -a * lp
    if name == "cispo":                              # MiniMax-M1: no lower clip, weight <= 5
        return -np.clip(r, 0, 5.0) * a * lp
    if name == "gspo":                               # (3e-4, 4e-4) on the sequence ratio
        s = np.exp(np.minimum(np.where(mask, x, 0).sum(-1, keepdims=True) / n, 10.0))
        return np.broadcast_to(np.maximum(-adv * s, -adv * np.clip(s, 1 - 3e-4, 1 + 4e-4)),
                               lp.shape)
    if name == "geo_mean":                           # GMPO: log-space clip 0.4 per token
        sign = np.sign(a)
        kept = sign * np.minimum(sign * x, sign * np.clip(x, -0.4, 0.4))
        seq = np.exp(np.where(mask, kept, 0).sum(-1, keepdims=True) / n)
        return np.broadcast_to(-(np.where(mask, a, 0).sum(-1, keepdims=True) / n) * seq,
                               lp.shape)
    if name == "sapo":                               # tau 1.0 (A > 0), 1.05 (A <= 0)
        tau = np.where(a > 0, 1.0, 1.05)
        return -(4 / tau) / (1 + np.exp(-tau * (r - 1))) * a
    cov = _cov(lp, adv, mask)
    k = max(int(np.floor(2e-4 * mask.sum())), 1)
    if name == "kl_cov":                             # coef 0.1 on the top-k covariance tokens
        order = np.argsort(np.where(mask, -cov, np.inf).ravel(), kind="stable")
        top = np.zeros(lp.size, bool)
        top[order[:k]] = True
        return -a * r + np.where(top.reshape(lp.shape), 0.1 * np.abs(x), 0)
    if name == "clip_cov":                           # PPO 0.2; drop k tokens, cov in (1, 5)
        unclipped, clipped = -a * r, -a * np.clip(r, 0.8, 1.2)
        eligible = mask & ~(clipped > unclipped) & (cov > 1) & (cov < 5)
        drop = np.zeros(lp.size, bool)
        drop[np.flatnonzero(eligible.ravel())[:k]] = True
        return np.where(drop.reshape(lp.shape), 0.0, np.maximum(unclipped, clipped))
    raise AssertionError(name)


@pytest.mark.parametrize("name", small.LOSSES)
def test_loss_arm_matches_float64_reference(name):
    """Each loss family inside the engine's switch (every branch compiled, as in a run)
    against a float64 NumPy reference with the paper's options written out in this test."""
    lp, old, adv, mask = _batch()
    if name == "clip_cov":     # the batch reaches the branch that drops a token
        eligible = (_cov(lp, adv, mask) > 1) & (_cov(lp, adv, mask) < 5) & mask
        assert eligible.any()
    f32 = lambda v: jnp.asarray(v, jnp.float32)  # noqa: E731
    got = small._token_loss(small.LOSSES.index(name), f32(lp), f32(old), f32(adv),
                            jnp.asarray(mask), 0.2)
    want = _reference(name, lp, old, adv, mask)
    np.testing.assert_allclose(np.asarray(got)[mask], want[mask], rtol=2e-5, atol=2e-5,
                               err_msg=name)
    # and through a subset of the branches (what a run of fewer arms compiles)
    names = ("vanilla", name) if name != "vanilla" else ("vanilla",)
    sub = small._token_loss(len(names) - 1, f32(lp), f32(old), f32(adv), jnp.asarray(mask),
                            0.2, names)
    np.testing.assert_array_equal(np.asarray(sub)[mask], np.asarray(got)[mask])


def test_reference_options_differ_from_the_plain_clip():
    """The batch tells the families apart: a wrong option (clip-higher's 0.28, the dual clip,
    GSPO's range) would change the loss, so the reference test can fail."""
    lp, old, adv, mask = _batch()
    plain = _reference("vanilla", lp, old, adv, mask)[mask]
    for name in ("clip_higher", "dual_clip", "clip_cov", "cispo", "gspo"):
        assert np.abs(_reference(name, lp, old, adv, mask)[mask] - plain).max() > 1e-3, name


@pytest.mark.parametrize("name", ["vanilla", "dual_clip", "gspo", "cispo", "sapo"])
def test_zero_gradient_fraction_counts_clipped_tokens(name):
    lp, old, adv, mask = _batch()
    r, a = np.exp(lp - old), np.broadcast_to(adv, lp.shape)
    if name in ("vanilla", "dual_clip"):
        dead = ((a > 0) & (r > 1.2)) | ((a < 0) & (r < 0.8))
        if name == "dual_clip":
            dead |= (a < 0) & (r > 3.0)
    elif name == "gspo":
        n = mask.sum(-1, keepdims=True)
        s = np.exp(np.where(mask, lp - old, 0).sum(-1, keepdims=True) / n)
        dead = np.broadcast_to(((adv > 0) & (s > 1 + 4e-4)) | ((adv < 0) & (s < 1 - 3e-4)),
                               lp.shape)
    else:
        dead = np.zeros(lp.shape, bool)                 # CISPO and SAPO keep every gradient
    want = (dead & mask).sum() / mask.sum()
    got = small._zero_gradient_fraction(
        small.LOSSES.index(name), jnp.asarray(lp, jnp.float32), jnp.asarray(old, jnp.float32),
        jnp.asarray(adv, jnp.float32), jnp.asarray(mask), 0.2)
    assert float(got) == pytest.approx(want, abs=1e-6), name
    if name in ("vanilla", "gspo"):
        assert 0 < want < 1


def test_token_advantages_switch_matches_the_estimators():
    """The traced switch gives each estimator's own advantages on a masked group buffer."""
    rng = np.random.default_rng(0)
    rewards = jnp.asarray(rng.integers(0, 2, (4, 8)).astype(np.float32))
    mask = jnp.asarray(np.arange(8)[None, :] < np.array([[2], [4], [8], [8]]))
    lengths = jnp.asarray(rng.integers(1, 6, (4, 8)).astype(np.float32))
    tmask = jnp.arange(6)[None, None, :] < lengths[..., None]
    energy = jnp.asarray(rng.uniform(0, 1, (4, 8, 6)).astype(np.float32))
    for i, name in enumerate(small.ESTIMATORS):
        got = small._token_advantages(i, rewards, mask, lengths, energy, tmask)
        if name == "optimal_token_baseline":
            want = advantages.optimal_token_baseline(rewards, mask, energy=energy,
                                                     token_mask=tmask)
        else:
            kw = {"lengths": lengths} if name == "opo" else {}
            want = jnp.broadcast_to(advantages.compute(name, rewards, mask, **kw).adv[..., None],
                                    energy.shape)
        np.testing.assert_allclose(got, want, atol=1e-6, err_msg=name)


@pytest.fixture(scope="module")
def tiny_result(base, cache):
    rl = dataclasses.replace(RL, num_minibatches=2)
    cfg = small.ZooConfig(rl, rollouts=8, steps=2, eval_samples=1, groups=(2, 4), pool=32)
    driver = small.Driver(cfg, trainer=sequence.Trainer(rl, base_policy=base))
    # GRPO twice (pairing check), OTB, and GSPO (a loss arm with the per-sequence mean)
    arms = (small.ARMS[0], small.ARMS[-1], small.ARMS[0], small.LOSS_ARMS[4])
    return driver.run(jax.random.key(0), arms, 2), cfg, driver


def test_driver_smoke(tiny_result):
    res, cfg, _ = tiny_result
    assert res.final.shape == (4, 2, 2) and res.base.shape == (2,)
    for name in ("pass1", "loss", "zero_adv_frac", "grad_norm", "clip_frac", "entropy"):
        assert res.history[name].shape == (cfg.steps, 4, 2, 2)
        assert np.all(np.isfinite(res.history[name]))
    assert np.all((res.history["clip_frac"] >= 0) & (res.history["clip_frac"] <= 1))
    assert small_losses.numbers(res).keys() == {"zoo_small_gspo_clips_more",
                                                "zoo_small_gspo_beats_grpo"}
    assert np.all((res.final >= 0) & (res.final <= 1))
    # the same arm twice: the same keys give the same runs (seeds are paired across arms)
    np.testing.assert_array_equal(res.history["pass1"][:, 0], res.history["pass1"][:, 2])
    np.testing.assert_array_equal(res.final[0], res.final[2])


def test_drivers_share_compiled_programs(tiny_result):
    _, cfg, first = tiny_result
    other = dataclasses.replace(cfg, rl=cfg.rl.replace(
        base=dataclasses.replace(cfg.rl.base, seed=cfg.rl.base.seed + 1)))
    second = small.Driver(other, trainer=first.trainer, share=first)
    assert second._updates is first._updates and second._rollout is first._rollout
    assert len(first._updates) == 1          # one compiled update for the run's branch set
    with pytest.raises(ValueError, match="share="):
        small.Driver(dataclasses.replace(cfg, steps=3), trainer=first.trainer, share=first)
