# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # GRPO from scratch, in plain JAX
#
# **Runtime:** 11 s in quick mode on 2 CPU cores (measured by `notebooks/execute.py`, 2026-12-06); full settings (`RLVR_LAB_QUICK=0`) take longer
#
# Quick settings are the default; set `RLVR_LAB_QUICK=0` before starting Jupyter for the full settings
# (slower; the committed figures of `rlvr-lab reproduce` use them).
#
# GRPO (arXiv:2402.03300) is five steps repeated: **sample** G answers per prompt, **reward**
# them with a verifier, turn the rewards into a **group advantage**
# $A_i = (r_i - \bar r)/(\operatorname{std}(r) + \epsilon)$, minimise the **clipped loss**
# $-\min(\rho_i A_i, \operatorname{clip}(\rho_i, 1-\varepsilon, 1+\varepsilon) A_i)$ with
# $\rho_i = \pi_\theta(y_i)/\pi_{old}(y_i)$, and take an **optimizer step**. This notebook
# writes those five steps in about 30 lines of JAX and optax on the prompt bank, checks that
# they give the library's trainer's numbers to float tolerance, and then does the same with
# the library in one call, where each step is a name you can change.

# %%
from rlvr_lab.io import output_dir, quick_mode
QUICK = quick_mode(default=True)
OUT = output_dir() / "10_grpo_from_scratch"

import jax, jax.numpy as jnp, numpy as np, optax
from rlvr_lab import plotting
from rlvr_lab.envs import prompt_bank
from rlvr_lab.envs.prompt_bank import PromptBankConfig
from rlvr_lab.train.bandit import BanditConfig, make_train, train_seeds

STEPS = 40 if QUICK else 150
SEEDS = 4 if QUICK else 16
print("quick mode" if QUICK else "full mode", "|", STEPS, "steps,", SEEDS, "seeds")

# %% [markdown]
# ## 1. The prompt bank
# $K$ prompts; prompt $k$'s policy is $\operatorname{softmax}(z_k)$ over $V$ answers, and a
# verifier (here a table) says which answers are correct. The policy's parameters are the
# logits $z \in \mathbb{R}^{K \times V}$, and its success probability on prompt $k$,
# $p_k = \sum_{a \text{ correct}} \pi_k(a)$, is exact, so we can watch learning without
# sampling noise.

# %%
bank_cfg = PromptBankConfig(num_prompts=64, vocab_size=16)
bank = prompt_bank.make_bank(bank_cfg)
G, LR, EPS = 8, 0.05, 0.2   # rollouts per prompt, Adam's learning rate, PPO clip
print("logits", bank.logits0.shape, "| initial mean success probability",
      round(float(bank.p0.mean()), 3))

# %% [markdown]
# ## 2. GRPO in about 30 lines
# One step is a pure function of the logits, the optimizer state and a key; `lax.scan` runs
# the steps. The only detail that is not GRPO itself is how the key is split, which follows
# the library's trainer so that both draw the same answers.

# %%
def grpo_from_scratch(key, logits0, reward_table, correct, steps):
    K, V = logits0.shape
    opt = optax.adam(LR)

    def step(carry, key):
        logits, opt_state = carry
        k_rollout, _ = jax.random.split(key)        # the trainer's split: rollout | minibatch order
        _, k_sample = jax.random.split(k_rollout)   # prompt choice (all K prompts here) | sampling
        pi = jax.nn.softmax(logits)
        accuracy = jnp.sum(pi * correct, -1).mean()  # exact success probability, before the step
        # 1. sample G answers per prompt (inverse CDF: one uniform per draw)
        cdf = jnp.cumsum(pi, -1)
        u = jax.random.uniform(k_sample, (K, G))
        answers = jnp.minimum((u[:, :, None] * cdf[:, -1:, None] >= cdf[:, None, :]).sum(-1), V - 1)
        # 2. reward (the verifier is a table lookup)
        r = reward_table[jnp.arange(K)[:, None], answers]
        # 3. group advantage
        adv = (r - r.mean(-1, keepdims=True)) / (r.std(-1, ddof=1, keepdims=True) + 1e-6)
        old_logp = jnp.take_along_axis(jax.nn.log_softmax(logits), answers, -1)

        # 4. clipped loss, averaged over all K x G rollouts
        def loss(logits):
            logp = jnp.take_along_axis(jax.nn.log_softmax(logits), answers, -1)
            ratio = jnp.exp(logp - old_logp)
            return -jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - EPS, 1 + EPS) * adv).mean()

        # 5. optax step
        updates, opt_state = opt.update(jax.grad(loss)(logits), opt_state, logits)
        return (optax.apply_updates(logits, updates), opt_state), accuracy

    (logits, _), accuracy = jax.lax.scan(step, (logits0, opt.init(logits0)),
                                         jax.random.split(key, steps))
    return logits, accuracy


mine = jax.jit(grpo_from_scratch, static_argnums=4)
logits, accuracy = mine(jax.random.key(0), bank.logits0, bank.reward_table, bank.correct, STEPS)
print(f"success probability {float(accuracy[0]):.3f} -> {float(accuracy[-1]):.3f} in {STEPS} steps")

# %% [markdown]
# ## 3. Check against the library's trainer
# The library's `BanditConfig` with the same choices: every prompt in every batch, G
# rollouts, the `grpo` estimator (group std), the `ppo_clip` loss averaged over tokens
# (`token-mean`; on the bank an answer is one token), one Adam step per batch. Same key, so the
# same answers are drawn; the two differ only in how floats are rounded (the library
# computes the group mean relative to the group's first reward, and flattens the logits for
# Adam), so we ask for agreement to float32 tolerance, not bit for bit.

# %%
cfg = BanditConfig(bank=bank_cfg, steps=STEPS, num_prompts=bank_cfg.num_prompts,
                   num_generations=G, advantage="grpo", scale_rewards="group",
                   policy_loss="ppo_clip", epsilon=EPS, loss_agg_mode="token-mean",
                   optimizer="adam", learning_rate=LR, num_iterations=1, num_minibatches=1)
state, lib = jax.jit(make_train(cfg))(jax.random.key(0))
acc_gap = float(jnp.abs(accuracy - lib["accuracy"]).max())
logit_gap = float(jnp.abs(logits - state.logits).max())
print(f"largest gap: accuracy {acc_gap:.2e}, logits {logit_gap:.2e}")
np.testing.assert_allclose(np.asarray(accuracy), np.asarray(lib["accuracy"]), atol=1e-4)
np.testing.assert_allclose(np.asarray(logits), np.asarray(state.logits), atol=1e-3)
print("the from-scratch GRPO gives the library's numbers to float tolerance")

# %% [markdown]
# ## 4. The same with the library
# `train_seeds` runs `jit(vmap(train))` over seeds, so the learning curve comes with an
# interval. Each of the five steps is now an option: `advantage="dr_grpo"` drops the std
# (Dr.GRPO, arXiv:2503.20783), `advantage="rloo"` uses a leave-one-out baseline,
# `epsilon_high=0.28` is DAPO's clip-higher, `loss_agg_mode` picks the aggregation. Below:
# our function over the same seeds' keys, the library's GRPO, and Dr.GRPO.

# %%
_, lib_runs = train_seeds(cfg, jax.random.key(1), SEEDS)
_, dr_runs = train_seeds(cfg.replace(advantage="dr_grpo"), jax.random.key(1), SEEDS)
keys = jax.vmap(lambda i: jax.random.fold_in(jax.random.key(1), i))(jnp.arange(SEEDS))
_, mine_runs = jax.vmap(lambda k: mine(k, bank.logits0, bank.reward_table, bank.correct,
                                       STEPS))(keys)
print("largest gap over seeds, from scratch vs library:",
      f"{float(jnp.abs(mine_runs - lib_runs['accuracy']).max()):.2e}")

fig, ax = plotting.subplots(figsize=(6, 3.4))
steps = np.arange(STEPS)
plotting.band(ax, steps, np.asarray(lib_runs["accuracy"]), label="library: GRPO", bounds=(0, 1))
plotting.band(ax, steps, np.asarray(dr_runs["accuracy"]), label="library: Dr.GRPO", bounds=(0, 1))
ax.plot(steps, np.asarray(mine_runs).mean(0), "k:", lw=2, label="from scratch (mean)")
ax.set(xlabel="step", ylabel="mean success probability (exact)",
       title=f"GRPO from scratch = the library's, {SEEDS} seeds, 95% CI")
ax.legend(loc="lower right");

# %% [markdown]
# The same panel as a slide (16:9, large fonts), for a lecture:

# %%
slide = plotting.slide_figure(fig, 0, title="GRPO in 30 lines = the library's GRPO")

# %% [markdown]
# The dotted line lies on the library's GRPO curve. Dr.GRPO is close too: under Adam a
# per-group factor such as GRPO's $1/\operatorname{std}$ is nearly divided out (notebook
# `00_quickstart`, section 4).
#
# ## Exercises
#
# Each exercise has a check cell: put your answer in place of `None` and run it;
# `rlvr_lab.course` says right, or not yet with why and a hint. The solution stays folded
# under it.

# %%
from rlvr_lab import course

# %% [markdown]
# **1.** Write step 3 alone as a function `adv_fn(r)` of the rewards `r [B, G]`.

# %%
# Your answer: a function of r [B, G] returning the advantages [B, G]
course.check_group_advantage(None)

# %% [markdown]
# <details><summary>Solution</summary>
#
# ```python
# def adv_fn(r):
#     return (r - r.mean(-1, keepdims=True)) / (r.std(-1, ddof=1, keepdims=True) + 1e-6)
# course.check_group_advantage(adv_fn)
# ```
# `ddof=1`: the sample std, as verl and TRL; with `ddof=0` a group with one success out of 8
# gets a different scale.
# </details>
#
# **2.** Write step 4 alone as `loss_fn(logp, old_logp, adv)` for arrays of shape `[B, G]`.

# %%
# Your answer: a function (logp, old_logp, adv) -> the scalar clipped loss
course.check_clipped_loss(None)

# %% [markdown]
# <details><summary>Solution</summary>
#
# ```python
# def loss_fn(logp, old_logp, adv):
#     ratio = jnp.exp(logp - old_logp)
#     return -jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - 0.2, 1 + 0.2) * adv).mean()
# course.check_clipped_loss(loss_fn)
# ```
# </details>
#
# **3.** Change step 3 of `grpo_from_scratch` to RLOO (leave-one-out baseline, no std). By what
# factor do its advantages differ from Dr.GRPO's for G = 8?

# %%
# Your answer: the factor RLOO / Dr.GRPO at G = 8
course.check_rloo_factor(None, group_size=8)

# %% [markdown]
# <details><summary>Solution</summary>
#
# $r_i - \frac{1}{G-1}\sum_{j \ne i} r_j = \frac{G}{G-1}(r_i - \bar r)$, so the factor is
# $G/(G-1) = 8/7$. In code: `adv = (r - r.mean(-1, keepdims=True)) * G / (G - 1)`; check it
# against `cfg.replace(advantage="rloo")` as in section 3.
# </details>
