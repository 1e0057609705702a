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
# # DARS and DARS-B: depth, breadth and pass@k on the prompt bank
#
# **Runtime:** 48 s in quick mode on 2 CPU cores (measured by `notebooks/execute.py`, 2026-12-07); full settings (`RLVR_LAB_QUICK=0`) take longer
#
# Quick settings are the default; set `RLVR_LAB_QUICK=0` before starting Jupyter for the full settings
# (slower; the committed figures of `rlvr-lab reproduce` use them).
#
# *Paper:* "Depth-Breadth Synergy in RLVR" (DARS / DARS-B; code `yangzhch6/DARS`). Two claims
# about GRPO-style training:
#
# * **Depth.** The cumulative advantage $\sum_i |A_i|$ of a group of $N$ binary rollouts at
#   accuracy $a$ is $2N a(1-a)$ (no std scaling) or $2N\sqrt{a(1-a)}$ (std scaling): it peaks
#   at $a = 0.5$ and vanishes for hard prompts. **DARS** re-weights them by giving prompts with
#   stage-1 accuracy $< 0.5$ extra rollouts (equal-treatment *ET* or hardness-weighted *HW*).
# * **Breadth.** A much larger batch with full-batch updates (several epochs) instead of PPO
#   mini-batches raises pass@1 and keeps entropy higher. **DARS-B** combines both.
#
# Every figure below comes from the same functions as `rlvr-lab run dars_theory` /
# `dars_study` / `dars_small` (`simulations/dars.py`; arXiv:2508.13755). The outputs below are from quick mode
# (the default).

# %%
from rlvr_lab.io import quick_mode
QUICK = quick_mode(default=True)

import jax
import numpy as np
import pandas as pd

from rlvr_lab import allocation, theory
from rlvr_lab.envs import prompt_bank
from rlvr_lab.papers.dars import stage as dars_stage
from rlvr_lab import plotting
from simulations import dars as D

SEEDS = 4 if QUICK else 16
pd.set_option("display.width", 200)
print("quick" if QUICK else "full", "mode,", SEEDS, "seeds")

# %% [markdown]
# ## 1. The cumulative advantage and its expectation
#
# `theory.cumulative_advantage(a, N)` is the plug-in value for a group *whose empirical accuracy
# is* $a$. A prompt of *true* accuracy $p$ gets a random group accuracy
# $\hat a \sim \mathrm{Binomial}(N, p)/N$, and on average
#
# $$E[2N\hat a(1-\hat a)] = 2(N-1)\,p(1-p),$$
#
# a factor $(N-1)/N$ below the plug-in; with std scaling there is no closed form (exact
# binomial sum) and the gap is largest for hard prompts, where most groups are all-wrong.
# `expected_cumulative_advantage_dars` adds DARS's second stage to the same exact sum.

# %%
p = np.array([0.01, 0.05, 0.1, 0.3, 0.5])
pd.DataFrame({
    "p": p,
    "plug-in 2Np(1-p)": np.asarray(theory.cumulative_advantage(p, 8)),
    "expected 2(N-1)p(1-p)": np.asarray(theory.expected_cumulative_advantage(p, 8)),
    "plug-in (std)": np.asarray(theory.cumulative_advantage(p, 8, scale="std")),
    "expected (std)": np.asarray(theory.expected_cumulative_advantage(p, 8, scale="std")),
}).round(4)

# %% [markdown]
# ## 2. The ET / HW schedules
#
# $S(a) = 2a(1-a)$, $A_{peak} = N S(0.5)$; $a = 0 \to 0.5/N$; no extra rollouts for
# $a \ge 0.5$. ET: $\Delta N = \lceil (A_{peak} - N S(a))/S(a) \rceil$; HW:
# $\lceil (2(1-a)A_{peak} - N S(a))/S(a) \rceil$; capped at $N_{max} - N$ (ET 32, HW 64).
# The paper's worked values (N=8, no std, 0–4 correct: ET/HW 24/56, 11/24, 3/8, 1/3, 0/0) come
# out exactly (the allocator works in exact integer arithmetic for these rationals).

# %%
table = D.schedule_table()
table

# %%
curves = D.theory_curves()
fig = D.theory_figure(curves, table)

# %% [markdown]
# Left/middle: DARS lifts the expected $\sum|A|$ of hard prompts (small $p$) above the
# GRPO N=8 curve, HW most. GRPO with N=32 lifts everything, at 4x the cost on every prompt.
#
# **Try it.** The schedules and the exact expectations are instant: move the stage-1 group size
# $N$ and the caps. (Sliders need a live kernel with ipywidgets; the saved notebook shows the
# paper's setting.)

# %%
def dars_schedule(N=8, n_max_et=32, n_max_hw=64, scale="none"):
    acc = np.arange(N + 1) / N
    p = np.linspace(0.0, 1.0, 101)
    fig, axes = plotting.subplots(1, 2, figsize=(10, 3.5))
    for (sched, n_max), off, color in ((("et", n_max_et), -0.2, "#3a8a3f"),
                                       (("hw", n_max_hw), 0.2, "#d1495b")):
        extra = np.asarray(allocation.dars_extra_rollouts(acc, N, max(n_max, N), schedule=sched,
                                                          scale=scale))
        axes[0].bar(np.arange(N + 1) + off, extra, 0.4, color=color,
                    label=f"{sched.upper()} (cap {max(n_max, N)})")
        with jax.enable_x64():
            val, _ = D.expected_cumulative_advantage_dars(p, N, max(n_max, N), schedule=sched,
                                                          scale=scale)
        axes[1].plot(p, np.asarray(val), color=color, label=f"DARS-{sched.upper()}")
    with jax.enable_x64():
        axes[1].plot(p, np.asarray(theory.expected_cumulative_advantage(p, N, scale=scale)),
                     "k--", label=f"GRPO N={N}")
    axes[0].set(xlabel=f"stage-1 correct out of N={N}", ylabel="extra rollouts ΔN",
                title=f"schedules, scale={scale!r}")
    axes[1].set(xlabel="true success probability p", ylabel="expected Σ|A| per prompt",
                title="expected cumulative advantage")
    axes[0].legend(); axes[1].legend()
    return fig


plotting.interactive(dars_schedule, N=(2, 32, 2), n_max_et=(8, 128, 8), n_max_hw=(8, 256, 8),
                     scale=["none", "std"])
#
# ## 3. Multi-stage rollouts under `jit`
#
# Stage 1 draws N rollouts per prompt; stage 2 draws `n_max - N` for every prompt (fixed shape)
# and masks all but the first `extra`; groups with merged accuracy 0 or 1 are dropped. `spent`
# counts only the rollouts DARS really needs.

# %%
bank = prompt_bank.make_bank(D.QUICK.bank())
prompts = jax.numpy.arange(12)
out, info = jax.jit(lambda k: dars_stage.bank_dars_rollout(
    k, bank.logits0, bank, prompts, 8, 64, schedule="hw"))(jax.random.key(0))
print("spent", int(out.spent), "= 12*8 +", int(info.extra.sum()))
pd.DataFrame({"p0": np.asarray(bank.p0[:12]).round(3),
              "stage-1 acc": np.asarray(info.stage1_acc),
              "extra": np.asarray(info.extra),
              "merged acc": np.asarray(info.merged_acc).round(3),
              "kept": np.asarray(info.kept)})

# %% [markdown]
# ## 4. Training study
#
# A bank with many hard prompts (initial success $\sim$ Beta(0.3, 2)); advantages $r -$ mean
# (no std) for every method; PPO-clip, Adam. Depth runs: 32 prompts per step, 4 mini-batch
# updates; breadth (**+B**): 4x the prompts, one full-batch update, 2 epochs. In quick mode
# only GRPO N=8, GRPO N=32, DARS-HW and DARS-HW +B run (each method is one trainer compile).

# %%
settings = D.QUICK if QUICK else D.FULL
methods = D.QUICK_METHODS if QUICK else D.METHODS
result = D.run_study(jax.random.fold_in(jax.random.key(0), 5), settings, SEEDS, methods)
fig = D.training_figure(result)


# %% [markdown]
# The key figure as a slide: one panel, 16:9, large fonts (`plotting.slide_figure`;
# `plotting.save_figure(slide, "name", out_dir)` keeps it).

# %%
slide = plotting.slide_figure(fig, 0)



# %% [markdown]
# Top: against steps. Bottom: against rollouts spent (log scale); the vertical line is the
# total budget of GRPO N=8. The pass@k plot puts the exact population pass@k (lines) next to
# the unbiased estimator $1 - \binom{n-c}{k}/\binom{n}{k}$ from $n = 128$ samples per prompt
# (dots), at equal steps and at GRPO N=8's budget.

# %% [markdown]
# The key picture, built here from the returned curves: pass@1 against rollouts spent, with
# GRPO N=8's total budget as a vertical line (equal-budget comparisons read off that line).

# %%
curves = result["curves"]
budget = float(D.per_seed(result["final"], "GRPO N=8", "cum_rollouts").mean())
fig, ax = plotting.subplots(figsize=(6.4, 4))
for method in curves.method.unique():
    color, ls = D._style(method)
    x = D.curve_matrix(curves, method, "cum_rollouts").mean(0)
    plotting.band(ax, x, D.curve_matrix(curves, method, "pass@1"), label=method, color=color,
                  ls=ls)
ax.axvline(budget, color="k", lw=0.8, alpha=0.6, label="GRPO N=8 budget")
ax.set(xscale="log", xlabel="rollouts spent", ylabel="pass@1 (exact)",
       title=f"DARS vs GRPO on the prompt bank ({SEEDS} seeds, 95% CI)")
ax.legend(ncols=2);

# %%
fig = D.passk_figure(result, settings)

# %%
fig = D.rollouts_figure(result)

# %%
cols = ["method", "rollouts_total", "pass@1 (steps)", "pass@128 (steps)",
        "entropy (steps)", "pass@1 (budget)", "pass@128 (budget)", "entropy (budget)"]
D.summary_table(result, settings)[cols].round(4)

# %% [markdown]
# ## 5. The paper's claims, checked
#
# `dars_study` declares its claims once (`D.STUDY_CLAIMS`: the estimand measured per seed, a
# rule, thresholds fixed before the run) and only measures: `D.study_numbers(result, settings)`
# gives each claim's per-seed numbers (mostly paired differences of two methods trained from
# the same seed key), and the claims engine decides from the 95% interval over seeds: **pass**
# when it lies wholly on the claimed side of `threshold`, **fail** when wholly beyond
# `fail_threshold`, otherwise **inconclusive** (`docs/claims.md`). Bank seeds are independent
# draws (one "base"). `D.study_claims` is that engine call; below, its rows, then the paper's
# numbers (Qwen2.5-Math-1.5B, Avg@128 / Pass@128) next to the engine's reason.

# %%
study_rows = pd.DataFrame([c.row() for c in D.study_claims(result, settings)])
study_rows[["claim", "verdict", "estimate", "ci_low", "ci_high", "threshold", "n_seeds",
            "n_bases"]]

# %%
for r in study_rows.itertuples():
    print(f"{r.claim} [{r.rule} {r.direction} {r.threshold:g}] paper: {r.paper_value}\n"
          f"    {r.verdict}: {r.reason}")

# %% [markdown]
# **Reading** (full mode, 16 seeds; the quick run is too short to show all of it).
# In the tabular bank prompts share no parameters, so anything that puts more successful
# samples on hard prompts — DARS, N=32, a larger batch — raises pass@k *at equal steps*, and
# no other prompt pays for it. The paper's "naive N=32 does not raise pass@K" rests on an
# LLM's shared parameters (sharpening on easy prompts costs diversity on hard ones) and is not
# expected to appear here; check the `naive_n32_early_not_final` row. The equal-budget rows
# say whether DARS's extra rollouts are also worth it per rollout, against GRPO N=8 taking
# more steps. Breadth trains on several times the data per step, so per step its entropy
# falls faster; `breadth_keeps_entropy_higher_equal_pass1` compares entropy at the same
# pass@1 instead, which is what "keeps exploring" should mean. The "for every method" claims
# (`breadth_*`, `dars_b_both`) take the per-seed minimum of their parts, so a pass means every
# part passes. With the quick run's 4 seeds and few steps many intervals straddle their
# threshold: inconclusive, and the reason says about how many seeds would decide it.

# %% [markdown]
# ## 6. The tiny transformer: where prompts share parameters
#
# The bank cannot show the paper's two mechanisms that need shared parameters (N=32 sharpening
# easy prompts at the expense of hard ones; breadth reducing gradient noise). `dars_small`
# repeats the comparison on the tiny transformer of `01_small_model` (SFT base with
# carry-dropping demonstrations, binary verifier, advantage $r -$ mean). The **headline is equal
# budget**: DARS-ET runs $S$ steps, then GRPO N=8 runs as many steps as make its rollouts equal
# to DARS's measured total, and the two are compared there (equal steps too). Held-out pass@k
# comes from the unbiased estimator on held-out sums; the share of held-out problems the base
# never solves in $k_{max}$ samples is printed — DARS can only rescue prompts that have some
# success probability.
#
# The run below is a picture from one SFT base (`D.run_small`: base 0, 2 seeds in quick mode,
# DARS-ET, GRPO N=32 and GRPO N=8; full mode adds DARS-HW and breadth). The experiment itself
# nests seeds in several SFT bases (next section).

# %%
small_runs, small_cfgs, info = D.run_small(jax.random.key(9), QUICK, 2 if QUICK else 8)
frame = D.small_frame(small_runs, small_cfgs)
print(f"DARS-ET budget {info['budget']:.0f} rollouts -> GRPO N=8 runs {info['grpo_steps']} "
      f"steps (the others {D.small_base(QUICK).steps})")
g8 = small_runs["GRPO N=8"]
print("held-out share the base never solves (pass@k_max = 0):",
      round(1 - float(D.eval_at(g8, 0)[:, -1].mean()), 3))
fig = D.small_figure(frame, small_runs, small_cfgs, window=2)
frame[frame.k.isin([1, frame.k.max()])].groupby(["method", "k", "step"]).agg(
    rollouts=("rollouts", "mean"), pass_at_k=("pass_at_k", "mean")).unstack("k").round(3)

# %% [markdown]
# The claims of `rlvr-lab run dars_small` (`D.SMALL_CLAIMS`, below) are decided by the claims
# engine from runs whose **seeds are nested in SFT bases**: one base is one draw of everything
# SFT decides, so seeds of one base are not independent replications. Every arm runs from
# several bases (`rlvr_lab.train.bases`: base `b` is the preset with `seed + b`, with its own
# data and held-out set), paired within a seed (same base, same RL key); the interval is the
# t-interval of the base means with `n_bases - 1` degrees of freedom, and bases are added while
# a claim is undecided (quick: 3 bases x 1 seed; full: `D.SMALL_PLAN`, 3 bases x 2 seeds, up to
# 4 bases, two looks at alpha / 2 each). `small_grpo_raises_pass1` is the positive control: if
# it does not pass, the other pass/fail verdicts become inconclusive. Note what DARS costs *on
# this machine*: the stage samples every prompt's stage 2 at the fixed width $n_{max}$ and
# masks the unused rows, so its wall time per step is that of N = $n_{max}$; the budget counts
# only the rollouts a real engine would generate.

# %%
pd.DataFrame([dict(claim=c.id, rule=c.rule, direction=c.direction, threshold=c.threshold,
                   fail_threshold=c.fail_threshold, unit=c.unit, control=c.control)
              for c in D.SMALL_CLAIMS])

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

fig = paper_figures.committed_figure("dars")

# %% [markdown]
# ## Exercises
#
# Each exercise has a check cell: put your answer in place of `None` and run it;
# `rlvr_lab.course` says right, or not yet with why and a hint. The solution stays folded
# under it.

# %%
from rlvr_lab import course

# %% [markdown]
# **1.** Derive $E[2N\hat a(1-\hat a)] = 2(N-1)p(1-p)$ for $\hat a = C/N$,
# $C \sim \mathrm{Binomial}(N, p)$, and check it numerically with
# `theory.expected_cumulative_advantage`.

# %%
# Your answer: a function fn(p, N) -> your closed form of E[2N a(1-a)]
course.check_expected_cumulative_advantage(fn=None)

# %% [markdown]
# <details><summary>Solution</summary>
#
# $E[C] = Np$, $E[C^2] = Np(1-p) + N^2p^2$, so
# $E[2N\hat a(1-\hat a)] = \frac{2}{N}(N E[C] - E[C^2]) = \frac2N(N^2p - Np(1-p) - N^2p^2)
# = 2(N-1)p(1-p)$.
#
# ```python
# p = np.linspace(0, 1, 11)
# print(np.allclose(theory.expected_cumulative_advantage(p, 8), 2 * 7 * p * (1 - p)))
# ```
# </details>
#
# **2.** With the slider (or `allocation.dars_extra_rollouts`), find how many extra rollouts HW
# gives an all-wrong prompt at N = 8, and what fraction of a GRPO N=8 batch that is if a quarter
# of the prompts are all-wrong.

# %%
# Your answer: HW's extra rollouts for an all-wrong prompt at N = 8, and the batch cost vs GRPO N=8
course.check_hw_extra(extra=None, cost_ratio=None)

# %% [markdown]
# <details><summary>Solution</summary>
#
# ```python
# extra = int(allocation.dars_extra_rollouts(np.array([0.0]), 8, 64, schedule="hw")[0])
# print(extra, 0.25 * extra / 8)
# ```
# An all-wrong prompt is treated as accuracy $0.5/N$ and gets the cap, 56 extra rollouts: with a
# quarter of the prompts all-wrong the batch costs $1 + 0.25 \cdot 56/8 = 2.75$ times GRPO N=8's.
# </details>
#
# **3.** Why does the tabular bank make "GRPO N=32 raises pass@k" easy, while the paper reports
# it does not for an LLM?

# %%
# Your answer: does an update on one prompt of the bank move another prompt's policy? True / False
course.check_bank_shares_parameters(answer=None)

# %% [markdown]
# <details><summary>Solution</summary>
#
# In the bank each prompt has its own logits: more samples on a hard prompt only move that
# prompt's policy, and nothing else pays. An LLM shares parameters across prompts, so sharpening
# on many easy prompts can reduce diversity on hard ones; that coupling is absent here (see the
# reading above and the claim `naive_n32_early_not_final`).
# </details>
