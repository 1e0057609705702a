"""Prompt bank and the jitted bandit trainer: exactness, determinism, devices, budgets."""
import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_lab.envs import prompt_bank
from rlvr_lab.envs.prompt_bank import PromptBankConfig
from rlvr_lab.models import tabular
from rlvr_lab.train import bandit
from rlvr_lab.train import rollout
from rlvr_lab.train.bandit import (BanditConfig, Hparams, make_train, metric_names, metrics_frame,
                                   train_seeds)
from rlvr_lab.utils import enable_x64

SMALL = BanditConfig(bank=PromptBankConfig(num_prompts=8, vocab_size=6), num_steps=6,
                     batch_size=4, num_generations=4, num_iterations=2, num_minibatches=2)


def test_bank_initial_success_probability_is_exact():
    cfg = PromptBankConfig(num_prompts=32, vocab_size=10, num_correct=3)
    bank = prompt_bank.make_bank(cfg)
    probs = np.asarray(jax.nn.softmax(bank.logits0.astype(jnp.float32)), np.float64)
    mass = (probs * np.asarray(bank.correct)).sum(-1)
    target = np.clip(np.asarray(jax.random.beta(jax.random.split(jax.random.key(0), 4)[1],
                                                cfg.difficulty_a, cfg.difficulty_b, (32,))),
                     cfg.min_p0, 1 - cfg.min_p0)
    np.testing.assert_allclose(mass, target, rtol=1e-4, atol=1e-6)
    assert np.asarray(bank.correct).sum(-1).tolist() == [3] * 32


@pytest.mark.parametrize("reward", ["binary", "format", "levels"])
def test_compiled_bank_equals_the_eager_construction(reward):
    """make_bank runs as one program compiled at XLA's level 0 (utils.jit_cpu_options); the
    same ops run one by one give the same bank up to float rounding, and an explicit key is
    the seed's key."""
    cfg = PromptBankConfig(num_prompts=16, vocab_size=12, reward=reward, seed=3)
    bank = prompt_bank.make_bank(cfg)
    with jax.disable_jit():
        eager = prompt_bank._build(cfg, jax.random.key(3))
    for got, want in zip(bank, eager):
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                                   rtol=1e-5, atol=1e-6)
    again = prompt_bank.make_bank(cfg.__class__(**{**cfg.__dict__, "seed": 0}),
                                  key=jax.random.key(3))
    for got, want in zip(bank, again):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_unknown_cpu_options_are_dropped_not_fatal():
    from rlvr_lab import utils

    assert utils.supported_cpu_options({"xla_no_such_option_here": 1}) == {}
    assert utils.supported_cpu_options(utils.FAST_COMPILE) == utils.FAST_COMPILE
    f = utils.jit_cpu_options(lambda x: x * 2, {"xla_no_such_option_here": 1,
                                                 **utils.FAST_COMPILE})
    assert float(f(jnp.float32(2.0))) == 4.0
    # called inside another jit, the outer program's options apply (no nested-options error)
    assert float(jax.jit(lambda x: f(x) + 1)(jnp.float32(2.0))) == 5.0


def test_jit_cpu_options_is_jit_with_level_0_on_cpu_only(monkeypatch):
    from rlvr_lab import utils

    def f(x, n):
        return jnp.cumsum(jnp.sin(x) * n)

    x = jnp.linspace(0.0, 3.0, 17)
    fast = utils.jit_cpu_options(f, static_argnums=1)
    np.testing.assert_allclose(fast(x, 3), jax.jit(f, static_argnums=1)(x, 3), rtol=1e-6)
    utils.supported_cpu_options(utils.FAST_COMPILE)   # the option probe compiles: before the patch
    seen = []
    monkeypatch.setattr(utils.jax, "jit", lambda fn, **kw: seen.append(kw) or fn)
    on_cpu = utils.jit_cpu_options(f, static_argnums=1)
    on_gpu = utils.jit_cpu_options(f)
    assert seen == []      # nothing is built (and no backend started) before the first call
    on_cpu(x, 2), on_cpu(x, 3)
    monkeypatch.setattr(utils.jax, "default_backend", lambda: "gpu")
    on_gpu(x, 1)
    assert seen == [{"compiler_options": {"xla_backend_optimization_level": 0},
                     "static_argnums": 1}, {"compiler_options": None}]


def test_bank_trainer_compiles_small_loops_at_level_0_and_large_ones_at_level_1(monkeypatch):
    """train_seeds picks the XLA:CPU level from the loop's cells (level-0 code runs 3-10x
    slower, so only loops whose compile outweighs their run get it); the two programs give
    the same numbers up to float rounding."""
    from rlvr_lab import utils

    small = BanditConfig(bank=PromptBankConfig(num_prompts=8, vocab_size=4), steps=3,
                         num_prompts=4, num_generations=2)
    cells = bandit.table_cells(small, 2)
    assert cells == 2 * 3 * (4 * 2 + 8 * 4)
    assert utils.loop_options(cells) == utils.FAST_COMPILE
    assert utils.loop_options(utils.LOOP_LEVEL_1_CELLS) == utils.LOOP_COMPILE
    levels = []
    real = bandit._vmapped_train
    monkeypatch.setattr(bandit, "_vmapped_train",
                        lambda cfg, level: levels.append(level) or real(cfg, level))
    _, m0 = bandit.train_seeds(small, jax.random.key(1), 2)
    monkeypatch.setattr(utils, "LOOP_LEVEL_1_CELLS", 1)
    _, m1 = bandit.train_seeds(small, jax.random.key(1), 2)
    assert levels == [0, 1]
    for k in m0:
        np.testing.assert_allclose(np.asarray(m1[k]), np.asarray(m0[k]), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("reward", ["binary", "format", "levels"])
def test_reward_tables(reward):
    cfg = PromptBankConfig(num_prompts=16, vocab_size=12, reward=reward, wrong_levels=(0.0, 1.5),
                           correct_reward=2.0 if reward == "levels" else 1.0)
    bank = prompt_bank.make_bank(cfg)
    table, correct = np.asarray(bank.reward_table), np.asarray(bank.correct)
    if reward == "binary":
        assert set(np.unique(table)) == {0.0, 1.0}
        assert np.array_equal(table == 1.0, correct)
    elif reward == "format":
        assert np.all(table[correct] == 1.5) and set(np.unique(table[~correct])) <= {0.0, 0.5}
    else:
        assert np.all(table[correct] == 2.0) and set(np.unique(table[~correct])) <= {0.0, 1.5}


def test_exact_policy_gradient_matches_autodiff_and_loop():
    bank = prompt_bank.make_bank(PromptBankConfig(num_prompts=5, vocab_size=7, reward="format"))
    with enable_x64():
        logits = jnp.asarray(np.asarray(bank.logits0), jnp.float64)
        table = jnp.asarray(np.asarray(bank.reward_table), jnp.float64)
        auto = jax.grad(lambda z: prompt_bank.expected_reward(z, table).mean())(logits)
        exact = prompt_bank.exact_policy_gradient(logits, table)
        np.testing.assert_allclose(exact, auto, rtol=1e-12, atol=1e-15)
    z, r = np.asarray(logits), np.asarray(table)
    loop = np.zeros_like(z)
    for k in range(z.shape[0]):
        p = np.exp(z[k] - z[k].max())
        p /= p.sum()
        for v in range(z.shape[1]):
            # d/dz_v sum_u p_u r_u = p_v r_v - p_v sum_u p_u r_u
            loop[k, v] = (p[v] * r[k, v] - p[v] * sum(p[u] * r[k, u] for u in range(len(p))))
    np.testing.assert_allclose(np.asarray(exact), loop / z.shape[0], rtol=1e-10, atol=1e-14)


def test_inverse_cdf_sampling_matches_policy():
    logits = jnp.log(jnp.array([[0.5, 0.25, 0.125, 0.125], [0.0, 0.0, 1e-9, 1.0]]) + 1e-30)
    draws = np.asarray(tabular.sample(jax.random.key(3), logits, 40000))
    freq = np.stack([(draws[0] == v).mean() for v in range(4)])
    np.testing.assert_allclose(freq, [0.5, 0.25, 0.125, 0.125], atol=0.01)
    assert np.all(draws[1] == 3)
    assert draws.min() >= 0 and draws.max() <= 3


def test_same_key_same_numbers_and_different_key_differs():
    train = jax.jit(make_train(SMALL))
    _, a = train(jax.random.key(1))
    _, b = train(jax.random.key(1))
    _, c = train(jax.random.key(2))
    for k in a:
        np.testing.assert_array_equal(np.asarray(a[k]), np.asarray(b[k]))
    assert not np.array_equal(np.asarray(a["batch_reward"]), np.asarray(c["batch_reward"]))


def test_train_seeds_matches_single_runs_and_frame():
    _, m = train_seeds(SMALL, jax.random.key(0), 3)
    assert m["accuracy"].shape == (3, SMALL.num_steps)
    single = jax.jit(make_train(SMALL))(jax.random.fold_in(jax.random.key(0), 2))[1]
    np.testing.assert_allclose(np.asarray(m["accuracy"][2]), np.asarray(single["accuracy"]),
                               rtol=1e-5)
    df = metrics_frame(m, algorithm="grpo")
    assert set(df.columns) == {"algorithm", "seed", "step", "metric", "value"}
    assert len(df) == 3 * SMALL.num_steps * len(m)


@pytest.mark.parametrize("changes", [dict(), dict(eval_ks=(2,), beta=0.1),
                                     dict(rollout="dynamic_sampling", advantage="rloo")])
def test_metric_names_are_the_recorded_metrics(changes):
    cfg = SMALL.replace(**changes)
    _, m = jax.jit(make_train(cfg))(jax.random.key(0))
    assert set(m) == set(metric_names(cfg))


def test_recording_fewer_metrics_keeps_their_numbers_and_the_policy():
    train = jax.jit(make_train(SMALL))
    state, every = train(jax.random.key(3))
    few = SMALL.replace(metrics=("grad_norm", "accuracy"))
    state_few, some = jax.jit(make_train(few))(jax.random.key(3))
    assert set(some) == {"accuracy", "grad_norm"} and metric_names(few) == ("accuracy",
                                                                             "grad_norm")
    for name in some:
        np.testing.assert_allclose(np.asarray(some[name]), np.asarray(every[name]), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(state_few.logits), np.asarray(state.logits),
                               rtol=1e-6, atol=1e-7)


def test_learning_raises_accuracy():
    cfg = SMALL.replace(num_steps=40, learning_rate=0.1)
    _, m = train_seeds(cfg, jax.random.key(0), 4)
    acc = np.asarray(m["accuracy"])
    assert np.all(acc[:, -1] > acc[:, 0] + 0.1)
    assert np.all(np.isfinite(np.stack([np.asarray(v) for v in m.values()])))


@pytest.mark.parametrize("changes", [
    dict(advantage="mc_grpo", num_generations=5, num_minibatches=1),
    dict(policy_loss="gspo", epsilon=3e-4, epsilon_high=4e-4, loss_agg_mode="seq-mean-token-sum"),
    dict(policy_loss="cispo", beta=0.04, kl_estimator="k2"),
    dict(policy_loss="pg", optimizer="sgd", learning_rate=1.0, max_grad_norm=1.0),
    dict(rollout="dynamic_sampling", rollout_options=(("max_rounds", 2),), epsilon_high=0.28),
    dict(scale_rewards="batch", clip_ratio_c=3.0, advantage="grpo"),
    dict(advantage="reinforce_pp_baseline", temperature=0.7),
    dict(optimizer="adafactor", learning_rate=0.1),
])
def test_every_stage_combination_runs_finite(changes):
    _, m = jax.jit(make_train(SMALL.replace(**changes)))(jax.random.key(0))
    for name, values in m.items():
        assert np.all(np.isfinite(np.asarray(values))), name


def test_dynamic_sampling_masks_uninformative_groups_and_counts_rounds():
    bank = prompt_bank.make_bank(PromptBankConfig(num_prompts=16, vocab_size=4))
    cfg = BanditConfig(bank=PromptBankConfig(num_prompts=16, vocab_size=4), batch_size=8,
                       num_generations=4)
    shape = rollout.StageShape(cfg.batch_size, cfg.num_generations)
    out, _ = rollout.get("dynamic_sampling").sample(
        jax.random.key(0), rollout.BankSampler(bank.logits0, bank), shape, (), max_rounds=3)
    rewards, mask = np.asarray(out.rewards), np.asarray(out.mask)
    for g in range(8):
        if mask[g].any():
            assert rewards[g].min() < rewards[g].max()
    assert int(out.spent) in (32, 64, 96)
    # a policy that is always right gives no informative group: every round is spent
    sure = jnp.where(bank.correct, 50.0, -50.0)
    out, _ = rollout.get("dynamic_sampling").sample(
        jax.random.key(0), rollout.BankSampler(sure, bank), shape, (), max_rounds=3)
    assert int(out.spent) == 96 and not np.asarray(out.mask).any()


@pytest.mark.parametrize("bad, message", [
    (dict(num_generations=0), "num_generations=0"),
    (dict(batch_size=100), "num_prompts=100"),
    (dict(advantage="nope"), "unknown advantage estimator 'nope'"),
    (dict(policy_loss="nope"), "unknown policy loss 'nope'"),
    (dict(loss_agg_mode="mean"), "loss_agg_mode='mean'"),
    (dict(scale_rewards="std"), "scale_rewards='std'"),
    (dict(optimizer="adamm"), "optimizer='adamm'"),
    (dict(rollout="nope"), "unknown rollout stage 'nope'"),
    (dict(kl_estimator="k4"), "unknown KL estimator 'k4'"),
    (dict(learning_rate=-1.0), "learning_rate=-1.0"),
    (dict(clip_ratio_c=0.5), "clip_ratio_c=0.5"),
    (dict(num_steps=2.5), "steps=2.5"),
    (dict(loss_type="ppo_clip"), "loss_type=.ppo_clip. is not allowed"),
    (dict(epsilon=1.0), "epsilon=1.0"),
    (dict(learning_rate=float("inf")), "learning_rate=inf"),
    (dict(num_generations=True), "num_generations=True"),
    (dict(unknown_option=1), "unknown option .unknown_option."),
    (dict(steps=3, max_steps=4), "max_steps=4 conflicts with steps=3"),
    (dict(metrics=("acc",)), "metrics entry='acc' is not allowed; choose one of 'accuracy'"),
    (dict(metrics=("pass@64",), eval_ks=(1, 8)), "metrics entry='pass@64'"),
    (dict(metrics="accuracy"), "metrics='accuracy' is not allowed"),
    (dict(metrics=()), r"metrics=() is not allowed"),
])
def test_config_errors_name_the_bad_value(bad, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        SMALL.replace(**bad)


def test_bank_config_errors():
    with pytest.raises(ValueError, match="num_correct=4 must be < vocab_size=4"):
        PromptBankConfig(vocab_size=4, num_correct=4)
    with pytest.raises(ValueError, match="reward='ternary'"):
        PromptBankConfig(reward="ternary")


def test_four_fake_devices_give_the_same_numbers():
    """The seed axis sharded over 4 CPU devices reproduces the 1-device numbers."""
    script = textwrap.dedent("""
        import json, sys, jax, numpy as np
        from rlvr_lab.envs.prompt_bank import PromptBankConfig
        from rlvr_lab.train.bandit import BanditConfig, train_seeds
        cfg = BanditConfig(bank=PromptBankConfig(num_prompts=8, vocab_size=6), num_steps=5,
                           batch_size=4, num_generations=4, num_iterations=2, num_minibatches=2)
        _, m = train_seeds(cfg, jax.random.key(0), 6)
        print(json.dumps({"devices": jax.device_count(),
                          "acc": np.asarray(m["accuracy"]).tolist(),
                          "loss": np.asarray(m["loss"]).tolist()}))
    """)
    outs = []
    for count in (1, 4):
        env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={count}",
                   JAX_PLATFORMS="cpu")
        proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        outs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert outs[0]["devices"] == 1 and outs[1]["devices"] == 4
    np.testing.assert_allclose(outs[0]["acc"], outs[1]["acc"], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(outs[0]["loss"], outs[1]["loss"], rtol=1e-5, atol=1e-7)


def test_shuffle_is_a_uniform_permutation():
    perms = np.asarray(jax.vmap(lambda k: rollout.shuffle(k, 4))(
        jax.random.split(jax.random.key(0), 24000)))
    assert all(sorted(p) == [0, 1, 2, 3] for p in perms[:200])
    # every element lands in every position with probability 1/4
    for pos in range(4):
        freq = np.bincount(perms[:, pos], minlength=4) / len(perms)
        np.testing.assert_allclose(freq, 0.25, atol=0.015)
    # all 24 orders appear about equally often
    codes = perms @ np.array([64, 16, 4, 1])
    counts = np.unique(codes, return_counts=True)[1]
    assert len(counts) == 24 and counts.min() > 800 and counts.max() < 1200


def test_sampled_gradient_matches_exact_gradient():
    """RLOO's sampled policy gradient is unbiased; Dr.GRPO's is shrunk by (G-1)/G."""
    from simulations.grpo_family import gradient_check, sampled_gradients

    bank = prompt_bank.make_bank(PromptBankConfig(num_prompts=6, vocab_size=5,
                                                  difficulty_a=2.0, difficulty_b=2.0))
    exact = prompt_bank.exact_policy_gradient(bank.logits0, bank.reward_table)
    coverage, ratio, se = gradient_check(
        sampled_gradients(jax.random.key(0), bank, "rloo", 4, 4000), exact)
    assert coverage >= 0.85 and abs(ratio - 1) < 4 * se
    _, ratio_dr, se_dr = gradient_check(
        sampled_gradients(jax.random.key(1), bank, "dr_grpo", 4, 4000), exact)
    assert abs(ratio_dr - 0.75) < 4 * se_dr and abs(ratio_dr - 1) > 4 * se_dr


def test_numpy_adam_matches_optax():
    import optax

    from rlvr_lab.benchmarks.bandit import NumpyAdam

    grads = np.random.default_rng(0).normal(size=(20, 5, 3))
    grads[3:6, 1] = 0.0  # rows without gradient still move with the first moment
    params, ref = np.zeros((5, 3)), jnp.zeros((5, 3))
    adam, opt = NumpyAdam(params, 0.05), optax.adam(0.05)
    state = opt.init(ref)
    for g in grads:
        adam.step(params, g)
        updates, state = opt.update(jnp.asarray(g, jnp.float32), state, ref)
        ref = optax.apply_updates(ref, updates)
    np.testing.assert_allclose(params, np.asarray(ref), rtol=1e-5, atol=1e-6)


def test_numpy_baseline_replays_the_trainer():
    """The bench's NumPy update (float64), fed the trainer's own rollouts and minibatches,
    ends at the trainer's logits: both sides of the bench run the same algorithm, and the
    trainer's row-gather gradient on flattened parameters is the plain chain rule. SGD, since
    Adam's first step is lr*sign(g) and turns float32-vs-float64 rounding of the near-zero
    gradients (GRPO advantages sum to 0 in a group) into visible differences."""
    from rlvr_lab.benchmarks.bandit import NumpySGD, _softmax, numpy_update

    cfg = BanditConfig(bank=PromptBankConfig(num_prompts=12, vocab_size=6), num_steps=4,
                       batch_size=8, num_generations=4, num_iterations=2, num_minibatches=2,
                       epsilon_high=0.28, optimizer="sgd", learning_rate=0.5)
    bank = prompt_bank.make_bank(cfg.bank)
    key = jax.random.key(3)
    state, _ = jax.jit(make_train(cfg))(key)
    logits = np.asarray(bank.logits0, np.float64)
    table = np.asarray(bank.reward_table, np.float64)
    sgd = NumpySGD(logits, cfg.learning_rate)
    for k in jax.random.split(key, cfg.num_steps):  # the trainer's key schedule
        k_roll, k_perm = jax.random.split(k)
        sampler = rollout.BankSampler(jnp.asarray(logits, jnp.float32), bank, cfg.temperature)
        batch, _ = rollout.get("uniform").sample(
            k_roll, sampler, rollout.StageShape(cfg.batch_size, cfg.num_generations), ())
        prompts, answers = np.asarray(batch.prompts), np.asarray(batch.answers)
        rewards = table[prompts[:, None], answers]
        adv = (rewards - rewards.mean(-1, keepdims=True)) / (
            rewards.std(-1, ddof=1, keepdims=True) + 1e-6)
        old = np.log(np.take_along_axis(_softmax(logits[prompts]), answers, 1))
        for kk in jax.random.split(k_perm, cfg.num_iterations):
            perm = np.asarray(rollout.shuffle(kk, cfg.batch_size))
            for groups in np.split(perm, cfg.num_minibatches):
                numpy_update(logits, sgd, prompts[groups], answers[groups], old[groups],
                             adv[groups], cfg)
    assert np.abs(logits - np.asarray(bank.logits0)).max() > 0.1  # it did learn something
    np.testing.assert_allclose(np.asarray(state.logits), logits, rtol=1e-5, atol=1e-5)


def test_static_zero_kl_skip_gives_the_traced_zero_numbers():
    """``beta=0`` known at trace time drops the KL term; passing ``beta`` as an array (a sweep)
    keeps it, times 0. Same numbers either way."""
    cfg = SMALL.replace(kl_estimator="k3")
    train = jax.jit(make_train(cfg))
    _, a = train(jax.random.key(4))
    _, b = train(jax.random.key(4), Hparams.from_config(cfg))
    for k in a:
        np.testing.assert_allclose(np.asarray(a[k]), np.asarray(b[k]), rtol=1e-6, atol=1e-7)
