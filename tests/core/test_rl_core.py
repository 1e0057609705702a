"""The update core, the shared config vocabulary (aliases, per-field checks) and the registry."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from rlvr_lab import _registry, advantages, losses
from rlvr_lab.envs.prompt_bank import PromptBankConfig
from rlvr_lab.train import core, rollout
from rlvr_lab.train.bandit import BanditConfig, make_train
from rlvr_lab.train.sequence import SequenceRLConfig

BANK = BanditConfig(bank=PromptBankConfig(num_prompts=8, vocab_size=6), steps=3, num_prompts=4,
                    num_generations=4, eval_ks=(1,))


def _run(cfg):
    return jax.jit(make_train(cfg))(jax.random.key(0))


@pytest.mark.parametrize("cls", [BanditConfig, SequenceRLConfig])
def test_trl_spelling_is_the_native_config(cls):
    base = BANK if cls is BanditConfig else SequenceRLConfig()
    trl = base.replace(loss_type="dr_grpo", scale_rewards=False, beta=0.0, num_iterations=1)
    native = base.replace(policy_loss="ppo_clip", loss_agg_mode="seq-mean-token-sum-norm",
                          scale_rewards="none")
    assert trl == native
    verl = base.replace(**{"clip_ratio_low": 0.1, "clip_ratio_high": 0.28, "rollout.n": 6,
                           "loss_agg_mode": "token-mean", "kl_loss_type": "low_var_kl"})
    assert (verl.epsilon, verl.epsilon_high, verl.num_generations, verl.kl_estimator) == (
        0.1, 0.28, 6, "k3")


def test_trl_spelling_gives_the_same_update():
    trl = BANK.replace(loss_type="dr_grpo", scale_rewards=False)
    native = BANK.replace(loss_agg_mode="seq-mean-token-sum-norm", scale_rewards="none")
    a, b = _run(trl)[0].logits, _run(native)[0].logits
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("bad, message", [
    (dict(loss_type="ppo_clip"), "loss_type='ppo_clip' is not allowed"),
    (dict(scale_rewards="std"), "scale_rewards='std'"),
    (dict(nonsense=1), "unknown option 'nonsense'"),
    (dict(epsilon=1.0), "epsilon=1.0"),
    (dict(epsilon=-0.1), "epsilon=-0.1"),
    (dict(learning_rate=float("nan")), "learning_rate=nan"),
    (dict(num_generations=True), "num_generations=True"),
    (dict(num_generations=4.0), "num_generations=4.0"),
    (dict(max_grad_norm=0.0), "max_grad_norm=0.0"),
    (dict(steps=3, max_steps=5), "max_steps=5 conflicts with steps=3"),
    (dict(loss_type="grpo", loss_agg_mode="token-mean"), "conflicts"),
    (dict(kl_loss_type="abs"), "kl_loss_type='abs'"),
])
def test_config_errors_are_one_line(bad, message):
    for cfg in (BANK, SequenceRLConfig()):
        with pytest.raises(ValueError, match=message) as info:
            cfg.replace(**bad)
        assert "\n" not in str(info.value)


def test_old_spellings_still_read_and_construct():
    cfg = BanditConfig(bank=BANK.bank, num_steps=5, batch_size=4)
    assert (cfg.steps, cfg.num_steps, cfg.num_prompts, cfg.batch_size) == (5, 5, 4, 4)
    seq = SequenceRLConfig(loss="cispo", advantage_kwargs=(("scale", "none"),))
    assert seq.policy_loss == seq.loss == "cispo"
    assert seq.advantage_options == (("scale", "none"),)


def test_callables_are_accepted_where_names_are():
    def my_estimator(rewards, mask=None):
        return advantages.rloo(rewards, mask)

    cfg = BANK.replace(advantage=my_estimator, policy_loss=losses.pg,
                       rollout=rollout.get("uniform"))
    by_name = BANK.replace(advantage="rloo", policy_loss="pg")
    np.testing.assert_array_equal(np.asarray(_run(cfg)[0].logits),
                                  np.asarray(_run(by_name)[0].logits))


def test_registry_overwrite_and_catalogue():
    fn = lambda rewards, mask=None: advantages.dr_grpo(rewards, mask)  # noqa: E731
    advantages.register("test_core_tmp", fn)
    advantages.register("test_core_tmp", fn)                 # same object: fine
    with pytest.raises(ValueError, match="overwrite=True"):
        advantages.register("test_core_tmp", lambda r, m=None: r)
    advantages.register("test_core_tmp", lambda r, m=None: r, overwrite=True)
    cat = _registry.catalogue()
    assert {"grpo", "mc_grpo", "grpo_drop_one", "test_core_tmp"} <= set(cat["estimator"])
    assert {"uniform", "dynamic_sampling", "dars", "cures", "e3", "brorl_schedule"} <= set(
        cat["stage"])
    assert {"ppo_clip", "gspo", "cispo", "pg"} <= set(cat["loss"])


def test_every_estimator_gives_advantages():
    r = jnp.asarray([[1.0, 0.0, 0.0, 1.0, 1.0]])
    for name in advantages.names():
        required = advantages.REQUIRED_OPTIONS.get(name)   # remax: the greedy reward
        out = advantages.compute(name, r, **({required: jnp.zeros(1)} if required else {}))
        assert isinstance(out, advantages.Advantages) and out.adv.shape == r.shape


def test_losses_read_their_options_from_the_config():
    lp, old = jnp.log(jnp.asarray([[1.5, 0.5]])), jnp.zeros((1, 2))
    adv = jnp.asarray([[1.0, -1.0]])
    opts = core.LossOptions(epsilon=0.1, epsilon_high=0.3, clip_ratio_c=3.0)
    got = core.policy_loss("ppo_clip", opts)(lp, old, adv, None)
    want = losses.ppo_clip(lp, old, adv, epsilon=0.1, epsilon_high=0.3, clip_ratio_c=3.0)
    np.testing.assert_array_equal(got, want)
    # CISPO reads only epsilon_high: the PPO epsilon must not become a lower clip
    got = core.policy_loss("cispo", opts)(lp, old, adv, None)
    np.testing.assert_array_equal(got, losses.cispo(lp, old, adv, epsilon_high=0.3))


def test_update_core_matches_a_plain_loop():
    """Epochs x minibatches in order: the same numbers as hand-written optax steps."""
    data = {"x": jnp.arange(8.0).reshape(8, 1), "y": jnp.linspace(-1, 1, 8).reshape(8, 1)}

    def loss_fn(w, mb):
        loss = jnp.mean((mb["x"] * w - mb["y"]) ** 2)
        return loss, {"loss": loss}

    opt = optax.sgd(0.01)
    w, state, m = core.update(jax.random.key(0), jnp.zeros(()), opt.init(jnp.zeros(())), data,
                              loss_fn, opt, num_epochs=2, num_minibatches=4)
    w_ref, s_ref = jnp.zeros(()), opt.init(jnp.zeros(()))
    for _ in range(2):
        for i in range(4):
            mb = {k: v[2 * i:2 * i + 2] for k, v in data.items()}
            g = jax.grad(lambda w, mb=mb: loss_fn(w, mb)[0])(w_ref)
            u, s_ref = opt.update(g, s_ref, w_ref)
            w_ref = optax.apply_updates(w_ref, u)
    np.testing.assert_allclose(w, w_ref, rtol=1e-6)
    assert set(m) == {"loss", "grad_norm"}
    with pytest.raises(ValueError, match="num_minibatches=3"):
        core.update(jax.random.key(0), jnp.zeros(()), opt.init(jnp.zeros(())), data, loss_fn,
                    opt, num_epochs=1, num_minibatches=3)


def test_configs_are_frozen_and_hashable():
    with pytest.raises(dataclasses.FrozenInstanceError):
        BANK.steps = 4
    assert hash(BANK) == hash(BANK.replace(steps=3))
