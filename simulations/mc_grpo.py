"""MC-GRPO (arXiv:2601.22582, docs/papers.md): sign flips of mean vs median baselines, and
training at small G on the prompt bank and on the tiny transformer.

Experiments:

* ``mc_grpo_sign_flip`` (theory) — exact (discrete laws) and Monte Carlo (continuous laws)
  sign-flip and zeroing probabilities of the mean baseline on G rollouts, the compute-matched
  mean on G+1 rollouts and the median on G+1 rollouts (pivot dropped), over reward laws and G;
  the map of where the median helps; claims ``flip_reduction_g2`` and
  ``median_helps_only_small_g`` (the range of G where the median lowers the flip rate).
* ``mc_grpo_training`` (bank) — the G-sweep on the prompt bank with the {0, 1.5, 2} format +
  correctness reward: GRPO (G), MC-GRPO (G+1, scales mad/std/none), compute-matched GRPO
  (G+1, drop one at random); claims ``g2_matches_g8_within_1pct`` and ``mc_grpo_improves_g2``.
* ``mc_grpo_mad_pitfall`` (bank) — binary rewards and an odd group make MAD = 0, so
  |A| = 1/eps = 1000 for the minority: its size after one optimizer step (PPO ratios far
  outside the clip range, which clipping only notices in the *next* epoch) and in training
  with SGD / Adam, with and without ratio and gradient-norm clipping; claim
  ``mad_binary_one_over_eps``.
* ``mc_grpo_small`` (small model) — the authors' setup on the tiny transformer
  (:mod:`rlvr_lab.papers.mc_grpo.small`): ``tiny_grpo``'s SFT base and GRPO recipe with the
  authors' beta 0.04 and gradient clipping 1.0, a three-level partial-credit reward
  {0, 1.5, 2} (the levels of the authors' GSM8K reward), and the arms GRPO (G rollouts),
  MC-GRPO as the authors' code runs it (G+1, median, mad scale, pivot dropped, each group's
  non-zero advantages x (G+1)/#non-zero: ``mc_grpo_rescaled``) and the authors'
  compute-matched baseline (G+1, mean/std over all, smallest-|reward| rollout dropped:
  ``grpo_drop_min_abs``); quick: G=2 and GRPO G=8 (B=16, 14 steps, 4 seeds); full: G in
  {2, 4, 8} plus MC-GRPO std/mad without the rescale at G=2 (B=32, 60 steps, 8 seeds).
  Claims (gated on GRPO G=8's held-out gain over the SFT base): ``small_mc_improves_g2``,
  ``small_g2_matches_g8_within_1pct`` (TOST, margin 0.01), ``small_gap_closure``
  ((MC_2 - GRPO_2)/(GRPO_8 - GRPO_2) with a Fieller interval), ``small_beats_compute_matched``;
  and ``small_median_lowers_flips`` (exact flip rates on the SFT base's own per-prompt reward
  laws, with the range of G where the median helps).
* ``mc_grpo_bank_authors`` (bank) — the same arms, options and claims (``bank_*``) on the
  prompt bank, so the two settings sit side by side.

The functions below are also what ``notebooks/02_mc_grpo.ipynb`` calls, so the figures agree.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from rlvr_lab import advantages, losses, plotting, stats
from rlvr_lab.envs import prompt_bank
from rlvr_lab.envs.prompt_bank import PromptBankConfig
from rlvr_lab.experiments import claim, experiment
from rlvr_lab.papers.mc_grpo import sign_flip as sf
from rlvr_lab.papers.mc_grpo import small
from rlvr_lab.papers.mc_grpo.closure import gap_closure
from rlvr_lab.train import sequence
from rlvr_lab.train.bandit import BanditConfig, metrics_frame, train_seeds
from simulations import tiny_grpo

PAPER = "MC-GRPO"
REF = "arXiv:2601.22582"
GROUP_SIZES = (2, 3, 4, 6, 8, 12, 16)
PAPER_LAW = ((0.0, 1.5, 2.0), (0.3, 0.2, 0.5))  # the repo's format (1.5) + correctness (2) levels
# the three ways of spending a group: mean on G, mean on G+1 (same samples as the median,
# one rollout dropped from the loss: the compute-matched baseline), median on G+1
ESTIMATORS = {"mean (G)": ("mean", 0), "mean (G+1, drop 1)": ("mean", 1),
              "median (G+1)": ("median", 0)}


def map_laws() -> list[sf.RewardLaw]:
    """Reward laws of the map: binary, 3-level format+correctness, outliers, noisy/heavy tails."""
    return [
        sf.discrete_law("binary p=0.2", (0.0, 1.0), (0.8, 0.2)),
        sf.discrete_law("binary p=0.5", (0.0, 1.0), (0.5, 0.5)),
        sf.discrete_law("binary p=0.8", (0.0, 1.0), (0.2, 0.8)),
        sf.discrete_law("{0,1.5,2} (.3,.2,.5) paper-like", *PAPER_LAW),
        sf.discrete_law("{0,1.5,2} (.5,.3,.2) hard", (0.0, 1.5, 2.0), (0.5, 0.3, 0.2)),
        sf.discrete_law("{0,1.5,2} (.1,.6,.3) format-rich", (0.0, 1.5, 2.0), (0.1, 0.6, 0.3)),
        sf.discrete_law("{0,1,2} uniform", (0.0, 1.0, 2.0), (1 / 3, 1 / 3, 1 / 3)),
        sf.discrete_law("outlier {0,1,10} (.5,.45,.05)", (0.0, 1.0, 10.0), (0.5, 0.45, 0.05)),
        sf.student_t_law("Bern(.5)+0.3 t2 heavy noise", 0.5, 0.3, 2.0),
        sf.lognormal_law("lognormal s=1 skewed", 1.0),
        sf.noisy_binary_law("Bern(.5)+N(0,.3^2)", 0.5, 0.3),
        sf.noisy_binary_law("Bern(.2)+N(0,.3^2)", 0.2, 0.3),
    ]


def flip_table(key, laws, group_sizes=GROUP_SIZES, references=("mean", "median"),
               num_groups: int = 1 << 16) -> pd.DataFrame:
    """Long-form flip/zeroing probabilities: law, G, estimator, reference, values and CIs.

    Exact for discrete laws (half-widths 0), Monte Carlo with ``num_groups`` otherwise.
    """
    rows = []
    for li, law in enumerate(laws):
        for ei, (est, (baseline, extra)) in enumerate(ESTIMATORS.items()):
            k = jax.random.fold_in(jax.random.fold_in(key, li), ei)
            out = sf.law_flip_sweep(k, law, [g + extra for g in group_sizes], baseline=baseline,
                                    references=references, num_groups=num_groups)
            for gi, g in enumerate(group_sizes):
                for ri, ref in enumerate(references):
                    rows.append(dict(law=law.name, exact=law.discrete, G=g, estimator=est,
                                     reference=ref, flip=out["flip"][gi, ri],
                                     flip_hw=out["flip_half_width"][gi, ri],
                                     zero=out["zero"][gi, ri],
                                     zero_hw=out["zero_half_width"][gi, ri]))
    return pd.DataFrame(rows)


def median_gain(table: pd.DataFrame, *, reference: str = "mean", quantity: str = "flip",
                against: str = "mean (G)") -> pd.DataFrame:
    """[law x G] matrix of ``quantity(against) - quantity(median (G+1))`` (> 0: median better)."""
    t = table[table.reference == reference]
    wide = t.pivot_table(index=["law", "G"], columns="estimator", values=quantity)
    gain = (wide[against] - wide["median (G+1)"]).unstack("G")
    return gain.reindex(list(dict.fromkeys(t.law)))


def plot_median_map(table: pd.DataFrame):
    """Heat maps of the median's gain: flips (ref. population mean / median) and zeroings."""
    gain = "mean(G) − median(G+1)"
    panels = [("flip", "mean", "mean (G)", f"flips, ref = population mean\n{gain}"),
              ("flip", "mean", "mean (G+1, drop 1)",
               "flips, ref = population mean\nmean(G+1) − median(G+1)"),
              ("flip", "median", "mean (G)", f"flips, ref = population median\n{gain}"),
              ("zero", "mean", "mean (G)", f"zeroings, ref = population mean\n{gain}")]
    fig, axes = plotting.subplots(2, 2, figsize=(13, 10.5), sharey=True)
    for ax, (qty, ref, against, title) in zip(axes.ravel(), panels):
        gain = median_gain(table, reference=ref, quantity=qty, against=against)
        lim = max(float(np.nanmax(np.abs(gain.values))), 1e-3)
        im = ax.imshow(gain.values, cmap="RdBu", vmin=-lim, vmax=lim, aspect="auto")
        for (i, j), v in np.ndenumerate(gain.values):
            ax.text(j, i, f"{v:+.3f}", ha="center", va="center", fontsize=8)
        ax.set_xticks(range(gain.shape[1]), [str(g) for g in gain.columns])
        ax.set_yticks(range(gain.shape[0]), gain.index)
        ax.set_xlabel("G (rollouts in the loss)")
        ax.set_title(title)
        ax.grid(False)
        fig.colorbar(im, ax=ax, shrink=0.8, label="blue: median better, red: worse")
    fig.suptitle("Where the median baseline helps (MC-GRPO): exact for discrete laws, "
                 "Monte Carlo for continuous")
    fig.tight_layout()
    return fig


# the paper's worked example for the paper-like law: flip probability (mean G, median G+1)
PAPER_FLIPS = {2: (0.100, 0.075), 4: (0.066, 0.078), 8: (0.055, 0.081)}


def plot_flip_curves(table: pd.DataFrame, *, reference: str = "mean"):
    """Small multiples: flip probability vs G per law for the three estimators (95% CI).

    Laws where no estimator ever flips a sign (binary rewards; a law whose mean sits on its
    middle level) get no panel -- they would be flat at 0 -- and are named in the title."""
    t = table[table.reference == reference]
    laws = list(dict.fromkeys(t.law))
    never = [law for law in laws if (t[t.law == law][["flip", "flip_hw"]].to_numpy() == 0).all()]
    laws = [law for law in laws if law not in never]
    ncol = 4
    nrow = -(-len(laws) // ncol)
    fig, axes = plotting.subplots(nrow, ncol, figsize=(3.4 * ncol, 2.9 * nrow + 0.6),
                                  sharex=True, squeeze=False)
    for ax, law in zip(np.ravel(axes), laws):
        for est in ESTIMATORS:
            d = t[(t.law == law) & (t.estimator == est)].sort_values("G")
            line, = ax.plot(d.G, d.flip, marker="o", ms=3, label=est)
            ax.fill_between(d.G, d.flip - d.flip_hw, d.flip + d.flip_hw,
                            color=line.get_color(), alpha=0.25, lw=0)
        if "paper-like" in law and reference == "mean":
            gs = list(PAPER_FLIPS)
            ax.plot(gs, [PAPER_FLIPS[g][0] for g in gs], "kx", ms=6, label="paper: mean (G)")
            ax.plot(gs, [PAPER_FLIPS[g][1] for g in gs], "k+", ms=8,
                    label="paper: median (G+1)")
            ax.legend(fontsize=8)
        ax.set_title(law + ("" if d.exact.iloc[0] else " (MC)"), fontsize=9)
        ax.set_xscale("log", base=2)
        ax.set_xticks(GROUP_SIZES, [str(g) for g in GROUP_SIZES])
    for ax in np.ravel(axes)[len(laws):]:
        ax.set_visible(False)
    np.ravel(axes)[0].legend(fontsize=8)
    for ax in axes[:, 0]:
        ax.set_ylabel("P(sign flip)")
    for ax in axes[-1]:
        ax.set_xlabel("G")
    for ax in np.ravel(axes)[len(laws) - ncol:len(laws)]:
        ax.xaxis.set_tick_params(labelbottom=True)
        ax.set_xlabel("G")
    title = f"Sign-flip probability per rollout (reference = population {reference})"
    if never:
        title += "\nno flips at any G (not shown): " + "; ".join(never)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def simplex_table(values=PAPER_LAW[0], group_sizes=(2, 4, 8), step: float = 0.05,
                  reference: str = "mean") -> pd.DataFrame:
    """Exact flip gain mean(G) − median(G+1) over the probability simplex of a 3-level law."""
    rows = []
    m = int(round(1 / step))
    for i in range(m + 1):
        for j in range(m + 1 - i):
            probs = np.array([m - i - j, i, j], dtype=float) / m
            for g in group_sizes:
                mean = sf.sign_flip_probability(values, probs, g, reference=reference)
                med = sf.sign_flip_probability(values, probs, g, baseline="median",
                                               reference=reference)
                rows.append(dict(p0=probs[0], p1=probs[1], p2=probs[2], G=g, mean=mean,
                                 median=med, gain=mean - med))
    return pd.DataFrame(rows)


def plot_simplex(simplex: pd.DataFrame, values=PAPER_LAW[0]):
    """Ternary-style maps (axes: P(middle level), P(top level)) of the median's flip gain."""
    gs = sorted(simplex.G.unique())
    fig, axes = plotting.subplots(1, len(gs), figsize=(4.3 * len(gs), 4), sharey=True)
    # a few knife-edge laws (E[r] just below a level) have huge gains: clip the colour scale
    # at the 90th percentile so that the sign of the typical cell stays visible
    lim = max(float(simplex.gain.abs().quantile(0.9)), 1e-3)
    step = float(np.diff(np.unique(simplex.p1))[0])
    for ax, g in zip(np.atleast_1d(axes), gs):
        d = simplex[simplex.G == g]
        sc = ax.scatter(d.p1, d.p2, c=d.gain, cmap="RdBu", vmin=-lim, vmax=lim,
                        s=40 * (step / 0.05) ** 2, marker="s", edgecolors="none")
        ax.plot([PAPER_LAW[1][1]], [PAPER_LAW[1][2]], "k*", ms=10, label="paper-like law")
        ax.set_title(f"G={g}: mean(G) − median(G+1)")
        ax.set_xlabel(f"P(r={values[1]:g})")
        ax.set_aspect("equal")
    np.atleast_1d(axes)[0].set_ylabel(f"P(r={values[2]:g})  (rest: r={values[0]:g})")
    np.atleast_1d(axes)[0].legend(loc="upper right")
    fig.colorbar(sc, ax=axes, shrink=0.8, extend="both",
                 label="flip gain, clipped (blue: median better)")
    return fig


def _flip_claim(table: pd.DataFrame):
    t = table[(table.law.str.contains("paper-like")) & (table.reference == "mean")
              & (table.G == 2)].set_index("estimator")
    mean2, med3 = t.loc["mean (G)", "flip"], t.loc["median (G+1)", "flip"]
    reduction = (mean2 - med3) / mean2
    return claim(
        "flip_reduction_g2",
        "the median baseline on G+1=3 rollouts flips fewer advantage signs than the mean on "
        "G=2 (rewards {0,1.5,2} w.p. (.3,.2,.5), true advantage r - E[r]; exact)",
        reduction, bool(med3 < mean2),
        "relative reduction (P_mean(G=2) - P_median(G+1=3)) / P_mean(G=2) > 0",
        paper=PAPER, paper_value="median mitigates sign flips at small G (qualitative)",
        setting="theory", paper_ref=REF,
        reason=f"P_flip mean(G=2)={mean2:.4f}, median(G+1=3)={med3:.4f}, "
               f"mean(G+1=3, compute-matched)={t.loc['mean (G+1, drop 1)', 'flip']:.4f}")


def _range_claim(table: pd.DataFrame):
    """Where the median helps under the paper-like law: the G with median(G+1) < mean(G)."""
    t = table[(table.law.str.contains("paper-like")) & (table.reference == "mean")]
    w = t.pivot_table(index="G", columns="estimator", values="flip")
    better = [int(g) for g in w.index if w.loc[g, "median (G+1)"] < w.loc[g, "mean (G)"]]
    worse = [int(g) for g in w.index if g not in better]
    largest = max(better) if better else 0
    return claim(
        "median_helps_only_small_g",
        "under the paper-like law {0,1.5,2} w.p. (.3,.2,.5) the median (G+1) lowers the flip "
        "rate only at small G: not at G >= 4",
        largest, bool(better) and largest < 4,
        "exact flip probabilities (reference: population mean) for G in "
        f"{list(GROUP_SIZES)}: the largest G with median(G+1) < mean(G) is below 4 "
        "(measured = that G; 0 when there is none)",
        paper=PAPER, setting="theory", paper_ref=REF,
        paper_value="worked example: mean/median 0.100/0.075 at G=2, 0.066/0.078 at G=4, "
                    "0.055/0.081 at G=8",
        reason=f"median lower at G in {better}, higher or equal at {worse}; " + ", ".join(
            f"G={g}: {w.loc[g, 'mean (G)']:.4f}/{w.loc[g, 'median (G+1)']:.4f}"
            for g in w.index))


@experiment("mc_grpo_sign_flip", paper=PAPER,
            claims=("flip_reduction_g2", "median_helps_only_small_g"))
def sign_flip_experiment(ctx):
    """Sign-flip and zeroing probabilities: mean vs median baselines over reward laws and G."""
    num_groups = 1 << 12 if ctx.quick else 1 << 16
    table = flip_table(ctx.key(1), map_laws(), num_groups=num_groups)
    ctx.save_table(table, "mc_grpo_flip_table")
    ctx.save_figure(plot_median_map(table), "mc_grpo_median_map")
    ctx.save_figure(plot_flip_curves(table), "mc_grpo_flip_curves")
    simplex = simplex_table(step=0.1 if ctx.quick else 0.05)
    ctx.save_table(simplex, "mc_grpo_flip_simplex")
    ctx.save_figure(plot_simplex(simplex), "mc_grpo_flip_simplex")
    plt.close("all")
    return [_flip_claim(table), _range_claim(table)]


# ============================================================================ training study
STUDY_SCALES = ("mad", "std", "none")


def format_bank(**changes) -> PromptBankConfig:
    """The prompt bank with the repo's levels: wrong 0, well-formatted wrong 1.5, correct 2."""
    kw = dict(num_prompts=64, vocab_size=16, reward="format", correct_reward=0.5,
              format_reward=1.5, format_fraction=0.5, difficulty_a=1.0, difficulty_b=3.0)
    return PromptBankConfig(**(kw | changes))


def study_base(quick: bool, bank: PromptBankConfig | None = None) -> BanditConfig:
    """Shared trainer settings: 2 PPO epochs per generation (as the paper), Adam, no KL."""
    return BanditConfig(bank=format_bank() if bank is None else bank,
                        num_steps=30 if quick else 100, batch_size=32, num_generations=2,
                        num_iterations=2, num_minibatches=1, learning_rate=0.05,
                        loss_agg_mode="token-mean", eval_ks=(1,))


def study_configs(base: BanditConfig, group_sizes=(2, 4, 8), scales=STUDY_SCALES,
                  compute_matched: bool = True) -> dict[tuple[str, int], BanditConfig]:
    """``{(method, G): config}``; G is the number of rollouts in the loss for every method."""
    out = {}
    for g in group_sizes:
        out[("GRPO", g)] = base.replace(num_generations=g, advantage="grpo",
                                        scale_rewards="group")
        for s in scales:
            out[(f"MC-GRPO {s}", g)] = base.replace(
                num_generations=g + 1, advantage="mc_grpo", advantage_options=(("scale", s),))
        if compute_matched:
            out[("GRPO G+1 drop 1", g)] = base.replace(
                num_generations=g + 1, advantage="grpo_drop_one",
                advantage_options=(("scale", "std"),))
    return out


def run_study(key, configs: dict, seeds: int) -> dict[tuple[str, int], dict[str, np.ndarray]]:
    """Train every config on ``seeds`` seeds (same seed keys for every config)."""
    return {name: {k: np.asarray(v) for k, v in train_seeds(cfg, key, seeds)[1].items()}
            for name, cfg in configs.items()}


def study_frame(results) -> pd.DataFrame:
    return pd.concat([metrics_frame(m, method=name, G=g) for (name, g), m in results.items()],
                     ignore_index=True)


def final_table(results, metric: str = "accuracy") -> pd.DataFrame:
    """Final-step mean and 95% CI half-width over seeds per (method, G)."""
    rows = []
    for (name, g), m in results.items():
        mean, half = plotting.mean_ci(m[metric][:, -1])
        rows.append(dict(method=name, G=g, mean=float(mean), ci95=float(half),
                         seeds=m[metric].shape[0], rollouts_per_step=float(m["rollouts"][0, 0])))
    return pd.DataFrame(rows)


def plot_study_curves(results, metric: str = "accuracy"):
    gs = sorted({g for _, g in results})
    fig, axes = plotting.subplots(1, len(gs), figsize=(4.6 * len(gs), 3.8), sharey=True)
    ref_g = max(gs)
    for ax, g in zip(np.atleast_1d(axes), gs):
        for (name, gg), m in results.items():
            if gg != g:
                continue
            steps = np.arange(m[metric].shape[1])
            plotting.band(ax, steps, m[metric], label=name)
        if ("GRPO", ref_g) in results and g != ref_g:
            m = results[("GRPO", ref_g)][metric]
            ax.plot(np.arange(m.shape[1]), m.mean(0), "k--", lw=1, label=f"GRPO G={ref_g}")
        ax.set(title=f"G={g} rollouts in the loss", xlabel="step")
    np.atleast_1d(axes)[0].set_ylabel("mean success probability (exact)")
    np.atleast_1d(axes)[0].legend()
    seeds = next(iter(results.values()))[metric].shape[0]
    fig.suptitle(f"Prompt bank, rewards {{0, 1.5, 2}}: learning curves ({seeds} seeds, 95% CI)")
    fig.tight_layout()
    return fig


def plot_final(table: pd.DataFrame):
    fig, ax = plotting.subplots(figsize=(6.4, 4))
    methods = list(dict.fromkeys(table.method))
    for i, name in enumerate(methods):
        d = table[table.method == name].sort_values("G")
        x = np.log2(d.G) + (i - (len(methods) - 1) / 2) * 0.06
        ax.errorbar(x, d["mean"], yerr=d["ci95"], fmt="o-", capsize=3, ms=4, label=name)
    gs = sorted(table.G.unique())
    ref = table[(table.method == "GRPO") & (table.G == max(gs))]
    if len(ref) and max(gs) > min(gs):
        # claim g2_matches_g8_within_1pct: MC-GRPO at G=2 within 1 point of GRPO at the top G
        level = float(ref["mean"].iloc[0])
        ax.axhspan(level - 0.01, level + 0.01, color="grey", alpha=0.2, lw=0,
                   label=f"GRPO G={max(gs)} ± 1 point (claim)")
    ax.set_xticks(np.log2(gs), [str(g) for g in gs])
    ax.set(xlabel="G (rollouts in the loss; MC-GRPO and drop-1 sample G+1)",
           ylabel="final mean success probability", title="final accuracy, 95% CI over seeds")
    ax.legend()
    return fig


def bank_flip_rates(bank_config: PromptBankConfig, g: int) -> dict[str, float]:
    """Exact flip/zeroing rates at G on the bank's initial per-prompt reward laws, averaged
    over prompts (each prompt: the law of R under its initial softmax policy)."""
    bank = prompt_bank.make_bank(bank_config)
    pi = np.asarray(jax.nn.softmax(bank.logits0, axis=-1), np.float64)
    table = np.asarray(bank.reward_table, np.float64)
    out = {}
    for name, (baseline, extra) in ESTIMATORS.items():
        stats_ = [sf.flip_statistics(table[k], pi[k] / pi[k].sum(), g + extra, baseline=baseline)
                  for k in range(table.shape[0])]
        out[name] = float(np.mean([s.flip for s in stats_]))
        out[name + " zero"] = float(np.mean([s.zero for s in stats_]))
    return out


def _gap(results, a, b):
    """Mean final accuracy of ``a`` minus ``b`` and the Welch 95% CI half-width."""
    from scipy import stats as st
    xa, xb = results[a]["accuracy"][:, -1], results[b]["accuracy"][:, -1]
    va, vb = xa.var(ddof=1) / xa.size, xb.var(ddof=1) / xb.size
    se = np.sqrt(va + vb)
    dof = (va + vb) ** 2 / max(va ** 2 / (xa.size - 1) + vb ** 2 / (xb.size - 1), 1e-300)
    return float(xa.mean() - xb.mean()), float(st.t.ppf(0.975, dof) * se)


def training_claims(results, flips: dict):
    gap, gap_hw = _gap(results, ("GRPO", 8), ("MC-GRPO mad", 2))
    base_gap, _ = _gap(results, ("GRPO", 8), ("GRPO", 2))
    gain, gain_hw = _gap(results, ("MC-GRPO mad", 2), ("GRPO", 2))
    extra = extra_gain = ""
    if ("MC-GRPO std", 2) in results:
        s_gap, _ = _gap(results, ("GRPO", 8), ("MC-GRPO std", 2))
        extra = f"; with the std scale instead of mad the gap is {100 * s_gap:+.2f} points"
        s_gain, s_hw = _gap(results, ("MC-GRPO std", 2), ("GRPO", 2))
        extra_gain = f"; with the std scale: {100 * s_gain:+.2f} +- {100 * s_hw:.2f} points"
    if ("GRPO G+1 drop 1", 2) in results:
        c_gain, c_hw = _gap(results, ("GRPO G+1 drop 1", 2), ("GRPO", 2))
        extra_gain += (f"; compute-matched mean (G+1 drop 1) vs GRPO G=2: {100 * c_gain:+.2f} "
                       f"+- {100 * c_hw:.2f} points")
    return [
        claim("g2_matches_g8_within_1pct",
              "MC-GRPO at G=2 (3 rollouts, mad scale) reaches the final accuracy of GRPO at G=8 "
              "to within 1 point (prompt bank, rewards {0,1.5,2})",
              100 * gap, abs(gap) <= 0.01,
              "|acc(GRPO G=8) - acc(MC-GRPO G=2)| <= 1 percentage point at the last step "
              "(measured: the gap in points)",
              paper=PAPER, paper_value="gap within 1% (LLMs, GSM8K/MATH)", setting="bank",
              paper_ref=REF,
              reason=f"gap {100 * gap:+.2f} +- {100 * gap_hw:.2f} points (95% CI); "
                     f"GRPO G=2 vs G=8 gap {100 * base_gap:+.2f} points{extra}; bank flip "
                     f"rate at G=2: mean {flips['mean (G)']:.3f}, median "
                     f"{flips['median (G+1)']:.3f}"),
        claim("mc_grpo_improves_g2",
              "MC-GRPO (mad) at G=2 ends with a higher accuracy than GRPO at G=2",
              100 * gain, gain - gain_hw > 0,
              "lower bound of the Welch 95% CI of acc(MC-GRPO G=2) - acc(GRPO G=2) > 0 "
              "(measured: the difference in points)",
              paper=PAPER, paper_value="+4.62 points on GSM8K (Qwen3-1.7B, G=2)",
              setting="bank", paper_ref=REF,
              reason=f"difference {100 * gain:+.2f} +- {100 * gain_hw:.2f} points (95% CI)"
                     f"{extra_gain}"),
    ]


@experiment("mc_grpo_training", paper=PAPER,
            claims=("g2_matches_g8_within_1pct", "mc_grpo_improves_g2"))
def training_experiment(ctx):
    """GRPO (G) vs MC-GRPO (G+1, mad/std/none) vs compute-matched GRPO on the prompt bank."""
    base = study_base(ctx.quick)
    if ctx.quick:
        configs = study_configs(base, (2,), scales=("mad",))
        configs[("GRPO", 8)] = base.replace(num_generations=8)
    else:
        configs = study_configs(base)
    results = run_study(ctx.key(7), configs, ctx.seeds)
    ctx.save_table(study_frame(results), "mc_grpo_training_curves")
    final = final_table(results)
    ctx.save_table(final, "mc_grpo_training_final")
    ctx.save_figure(plot_study_curves(results), "mc_grpo_training_curves")
    ctx.save_figure(plot_final(final), "mc_grpo_training_final")
    plt.close("all")
    return training_claims(results, bank_flip_rates(base.bank, 2))


# ============================================================================ the mad pitfall
def binary_bank(**changes) -> PromptBankConfig:
    kw = dict(num_prompts=64, vocab_size=16, reward="binary", difficulty_a=1.0, difficulty_b=3.0)
    return PromptBankConfig(**(kw | changes))


def first_step_stats(key, bank_config: PromptBankConfig, g: int, scale: str, optimizer: str,
                     learning_rate: float, *, epsilon: float = 0.2, num_batches: int = 16,
                     eps: float = 1e-3):
    """What one optimizer step on MC-GRPO advantages does, before any clipping can act.

    For ``num_batches`` batches (every prompt, ``g + 1`` rollouts at the initial policy) take
    one ``optimizer`` step on the first-epoch PPO loss (ratio 1, so it equals the pg loss) and
    return per batch: the largest |A|, the fraction of kept non-zero-advantage rollouts whose
    new ratio lies in PPO's clipped region (the gradient that the second epoch would ignore),
    and the mean KL(new || old) over prompts.
    """
    import optax
    from rlvr_lab.models import tabular
    from rlvr_lab.train import rollout

    bank = prompt_bank.make_bank(bank_config)
    prompts = jnp.arange(bank.num_prompts)
    opt = getattr(optax, optimizer)(learning_rate)

    def one(k):
        batch = rollout.generate(k, bank.logits0, bank, prompts, g + 1)
        adv, keep = advantages.mc_grpo(batch.rewards, scale=scale, eps=eps)

        def loss(logits):
            logp = tabular.answer_log_prob(logits, batch.answers)
            return losses.aggregate(losses.pg(logp, None, adv), keep, "token-mean")

        grads = jax.grad(loss)(bank.logits0)
        updates, _ = opt.update(grads, opt.init(bank.logits0), bank.logits0)
        new = optax.apply_updates(bank.logits0, updates)
        old_lp = tabular.answer_log_prob(bank.logits0, batch.answers)
        new_lp = tabular.answer_log_prob(new, batch.answers)
        live = keep & (adv != 0)
        clipped = losses.is_clipped(new_lp, old_lp, adv, epsilon=epsilon) & live
        return (jnp.max(jnp.abs(jnp.where(keep, adv, 0))),
                clipped.sum() / jnp.maximum(live.sum(), 1),
                tabular.kl_divergence(new, bank.logits0).mean())

    max_abs, clip_frac, kl = jax.jit(jax.vmap(one))(jax.random.split(key, num_batches))
    return dict(max_abs_adv=np.asarray(max_abs), clipped_frac=np.asarray(clip_frac),
                kl=np.asarray(kl))


PITFALL_OPTIMIZERS = {"SGD lr=1": ("sgd", 1.0), "Adam lr=0.05": ("adam", 0.05)}


def first_step_table(key, bank_config, g: int = 4, scales=STUDY_SCALES,
                     num_batches: int = 16) -> pd.DataFrame:
    rows = []
    for i, (opt_name, (opt, lr)) in enumerate(PITFALL_OPTIMIZERS.items()):
        for j, scale in enumerate(scales):
            out = first_step_stats(jax.random.fold_in(key, 10 * i + j), bank_config, g, scale,
                                   opt, lr, num_batches=num_batches)
            for b in range(num_batches):
                rows.append(dict(optimizer=opt_name, scale=scale, batch=b,
                                 **{k: float(v[b]) for k, v in out.items()}))
    return pd.DataFrame(rows)


def pitfall_configs(quick: bool) -> dict[str, BanditConfig]:
    """MC-GRPO on binary rewards, G+1=5: scales x optimizers x (ratio clip | none | grad clip)."""
    base = BanditConfig(bank=binary_bank(), num_steps=20 if quick else 60, batch_size=32,
                        num_generations=5, advantage="mc_grpo", num_iterations=2,
                        num_minibatches=1, optimizer="sgd", learning_rate=1.0,
                        loss_agg_mode="token-mean", eval_ks=(1, 8))

    def mc(scale, **kw):
        return base.replace(advantage_options=(("scale", scale),), **kw)

    configs = {"SGD, PPO clip, mad": mc("mad"), "SGD, PPO clip, std": mc("std"),
               "SGD, no clip (pg), mad": mc("mad", policy_loss="pg")}
    if not quick:
        configs |= {"SGD, PPO clip, none": mc("none"),
                    "SGD, PPO clip + grad-norm 1, mad": mc("mad", max_grad_norm=1.0),
                    "Adam, PPO clip, mad": mc("mad", optimizer="adam", learning_rate=0.05),
                    "Adam, PPO clip, std": mc("std", optimizer="adam", learning_rate=0.05)}
    return configs


def plot_pitfall(first: pd.DataFrame, curves: dict):
    fig, axes = plotting.subplots(2, 2, figsize=(12, 8.5))
    combos = [(o, sc) for o in PITFALL_OPTIMIZERS for sc in STUDY_SCALES
              if ((first.optimizer == o) & (first.scale == sc)).any()]
    palette = plotting.STYLE["axes.prop_cycle"].by_key()["color"]
    scale_color = {sc: palette[i] for i, sc in enumerate(STUDY_SCALES)}
    x = np.arange(len(combos))
    for ax, col, title in ((axes[0, 0], "clipped_frac", "after ONE step: share of non-zero-A\n"
                            "rollouts already outside the clip range"),
                           (axes[0, 1], "kl", "after ONE step: KL(new || old) per prompt")):
        vals = [first[(first.optimizer == o) & (first.scale == sc)][col].to_numpy()
                for o, sc in combos]
        means = [v.mean() for v in vals]
        bars = ax.bar(x, means, yerr=[plotting.mean_ci(v)[1] for v in vals], capsize=3,
                      color=[scale_color[sc] for _, sc in combos])
        ax.bar_label(bars, [f"{m:.2g}" for m in means], fontsize=8, padding=2)
        ax.set_xticks(x, [o for o, _ in combos])
        ax.set(title=title, xlabel="optimizer (bar colour: advantage scale)",
               ylabel="fraction of rollouts" if col == "clipped_frac" else "KL (nats)")
    axes[0, 1].set_yscale("log")
    handles = [plt.Rectangle((0, 0), 1, 1, color=scale_color[sc]) for sc in STUDY_SCALES
               if any(sc == c for _, c in combos)]
    axes[0, 0].legend(handles, [f"scale {sc}" for sc in STUDY_SCALES
                                if any(sc == c for _, c in combos)])
    # a run without ratio clipping lies on top of its clipped twin (the point of the figure):
    # same colour, dashed, one legend entry for both
    twins = {name: name.replace("no clip (pg)", "PPO clip") for name in curves}
    colors = {}
    for name in curves:
        colors.setdefault(twins[name], palette[len(colors) % len(palette)])
    for name, m in curves.items():
        steps = np.arange(m["accuracy"].shape[1])
        dashed = twins[name] != name
        kw = dict(color=colors[twins[name]], ls="--" if dashed else "-",
                  label=None if dashed else name)
        plotting.band(axes[1, 0], steps, m["accuracy"], **kw)
        plotting.band(axes[1, 1], steps, m["entropy"], **kw)
    # with few seeds the t bands can leave the possible range; keep the axes to it
    axes[1, 0].set(xlabel="step", ylabel="mean success probability", title="training, G+1=5",
                   ylim=(0, 1))
    axes[1, 1].set(xlabel="step", ylabel="policy entropy (nats)", title="entropy")
    axes[1, 1].set_ylim(bottom=0)
    handles, labels = axes[1, 0].get_legend_handles_labels()
    if any(twins[n] != n for n in curves):
        handles.append(plt.Line2D([], [], color="k", ls="--"))
        labels.append("dashed: same run without ratio clipping (pg)")
    fig.legend(handles, labels, loc="lower center", ncols=3, fontsize=9,
               bbox_to_anchor=(0.5, 0.0))
    fig.suptitle("The mad scale with binary rewards: |A| = 1/eps = 1000 for the minority side "
                 "(prompt bank, G+1=5)")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


@experiment("mc_grpo_mad_pitfall", paper=PAPER, claims=("mad_binary_one_over_eps",))
def pitfall_experiment(ctx):
    """MAD = 0 with binary rewards: |A| = 1/eps, one-step blow-up, and the role of clipping."""
    bank = binary_bank()
    first = first_step_table(ctx.key(11), bank, num_batches=4 if ctx.quick else 32,
                             scales=("mad", "std") if ctx.quick else STUDY_SCALES)
    ctx.save_table(first, "mc_grpo_mad_first_step")
    curves = {name: {k: np.asarray(v) for k, v in train_seeds(cfg, ctx.key(12), ctx.seeds)[1]
                     .items()} for name, cfg in pitfall_configs(ctx.quick).items()}
    ctx.save_table(pd.concat([metrics_frame(m, config=n) for n, m in curves.items()],
                             ignore_index=True), "mc_grpo_mad_curves")
    ctx.save_figure(plot_pitfall(first, curves), "mc_grpo_mad_pitfall")
    plt.close("all")

    # |A| of every kept non-zero advantage on sampled binary groups of 5 under "mad"
    b = prompt_bank.make_bank(bank)
    from rlvr_lab.train import rollout
    batch = rollout.generate(ctx.key(13), b.logits0, b, jnp.arange(b.num_prompts), 5)
    adv, keep = advantages.mc_grpo(batch.rewards, scale="mad", eps=1e-3)
    live = np.asarray(keep & (adv != 0))
    share = float(np.mean(np.isclose(np.abs(np.asarray(adv)[live]), 1e3, rtol=1e-4))) \
        if live.any() else float("nan")
    sgd_mad = first[(first.optimizer == "SGD lr=1") & (first.scale == "mad")]
    sgd_std = first[(first.optimizer == "SGD lr=1") & (first.scale == "std")]
    return [claim(
        "mad_binary_one_over_eps",
        "with binary rewards and an odd group (G+1=5) MAD = 0, so every non-zero MC-GRPO "
        "advantage under the mad scale has |A| = 1/eps = 1000",
        share, share == 1.0, "share of kept non-zero advantages with |A| = 1000 (rtol 1e-4) == 1",
        paper=PAPER, paper_value="|A| = 1000 [authors' code]", setting="bank", paper_ref=REF,
        reason=f"{int(live.sum())} non-zero advantages; after one SGD step "
               f"{sgd_mad.clipped_frac.mean():.0%} (mad) vs {sgd_std.clipped_frac.mean():.0%} "
               f"(std) of them are already outside the PPO clip range")]


# ============================================================================ small model
EQUIV_MARGIN = 0.01     # "the gap between G=2 and G=8 within 1%": TOST margin (absolute)
CLOSURE_MIN = 0.5       # gap_closure claim: the 95% Fieller interval lies above this
# the authors' training options: KL to the reference with beta 0.04 and gradient-norm
# clipping at 1.0 (the sequence trainer always clips; 1.0 is its default)
AUTHORS = dict(beta=0.04, max_grad_norm=1.0)
SMALL_METHODS = {   # name -> (extra rollouts, estimator, options); G = rollouts in the loss
    "GRPO": (0, "grpo", ()),
    "MC-GRPO": (1, "mc_grpo_rescaled", (("scale", "mad"), ("rescale", True))),
    "GRPO G+1 drop min|r|": (1, "grpo_drop_min_abs", ()),
    "MC-GRPO std, no rescale": (1, "mc_grpo", (("scale", "std"),)),
    "MC-GRPO mad, no rescale": (1, "mc_grpo", (("scale", "mad"),)),
}


def small_base(quick: bool):
    """``tiny_grpo``'s GRPO recipe with the authors' options, on the partial-credit reward
    (quick: B=16, 14 steps; full: B=32, 60 steps, to a plateau), 128 held-out problems."""
    rl = tiny_grpo.rl_config(quick)
    if quick:
        return dataclasses.replace(rl, steps=14, num_prompts=16, eval_every=7,
                                   eval_problems=128, eval_samples=4, **AUTHORS)
    return dataclasses.replace(rl, steps=60, eval_every=10, eval_problems=128, eval_samples=8,
                               **AUTHORS)


def small_configs(base, arms) -> dict:
    """``{(method, G): SequenceRLConfig}`` for ``arms`` = iterable of (method, G)."""
    out = {}
    for method, g in arms:
        extra, est, opts = SMALL_METHODS[method]
        out[(method, g)] = dataclasses.replace(base, num_generations=g + extra, advantage=est,
                                               advantage_options=opts)
    return out


def small_arms(quick: bool) -> list[tuple[str, int]]:
    if quick:
        return [("GRPO", 2), ("MC-GRPO", 2), ("GRPO G+1 drop min|r|", 2), ("GRPO", 8)]
    return ([(m, g) for g in (2, 4, 8) for m in ("GRPO", "MC-GRPO", "GRPO G+1 drop min|r|")]
            + [("MC-GRPO std, no rescale", 2), ("MC-GRPO mad, no rescale", 2)])


def heldout_pass1(run) -> np.ndarray:
    """``[evaluations, seeds]`` held-out pass@1 of a ``sequence.Run``."""
    return np.asarray(run.evals["pass_at"])[:, :, 0]


def small_table(runs) -> pd.DataFrame:
    rows = []
    for (method, g), run in runs.items():
        pa = heldout_pass1(run)
        for e, step in enumerate(np.asarray(run.evals["step"])):
            for s in range(pa.shape[1]):
                rows.append(dict(method=method, G=g, step=int(step), seed=s,
                                 heldout_pass1=float(pa[e, s])))
    return pd.DataFrame(rows)


def law_flip_table(laws: np.ndarray, values, group_sizes=GROUP_SIZES) -> pd.DataFrame:
    """Exact flip/zeroing rates averaged over per-prompt discrete laws ``[P, L]`` (rows:
    level frequencies) for mean (G), mean (G+1, drop min|r|) and median (G+1)."""
    rows = []
    baselines = {"mean (G)": "mean", "mean (G+1, drop min|r|)": "mean_drop_min",
                 "median (G+1)": "median"}
    for g in group_sizes:
        for name, b in baselines.items():
            st_ = [sf.flip_statistics(values, p, g, baseline=b) for p in laws if p.max() < 1]
            n_const = int(sum(p.max() >= 1 for p in laws))   # one level: no flips, no zeros
            flip = sum(s.flip for s in st_) / (len(st_) + n_const)
            zero = sum(s.zero for s in st_) / (len(st_) + n_const)
            rows.append(dict(G=g, estimator=name, flip=flip, zero=zero))
    return pd.DataFrame(rows)


def flip_range(table: pd.DataFrame) -> list[int]:
    """The G at which the median (G+1) flips fewer signs than the mean (G)."""
    w = table.pivot_table(index="G", columns="estimator", values="flip")
    return [int(g) for g in w.index if w.loc[g, "median (G+1)"] < w.loc[g, "mean (G)"]]


def plot_small(runs, flips: pd.DataFrame, paper_flips: pd.DataFrame):
    fig, axes = plotting.subplots(1, 3, figsize=(15, 4))
    ax = axes[0]
    for (method, g), run in runs.items():
        if g != 2 and method != "GRPO":
            continue
        plotting.band(ax, np.asarray(run.evals["step"]), heldout_pass1(run).T,
                      label=f"{method}, G={g}")
    ax.set(xlabel="RL step", ylabel="held-out pass@1", title="tiny transformer, partial credit "
                                                          "{0, 1.5, 2}")
    ax.legend()
    ax = axes[1]
    methods = list(dict.fromkeys(m for m, _ in runs))
    for i, method in enumerate(methods):
        gs = sorted(g for m, g in runs if m == method)
        finals = [heldout_pass1(runs[(method, g)])[-1] for g in gs]
        means = [f.mean() for f in finals]
        half = [plotting.mean_ci(f)[1] for f in finals]
        x = np.log2(gs) + (i - (len(methods) - 1) / 2) * 0.05
        ax.errorbar(x, means, yerr=half, fmt="o-", capsize=3, ms=4, label=method)
    gs_all = sorted({g for _, g in runs})
    ax.set_xticks(np.log2(gs_all), [str(g) for g in gs_all])
    ax.set(xlabel="G (rollouts in the loss)", ylabel="final held-out pass@1 (95% CI)",
           title="final accuracy vs G")
    ax.legend()
    ax = axes[2]
    for table, style, where in ((flips, "-", "small model (base laws)"),
                                (paper_flips, ":", "paper-like law")):
        for est, color in zip(("mean (G)", "mean (G+1, drop min|r|)", "median (G+1)"),
                              ("C0", "C2", "C1")):
            d = table[table.estimator == est].sort_values("G")
            ax.plot(d.G, d.flip, style, marker="o", ms=3, color=color, label=f"{est}, {where}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(GROUP_SIZES, [str(g) for g in GROUP_SIZES])
    ax.set(xlabel="G", ylabel="P(sign flip) per rollout (exact)",
           title="flip rate: small-model reward laws vs the paper-like law")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig


def comparison_claims(final: dict, control, *, setting: str, prefix: str, gate: bool,
                      where: str) -> list:
    """The four G-sweep claims from per-seed final scores ``final[(method, G)]`` (paired)."""
    g2, g8, mc2 = final[("GRPO", 2)], final[("GRPO", 8)], final[("MC-GRPO", 2)]
    drop2 = final[("GRPO G+1 drop min|r|", 2)]
    improve = stats.paired_difference(mc2, g2)
    gap = stats.paired_difference(g8, g2)
    tost = stats.equivalence(mc2, g8, EQUIV_MARGIN)
    closure = gap_closure(mc2, g2, g8)
    matched = stats.paired_difference(mc2, drop2)
    common = dict(paper=PAPER, setting=setting, paper_ref=REF)
    means = ", ".join(f"{m} G={g} {np.mean(v):.4f}" for (m, g), v in final.items())
    extra = ""
    if ("GRPO", 4) in final and ("MC-GRPO", 4) in final:
        c4 = gap_closure(final[("MC-GRPO", 4)], final[("GRPO", 4)], g8)
        extra = f"; at G=4: closure {c4}"
    tost_verdict = ("pass" if tost.equivalent else
                    "fail" if (tost.high < -EQUIV_MARGIN or tost.low > EQUIV_MARGIN)
                    else "inconclusive")
    closure_verdict = ("pass" if closure.low > CLOSURE_MIN else
                       "fail" if closure.high < CLOSURE_MIN else "inconclusive")
    claims = [
        claim(f"{prefix}mc_improves_g2",
              f"MC-GRPO at G=2 (3 rollouts, the authors' mad scale and (G+1)/#non-zero "
              f"rescale) ends above GRPO at G=2 ({where})",
              improve.mean, improve.above(0),
              "95% t-interval of the paired per-seed difference MC-GRPO(2) - GRPO(2) of the "
              "final score lies above 0", paper_value="+4.62 points on GSM8K (Qwen3-1.7B, G=2)",
              reason=f"difference {improve}; {means}; {control.reason}", **common),
        claim(f"{prefix}g2_matches_g8_within_1pct",
              f"MC-GRPO at G=2 matches GRPO at G=8 to within {EQUIV_MARGIN:.0%} ({where})",
              tost.mean, None,
              f"paired TOST of MC-GRPO(2) - GRPO(8) with margin {EQUIV_MARGIN}: pass when "
              f"equivalent at 5%, fail when the 90% interval lies outside "
              f"(-{EQUIV_MARGIN}, {EQUIV_MARGIN}), inconclusive otherwise",
              paper_value="gap between G=2 and G=8 within 1% (abstract)",
              verdict=tost_verdict,
              reason=f"difference {tost} (90% interval); GRPO(8) - GRPO(2) = {gap}; gap "
                     f"closure {closure}{extra}; {control.reason}", **common),
        claim(f"{prefix}gap_closure",
              f"MC-GRPO at G=2 closes most of the GRPO G=2 -> G=8 gap ({where})",
              closure.mean, None,
              f"closure (MC(2) - GRPO(2)) / (GRPO(8) - GRPO(2)) of paired means; pass when "
              f"its 95% Fieller interval lies above {CLOSURE_MIN}, fail when below, "
              f"inconclusive otherwise (also when GRPO(8) - GRPO(2) is not significant: the "
              f"interval is unbounded)",
              paper_value="closes the gap to within 1% (abstract)", verdict=closure_verdict,
              reason=f"closure {closure}; GRPO(8) - GRPO(2) = {gap}{extra}; {control.reason}",
              **common),
        claim(f"{prefix}beats_compute_matched",
              f"MC-GRPO at G=2 ends above the authors' compute-matched baseline (G+1=3 "
              f"rollouts, mean/std over all, the smallest-|reward| rollout dropped) ({where})",
              matched.mean, matched.above(0),
              "95% t-interval of the paired per-seed difference MC-GRPO(2) - drop-min(2) lies "
              "above 0", paper_value="median beats the compute-matched mean baseline "
                                     "(authors' code: mc=False with the extra rollout)",
              reason=f"difference {matched}; {control.reason}", **common),
    ]
    return stats.gate(claims, control) if gate else claims


@experiment("mc_grpo_small", sft_bases=("quick",), paper=PAPER,
            claims=("small_mc_improves_g2", "small_g2_matches_g8_within_1pct",
                    "small_gap_closure", "small_beats_compute_matched",
                    "small_median_lowers_flips"),
            default_seeds=8, quick_seeds=4)
def small_experiment(ctx):
    """MC-GRPO vs GRPO vs the authors' compute-matched baseline on the tiny transformer, G-sweep
    with a three-level partial-credit reward."""
    base = small_base(ctx.quick)
    configs = small_configs(base, small_arms(ctx.quick))
    trainers = small.make_trainers(configs)
    laws = small.reward_law(next(iter(trainers.values())), ctx.key(3),
                            num_prompts=32 if ctx.quick else 128, samples=32)
    runs = {name: sequence.run(cfg, ctx.key(0), ctx.seeds, trainer=trainers[name])
            for name, cfg in ctx.progress(list(configs.items()), "arms")}
    table = small_table(runs)
    flips = law_flip_table(laws, small.LEVELS, GROUP_SIZES)
    paper_flips = law_flip_table(np.asarray([PAPER_LAW[1]]), PAPER_LAW[0], GROUP_SIZES)
    ctx.save_table(table, "mc_grpo_small_heldout")
    ctx.save_table(pd.concat([flips.assign(law="small model"),
                              paper_flips.assign(law="paper-like")]), "mc_grpo_small_flips")
    ctx.save_figure(plot_small(runs, flips, paper_flips), "mc_grpo_small")
    plt.close("all")

    final = {name: heldout_pass1(run)[-1] for name, run in runs.items()}
    base_pass1 = heldout_pass1(runs[("GRPO", 8)])[0]
    control = tiny_grpo.control(base_pass1, final[("GRPO", 8)], name="GRPO G=8 vs SFT base")
    last = heldout_pass1(runs[("GRPO", 8)])
    plateau = stats.paired_difference(last[-1], last[-2])
    law_mean = laws.mean(0)
    setting = (f"{ctx.seeds} seeds, {base.steps} steps, B={base.num_prompts}, beta "
               f"{base.beta}, grad-norm clip {base.max_grad_norm}, {base.eval_problems} held-out "
               f"x {base.eval_samples}; GRPO(8) change over the last {base.eval_every} steps "
               f"{plateau} (plateau when it reaches 0)")
    claims = comparison_claims(final, control, setting="small model", prefix="small_",
                               gate=True, where="tiny transformer, partial credit {0,1.5,2}")
    claims = [dataclasses.replace(c, reason=f"{c.reason}; {setting}") for c in claims]
    rng = flip_range(flips)
    w = flips.pivot_table(index="G", columns="estimator", values="flip")
    z = flips.pivot_table(index="G", columns="estimator", values="zero")
    red = float((w.loc[2, "mean (G)"] - w.loc[2, "median (G+1)"]) / w.loc[2, "mean (G)"]) \
        if w.loc[2, "mean (G)"] > 0 else 0.0
    claims.append(claim(
        "small_median_lowers_flips",
        "on the tiny model's own reward laws the median baseline (G+1) flips fewer advantage "
        "signs than the mean (G) at G=2",
        red, bool(w.loc[2, "median (G+1)"] < w.loc[2, "mean (G)"]),
        "exact flip probability (reference: each prompt's population mean), averaged over "
        "the SFT base's empirical per-prompt laws: median(G+1=3) < mean(G=2) (measured = "
        "relative reduction)",
        paper=PAPER, setting="small model", paper_ref=REF,
        paper_value="median mitigates sign flips at small G; paper's worked example: "
                    "mean 0.100 / median 0.075 at G=2, 0.066 / 0.078 at G=4",
        reason=f"median lower at G in {rng} of {list(GROUP_SIZES)}; flip mean/median/drop-min "
               + ", ".join(f"G={g}: {w.loc[g, 'mean (G)']:.4f}/{w.loc[g, 'median (G+1)']:.4f}/"
                           f"{w.loc[g, 'mean (G+1, drop min|r|)']:.4f}" for g in (2, 4, 8))
               + f"; zeroing at G=2 mean {z.loc[2, 'mean (G)']:.3f}, median "
               f"{z.loc[2, 'median (G+1)']:.3f}; laws of {laws.shape[0]} training prompts x 32 "
               f"samples, mean level shares (0, 1.5, 2) = {np.round(law_mean, 3).tolist()}; "
               f"paper-like law: median lower at G in {flip_range(paper_flips)}"))
    return claims


# ============================================================================ bank, authors' setup
def bank_authors_configs(base: BanditConfig, arms) -> dict[tuple[str, int], BanditConfig]:
    """The small model's arms on the bank: ``{(method, G): BanditConfig}``."""
    out = {}
    for method, g in arms:
        extra, est, opts = SMALL_METHODS[method]
        out[(method, g)] = base.replace(num_generations=g + extra, advantage=est,
                                        advantage_options=opts)
    return out


BANK_ARMS = ([(m, g) for g in (2, 4, 8) for m in ("GRPO", "MC-GRPO", "GRPO G+1 drop min|r|")]
             + [("MC-GRPO std, no rescale", 2), ("MC-GRPO mad, no rescale", 2)])


@experiment("mc_grpo_bank_authors", paper=PAPER,
            claims=("bank_mc_improves_g2", "bank_g2_matches_g8_within_1pct", "bank_gap_closure",
                    "bank_beats_compute_matched", "bank_median_lowers_flips"),
            default_seeds=16, quick_seeds=8)
def bank_authors_experiment(ctx):
    """The small-model G-sweep on the prompt bank with the authors' setup (beta 0.04, clip 1.0,
    (G+1)/#non-zero rescale, drop-min-|reward| baseline), side by side with ``mc_grpo_small``."""
    base = study_base(ctx.quick).replace(**AUTHORS)
    configs = bank_authors_configs(base, small_arms(True) if ctx.quick else BANK_ARMS)
    results = run_study(ctx.key(17), configs, ctx.seeds)
    ctx.save_table(study_frame(results), "mc_grpo_bank_authors_curves")
    final_t = final_table(results)
    ctx.save_table(final_t, "mc_grpo_bank_authors_final")
    ctx.save_figure(plot_final(final_t), "mc_grpo_bank_authors_final")
    plt.close("all")
    final = {k: m["accuracy"][:, -1] for k, m in results.items()}
    start = results[("GRPO", 8)]["accuracy"][:, 0]
    control = stats.positive_control(final[("GRPO", 8)] - start, name="GRPO G=8 vs initial policy")
    setting = (f"{ctx.seeds} seeds, {base.steps} steps, B={base.num_prompts}, beta {base.beta}, "
               f"grad-norm clip {base.max_grad_norm}, exact mean success probability")
    claims = comparison_claims(final, control, setting="bank", prefix="bank_", gate=False,
                               where="prompt bank, rewards {0,1.5,2}")
    claims = [dataclasses.replace(c, reason=f"{c.reason}; {setting}") for c in claims]
    rates = {g: bank_flip_rates(base.bank, g) for g in GROUP_SIZES}
    better = [g for g in GROUP_SIZES if rates[g]["median (G+1)"] < rates[g]["mean (G)"]]
    m2, d2 = rates[2]["mean (G)"], rates[2]["median (G+1)"]
    claims.append(claim(
        "bank_median_lowers_flips",
        "on the bank's initial per-prompt reward laws the median baseline (G+1) flips fewer "
        "advantage signs than the mean (G) at G=2",
        (m2 - d2) / m2 if m2 > 0 else 0.0, bool(d2 < m2),
        "exact flip probability averaged over the bank's prompts: median(G+1=3) < mean(G=2) "
        "(measured = relative reduction)",
        paper=PAPER, setting="bank", paper_ref=REF,
        paper_value="median mitigates sign flips at small G",
        reason=f"median lower at G in {better} of {list(GROUP_SIZES)}; flip mean/median/"
               "drop-1 " + ", ".join(f"G={g}: {rates[g]['mean (G)']:.4f}/"
                                     f"{rates[g]['median (G+1)']:.4f}/"
                                     f"{rates[g]['mean (G+1, drop 1)']:.4f}" for g in (2, 4, 8))))
    return claims
