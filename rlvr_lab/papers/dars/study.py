"""The DARS prompt-bank study and the theory tables (``simulations/dars.py`` runs them).

- :func:`theory_curves`, :func:`schedule_table`, :func:`peak_errors`: the cumulative
  advantage ``sum|A|`` vs accuracy (plug-in and exact expectation, with and without std), the
  ET/HW schedules, and the errors of the claimed peak/zeros (``dars_theory``);
- :class:`StudySettings`, :func:`run_study`: GRPO N=8/N=32, DARS-ET/HW, each with and without
  breadth, trained on a prompt bank with many hard prompts; exact population pass@k and the
  unbiased estimator at the end;
- :func:`at_budget`, :func:`at_level`: per-seed readings at equal rollouts and at equal pass@1;
- :func:`study_numbers`: the per-seed numbers behind the ``dars_study`` claims.
"""
from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from rlvr_lab import allocation, metrics, plotting, theory
from rlvr_lab.envs import prompt_bank
from rlvr_lab.envs.prompt_bank import PromptBankConfig
from rlvr_lab.models import tabular
from rlvr_lab.papers.dars.small import value_at_level
from rlvr_lab.papers.dars.theory import expected_cumulative_advantage_dars
from rlvr_lab.train import bandit
from rlvr_lab import random_streams as streams

# the paper's numbers (docs/papers.md), Qwen2.5-Math-1.5B, Avg@128 / Pass@128 (percent)
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



def peak_errors(curves: pd.DataFrame) -> np.ndarray:
    """The errors of "sum|A| peaks at a = 0.5 and vanishes at a = 0 and 1 (positive inside)"
    for the plug-in and expected curves, both scales: per curve ``argmax - 0.5``, the values at
    a = 0 and a = 1, and the number of interior grid points with a value <= 0 (all 0 when the
    claim holds exactly)."""
    errors = []
    for _, d in curves[curves.curve.isin(["plug-in", "expected"])].groupby(["curve", "scale"]):
        v = d.sum_abs_adv.to_numpy()
        errors += [float(d.p.to_numpy()[np.argmax(v)]) - 0.5, float(v[0]), float(v[-1]),
                   float(np.sum(v[1:-1] <= 0))]
    return np.asarray(errors)


def plugin_gap(curves: pd.DataFrame) -> float:
    """Median of expected / plug-in ``sum|A|`` inside (0, 1), no std: ``(N - 1) / N``."""
    d = curves[curves.scale == "none"]
    exp = d[d.curve == "expected"].sum_abs_adv.to_numpy()[1:-1]
    plug = d[d.curve == "plug-in"].sum_abs_adv.to_numpy()[1:-1]
    return float(np.median(exp / plug))


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
# each method is one compile of the trainer (~5 s CPU): quick mode runs the five that every
# claim needs (both DARS schedules, and one method with breadth)
QUICK_METHODS = ("GRPO N=8", "GRPO N=32", "DARS-ET", "DARS-HW", "DARS-HW +B")


def method_configs(s: StudySettings, methods=METHODS) -> dict[str, bandit.BanditConfig]:
    """BanditConfig per method; DARS's advantage ``r - mean`` (no std) for every method."""
    base = bandit.BanditConfig(
        bank=s.bank(), steps=s.num_steps, num_prompts=s.batch_size,
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
            cfg = cfg.replace(num_prompts=s.breadth_batch_size, num_minibatches=1,
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
        fin = final_evaluation(streams.stream(key, "final-evaluation", i), states.logits, bank, s.ks,
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
    return value_at_level(curve_matrix(result["curves"], method, level_metric),
                          curve_matrix(result["curves"], method, metric), level)


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


def study_numbers(result: dict, s: StudySettings) -> dict[str, np.ndarray]:
    """The per-seed numbers behind the ``dars_study`` claims, keyed by claim id. Every
    difference is paired (same seed index, same key). Compound claims ("for every method run
    with and without breadth", "both pass@1 and pass@128") take the per-seed minimum of their
    parts, so a mean above the threshold implies every part's mean is."""
    final, curves = result["final"], result["curves"]
    present = set(final.method.unique())
    f = lambda m, k: per_seed(final, m, k)  # noqa: E731
    budget = float(f("GRPO N=8", "cum_rollouts").mean())
    early = int(round(s.early_fraction * s.num_steps))
    p1 = lambda m: curve_matrix(curves, m, "pass@1")[:, early]  # noqa: E731
    out = {"naive_n32_speeds_early": p1("GRPO N=32") - p1("GRPO N=8"),
           "naive_n32_early_not_final": f("GRPO N=32", "pass@128") - f("GRPO N=8", "pass@128")}
    for label in ("DARS-ET", "DARS-HW"):
        sched = label[-2:].lower()
        out[f"dars_raises_passk_{sched}"] = f(label, "pass@128") - f("GRPO N=8", "pass@128")
        out[f"dars_raises_passk_{sched}_equal_budget"] = (
            at_budget(result, label, "pass@128", budget)
            - at_budget(result, "GRPO N=8", "pass@128", budget))
    pairs = [m for m in DEPTH if m in present and f"{m} +B" in present]
    level = entropy_level(result)
    gains = lambda fn: np.min(np.stack([fn(f"{m} +B") - fn(m) for m in pairs]), 0)  # noqa: E731
    out["breadth_raises_pass1"] = gains(lambda m: f(m, "pass@1"))
    out["breadth_keeps_entropy_higher"] = gains(lambda m: f(m, "entropy"))
    out["breadth_keeps_entropy_higher_equal_pass1"] = gains(
        lambda m: at_level(result, m, "entropy", "pass@1", level))
    out["dars_b_both"] = np.minimum(f("DARS-HW +B", "pass@1") - f("GRPO N=8", "pass@1"),
                                    f("DARS-HW +B", "pass@128") - f("GRPO N=8", "pass@128"))
    last = max(1, s.num_steps // 10)
    out["dars_no_extra_cost_at_convergence"] = np.max(np.stack([
        curve_matrix(curves, m, "rollouts")[:, -last:].mean(1) / (s.batch_size * N_STAGE1)
        for m in ("DARS-ET", "DARS-HW")]), 0)
    return out

