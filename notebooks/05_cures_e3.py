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
# # CurES and E3: which prompts, and how many rollouts each
#
# **Runtime:** 48 s in quick mode on 2 CPU cores (measured by `notebooks/execute.py`, 2026-12-07); full settings (`RLVR_LAB_QUICK=0`) take longer
#
# Quick settings are the default; set `RLVR_LAB_QUICK=0` before starting Jupyter for the full settings
# (slower; the committed figures of `rlvr-lab reproduce` use them).
#
# *Papers:* **CurES** ("From Gradient Analysis to Efficient Curriculum Learning for Reasoning
# LLMs", code `ZexuSun/CurES`) and **E3** (dynamic rollout budgets and entropy-targeting
# temperature, code `LiaoMengqi/E3-RL4LLMs`).
#
# Both answer the same two questions of an RLVR step: *which prompts* go into the batch and
# *how many rollouts* each one gets at a fixed total. We use the prompt bank (each prompt a
# softmax over V answers), where success probabilities and gradients are exact, so the papers'
# gradient arguments can be checked directly. Every figure comes from the functions behind
# `rlvr-lab run cures_theory / cures_study / e3_temperature` (`simulations/cures.py`,
# `simulations/e3.py`); section 6 moves to the tiny transformer (`cures_small`, `e3_small`).
# The outputs below are from quick mode (the default).

# %%
from rlvr_lab.io import quick_mode
QUICK = quick_mode(default=True)

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from rlvr_lab.papers.cures import posterior as cur
from rlvr_lab.papers.cures import allocation as cures_alloc
from rlvr_lab.papers.e3 import allocation as e3
from rlvr_lab.envs import prompt_bank as pb
from rlvr_lab.papers.cures import theory as th
from simulations import cures as S
from simulations import e3 as S3
from rlvr_lab import plotting
from scipy import stats

SEEDS = 2 if QUICK else 16
ROW = ["claim", "verdict", "estimate", "ci_low", "ci_high", "threshold", "n_seeds", "n_bases"]
pd.set_option("display.width", 200)
print("quick" if QUICK else "full", "mode,", SEEDS, "seeds")

# %% [markdown]
# ## 1. The posterior and CurES' sampling distribution
#
# Per prompt, CurES keeps counts (Acc, All) and reads $\hat p = (Acc+1)/(All+2)$, the mean of
# $\mathrm{Beta}(Acc+1, All-Acc+1)$, initialised with 4 rollouts per prompt. Prompts are drawn
# from $q_i \propto \exp(\sqrt{\hat p_i(1-\hat p_i)}/t_i)$.
#
# **Pitfall.** The authors' sampler uses $t_i = 100\,(Acc_i+1)$. Since
# $\sqrt{p(1-p)} \le 0.5$, the exponent is at most 0.005: every probability is within a
# factor $e^{0.005} \approx 1.005$ of every other — uniform sampling. We expose $t$.

# %%
bank = pb.make_bank(S.bank_config("bimodal", 64))
post, spent = cur.init_posterior_from_rollouts(jax.random.key(0), bank.p0)
p_hat = cur.posterior_mean(post)
rows = {"code t=100(Acc+1)": cur.cures_code_prompt_probs(post)}
for t in (1.0, 0.3, 0.1, 0.05):
    rows[f"t={t}"] = cur.cures_prompt_probs(p_hat, t)
pd.DataFrame({k: {"max q / min q": float(cur.max_probability_ratio(q)),
                  "effective #prompts 1/Σq²": float(1 / (q ** 2).sum())}
              for k, q in rows.items()}).T.round(4)

# %% [markdown]
# ## 2. Allocation: Neyman and the variance of the gradient
#
# For one rollout with $a = p$, $b = 1-p$ and score $g = \nabla\log\pi(y)$, the term
# $(r-a)g$ has total variance
# $\sigma^2 = a b^2 E|g_c|^2 + a^2 b E|g_w|^2 - a^2b^2|E g_c - E g_w|^2$. Averaging $n_i$
# rollouts gives $\sum_i\sigma_i^2/n_i$, minimised at a fixed total by $n_i \propto \sigma_i$
# (Neyman). With equal gradient norms $\sigma = \sqrt{p(1-p)}$ (CurES' form).
#
# **Pitfall.** The code form $\mathrm{round}(N\sigma_i/\sum\sigma)$ drops prompts with small
# $\sigma$ (0 rollouts) and may miss the budget. `neyman_allocation` water-fills with a minimum
# per prompt and rounds by largest remainder, keeping the total exactly.

# %%
p = jnp.array([0.0, 0.01, 0.2, 0.5, 0.8, 0.99, 1.0])
sigma = cures_alloc.neyman_sigma(p)
pd.DataFrame({"p": np.asarray(p), "sigma": np.asarray(sigma).round(3),
              "code round()": np.asarray(cures_alloc.neyman_allocation_code(sigma, 56)),
              "ours (min 2, total 56)": np.asarray(cures_alloc.neyman_allocation(sigma, 56))})

# %% [markdown]
# Variance of the stochastic gradient at a fixed budget (8 rollouts per prompt on
# average), analytic (oracle baseline $p$) and Monte Carlo (oracle and leave-one-out
# baselines), for uniform, Neyman with the exact $\sigma$, $\sqrt{p(1-p)}$ (CurES), the same
# from a 4-rollout posterior, DARS (its allocation shape rescaled to the budget) and E3.

# %%
# quick: the bimodal bank only (the experiment and full mode show both banks)
BANK_SET = ("bimodal",) if QUICK else tuple(S.BANKS)
vdf, shapes = S.variance_table(True, jax.random.key(1), banks=BANK_SET)
fig = S.variance_figure(vdf, shapes)
vdf[["bank", "rule", "n_min", "n_max", "analytic_oracle", "mc_oracle", "mc_rloo",
     "ratio_uniform_over_rule", "mc_rloo_ratio"]].round(3)

# %% [markdown]
# **Try it.** Allocation and sampling for a bank of prompts whose success probabilities are
# the quantiles of a Beta(a, b) law (instant; the sliders need a live kernel with ipywidgets,
# the saved notebook shows the defaults). Left: rollouts per prompt at a fixed total — Neyman
# with the equal-norm $\sigma = \sqrt{p(1-p)}$ (ours: water-filling with a minimum, exact total),
# the authors' `round()` form, uniform. Right: CurES' sampling distribution at temperature $t$,
# and the authors' $t = 100(Acc+1)$ with $Acc$ from 4 rollouts at the expected count.

# %%
def cures_allocation_vs_p(rollouts_per_prompt=8, min_per_prompt=2, t=0.1, a=0.5, b=0.5):
    k = 32
    p = stats.beta.ppf((np.arange(k) + 0.5) / k, a, b)
    sigma = cures_alloc.neyman_sigma(jnp.asarray(p))
    budget = rollouts_per_prompt * k
    fig, axes = plotting.subplots(1, 2, figsize=(10, 3.6))
    axes[0].plot(p, np.asarray(cures_alloc.neyman_allocation(
        sigma, budget, min_per_prompt=min(min_per_prompt, rollouts_per_prompt))), "o-", ms=3,
        label="Neyman, ours (min, exact total)")
    axes[0].plot(p, np.asarray(cures_alloc.neyman_allocation_code(sigma, budget)), "s--", ms=3,
                 label="authors' round()")
    axes[0].axhline(rollouts_per_prompt, color="k", lw=0.8, ls=":", label="uniform")
    axes[0].set(xlabel="success probability p", ylabel="rollouts for the prompt",
                title=f"{budget} rollouts over {k} prompts")
    axes[0].legend()
    axes[1].plot(p, np.asarray(cur.cures_prompt_probs(jnp.asarray(p), t)), "o-", ms=3,
                 label=f"q at t = {t:g}")
    acc = 4 * p  # expected correct count of the 4-rollout initialisation
    axes[1].plot(p, np.asarray(cur.cures_prompt_probs(jnp.asarray(p), 100 * (acc + 1))), "s--",
                 ms=3, label="authors' t = 100(Acc+1)")
    axes[1].axhline(1 / k, color="k", lw=0.8, ls=":", label="uniform 1/K")
    axes[1].set(xlabel="success probability p", ylabel="sampling probability q",
                title="which prompts enter the batch")
    axes[1].legend()
    return fig


plotting.interactive(cures_allocation_vs_p, rollouts_per_prompt=(2, 32, 1),
                     min_per_prompt=(0, 8, 1), t=(0.02, 2.0, 0.02), a=(0.1, 5.0, 0.1),
                     b=(0.1, 5.0, 0.1))

# %% [markdown]
# Neyman is the variance optimum (analytic and Monte Carlo agree); CurES' $\sqrt{p(1-p)}$
# is close to it; a noisy 4-rollout $\hat p$ loses most of the gain. DARS and E3 deliberately
# *raise* the variance: they spend rollouts on hard prompts whose gradient is small, to find
# rare correct answers — a different goal.
#
# ## 3. Sampling: which distribution makes gradient descent fastest?
#
# Drawing B prompts from $q$ and moving each along its own gradient improves
# $J = \mathrm{mean}_i\,p_i$ by $(\eta B/K)\sum_i q_i|\nabla p_i|^2$ to first order — linear
# in $q$, so the best single step puts the batch on the largest $|\nabla p_i|^2$ (greedy). For a
# softmax, $|\nabla p|^2 \approx (p(1-p))^2$, much more peaked than the proxy $\sqrt{p(1-p)}$.
# For unbiased importance-weighted SGD the variance-optimal $q$ is
# $\propto\sqrt{|\nabla p_i|^2 + \sigma_i^2/G}$ (the *IS efficiency* compares a $q$ with it).
# The middle panel runs the noise-free (mean-field) dynamics with $q$ recomputed every step.

# %%
curves, stable, per_prompt = S.sampling_analysis(True, banks=BANK_SET)
fig = S.sampling_figure(curves, stable, per_prompt)
stable[["bank", "rule", "steps_to_target", "speedup_vs_uniform", "gain_vs_best",
        "is_efficiency"]].round(3)


# %% [markdown]
# The key figure as a slide: one panel, 16:9, large fonts (`plotting.slide_figure`;
# `plotting.save_figure(slide, "name", out_dir)` keeps it).

# %%
slide = plotting.slide_figure(fig, 0)



# %% [markdown]
# ## 4. Training at equal rollout budget
#
# Plain SGD on the prompt bank (the analysis is about gradient descent), B·G rollouts per step
# for every arm; CurES' 4-rollout initialisation and DAPO's refills are charged. The rollout
# stages `"cures"` and `"e3"` are registered by `rlvr_lab.papers.cures` and `rlvr_lab.papers.e3`. Quick mode
# runs the arms the claims need; the full run (`rlvr-lab run cures_study`) has all of them.

# %%
s = dataclasses.replace(S.QUICK, num_steps=25) if QUICK else S.FULL
study_curves, summary = S.run_study(s, "bimodal", jax.random.key(2), SEEDS, QUICK)
summary[["arm", "rollouts_to_target", "speedup_vs_uniform", "final_accuracy",
         "final_entropy", "all_incorrect_frac"]].round(3)

# %% [markdown]
# The key picture, built here from `study_curves`: accuracy against rollouts spent for each
# arm, with the accuracy target that `rollouts_to_target` counts to (`S.study_figure` adds
# entropy and the groups without signal).

# %%
d = study_curves[study_curves.bank == "bimodal"]
fig, ax = plotting.subplots(figsize=(6.4, 4))
for arm in d.arm.unique():
    a_ = d[d.arm == arm]
    acc = a_.pivot(index="seed", columns="step", values="accuracy").to_numpy()
    x = a_.groupby("step").rollouts.mean().to_numpy() / 1e3
    plotting.band(ax, x, acc, label=arm, color=S.ARM_COLORS.get(arm),
                  ls="--" if "E3" in arm or "DAPO" in arm else "-")
ax.axhline(summary.target.iloc[0], color="grey", lw=0.8, ls=":", label="target accuracy")
ax.set(xlabel="rollouts spent (thousands)", ylabel="mean accuracy over the bank (exact)",
       title=f"equal rollout budget, bimodal bank ({SEEDS} seeds, 95% CI)")
ax.legend(fontsize=8);

# %% [markdown]
# ## 5. E3's allocation and temperature
#
# E3 ranks prompts by mean reward so far and gives harder ones more rollouts within
# $[n_{min}, n_{max}]$, a range that widens once per epoch:

# %%
print([e3.e3_schedule(k) for k in range(4)])
rank = e3.e3_ranks(jnp.array([0.9, 0.6, 0.3, 0.1, 0.0]))
print("ranks", np.asarray(rank), "->", np.asarray(e3.e3_allocation(rank, 40, 4, 12)))

# %% [markdown]
# The temperature rule $T \leftarrow T\,(1 + T\ln(H^*/H_t)/(\ln V + \ln\ln V))$ has
# $H_t = H^*$ as fixed point; the target is the entropy after the first step, cosine-annealed to
# $0.9H^*$ over the last 40% of training. Here each prompt is one token of a V-way softmax,
# sampled at temperature T.

# %%
tdf, tcfg = S3.temperature_runs(QUICK, jax.random.key(3), SEEDS)
fig = S3.temperature_figure(tdf)
tdf[tdf.step == tdf.step.max()].groupby(["rule", "metric"]).value.mean().unstack().round(3)

# %% [markdown]
# With a fixed temperature the entropy collapses as the policy sharpens; E3 raises T and
# keeps the sampling entropy near its target — by construction, it is a feedback controller on
# the entropy. The price: accuracy *at the sampling temperature* is much lower. Comparing arms
# fairly needs one common evaluation temperature, which the small-model runs below use.
#
# ## 6. On the small model
#
# The bank cannot test what the papers report at the end of training (accuracy, pass@k), and
# its prompts do not transfer to each other. `rlvr_lab.papers.cures.small` runs GRPO on the
# tiny transformer (the SFT base of `tiny_grpo`, whose carry-dropping habit GRPO fixes) with
# arms that differ only in the stages: prompt choice (uniform or CurES' posterior softmax),
# rollouts per prompt (G, Neyman, or E3's ranks), temperature (fixed or E3's rule) and E3's
# length penalty. All arms and seeds run in one compiled step (mapped over runs); seeds are paired
# (same base, same key in every arm); every arm spends B·G = 128 rollouts per step; held-out
# evaluation is at T = 1 for all. The seeds are **nested in SFT bases**
# (`rlvr_lab.train.bases`: base `b` is the SFT preset with `seed + b`, with its own data and
# held-out set): one base is one draw of everything SFT decides, so seeds of one base are not
# independent replications, and the claims engine uses the t-interval of the base means.
#
# **E3's length penalty** (README of the authors' code, not in the paper): on the easiest
# prompts, a correct answer of $l$ tokens earns $1 - \mu l/(1+\mu l)$. With GRPO's
# group-normalised advantage, a penalty shared by all correct answers of a group changes
# nothing — only a *spread* of lengths among them is acted on:

# %%
from rlvr_lab import advantages

r = jnp.array([[1.0, 0.0, 1.0, 0.0], [1.0, 0.0, 1.0, 0.0]])
lengths = jnp.array([[7, 7, 7, 7], [5, 7, 9, 7]])
shaped = e3.apply_length_penalty(r, lengths, jnp.array([0.0, 0.0]), 0.05, 0.1)
pd.DataFrame({"rewards (same length)": list(np.asarray(shaped[0]).round(3)),
              "advantage": list(np.asarray(advantages.grpo(shaped)[0]).round(3)),
              "rewards (5/9 tokens)": list(np.asarray(shaped[1]).round(3)),
              "advantage ": list(np.asarray(advantages.grpo(shaped)[1]).round(3))})

# %% [markdown]
# **Raising E3's cap** $n_{max}$ from 12 to 16 can only matter where the rank-proportional
# rule would give a prompt more than 12 rollouts. The exact expected fraction of all-incorrect
# groups at a fixed policy (here the bimodal bank's initial one) over batch sizes: the cap
# binds more in small batches, where one hard prompt takes a large share.

# %%
nmax = S3.nmax_sweep(np.asarray(pb.make_bank(S.bank_config("bimodal", 64)).p0),
                     jax.random.key(4), 200)
fig, ax = plotting.subplots(figsize=(6.4, 3.8))
for col, label in (("uniform", "uniform 8"), ("nmax12", "E3 [4, 12]"), ("nmax16", "E3 [4, 16]")):
    ax.plot(nmax.batch_size, 100 * nmax[col], "o-", label=label)
ax.set_xscale("log", base=2)
ax.set(xlabel="batch size B (prompts)", ylabel="expected all-incorrect groups (%)",
       title="raising E3's cap, bimodal bank at its initial policy")
ax.legend()
nmax.round(4)

# %% [markdown]
# The training runs (`rlvr-lab run cures_small` / `e3_small`: 3 SFT bases x 1 seed in quick
# mode, more bases added while a claim is undecided in full mode). This notebook runs them in
# full mode only (`RLVR_LAB_QUICK=0`, figures saved under the output folder); in quick mode it
# shows the engine's rows stored by an earlier `rlvr-lab run ... --quick` when there are any,
# and the committed figure of the full run. `cures_small_grpo_beats_base` /
# `e3_small_grpo_beats_base` (uniform GRPO's held-out gain over its SFT base) are the positive
# controls: if one does not pass, the other pass/fail verdicts of its study become
# inconclusive.

# %%
import matplotlib.pyplot as plt
from rlvr_lab import experiments
from rlvr_lab.io import output_dir

for name in ("cures_small", "e3_small"):
    if QUICK:
        try:
            print(experiments.load(name, quick=True)[ROW])
        except FileNotFoundError:
            print(f"{name}: no stored quick result; `rlvr-lab run {name} --quick` makes one")
        experiments.show_committed_figure(name)
    else:
        out = output_dir() / "05_cures_e3"
        res = experiments.run(name, out_dir=out)
        plt.close("all")  # its figures are shown from their saved PNGs
        print(res.claims_frame()[ROW].to_string())
        experiments.show_figures(res, out)
plt.close("all")

# %% [markdown]
# ## 7. Claims
#
# `rlvr-lab run cures_theory`, `cures_study`, `cures_small`, `e3_temperature` and `e3_small`
# declare their claims once (`S.THEORY_CLAIMS`, `S.STUDY_CLAIMS`, `S.SMALL_CLAIMS`,
# `S3.TEMPERATURE_CLAIMS`, `S3.SMALL_CLAIMS`: `rlvr_lab.claims.Declared`, with the estimand
# measured per seed, a rule and thresholds fixed before the run), measure, and let the claims
# engine decide: **pass** when the 95% interval lies wholly on the claimed side of
# `threshold`, **fail** when wholly beyond `fail_threshold`, otherwise **inconclusive** (the
# reason says about how many more seeds would decide it; `docs/claims.md`). Several estimands
# take the smaller of the two banks' values per seed, so a pass needs both banks. The bank
# experiments are cheap: they run here (quick settings in quick mode, which can decide
# differently from the full run in `figures/claims.csv`) and the engine's rows are shown.

# %%
bank_results = {name: experiments.run(name, quick=QUICK,
                                      out_dir=output_dir() / "05_cures_e3")
                for name in ("cures_theory", "cures_study", "e3_temperature")}
plt.close("all")  # the experiments' figures are the ones drawn above
bank_claims = pd.concat([r.claims_frame() for r in bank_results.values()], ignore_index=True)
print("\n".join(f"{r.claim}: {r.verdict}: {r.reason}" for r in bank_claims.itertuples()))
bank_claims[["experiment"] + ROW]

# %% [markdown]
# ## The paper's numbers beside ours
#
# Each row is a comparison the paper reports in numbers (left, in its own units) beside our
# estimate of the claim that restates it in the committed full run, `figures/claims.csv`
# (right: the interval, the declared pass and fail thresholds, the verdict as colour; the star
# is the paper's effect on our axis where the units agree). The paper's numbers are drawn,
# not tested: a verdict depends only on the thresholds declared with its claim.

# %%
from rlvr_lab import paper_figures

fig = paper_figures.committed_figure("cures")

# %% [markdown]
#
# ## Exercises
#
# Each exercise has a check cell: put your answer in place of `None` and run it;
# `rlvr_lab.course` says right, or not yet with why and a hint. The solution stays folded
# under it.

# %%
from rlvr_lab import course

# %% [markdown]
# **1.** Show that CurES' sampler with the authors' $t_i = 100(Acc_i + 1)$ is uniform to within
# 0.5%, whatever the posterior: compute the largest ratio $q_{max}/q_{min}$ it can produce.

# %%
# Your answer: the largest ratio q_max / q_min the authors' temperature allows
course.check_cures_uniform_ratio(answer=None)

# %% [markdown]
# <details><summary>Solution</summary>
#
# The exponent $\sqrt{\hat p(1-\hat p)}/t$ lies in $[0, 0.5/100] = [0, 0.005]$ (since $t \ge 100$),
# so $q_{max}/q_{min} \le e^{0.005} \approx 1.005$; `cur.max_probability_ratio(q)` on the table
# of section 1 confirms it.
# </details>
#
# **2.** With Neyman allocation $n_i \propto \sigma_i$ at a total of $n$ rollouts, show that the
# variance $\sum_i \sigma_i^2/n_i$ equals $(\sum_i\sigma_i)^2/n$, and compare it with uniform
# allocation for $p = (0.01, 0.5)$.

# %%
# Your answer: uniform variance / Neyman variance for p = (0.01, 0.5)
course.check_neyman_factor(answer=None)

# %% [markdown]
# <details><summary>Solution</summary>
#
# With $n_i = n\sigma_i/\sum_j\sigma_j$: $\sum_i \sigma_i^2/n_i = \sum_i \sigma_i\sum_j\sigma_j/n
# = (\sum\sigma)^2/n$. Uniform gives $K\sum\sigma_i^2/n$. For $\sigma = (0.0995, 0.5)$:
# Neyman 0.3594/n, uniform 0.5198/n, a factor 1.45 (Cauchy–Schwarz: Neyman is never worse).
# </details>
#
# **3.** E3's temperature rule has $H_t = H^*$ as a fixed point. Which direction does $T$ move
# when the entropy has collapsed below the target, and by how much per step when
# $H_t = H^*/2$, $T = 1$, $V = 16$?

# %%
# Your answer: T after one step from T = 1 when H_t = H*/2, V = 16
course.check_e3_temperature(answer=None)

# %% [markdown]
# <details><summary>Solution</summary>
#
# $\ln(H^*/H_t) = \ln 2 > 0$, so $T$ rises: $T \leftarrow 1 + \ln 2/(\ln 16 + \ln\ln 16)
# = 1 + 0.693/(2.773 + 1.020) \approx 1.18$.
# </details>
