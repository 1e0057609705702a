"""Figures of the rollout-system studies (``simulations/rollout_systems.py``)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from rlvr_lab.papers.systems import echo
from rlvr_lab.papers.systems.study import (
    LEARN_ETAS,
    STATED_LATENCY_S,
    TAILS,
    areal_best,
)
from rlvr_lab.plotting import subplots


def april_figure(df: pd.DataFrame):
    fig, (ax, bx) = subplots(1, 2, figsize=(12.5, 4.2), gridspec_kw={"wspace": 0.45})
    ax2 = ax.twinx()
    for i, tail in enumerate(TAILS):
        sub = df[(df["law"] == tail) & (df.policy != "drop")]
        g = sub.groupby("r")
        color = f"C{i}"
        ax.plot(g["rollout_throughput_gain"].mean().index,
                100 * g["rollout_throughput_gain"].mean().values, "o-", color=color, label=tail)
        ax2.plot(g["off_policy_token_fraction"].mean().index,
                 100 * g["off_policy_token_fraction"].mean().values, "s--", color=color,
                 alpha=0.6)
        drop = df[(df["law"] == tail) & (df.policy.isin(["sync", "drop"]))].groupby("r")
        bx.plot(drop["effective_throughput_gain"].mean().index,
                100 * drop["effective_throughput_gain"].mean().values, "o-", color=color,
                label=f"drop, {tail.split(' ')[0]}")
        bx.plot(g["effective_throughput_gain"].mean().index,
                100 * g["effective_throughput_gain"].mean().values, "s:", color=color,
                label=f"APRIL, {tail.split(' ')[0]}")
    ax.axhline(22.5, color="0.5", lw=0.8, ls=":", label="APRIL paper average +22.5%")
    ax.set(xlabel="over-provisioning ratio r", ylabel="rollout throughput gain vs sync (%)",
           title="APRIL: gain (solid) and off-policy tokens (dashed)")
    ax2.set_ylabel("off-policy token fraction (%)")
    ax2.grid(False)
    ax.legend(loc="upper left")
    bx.set(xlabel="over-provisioning ratio r", ylabel="useful tokens / rollout time, gain (%)",
           title="tokens the trainer uses: APRIL recycles, verl drops")
    bx.legend(ncol=2)
    return fig



def areal_figure(df: pd.DataFrame):
    best = areal_best(df)
    fig, (ax, bx) = subplots(1, 2, figsize=(12.5, 4.2), gridspec_kw={"wspace": 0.45})
    x = np.arange(len(best))
    ax.plot(x, best["speedup"], "o-", label="async (best split) / sync, equal GPUs")
    for (gen, train), sub in df[df.policy == "async"].groupby(["gen", "train"]):
        m = sub.groupby("eta")["speedup"].mean()
        ax.plot(np.arange(len(m)), m.values, ":", alpha=0.6,
                label=f"split {gen} gen + {train} train")
    ax.axhline(1, color="0.5", lw=0.8)
    ax.axhline(2.57, color="0.5", lw=0.8, ls="--")
    ax.text(0, 2.62, "AReaL paper: up to 2.57×", fontsize=8, color="0.4")
    ax.set_xticks(x, [str(e) for e in best["eta"]])
    ax.set(xlabel="max staleness η", ylabel="speed-up (time per step)",
           title="AReaL: asynchronous speed-up vs η")
    ax.legend()
    bx.plot(x, best["mean_staleness"], "o-", label="mean staleness (versions)")
    bx.plot(x, best["max_staleness"], "s-", label="max staleness")
    bx.plot(x, best["eta"], "k:", lw=0.8, label="η")
    bx2 = bx.twinx()
    bx2.plot(x, 100 * best["off_policy_token_fraction"], "^--", color="C3",
             label="off-policy tokens (%)")
    bx2.set_ylabel("off-policy token fraction (%)")
    bx2.grid(False)
    bx.set_xticks(x, [str(e) for e in best["eta"]])
    bx.set(xlabel="max staleness η", ylabel="policy versions",
           title="staleness of consumed samples")
    bx.legend(loc="upper left")
    bx2.legend(loc="lower right")
    return fig



def echo_figure(util: pd.DataFrame, cost: pd.DataFrame):
    fig, axes = subplots(1, 3, figsize=(16, 4.2), gridspec_kw={"wspace": 0.3})
    ax = axes[0]
    n = np.arange(1, 129)
    for mode, style in (("one_to_many", "-"), ("pipelined", "--")):
        ax.plot(n, echo.broadcast_delays(128, 8e9, 1.25e9, mode=mode), style, label=mode)
    chk = np.array([1, 16, 64, 128])
    ax.plot(chk, echo.pipelined_broadcast_sim(128, 8e9, 1.25e9, 64e6)[chk - 1], "kx",
            label="chunk-level simulation")
    ax.set(xlabel="workers N", ylabel="dissemination latency D (s)", yscale="log",
           title="broadcast of 8 GB at 10 Gbit/s (64 MB chunks)")
    ax.legend()
    bx = axes[1]
    m = util.groupby(["S", "workers"]).mean(numeric_only=True).reset_index()
    for i, (S, sub) in enumerate(m.groupby("S")):
        bx.plot(sub.workers, sub.simulated, "o", color=f"C{i}", label=f"S={S} simulated")
        bx.plot(sub.workers, sub.refined, "-", color=f"C{i}")
        bx.plot(sub.workers, sub.bound, ":", color=f"C{i}", alpha=0.6)
    bx.set(xlabel="RTX 4090 workers (learner: 2 H100)", ylabel="learner utilisation",
           title="simulated (dots), refined (—), bound (⋯) model", ylim=(0, 1.05))
    bx.legend(ncol=2)
    cx = axes[2]
    cx.bar(cost.order, cost.cost_per_step, color=["C2", "C1"])
    for i, r in enumerate(cost.itertuples()):
        cx.text(i, r.cost_per_step, f"U={r.simulated:.2f}\n{r.workers} workers",
                ha="center", va="bottom", fontsize=8)
    cx.set(ylabel="$ per learner step", title="activation order, S=6",
           ylim=(0, 1.25 * float(cost.cost_per_step.max())))
    return fig



def webgym_figure(df: pd.DataFrame):
    fig, ax = subplots()
    m = df.groupby("latency").mean(numeric_only=True)
    ax.plot(m.index, m.speedup, "o-", label="async / naive episodes per second")
    ax.axhspan(4, 5, color="0.85", label="WebGym paper: 4-5×")
    ax.axvline(STATED_LATENCY_S, color="0.5", ls=":", lw=0.8)
    ax2 = ax.twinx()
    ax2.plot(m.index, m.gpu_busy_async, "s--", color="C1", alpha=0.6, label="GPU busy, async")
    ax2.plot(m.index, m.gpu_busy_naive, "^--", color="C3", alpha=0.6, label="GPU busy, naive")
    ax2.set_ylabel("GPU busy fraction")
    ax2.grid(False)
    ax.set(xscale="log", xlabel="median environment latency per step (s)",
           ylabel="speed-up", title="multi-turn agents: 64 episodes, 2-20 turns, 1 GPU")
    ax.legend(loc="center left")
    ax2.legend(loc="lower right")
    return fig



def learning_figure(table: pd.DataFrame, curves: dict):
    fig, (ax, bx) = subplots(1, 2, figsize=(12.5, 4.2), gridspec_kw={"wspace": 0.3})
    x = np.arange(len(LEARN_ETAS))
    for i, (corr, sub) in enumerate(table[table.system == "AReaL"].groupby("correction")):
        for kind, style in (("simulated", "o-"), ("worst case", "s:")):
            s = sub[sub.kind == kind].sort_values("bound")
            ax.errorbar(x, s.mean_accuracy, yerr=s.mean_ci, fmt=style, color=f"C{i}",
                        capsize=2, label=f"{corr}, {kind} staleness")
    ax.set_xticks(x, [str(e) for e in LEARN_ETAS])
    ax.set(xlabel="max staleness η", ylabel="mean accuracy over the run (exact)",
           title="AReaL: naive vs decoupled PPO with stale rollouts")
    ax.legend()
    steps = np.arange(next(iter(curves.values())).shape[-1])
    colors = {c: f"C{i}" for i, c in enumerate(sorted({c for c, _ in curves}))}
    for (corr, eta), acc in curves.items():
        bx.plot(steps, acc.mean(0), label=f"{corr}, η={eta}", color=colors[corr],
                ls="-" if eta == 0 else "--")
    bx.set(xlabel="step", ylabel="accuracy", title="learning curves (worst-case staleness)")
    bx.legend(ncol=2)
    return fig



def stale_figure(results, names):
    """Held-out pass@1, clip fraction and behaviour/proximal k3 per arm, mean over every seed
    of every base (``results``: one :class:`rlvr_lab.papers.cures.small.Result` per base)."""
    fig, axes = subplots(1, 3, figsize=(15, 4.0))
    res = results[0]
    p1 = np.concatenate([r.pass1() for r in results], axis=-1)
    hist = {k: np.concatenate([r.history[k] for r in results], axis=-1)
            for k in ("clip_frac", "behav_k3")}
    for i, name in enumerate(names):
        ls = "-" if "decoupled" in name or name == "S=0" else "--"
        axes[0].plot(res.eval_steps, p1[:, i].mean(-1), ls, marker="o", ms=3, label=name)
        axes[1].plot(np.arange(1, res.steps + 1), hist["clip_frac"][:, i].mean(-1), ls,
                     label=name)
        axes[2].plot(np.arange(1, res.steps + 1), hist["behav_k3"][:, i].mean(-1), ls,
                     label=name)
    axes[0].set(xlabel="step", ylabel="held-out pass@1 (T = 1)",
                title="stale rollouts: naive (--) vs decoupled (—) PPO")
    axes[1].set(xlabel="step", ylabel="clipped tokens", title="clip fraction (2 epochs)")
    axes[2].set(xlabel="step", ylabel="k3(π_behav ‖ π_prox)", title="behaviour vs proximal")
    axes[0].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig

