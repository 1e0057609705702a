"""DARS / DARS-B (arXiv:2508.13755, docs/papers.md): the depth bias of GRPO,
difficulty-adaptive rollouts, breadth, and pass@k on the prompt bank and the tiny transformer.

Experiments:

* ``dars_theory`` — the cumulative advantage ``sum|A|`` of a group as a function of accuracy
  (plug-in closed form vs its exact expectation over the binomial group accuracy, with and
  without std), the ET/HW schedules, and the exact expected ``sum|A|`` and rollout cost of a
  DARS group vs p. Claim ``cumulative_advantage_peak``.
* ``dars_study`` — training on a prompt bank with many hard prompts: GRPO N=8, GRPO N=32,
  DARS-ET, DARS-HW, each with and without breadth (large batch, full-batch updates, 2 epochs,
  vs 4 mini-batch updates per step). Pass@1 / pass@k (exact population values
  ``1-(1-p)^k``, and the unbiased estimator from 128 samples at the end), token entropy and
  rollouts spent, at equal steps and at equal rollout budget. Claims ``naive_n32_*``,
  ``dars_raises_passk*``, ``breadth_*``, ``dars_b_both``, ``dars_no_extra_cost``. In the bank
  prompts share no parameters, so the sharpening cost of N=32 and the gradient-noise side of
  breadth cannot show there: ``dars_small`` repeats the study where they can.
* ``dars_small`` (small model) — the tiny transformer of ``tiny_grpo`` (SFT base with
  carry-dropping demonstrations, binary verifier), DARS's advantage ``r - mean`` for every arm:
  GRPO N=8, GRPO N=32 and DARS-ET (N=8, n_max=32; full mode adds DARS-HW n_max=64 and breadth
  +B: 4x the prompts per step in one full-batch update, so every rollout is used in one update
  as in the mini-batch arm). The **headline is equal budget**: GRPO N=8 runs as many steps as
  make its rollouts equal to DARS-ET's measured total (:func:`run_small`), and the arms are
  compared there; equal steps is reported too. Held-out pass@k up to k=64 (quick: 8);
  breadth at equal rollouts and token entropy at equal smoothed batch pass@1; the cost claim
  reads DARS's rollouts per step over the last quarter of the run, with the run's plateau test
  and the share of held-out problems the base never solves (pass@k_max = 0) stated. Gated on
  GRPO N=8's held-out gain over the SFT base. ``DARS-B`` (DARS + breadth) is not run on the
  small model (its padded stage shape costs 4x DARS-ET per step on CPU).

The functions below are also what ``notebooks/03_dars.ipynb`` calls, so the figures agree.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from rlvr_lab import allocation, metrics, plotting, stats, theory
from rlvr_lab.envs import prompt_bank
from rlvr_lab.envs.prompt_bank import PromptBankConfig
from rlvr_lab.experiments import claim, experiment
from rlvr_lab.models import tabular
from rlvr_lab.papers.dars.small import budget_steps, smooth, value_at_level
from rlvr_lab.papers.dars.theory import expected_cumulative_advantage_dars
from rlvr_lab.train import bandit, sequence
from simulations import tiny_grpo

PAPER = "DARS"
REF = "arXiv:2508.13755"
# docs/papers.md, Qwen2.5-Math-1.5B, Avg@128 / Pass@128 (percent)
PAPER_NUMBERS = {"GRPO": (49.6, 79.6), "DARS-ET": (50.0, 81.2), "DARS-ET-B": (52.5, 80.8),
                 "DARS-HW": (50.0, 82.1), "DARS-HW-B": (52.4, 82.2)}
DEPTH = ("GRPO N=8", "GRPO N=32", "DARS-ET", "DARS-HW")
METHODS = DEPTH + tuple(f"{m} +B" for m in DEPTH)
N_STAGE1 = 8
N_MAX = {"DARS-ET": 32, "DARS-HW": 64}   # the paper's caps with N = 8


# ----------------------------------------------------------------------------- theory
def theory_curves(n: int = N_STAGE1, num: int = 401) -> pd.DataFrame:
    """Long-form ``sum|A|`` and rollout cost vs accuracy/p: plug-in, expected, DARS ET/HW."""
    with jax.enable_x64():
        a = np.linspace(0.0, 1.0, num)
        rows = []
        for scale in ("none", "std"):
            rows.append(("plug-in", scale, a, theory.cumulative_advantage(a, n, scale=scale),
                         np.full_like(a, n)))
            rows.append(("expected", scale, a,
                         theory.expected_cumulative_advantage(a, n, scale=scale),
                         np.full_like(a, n)))
            rows.append((f"GRPO N={4 * n} expected", scale, a,
                         theory.expected_cumulative_advantage(a, 4 * n, scale=scale),
                         np.full_like(a, 4 * n)))
            for sched, label in (("et", "DARS-ET"), ("hw", "DARS-HW")):
                val, cost = expected_cumulative_advantage_dars(
                    a, n, N_MAX[label], schedule=sched, scale=scale)
                rows.append((f"{label} expected", scale, a, val, cost))
    frames = [pd.DataFrame({"curve": c, "scale": s, "p": x, "sum_abs_adv": np.asarray(v),
                            "rollouts": np.asarray(r)}) for c, s, x, v, r in rows]
    return pd.concat(frames, ignore_index=True)


def schedule_table(n: int = N_STAGE1) -> pd.DataFrame:
    """Extra rollouts per stage-1 accuracy k/n (the paper's check table for n = 8)."""
    acc = np.arange(n + 1) / n
    out = {"correct_of_n": np.arange(n + 1), "acc": acc}
    for scale in ("none", "std"):
        for sched, label in (("et", "ET"), ("hw", "HW")):
            n_max = N_MAX[f"DARS-{label}"]
            out[f"{label} ({scale})"] = np.asarray(
                allocation.dars_extra_rollouts(acc, n, n_max, schedule=sched, scale=scale))
    return pd.DataFrame(out)


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


@experiment("dars_theory", paper=PAPER, claims=("cumulative_advantage_peak",))
def run_theory(ctx):
    """Cumulative advantage closed forms (plug-in vs expected) and the DARS schedules."""
    curves = theory_curves()
    table = schedule_table()
    ctx.save_table(curves, "dars_theory_curves")
    ctx.save_table(table, "dars_schedule_table")
    ctx.save_figure(theory_figure(curves, table), "dars_theory")
    checks, argmaxes = [], []
    for _, d in curves[curves.curve.isin(["plug-in", "expected"])].groupby(["curve", "scale"]):
        v = d.sum_abs_adv.to_numpy()
        argmax = float(d.p.to_numpy()[np.argmax(v)])
        argmaxes.append(argmax)
        checks.append(argmax == 0.5 and v[0] == 0 and v[-1] == 0 and np.all(v[1:-1] > 0))
    ratio = curves[(curves.curve == "expected") & (curves.scale == "none")].sum_abs_adv.to_numpy()
    plug = curves[(curves.curve == "plug-in") & (curves.scale == "none")].sum_abs_adv.to_numpy()
    gap = float(np.median(ratio[1:-1] / plug[1:-1]))
    return [claim(
        "cumulative_advantage_peak",
        "Σ|A| = 2N·a(1−a) (no std) / 2N·√(a(1−a)) (std) peaks at a = 0.5 and vanishes at a = 0 "
        "and 1; the same holds for its exact expectation over the binomial group accuracy",
        measured=float(np.max(np.abs(np.asarray(argmaxes) - 0.5))), passed=all(checks),
        criterion="argmax over a 401-point grid is exactly 0.5 for plug-in and expected, both "
                  "scales; value exactly 0 at a ∈ {0,1} and > 0 inside (measured: max "
                  "|argmax − 0.5|)",
        paper=PAPER, paper_value="2N·a(1−a), peak at 0.5, 0 at a ∈ {0,1}",
        setting="theory", paper_ref=REF,
        reason=f"expected/plug-in = {gap:.4f} = (N−1)/N for N={N_STAGE1} (no std): the "
               "plug-in overstates what a prompt receives on average")]


# ----------------------------------------------------------------------------- study settings
@dataclass(frozen=True)
class StudySettings:
    """Bank and trainer settings of the study (depth runs; breadth scales the batch)."""

    num_prompts: int = 128
    vocab_size: int = 16
    difficulty_a: float = 0.3          # Beta(a, b) initial success: most prompts hard
    difficulty_b: float = 2.0
    min_p0: float = 5e-4
    batch_size: int = 32               # depth runs: 32 prompts, 4 mini-batch updates per step
    num_minibatches: int = 4
    breadth_batch_size: int = 128      # breadth: 4x the prompts, 1 full-batch update, 2 epochs
    breadth_iterations: int = 2
    num_steps: int = 200
    learning_rate: float = 0.05
    eval_samples: int = 128            # samples per prompt for the unbiased pass@k at the end
    ks: tuple = (1, 2, 4, 8, 16, 32, 64, 128)
    early_fraction: float = 0.2        # "early progress" = this fraction of the steps

    def __post_init__(self):
        for name in ("num_prompts", "batch_size", "breadth_batch_size", "num_steps",
                     "eval_samples", "num_minibatches", "breadth_iterations"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name}={v!r} must be a positive integer")
        if max(self.ks) > self.eval_samples:
            raise ValueError(f"ks={self.ks!r} must not exceed eval_samples={self.eval_samples}")
        if not 0 < self.early_fraction < 1:
            raise ValueError(f"early_fraction={self.early_fraction!r} must be in (0, 1)")

    def bank(self) -> PromptBankConfig:
        return PromptBankConfig(num_prompts=self.num_prompts, vocab_size=self.vocab_size,
                                difficulty_a=self.difficulty_a, difficulty_b=self.difficulty_b,
                                min_p0=self.min_p0)


FULL = StudySettings()
QUICK = StudySettings(num_prompts=64, batch_size=16, breadth_batch_size=64, num_steps=40)
# each method is one compile of the trainer (~5 s CPU): quick mode runs the four that the
# N=32, DARS-HW and breadth claims need; the DARS-ET claims are then "not evaluated"
QUICK_METHODS = ("GRPO N=8", "GRPO N=32", "DARS-HW", "DARS-HW +B")


def method_configs(s: StudySettings, methods=METHODS) -> dict[str, bandit.BanditConfig]:
    """BanditConfig per method; DARS's advantage ``r - mean`` (no std) for every method."""
    base = bandit.BanditConfig(
        bank=s.bank(), num_steps=s.num_steps, batch_size=s.batch_size,
        num_generations=N_STAGE1, advantage="grpo", scale_rewards="none",
        loss_agg_mode="token-mean", num_minibatches=s.num_minibatches, num_iterations=1,
        learning_rate=s.learning_rate, eval_ks=(1, 8, 32, 128))
    depth = {
        "GRPO N=8": base,
        "GRPO N=32": base.replace(num_generations=4 * N_STAGE1),
        "DARS-ET": base.replace(rollout="dars", rollout_options=(
            ("schedule", "et"), ("n_max", N_MAX["DARS-ET"]))),
        "DARS-HW": base.replace(rollout="dars", rollout_options=(
            ("schedule", "hw"), ("n_max", N_MAX["DARS-HW"]))),
    }
    out = {}
    for name in methods:
        depth_name = name.removesuffix(" +B")
        cfg = depth[depth_name]
        if name.endswith(" +B"):
            cfg = cfg.replace(batch_size=s.breadth_batch_size, num_minibatches=1,
                              num_iterations=s.breadth_iterations)
        out[name] = cfg
    return out


# ----------------------------------------------------------------------------- running
def final_evaluation(key, logits, bank, ks, num_samples: int):
    """Exact population pass@k and the unbiased estimator from ``num_samples`` draws.

    ``logits [S, K, V]`` (seeds). Returns dict of ``[S]`` arrays: ``pass@k`` (exact, mean over
    prompts), ``pass@k_unbiased``, ``entropy``.
    """
    p = jax.vmap(prompt_bank.success_probability, in_axes=(0, None))(logits, bank.correct)
    keys = jax.random.split(key, logits.shape[0])

    def count(k, lg):
        answers = tabular.sample(k, lg, num_samples)
        return prompt_bank.is_correct(bank, jnp.arange(lg.shape[0]), answers).sum(-1)

    c = np.asarray(jax.vmap(count)(keys, logits))
    out = {"entropy": np.asarray(jax.vmap(tabular.entropy)(logits).mean(-1))}
    for k in ks:
        out[f"pass@{k}"] = np.asarray(metrics.pass_at_k_exact(p, k).mean(-1))
        out[f"pass@{k}_unbiased"] = np.asarray(metrics.pass_at_k(num_samples, c, k)).mean(-1)
    return out


def run_study(key, s: StudySettings, num_seeds: int, methods=METHODS) -> dict:
    """Train every method on ``num_seeds`` seeds. Returns ``{"curves": long DataFrame (method,
    seed, step, metric, value; 'cum_rollouts' is the budget consumed before the step),
    "final": DataFrame (method, seed, metric, value), "totals": DataFrame of DARS totals}``."""
    curves, finals, totals = [], [], []
    for i, (name, cfg) in enumerate(method_configs(s, methods).items()):
        states, m = bandit.train_seeds(cfg, key, num_seeds)
        m = {k: np.asarray(v) for k, v in m.items()}
        spent = m["rollouts"]
        m["cum_rollouts"] = np.cumsum(spent, axis=1) - spent
        curves.append(bandit.metrics_frame(m, method=name))
        bank = prompt_bank.make_bank(cfg.bank)
        fin = final_evaluation(jax.random.fold_in(key, 1000 + i), states.logits, bank, s.ks,
                               s.eval_samples)
        fin["cum_rollouts"] = spent.sum(axis=1)
        for metric, vals in fin.items():
            finals.append(pd.DataFrame({"method": name, "seed": np.arange(num_seeds),
                                        "metric": metric, "value": np.asarray(vals, float)}))
        if cfg.rollout == "dars":
            t = states.rollout_state
            totals.append({"method": name, **{f: float(np.mean(getattr(t, f)))
                                               for f in t._fields}})
    return {"curves": pd.concat(curves, ignore_index=True),
            "final": pd.concat(finals, ignore_index=True),
            "totals": pd.DataFrame(totals)}


def per_seed(final: pd.DataFrame, method: str, metric: str) -> np.ndarray:
    d = final[(final.method == method) & (final.metric == metric)].sort_values("seed")
    return d.value.to_numpy()


def curve_matrix(curves: pd.DataFrame, method: str, metric: str) -> np.ndarray:
    """``[seeds, steps]`` array of one metric of one method."""
    d = curves[(curves.method == method) & (curves.metric == metric)]
    return d.pivot(index="seed", columns="step", values="value").to_numpy()


def at_budget(result: dict, method: str, metric: str, budget: float) -> np.ndarray:
    """Per-seed value of ``metric`` once ``budget`` rollouts have been spent (interpolated
    between recorded steps, the final policy closing the curve); NaN if never reached."""
    vals = curve_matrix(result["curves"], method, metric)
    cum = curve_matrix(result["curves"], method, "cum_rollouts")
    fin_v = per_seed(result["final"], method, metric)
    fin_c = per_seed(result["final"], method, "cum_rollouts")
    out = np.full(vals.shape[0], np.nan)
    for i in range(vals.shape[0]):
        x = np.append(cum[i], fin_c[i])
        y = np.append(vals[i], fin_v[i])
        if budget <= x[-1]:
            out[i] = np.interp(budget, x, y)
    return out


def at_level(result: dict, method: str, metric: str, level_metric: str, level: float):
    """Per-seed value of ``metric`` when ``level_metric`` first reaches ``level`` (linear
    interpolation between the two recorded steps around the crossing); NaN if never reached."""
    vals = curve_matrix(result["curves"], method, metric)
    lev = curve_matrix(result["curves"], method, level_metric)
    out = np.full(vals.shape[0], np.nan)
    for i in range(vals.shape[0]):
        hit = np.flatnonzero(lev[i] >= level)
        if hit.size == 0:
            continue
        j = hit[0]
        if j == 0:
            out[i] = vals[i, 0]
            continue
        w = (level - lev[i, j - 1]) / (lev[i, j] - lev[i, j - 1])
        out[i] = vals[i, j - 1] + w * (vals[i, j] - vals[i, j - 1])
    return out


def entropy_level(result: dict) -> float:
    """The pass@1 level every run reaches: 0.9 x the lowest final mean pass@1 over methods."""
    final = result["final"]
    return 0.9 * min(per_seed(final, m, "pass@1").mean() for m in final.method.unique())


def diff_ci(a, b):
    """Mean and 95% half-width of ``a - b`` over seeds (seeds i.i.d.; pairs by index)."""
    mean, half = plotting.mean_ci(np.asarray(a) - np.asarray(b))
    return float(mean), float(half)


def summary_table(result: dict, s: StudySettings) -> pd.DataFrame:
    """Per method: final metrics at equal steps and at the GRPO N=8 budget (mean ± CI)."""
    final = result["final"]
    budget = float(per_seed(final, "GRPO N=8", "cum_rollouts").mean())
    rows = []
    for method in final.method.unique():
        row = {"method": method,
               "rollouts_total": per_seed(final, method, "cum_rollouts").mean()}
        for metric in ("pass@1", "pass@8", "pass@32", "pass@128", "entropy"):
            m, h = plotting.mean_ci(per_seed(final, method, metric))
            row[f"{metric} (steps)"], row[f"{metric} (steps) ci"] = float(m), float(h)
            m, h = plotting.mean_ci(at_budget(result, method, metric, budget))
            row[f"{metric} (budget)"], row[f"{metric} (budget) ci"] = float(m), float(h)
        rows.append(row)
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- figures
def _style(method):
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
            color, ls = _style(method)
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
            color, ls = _style(method)
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
            color, ls = _style(method)
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
            color, ls = _style(method)
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


# ----------------------------------------------------------------------------- claims
def _fmt(m, h):
    return f"{m:+.4f}±{h:.4f}"


def _skipped(id, statement, paper_value, missing):
    return claim(id, statement, measured="", passed=None, criterion="", paper=PAPER,
                 paper_value=paper_value, setting="bank", paper_ref=REF,
                 reason=f"not evaluated: this run has no {', '.join(missing)} (quick mode runs "
                        f"{', '.join(QUICK_METHODS)})")


def study_claims(result: dict, s: StudySettings) -> list:
    final, curves = result["final"], result["curves"]
    present = set(final.method.unique())
    f = lambda m, k: per_seed(final, m, k)  # noqa: E731
    budget = float(f("GRPO N=8", "cum_rollouts").mean())
    P = PAPER_NUMBERS
    out = []

    early = int(round(s.early_fraction * s.num_steps))
    e32 = curve_matrix(curves, "GRPO N=32", "pass@1")[:, early]
    e8 = curve_matrix(curves, "GRPO N=8", "pass@1")[:, early]
    de, he = diff_ci(e32, e8)
    dk, hk = diff_ci(f("GRPO N=32", "pass@128"), f("GRPO N=8", "pass@128"))
    out.append(claim(
        "naive_n32_early_not_final",
        "naively raising N (8 -> 32) speeds early progress but does not raise final pass@K",
        measured=f"early Δpass@1={_fmt(de, he)} (step {early}); final Δpass@128={_fmt(dk, hk)}",
        passed=(de - he > 0) and (dk - hk <= 0),
        criterion="at equal steps: early Δpass@1 CI above 0 AND final Δpass@128 CI not above 0 "
                  f"({len(e32)} seeds, 95% t-CI)",
        paper=PAPER, setting="bank", paper_ref=REF,
        paper_value="N=32 converges faster; Pass@K not higher (can be lower)",
        reason="" if dk - hk <= 0 else
        "in the tabular bank prompts share no parameters, so the extra successes N=32 finds on "
        "hard prompts only help them: no sharpening cost elsewhere"))

    for label, sched in (("DARS-ET", "ET"), ("DARS-HW", "HW")):
        if label not in present:
            out.append(_skipped(f"dars_raises_passk_{sched.lower()}",
                                f"{label} raises pass@128 over GRPO (N=8) at equal steps",
                                f"Pass@128 {P[label][1]} vs {P['GRPO'][1]}", [label]))
            out.append(_skipped(f"dars_raises_passk_{sched.lower()}_equal_budget",
                                f"{label} raises pass@128 over GRPO (N=8) at GRPO's budget",
                                "'no extra inference cost at convergence'", [label]))
            continue
        d, h = diff_ci(f(label, "pass@128"), f("GRPO N=8", "pass@128"))
        out.append(claim(
            f"dars_raises_passk_{sched.lower()}",
            f"{label} raises pass@128 over GRPO (N=8) at equal steps",
            measured=d, passed=d - h > 0,
            criterion=f"final pass@128 difference, 95% CI lower bound > 0 (±{h:.4f})",
            paper=PAPER, setting="bank", paper_ref=REF,
            paper_value=f"Pass@128 {P[label][1]} vs {P['GRPO'][1]}"))
        db, hb = diff_ci(at_budget(result, label, "pass@128", budget),
                         at_budget(result, "GRPO N=8", "pass@128", budget))
        out.append(claim(
            f"dars_raises_passk_{sched.lower()}_equal_budget",
            f"{label} raises pass@128 over GRPO (N=8) at GRPO's total rollout budget",
            measured=db, passed=db - hb > 0,
            criterion=f"pass@128 difference at {budget:.0f} rollouts, CI lower bound > 0 "
                      f"(±{hb:.4f})",
            paper=PAPER, setting="bank", paper_ref=REF,
            paper_value="'no extra inference cost at convergence'",
            reason="" if db - hb > 0 else
            "per rollout, DARS's extra samples on hard prompts buy less than GRPO's "
            "additional steps over fresh batches"))

    diffs_p1, diffs_h, ok_p1, ok_h = [], [], True, True
    pairs = [m for m in DEPTH if m in present and f"{m} +B" in present]
    for m in pairs:
        d, h = diff_ci(f(f"{m} +B", "pass@1"), f(m, "pass@1"))
        diffs_p1.append(f"{m}: {_fmt(d, h)}")
        ok_p1 &= d - h > 0
        d, h = diff_ci(f(f"{m} +B", "entropy"), f(m, "entropy"))
        diffs_h.append(f"{m}: {_fmt(d, h)}")
        ok_h &= d - h > 0
    out.append(claim(
        "breadth_raises_pass1",
        f"breadth ({s.breadth_batch_size // s.batch_size}x batch, full-batch updates, "
        f"{s.breadth_iterations} epochs) raises pass@1 at equal steps",
        measured="; ".join(diffs_p1), passed=ok_p1,
        criterion=f"Δpass@1 (+B minus mini-batch) CI lower bound > 0 for all {len(pairs)} "
                  "methods run with and without breadth",
        paper=PAPER, setting="bank", paper_ref=REF,
        paper_value=f"Avg@128 ET {P['DARS-ET'][0]}→{P['DARS-ET-B'][0]}, "
                    f"HW {P['DARS-HW'][0]}→{P['DARS-HW-B'][0]}"))
    out.append(claim(
        "breadth_keeps_entropy_higher",
        "breadth keeps token entropy higher (final entropy, equal steps)",
        measured="; ".join(diffs_h), passed=ok_h,
        criterion=f"Δentropy (+B minus mini-batch) CI lower bound > 0 for all {len(pairs)} "
                  "methods run with and without breadth",
        paper=PAPER, setting="bank", paper_ref=REF,
        paper_value="higher token entropy with large breadth (curves)",
        reason="" if ok_h else
        "breadth feeds several times the prompts per step, so the bank policy sharpens "
        "faster and entropy falls faster per step (per rollout spent it stays higher: "
        "dars_training, bottom right; at equal pass@1 see the next claim)"))
    level = entropy_level(result)
    diffs_l, ok_l, largest = [], True, 0.0
    for m in pairs:
        d, h = diff_ci(at_level(result, f"{m} +B", "entropy", "pass@1", level),
                       at_level(result, m, "entropy", "pass@1", level))
        diffs_l.append(f"{m}: {_fmt(d, h)}")
        ok_l &= d - h > 0
        largest = max(largest, abs(d))
    out.append(claim(
        "breadth_keeps_entropy_higher_equal_pass1",
        f"breadth keeps token entropy higher at equal progress (entropy when pass@1 first "
        f"reaches {level:.3f})",
        measured="; ".join(diffs_l), passed=ok_l,
        criterion=f"Δentropy (+B minus mini-batch) at pass@1 = {level:.3f}, CI lower bound > 0 "
                  f"for all {len(pairs)} methods run with and without breadth",
        paper=PAPER, setting="bank", paper_ref=REF,
        paper_value="higher token entropy with large breadth (curves)",
        reason="" if ok_l else
        f"at the same pass@1 the entropy with and without breadth differs by at most "
        f"{largest:.3f} nats: in the tabular bank breadth buys no measurable exploration"))
    hb1 = "DARS-HW +B"
    d1, h1 = diff_ci(f(hb1, "pass@1"), f("GRPO N=8", "pass@1"))
    dk, hk = diff_ci(f(hb1, "pass@128"), f("GRPO N=8", "pass@128"))
    out.append(claim(
        "dars_b_both",
        "DARS-HW-B raises both pass@1 and pass@128 over GRPO at equal steps",
        measured=f"Δpass@1={_fmt(d1, h1)}; Δpass@128={_fmt(dk, hk)}",
        passed=(d1 - h1 > 0) and (dk - hk > 0),
        criterion="both CI lower bounds > 0",
        paper=PAPER, setting="bank", paper_ref=REF,
        paper_value=f"{P['GRPO'][0]}/{P['GRPO'][1]} → "
                    f"{P['DARS-HW-B'][0]}/{P['DARS-HW-B'][1]}"))
    last = max(1, s.num_steps // 10)
    ratios = []
    labels = [m for m in ("DARS-ET", "DARS-HW") if m in present]
    for label in labels:
        per_step = curve_matrix(curves, label, "rollouts")[:, -last:].mean()
        ratios.append(per_step / (s.batch_size * N_STAGE1))
    out.append(claim(
        "dars_no_extra_cost_at_convergence",
        "at convergence DARS spends (almost) no more rollouts than GRPO",
        measured=float(max(ratios)), passed=max(ratios) <= 1.1,
        criterion=f"rollouts per step over the last {last} steps / (B·N) <= 1.1 ("
                  + ", ".join(f"{m} {r:.2f}" for m, r in zip(labels, ratios)) + ")",
        paper=PAPER, setting="bank", paper_ref=REF,
        paper_value="no extra inference cost at convergence",
        reason="" if max(ratios) <= 1.1 else
        "the bank's hardest prompts are still below 0.5 accuracy at the end of the run "
        "(many at stage-1 accuracy 0, which triggers the largest stage 2), so DARS keeps "
        "paying for them"))
    return out


@experiment("dars_study", paper=PAPER, claims=(
    "naive_n32_early_not_final", "dars_raises_passk_et", "dars_raises_passk_et_equal_budget",
    "dars_raises_passk_hw", "dars_raises_passk_hw_equal_budget", "breadth_raises_pass1",
    "breadth_keeps_entropy_higher", "breadth_keeps_entropy_higher_equal_pass1", "dars_b_both",
    "dars_no_extra_cost_at_convergence"))
def run_study_experiment(ctx):
    """GRPO N=8/32 vs DARS-ET/HW, ± breadth, on a bank with many hard prompts."""
    s, methods = (QUICK, QUICK_METHODS) if ctx.quick else (FULL, METHODS)
    result = run_study(ctx.key(5), s, ctx.seeds, methods)
    curves = result["curves"]
    keep = curves.metric.isin(["pass@1", "pass@8", "pass@32", "pass@128", "entropy",
                               "rollouts", "cum_rollouts"])
    ctx.save_table(curves[keep].groupby(["method", "metric", "step"], as_index=False).value
                   .mean(), "dars_study_curves_mean")
    ctx.save_table(result["final"], "dars_study_final")
    ctx.save_table(result["totals"], "dars_study_totals")
    ctx.save_table(summary_table(result, s), "dars_study_summary")
    ctx.save_figure(training_figure(result), "dars_training")
    ctx.save_figure(passk_figure(result, s), "dars_passk")
    ctx.save_figure(rollouts_figure(result), "dars_rollouts")
    return study_claims(result, s)


# ============================================================================ small model
SMALL_N_MAX = {"DARS-ET": 32, "DARS-HW": 64}
BREADTH = 4          # the +B arm: BREADTH x the prompts per step, one full-batch update
PLATEAU_MARGIN = 0.03   # a run has plateaued: last-segment change within +-0.03 (TOST)


def small_base(quick: bool):
    """``tiny_grpo``'s recipe with DARS's advantage ``r - mean`` (no std) for every arm
    (quick: B=16, 12 steps, pass@k to k=8 on 64 held-out problems; full: B=32, 60 steps,
    k to 64 on 64)."""
    rl = tiny_grpo.rl_config(quick)
    common = dict(advantage="grpo", scale_rewards="none", num_generations=N_STAGE1)
    if quick:
        return dataclasses.replace(rl, steps=12, num_prompts=16, eval_every=6, eval_problems=64,
                                   eval_samples=8, **common)
    return dataclasses.replace(rl, steps=60, num_prompts=32, eval_every=15, eval_problems=64,
                               eval_samples=64, **common)


def small_arm(base, name: str, steps: int | None = None):
    """The config of one arm (``steps`` overrides the base's, e.g. GRPO at DARS's budget)."""
    changes: dict = {} if steps is None else {"steps": steps}
    depth = name.removesuffix(" +B")
    if depth == "GRPO N=32":
        changes["num_generations"] = 4 * N_STAGE1
    elif depth in SMALL_N_MAX:
        sched = depth.split("-")[1].lower()
        changes.update(rollout="dars", rollout_options=(("schedule", sched),
                                                        ("n_max", SMALL_N_MAX[depth])))
    if name.endswith(" +B"):
        changes.update(num_prompts=BREADTH * base.num_prompts, num_minibatches=1)
    return dataclasses.replace(base, **changes)


def small_rollouts(run, config) -> np.ndarray:
    """``[steps, seeds]`` rollouts generated per step (a stage reports its spend; a uniform
    step spends ``num_prompts * num_generations``)."""
    if "rollouts" in run.history:
        return np.asarray(run.history["rollouts"], np.float64)
    steps, seeds = np.asarray(run.history["pass1"]).shape
    return np.full((steps, seeds), float(config.num_prompts * config.num_generations))


def eval_at(run, step: int) -> np.ndarray:
    """Held-out pass@k ``[seeds, K]`` at the evaluation of ``step`` (must be one)."""
    steps = list(np.asarray(run.evals["step"]))
    if step not in steps:
        raise ValueError(f"no evaluation at step {step}; evaluated at {steps}")
    return np.asarray(run.evals["pass_at"])[steps.index(step)]


def run_small(key, quick: bool, num_seeds: int, progress=None):
    """Train the arms; GRPO N=8 runs until its rollouts equal DARS-ET's total (mean over
    seeds), evaluated at every ``eval_every`` and at that budget. Returns ``(runs, configs,
    info)`` with ``info`` the budget-matching numbers."""
    base = small_base(quick)
    names = ["DARS-ET", "GRPO N=32"] + ([] if quick else ["DARS-HW", "GRPO N=8 +B"])
    configs = {n: small_arm(base, n) for n in names}
    trainers = {}
    runs = {}
    items = progress(names, "arms") if progress is not None else names
    base_policy = None
    for name in items:
        trainers[name] = sequence.Trainer(configs[name], base_policy=base_policy)
        base_policy = trainers[name].base_policy
        runs[name] = sequence.run(configs[name], key, num_seeds, trainer=trainers[name])
        if name == "DARS-ET":
            budget = float(small_rollouts(runs[name], configs[name]).sum(0).mean())
            t8 = max(budget_steps(budget, base.num_prompts, N_STAGE1), base.steps)
            configs["GRPO N=8"] = small_arm(base, "GRPO N=8", steps=t8)
            trainers["GRPO N=8"] = sequence.Trainer(configs["GRPO N=8"],
                                                    base_policy=base_policy)
            runs["GRPO N=8"] = sequence.run(configs["GRPO N=8"], key, num_seeds,
                                            trainer=trainers["GRPO N=8"])
    return runs, configs, {"budget": budget, "grpo_steps": t8}


def small_frame(runs, configs) -> pd.DataFrame:
    rows = []
    for name, run in runs.items():
        spent = np.cumsum(small_rollouts(run, configs[name]), axis=0)
        pa = np.asarray(run.evals["pass_at"])
        for e, step in enumerate(np.asarray(run.evals["step"])):
            for s in range(pa.shape[1]):
                rollouts = 0.0 if step == 0 else float(spent[step - 1, s])
                for k in (1, 2, 4, 8, 16, 32, 64):
                    if k <= pa.shape[2]:
                        rows.append(dict(method=name, step=int(step), seed=s, rollouts=rollouts,
                                         k=k, pass_at_k=float(pa[e, s, k - 1])))
    return pd.DataFrame(rows)


def small_figure(frame: pd.DataFrame, runs, configs, window: int):
    with plotting.house_style():
        fig, axes = plotting.subplots(1, 3, figsize=(15, 4))
        kmax = int(frame.k.max())
        for name in runs:
            color, ls = _style(name)
            for ax, k in ((axes[0], 1), (axes[1], kmax)):
                d = frame[(frame.method == name) & (frame.k == k)]
                g = d.groupby("step")
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


def _paired(a, b):
    return stats.paired_difference(np.asarray(a, float), np.asarray(b, float))


def _not_evaluated(id_, statement, paper_value, why):
    return claim(id_, statement, "", None, "", paper=PAPER, paper_value=paper_value,
                 setting="small model", paper_ref=REF, reason=f"not evaluated: {why}")


@experiment("dars_small", sft_bases=("quick",), paper=PAPER, claims=(
    "small_dars_passk_equal_budget", "small_dars_passk_equal_steps",
    "small_naive_n32_early_not_final", "small_dars_no_extra_cost_at_convergence",
    "small_dars_hw_passk_equal_budget", "small_breadth_raises_pass1_equal_rollouts",
    "small_breadth_entropy_higher_equal_pass1"), default_seeds=8, quick_seeds=4)
def run_small_experiment(ctx):
    """GRPO N=8 vs N=32 vs DARS on the tiny transformer at equal steps and equal rollouts."""
    runs, configs, info = run_small(ctx.key(9), ctx.quick, ctx.seeds, progress=ctx.progress)
    base = small_base(ctx.quick)
    s, early, kmax = base.steps, base.eval_every, base.eval_samples
    t8 = info["grpo_steps"]
    frame = small_frame(runs, configs)
    window = max(2, s // 8)
    ctx.save_table(frame, "dars_small_heldout")
    ctx.save_figure(small_figure(frame, runs, configs, window), "dars_small")
    g8 = runs["GRPO N=8"]
    base_pa = eval_at(g8, 0)
    control = tiny_grpo.control(base_pa[:, 0], eval_at(g8, s)[:, 0],
                                name=f"GRPO N=8 at step {s} vs SFT base")
    hopeless = 1.0 - float(base_pa[:, -1].mean())
    common = dict(paper=PAPER, setting="small model", paper_ref=REF)
    setting = (f"{ctx.seeds} seeds, B={base.num_prompts}, {s} steps (GRPO N=8: {t8} steps = "
               f"DARS-ET's mean budget {info['budget']:.0f} rollouts), held-out "
               f"{base.eval_problems} problems x {kmax} samples; hopeless held-out share at the "
               f"base (pass@{kmax} = 0) {hopeless:.3f}; {control.reason}")
    dars_end = eval_at(runs["DARS-ET"], s)
    at_budget = _paired(dars_end[:, -1], eval_at(g8, t8)[:, -1])
    at_budget1 = _paired(dars_end[:, 0], eval_at(g8, t8)[:, 0])
    at_steps = _paired(dars_end[:, -1], eval_at(g8, s)[:, -1])
    at_steps1 = _paired(dars_end[:, 0], eval_at(g8, s)[:, 0])
    e32 = _paired(eval_at(runs["GRPO N=32"], early)[:, 0], eval_at(g8, early)[:, 0])
    f32 = _paired(eval_at(runs["GRPO N=32"], s)[:, -1], eval_at(g8, s)[:, -1])
    spent = small_rollouts(runs["DARS-ET"], configs["DARS-ET"])
    last = max(1, s // 4)
    ratio = float(spent[-last:].mean() / (base.num_prompts * N_STAGE1))
    first = float(spent[:last].mean() / (base.num_prompts * N_STAGE1))
    dars_p1 = np.asarray(runs["DARS-ET"].evals["pass_at"])[:, :, 0]
    plateau = stats.equivalence(dars_p1[-1], dars_p1[-2], PLATEAU_MARGIN)
    P = PAPER_NUMBERS
    claims = [
        claim("small_dars_passk_equal_budget",
              f"DARS-ET raises held-out pass@{kmax} over GRPO (N=8) at equal rollouts (the "
              "headline: equal budget)",
              at_budget.mean, at_budget.above(0),
              f"95% t-interval of the paired difference DARS-ET (step {s}) - GRPO N=8 (step "
              f"{t8}, the same total rollouts) of held-out pass@{kmax} lies above 0",
              paper_value=f"Pass@128 {P['DARS-ET'][1]} vs {P['GRPO'][1]} (Qwen2.5-Math-1.5B); "
                          "'no extra inference cost at convergence'",
              reason=f"pass@{kmax}: {at_budget}; pass@1: {at_budget1}; {setting}", **common),
        claim("small_dars_passk_equal_steps",
              f"DARS-ET raises held-out pass@{kmax} over GRPO (N=8) at equal steps",
              at_steps.mean, at_steps.above(0),
              f"95% t-interval of the paired difference at step {s} lies above 0 (DARS spends "
              f"{info['budget'] / (s * base.num_prompts * N_STAGE1):.2f}x GRPO's rollouts)",
              paper_value=f"Pass@128 {P['DARS-ET'][1]} vs {P['GRPO'][1]}",
              reason=f"pass@{kmax}: {at_steps}; pass@1: {at_steps1}; {setting}", **common),
        claim("small_naive_n32_early_not_final",
              "naively raising N (8 -> 32) speeds early progress but does not raise final "
              f"pass@{kmax} (equal steps)",
              e32.mean, e32.above(0) and not f32.above(0),
              f"paired 95% t-intervals: held-out pass@1 N=32 - N=8 at step {early} above 0 AND "
              f"pass@{kmax} at step {s} not above 0 (measured = the early pass@1 difference)",
              paper_value="N=32 converges faster; Pass@K not higher (can be lower)",
              reason=f"early pass@1 {e32}; final pass@{kmax} {f32}; {setting}", **common),
        claim("small_dars_no_extra_cost_at_convergence",
              "at convergence DARS spends (almost) no more rollouts than GRPO",
              ratio, ratio <= 1.1,
              f"DARS-ET rollouts per step over the last {last} steps / (B N) <= 1.1, read only "
              f"from a run that has plateaued (paired TOST of DARS's held-out pass@1 change over "
              f"its last {base.eval_every} steps, margin {PLATEAU_MARGIN}); inconclusive "
              "otherwise",
              paper_value="no extra inference cost at convergence",
              verdict=None if plateau.equivalent else "inconclusive",
              reason=("" if plateau.equivalent else "the run has not plateaued, so this is not "
                      "'at convergence'; ")
              + f"first {last} steps {first:.2f}x, last {last} steps {ratio:.2f}x; DARS "
                f"held-out pass@1 change over the last {base.eval_every} steps {plateau} (90% "
                f"interval); {setting}", **common),
    ]
    claims = stats.gate(claims, control)
    if ctx.quick:
        why = "quick mode runs GRPO N=8/N=32 and DARS-ET only"
        claims += [
            _not_evaluated("small_dars_hw_passk_equal_budget",
                           "DARS-HW raises held-out pass@k over GRPO (N=8) at equal rollouts",
                           f"Pass@128 {P['DARS-HW'][1]} vs {P['GRPO'][1]}", why),
            _not_evaluated("small_breadth_raises_pass1_equal_rollouts",
                           "breadth raises held-out pass@1 at equal rollouts",
                           f"Avg@128 ET {P['DARS-ET'][0]}->{P['DARS-ET-B'][0]}", why),
            _not_evaluated("small_breadth_entropy_higher_equal_pass1",
                           "breadth keeps token entropy higher at equal pass@1",
                           "higher token entropy with large breadth (curves)", why)]
        return claims
    hw = _paired(eval_at(runs["DARS-HW"], s)[:, -1], eval_at(g8, t8)[:, -1])
    hw_budget = float(small_rollouts(runs["DARS-HW"], configs["DARS-HW"]).sum(0).mean())
    sb = s // BREADTH
    br = _paired(eval_at(runs["GRPO N=8 +B"], sb)[:, 0], eval_at(g8, s)[:, 0])
    br_steps = _paired(eval_at(runs["GRPO N=8 +B"], s)[:, 0], eval_at(g8, s)[:, 0])
    p1_b = smooth(np.asarray(runs["GRPO N=8 +B"].history["pass1"]).T, window)
    p1_8 = smooth(np.asarray(g8.history["pass1"]).T, window)
    level = 0.9 * min(p1_b[:, -1].mean(), p1_8[:, :s][:, -1].mean())
    ent_b = value_at_level(p1_b, smooth(np.asarray(runs["GRPO N=8 +B"].history["entropy"]).T,
                                        window), level)
    ent_8 = value_at_level(p1_8, smooth(np.asarray(g8.history["entropy"]).T, window), level)
    reached = np.isfinite(ent_b) & np.isfinite(ent_8)
    ent = _paired(ent_b[reached], ent_8[reached])
    more = [
        claim("small_dars_hw_passk_equal_budget",
              f"DARS-HW raises held-out pass@{kmax} over GRPO (N=8) at DARS-ET's budget",
              hw.mean, hw.above(0),
              f"95% t-interval of DARS-HW (step {s}) - GRPO N=8 (step {t8}) above 0",
              paper_value=f"Pass@128 {P['DARS-HW'][1]} vs {P['GRPO'][1]}",
              reason=f"{hw}; DARS-HW spent {hw_budget:.0f} rollouts vs DARS-ET "
                     f"{info['budget']:.0f} (so HW is compared at ET's budget, i.e. it spent "
                     f"{hw_budget / info['budget']:.2f}x); {setting}", **common),
        claim("small_breadth_raises_pass1_equal_rollouts",
              f"breadth ({BREADTH}x the prompts per step, one full-batch update) raises held-out "
              "pass@1 at equal rollouts and equal updates per prompt",
              br.mean, br.above(0),
              f"paired 95% t-interval of +B at step {sb} - GRPO N=8 at step {s} (same rollouts; "
              "every rollout in one optimizer update in both) above 0",
              paper_value=f"Avg@128 ET {P['DARS-ET'][0]}->{P['DARS-ET-B'][0]}, HW "
                          f"{P['DARS-HW'][0]}->{P['DARS-HW-B'][0]} (equal steps)",
              reason=f"{br}; at equal steps ({s}, {BREADTH}x the rollouts): {br_steps}; "
                     f"{setting}", **common),
        claim("small_breadth_entropy_higher_equal_pass1",
              "breadth keeps token entropy higher at equal progress",
              ent.mean, ent.above(0),
              f"paired 95% t-interval of token entropy (+B minus GRPO N=8) when the "
              f"{window}-step mean batch pass@1 first reaches {level:.3f} lies above 0",
              paper_value="higher token entropy with large breadth (curves)",
              reason=f"{ent}; {int(reached.sum())} of {reached.size} seeds reach the level in "
                     f"both arms; {setting}", **common),
    ]
    return claims + stats.gate(more, control)
