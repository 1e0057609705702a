"""The small-model zoo (``zoo_small``): its declarations, the equal-rollout group layout, and a
smoke run of the driver on the TINY setting."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_lab import advantages, experiments
from rlvr_lab.papers.zoo import small
from rlvr_lab.train import sequence
from small_model import RL


def test_declared_claims():
    exp = experiments.get("zoo_small")
    assert exp.setting == "small model" and exp.sft_bases == ("quick",)
    assert exp.plan is not None and exp.quick_plan is not None
    specs = {d.id: d for d in exp.declared}
    assert set(specs) == {"zoo_small_grpo_learns", "zoo_small_gpg_beats_grpo",
                          "zoo_small_drgrpo_keeps_pass1"}
    assert specs["zoo_small_grpo_learns"].control
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


def test_every_arm_names_a_registered_piece():
    for arm in small.ARMS:
        assert arm.estimator in advantages.names()
        assert arm.loss in small.LOSSES and arm.agg in small.AGGREGATIONS
    spec = small.specs(small.ARMS[:2], (2, 8), 3)
    assert spec.group.shape == (12,)
    np.testing.assert_array_equal(spec.group[:6], [2, 2, 2, 8, 8, 8])


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
    arms = (small.ARMS[0], small.ARMS[-1], small.ARMS[0])   # GRPO twice: pairing check
    return driver.run(jax.random.key(0), arms, 2), cfg, driver


def test_driver_smoke(tiny_result):
    res, cfg, _ = tiny_result
    assert res.final.shape == (3, 2, 2) and res.base.shape == (2,)
    for name in ("pass1", "loss", "zero_adv_frac", "grad_norm"):
        assert res.history[name].shape == (cfg.steps, 3, 2, 2)
        assert np.all(np.isfinite(res.history[name]))
    assert np.all((res.final >= 0) & (res.final <= 1))
    # the same arm twice: the same keys give the same runs (seeds are paired across arms)
    np.testing.assert_array_equal(res.history["pass1"][:, 0], res.history["pass1"][:, 2])
    np.testing.assert_array_equal(res.final[0], res.final[2])


def test_drivers_share_compiled_programs(tiny_result):
    _, cfg, first = tiny_result
    other = dataclasses.replace(cfg, rl=cfg.rl.replace(
        base=dataclasses.replace(cfg.rl.base, seed=cfg.rl.base.seed + 1)))
    second = small.Driver(other, trainer=first.trainer, share=first)
    assert second._update is first._update and second._rollout is first._rollout
    with pytest.raises(ValueError, match="share="):
        small.Driver(dataclasses.replace(cfg, steps=3), trainer=first.trainer, share=first)
