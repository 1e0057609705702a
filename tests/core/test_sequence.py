"""SFT warm start, checkpoints, the sequence RL update and loop (resume, 4 devices)."""
import dataclasses
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from small_model import RL, TINY

from rlvr_lab.models import transformer as T
from rlvr_lab.train import checkpoint, core, sequence, sft


def test_sft_beats_chance_and_is_cached(base, cache):
    # single-digit sums: 100 facts, so accuracy is measured on the (memorised) training
    # problems; a uniform guess among the 19 possible sums scores 1/19 ~ 0.05
    probs = sft.problems(TINY, "train")[:64]
    ev = sft.evaluate(jax.random.key(0), base, TINY, probs, n_samples=4)
    assert ev.pass1 > 0.3, ev.texts
    untrained = T.init(jax.random.key(0), TINY.model_config())
    assert sft.evaluate(jax.random.key(0), untrained, TINY, probs).pass1 < 0.05
    path = sft.checkpoint_path(TINY)
    assert path.exists() and path.is_relative_to(cache)
    again = sft.load_or_train(TINY, verbose=False)  # from the cache: identical parameters
    for a, b in zip(jax.tree.leaves(base), jax.tree.leaves(again)):
        np.testing.assert_array_equal(a, b)


def test_corrupted_or_mismatched_checkpoint_is_rejected(base, tmp_path):
    path = checkpoint.save(tmp_path / "p.ckpt", base, {"config_hash": "abc"})
    template = T.init(jax.random.key(1), TINY.model_config())
    checkpoint.load(path, template, {"config_hash": "abc"})
    with pytest.raises(checkpoint.CheckpointError, match="config_hash"):
        checkpoint.load(path, template, {"config_hash": "xyz"})
    other = T.init(jax.random.key(1), dataclasses.replace(TINY, d_model=16).model_config())
    with pytest.raises(checkpoint.CheckpointError, match="structure"):
        checkpoint.load(path, other, {"config_hash": "abc"})
    raw = bytearray(path.read_bytes())
    raw[-5] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(checkpoint.CheckpointError, match="corrupted"):
        checkpoint.load(path, template)
    path.write_bytes(b"garbage")
    with pytest.raises(checkpoint.CheckpointError, match="not an rlvr_lab checkpoint"):
        checkpoint.load(path, template)


def test_sft_rebuilds_a_corrupted_cache_entry(cache):
    config = dataclasses.replace(TINY, steps=3)
    first = sft.load_or_train(config, verbose=False)
    path = sft.checkpoint_path(config)
    good = path.read_bytes()
    path.write_bytes(good[:-10])
    with pytest.warns(UserWarning, match="rejected.*retraining"):
        rebuilt = sft.load_or_train(config, verbose=False)
    for a, b in zip(jax.tree.leaves(first), jax.tree.leaves(rebuilt)):  # deterministic
        np.testing.assert_array_equal(a, b)
    assert path.read_bytes() == good


def test_flawed_demonstrations_replace_a_share_of_training_solutions():
    from rlvr_lab.envs import tasks
    config = dataclasses.replace(TINY, difficulties=(2,), num_train=2000, flawed_fraction=0.7)
    train, clean = sft.problems(config, "train"), sft.problems(
        dataclasses.replace(config, flawed_fraction=0.0), "train")
    assert [p.prompt for p in train] == [p.prompt for p in clean]
    flipped = np.array([p.solution != c.solution for p, c in zip(train, clean)])
    visible = np.array([tasks.flawed_solution(c) != c.solution for c in clean])
    assert not (flipped & ~visible).any()          # only problems with a carry can change
    assert abs(flipped.sum() / visible.sum() - 0.7) < 0.05
    assert all(tasks.verify(p, p.solution) == (True, False) for p in np.array(train)[flipped])
    held = sft.problems(config, "heldout")
    assert all(tasks.verify(p, p.solution) == (True, True) for p in held)  # never flawed
    with pytest.raises(ValueError, match="flawed_fraction"):
        dataclasses.replace(TINY, flawed_fraction=1.5)


def test_config_errors():
    with pytest.raises(ValueError, match="loss_agg_mode"):
        dataclasses.replace(RL, loss_agg_mode="mean")
    with pytest.raises(ValueError, match="num_minibatches"):
        dataclasses.replace(RL, num_minibatches=3)
    with pytest.raises(ValueError, match="unknown advantage"):
        dataclasses.replace(RL, advantage="nope")
    with pytest.raises(ValueError, match="task"):
        sft.SFTConfig(task="chess")


def _one_update(base, rewards, config=RL, edit_batch=None):
    opt = sequence.make_optimizer(config)
    state = sequence.TrainState(base, opt.init(base))
    prompts, valid = sft.encode(TINY, sft.problems(TINY, "train")[:config.num_prompts])[:2]
    batch = sequence.rollout(jax.random.key(3), base, jnp.asarray(prompts), jnp.asarray(valid),
                             config)
    if edit_batch is not None:
        batch = edit_batch(batch)
    new, out = jax.jit(sequence.update, static_argnums=5)(
        jax.random.key(4), state, base, batch, jnp.asarray(rewards, jnp.float32), config)
    return batch, new, out


def test_equal_rewards_leave_the_policy_unchanged(base):
    # two epochs x two minibatches: the off-policy path (pi_old recomputed, PPO ratios)
    config = dataclasses.replace(RL, num_iterations=2, num_minibatches=2)
    _, new, out = _one_update(base, np.ones((4, 4)), config)
    assert float(out["zero_adv_frac"]) == 1.0 and float(out["clip_frac"]) == 0.0
    for a, b in zip(jax.tree.leaves(base), jax.tree.leaves(new.policy)):
        np.testing.assert_array_equal(a, b)


def _hand_made_batch(policy, config=RL, seed=0):
    """4 prompts x 4 distinct completions of equal length (EOS last), scored by ``policy``:
    a batch fixed in the test, independent of what any trained base would sample."""
    b, g, n = config.num_prompts, config.num_generations, TINY.max_new_tokens
    prompts, valid = sft.encode(TINY, sft.problems(TINY, "train")[:b])[:2]
    rng = np.random.default_rng(seed)
    body = rng.integers(3, 13, size=(b * g, n - 1))          # digit tokens
    body[:, 0] = np.arange(b * g) % g + 3                     # distinct within each group
    tokens = jnp.asarray(np.concatenate([body, np.full((b * g, 1), T.EOS_ID)], 1), jnp.int32)
    prompts = jnp.repeat(jnp.asarray(prompts), g, axis=0)
    valid = jnp.repeat(jnp.asarray(valid), g, axis=0)
    logp = T.score(policy, prompts, valid, tokens)
    return sequence.RolloutBatch(prompts, valid, tokens, jnp.ones(tokens.shape, bool), logp,
                                 jnp.zeros(tokens.shape))


@pytest.mark.parametrize("loss,agg", [("ppo_clip", "token-mean"), ("cispo", "seq-mean-token-sum")])
def test_rewarded_completion_becomes_more_likely(loss, agg):
    # What follows from the math, for any policy: on-policy, both losses' gradient is the
    # policy gradient of J = sum_i A_i log pi(y_i) (equal lengths: token-mean and
    # seq-mean-token-sum are both proportional to it); Adam's first step moves every parameter
    # by lr * sign(dJ), so J rises (first order: lr * sum |dJ|). With GRPO advantages
    # (+a for the rewarded completion, -a/3 for the others) J rising means the rewarded
    # completion gains more log-likelihood than the others on average.
    policy = T.init(jax.random.key(7), TINY.model_config())   # a policy fixed in the test
    rewards = np.zeros((4, 4))
    rewards[:, 0] = 1.0  # the first completion of every group is "correct"
    config = RL.replace(policy_loss=loss, loss_agg_mode=agg, learning_rate=1e-4)
    batch = _hand_made_batch(policy, config)
    state = sequence.TrainState(policy, sequence.make_optimizer(config).init(policy))
    new, _ = jax.jit(sequence.update, static_argnums=5)(
        jax.random.key(4), state, policy, batch, jnp.asarray(rewards, jnp.float32), config)
    after = T.score(new.policy, batch.prompts, batch.prompt_valid, batch.tokens)
    gain = np.asarray((after - batch.behav_logp).sum(-1)).reshape(4, 4)
    adv = np.asarray(core.estimator(config)(jnp.asarray(rewards), None).adv)
    assert float((adv * gain).sum()) > 0
    assert gain[:, 0].mean() > gain[:, 1:].mean()


def _rewarded_first():
    rewards = np.zeros((4, 4))
    rewards[:, 0] = 1.0
    return rewards


def _max_param_change(base, new):
    return max(float(jnp.abs(a - b).max()) for a, b in zip(jax.tree.leaves(base),
                                                           jax.tree.leaves(new.policy)))


def test_rollout_corrections_on_hand_made_mismatch(base):
    rewards = _rewarded_first()
    plain = dataclasses.replace(RL, learning_rate=1e-4)
    _, ref_new, _ = _one_update(base, rewards, plain)
    # rollout log-probs equal to the trainer's: TIS/MIS weights are 1, the update is unchanged.
    # Equal up to float noise: the decoding and training programs round differently (weights
    # 1 +- 1e-6), and Adam's first step moves an entry with a near-zero gradient by a
    # sign-like +-lr, so such an entry may differ by a few percent of lr (seen: 1.8e-6 on
    # one of 4096 entries with AVX-512 kernels)
    for corr in ("tis", "mis"):
        cfg = dataclasses.replace(plain, rollout_correction=corr)
        _, new, out = _one_update(base, rewards, cfg)
        assert abs(float(out["mismatch_k3"])) < 1e-5 and float(out["kept_frac"]) == 1.0
        for a, b in zip(jax.tree.leaves(ref_new.policy), jax.tree.leaves(new.policy)):
            np.testing.assert_allclose(a, b, atol=0.1 * plain.learning_rate)
            assert np.mean(np.abs(np.asarray(a) - np.asarray(b)) <= 1e-6) > 0.99
    # rollout engine far more confident than the trainer (rho = e^-3 < 1/C): MIS drops every
    # token (no update); TIS keeps them with weight e^-3 (a smaller, non-zero update)
    sharper = lambda b: b._replace(behav_logp=b.behav_logp + 3.0)  # noqa: E731
    cfg = dataclasses.replace(plain, rollout_correction="mis")
    _, new, out = _one_update(base, rewards, cfg, sharper)
    assert float(out["kept_frac"]) == 0.0 and _max_param_change(base, new) == 0.0
    np.testing.assert_allclose(float(out["mismatch_k1"]), 3.0, rtol=1e-5)
    np.testing.assert_allclose(float(out["mismatch_chi2"]), np.exp(-6.0) - 1, rtol=1e-4)
    cfg = dataclasses.replace(plain, rollout_correction="tis")
    _, new, out = _one_update(base, rewards, cfg, sharper)
    assert 0.0 < _max_param_change(base, new)


def test_mask_stale_drops_flagged_tokens(base):
    rewards = _rewarded_first()
    cfg = dataclasses.replace(RL, learning_rate=1e-4, mask_stale=True)
    all_stale = lambda b: b._replace(stale=b.mask)  # noqa: E731
    _, new, out = _one_update(base, rewards, cfg, all_stale)
    assert _max_param_change(base, new) == 0.0 and float(out["stale_frac"]) == 1.0
    none_stale = lambda b: b._replace(stale=jnp.zeros_like(b.mask))  # noqa: E731
    _, new, out = _one_update(base, rewards, cfg, none_stale)
    assert _max_param_change(base, new) > 0.0 and float(out["stale_frac"]) == 0.0
    with pytest.raises(ValueError, match="rollout_correction"):
        dataclasses.replace(RL, rollout_correction="is")
    with pytest.raises(ValueError, match="correction_cap"):
        dataclasses.replace(RL, correction_cap=1.0)


def test_kl_metric_only_when_asked_and_equal_to_a_float64_k3(base):
    """``kl`` = masked mean of k3 = exp(d) - d - 1, d = log ref - log behav: on the first
    completion of each group with ``track_kl``, on every row with ``beta > 0``, and absent (no
    reference pass) with neither."""
    ref = T.init(jax.random.key(9), TINY.model_config())    # far from the base: KL well above 0
    g = RL.num_generations

    def kl_of(config):
        state = sequence.TrainState(base, sequence.make_optimizer(config).init(base))
        prompts, valid = sft.encode(TINY, sft.problems(TINY, "train")[:config.num_prompts])[:2]
        batch = sequence.rollout(jax.random.key(3), base, jnp.asarray(prompts),
                                 jnp.asarray(valid), config)
        _, out = jax.jit(sequence.update, static_argnums=5)(
            jax.random.key(4), state, ref, batch, jnp.asarray(_rewarded_first(), jnp.float32),
            config)
        ref_logp = np.asarray(T.score(ref, batch.prompts, batch.prompt_valid, batch.tokens),
                              np.float64)
        d = ref_logp - np.asarray(batch.behav_logp, np.float64)
        k3, mask = np.exp(d) - d - 1.0, np.asarray(batch.mask)
        return out.get("kl"), k3, mask

    kl, _, _ = kl_of(RL)
    assert RL.beta == 0 and not RL.track_kl and kl is None
    kl, k3, mask = kl_of(dataclasses.replace(RL, track_kl=True))
    first = slice(None, None, g)
    expect = (k3[first] * mask[first]).sum() / mask[first].sum()
    assert expect > 0.1
    np.testing.assert_allclose(float(kl), expect, rtol=1e-4)
    kl, k3, mask = kl_of(dataclasses.replace(RL, beta=0.05))
    np.testing.assert_allclose(float(kl), (k3 * mask).sum() / mask.sum(), rtol=1e-4)


def test_resume_reproduces_the_uninterrupted_run(base, tmp_path):
    key = jax.random.key(7)
    trainer = sequence.Trainer(RL, base_policy=base)
    full = sequence.run(RL, key, 2, trainer=trainer)
    path = tmp_path / "rl.ckpt"
    first = sequence.run(RL, key, 2, trainer=trainer, checkpoint_path=path, stop_after=3)
    assert first.steps_done == 3
    resumed = sequence.run(RL, key, 2, trainer=trainer, checkpoint_path=path)
    assert resumed.steps_done == RL.steps
    for name in full.history:
        np.testing.assert_array_equal(full.history[name], resumed.history[name], err_msg=name)
    np.testing.assert_array_equal(full.evals["pass_at"], resumed.evals["pass_at"])
    for a, b in zip(jax.tree.leaves(full.state), jax.tree.leaves(resumed.state)):
        np.testing.assert_array_equal(a, b)
    assert set(full.frame().metric) >= {"pass1", "pass_at_4", "entropy", "clip_frac",
                                        "zero_adv_frac", "response_length"}
    # a checkpoint of another run (here: another key) is reported and ignored
    with pytest.warns(UserWarning, match="not used"):
        fresh = sequence.run(RL, jax.random.key(8), 2, trainer=trainer, checkpoint_path=path,
                             stop_after=1)
    assert fresh.steps_done == 1


FOUR_DEVICES = textwrap.dedent("""
    import os
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    import sys
    sys.path.insert(0, "tests")
    import jax, jax.numpy as jnp, numpy as np, dataclasses
    from small_model import RL, TINY
    from rlvr_lab.train import sequence, sft
    assert jax.device_count() == 4
    base = sft.load_or_train(TINY, verbose=False)
    key = jax.random.key(11)
    out = {}
    for parallel in (False, True):
        cfg = dataclasses.replace(RL, data_parallel=parallel)
        trainer = sequence.Trainer(cfg, base_policy=base)
        out[parallel] = trainer.train_step(key, trainer.init_state(2), 0)
    (s1, m1), (s4, m4) = out[False], out[True]
    for name in m1:
        np.testing.assert_allclose(m1[name], m4[name], atol=1e-4, rtol=1e-4, err_msg=name)
    # parameters: float32 noise almost everywhere; where a gradient is ~0, Adam's first step
    # is a sign step of size lr, so reduction-order noise can move one entry by up to 2 lr
    for a, b in zip(jax.tree.leaves(s1.opt_state), jax.tree.leaves(s4.opt_state)):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-4)
    a = np.concatenate([np.ravel(x) for x in jax.tree.leaves(s1.policy)])
    b = np.concatenate([np.ravel(x) for x in jax.tree.leaves(s4.policy)])
    close = np.isclose(a, b, atol=1e-5, rtol=1e-4)
    assert close.mean() > 0.99, close.mean()
    assert np.abs(a - b).max() <= 2 * cfg.learning_rate + 1e-6, np.abs(a - b).max()
    leaf = jax.tree.leaves(s4)[0]
    print("OK", len(leaf.sharding.device_set))
""")


def test_four_fake_devices_match_one(base, cache):
    env = dict(os.environ, RLVR_LAB_CACHE=str(cache), JAX_PLATFORMS="cpu")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run([sys.executable, "-c", FOUR_DEVICES], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "OK 4" in proc.stdout  # the update ran on all 4 devices


def test_seed_map_equals_a_loop_over_seeds():
    """``seed_map`` maps axis-0 arguments and keyword arguments, shares the rest, and gives
    what calling ``fn`` seed by seed gives; a seed of a many-seed run equals a one-seed run."""
    def fn(x, w, scale, *, bias):
        return {"y": jnp.tanh(x @ w) * scale + bias, "n": (x ** 2).sum()}

    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(3, 5, 4)), jnp.float32)
    w = jnp.asarray(rng.normal(size=(4, 2)), jnp.float32)
    bias = jnp.asarray(rng.normal(size=(3, 2)), jnp.float32)
    out = jax.jit(sequence.seed_map(fn, in_axes=(0, None)))(x, w, 2.0, bias=bias)
    for s in range(3):
        ref = fn(x[s], w, 2.0, bias=bias[s])
        np.testing.assert_allclose(out["y"][s], ref["y"], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(out["n"][s], ref["n"], rtol=1e-6)
    one = sequence.seed_map(fn, in_axes=(0, None))(x[1:2], w, 2.0, bias=bias[1:2])
    np.testing.assert_allclose(one["y"][0], out["y"][1], rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match=r"in_axes=\(1, None\) is not allowed"):
        sequence.seed_map(fn, in_axes=(1, None))


def test_compiled_key_schedule_matches_the_eager_one():
    """``random_streams.each`` / ``Trainer.step_keys`` (compiled) give the keys of the eager
    schedule ``split(fold_in(key, step), S)`` then ``fold_in(k, salt(name))``, where the salt
    is CRC-32 of the name shifted right by one (computed here with zlib directly)."""
    import zlib

    from rlvr_lab import random_streams
    from rlvr_lab.train.sequence import _split_step

    key = jax.random.key(11)
    for step in (0, 7):
        eager = jax.random.split(jax.random.fold_in(key, step), 3)
        np.testing.assert_array_equal(jax.random.key_data(_split_step(key, step, 3)),
                                      jax.random.key_data(eager))
        for name in ("rollout", "update", "evaluation"):
            salt = zlib.crc32(name.encode()) >> 1
            want = jnp.stack([jax.random.key_data(jax.random.fold_in(k, salt)) for k in eager])
            np.testing.assert_array_equal(
                jax.random.key_data(random_streams.each(eager, name)), want)
    # distinct names are distinct streams; a bad name is a one-line error
    assert len({random_streams.salt(n) for n in ("rollout", "update", "evaluation",
                                                 "prompts", "samples")}) == 5
    with pytest.raises(ValueError, match="stream name=3 is not allowed"):
        random_streams.salt(3)


def test_building_a_trainer_trains_nothing_until_the_base_is_used(monkeypatch):
    """The SFT base is loaded (or trained) on first use of ``base_policy``, not by the
    constructor; a base given to the constructor is used as is."""
    calls = []
    real = sft.load_or_train

    def counting(base, **kw):
        calls.append(base)
        return real(base, **kw)

    monkeypatch.setattr(sft, "load_or_train", counting)
    trainer = sequence.Trainer(RL)
    assert calls == []
    policy = trainer.base_policy
    assert calls == [RL.base] and trainer.base_policy is policy   # once, then kept
    given = sequence.Trainer(RL, base_policy=policy)
    assert given.base_policy is policy and len(calls) == 1
