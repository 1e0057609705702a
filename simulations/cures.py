"""CurES and E3: which prompts to train on and how many rollouts each gets.

Two experiments on the prompt bank (each prompt a softmax over V answers, exact gradients):

``cures_theory`` — (a) prompt sampling: exact per-prompt gradient norms vs p, expected
  first-order gain and the importance-sampling efficiency of CurES' softmax at several
  temperatures, and the noise-free (mean-field) gradient dynamics under each sampling rule:
  steps to a target accuracy; (b) rollout allocation: total variance of the stochastic
  gradient at a fixed budget for uniform, Neyman (exact sigma), sqrt(p(1-p)) (CurES), the
  same from a 4-rollout posterior, DARS ET/HW (rescaled to the budget) and E3 — analytic
  (oracle baseline) and Monte Carlo (oracle and leave-one-out baselines).
``cures_study`` — training at equal rollout budget per step (B·G): uniform GRPO, DAPO
  dynamic sampling (its refills are charged), CurES sampling only, allocation only, both,
  the authors' code form, E3 (n_max 12) and E3 (n_max 16). Rollouts to a target accuracy,
  final accuracy, entropy curves, fraction of all-incorrect groups.
(E3's entropy-targeting temperature is in ``simulations/e3.py``.)
"""
from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from rlvr_lab.papers.cures import posterior as cur
from rlvr_lab import plotting
from rlvr_lab.papers.cures import allocation as cures_alloc
from rlvr_lab.papers.e3 import allocation as e3_alloc
from rlvr_lab.train.budget import proportional_allocation, uniform_allocation
from rlvr_lab.envs import prompt_bank as pb
from rlvr_lab.experiments import claim, experiment
from rlvr_lab.papers.cures import theory as th

PAPER_CURES = "CurES"
PAPER_E3 = "E3"
VOCAB = 16
GROUP = 8
BANKS = {  # Beta(a, b) of the initial success probabilities
    "bimodal": (0.3, 0.3),  # many prompts already solved or hopeless: what curricula target
    "hard": (1.0, 3.0),     # most prompts hard, few solved
}
CURES_T = 0.1  # explicit CurES sampling temperature used in training


def bank_config(name: str, num_prompts: int, seed: int = 0) -> pb.PromptBankConfig:
    a, b = BANKS[name]
    return pb.PromptBankConfig(num_prompts=num_prompts, vocab_size=VOCAB, difficulty_a=a,
                               difficulty_b=b, seed=seed)


# ----------------------------------------------------------------------------- (b) allocation
def allocation_rules(p, sigma_sq, budget, key):
    """Rollout counts per prompt under each rule at the same total ``budget``."""
    k = p.shape[0]
    post, _ = cur.init_posterior_from_rollouts(key, p)
    from rlvr_lab.papers.dars.allocation import dars_extra_rollouts
    dars_et = GROUP + dars_extra_rollouts(p, GROUP, 32)
    dars_hw = GROUP + dars_extra_rollouts(p, GROUP, 64, schedule="hw")
    n_max = 8 * GROUP
    return {
        "uniform": uniform_allocation(k, budget),
        "Neyman (exact σ)": cures_alloc.neyman_allocation(jnp.sqrt(sigma_sq), budget,
                                                           max_per_prompt=n_max),
        "√(p(1−p)) (CurES)": cures_alloc.cures_allocation(p, budget, max_per_prompt=n_max),
        "√(p̂(1−p̂)), 4-rollout p̂": cures_alloc.cures_allocation(
            cur.posterior_mean(post), budget, max_per_prompt=n_max),
        "DARS-ET (rescaled)": proportional_allocation(dars_et.astype(jnp.float32), budget,
                                                      min_per_prompt=2),
        "DARS-HW (rescaled)": proportional_allocation(dars_hw.astype(jnp.float32), budget,
                                                      min_per_prompt=2),
        "E3 [4, 12]": e3_alloc.e3_allocation(e3_alloc.e3_ranks(p), budget, 4, 12,
                                             cap_at_max=True),
    }


def variance_table(quick: bool, key) -> tuple[pd.DataFrame, dict]:
    """Gradient variance per allocation rule and bank, analytic and Monte Carlo."""
    k = 64 if quick else 128
    draws = 300 if quick else 3000
    rows, shapes = [], {}
    for bank_name in BANKS:
        bank = pb.make_bank(bank_config(bank_name, k))
        mom = th.bank_gradient_moments(bank.logits0, bank.correct)
        rules = allocation_rules(mom.p, mom.sigma_sq, k * GROUP, jax.random.fold_in(key, k))
        rng = np.random.default_rng(0)
        base = float(th.allocation_variance(mom.sigma_sq, rules["uniform"]))
        for rule, n in rules.items():
            n = np.asarray(n)
            analytic = float(th.allocation_variance(mom.sigma_sq, n))
            rows.append({
                "bank": bank_name, "rule": rule, "budget": int(n.sum()), "n_min": int(n.min()),
                "n_max": int(n.max()), "analytic_oracle": analytic,
                "mc_oracle": th.mc_allocation_variance(rng, bank.logits0, bank.correct, n,
                                                       draws=draws),
                "mc_rloo": th.mc_allocation_variance(rng, bank.logits0, bank.correct, n,
                                                     draws=draws, baseline="rloo"),
                "ratio_uniform_over_rule": base / analytic})
        shapes[bank_name] = (np.asarray(mom.p), {r: np.asarray(n) for r, n in rules.items()},
                             np.asarray(mom.sigma_sq))
    df = pd.DataFrame(rows)
    uni = df[df.rule == "uniform"].set_index("bank")
    df["mc_rloo_ratio"] = df.bank.map(uni.mc_rloo) / df.mc_rloo
    return df, shapes


def variance_figure(df: pd.DataFrame, shapes: dict):
    fig, axes = plotting.subplots(1, 3, figsize=(15, 4.2))
    rules = list(dict.fromkeys(df.rule))
    x = np.arange(len(rules))
    for j, bank_name in enumerate(BANKS):
        d = df[df.bank == bank_name].set_index("rule").loc[rules]
        ax = axes[j]
        ax.bar(x - 0.27, d.analytic_oracle, 0.27, label="analytic, oracle baseline p")
        ax.bar(x, d.mc_oracle, 0.27, label="Monte Carlo, oracle baseline")
        ax.bar(x + 0.27, d.mc_rloo, 0.27, label="Monte Carlo, leave-one-out baseline")
        ax.set_xticks(x, rules, rotation=35, ha="right", fontsize=8)
        ax.set_ylabel("Σ_i tr Cov(ĝ_i)  (budget 8 per prompt)")
        ax.set_title(f"gradient variance by allocation — {bank_name} bank")
        if j == 0:
            ax.legend()
    ax = axes[2]
    p, rules_n, _ = shapes["bimodal"]
    order = np.argsort(p)
    for rule in ("uniform", "Neyman (exact σ)", "√(p(1−p)) (CurES)", "DARS-HW (rescaled)",
                 "E3 [4, 12]"):
        ax.plot(p[order], rules_n[rule][order], ".-", ms=3, lw=0.8, label=rule)
    ax.set_xlabel("success probability p of the prompt")
    ax.set_ylabel("rollouts n_i")
    ax.set_title("allocation shapes (bimodal bank)")
    ax.legend()
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- (a) sampling
def sampling_rules(batch_size: int):
    """Prompt-sampling rules ``(p, |grad p|^2) -> q`` for the mean-field dynamics."""
    rules = {
        "uniform": lambda p, g: jnp.full_like(p, 1.0 / p.shape[0]),
        "greedy top-B |∇p|²": lambda p, g: th.top_batch_distribution(g, batch_size),
        "q ∝ |∇p|²": lambda p, g: g / g.sum(),
        "q ∝ √(p(1−p))": lambda p, g: cur.gradient_scale_proxy(p) / cur.gradient_scale_proxy(
            p).sum(),
        "CurES code t=100(Acc+1)": lambda p, g: cur.cures_prompt_probs(p, 100.0),
    }
    def cures_at(t):
        return lambda p, g: cur.cures_prompt_probs(p, t)

    for t in (0.02, 0.05, 0.1, 0.3, 1.0):
        rules[f"CurES t={t}"] = cures_at(t)
    return rules


def sampling_analysis(quick: bool) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Mean-field accuracy curves per sampling rule, steps to target, IS efficiency."""
    k = 64 if quick else 128
    steps = 150 if quick else 300
    batch, lr = k // 4, 0.5
    curves, rows, per_prompt = [], [], {}
    for bank_name in BANKS:
        bank = pb.make_bank(bank_config(bank_name, k))
        mom = th.bank_gradient_moments(bank.logits0, bank.correct)
        m = mom.grad_sq + mom.sigma_sq / GROUP
        per_prompt[bank_name] = mom
        results = {}
        for rule, fn in sampling_rules(batch).items():
            curve = np.asarray(th.mean_field_descent(bank.logits0, bank.correct, fn, lr=lr,
                                                     batch_size=batch, num_steps=steps))
            results[rule] = curve
            curves.append(pd.DataFrame({"bank": bank_name, "rule": rule,
                                        "step": np.arange(steps + 1), "accuracy": curve}))
        uni = results["uniform"]
        target = float(uni[0] + 0.5 * (uni[-1] - uni[0]))
        for rule, fn in sampling_rules(batch).items():
            q = fn(mom.p, mom.grad_sq)
            rows.append({
                "bank": bank_name, "rule": rule, "target": target,
                "steps_to_target": th.steps_to_target(results[rule], target),
                "first_order_gain": float(th.sampling_gain(q, mom.grad_sq)),
                "is_efficiency": float(th.is_efficiency(q, m)),
                "max_prob_ratio": float(q.max() / jnp.maximum(q.min(), 1e-30))})
    table = pd.DataFrame(rows)
    best_gain = table.groupby("bank").first_order_gain.transform("max")
    table["gain_vs_best"] = table.first_order_gain / best_gain
    uni = table[table.rule == "uniform"].set_index("bank").steps_to_target
    table["speedup_vs_uniform"] = table.bank.map(uni) / table.steps_to_target
    return pd.concat(curves, ignore_index=True), table, per_prompt


def sampling_figure(curves, table, per_prompt):
    fig, axes = plotting.subplots(1, 3, figsize=(15, 4.2))
    ax = axes[0]
    mom = per_prompt["bimodal"]
    p = np.asarray(mom.p)
    order = np.argsort(p)
    norm = lambda v: np.asarray(v)[order] / np.asarray(v).max()  # noqa: E731
    ax.plot(p[order], norm(mom.grad_sq), label="|∇p|² (first-order gain)")
    ax.plot(p[order], norm(np.sqrt(mom.sigma_sq)), label="σ (exact)")
    ax.plot(p[order], norm(np.sqrt(p * (1 - p))), "--", label="√(p(1−p)) (CurES proxy)")
    for t in (0.05, 0.3):
        ax.plot(p[order], norm(cur.cures_prompt_probs(mom.p, t)), ":", label=f"CurES q, t={t}")
    ax.set_xlabel("success probability p")
    ax.set_ylabel("scaled to max 1")
    ax.set_title("per-prompt gradient scale vs p (bimodal bank)")
    ax.legend()
    ax = axes[1]
    d = curves[curves.bank == "bimodal"]
    for rule in ("uniform", "greedy top-B |∇p|²", "q ∝ |∇p|²", "CurES t=0.02", "CurES t=0.1",
                 "CurES t=1.0", "CurES code t=100(Acc+1)"):
        dd = d[d.rule == rule]
        ax.plot(dd.step, dd.accuracy, label=rule, lw=1.2,
                ls="--" if "code" in rule else "-")
    tgt = table[table.bank == "bimodal"].target.iloc[0]
    ax.axhline(tgt, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("step (exact expected gradient, B draws per step)")
    ax.set_ylabel("mean accuracy over the bank")
    ax.set_title("mean-field gradient descent by sampling rule")
    ax.legend()
    ax = axes[2]
    for bank_name, marker in zip(BANKS, ("o", "s")):
        d = table[(table.bank == bank_name) & table.rule.str.startswith("CurES t=")]
        ts = d.rule.str.removeprefix("CurES t=").astype(float)
        ax.semilogx(ts, d.speedup_vs_uniform, marker + "-", label=f"{bank_name}: speed-up "
                    "(steps to target)")
        ax.semilogx(ts, d.is_efficiency, marker + ":", label=f"{bank_name}: IS efficiency")
    ax.axhline(1.0, color="grey", lw=0.8, label="uniform (speed-up) / optimum (efficiency)")
    ax.set_xlabel("CurES sampling temperature t")
    ax.set_ylabel("ratio (1 = reference)")
    ax.set_title("CurES softmax vs uniform / vs the optimum")
    ax.legend()
    fig.tight_layout()
    return fig


@experiment("cures_theory", paper=PAPER_CURES, setting="theory",
            claims=("allocation_lowers_gradient_variance", "sampling_sets_convergence_rate"))
def run_theory(ctx):
    """Exact gradient analysis: prompt sampling vs convergence, allocation vs variance."""
    vdf, shapes = variance_table(ctx.quick, ctx.key(1))
    curves, stable, per_prompt = sampling_analysis(ctx.quick)
    ctx.save_table(vdf, "cures_variance")
    ctx.save_table(stable, "cures_sampling")
    ctx.save_figure(variance_figure(vdf, shapes), "cures_allocation_variance")
    ctx.save_figure(sampling_figure(curves, stable, per_prompt), "cures_sampling")
    row = vdf[(vdf.bank == "bimodal") & (vdf.rule == "√(p(1−p)) (CurES)")].iloc[0]
    ney = vdf[(vdf.bank == "bimodal") & (vdf.rule == "Neyman (exact σ)")].iloc[0]
    hard = vdf[(vdf.bank == "hard") & (vdf.rule == "√(p(1−p)) (CurES)")].iloc[0]
    post = vdf[(vdf.bank == "bimodal") & (vdf.rule == "√(p̂(1−p̂)), 4-rollout p̂")].iloc[0]
    srow = stable[(stable.bank == "bimodal") & (stable.rule == f"CurES t={CURES_T}")].iloc[0]
    best = stable[stable.bank == "bimodal"].sort_values("steps_to_target").iloc[0]
    code = stable[(stable.bank == "bimodal") & (stable.rule == "CurES code t=100(Acc+1)")].iloc[0]
    return [
        claim("allocation_lowers_gradient_variance",
              "At an equal rollout budget, CurES' allocation n_i ∝ √(p(1−p)) lowers the total "
              "variance of the stochastic policy gradient vs uniform allocation",
              measured=float(row.mc_rloo_ratio), passed=bool(row.mc_rloo_ratio > 1.0),
              criterion="Monte Carlo variance ratio uniform / CurES > 1 with the leave-one-out "
                        "baseline, bimodal bank, budget 8 rollouts per prompt",
              paper=PAPER_CURES, paper_value="allocation sets gradient variance (no number)",
              reason=f"analytic (oracle baseline) ratio {row.ratio_uniform_over_rule:.3f}; exact-σ "
                     f"Neyman {ney.ratio_uniform_over_rule:.3f}; hard bank "
                     f"{hard.ratio_uniform_over_rule:.3f}; from a 4-rollout posterior p̂ "
                     f"{post.ratio_uniform_over_rule:.3f}"),
        claim("sampling_sets_convergence_rate",
              "The prompt-sampling distribution sets the convergence rate of gradient descent; "
              "CurES' softmax over √(p(1−p)) converges faster than uniform sampling",
              measured=float(srow.speedup_vs_uniform),
              passed=bool(srow.speedup_vs_uniform > 1.0),
              criterion=f"exact mean-field gradient dynamics, bimodal bank: steps to reach half "
                        f"of uniform's final gain, uniform / CurES (t={CURES_T}) > 1",
              paper=PAPER_CURES, paper_value="faster convergence; up to 5.5× (summary)",
              reason=f"fastest rule: {best.rule} ({best.speedup_vs_uniform:.2f}×); CurES t="
                     f"{CURES_T} IS efficiency {srow.is_efficiency:.2f}; the code temperature "
                     f"gives max q ratio {code.max_prob_ratio:.4f} (≈ uniform, "
                     f"{code.speedup_vs_uniform:.2f}×)"),
    ]


# ----------------------------------------------------------------------------- study
@dataclass(frozen=True)
class StudySettings:
    num_prompts: int = 128
    batch_size: int = 32
    num_steps: int = 100
    learning_rate: float = 20.0  # plain SGD (the analysis is about gradient descent)
    target_fraction: float = 0.5  # target = acc0 + this x (uniform's final acc - acc0)


FULL = StudySettings()
QUICK = StudySettings(num_prompts=64, batch_size=16, num_steps=40)


def study_arms(s: StudySettings, bank_name: str, quick: bool):
    from rlvr_lab.train import bandit

    base = bandit.BanditConfig(bank=bank_config(bank_name, s.num_prompts),
                               num_steps=s.num_steps, batch_size=s.batch_size,
                               num_generations=GROUP, optimizer="sgd",
                               learning_rate=s.learning_rate, eval_ks=(1, 8))

    def cures(**opts):
        opts.setdefault("sampling_temperature", CURES_T)
        return base.replace(rollout="cures", rollout_options=tuple(sorted(opts.items())))

    arms = {
        # plain GRPO sampling through the "cures" stage (uniform prompts, G each, no stage-0
        # rollouts) so that its all-incorrect groups are counted too
        "uniform GRPO": base.replace(rollout="cures", rollout_options=(
            ("allocation", "uniform"), ("init_rollouts", 0), ("sampling", "uniform"))),
        "dynamic sampling (DAPO)": base.replace(rollout="dynamic_sampling"),
        "CurES sampling only": cures(allocation="uniform"),
        "CurES allocation only": cures(sampling="uniform"),
        "CurES both": cures(),
        "CurES code form": cures(sampling="cures_code"),
        "E3 n_max 12": base.replace(rollout="e3"),
        "E3 n_max 16": base.replace(rollout="e3", rollout_options=(("n_high", 16),)),
    }
    if quick:  # the arms the claims need; the full run has all of them
        arms = {k: v for k, v in arms.items()
                if k in ("uniform GRPO", "CurES both", "E3 n_max 12", "E3 n_max 16")}
    return arms


def run_study(s: StudySettings, bank_name: str, key, num_seeds: int, quick: bool):
    from rlvr_lab.train import bandit
    from rlvr_lab.papers.cures.stage import all_incorrect_fraction

    curves, finals = [], []
    for j, (arm, cfg) in enumerate(study_arms(s, bank_name, quick).items()):
        states, m = bandit.train_seeds(cfg, jax.random.fold_in(key, j), num_seeds)
        acc = np.asarray(m["accuracy"])
        spent = np.asarray(m["rollouts"])
        frac = (np.asarray(jax.vmap(all_incorrect_fraction)(states.rollout_state))
                if hasattr(states.rollout_state, "counters") else np.full(num_seeds, np.nan))
        curves.append(pd.DataFrame({
            "bank": bank_name, "arm": arm,
            "seed": np.repeat(np.arange(num_seeds), acc.shape[1]),
            "step": np.tile(np.arange(acc.shape[1]), num_seeds),
            "rollouts": np.cumsum(spent, axis=1).ravel() - spent.ravel(),
            "accuracy": acc.ravel(), "entropy": np.asarray(m["entropy"]).ravel(),
            "zero_adv_frac": np.asarray(m["zero_adv_frac"]).ravel()}))
        finals.append(pd.DataFrame({"bank": bank_name, "arm": arm, "seed": np.arange(num_seeds),
                                    "final_accuracy": acc[:, -1],
                                    "rollouts_total": spent.sum(1),
                                    "all_incorrect_frac": frac}))
    curves = pd.concat(curves, ignore_index=True)
    finals = pd.concat(finals, ignore_index=True)
    mean = curves.groupby(["arm", "step"], sort=False).mean(numeric_only=True)
    uni = mean.loc["uniform GRPO"]
    target = float(uni.accuracy.iloc[0] + s.target_fraction
                   * (uni.accuracy.iloc[-1] - uni.accuracy.iloc[0]))
    per_seed = {}
    rows = []
    for arm in finals.arm.unique():
        a = curves[curves.arm == arm]
        acc = a.pivot(index="seed", columns="step", values="accuracy").to_numpy()
        spent = a.pivot(index="seed", columns="step", values="rollouts").to_numpy()
        per_seed[arm] = np.array([crossing(acc[i], spent[i], target) for i in range(len(acc))])
        d = mean.loc[arm]
        f = finals[finals.arm == arm]
        m, half = plotting.mean_ci(f.final_accuracy.to_numpy())
        rows.append({"bank": bank_name, "arm": arm, "target": target,
                     "rollouts_to_target": crossing(d.accuracy.to_numpy(),
                                                    d.rollouts.to_numpy(), target),
                     "seeds_reaching": int(np.isfinite(per_seed[arm]).sum()),
                     "final_accuracy": float(m), "final_accuracy_ci": float(half),
                     "final_entropy": float(d.entropy.iloc[-1]),
                     "all_incorrect_frac": float(f.all_incorrect_frac.mean()),
                     "all_incorrect_sd": float(f.all_incorrect_frac.std(ddof=1)),
                     "zero_adv_frac": float(d.zero_adv_frac.mean()),
                     "rollouts_total": float(f.rollouts_total.mean())})
    summary = pd.DataFrame(rows)
    base = summary.set_index("arm").rollouts_to_target["uniform GRPO"]
    summary["speedup_vs_uniform"] = base / summary.rollouts_to_target
    rng = np.random.default_rng(0)
    lo_hi = [speedup_ci(rng, per_seed["uniform GRPO"], per_seed[arm]) for arm in summary.arm]
    summary["speedup_ci_low"] = [x[0] for x in lo_hi]
    summary["speedup_ci_high"] = [x[1] for x in lo_hi]
    return curves, summary


def crossing(acc, spent, target):
    """Rollouts spent when ``acc`` first reaches ``target`` (``spent[t]`` = rollouts used before
    step t; linear interpolation); NaN if never reached."""
    hit = np.flatnonzero(acc >= target)
    if not hit.size:
        return float("nan")
    i = hit[0]
    if i == 0:
        return 0.0
    frac = (target - acc[i - 1]) / (acc[i] - acc[i - 1])
    return float(spent[i - 1] + frac * (spent[i] - spent[i - 1]))


def speedup_ci(rng, base, arm, reps: int = 2000, level: float = 0.95):
    """Bootstrap CI (seeds resampled independently per arm) of mean(base) / mean(arm); a seed
    that never reaches the target counts as the run's total budget (a conservative floor)."""
    if not (np.isfinite(base).all() and np.isfinite(arm).all()):
        cap = np.nanmax(np.concatenate([base, arm]))
        base, arm = np.nan_to_num(base, nan=cap), np.nan_to_num(arm, nan=cap)
    bi = rng.integers(0, len(base), (reps, len(base)))
    ai = rng.integers(0, len(arm), (reps, len(arm)))
    ratio = base[bi].mean(1) / np.maximum(arm[ai].mean(1), 1e-9)
    return (float(np.quantile(ratio, (1 - level) / 2)),
            float(np.quantile(ratio, (1 + level) / 2)))


def expected_all_incorrect(p, n_max_values=(8, 12, 16), batch_size=32, draws=200, seed=0):
    """Exact expected fraction of all-incorrect groups ``mean_i (1 - p_i)^{n_i}`` under E3's
    allocation (ranks from the exact p, range [4, n_max]; n_max 8 = uniform 8), averaged over
    random batches, at a fixed policy."""
    p = np.asarray(p, np.float64)
    rank = np.asarray(e3_alloc.e3_ranks(jnp.asarray(p)))
    rng = np.random.default_rng(seed)
    out = {}
    for n_max in n_max_values:
        n_min = 8 if n_max == 8 else 4
        vals, at_cap = [], []
        for _ in range(draws):
            idx = rng.choice(len(p), batch_size, replace=False)
            n = np.asarray(e3_alloc.e3_allocation(jnp.asarray(rank[idx]), 8 * batch_size,
                                                  n_min, n_max, cap_at_max=True))
            vals.append(np.mean((1 - p[idx]) ** n))
            at_cap.append(np.mean(n > 12))
        out[n_max] = (float(np.mean(vals)), float(np.mean(at_cap)))
    return out


ARM_COLORS = {"uniform GRPO": "#1b6ca8", "dynamic sampling (DAPO)": "#999999",
              "CurES sampling only": "#3a8a3f", "CurES allocation only": "#edae49",
              "CurES both": "#d1495b", "CurES code form": "#e377c2",
              "E3 n_max 12": "#6c4f9c", "E3 n_max 16": "#8d6a4f"}


def study_figure(curves, summary, bank_name):
    fig, axes = plotting.subplots(1, 3, figsize=(15, 4.2))
    d = curves[curves.bank == bank_name]
    for arm in d.arm.unique():
        a = d[d.arm == arm]
        acc = a.pivot(index="seed", columns="step", values="accuracy").to_numpy()
        ent = a.pivot(index="seed", columns="step", values="entropy").to_numpy()
        x = a.groupby("step").rollouts.mean().to_numpy() / 1e3
        style = dict(ls="--" if "E3" in arm or "DAPO" in arm else "-",
                     color=ARM_COLORS.get(arm))
        plotting.band(axes[0], x, acc, label=arm, **style)
        plotting.band(axes[1], x, ent, label=arm, **style)
    tgt = summary[summary.bank == bank_name].target.iloc[0]
    axes[0].axhline(tgt, color="grey", lw=0.8, ls=":")
    axes[0].set_xlim(0, 1.05 * d[d.arm == "uniform GRPO"].rollouts.max() / 1e3)
    axes[1].set_xlim(axes[0].get_xlim())
    axes[0].set_xlabel("rollouts spent (thousands; DAPO continues off the right edge)")
    axes[0].set_ylabel("mean accuracy over the bank (exact)")
    axes[0].set_title(f"accuracy at equal rollouts — {bank_name} bank")
    axes[0].legend(fontsize=8)
    axes[1].set_xlabel("rollouts spent (thousands)")
    axes[1].set_ylabel("mean policy entropy (nats)")
    axes[1].set_title("entropy")
    s = summary[summary.bank == bank_name]
    y = np.arange(len(s))
    axes[2].barh(y - 0.2, s.all_incorrect_frac.fillna(0), 0.4, color="#d1495b",
                 label="all-incorrect groups (stage counters; DAPO: not tracked)")
    axes[2].barh(y + 0.2, s.zero_adv_frac, 0.4, color="#1b6ca8",
                 label="zero-advantage groups among valid (trainer)")
    axes[2].set_yticks(y, s.arm, fontsize=8)
    axes[2].set_xlabel("fraction of groups over the run")
    axes[2].set_title("groups without learning signal")
    axes[2].set_xlim(0, 1)
    axes[2].legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13))
    fig.tight_layout()
    return fig


@experiment("cures_study", paper=PAPER_CURES, setting="bank",
            claims=("cures_fewer_rollouts_to_target", "raising_nmax_fewer_all_incorrect"))
def run_cures_study(ctx):
    """Training at equal rollout budget: uniform, DAPO, CurES variants, E3 (prompt bank)."""
    s = QUICK if ctx.quick else FULL
    banks = ("bimodal",) if ctx.quick else tuple(BANKS)
    curves, summaries = [], []
    for b, bank_name in enumerate(banks):
        c, summ = run_study(s, bank_name, ctx.key(10 + b), ctx.seeds, ctx.quick)
        curves.append(c)
        summaries.append(summ)
        ctx.save_figure(study_figure(c, summ, bank_name), f"cures_study_{bank_name}")
    curves = pd.concat(curves, ignore_index=True)
    summary = pd.concat(summaries, ignore_index=True)
    ctx.save_table(curves.groupby(["bank", "arm", "step"], as_index=False).mean(
        numeric_only=True).drop(columns="seed"), "cures_study_curves")
    ctx.save_table(summary, "cures_study_summary")
    s0 = summary[summary.bank == "bimodal"].set_index("arm")
    both = s0.loc["CurES both"]
    speed = float(both.speedup_vs_uniform)
    others = "; ".join(f"{a}: {v:.2f}×" for a, v in s0.speedup_vs_uniform.items()
                       if a != "uniform GRPO")
    hard = ""
    if "hard" in set(summary.bank):
        h = summary[summary.bank == "hard"].set_index("arm")
        hard = (f" | hard bank: CurES both {h.speedup_vs_uniform['CurES both']:.2f}× "
                f"[{h.speedup_ci_low['CurES both']:.2f}, {h.speedup_ci_high['CurES both']:.2f}],"
                f" E3 {h.speedup_vs_uniform['E3 n_max 12']:.2f}×")
    f12, f16 = (s0.all_incorrect_frac[a] for a in ("E3 n_max 12", "E3 n_max 16"))
    sd12, sd16 = (s0.all_incorrect_sd[a] for a in ("E3 n_max 12", "E3 n_max 16"))
    diff = 100 * (f12 - f16)
    half = 196 * np.sqrt((sd12 ** 2 + sd16 ** 2) / ctx.seeds) if ctx.seeds > 1 else np.inf
    from rlvr_lab.envs import prompt_bank as pbk
    p0 = np.asarray(pbk.make_bank(bank_config("bimodal", s.num_prompts)).p0)
    exact = expected_all_incorrect(p0, batch_size=s.batch_size, draws=50 if ctx.quick else 200)
    return [
        claim("cures_fewer_rollouts_to_target",
              "CurES (posterior sampling + Neyman allocation) reaches the target accuracy with "
              "fewer rollouts than uniform GRPO",
              measured=speed,
              passed=bool(np.isfinite(speed) and speed > 1.0 and both.speedup_ci_low > 1.0),
              criterion="rollouts to target (acc0 + ½ of uniform's gain), uniform / CurES > 1 "
                        "and the 95% bootstrap CI over seeds above 1; bimodal bank, equal "
                        "budget per step, CurES' 4-rollout initialisation charged",
              paper=PAPER_CURES, paper_value="up to 5.5× faster convergence (summary)",
              reason=f"CI [{both.speedup_ci_low:.2f}, {both.speedup_ci_high:.2f}]; " + others
              + hard),
        claim("raising_nmax_fewer_all_incorrect",
              "Raising E3's maximum rollouts per prompt by 4 leaves fewer all-incorrect groups",
              measured=diff, passed=bool(diff > half),
              criterion="all-incorrect groups over the run, E3 n_max 12 minus n_max 16, in "
                        "percentage points, > 0 with 95% confidence (Welch, over seeds); "
                        "bimodal bank",
              paper=PAPER_E3, paper_value="~2 points fewer all-incorrect groups",
              reason=f"±{half:.2f} pp; n_max 12: {100 * f12:.2f}%, n_max 16: {100 * f16:.2f}%, "
                     f"uniform GRPO (8 each): {100 * s0.all_incorrect_frac['uniform GRPO']:.2f}%."
                     f" Exact at the initial policy (n_max 8/12/16): "
                     + ", ".join(f"{100 * v[0]:.2f}%" for v in exact.values())
                     + f"; share of prompts given > 12 rollouts with n_max 16: "
                     f"{100 * exact[16][1]:.1f}% — the rank-proportional rule gives the hardest "
                     "prompt of a batch about n_min + 2(n − n_min) = 12, so a cap of 16 rarely "
                     "binds"),
    ]
