"""The figures of the BroRL experiments (``simulations/brorl.py``)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from rlvr_lab import plotting
from rlvr_lab.papers.brorl.small import N_LARGE_LM, N_SMALL_LM
from rlvr_lab.papers.brorl.sweep import UPDATE_LABEL, UPDATES
from rlvr_lab.papers.brorl.training import FILTER_NS, TrainingStudy


def _style(settings: pd.DataFrame):
    """Colour by |C|, line style by family, one panel per Q0."""
    colors = dict(zip(sorted(settings["num_correct"].unique()),
                      ["#1b6ca8", "#d1495b", "#3a8a3f", "#edae49"]))
    fams = list(dict.fromkeys(zip(settings["family"], settings["shape"])))
    styles = dict(zip(fams, ["-", "--", ":", "-."]))
    return colors, styles


def plot_vs_n(summary: pd.DataFrame, metric: str, ylabel: str, *, title: str, hline=None,
              logy=False):
    q0s = sorted(summary["q0"].unique())
    fig, axes = plotting.subplots(2, len(q0s), figsize=(3.3 * len(q0s), 5.6), sharex=True,
                                  sharey=True, squeeze=False)
    colors, styles = _style(summary)
    for i, upd in enumerate(UPDATES):
        for j, q0 in enumerate(q0s):
            ax = axes[i, j]
            sub = summary[(summary["update"] == upd) & (summary.q0 == q0)]
            for (fam, shape, c), g in sub.groupby(["family", "shape", "num_correct"],
                                                  sort=False):
                lab = (f"gauss T={1 / shape:.2g}" if fam == "gauss" else f"zipf s={shape:g}")
                ax.plot(g["N"], g[metric], color=colors[c], ls=styles[(fam, shape)],
                        marker=".", label=f"{lab}, |C|={c}")
            if hline is not None:
                ax.axhline(hline, color="k", lw=0.8, ls=":")
            ax.set_xscale("log", base=2)
            if logy:
                ax.set_yscale("symlog", linthresh=1e-3)
            ax.set_title(f"{UPDATE_LABEL[upd].split(' (')[0]}, Q0={q0:g}")
            if i == 1:
                ax.set_xlabel("rollouts N")
            if j == 0:
                ax.set_ylabel(ylabel)
    fig.suptitle(title, fontsize=10)
    plotting.legend_outside(fig, ax=axes[0, -1], width=0.2)  # 12 entries: beside the panels
    return fig


def plot_terms(summary: pd.DataFrame, settings: list[str]):
    fig, axes = plotting.subplots(2, len(settings), figsize=(3.4 * len(settings), 5.6),
                                  sharex=True, squeeze=False)
    names = {"sampled_correct": "sampled correct", "sampled_wrong": "sampled wrong",
             "unsampled": "unsampled", "total": "total (first order)"}
    for i, upd in enumerate(UPDATES):
        for j, s in enumerate(settings):
            ax = axes[i, j]
            g = summary[(summary["update"] == upd) & (summary.setting == s)]
            scale = g[[f"mean_{t}" for t in ("sampled_correct", "sampled_wrong")]].abs() \
                .to_numpy().max()
            for t, lab in names.items():
                ax.plot(g["N"], g[f"mean_{t}"] / scale, marker=".", label=lab,
                        ls="--" if t == "total" else "-", color="k" if t == "total" else None)
            ax.axhline(0, color="k", lw=0.6)
            ax.set_xscale("log", base=2)
            ax.set_title(f"{UPDATE_LABEL[upd].split(' (')[0]}\n{s}", fontsize=8)
            if i == 1:
                ax.set_xlabel("rollouts N")
            if j == 0:
                ax.set_ylabel("mean term / max sampled term")
    axes[0, 0].legend(fontsize=8)
    fig.suptitle("Mass-balance terms vs N (mean over trials, first order, step eta)",
                 fontsize=10)
    fig.tight_layout()
    return fig


def plot_relaxed(summary: pd.DataFrame):
    """Rows: update; columns: metric after the last step; colour: Q0; style: family, |C|."""
    q0s = sorted(summary["q0"].unique())
    qcol = dict(zip(q0s, ["#d1495b", "#edae49", "#1b6ca8", "#3a8a3f"]))
    combos = list(dict.fromkeys(zip(summary["family"], summary["shape"],
                                    summary["num_correct"])))
    styles = dict(zip(combos, ["-", "--", ":", "-.", (0, (5, 1)), (0, (1, 3))]))
    fig, axes = plotting.subplots(2, 3, figsize=(13, 6), sharex=True, squeeze=False)
    metrics = (("p_all_up", "P(all correct tokens up)"),
               ("frac_correct_down", "fraction of correct tokens down"),
               ("p_mass_down", "P(Q_pos after < before)"))
    for i, upd in enumerate(UPDATES):
        for (fam, shape, c, q0), g in summary[summary["update"] == upd].groupby(
                ["family", "shape", "num_correct", "q0"], sort=False):
            lab = (f"gauss T={1 / shape:.2g}" if fam == "gauss" else f"zipf s={shape:g}")
            for j, (m, _) in enumerate(metrics):
                axes[i, j].plot(g["N"], g[m], color=qcol[q0], ls=styles[(fam, shape, c)],
                                marker=".", label=f"{lab}, |C|={c}, Q0={q0:g}")
        for j, (_, lab) in enumerate(metrics):
            ax = axes[i, j]
            ax.set_xscale("log", base=2)
            ax.set_ylim(-0.03, 1.03)
            ax.set_title(f"{UPDATE_LABEL[upd].split(' (')[0]}: {lab}", fontsize=9)
            ax.set_ylabel("probability" if lab.startswith("P(") else "fraction")
            values = summary[summary["update"] == upd][metrics[j][0]]
            if (values == 0).all():  # say it, so a flat line at 0 is not read as missing data
                ax.text(0.5, 0.12, "0 at every N and setting", transform=ax.transAxes,
                        ha="center", va="center", color="0.4")
            if i == 1:
                ax.set_xlabel("rollouts N")
    # two short legends beside the panels instead of one of every colour x style pair
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=qcol[q0], marker=".") for q0 in q0s]
    labels = [f"Q0={q0:g}" for q0 in q0s]
    handles += [Line2D([], [], color="0.3", ls=styles[k]) for k in combos]
    labels += [(f"gauss T={1 / s:.2g}" if f == "gauss" else f"zipf s={s:g}") + f", |C|={c}"
               for f, s, c in combos]
    fig.suptitle("Relaxed conditions: several steps, resampling each step (state after the "
                 "last step vs the initial policy)", fontsize=10)
    plotting.legend_outside(fig, handles, labels, width=0.17,
                            title="colour: Q0; line: law, |C|", title_fontsize=8)
    return fig


def plot_first_order(curve: pd.DataFrame):
    fig, ax = plotting.subplots(figsize=(4.8, 3.4))
    for upd in UPDATES:
        g = curve[curve["update"] == upd]
        (line,) = ax.loglog(g["eta"], g["max_rel_error"], marker="o", label=UPDATE_LABEL[upd])
        ax.loglog(g["eta"], g["median_rel_error"], ls=":", color=line.get_color())
    ax.set_xlabel("step size eta")
    ax.set_ylabel("|exact/eta - three-term total| / scale")
    ax.set_title("Three-term formula vs exact step (float64)\nsolid: max, dotted: median",
                 fontsize=9)
    ax.legend()
    return fig


def plot_training(df: pd.DataFrame, res: dict, study: TrainingStudy):
    fig, axes = plotting.subplots(1, 3, figsize=(12, 3.6))
    s1, s2 = study.phase1_steps, study.phase2_steps
    colors = dict(zip(df["branch"].unique(), ("#1b6ca8", "#d1495b")))
    for branch, g in df.groupby("branch", sort=False):
        acc = g.pivot(index="seed", columns="step", values="accuracy").to_numpy()
        steps = np.arange(acc.shape[1])
        keep = steps < s1 + s2
        plotting.band(axes[0], steps[keep], acc[:, keep], label=branch, color=colors[branch])
        tail = steps >= s1
        spent = g.pivot(index="seed", columns="step", values="phase2_rollouts").to_numpy()[0]
        plotting.band(axes[1], spent[tail] / 1e3, acc[:, tail], label=branch,
                      color=colors[branch])
    axes[0].axvline(s1, color="k", lw=0.8, ls=":")
    axes[0].set_xlabel("step")
    axes[0].set_ylabel("accuracy (mean success probability)")
    axes[0].set_title(f"equal steps: N={study.n_small} for {s1} steps, then split", fontsize=9)
    axes[1].set_xlabel("phase-2 rollouts (thousands)")
    axes[1].set_title("equal rollout budget (phase 2)", fontsize=9)
    filt = res["filtered_exact"]
    plotting.band(axes[2], np.asarray(FILTER_NS), filt, label="exact, saturated policy",
                  color="#555555")
    for branch, g in df[df.step >= s1].groupby("branch", sort=False):
        n = int(branch.split("=")[1])
        per_seed = g[g.step < s1 + s2].groupby("seed")["filtered"].mean().to_numpy()
        axes[2].errorbar([n], [per_seed.mean()], yerr=[per_seed.std()], fmt="s",
                         color=colors[branch], label=f"trainer, phase 2, {branch}")
    axes[2].set_xscale("log", base=2)
    axes[2].set_xlabel("rollouts per prompt N")
    axes[2].set_ylabel("fraction of groups with all-equal rewards")
    axes[2].set_title("groups dynamic sampling would filter", fontsize=9)
    for ax in axes:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def small_figure(phase1, arms: dict, num_prompts: int, mass: pd.DataFrame):
    """Phase 1, the two phase-2 arms by phase-2 rollouts (every base's seeds, each base from
    its own checkpoint) and the mass balance on the checkpoints' tens-digit decisions."""
    with plotting.house_style():
        fig, axes = plotting.subplots(1, 3, figsize=(15, 4))
        ph = np.asarray(phase1.evals["pass_at"])[:, :, 0]
        plotting.band(axes[0], np.asarray(phase1.evals["step"]), ph.T, label="phase 1, N=8")
        for name, n in (("N=8", N_SMALL_LM), ("N=64", N_LARGE_LM)):
            run = arms[name]
            x = np.asarray(run.evals["step"]) * num_prompts * n
            plotting.band(axes[1], x, np.asarray(run.evals["pass_at"])[:, :, 0].T, label=name)
        axes[0].set(xlabel="step", ylabel="held-out pass@1", title="phase 1 (to the checkpoint)")
        axes[1].set(xlabel="phase-2 rollouts", ylabel="held-out pass@1",
                    title="continuing each base's checkpoint (its phase-1 seed 0)")
        axes[1].legend()
        ax = axes[2]
        ax.plot(mass.N, mass.pg_p_decrease, "o-", label="sampled PG: P(dQ < 0)")
        ax.plot(mass.N, mass.ideal_p_decrease, "s--", label="idealised: P(dQ < 0)")
        ax.set_xscale("log", base=2)
        ax.set(xlabel="N rollouts of the decision token", ylabel="probability",
               title="mass balance on the model's tens-digit distribution")
        ax.legend()
        fig.tight_layout()
    return fig
