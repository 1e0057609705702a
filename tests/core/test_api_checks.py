"""Issue 44, API: every probe of the issue is a one-line ValueError/TypeError naming the value,
or a finite, documented result for valid degenerate input (each case failed before)."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_lab import advantages, experiments, losses, metrics
from rlvr_lab.envs import arithmetic
from rlvr_lab.train import bandit, sequence


def _one_line(excinfo, *needles):
    text = str(excinfo.value)
    assert "\n" not in text and len(text) < 400, text
    for needle in needles:
        assert needle in text, (needle, text)


# ----------------------------------------------------------------------------- silent before
@pytest.mark.parametrize("rewards", [[[1 + 2j, 0.0]], np.array([[1 + 1j, 2 - 1j]]),
                                     jnp.array([[1 + 0j, 0j]])])
def test_grpo_rejects_complex_rewards(rewards):
    with pytest.raises(TypeError) as e:
        advantages.grpo(rewards)
    _one_line(e, "complex")


@pytest.mark.parametrize("scale", ["std", "batch", "none"])
def test_grpo_stays_finite_for_huge_rewards(scale):
    adv = np.asarray(advantages.grpo([[3e38, -3e38, 0.0]], scale=scale))
    assert np.isfinite(adv).all(), adv
    if scale != "none":
        np.testing.assert_allclose(adv, [[1.0, -1.0, 0.0]], atol=1e-6)
    else:
        np.testing.assert_allclose(adv, [[3e38, -3e38, 0.0]], rtol=1e-6, atol=1e32)
    jitted = np.asarray(jax.jit(advantages.grpo, static_argnames="scale")(
        jnp.array([[3e38, -3e38, 0.0]]), scale=scale))
    np.testing.assert_allclose(jitted, adv, rtol=1e-6, atol=1e-6 if scale != "none" else 1e32)
    # the largest float32 values, a group of equal huge rewards, and a normal group beside
    # them (per-group scaling: the normal group keeps its advantages)
    mixed = np.asarray(advantages.grpo([[3.4028235e38, -3.4028235e38], [3.4e38, 3.4e38],
                                        [1.0, 0.0]], scale=scale))
    assert np.isfinite(mixed).all(), mixed
    if scale == "std":
        np.testing.assert_allclose(mixed, [[0.7071, -0.7071], [0, 0], [0.7071, -0.7071]],
                                   atol=1e-4)


def test_grpo_is_unchanged_for_ordinary_rewards():
    """The overflow guard is exactly 1 below ~1e18: bit for bit the plain formula."""
    rng = np.random.default_rng(0)
    r = rng.normal(size=(5, 8)).astype(np.float32) * 1e6
    mean = r.mean(-1, keepdims=True)
    std = r.std(-1, ddof=1, keepdims=True)
    np.testing.assert_allclose(advantages.grpo(r), (r - mean) / (std + 1e-6), rtol=1e-4)
    s = advantages._overflow_scale(jnp.asarray(r), jnp.ones(r.shape, bool))
    assert (np.asarray(s) == 1).all()


def test_sequence_log_ratio_rejects_nan_at_valid_tokens():
    with pytest.raises(ValueError) as e:
        losses.sequence_log_ratio(np.array([[np.nan, 0.0]]), np.zeros((1, 2)))
    _one_line(e, "log_prob=nan")
    # masked NaN padding is allowed
    out = losses.sequence_log_ratio(np.array([[np.nan, 1.0]]), np.zeros((1, 2)),
                                    np.array([[False, True]]))
    assert float(out[0, 0]) == 1.0


@pytest.mark.parametrize("cls", [bandit.BanditConfig, sequence.SequenceRLConfig])
def test_configs_cap_rollouts_per_step(cls):
    with pytest.raises(ValueError) as e:
        cls(num_generations=10**9)
    _one_line(e, "num_generations", "1000000000", "at most")
    with pytest.raises(ValueError) as e:
        cls(steps=2**33)
    _one_line(e, "steps=8589934592", "at most")


@pytest.mark.parametrize("a, b", [(-3, 4), (3, -4), (2.5, 1), (True, 1), ("3", 4),
                                  (10**6, 1)])
def test_arithmetic_operands(a, b):
    with pytest.raises(ValueError) as e:
        arithmetic.make_problem(a, b)
    _one_line(e, "not allowed")
    assert arithmetic.make_problem(np.int64(999_999), 0).target == 999_999


@pytest.mark.parametrize("seeds", [0, -1, 2.5, True, 10**9])
def test_experiment_run_rejects_bad_seeds_before_running(seeds, tmp_path):
    with pytest.raises(ValueError) as e:
        experiments.run("dars_theory", seeds=seeds, out_dir=tmp_path)
    _one_line(e, "seeds=")
    assert not list(tmp_path.iterdir())                  # nothing run, nothing stored


def test_e3_temperature_seeds_zero_is_a_value_error(tmp_path):
    with pytest.raises(ValueError) as e:
        experiments.run("e3_temperature", seeds=0, out_dir=tmp_path)
    _one_line(e, "seeds=0")


def test_experiment_run_into_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ValueError) as e:
        experiments.run("dars_theory", out_dir=f)
    _one_line(e, "out_dir=", "file")
    with pytest.raises(TypeError):
        experiments.run("dars_theory", out_dir=5)
    with pytest.raises(TypeError):
        experiments.run("dars_theory", quick="yes", out_dir=tmp_path)


# ----------------------------------------------------------------------------- ugly before
@pytest.mark.parametrize("rewards", [[["a", "b"]], [[None, 1.0]], [[1.0, 2.0], [3.0]]])
def test_grpo_rejects_text_objects_and_ragged_rewards(rewards):
    with pytest.raises((TypeError, ValueError)) as e:
        advantages.grpo(rewards)
    _one_line(e, "rewards")


def test_ppo_clip_shapes_and_types():
    lp, old = np.zeros((2, 4)), np.zeros((2, 3))
    with pytest.raises(ValueError) as e:
        losses.ppo_clip(lp, old, np.zeros((2, 1)))
    _one_line(e, "old_log_prob", "(2, 3)", "(2, 4)")
    with pytest.raises(TypeError) as e:
        losses.ppo_clip(lp, lp, "1.0")
    _one_line(e, "advantages='1.0'")
    with pytest.raises(ValueError) as e:
        losses.ppo_clip(lp, lp, np.zeros((3, 1)))
    _one_line(e, "advantages", "(3, 1)")
    with pytest.raises(ValueError) as e:
        losses.ppo_clip(lp, lp, np.zeros((2, 1)), np.ones((3, 4), bool))
    _one_line(e, "mask", "(3, 4)")
    # valid broadcasts still work: [B, 1] and scalar advantages, a [B, 1] mask
    assert losses.ppo_clip(lp, lp, 1.0).shape == (2, 4)
    assert losses.ppo_clip(lp, lp, np.ones((2, 1)), np.ones((2, 1), bool)).shape == (2, 4)


def test_masked_mean_mismatch_metrics_correct_mass_shapes():
    with pytest.raises(ValueError) as e:
        losses.masked_mean(np.zeros((2, 4)), np.ones((3, 4), bool))
    _one_line(e, "mask", "(3, 4)", "(2, 4)")
    with pytest.raises(ValueError) as e:
        losses.mismatch_metrics(np.zeros((2, 4)), np.zeros((2, 4)), np.ones((3, 4), bool))
    _one_line(e, "mask", "(3, 4)")
    with pytest.raises(ValueError) as e:
        losses.mismatch_metrics(np.zeros((2, 4)), np.zeros((3, 4)))
    _one_line(e, "rollout_log_prob", "(3, 4)")
    with pytest.raises(ValueError) as e:
        metrics.correct_mass(np.zeros((2, 3)), np.ones((3, 3), bool))
    _one_line(e, "correct", "(3, 3)")
    with pytest.raises(ValueError) as e:
        metrics.mean_token_entropy(np.zeros((2, 3)), np.ones((3,), bool))
    _one_line(e, "mask", "(3,)")
    assert float(losses.masked_mean(np.arange(4.0), np.array([1, 1, 0, 0], bool))) == 0.5


def test_pass_at_k_shapes_and_huge_counts():
    with pytest.raises(ValueError) as e:
        metrics.pass_at_k([8, 8], [1, 2, 3], 1)
    _one_line(e, "(2,)", "(3,)")
    with pytest.raises(ValueError) as e:
        metrics.pass_at_k(2**40, 1, 1)
    _one_line(e, "n=1099511627776", "2147483647")
    assert math.isclose(float(metrics.pass_at_k(2**31 - 1, 1, 1)), 1 / (2**31 - 1), rel_tol=1e-3)


@pytest.mark.parametrize("axis", [5, -3, 1.0, True])
def test_entropy_axis(axis):
    with pytest.raises(ValueError) as e:
        metrics.entropy(np.zeros((2, 3)), axis=axis)
    _one_line(e, f"axis={axis!r}", "-2..1")
    np.testing.assert_allclose(metrics.entropy(np.zeros((2, 3)), axis=-2), [math.log(2)] * 3,
                               rtol=1e-6)


def test_train_seeds_key_and_config():
    cfg = bandit.BanditConfig(steps=1)
    with pytest.raises(TypeError) as e:
        bandit.train_seeds(cfg, 0, 1)
    _one_line(e, "key=0", "jax.random.key")
    with pytest.raises(TypeError) as e:
        bandit.train_seeds({"steps": 1}, jax.random.key(0), 1)
    _one_line(e, "config=", "BanditConfig")
    with pytest.raises(TypeError):
        sequence.run(sequence.SequenceRLConfig(), 0)


def test_runner_tasks_and_checkpoint_arguments(tmp_path):
    from rlvr_lab.envs import tasks
    from rlvr_lab.train import checkpoint

    with pytest.raises(ValueError) as e:
        experiments.reproduce(only=123, out_dir=tmp_path, progress=False)
    _one_line(e, "123")
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ValueError) as e:
        experiments.reproduce(out_dir=f, progress=False)
    _one_line(e, "out_dir=")
    with pytest.raises(TypeError):
        experiments.reproduce(progress="x", out_dir=tmp_path)
    with pytest.raises(ValueError) as e:
        tasks.score_completions([], np.zeros((1, 3), int))
    _one_line(e, "empty")
    p = arithmetic.make_problem(1, 2)
    with pytest.raises(ValueError) as e:
        tasks.score_completions([p], np.zeros(3))
    _one_line(e, "completion_ids")
    with pytest.raises(TypeError) as e:
        tasks.generate("arithmetic", 0, 1, (1,))
    _one_line(e, "rng=")
    with pytest.raises(TypeError) as e:
        checkpoint.save(tmp_path / "c.ckpt", {"a": "text"})
    _one_line(e, "leaf 0")
    assert not (tmp_path / "c.ckpt").exists()
