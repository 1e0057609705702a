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
# # The small-model setting: a tiny transformer, SFT, then GRPO
#
# **Runtime:** 14 s in quick mode on 2 CPU cores (measured by `notebooks/execute.py`, 2026-12-07); full settings (`RLVR_LAB_QUICK=0`) take longer
#
# Quick settings are the default; set `RLVR_LAB_QUICK=0` before starting Jupyter for the full settings
# (slower; the committed figures of `rlvr-lab reproduce` use them).
#
# The papers' claims are about LLMs. This notebook builds the smallest setting that still has
# tokens, variable lengths and a sampling temperature: a character-level decoder-only
# transformer (`rlvr_lab.models.transformer`, flax.nnx) trained **from scratch** on a verifiable
# task, warm-started by SFT, then trained with GRPO (`rlvr_lab.train.sequence`) using the core
# estimators and losses (`advantages.compute("grpo", ...)`, `losses.get("ppo_clip")`,
# `losses.aggregate(..., "token-mean")`).
#
# It calls the same functions as `simulations/tiny_grpo.py` (`rlvr-lab run tiny_grpo`), so the
# curves agree with the committed full run (`figures/tiny_grpo_curves.png`). The outputs below
# are from quick mode (the default, a fast run).

# %%
from rlvr_lab.io import quick_mode
QUICK = quick_mode(default=True)

import dataclasses

import jax
import numpy as np
import pandas as pd

from rlvr_lab.envs import arithmetic, countdown, tasks, tokenizer
from rlvr_lab.models import transformer
from rlvr_lab.train import bases, sequence, sft
from rlvr_lab import claims, experiments, plotting
from simulations import tiny_grpo as TG

pd.set_option("display.width", 120)

# %% [markdown]
# ## 1. The tasks
#
# **Arithmetic** with a short worked format: the sum is written least-significant digit first
# (the order in which carries appear, so a causal model can produce it digit by digit), then `>`
# and the answer. **Countdown**: reach the target with the given numbers, each exactly once.
# Verifiers parse the text with their own small parser (never `eval`); malformed text scores 0.
# The multi-level reward (format 0.5 + correctness 1.5) is there for the MC-GRPO sign-flip
# studies.

# %%
rng = np.random.default_rng(0)
rows = []
for name, levels in (("arithmetic", (1, 2, 3, 4)), ("countdown", (2, 3, 4))):
    for p in tasks.generate(name, rng, 4, levels):
        rows.append(dict(task=name, level=p.difficulty, prompt=p.prompt, solution=p.solution,
                         verdict=tuple(tasks.verify(p, p.solution))))
pd.DataFrame(rows)

# %%
p = arithmetic.make_problem(47, 85)
for text in ["231>132", "000>132", "231>133", "132", "231>0132", "hello"]:
    v = tasks.verify(p, text)
    print(f"{text!r:12} correct={v.correct!s:5} format={v.format_ok!s:5} "
          f"multi-level reward={tasks.reward(v, 'multi')}")

# %% [markdown]
# ## 2. SFT warm start
#
# `sft.load_or_train` trains the base policy on reference solutions (one jitted `lax.scan`,
# deterministic) and caches it under `.rlvr_cache/` keyed by a hash of the config. It is stopped
# early on purpose: held-out pass@1 should be moderate so that RL has room. Below: samples from
# an untrained model, then from the SFT base.

# %%
base_cfg = sft.PRESETS["quick"]
heldout = sft.problems(base_cfg, "heldout")
untrained = transformer.init(jax.random.key(0), base_cfg.model_config())
print(base_cfg.model_config(), f"{base_cfg.model_config().num_params():,} parameters")
TG.samples_table(untrained, base_cfg, heldout, jax.random.key(1))

# %%
base = sft.load_or_train(base_cfg)
ev = sft.evaluate(jax.random.key(2), base, base_cfg, heldout, n_samples=4 if QUICK else 16)
levels = np.array([p.difficulty for p in heldout])
print(f"held-out pass@1 {ev.pass1:.3f}, pass@{ev.n} {ev.pass_at(ev.n):.3f}")
print({int(d): round(float(ev.counts[levels == d].mean() / ev.n), 3) for d in np.unique(levels)})
TG.samples_table(base, base_cfg, heldout, jax.random.key(3))

# %% [markdown]
# ## 3. GRPO
#
# `TG.rl_config(quick)` is the experiment's setting: 32 prompts x G=8 rollouts per step,
# PPO-clip over 2 mini-batches (the second one slightly off-policy), token-mean aggregation, no KL, Adam with a short
# warm-up. The seeds of one base run in one compiled program (a leading seed axis, mapped
# seed by seed); the verifier runs on the host between the jitted rollout and update. Held-out problems are evaluated every `eval_every`
# steps. With $G$ responses $y_i$ to a prompt, advantages $A_i$ (section 1 of the quick start)
# and per-token ratios $\rho_{i,t} = \pi_\theta(y_{i,t} \mid \cdot)/\pi_{old}(y_{i,t} \mid \cdot)$,
# token-mean aggregation minimises
#
# $$\mathcal{L}(\theta) = -\frac{1}{\sum_i |y_i|} \sum_i \sum_{t=1}^{|y_i|}
# \min\big(\rho_{i,t} A_i,\ \operatorname{clip}(\rho_{i,t}, 1-\varepsilon, 1+\varepsilon)\,A_i\big).$$
#
# **Seeds nested in SFT bases.** One SFT base is one draw of everything SFT decides (its data,
# its initialisation, its float rounding), so RL seeds that share a base are not independent
# replications of a claim about "GRPO after SFT". The small-model studies therefore train
# several bases (`rlvr_lab.train.bases`: base `b` is the preset with `seed + b`, with its own
# SFT data and held-out set; base 0 is the preset above) and run RL seeds from each, with the
# same RL key in every arm of a study. Here we run the first look of the experiment's seed plan
# (`TG.QUICK_PLAN`: 3 bases x 1 seed; fewer steps in quick mode). A base that is not cached yet
# is trained first (about a minute).

# %%
config = TG.rl_config(quick=QUICK)
plan = TG.QUICK_PLAN if QUICK else TG.FULL_PLAN
if QUICK:
    config = dataclasses.replace(config, steps=10, eval_every=5, eval_problems=32)
base_ids = list(range(plan.bases))
runs = bases.run_bases(config, jax.random.key(0), base_ids, plan.seeds_per_base)
run = bases.concat_runs(runs)            # all seeds, base by base, for the figures
base_of_seed = bases.labels(base_ids, plan.seeds_per_base)
print(f"{run.steps_done} steps x {len(base_ids)} bases x {plan.seeds_per_base} seed(s) "
      f"in {run.seconds:.0f} s; base of each seed: {base_of_seed}")

# %% [markdown]
# The key picture, built here from the run's evaluations (`run.evals["pass_at"]`: evaluation x
# seed x k) and its training history: held-out pass@k against RL steps, the whole pass@k curve
# before and after, and how many groups carried no signal (all rewards equal).

# %%
pa = np.asarray(run.evals["pass_at"])
steps, kmax = np.asarray(run.evals["step"]), pa.shape[2]
fig, axes = plotting.subplots(1, 3, figsize=(13, 3.6))
# bands: 95% CI over seeds, clipped to [0, 1] (with 3 seeds a t band can leave it)
plotting.band(axes[0], steps, pa[:, :, 0].T, label="pass@1", bounds=(0, 1))
plotting.band(axes[0], steps, pa[:, :, kmax - 1].T, label=f"pass@{kmax}", bounds=(0, 1))
axes[0].set(xlabel="RL step", ylabel="held-out pass@k", title="during GRPO (95% CI)")
axes[0].axhline(pa[0, :, 0].mean(), color="k", lw=0.8, ls=":", label="SFT base pass@1")
axes[0].legend()
ks = np.arange(1, kmax + 1)
plotting.band(axes[1], ks, pa[0], label="SFT base", bounds=(0, 1))
plotting.band(axes[1], ks, pa[-1], label=f"after {run.steps_done} GRPO steps", bounds=(0, 1))
axes[1].set(xscale="log", xlabel="k", ylabel="held-out pass@k", title="pass@k curve")
axes[1].set_xscale("log", base=2)
axes[1].legend()
plotting.band(axes[2], np.arange(run.steps_done), np.asarray(run.history["zero_adv_frac"]).T,
              label="zero-advantage groups", bounds=(0, 1))
axes[2].set(xlabel="RL step", ylabel="fraction of groups", ylim=(0, 1),
            title="groups without learning signal")
fig.tight_layout()


# %% [markdown]
# The key figure as a slide: one panel, 16:9, large fonts (`plotting.slide_figure`;
# `plotting.save_figure(slide, "name", out_dir)` keeps it).

# %%
slide = plotting.slide_figure(fig, 0)



# %%
g = TG.gains(run)  # each seed against its own base
print("per-seed change of held-out pass@1:", np.round(g[:, 0], 3))
print(f"per-seed change of held-out pass@{g.shape[1]}:", np.round(g[:, -1], 3))
run.frame().groupby("metric").value.describe()[["mean", "min", "max"]]

# %%
TG.samples_table(TG.seed_policy(run, 0), base_cfg, heldout, jax.random.key(3))

# %% [markdown]
# ## 4. Reading the result: the claims engine
#
# The experiment (`rlvr-lab run tiny_grpo`) declares its claims once, in `TG.CLAIMS`
# (`rlvr_lab.claims.Declared`: the estimand measured per seed, a rule, thresholds fixed before
# the run), and only measures: `TG.seed_numbers(run)` gives each claim's per-seed numbers (the
# change of held-out pass@1 over the base; its lowest value over the evaluations; the gain at the
# largest k minus the gain at k = 1, which tests whether RL *narrows* what the model can solve, as
# Yue et al. 2025 argue). The engine decides: the interval is the Student-t interval of the
# **base means** with `n_bases - 1` degrees of freedom; **pass** when it lies wholly on the
# claimed side of `threshold`, **fail** when wholly beyond `fail_threshold`, otherwise
# **inconclusive** (the reason says about how many bases would decide it). `rl_raises_pass1` is
# the positive control (`control=True`): if it does not pass, the study's other pass/fail
# verdicts become inconclusive. `docs/claims.md` has the rules.

# %%
pd.DataFrame([dict(claim=c.id, rule=c.rule, direction=c.direction, threshold=c.threshold,
                   fail_threshold=c.fail_threshold, unit=c.unit, estimand=c.estimand)
              for c in TG.CLAIMS])

# %% [markdown]
# The same engine call as the experiment's, on this notebook's run (one look; in quick mode
# after only a few steps, three bases, so the t quantile is 4.3 and inconclusive verdicts are
# expected). The experiment's full run measures 4 bases x 2 seeds, then adds bases while a claim
# is undecided (Bonferroni alpha spending over the looks). At this scale and budget a null or
# negative result is a legitimate outcome and is reported as such.

# %%
numbers = [TG.seed_numbers(r) for r in runs]
samples = {c.id: claims.nested(np.concatenate([n[c.id] for n in numbers]), base_of_seed)
           for c in TG.CLAIMS}
decided = claims.decide_all(TG.CLAIMS, samples, seeds_per_base=plan.seeds_per_base)
rows = pd.DataFrame([experiments.Claim.from_decision(d).row() for d in decided])  # claims.csv rows
rows[["claim", "verdict", "estimate", "ci_low", "ci_high", "threshold", "n_seeds", "n_bases"]]

# %%
for d in decided:
    print(f"{d.spec.id}: {d.verdict}\n    {d.reason}")

# %% [markdown]
#
# Held-out pass@k is estimated from $n$ samples per problem of which $c$ are correct with the
# unbiased estimator $\widehat{\text{pass@}k} = 1 - \binom{n-c}{k}\big/\binom{n}{k}$ (Chen et al.
# 2021, arXiv:2107.03374), averaged over problems.
#
# ## Exercises
#
# Each exercise has a check cell: put your answer in place of `None` and run it;
# `rlvr_lab.course` says right, or not yet with why and a hint. The solution stays folded
# under it.

# %%
from rlvr_lab import course

# %% [markdown]
# **1.** Verify the multi-level reward on your own strings: which of `"231>132"`, `"23>132"` and
# `"231>13"` are well-formatted for 47 + 85, and what reward does each get?

# %%
# Your answer: {"231>132": reward, "23>132": reward, "231>13": reward}
course.check_multilevel_rewards(answer=None)

# %% [markdown]
# <details><summary>Solution</summary>
#
# ```python
# p = arithmetic.make_problem(47, 85)
# for text in ["231>132", "23>132", "231>13"]:
#     v = tasks.verify(p, text)
#     print(text, v.correct, v.format_ok, tasks.reward(v, "multi"))
# ```
# `231>132`: correct and well formatted, reward 2.0 (0.5 format + 1.5 correctness). `23>132`:
# the worked sum is malformed, and the verifier then rejects the whole response (neither well
# formatted nor correct, although 132 is the right sum): 0. `231>13`: wrong answer, and the
# verifier does not accept its format either: 0. The reward is what the verifier's own parser
# says, never `eval` (`course.check_multilevel_rewards` computes it with the verifier).
# </details>
#
# **2.** Show that the unbiased pass@k estimator equals the probability that $k$ samples drawn
# *without replacement* from the $n$ contain at least one correct one, and check
# `metrics.pass_at_k(16, 4, 4)` by brute force.

# %%
# Your answer: pass@4 from 16 samples with 4 correct
course.check_pass_at_k(answer=None)

# %% [markdown]
# <details><summary>Solution</summary>
#
# All $k$ draws are wrong with probability $\binom{n-c}{k}/\binom{n}{k}$ (choose $k$ of the
# $n - c$ wrong ones among all $k$-subsets), hence the formula.
#
# ```python
# import itertools
# from rlvr_lab import metrics
# samples = [1] * 4 + [0] * 12
# subsets = list(itertools.combinations(range(16), 4))
# print(sum(any(samples[i] for i in s) for s in subsets) / len(subsets),
#       float(metrics.pass_at_k(16, 4, 4)))
# ```
# </details>
#
# **3.** The right panel above counts groups whose G = 8 rewards are all equal. What does such
# a group contribute to the GRPO gradient, and how would a larger G change the fraction for a
# problem the model solves with probability 0.9?

# %%
# Your answer: the probability that G = 8 rewards are all equal when p = 0.9 (then try G = 16)
course.check_all_equal_fraction(answer=None, p=0.9, group_size=8)

# %% [markdown]
# <details><summary>Solution</summary>
#
# Nothing: all its advantages are 0. The fraction for one problem is $p^G + (1-p)^G$:
# $0.9^8 + 0.1^8 \approx 0.43$ at G = 8, $0.9^{16} \approx 0.19$ at G = 16.
# </details>
