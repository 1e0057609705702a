"""Figures of the DARS studies (``simulations/dars.py`` and ``notebooks/03_dars.ipynb``)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from rlvr_lab import plotting
from rlvr_lab.papers.dars.small import smooth
from rlvr_lab.papers.dars.study import (
    N_STAGE1, StudySettings, at_budget, curve_matrix, entropy_level, per_seed)


def theory_figure(curves: pd.DataFrame, table: pd.DataFrame):
    with plotting.house_style():
        fig, axes = plotting.subplots(1, 3, figsize=(14, 3.9))
        styles = {"plug-in": ("k", "-"), "expected": ("#1b6ca8", "--"),
                  f"GRPO N={4 * N_STAGE1} expected": ("#6c4f9c", ":"),
                  "DARS-ET expected": ("#3a8a3f", "-"), "DARS-HW expected": ("#d1495b", "-")}
        for scale, ax in zip(("none", "std"), axes[:2]):
            for curve, (color, ls) in styles.items():
                d = curves[(curves.curve == curve) & (curves.scale == scale)]
                ax.plot(d.p, d.sum_abs_adv, color=color, ls=ls, label=curve)
            ax.axvline(0.5, color="grey", lw=0.8, ls=":", label="a = 0.5 (claimed peak)")
            ax.set_xlabel("accuracy a (plug-in) / true p (expected)")
            ax.set_ylabel("cumulative advantage  Σ|A|")
            ax.set_title(f"N={N_STAGE1}, scale={scale!r}")
        axes[0].legend()
        ax = axes[2]
        width = 0.2
        for i, col in enumerate(("ET (none)", "HW (none)", "ET (std)", "HW (std)")):
            ax.bar(table.correct_of_n + (i - 1.5) * width, table[col], width, label=col)
        ax.set_xlabel(f"stage-1 correct out of N={N_STAGE1}")
        ax.set_ylabel("extra rollouts ΔN")
        ax.set_title("DARS schedules (caps: ET 32, HW 64 total)")
        ax.legend()
        fig.tight_layout()
    return fig



def style(method):
    colors = {"GRPO N=8": "#555555", "GRPO N=32": "#6c4f9c", "DARS-ET": "#3a8a3f",
              "DARS-HW": "#d1495b"}
    return colors[method.removesuffix(" +B")], ("--" if method.endswith("+B") else "-")


def training_figure(result: dict):
    curves = result["curves"]
    panels = (("pass@1", "pass@1 (exact)"), ("pass@128", "pass@128 (exact)"),
              ("entropy", "token entropy (nats)"))
    with plotting.house_style():
        fig, axes = plotting.subplots(2, 3, figsize=(14, 7.2))
        for method in curves.method.unique():
            color, ls = style(method)
            cum = curve_matrix(curves, method, "cum_rollouts").mean(0)
            for j, (metric, label) in enumerate(panels):
                y = curve_matrix(curves, method, metric)
                mean, half = plotting.mean_ci(y)
                steps = np.arange(y.shape[1])
                for ax, x in ((axes[0, j], steps), (axes[1, j], cum)):
                    ax.plot(x, mean, color=color, ls=ls, label=method)
                    ax.fill_between(x, mean - half, mean + half, color=color, alpha=0.15, lw=0)
                axes[0, j].set_title(label)
                axes[0, j].set_xlabel("step")
                axes[1, j].set_xlabel("rollouts spent")
                axes[0, j].set_ylabel(label)
                axes[1, j].set_ylabel(label)
                axes[1, j].set_xscale("log")
        budget = float(per_seed(result["final"], "GRPO N=8", "cum_rollouts").mean())
        for ax in axes[1]:
            ax.axvline(budget, color="k", lw=0.8, alpha=0.5, label="GRPO N=8 budget")
        axes[0, 0].legend(ncol=2)
        axes[1, 0].legend(handles=axes[1, 0].get_lines()[-1:])
        fig.tight_layout()
    return fig


def passk_figure(result: dict, s: StudySettings):
    final = result["final"]
    budget = float(per_seed(final, "GRPO N=8", "cum_rollouts").mean())
    ks = np.asarray(s.ks)
    with plotting.house_style():
        fig, axes = plotting.subplots(1, 3, figsize=(14, 3.9))
        base = np.stack([per_seed(final, "GRPO N=8", f"pass@{k}") for k in ks], 1)
        for method in final.method.unique():
            color, ls = style(method)
            v = np.stack([per_seed(final, method, f"pass@{k}") for k in ks], 1)
            vu = np.stack([per_seed(final, method, f"pass@{k}_unbiased") for k in ks], 1)
            axes[0].plot(ks, v.mean(0), color=color, ls=ls, label=method)
            axes[0].plot(ks, vu.mean(0), color=color, ls="none", marker="o", ms=3)
            mean, half = plotting.mean_ci(v - base)
            axes[1].errorbar(ks, mean, half, color=color, ls=ls, label=method, capsize=2)
        axes[0].set_title("final pass@k (lines exact, dots unbiased n=128)")
        axes[1].set_title("final pass@k − GRPO N=8 (equal steps)")
        axes[1].axhline(0, color="k", lw=0.8)
        base_b = np.stack([at_budget(result, "GRPO N=8", f"pass@{k}", budget)
                           for k in (1, 8, 32, 128)], 1)
        for method in final.method.unique():
            color, ls = style(method)
            v = np.stack([at_budget(result, method, f"pass@{k}", budget) for k in (1, 8, 32, 128)],
                         1)
            mean, half = plotting.mean_ci(v - base_b)
            axes[2].errorbar([1, 8, 32, 128], mean, half, color=color, ls=ls, label=method,
                             capsize=2)
        axes[2].set_title(f"pass@k − GRPO N=8 at equal budget ({budget:.0f} rollouts)")
        axes[0].set_ylabel("final pass@k")
        axes[1].set_ylabel("Δ pass@k vs GRPO N=8")
        axes[2].set_ylabel("Δ pass@k vs GRPO N=8")
        axes[2].axhline(0, color="k", lw=0.8)
        for ax in axes:
            ax.set_xscale("log", base=2)
            ax.set_xlabel("k")
        axes[0].legend(ncol=2)
        fig.tight_layout()
    return fig


def rollouts_figure(result: dict):
    """Rollouts spent per step, and entropy against pass@1 (exploration at equal progress)."""
    curves = result["curves"]
    level = entropy_level(result)
    with plotting.house_style():
        fig, axes = plotting.subplots(1, 2, figsize=(12, 3.9))
        for method in curves.method.unique():
            color, ls = style(method)
            y = curve_matrix(curves, method, "rollouts").mean(0)
            axes[0].plot(np.arange(y.size), y, color=color, ls=ls, label=method)
            axes[1].plot(curve_matrix(curves, method, "pass@1").mean(0),
                         curve_matrix(curves, method, "entropy").mean(0), color=color, ls=ls,
                         label=method)
        axes[0].set_yscale("log")
        axes[0].set_xlabel("step")
        axes[0].set_ylabel("rollouts spent per step")
        axes[0].legend(ncol=2)
        axes[1].axvline(level, color="k", lw=0.8, alpha=0.5)
        axes[1].set_xlabel("pass@1 (exact)")
        axes[1].set_ylabel("token entropy (nats)")
        axes[1].set_title("entropy at equal progress (line: claim level)")
        fig.tight_layout()
    return fig



def small_figure(frame: pd.DataFrame, runs, configs, window: int):
    """Held-out pass@1 / pass@k_max vs rollouts spent (``frame``: all bases), and entropy vs
    smoothed batch pass@1 (``runs``: one base's)."""
    with plotting.house_style():
        fig, axes = plotting.subplots(1, 3, figsize=(15, 4))
        kmax = int(frame.k.max())
        for name in runs:
            color, ls = style(name)
            for ax, k in ((axes[0], 1), (axes[1], kmax)):
                d = frame[(frame.method == name) & (frame.k == k)]
                # steps evaluated for every seed (GRPO's budget points differ between bases)
                n = d.groupby("step").pass_at_k.transform("size")
                g = d[n == n.max()].groupby("step")
                ax.plot(g.rollouts.mean(), g.pass_at_k.mean(), color=color, ls=ls, marker="o",
                        ms=3, label=name)
            run = runs[name]
            ent = smooth(np.asarray(run.history["entropy"]).T, window)
            p1 = smooth(np.asarray(run.history["pass1"]).T, window)
            axes[2].plot(p1.mean(0), ent.mean(0), color=color, ls=ls, label=name)
        axes[0].set(xlabel="rollouts spent", ylabel="held-out pass@1", title="pass@1 vs budget")
        axes[1].set(xlabel="rollouts spent", ylabel=f"held-out pass@{kmax}",
                    title=f"pass@{kmax} vs budget")
        axes[2].set(xlabel=f"batch pass@1 ({window}-step mean)", ylabel="token entropy (nats)",
                    title="entropy at equal progress")
        axes[0].legend()
        fig.tight_layout()
    return fig

