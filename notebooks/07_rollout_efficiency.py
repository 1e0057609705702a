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
# # Rollout efficiency on the small model: SPEC-RL and FP8 rollouts
#
# **Runtime:** 32 s in quick mode on 2 CPU cores (measured by `notebooks/execute.py`, 2026-12-07); full settings (`RLVR_LAB_QUICK=0`) take longer
#
# Quick settings are the default; set `RLVR_LAB_QUICK=0` before starting Jupyter for the full settings
# (slower; the committed figures of `rlvr-lab reproduce` use them).
#
# *Papers:* **SPEC-RL** (speculative rollouts, code `ShopeeLLM/Spec-RL`) and veRL's **FP8
# rollouts with importance-sampling correction** (truncated / masked importance sampling, TIS /
# MIS).
#
# Both cut rollout cost — SPEC-RL by *not generating* tokens it can reuse from last epoch's
# responses, FP8 by generating them with a *cheaper* (quantised) engine — and both pay with a
# train–inference mismatch: the tokens the trainer learns from were not drawn from the policy it
# is updating. Everything runs on the tiny transformer (`rlvr_lab.models.transformer`, SFT base
# from `rlvr_lab.train.sft`) with the functions behind `rlvr-lab run spec_rl` and
# `rlvr-lab run fp8`. The outputs below are from quick mode (the default, a pipeline
# check); the committed figures come from full runs.
#
# **Verdicts.** Both experiments declare their claims once (`S.CLAIMS`, `F.CLAIMS`:
# `rlvr_lab.claims.Declared`, with the estimand measured per seed, a rule and thresholds fixed
# before the run) and only measure; the claims engine decides **pass** / **fail** /
# **inconclusive** / **not applicable here** from the 95% interval (`docs/claims.md`). Their
# seeds are **nested in SFT bases** (`rlvr_lab.train.bases`: base `b` is the SFT preset with
# `seed + b`, with its own data and held-out set): one base is one draw of everything SFT
# decides, so the interval is the t-interval of the base means with `n_bases - 1` degrees of
# freedom, and the arms are paired within a seed (same base, same key).

# %%
from rlvr_lab.io import quick_mode
QUICK = quick_mode(default=True)

import dataclasses
import math

import jax
import numpy as np
import pandas as pd

from rlvr_lab.papers.fp8 import quant, study as fp8_study
from rlvr_lab.papers.spec_rl import speculative as spec_rl
from simulations import fp8 as F
from simulations import spec_rl as S
from rlvr_lab import claims, experiments, plotting
from rlvr_lab.train import bases
from scipy import stats

SEEDS = 2 if QUICK else 4
ROW = ["claim", "verdict", "estimate", "ci_low", "ci_high", "threshold", "n_seeds", "n_bases"]
pd.set_option("display.width", 200)
print("quick" if QUICK else "full", "mode,", SEEDS, "seeds")

# %% [markdown]
# ## 1. SPEC-RL: accept last epoch's tokens with lenience ℓ
#
# For each token $t$ of the cached response, draw $u_t \sim U(0,1)$ and accept while
# $u_t < \min(1, \ell\,\pi_{new}(y_t)/\pi_{old}(y_t))$; cut at the first rejection, keep the
# prefix, and let the current policy regenerate from the cut (a fully accepted response is not
# generated at all). ℓ = 1 is speculative decoding's test, ℓ → ∞ reuses everything, "vanilla"
# reuses nothing. **Pitfall** (as in the paper's code): the token at the cut is resampled from
# $\pi_{new}$, not from the residual $\max(0, \pi_{new} - \pi_{old})$, so even ℓ = 1 is not
# exactly on-policy. The acceptance rule on hand-made numbers:

# %%
import jax.numpy as jnp

new = jnp.log(jnp.array([[0.5, 0.5, 0.2, 0.9]]))
old = jnp.log(jnp.array([[0.5, 0.4, 0.6, 0.9]]))
u = jnp.array([[0.9, 0.9, 0.5, 0.1]])
mask = jnp.ones((1, 4), bool)
for ell in (1.0, math.exp(0.5), math.exp(2.0)):
    cut = spec_rl.first_rejection(u, new, old, mask, math.log(ell))
    print(f"l = {ell:5.2f}: keep the first {int(np.asarray(cut).ravel()[0])} tokens")

# %% [markdown]
# **Try it: acceptance against lenience.** Suppose the per-token log-ratio
# $x = \log\pi_{new}/\pi_{old}$ of the cached tokens is Gaussian with spread $s$ (mean $-s^2/2$,
# so that $E_{old}[\pi_{new}/\pi_{old}] = 1$). A token is accepted with probability
# $a = E[\min(1, \ell e^x)] = \Phi\big(\tfrac{\mu + \ln\ell}{s}\big) + \ell e^{\mu + s^2/2}
# \Phi\big(\tfrac{-\ln\ell - \mu - s^2}{s}\big)$, and with independent tokens the expected
# reused prefix of an $n$-token response is $\sum_{k=1}^{n} a^k$. (Sliders need a live kernel
# with ipywidgets; the saved notebook shows the defaults.)

# %%
def acceptance(log_lenience, s):
    mu, ell = -s * s / 2, np.exp(log_lenience)
    return (stats.norm.cdf((mu + log_lenience) / s)
            + ell * np.exp(mu + s * s / 2) * stats.norm.cdf((-log_lenience - mu - s * s) / s))


def spec_rl_acceptance(log_lenience=0.5, ratio_spread=0.3, length=12):
    grid = np.linspace(-1.0, 3.0, 201)
    fig, axes = plotting.subplots(1, 2, figsize=(10, 3.6))
    for spread in sorted({0.05, 0.3, 1.0, ratio_spread}):
        a = acceptance(grid, spread)
        reused = np.array([np.sum(x ** np.arange(1, length + 1)) for x in a]) / length
        lw = 2.2 if spread == ratio_spread else 1.0
        axes[0].plot(grid, a, lw=lw, label=f"s = {spread:g}")
        axes[1].plot(grid, reused, lw=lw, label=f"s = {spread:g}")
    for ax in axes:
        ax.axvline(log_lenience, color="k", lw=0.8, ls=":", label=f"ln ℓ = {log_lenience:g}")
        ax.set(xlabel="log lenience ln ℓ", ylim=(0, 1.02))
    axes[0].set(ylabel="P(accept one token)", title="per-token acceptance")
    axes[1].set(ylabel="expected reused fraction", title=f"reused prefix of {length} tokens")
    axes[0].legend()
    return fig


plotting.interactive(spec_rl_acceptance, log_lenience=(-1.0, 3.0, 0.1),
                     ratio_spread=(0.01, 2.0, 0.01), length=(1, 64, 1))

# %% [markdown]
# GRPO over a fixed prompt set for several epochs (each revisit finds last epoch's
# responses in the cache), the paper's lenience sweep plus its random-cut ablation, all from the
# same base, prompts and keys. In quick mode only three arms run (vanilla, ℓ = 1 and the
# paper's ℓ = e^0.5) on 64 prompts (3 epochs of 2 steps); the full sweep, with ℓ → ∞ and the
# random cut, is the committed full-run figure shown after this run's.

# %%
cfg = S.config(QUICK)
if QUICK:
    cfg = dataclasses.replace(cfg, num_train_prompts=64)
sweep = (spec_rl.VANILLA, 1.0, math.exp(0.5)) if QUICK else spec_rl.SWEEP
df = spec_rl.run_sweep(cfg, jax.random.key(0), sweep, num_seeds=SEEDS)
summary = spec_rl.summarize(df)
summary.groupby("lenience", sort=False)[["generated", "reused", "token_reduction",
                                         "revisit_token_reduction", "time_speedup",
                                         "heldout_pass1", "train_pass1_final"]].mean().round(3)

# %% [markdown]
# The key picture, built here from `summary`: what each lenience saves (tokens not generated on
# revisits) and what it costs (held-out pass@1; dotted: vanilla, which reuses nothing).

# %%
by = summary.groupby("lenience", sort=False)[["revisit_token_reduction", "heldout_pass1"]]
means, cis = by.mean(), by.agg(lambda x: plotting.mean_ci(np.asarray(x))[1])
labels = [str(x) for x in means.index]
fig, axes = plotting.subplots(1, 2, figsize=(10, 3.6))
axes[0].bar(labels, means.revisit_token_reduction, yerr=cis.revisit_token_reduction, capsize=3)
axes[0].set(ylabel="tokens not generated on revisits", xlabel="lenience ℓ",
            title="saving (epochs 2+)")
axes[1].errorbar(labels, means.heldout_pass1, yerr=cis.heldout_pass1, fmt="o", capsize=3)
axes[1].axhline(means.heldout_pass1.iloc[0], color="k", lw=0.8, ls=":", label="vanilla")
axes[1].set(ylabel="held-out pass@1 at the end", xlabel="lenience ℓ",
            title=f"cost ({SEEDS} seeds, 95% CI)")
axes[1].legend()
fig.tight_layout()

# %%
fig = spec_rl.figure(df)
if QUICK:   # the whole sweep, from the committed full run (figures/spec_rl.png)
    experiments.show_committed_figure("spec_rl")


# %% [markdown]
# The key figure as a slide: one panel, 16:9, large fonts (`plotting.slide_figure`;
# `plotting.save_figure(slide, "name", out_dir)` keeps it).

# %%
slide = plotting.slide_figure(fig, 0)



# %% [markdown]
# **Reading it.** Tokens generated fall monotonically with ℓ, and the reduction over a run
# is capped by the number of epochs (epoch 1 has no cache). At this scale a response is 5–12
# near-certain tokens and the policy moves little between visits, so acceptance is almost total
# already at ℓ = 1: every ℓ ≥ 1 trains mostly on stale, repeated responses, and quality falls
# steadily with reuse; whether the paper's inverted U (best at e^0.5) appears is the claim
# `quality_inverted_u` of the experiment's run (`figures/claims.csv`). Wall time does not
# follow tokens on a CPU: verifying a cached response costs a full forward pass, about as much
# as decoding it for a 0.1M-parameter model, so the claim `rollout_speedup_e05` is declared
# *not applicable here* (the paper's speed-up is memory-bound GPU decoding); the engine still
# reports its measurement and what the rule alone would give. The run above is one SFT base
# (a picture); `rlvr-lab run spec_rl` nests its seeds in several bases and decides the claims
# declared in `S.CLAIMS`:

# %%
pd.DataFrame([dict(claim=c.id, rule=c.rule, direction=c.direction, threshold=c.threshold,
                   unit=c.unit, control=c.control, not_applicable=bool(c.not_applicable))
              for c in S.CLAIMS])

# %% [markdown]
# ## 2. FP8 rollouts: blockwise fake quantisation and the mismatch it causes
#
# `rlvr_lab.papers.fp8.quant.fake_quantise(x, fmt, block)` rounds each block, scaled by its
# absmax, to the format's grid (E4M3 by casting to `jnp.float8_e4m3fn`, the coarse FP4 format
# E2M1 by casting to `jnp.float4_e2m1fn`) and scales back. The rollout engine samples from a
# copy of the policy with quantised linear-layer weights (128×128 blocks) and quantised inputs
# of those layers (1×128 blocks): W8A8 for E4M3, W4A4 for E2M1. The trainer rescores in
# float32. Per token, $\rho = \pi_{train}/\pi_{rollout}$; the trainer's metrics are
# $k_1 = E[-\log\rho]$, $k_3 = E[\rho - \log\rho - 1]$, $\chi^2 = E[\rho^2] - 1$ on sampled
# tokens, and `rlvr_lab.papers.fp8.mismatch.vocab_mismatch` gives their exact expectations over
# the vocabulary (KL and $\chi^2$), which need no sampling from the engine.

# %%
x = jax.random.normal(jax.random.key(1), (256, 256))
for fmt in quant.format_names():
    for block in ((128, 128), (32, 32)):
        err = jnp.abs(quant.fake_quantise(x, fmt, block) - x).max()
        print(f"{fmt:6s} block {block}: max |error| {float(err):.4f}")

# %% [markdown]
# **Outlier channels.** Block-wise scaling exists because of outliers: one large entry sets the
# scale of its whole block and the other entries are rounded coarsely. Our toy model has none,
# and at `d_model = 64` every block of 64 or more already covers a kernel's whole input axis.
# `quant.inject_outliers(policy, channels, factor)` creates them without changing the float32
# function: a few LayerNorm output channels are multiplied by a power of two and the kernel rows
# that read them divided by it (factor > 1: activation outliers; < 1: weight outliers). Below,
# the exact KL of weights-only quantisation vs the weight block (b×b), and of activations-only
# quantisation vs the activation block (1×b), with and without outliers, on the same prefixes
# (mean over random placements of the outlier channels).

# %%
table = F.mismatch_table(jax.random.key(2), F.QUICK_TABLE if QUICK else F.FULL_TABLE)
fig = F.mismatch_figure(table)
(table.groupby(["kind", "format", "magnitude", "block_rank"]).kl.mean()
 .unstack("block_rank").rename(columns=lambda r: F.block_label(F.WEIGHT_BLOCKS[r])))

# %% [markdown]
# ## 3. Training on quantised rollouts: no correction, token TIS, token MIS
#
# GRPO (the `tiny_grpo` base and settings) with float32 rollouts, E4M3 W8A8 rollouts without
# correction, and E2M1 W4A4 rollouts without correction, with token TIS
# ($w = \min(\rho, C)$, C = 2) and with token MIS ($w = \rho$ where $1/C \le \rho \le C$,
# other tokens dropped from numerator and denominator) — `SequenceRLConfig.rollout_correction`.
# As in the experiment, every treatment runs from several SFT bases, with the same key for
# every treatment of a base (paired seeds); the compiled rollouts are shared across bases.
# The float32 arm's gain over the SFT base is the positive control: without it no comparison
# below means anything. **Quick mode trains one base** (1 seed, 6 steps: a picture of the
# pipeline, not a test) and shows the committed full run's figure and training verdicts; the
# full settings train the first look of `F.FULL_PLAN` here.

# %%
plan = F.QUICK_PLAN if QUICK else F.FULL_PLAN
fp8_config = F.rl_config(QUICK)
if QUICK:
    fp8_config = dataclasses.replace(fp8_config, steps=6, eval_every=6)
base_ids = [0] if QUICK else list(range(plan.bases))
# every base's seeds of a treatment in one run (bases.run_trainers); one frame per base
frames, numbers = [], []
for b, df_b in zip(base_ids, fp8_study.train_treatments_bases(
        jax.random.key(3), base_ids, plan.seeds_per_base, fp8_config)):
    frames.append(df_b.assign(base=b, seed=df_b.seed + b * plan.seeds_per_base))
    numbers.append(fp8_study.seed_numbers(df_b))     # per-seed paired differences of this base
runs = pd.concat(frames, ignore_index=True)
fig = F.training_figure(runs)
if QUICK:   # several bases and more steps: the committed full run (figures/fp8_training.png)
    experiments.show_committed_figure("fp8_training")
(runs[runs.metric == "heldout_pass1"].groupby(["treatment", "step"]).value.mean()
 .unstack("step").round(3))

# %% [markdown]
# The engine's decisions, as the experiment makes them (one look): the training claims from the
# per-seed paired differences of final held-out pass@1 (`F.TRAINING` names the number behind
# each claim), the block-size claims from section 2's mismatch table (one Spearman correlation
# per outlier placement; the experiment draws placements on each SFT base's own policy, this
# notebook on one). In quick mode one base cannot give an interval over bases, so the
# training rows are the committed full run's (`experiments.committed_claims("fp8")`) and only
# the block-size claims are decided here. "Recovers" is non-inferiority against the float32
# arm with margin `F.MARGIN`; "degrades" is superiority of the gap above 0. If the control
# `fp32_raises_pass1` does not pass, the training claims' pass/fail become inconclusive (the
# block-size claims do not depend on learning: `gated=False`).

# %%
labels = bases.labels(base_ids, plan.seeds_per_base)
samples = {cid: claims.nested(*F.placement_trends(table, kind, fmt))
           for cid, (kind, fmt) in F.BLOCKS.items()}
if not QUICK:
    samples.update({cid: claims.nested(np.concatenate([n[name] for n in numbers]), labels)
                    for cid, (name, _) in F.TRAINING.items()})
specs = [c for c in F.CLAIMS if c.id in samples]
decided = claims.decide_all(specs, samples, seeds_per_base=plan.seeds_per_base)
fp8_rows = pd.DataFrame([experiments.Claim.from_decision(d).row() for d in decided])
if QUICK:   # the training claims as the committed full run decided them
    fp8_rows = pd.concat([experiments.committed_claims("fp8", F.TRAINING), fp8_rows],
                         ignore_index=True)
print("\n".join(f"{r.claim}: {r.verdict}: {r.reason}" for r in fp8_rows.itertuples()
                if r.verdict != "pass"))
fp8_rows[ROW]

# %% [markdown]
# **Reading it.** With the full settings the training verdicts above come from this
# notebook's run (the first look: with few bases the t quantile is large, so inconclusive
# verdicts are expected); in quick mode they are the experiment's full run
# (`figures/claims.csv`), which adds bases while a claim is undecided. E4M3's per-token
# mismatch is small at this scale, so its arm is hard to tell from float32; E2M1 makes the mismatch large. A correction is not free: TIS reweights and
# MIS drops tokens, which adds variance to a short run's gradient. There is something to
# *recover* only where `uncorrected_degrades` passes; otherwise a pass of `tis_recovers` /
# `mis_recovers` says the correction did no harm relative to float32 rollouts.

# %% [markdown]
# ## Exercises
#
# Each exercise has a check cell: put your answer in place of `None` and run it;
# `rlvr_lab.course` says right, or not yet with why and a hint. The solution stays folded
# under it.

# %%
from rlvr_lab import course

# %% [markdown]
# **1.** With the slider: at which lenience does a 12-token response with log-ratio spread
# $s = 0.3$ keep half of its tokens on average? What does it say about SPEC-RL's ℓ = e^0.5 on
# a model whose policy barely moves between epochs ($s \to 0$)?

# %%
# Your answer: the log lenience ln l at which a 12-token response with s = 0.3 keeps half its tokens
course.check_half_reuse_lenience(answer=None)

# %% [markdown]
# <details><summary>Solution</summary>
#
# ```python
# grid = np.linspace(-1, 3, 4001)
# a = acceptance(grid, 0.3)
# reused = np.array([np.sum(x ** np.arange(1, 13)) for x in a]) / 12
# print(grid[np.argmax(reused >= 0.5)])
# ```
# Half the tokens are kept at about ln ℓ = 0 (ℓ ≈ 1). As $s \to 0$ every ℓ ≥ 1 accepts
# (almost) everything, which is what section 1's reading finds at this scale: the lenience no
# longer controls anything and every ℓ ≥ 1 trains on stale responses.
# </details>

# %% [markdown]
# **2.** Why is the token at the cut not exactly on-policy even at ℓ = 1, and what would make it
# so?

# %%
# Your answer: 'new', 'old' or 'residual': the distribution to resample the token at the cut from
course.check_cut_distribution(answer=None)

# %% [markdown]
# <details><summary>Solution</summary>
#
# Speculative decoding's guarantee needs the rejected position to be resampled from the residual
# $\max(0, \pi_{new} - \pi_{old})$ (normalised); resampling from $\pi_{new}$ over-weights the
# tokens $\pi_{old}$ already proposed. Sampling the residual at the cut would make ℓ = 1 exact.
# </details>

# %% [markdown]
# **3.** For FP8 rollouts, show that $k_3 = E[\rho - \log\rho - 1] \ge 0$ and that it is
# $\approx \tfrac12 E[(\log\rho)^2]$ for small mismatch.

# %%
# Your answer: E[k3] when log rho ~ N(0, 0.1^2) (exact, or the small-mismatch approximation)
course.check_k3_small_mismatch(answer=None, sigma=0.1)

# %% [markdown]
# <details><summary>Solution</summary>
#
# $f(x) = e^x - x - 1 \ge 0$ for all $x$ (convex, minimum 0 at 0), and $\rho - \log\rho - 1 =
# f(\log\rho)$. Taylor: $f(x) = x^2/2 + O(x^3)$. For $\log\rho \sim N(0, \sigma^2)$ exactly
# $E[k_3] = e^{\sigma^2/2} - 1$: 0.00501 at $\sigma = 0.1$, against $\sigma^2/2 = 0.005$.
# </details>

# %% [markdown]
# **4.** In the mismatch table, finer weight blocks help E2M1 a lot once outliers are injected,
# but hardly help E4M3 at outliers ×256. Why? At which outlier magnitude should E4M3 start to
# care about the block size?

# %%
# Your answer: the outlier magnitude from which E4M3 should care about the block size
# (within a factor 2)
course.check_e4m3_outlier_onset(answer=None)

# %% [markdown]
# <details><summary>Solution</summary>
#
# A block is scaled so that its largest entry lands on the format's largest value (448 for
# E4M3, 6 for E2M1); an entry 256× smaller lands at 448/256 = 1.75 for E4M3, still a normal
# number with the full 3-bit relative precision, but at 6/256 ≈ 0.02 for E2M1, below its
# smallest step 0.5: rounded to 0. E4M3's normal range spans 448 / 2^-6 ≈ 2.9·10^4, so only
# outliers beyond roughly that ratio (relative to the entries they share a block with) push the
# rest into subnormals, where precision is lost and finer blocks pay. The full run's magnitude
# sweep (up to 2^12) shows the onset.
# </details>
