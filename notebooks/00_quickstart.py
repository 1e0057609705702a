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
# **Runtime:** 56 s in quick mode on 2 CPU cores (measured by `notebooks/execute.py`, 2026-12-07); full settings (`RLVR_LAB_QUICK=0`) take longer
#
# Quick settings are the default; set `RLVR_LAB_QUICK=0` before starting Jupyter for the full settings
# (slower; the committed figures of `rlvr-lab reproduce` use them).
#
# An RLVR step is a pipeline of small pure functions — **pick prompts → allocate rollouts →
# sample → reward → advantage → loss → update** — and each paper this toolkit reproduces changes
# one or two of those stages. This notebook walks the pipeline once by hand on the *prompt bank*
# (the exact tabular setting), then trains with the jitted trainer and runs one experiment with
# its claims.
#
# For a prompt with $G$ rollouts and rewards $r_1, \dots, r_G$, GRPO (arXiv:2402.03300) gives
# rollout $i$ the advantage
#
# $$A_i = \frac{r_i - \bar r}{\operatorname{std}(r) + \epsilon}, \qquad
# \bar r = \frac1G \sum_j r_j,$$
#
# and maximises the PPO-clipped surrogate
# $\min\big(\rho_t A_i,\ \operatorname{clip}(\rho_t, 1-\varepsilon, 1+\varepsilon) A_i\big)$ with
# $\rho_t = \pi_\theta(y_t \mid \cdot)/\pi_{old}(y_t \mid \cdot)$ for every token $t$ of the rollout.
#
# **Quick mode.** The first code cell sets `QUICK`: unset (or `RLVR_LAB_QUICK=1`, as for the
# committed outputs and the test suite) runs the small settings; `RLVR_LAB_QUICK=0` runs the
# full settings (several times longer). Nothing here writes into the repository: files go to
# `rlvr_lab.io.output_dir()` (`$RLVR_LAB_OUTPUT`, default `~/.rlvr_lab/output`).

# %%
# Install cell: only needed outside a checkout where rlvr_lab is not installed yet.
import importlib.util, subprocess, sys
if importlib.util.find_spec("rlvr_lab") is None:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", ".."], check=True)

# %%
from rlvr_lab.io import output_dir, quick_mode
QUICK = quick_mode(default=True)
OUT = output_dir() / "00_quickstart"

import jax, jax.numpy as jnp, numpy as np
from rlvr_lab import advantages, losses, metrics, plotting
from rlvr_lab.envs import prompt_bank
from rlvr_lab.envs.prompt_bank import PromptBankConfig
from rlvr_lab.train import rollout
from rlvr_lab.train.bandit import BanditConfig, train_seeds, metrics_frame
print("quick mode" if QUICK else "full mode", "| output:", OUT, "| devices:", jax.devices())

# %% [markdown]
# ## 1. The environment: a prompt bank
# $K$ prompts, each a softmax policy $\pi_k = \operatorname{softmax}(z_k)$ over $V$ answers with a
# set $C_k$ of correct answers; its success probability is $p_k = \sum_{a \in C_k} \pi_k(a)$.
# The initial $p_k$ are drawn from a Beta law, so the bank mixes easy and hard prompts.

# %%
bank_cfg = PromptBankConfig(num_prompts=64, vocab_size=16, difficulty_a=1.0, difficulty_b=3.0)
bank = prompt_bank.make_bank(bank_cfg)
p0 = prompt_bank.success_probability(bank.logits0, bank.correct)
print("mean initial success probability:", float(p0.mean()))
fig, ax = plotting.subplots(figsize=(5, 3))
ax.hist(np.asarray(p0), bins=20)
ax.set(xlabel="initial success probability $p_k$", ylabel="prompts",
       title=f"{bank_cfg.num_prompts} prompts, p ~ Beta(1, 3)");

# %% [markdown]
# ## 2. One step by hand: sample → reward → advantage
# Dr.GRPO (arXiv:2503.20783) drops the std: $A_i = r_i - \bar r$; RLOO uses the mean of the
# *other* rollouts, $A_i = r_i - \frac{1}{G-1}\sum_{j \ne i} r_j = \frac{G}{G-1}(r_i - \bar r)$.
# A group whose rewards are all equal gets $A = 0$ under all three: it teaches nothing.

# %%
key = jax.random.key(0)
batch = rollout.generate(key, bank.logits0, bank, prompts=jnp.arange(8), num_samples=8)
print("rewards of 8 prompts x 8 rollouts:\n", np.asarray(batch.rewards))
for name in ["grpo", "dr_grpo", "rloo"]:
    adv = advantages.get(name)(batch.rewards, batch.mask)
    print(f"{name:8s} first group:", np.round(np.asarray(adv[0]), 3))
all_equal = np.asarray((batch.rewards == batch.rewards[:, :1]).all(-1))
print("groups with all-equal rewards (zero advantage):", int(all_equal.sum()), "of 8")

# %% [markdown]
# ## 3. Loss aggregation: where the four modes differ
# In the bank every answer is a single token, so the four `loss_agg_mode`s of verl/TRL agree.
# They differ on responses of different lengths $L_i$. With per-token losses $\ell_{i,t}$ and
# $B$ responses padded to length $T$:
#
# | mode | loss | weight of response $i$ |
# |---|---|---|
# | `token-mean` (DAPO) | $\sum_{i,t} \ell_{i,t} / \sum_i L_i$ | $\propto L_i$ |
# | `seq-mean-token-mean` (original GRPO) | $\frac1B \sum_i \frac{1}{L_i}\sum_t \ell_{i,t}$ | $1/B$ |
# | `seq-mean-token-sum` | $\frac1B \sum_i \sum_t \ell_{i,t}$ | $L_i / B$ |
# | `seq-mean-token-sum-norm` (Dr.GRPO) | $\sum_{i,t} \ell_{i,t} / (B T)$ | $L_i / (BT)$ |
#
# Four responses to one prompt, two correct (short and long) and two wrong (short and long);
# at the first PPO epoch $\rho = 1$, so each token's loss is $-A_i$. The weights below are the
# gradients of `losses.aggregate` with respect to each token's loss, summed per response.

# %%
lengths = np.array([3, 12, 4, 16])
rewards = jnp.array([[1.0, 1.0, 0.0, 0.0]])
adv = advantages.grpo(rewards)[0]
T = int(lengths.max())
mask = jnp.arange(T)[None, :] < jnp.asarray(lengths)[:, None]
token_loss = losses.ppo_clip(jnp.zeros((4, T)), jnp.zeros((4, T)),
                             jnp.broadcast_to(adv[:, None], (4, T)), epsilon=0.2)
weights, values = {}, {}
for mode in losses.AGG_MODES:
    agg = lambda tl, mode=mode: losses.aggregate(tl, mask, mode)
    values[mode] = float(agg(token_loss))
    weights[mode] = np.asarray(jax.grad(agg)(token_loss).sum(-1))
    print(f"{mode:25s} loss {values[mode]:+.4f}   response weights {np.round(weights[mode], 3)}")

fig, ax = plotting.subplots(figsize=(7, 3.2))
width = 0.2
labels = [f"{'correct' if r else 'wrong'}, L={n}" for r, n in zip(np.asarray(rewards[0]), lengths)]
for j, mode in enumerate(losses.AGG_MODES):
    ax.bar(np.arange(4) + (j - 1.5) * width, weights[mode], width, label=mode)
ax.set_xticks(np.arange(4), labels)
ax.set(ylabel="weight of the response\nin the loss gradient",
       title="same rollouts, four aggregation modes")
ax.legend(ncols=2, loc="upper left");

# %% [markdown]
# `seq-mean-token-mean` gives each response the same total weight, so each token of a long
# response counts less: a long *wrong* answer is penalised less per token than a short one,
# the length bias Dr.GRPO points out. `token-mean` and the two token-sum modes weigh a response
# by its length; `seq-mean-token-sum-norm` divides by a constant ($BT$) instead of the batch's
# token count, so a step's size does not depend on how long this batch's answers happened to be.
#
# The bank gives the **exact** policy gradient, so an estimator can be checked against it:
# the RLOO baseline is unbiased, the group mean (Dr.GRPO) shrinks the gradient by (G−1)/G.

# %%
exact = prompt_bank.exact_policy_gradient(bank.logits0, bank.reward_table)
print("exact gradient norm:", float(jnp.linalg.norm(exact)))
print("pass@k of the initial policy (population):",
      {k: round(float(metrics.pass_at_k_exact(p0, k).mean()), 3) for k in (1, 8, 64)})
print("unbiased estimator from 16 samples with 4 correct, k=4:", float(metrics.pass_at_k(16, 4, 4)))

# %% [markdown]
# ## 4. The jitted trainer
# `make_train(config) -> train(key)` runs the whole loop in `lax.scan`; `train_seeds` is
# `jit(vmap(train))` over seeds (sharded over devices when there are several). Change one
# number — the group size, ε, the estimator, the optimiser — and rerun. Below, GRPO and
# Dr.GRPO with Adam (left) and with plain SGD (right); the bands are 95% intervals over seeds.

# %%
cfg = BanditConfig(bank=bank_cfg, steps=30 if QUICK else 150, num_prompts=32,
                   num_generations=8, num_iterations=2, num_minibatches=4, learning_rate=0.05)
sgd = cfg.replace(optimizer="sgd", learning_rate=4.0)
runs = {("Adam", "GRPO"): cfg, ("Adam", "Dr.GRPO"): cfg.replace(advantage="dr_grpo"),
        ("Adam", "GRPO G=2"): cfg.replace(num_generations=2),
        ("SGD", "GRPO"): sgd, ("SGD", "Dr.GRPO"): sgd.replace(advantage="dr_grpo")}
acc, mets = {}, {}
for (opt, name), c in runs.items():
    _, mets[opt, name] = train_seeds(c, jax.random.key(1), 4 if QUICK else 16)
    acc[opt, name] = np.asarray(mets[opt, name]["accuracy"])

fig, axes = plotting.subplots(1, 2, figsize=(9, 3.4), sharey=True)
for ax, opt in zip(axes, ("Adam", "SGD")):
    for (o, name), a in acc.items():
        if o == opt:
            plotting.band(ax, np.arange(cfg.num_steps), a, label=name, bounds=(0, 1))
    ax.set(xlabel="step", title=f"{opt} (lr {runs[opt, 'GRPO'].learning_rate})")
    ax.legend()
axes[0].set_ylabel("mean success probability")
for opt in ("Adam", "SGD"):
    gap = np.abs(acc[opt, "GRPO"] - acc[opt, "Dr.GRPO"]).max()
    print(f"{opt}: largest |GRPO - Dr.GRPO| over steps and seeds = {gap:.4f}")

# %% [markdown]
# For a lecture slide: one panel alone, 16:9 with large fonts. `plotting.slide_figure` works
# on any figure of any notebook; `plotting.save_figure(slide, "name", OUT)` keeps it.

# %%
slide = plotting.slide_figure(fig, 0, title="GRPO and Dr.GRPO under Adam")

# %% [markdown]
# **Why GRPO and Dr.GRPO nearly coincide under Adam.** The two differ only by GRPO's factor
# $1/(\operatorname{std}_k + \epsilon)$, one positive constant per group. Adam's step for a
# parameter is $\hat m / (\sqrt{\hat v} + \epsilon)$, which does not change when every gradient of
# that parameter is multiplied by the same constant. In the bank each prompt owns its logits,
# so a group's factor only rescales its own prompt's coordinates and Adam divides it out. It
# does not cancel *exactly* (the printed gap is not 0): a prompt's std changes from step to
# step as its success probability moves, and Adam's moving averages mix gradients from steps
# with different factors. Under SGD nothing divides the factor out and GRPO takes larger steps
# on prompts whose rewards barely vary (success probability near 0 or 1), so the curves part.
# In a network, parameters are shared by all prompts: one coordinate's gradient sums groups
# with *different* factors, Adam cannot remove them, and GRPO and Dr.GRPO differ in general.

# %%
metrics_frame(mets["Adam", "GRPO G=2"], algorithm="GRPO G=2").head()

# %% [markdown]
# ## 5. An experiment and its claims
# Experiments live in `simulations/` (one module per paper). Each declares its claims once, as
# `rlvr_lab.claims.Declared` objects (the paper's statement, the estimand measured per seed, a
# decision rule and its thresholds, fixed before the run); the experiment only measures, and the
# claims engine decides each verdict from the row's own columns: **pass** when the 95% interval
# of the estimate lies wholly on the claimed side of `threshold`, **fail** when it lies wholly
# beyond `fail_threshold`, **inconclusive** otherwise (the reason says about how many more seeds
# would decide it), **not applicable here** for a mechanism this setting cannot express
# (`docs/claims.md`). `run` writes figures and a result file into `out_dir` and returns the
# decided claims; a rerun with the same configuration and code reuses the stored result. From a
# shell: `rlvr-lab run grpo_family --quick`.

# %%
import matplotlib.pyplot as plt
from IPython.display import clear_output
from rlvr_lab import experiments
result = experiments.run("grpo_family", quick=QUICK, out_dir=OUT)
plt.close("all")  # the experiment's figures are shown from their saved PNGs below
clear_output()    # the finished run's progress bars (a saved notebook would show them at 0/4)
print(f"grpo_family: {'reused the stored result' if result.skipped else f'{result.seconds:.0f} s'}")
ROW = ["claim", "verdict", "estimate", "ci_low", "ci_high", "threshold", "n_seeds", "n_bases"]
claims_df = result.claims_frame()
claims_df[ROW]

# %% [markdown]
# `rule` and `direction` say how the interval is read, `unit` what the estimate counts; the
# criterion in words and the engine's reason are in the same row. On the bank the seeds are
# independent draws (one "base"), so the interval is the plain t-interval over seeds; an `exact`
# claim (an identity checked to a float64 tolerance) has no interval: its estimate is the
# largest absolute error.

# %%
for r in claims_df.itertuples():
    print(f"{r.claim} [{r.rule} {r.direction} {r.threshold:g} {r.unit}]: {r.verdict}\n"
          f"    {r.criterion}\n    reason: {r.reason}")

# %%
from IPython.display import Image, display
for name in result.figures:
    display(Image(filename=str(OUT / f"{name}.png"), width=720))

# %% [markdown]
# ## 6. The zoo: every estimator and loss by name, head to head
# Estimators, policy losses, aggregation modes and KL estimators are registry entries: a config
# names them, under our names or verl's (`reinforce_plus_plus`, `vanilla`, `geo_mean`,
# `low_var_kl`, ...; `docs/config.md` has one table of every name with its verl, TRL and tunix
# spellings and how the conventions differ). Below, the batch of section 2 under five
# estimators, then GRPO swapped for REINFORCE++ and for GPG's recipe by name alone.

# %%
import pandas as pd
names = ["grpo", "rloo", "reinforce_plus_plus", "gpg", "grpo_passk"]
print(pd.DataFrame({n: np.asarray(advantages.compute(n, batch.rewards).adv[0]) for n in names},
                   index=[f"r={float(r):g}" for r in batch.rewards[0]]).round(3))
swaps = {"GRPO + vanilla": cfg.replace(policy_loss="vanilla"),
         "REINFORCE++ + vanilla": cfg.replace(advantage="reinforce_plus_plus",
                                              policy_loss="vanilla"),
         "GPG + gpg": cfg.replace(advantage="gpg", policy_loss="gpg")}
fig, ax = plotting.subplots(figsize=(5, 3.4))
for name, c in swaps.items():
    _, m = train_seeds(c, jax.random.key(1), 4 if QUICK else 16)
    plotting.band(ax, np.arange(c.num_steps), np.asarray(m["accuracy"]), label=name)
ax.set(xlabel="step", ylabel="mean success probability", title="one name changed")
ax.legend()

# %% [markdown]
# The `zoo` experiment runs every estimator with verl's PPO loss and every loss with GRPO's
# advantages at G = 2, 4 and 8, each spending 64 rollouts per step, all in one compiled loop,
# and decides the orderings the papers state: RLOO's leave-one-out gradient is unbiased while
# GRPO's std re-weights prompts (exact, on the bank's own prompts), ReMax's greedy baseline
# against plain REINFORCE, GPG against GRPO. The ranking figure gives each arm's final exact
# accuracy with its 95% interval over seeds, one panel per G. In quick mode (the default here)
# only the two arms the claims read are trained, GRPO and GPG; `RLVR_LAB_QUICK=0` ranks all
# 16. The small-model zoo (`zoo_small`) adds each further policy-loss family (clip-higher, dual
# clip, Clip-Cov, KL-Cov, GSPO, CISPO, GMPO, SAPO) on GRPO's advantages, in full runs.

# %%
zoo = experiments.run("zoo", quick=QUICK, out_dir=OUT)
plt.close("all")
zoo.claims_frame()[ROW]

# %%
experiments.show_figures(zoo, OUT)

# %% [markdown]
# ## The paper's numbers beside ours (GRPO, Dr.GRPO, RLOO, DAPO and GSPO: the zoo's comparisons)
#
# Each row is a comparison the paper reports in numbers (left, in its own units) beside our
# estimate of the claim that restates it in the committed full run, `figures/claims.csv`
# (right: the interval, the declared pass and fail thresholds, the verdict as colour; the star
# is the paper's effect on our axis where the units agree). The paper's numbers are drawn,
# not tested: a verdict depends only on the thresholds declared with its claim.

# %%
from rlvr_lab import paper_figures

fig = paper_figures.committed_figure("grpo_family")

# %% [markdown]
# ## Exercises
#
# Each exercise has a check cell: put your answer in place of `None` and run it;
# `rlvr_lab.course` says right, or not yet with why and a hint. The solution stays folded
# under it.

# %%
from rlvr_lab import course

# %% [markdown]
# **1.** With $G$ rollouts and success probability $p$, a group is all-equal (zero advantage)
# with probability $p^G + (1-p)^G$. For the initial bank, how much of the batch is wasted at
# $G = 2$, $8$ and $32$? Check one value by sampling with `rollout.generate`.

# %%
# Your answer: the wasted fraction of the initial bank at G = 8, in place of None
course.check_wasted_fraction(p0, 8, answer=None)

# %% [markdown]
# <details><summary>Solution</summary>
#
# ```python
# p = np.asarray(p0)
# for g in (2, 8, 32):
#     print(g, float(np.mean(p**g + (1 - p)**g)))
# b = rollout.generate(jax.random.key(5), bank.logits0, bank, prompts=jnp.arange(64),
#                      num_samples=8)
# print("sampled, G=8:", float((b.rewards == b.rewards[:, :1]).all(-1).mean()))
# ```
# At $G = 2$ about two thirds of the groups carry no signal for this hard bank; the fraction
# falls with $G$ but stays large for the hardest prompts ($p \ll 1/G$).
# </details>
#
# **2.** In section 3, make the long *wrong* response twice as long (`lengths = [3, 12, 4, 32]`).
# Which modes change the weight of the short wrong response, and why?

# %%
# Your answer: the set of loss_agg_mode names that change the short wrong response's weight
course.check_changed_modes(answer=None)

# %% [markdown]
# <details><summary>Solution</summary>
#
# `token-mean` divides by the total token count, which grows, so *every* response's weight
# changes; `seq-mean-token-sum-norm` divides by $B T$ with the padded length $T$, which also
# grows. `seq-mean-token-mean` and `seq-mean-token-sum` leave the short wrong response
# unchanged: its weight depends only on its own length and on $B$.
# </details>
#
# **3.** Rerun section 4 with `scale_rewards="batch"` (one std for the whole batch instead of
# one per group). Do GRPO and Dr.GRPO still coincide under Adam? Under SGD?

# %%
# Your answer: do GRPO and Dr.GRPO still coincide (True / False) under Adam, under SGD?
course.check_adam_batch_scaling(adam_coincide=None, sgd_coincide=None)

# %% [markdown]
# <details><summary>Solution</summary>
#
# ```python
# c = cfg.replace(scale_rewards="batch")
# a = np.asarray(train_seeds(c, jax.random.key(1), 4)[1]["accuracy"])
# print(np.abs(a - acc["Adam", "Dr.GRPO"]).max())
# ```
# Under Adam: yes, again up to a small gap — the batch std is one constant per step for every
# parameter, the rescaling Adam is invariant to. Under SGD the batch std acts as a
# step-dependent learning rate, so the curves differ, but every prompt is scaled alike.
# </details>
