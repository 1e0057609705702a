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
# # BroRL — broadened exploration
#
# **Runtime:** 58 s in quick mode on 2 CPU cores (measured by `notebooks/execute.py`, 2026-12-07); full settings (`RLVR_LAB_QUICK=0`) take longer
#
# Quick settings are the default; set `RLVR_LAB_QUICK=0` before starting Jupyter for the full settings
# (slower; the committed figures of `rlvr-lab reproduce` use them).
# Mass balance, rollout-size sweep, reviving a saturated run.
#
# BroRL (no public code) argues that increasing the number of rollouts per prompt N to
# the hundreds keeps RLVR improving after ProRL-style training at N=16 saturates. Its theory is a
# *mass balance*: how one policy-gradient step on softmax logits changes the total probability
# `Q_pos` of the correct tokens. No public code exists; this notebook is a self-contained
# reference implementation (`rlvr_lab.papers.brorl.theory`, `simulations/brorl.py`) and checks the claims
# with numbers computed here.
#
# **Verdicts.** Each experiment declares its claims once (`S.MASS_CLAIMS`, `S.TRAINING_CLAIMS`,
# `S.SMALL_CLAIMS`: `rlvr_lab.claims.Declared`, with the estimand measured per seed or trial, a
# rule and thresholds fixed before the run) and only measures; the claims engine decides
# **pass** / **fail** / **inconclusive** / **not applicable here** from the 95% interval
# (`docs/claims.md`). Below, the same engine calls are made on this notebook's runs and their
# rows are shown: claim, verdict, estimate, ci_low, ci_high, threshold, n_seeds, n_bases.
#
# The outputs below are from quick mode (the default); the committed
# figures of the full run come from `rlvr-lab run brorl_mass_balance` and `... brorl_training`.

# %%
from rlvr_lab.io import quick_mode
QUICK = quick_mode(default=True)

import functools
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import matplotlib.pyplot as plt
from IPython.display import display

from rlvr_lab import claims, experiments, plotting, theory
from rlvr_lab.papers.brorl import small as brorl_small, theory as mb, training as brorl_training
from rlvr_lab.train import bases
import simulations.brorl as S

CONFIGS = S.QUICK if QUICK else S.FULL
STUDY = S.TRAIN_QUICK if QUICK else S.TRAIN_FULL
SEEDS = 3 if QUICK else 8
key = jax.random.key(0)
pd.set_option("display.max_colwidth", 200)
pd.set_option("display.width", 160)
ROW = ["claim", "verdict", "estimate", "ci_low", "ci_high", "threshold", "n_seeds", "n_bases"]


def engine_rows(specs, samples, **kw):
    """The claims.csv rows of the engine's decisions of ``specs`` from ``{claim id: sample}``."""
    decided = claims.decide_all(specs, samples, **kw)
    return pd.DataFrame([experiments.Claim.from_decision(d).row() for d in decided])
print("quick" if QUICK else "full", {k: c.describe() for k, c in CONFIGS.items()})

# %% [markdown]
# ## 1. The mass balance, derived
#
# Policy `p = softmax(z)` over V tokens, correct set C (reward `R_c ≥ 0`), wrong set W (reward
# `R_w ≤ 0`), `Q_pos = Σ_C p`, `Q_neg = 1 − Q_pos`. Softmax calculus gives, for any logit change
# `dz`,
#
# $$dQ_{pos} = \sum_j p_j\,(c_j - Q_{pos})\,dz_j .$$
#
# **Paper's idealised update** on the distinct sampled set S of N rollouts,
# `dz = (η/N) Σ_{i∈S} R_i p_i (e_i − p)`, i.e. `dz_j = (η/N) p_j (R_j s_j − S_R)` with
# `S_R = R_c P_pos + R_w P_neg` (sampled correct / wrong mass). Splitting j into (C or W) × (sampled
# or not):
#
# $$dQ_{pos} = \tfrac{\eta}{N}\Big[
# \underbrace{(R_c - S_R)\,Q_{neg}A_2}_{\text{sampled correct}\;\ge 0}
# + \underbrace{(S_R - R_w)\,Q_{pos}B_2}_{\text{sampled wrong}\;\ge 0}
# + \underbrace{S_R\,(Q_{pos}U_{neg,2} - Q_{neg}U_{pos,2})}_{\text{unsampled, either sign}}\Big]$$
#
# with `A₂, B₂` = Σp² over sampled correct / wrong tokens and `U_pos,2, U_neg,2` = Σp² over
# unsampled correct / wrong tokens. Terms 1–2 are non-negative because
# `R_w ≤ S_R ≤ R_c`. It is verified below and in `tests/test_brorl.py` against plain-Python
# loops.
#
# **Realistic sampled policy gradient** (REINFORCE with multiplicities `m_j`, `f_j = m_j/N`):
# `dz = (η/N) Σ_n R(a_n)(e_{a_n} − p)`, `dz_j = η (R_j f_j − p_j T_R)`, `T_R` = mean sampled reward.
# The same split gives `η[Q_neg Σ_{C∩S} p_j(R_c f_j − p_j T_R) + Q_pos Σ_{W∩S} p_j(p_j T_R − R_w f_j)
# + T_R(Q_pos U_neg,2 − Q_neg U_pos,2)]`. The idealised update is this one with `f_j → p_j` on S
# (and an extra 1/N): the sampled terms of the realistic update are **not** sign-definite (a correct
# token drawn less often than `p_j T_R / R_c` is pushed down).
#
# A check of the decomposition: V=2000, 50 correct tokens, N=16 (float64).

# %%
with jax.enable_x64(True):
    k1, k2 = jax.random.split(key)
    z = 2.0 * jax.random.normal(k1, (2000,), jnp.float64)
    correct = jnp.arange(2000) < 50
    counts = mb.sample_counts(k2, z, 16)
    rows = []
    for lr in (1.0, 1e-2, 1e-4):
        ideal = theory.mass_balance(z, correct, counts > 0, lr=lr, n=16)
        pg = mb.sampled_pg_mass_balance(z, correct, counts, lr=lr)
        for name, out in (("idealised", ideal), ("sampled PG", pg)):
            rows.append({"update": name, "lr": lr, **{k: float(v) for k, v in out.items()},
                         "exact/total - 1": float(out["exact"] / out["total"] - 1)})
pd.DataFrame(rows)

# %% [markdown]
# The relative gap between the exact change and the three-term sum shrinks like the step
# size: the formula is the first-order change. `exact` is computed without cancellation
# (`p_j expm1(Δlog p_j)` summed over the smaller set, normaliser change via `log1p`), so the check
# goes down to η = 1e-8 with no rounding floor (figure further below, all settings of the sweep).
#
# **Try it.** The three terms for one prompt are instant: a Gaussian-logit prompt with
# V = 8192, correct mass $Q_0$ and $|C|$ correct tokens, 32 trials of N draws. Left: the mean of
# each term (η = 0.01; symmetric log scale); right: how often the correct mass goes *down*.
# (Sliders need a live kernel with ipywidgets; the saved notebook shows the defaults.)

# %%
NS = 2 ** np.arange(1, 11)


@functools.partial(jax.jit, static_argnames=("update",))
def _terms_vs_n(keys, q0, num_correct, shape, update):
    def one(k):
        kz, kc = jax.random.split(k)
        z, correct = S.make_logits(kz, S.FAMILIES["gauss"], shape, num_correct, q0, 8192)

        def at_n(n):
            counts = mb.sample_counts(kc, z, int(NS[-1]), n)
            if update == "idealised":  # lr = eta * N: steps of the same size as the sampled PG
                return mb.mass_balance(z, correct, counts > 0, lr=0.01 * n, n=n)
            return mb.sampled_pg_mass_balance(z, correct, counts, lr=0.01)
        return jax.vmap(at_n)(jnp.asarray(NS))
    return jax.vmap(one)(keys)


def brorl_terms(q0=0.01, num_correct=16, logit_std=1.0, update="sampled_pg"):
    with jax.enable_x64(True):
        out = _terms_vs_n(jax.random.split(jax.random.key(3), 32), q0, num_correct, logit_std,
                          update)
        out = {k: np.asarray(v) for k, v in out.items()}
    fig, axes = plotting.subplots(1, 2, figsize=(10, 3.6))
    for name in ("sampled_correct", "sampled_wrong", "unsampled", "total"):
        axes[0].plot(NS, out[name].mean(0), "o-" if name != "total" else "k--", ms=3,
                     label=name.replace("_", " "))
    scale = np.abs(out["total"].mean(0)).max()
    axes[0].set(xscale="log", yscale="symlog", xlabel="N (rollouts)",
                ylabel="mean term of dQ_pos", title=f"{update}, Q0={q0}, |C|={num_correct}")
    axes[0].set_yscale("symlog", linthresh=max(scale * 1e-3, 1e-12))
    axes[0].legend(fontsize=8)
    axes[1].plot(NS, (out["exact"] < 0).mean(0), "o-", label="exact change < 0")
    axes[1].axhline(0.01, color="k", lw=0.8, ls=":", label="claim threshold 1%")
    axes[1].set(xscale="log", xlabel="N (rollouts)", ylabel="P(ΔQ_pos < 0) over 32 trials",
                ylim=(-0.02, 1.02), title="does the correct mass go down?")
    axes[1].legend()
    return fig


plotting.interactive(brorl_terms, q0=(0.01, 0.9, 0.01), num_correct=(1, 512, 1),
                     logit_std=(0.5, 3.0, 0.25), update=["sampled_pg", "idealised"])

# %% [markdown]
# ## 2. One-step N-sweep
#
# Token distributions: i.i.d. Gaussian logits at temperatures T = 1 and 1/3, and Zipf laws
# (s = 1.1, 1.5) over a random token order; correct sets of |C| = 1, 16, 512 random tokens, shifted
# so the initial correct mass is exactly Q0 ∈ {0.01 (hard), 0.1, 0.5}. Vocabulary V = 8192, and the
# hard settings again at V = 32768; η = 0.01 (first-order regime; the idealised update uses
# lr = η·N so both updates take steps of the same size). For each trial the N_max = 1024 draws are
# made once and N is a prefix (common random numbers across N); trials are vmapped. float64.
#
# The claims' estimands are per *trial* (a trial is the unit here): the first-order check is
# an `exact` claim (every trial's error over its tolerance must be below 1, no interval); the
# mass-decrease claims take, in the hardest setting, 1 or 0 per trial (did one step at the
# largest N lower the correct mass?) and need the interval of that proportion below 1%.

# %%
streams = ("one_step", "large_vocab", "relaxed", "first_order")   # one key per sweep
out = S.mass_balance_study(lambda name: jax.random.fold_in(key, streams.index(name)), CONFIGS)
summary, relaxed = out["summary"], out["relaxed"]
figs = out["figures"]
plt.close("all")  # each figure is shown in its own cell below
mass_rows = engine_rows(S.MASS_CLAIMS, out["samples"])
print("\n".join(f"{r.claim}: {r.verdict}: {r.reason}" for r in mass_rows.itertuples()))
mass_rows[ROW]

# %%
display(figs["brorl_first_order"])

# %% [markdown]
# The key picture, built here from `summary`: how often one step lowers the correct mass, per
# update rule and initial correct mass $Q_0$ (mean over the settings of that $Q_0$; dashed: the
# worst setting), against the claims' 1% criterion.

# %%
main = summary[summary.vocab_size == CONFIGS["one_step"].vocab_size]
fig, axes = plotting.subplots(1, 2, figsize=(10, 3.6), sharey=True)
for ax, update in zip(axes, ("idealised", "sampled_pg")):
    d = main[main["update"] == update]
    for q0, g in d.groupby("q0"):
        by_n = g.groupby("N").p_decrease
        line, = ax.plot(by_n.mean().index, by_n.mean(), "o-", ms=3, label=f"Q0 = {q0:g}")
        ax.plot(by_n.max().index, by_n.max(), "--", color=line.get_color(), lw=1)
    ax.axhline(0.01, color="k", lw=0.8, ls=":", label="criterion 1%")
    ax.set(xscale="log", xlabel="N (rollouts per prompt)", title=f"{update} update")
axes[0].set_ylabel("P(ΔQ_pos < 0) after one step")
axes[0].legend()
fig.tight_layout()

# %% [markdown]
# The full run repeats the hard settings at V = 32768 (`rlvr-lab run brorl_mass_balance`,
# figures `brorl_*_v32768`).

# %% [markdown]
# **Reading** (numbers from the full run; the engine's rows above have this run's values).
# With the paper's idealised update, P(ΔQ_pos < 0) is sizeable only at very small N (up to ~0.3 at
# N = 4) and has fallen to a few percent by N = 16 (full run: 0.05 in the hardest setting, 95% CI
# 0.02–0.12, i.e. only borderline "clearly positive"); it is below 1% from N = 32–64 on in every
# setting: the unsampled term is small once the rollouts cover most of the mass.
#
# With the realistic sampled policy gradient the picture is different: sampling noise in the
# multiplicities (a frequent wrong token drawn more often than its probability) makes ΔQ_pos < 0
# common at N = 16 on hard prompts (up to ~50%), and it decays only slowly with N: in 10 of the 48
# settings (hard, spread correct sets) it is still above 1% at N = 1024 (up to ~15%). Large N
# helps, but mostly because the noise averages out, not only because the unsampled set empties.

# %%
display(figs["brorl_terms_vs_n"])

# %%
display(figs["brorl_correct_down_vs_n"])

# %% [markdown]
# **Correct tokens that go down.** On hard prompts (Q0 = 0.01) the fraction of correct
# tokens whose probability decreases goes to 0 with N for the idealised update. On easier prompts with
# many correct tokens (Q0 = 0.5, |C| > 1) most correct tokens go *down* at every N: at full
# coverage a token of negligible probability moves by `−p·dz ∝ −(Q_neg Σ_C p² − Q_pos Σ_W p²)`,
# which is negative whenever the correct set is more concentrated than the wrong one. The large
# correct tokens absorb the mass of the small ones (softmax "rich get richer"); no N removes it.
#
# ## 3. Relaxed conditions: several steps, larger step size, resampling each step

# %%
display(figs["brorl_relaxed"])

# %%
relaxed[relaxed.N == relaxed.N.max()][["setting", "update", "p_all_up",
                                        "frac_correct_down", "p_mass_down"]]

# %% [markdown]
# Over several steps: for hard prompts (Q0 = 0.01) the idealised update raises every
# correct token at every N tested and the sampled policy gradient needs N ≈ 1024 to do the same
# (P(all up) ≈ 0.9–1). For Q0 = 0.5 with a spread correct set most correct tokens end below their
# start at every N, although the correct *mass* always grows; at Q0 = 0.1 it depends on the
# setting, and for the idealised update *more* correct tokens go down at larger N (bigger
# effective steps push the policy sooner into the regime where the correct set is the more
# concentrated one). "A sufficiently large N raises every correct token" holds for hard prompts
# only.
#
# ## 4. Training on the prompt bank: reviving a saturated run
#
# Token-level bank: 64 prompts, each a softmax over V = 256 answers with 4 correct ones; initial
# correct masses Beta(0.2, 2) clipped at 1e-5 (many very hard prompts). GRPO (std-normalised
# advantages, PPO clip, Adam, lr 0.2; the lead's `rlvr_lab.train.bandit` trainer). Phase 1: N = 16
# until the accuracy curve flattens; then (a) N = 16 and (b) N = 512 from the same state (same
# keys; a registered rollout stage `brorl_schedule` switches the group size mid-run). Branch (a)
# also runs 32× longer, for the equal-rollout-budget comparison.

# %%
res = S.training_study(jax.random.fold_in(key, 5), STUDY, SEEDS)
tdf = S.training_frame(res, STUDY)
fig = S.plot_training(tdf, res, STUDY)


# %% [markdown]
# The key figure as a slide: one panel, 16:9, large fonts (`plotting.slide_figure`;
# `plotting.save_figure(slide, "name", out_dir)` keeps it).

# %%
slide = plotting.slide_figure(fig, 0)



# %% [markdown]
# The three bank claims, per seed (paired: the same phase 1 and keys): the accuracy gain of
# N = 512 over N = 16 after the same phase-2 steps (superiority above +0.01, fail below 0), the
# change of the fraction of all-equal groups (superiority below 0), and the gain at equal
# phase-2 *rollouts*, N = 16 running 32x the steps (`brorl_revival_equal_rollouts`: superiority
# above 0, fail below 0). Bank seeds are independent draws (one "base"), so the interval is the
# t-interval over seeds.

# %%
numbers = brorl_training.seed_numbers(tdf, STUDY)
train_rows = engine_rows(S.TRAINING_CLAIMS, S.training_samples(numbers))
print("\n".join(f"{r.claim}: {r.verdict}: {r.reason}" for r in train_rows.itertuples()))
train_rows[ROW]

# %% [markdown]
# **Reading** (full run: 64 seeds). At equal numbers of *steps*, switching to N = 512
# revives the saturated run (accuracy +0.062 [+0.056, +0.068] in 40 steps, against +0.006 for
# N = 16 and +0.013 over the last 60 steps of phase 1): hard prompts whose success probability
# is far below 1/16 now get correct samples and a non-zero advantage. The fraction of groups with
# all-equal rewards (the ones DAPO's dynamic sampling would drop) falls from 0.99 at N = 16 to
# 0.84 at N = 512, close to the exact `mean_k [p_k^N + (1 − p_k)^N]` of the saturated policy.
#
# At equal numbers of *rollouts* (`brorl_revival_equal_rollouts`) the comparison reverses:
# continuing at N = 16 for 32× more steps ends **above** N = 512, −0.022 [−0.029, −0.015]
# accuracy over 64 seeds, a **fail** (the paper's Table 1 has BroRL +0.6 points at about equal
# samples). An 8-seed run had left it open (+0.001 [−0.018, +0.021]); it and 136 seeds on other
# keys served as a pilot that set the number of seeds, the criterion stayed the one declared
# before (pass above 0, fail below 0), and the 64 seeds come from a stream the pilot never
# used. In a tabular bandit with Adam each step's progress is bounded by the learning rate, so
# the 32× more small steps of N = 16 more than make up for what each of them misses. The
# paper's efficiency
# argument is about hardware: decoding hundreds of rollouts per prompt moves generation from
# memory-bound to compute-bound on a GPU (their ~2× throughput). The next cells measure that
# side on the tiny transformer (experiment `brorl_throughput`).
#
# ## Chosen settings (the paper's V, |C|, η are not public)
# * One-step sweep: V = 8192 (hard settings also V = 32768), |C| ∈ {1, 16, 512},
#   Q0 ∈ {0.01, 0.1, 0.5}, η = 0.01, N ∈ {4, …, 1024}, 96 trials (48 at V = 32768).
# * Relaxed: V = 4096, |C| ∈ {16, 512}, 16 steps of η = 1, resampling each step, 32 trials.
# * Rewards R_c = +1, R_w = −1 throughout.

# %% [markdown]
# ## Throughput: rollouts per prompt vs tokens/s (tiny transformer)
# Sampling tokens/s of the jitted KV-cache sampler for N parallel rollouts of one prompt. A flat
# time per decode step means overhead- or memory-bound decoding (more rollouts are almost free);
# a rising one means compute-bound. On a 2-core CPU, tokens/s rise from N = 1 to about N = 16
# and then flatten (decoding is already compute-bound), so going from N = 16 to hundreds of
# rollouts gains little: **the paper's ~2× is a GPU effect** (weights and KV cache re-read from
# HBM for a few sequences vs tensor-core FLOPs for hundreds). The claim
# `large_n_raises_throughput` is therefore declared *not applicable here*: the engine still
# measures it (the log ratio of tokens/s at the largest N over N = 16, per interleaved timing
# pair) and says in the reason what the rule alone would give. Run this on a GPU to see it.

# %%
import simulations.brorl_throughput as BT
size = dict(d_model=64, n_layers=2) if QUICK else dict(d_model=128, n_layers=4)
thr = BT.measure_throughput([1, 4, 16, 64] if QUICK else [1, 4, 16, 64, 256, 512], **size)
BT.throughput_figure(thr, jax.devices()[0].platform)
thr

# %%
logs = BT.log_throughput_ratios(16, int(thr.rollouts.iloc[-1]), **size)
thr_rows = engine_rows(BT.CLAIMS, {"large_n_raises_throughput": claims.seeds(logs)})
print(thr_rows.reason.iloc[0])
thr_rows[ROW]

# %% [markdown]
# ## 5. The tiny transformer: a plateaued GRPO checkpoint, and the model's own token law
#
# `brorl_small` (arXiv:2510.01180) moves both halves of the paper to the tiny transformer of
# `01_small_model`. **Phase 1**: GRPO with N=8 from the SFT base until held-out pass@1 stops
# moving (an equivalence claim on the last segment). **Phase 2**: from the base's own
# checkpoint (its phase-1 seed 0), N=8 and N=64 continue on paired seeds, compared at equal
# rollouts (N=8 runs 8x the steps) and at equal wall time on this machine. **Mass balance**: at
# the tens digit of the worked answer — the carry decision, the error a plateaued policy still
# makes — the checkpoint's logits over the whole vocabulary replace the synthetic distributions
# of sections 1-3: for N draws of that token, the three terms of the sampled policy gradient
# and the exact change of the correct mass.
#
# **Seeds nested in SFT bases.** One SFT base is one draw of everything SFT decides, so seeds
# that share it are not independent replications. As in the experiment, the run below repeats
# the whole study from several bases (`rlvr_lab.train.bases`: base `b` is the preset with
# `seed + b`, with its own data and held-out set; quick: the first look of the experiment's
# quick plan, 3 bases x 1 seed), each with its own plateaued checkpoint. A base not cached yet
# is trained first.

# %%
plan = S.tiny_grpo.QUICK_PLAN if QUICK else S.SMALL_PLAN
base_ids = list(range(plan.bases))
small_results = [S.run_small(jax.random.key(21), QUICK, plan.seeds_per_base, base=b)
                 for b in base_ids]
small_mass = brorl_small.mass_frame(r["sweep"] for r in small_results)
print("seconds per step (base 0):",
      {k: round(v, 3) for k, v in small_results[0]["seconds"].items()})
phase1 = bases.concat_runs([r["phase1"] for r in small_results])
arms = {n: bases.concat_runs([r["arms"][n] for r in small_results]) for n in ("N=8", "N=64")}
fig = S.small_figure(phase1, arms, small_results[0]["p1"].num_prompts, small_mass)
small_mass[["N", "pg_p_decrease", "ideal_p_decrease", "pg_sampled_correct",
            "pg_sampled_wrong", "pg_unsampled", "pg_exact"]]

# %% [markdown]
# With a vocabulary of 26 tokens a few dozen draws already see every token the checkpoint
# gives real mass to, so the unsampled term — the one the paper says can shrink the correct
# mass — fades at small N here; what remains at small N is the sampling noise of the two
# sampled terms.
#
# The engine's decisions of `S.SMALL_CLAIMS` on these runs, as the experiment makes them
# (`brorl_small.seed_numbers`: paired held-out pass@1 differences per seed, the mass-balance
# probability once per base). The interval is the t-interval of the base means with
# `n_bases - 1` degrees of freedom; `small_phase1_raises_pass1` is the positive control (if it
# does not pass, the other pass/fail verdicts become inconclusive); the plateau is an
# equivalence claim read from the 90% interval (a TOST at 5%). On a CPU, decoding is
# compute-bound, so equal wall time is close to equal rollouts: that claim is declared *not
# applicable here* (the paper's throughput argument is about GPUs). The experiment adds bases
# while a claim is undecided.

# %%
per_base = [brorl_small.seed_numbers(r) for r in small_results]
labels = bases.labels(base_ids, plan.seeds_per_base)
small_samples = {
    cid: claims.nested(np.concatenate([n[S.SMALL_NUMBERS[cid]] for n in per_base]),
                       base_ids if cid == "small_mass_decrease_vanishes_sampled_pg" else labels)
    for cid in S.SMALL_NUMBERS}
small_rows = engine_rows(S.SMALL_CLAIMS, small_samples, seeds_per_base=plan.seeds_per_base)
small_rows[ROW]

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

fig = paper_figures.committed_figure("brorl")

# %% [markdown]
# ## Exercises
#
# Each exercise has a check cell: put your answer in place of `None` and run it;
# `rlvr_lab.course` says right, or not yet with why and a hint. The solution stays folded
# under it.

# %%
from rlvr_lab import course

# %% [markdown]
# **1.** Show from the formula that with full coverage ($S$ = every token) the unsampled term
# vanishes and $dQ_{pos} \ge 0$. Check it with `mb.mass_balance(z, correct, sampled=all True)`.

# %%
# Your answer: the unsampled term at full coverage, and whether the total is >= 0 (True / False)
course.check_full_coverage(unsampled=None, total_nonnegative=None)

# %% [markdown]
# <details><summary>Solution</summary>
#
# With $S$ = everything, $U_{pos,2} = U_{neg,2} = 0$, so only the two sampled terms remain, both
# $\ge 0$ because $R_w \le S_R \le R_c$.
#
# ```python
# with jax.enable_x64(True):
#     z = jax.random.normal(jax.random.key(1), (2000,), jnp.float64)
#     correct = jnp.arange(2000) < 50
#     out = mb.mass_balance(z, correct, jnp.ones(2000, bool), lr=0.1, n=2000)
#     print(float(out["unsampled"]), float(out["total"]) >= 0)
# ```
# </details>
#
# **2.** With the slider, set Q0 = 0.5 and |C| = 512, update "idealised": the correct *mass*
# rises, yet section 2 says most correct tokens go down. How can both hold?

# %%
# Your answer: can the correct mass rise while most correct tokens go down? True / False
course.check_mass_vs_tokens(answer=None)

# %% [markdown]
# <details><summary>Solution</summary>
#
# The mass is a sum: the large correct tokens gain more than the many small ones lose. At full
# coverage a token of negligible probability moves by $-p\,dz \propto -(Q_{neg}\sum_C p^2 -
# Q_{pos}\sum_W p^2)$, negative whenever the correct set is more concentrated than the wrong one
# ("rich get richer" inside $C$).
# </details>
#
# **3.** The fraction of all-equal groups in the saturated run is
# $\mathrm{mean}_k[p_k^N + (1-p_k)^N]$. Why does it fall so slowly from N = 16 to N = 512 for
# prompts with $p_k \approx 10^{-4}$?

# %%
# Your answer: the all-equal fraction of a prompt with p = 1e-4 at N = 512 (then N = 16)
course.check_all_equal_fraction(answer=None, p=1e-4, group_size=512, exercise="04.3")

# %% [markdown]
# <details><summary>Solution</summary>
#
# $(1 - p)^N \approx e^{-Np}$: at $p = 10^{-4}$ it is 0.998 at N = 16 and still 0.95 at N = 512.
# Such prompts need $N \gtrsim 1/p$ rollouts before they give a non-zero advantage at all.
# </details>
