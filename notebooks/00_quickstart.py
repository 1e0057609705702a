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
# # rlvr_lab quick start
#
# An RLVR step is a pipeline of small pure functions — **pick prompts → allocate rollouts →
# sample → reward → advantage → loss → update** — and each paper this toolkit reproduces changes
# one or two of those stages. This notebook walks the pipeline once by hand on the *prompt bank*
# (the exact tabular setting), then trains with the jitted trainer and runs one experiment with
# its claims.
#
# Set `RLVR_LAB_QUICK=1` for small settings (the test suite does).

# %%
# Install cell: only needed outside a checkout where rlvr_lab is not installed yet.
import importlib.util, subprocess, sys
if importlib.util.find_spec("rlvr_lab") is None:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", ".."], check=True)

# %%
import os
import jax, jax.numpy as jnp, numpy as np
import matplotlib.pyplot as plt
from rlvr_lab import advantages, losses, metrics, plotting
from rlvr_lab.envs import prompt_bank
from rlvr_lab.envs.prompt_bank import PromptBankConfig
from rlvr_lab.models import tabular
from rlvr_lab.train import rollout
from rlvr_lab.train.bandit import BanditConfig, train_seeds, metrics_frame
QUICK = os.environ.get("RLVR_LAB_QUICK") == "1"
print("quick mode" if QUICK else "full mode", "| devices:", jax.devices())

# %% [markdown]
# ## 1. The environment: a prompt bank
# K prompts, each a softmax policy over V answers with a set of correct answers. The initial
# success probabilities are drawn from a Beta law, so the bank mixes easy and hard prompts.

# %%
bank_cfg = PromptBankConfig(num_prompts=64, vocab_size=16, difficulty_a=1.0, difficulty_b=3.0)
bank = prompt_bank.make_bank(bank_cfg)
p0 = prompt_bank.success_probability(bank.logits0, bank.correct)
print("mean initial success probability:", float(p0.mean()))
plt.hist(np.asarray(p0), bins=20); plt.xlabel("initial success probability p"); plt.ylabel("prompts");

# %% [markdown]
# ## 2. One step by hand: sample → reward → advantage → loss

# %%
key = jax.random.key(0)
batch = rollout.generate(key, bank.logits0, bank, prompts=jnp.arange(8), num_samples=8)
print("rewards of 8 prompts x 8 rollouts:\n", np.asarray(batch.rewards))
for name in ["grpo", "dr_grpo", "rloo"]:
    adv = advantages.get(name)(batch.rewards, batch.mask)
    print(f"{name:8s} first group:", np.round(np.asarray(adv[0]), 3))
adv = advantages.grpo(batch.rewards)
token_loss = losses.ppo_clip(batch.behav_log_prob, batch.behav_log_prob, adv, epsilon=0.2)
for mode in losses.AGG_MODES:
    print(f"{mode:25s}", float(losses.aggregate(token_loss, batch.mask, mode)))

# %% [markdown]
# The bank gives the **exact** policy gradient, so an estimator can be checked against it:
# the RLOO baseline is unbiased, the group mean (Dr.GRPO) shrinks the gradient by (G−1)/G.

# %%
exact = prompt_bank.exact_policy_gradient(bank.logits0, bank.reward_table)
print("exact gradient norm:", float(jnp.linalg.norm(exact)))
print("pass@k of the initial policy (population):",
      {k: round(float(metrics.pass_at_k_exact(p0, k).mean()), 3) for k in (1, 8, 64)})
print("unbiased estimator from 16 samples with 4 correct, k=4:", float(metrics.pass_at_k(16, 4, 4)))

# %% [markdown]
# ## 3. The jitted trainer
# `make_train(config) -> train(key)` runs the whole loop in `lax.scan`; `train_seeds` is
# `jit(vmap(train))` over seeds (sharded over devices when there are several). Change one
# number — the group size, ε, the estimator — and rerun.

# %%
cfg = BanditConfig(bank=bank_cfg, num_steps=30 if QUICK else 150, batch_size=32,
                   num_generations=8, num_iterations=2, num_minibatches=4, learning_rate=0.05)
fig, ax = plotting.subplots()
for name, c in {"GRPO": cfg, "Dr.GRPO": cfg.replace(advantage="dr_grpo"),
                "GRPO G=2": cfg.replace(num_generations=2)}.items():
    _, m = train_seeds(c, jax.random.key(1), 4 if QUICK else 16)
    plotting.band(ax, np.arange(c.num_steps), np.asarray(m["accuracy"]), label=name)
ax.set(xlabel="step", ylabel="mean success probability"); ax.legend();
metrics_frame(m, algorithm="GRPO G=2").head()

# %% [markdown]
# ## 4. An experiment and its claims
# Experiments live in `simulations/` (one module per paper). `run` writes figures and a result
# file (quick mode under `figures/quick/`) and returns the computed claims; a rerun with the
# same configuration and code reuses the stored result.

# %%
from rlvr_lab import experiments
result = experiments.run("grpo_family", quick=QUICK)
result.claims_frame()[["claim", "measured", "criterion", "verdict"]]

# %%
from IPython.display import Image, display
out = experiments.default_out_dir(QUICK)
for name in result.figures:
    display(Image(filename=str(out / f"{name}.png")))
