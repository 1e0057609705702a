"""MC-GRPO figures (arXiv:2601.22582): the median map, flip curves, the simplex, the bank
G-sweep, the mad pitfall and the small-model study (:mod:`.study` computes what they show)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from rlvr_lab import plotting
from rlvr_lab.papers.mc_grpo.study import (ACROSS, ESTIMATORS, GROUP_SIZES, LOSS_BASELINES,
                                           LOSSES, PAPER_LAW, PITFALL_OPTIMIZERS,
                                           STUDY_SCALES, heldout_pass1, loss_arm, loss_claim,
                                           loss_gains, median_gain)

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
        ax.set_xticks(x, [o.replace(" lr=", "\nlr=") for o, _ in combos])  # two lines: no overlap
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
        plotting.band(axes[1, 0], steps, m["accuracy"], bounds=(0, 1), **kw)
        plotting.band(axes[1, 1], steps, m["entropy"], bounds=(0, None), **kw)
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
    # the figure legend takes the bottom ~10%: the lower panels' "step" labels stay above it
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig


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


def plot_losses(final: dict):
    """The across-losses arms: final held-out pass@1 of the median and the mean baseline under
    each loss (mean, 95% t-interval over seeds), and the per-seed paired gains with their
    per-seed minimum (the ``mc_grpo_across_losses`` estimand). ``final[arm]``: per-seed
    final pass@1 (arms that did not run are skipped)."""
    fig, (ax, bx) = plotting.subplots(1, 2, figsize=(11, 4))
    names = [n for n in LOSSES if all(loss_arm(b, n) in final for b in LOSS_BASELINES)]
    for i, b in enumerate(LOSS_BASELINES):
        stats_ = [plotting.mean_ci(final[loss_arm(b, n)]) for n in names]
        ax.errorbar(np.arange(len(names)) + 0.1 * (2 * i - 1), [m for m, _ in stats_],
                    yerr=[h for _, h in stats_], fmt="o", capsize=3,
                    label=f"{b}: {LOSS_BASELINES[b]}")
    ax.set_xticks(range(len(names)), [f"{n} loss" for n in names])
    ax.set(ylabel="final held-out pass@1 (95% CI)", title="G=2 under three losses")
    ax.legend(fontsize=8)
    gains = loss_gains(final, names)
    cols = [(f"{n}", gains[loss_claim(n)]) for n in names]
    if ACROSS in gains:
        cols.append(("min over losses", gains[ACROSS]))
    for j, (label, g) in enumerate(cols):
        bx.plot(np.full(g.size, j) + np.linspace(-0.15, 0.15, g.size), g, "o", ms=3,
                alpha=0.6, color=f"C{j}")
        bx.errorbar(j, g.mean(), yerr=plotting.mean_ci(g)[1], fmt="s", color="k", capsize=4)
    bx.axhline(0, color="grey", lw=0.8)
    bx.set_xticks(range(len(cols)), [label for label, _ in cols])
    bx.set(ylabel="median - mean baseline, per seed", title="paired gains (seeds as points)")
    fig.tight_layout()
    return fig
