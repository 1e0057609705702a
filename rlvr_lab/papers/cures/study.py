"""CurES on the prompt bank: the analyses and the equal-budget study of ``simulations/cures.py``.

(b) Allocation: :func:`variance_table` (gradient variance of each allocation rule at one
budget, analytic and Monte Carlo) and :func:`posterior_ratios` (the variance ratio uniform /
CurES when CurES reads p̂ from its own 4-rollout stage-0 posterior). (a) Sampling:
:func:`sampling_analysis` (the noise-free mean-field dynamics under each prompt-sampling rule:
steps to a target, first-order gain, importance-sampling efficiency). Training:
:func:`run_study` (the bank trainer at an equal rollout budget per step; every arm uses the
same key, so seed ``s`` of every arm is paired) and :func:`seed_reach` (per-seed rollouts to
the target accuracy).
"""
from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from rlvr_lab import plotting
from rlvr_lab.envs import prompt_bank
from rlvr_lab.papers.cures import allocation as cures_alloc
from rlvr_lab.papers.cures import posterior as cur
from rlvr_lab.papers.cures import theory
from rlvr_lab.papers.cures.stage import all_incorrect_fraction
from rlvr_lab.papers.dars.allocation import dars_extra_rollouts
from rlvr_lab.papers.e3 import allocation as e3_alloc
from rlvr_lab.train import bandit
from rlvr_lab.train.budget import proportional_allocation, uniform_allocation

VOCAB = 16
GROUP = 8
BANKS = {  # Beta(a, b) of the initial success probabilities
    "bimodal": (0.3, 0.3),  # many prompts already solved or hopeless: what curricula target
    "hard": (1.0, 3.0),     # most prompts hard, few solved
}
CURES_T = 0.1  # explicit CurES sampling temperature used in training
POSTERIOR_DRAWS = 64   # independent 4-rollout posteriors per bank for the realistic headline


def bank_config(name: str, num_prompts: int, seed: int = 0) -> prompt_bank.PromptBankConfig:
    a, b = BANKS[name]
    return prompt_bank.PromptBankConfig(num_prompts=num_prompts, vocab_size=VOCAB, difficulty_a=a,
                                        difficulty_b=b, seed=seed)


# ----------------------------------------------------------------------------- (b) allocation
def allocation_rules(p, sigma_sq, budget, key):
    """Rollout counts per prompt under each rule at the same total ``budget``."""
    k = p.shape[0]
    post, _ = cur.init_posterior_from_rollouts(key, p)
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


_jit_rules = jax.jit(allocation_rules, static_argnums=2)


def variance_table(quick: bool, key, banks=tuple(BANKS)) -> tuple[pd.DataFrame, dict]:
    """Gradient variance per allocation rule and bank, analytic and Monte Carlo."""
    k = 64 if quick else 128
    draws = 300 if quick else 3000
    rows, shapes = [], {}
    for bank_name in banks:
        bank = prompt_bank.make_bank(bank_config(bank_name, k))
        # jitted: one compilation each instead of one per eager op
        mom = jax.jit(theory.bank_gradient_moments)(bank.logits0, bank.correct)
        rules = _jit_rules(mom.p, mom.sigma_sq, k * GROUP, jax.random.fold_in(key, k))
        rng = np.random.default_rng(0)
        base = float(theory.allocation_variance(mom.sigma_sq, rules["uniform"]))
        for rule, n in rules.items():
            n = np.asarray(n)
            analytic = float(theory.allocation_variance(mom.sigma_sq, n))
            rows.append({
                "bank": bank_name, "rule": rule, "budget": int(n.sum()), "n_min": int(n.min()),
                "n_max": int(n.max()), "analytic_oracle": analytic,
                "mc_oracle": theory.mc_allocation_variance(rng, bank.logits0, bank.correct, n,
                                                           draws=draws),
                "mc_rloo": theory.mc_allocation_variance(rng, bank.logits0, bank.correct, n,
                                                         draws=draws, baseline="rloo"),
                "ratio_uniform_over_rule": base / analytic})
        shapes[bank_name] = (np.asarray(mom.p), {r: np.asarray(n) for r, n in rules.items()},
                             np.asarray(mom.sigma_sq))
    df = pd.DataFrame(rows)
    uni = df[df.rule == "uniform"].set_index("bank")
    df["mc_rloo_ratio"] = df.bank.map(uni.mc_rloo) / df.mc_rloo
    return df, shapes


def posterior_ratios(key, bank_name: str, num_prompts: int, draws: int = POSTERIOR_DRAWS):
    """Analytic variance ratio uniform / CurES when the allocation reads p̂ from CurES' own
    stage 0 (a 4-rollout Beta posterior) instead of the exact p, one per independent draw."""
    bank = prompt_bank.make_bank(bank_config(bank_name, num_prompts))
    mom = theory.bank_gradient_moments(bank.logits0, bank.correct)
    budget = num_prompts * GROUP
    base = theory.allocation_variance(mom.sigma_sq, uniform_allocation(num_prompts, budget))

    def one(k):
        posterior, _ = cur.init_posterior_from_rollouts(k, mom.p)
        n = cures_alloc.cures_allocation(cur.posterior_mean(posterior), budget,
                                         max_per_prompt=8 * GROUP)
        return base / theory.allocation_variance(mom.sigma_sq, n)

    return np.asarray(jax.vmap(one)(jax.random.split(key, draws)))


# ----------------------------------------------------------------------------- (a) sampling
def sampling_rules(batch_size: int):
    """Prompt-sampling rules ``(p, |grad p|^2) -> q`` for the mean-field dynamics."""
    rules = {
        "uniform": lambda p, g: jnp.full_like(p, 1.0 / p.shape[0]),
        "greedy top-B |∇p|²": lambda p, g: theory.top_batch_distribution(g, batch_size),
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


def sampling_analysis(quick: bool, banks=tuple(BANKS)) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Mean-field accuracy curves per sampling rule, steps to target, IS efficiency."""
    k = 64 if quick else 128
    steps = 150 if quick else 300
    batch, lr = k // 4, 0.5
    curves, rows, per_prompt = [], [], {}
    rules = sampling_rules(batch)   # the same objects for every bank: compiled once per rule
    for bank_name in banks:
        bank = prompt_bank.make_bank(bank_config(bank_name, k))
        mom = theory.bank_gradient_moments(bank.logits0, bank.correct)
        m = mom.grad_sq + mom.sigma_sq / GROUP
        per_prompt[bank_name] = mom
        results = {}
        for rule, fn in rules.items():
            curve = np.asarray(theory.mean_field_descent(bank.logits0, bank.correct, fn, lr=lr,
                                                         batch_size=batch, num_steps=steps))
            results[rule] = curve
            curves.append(pd.DataFrame({"bank": bank_name, "rule": rule,
                                        "step": np.arange(steps + 1), "accuracy": curve}))
        uni = results["uniform"]
        target = float(uni[0] + 0.5 * (uni[-1] - uni[0]))
        for rule, fn in rules.items():
            q = fn(mom.p, mom.grad_sq)
            rows.append({
                "bank": bank_name, "rule": rule, "target": target,
                "steps_to_target": theory.steps_to_target(results[rule], target),
                "first_order_gain": float(theory.sampling_gain(q, mom.grad_sq)),
                "is_efficiency": float(theory.is_efficiency(q, m)),
                "max_prob_ratio": float(q.max() / jnp.maximum(q.min(), 1e-30))})
    table = pd.DataFrame(rows)
    best_gain = table.groupby("bank").first_order_gain.transform("max")
    table["gain_vs_best"] = table.first_order_gain / best_gain
    uni = table[table.rule == "uniform"].set_index("bank").steps_to_target
    table["speedup_vs_uniform"] = table.bank.map(uni) / table.steps_to_target
    return pd.concat(curves, ignore_index=True), table, per_prompt


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
    base = bandit.BanditConfig(bank=bank_config(bank_name, s.num_prompts),
                               steps=s.num_steps, num_prompts=s.batch_size,
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
    if quick:  # the arms the claim needs; the full run has all of them
        arms = {k: v for k, v in arms.items() if k in ("uniform GRPO", "CurES both")}
    return arms


def run_study(s: StudySettings, bank_name: str, key, num_seeds: int, quick: bool):
    """Every arm from the same ``key`` (seed ``s`` of each arm paired) -> ``(curves,
    summary)``: per-step curves per arm and seed, and one summary row per arm (the target
    accuracy, rollouts to it on the seed-mean curve, final accuracy, all-incorrect groups)."""
    curves, finals = [], []
    for arm, cfg in study_arms(s, bank_name, quick).items():
        states, m = bandit.train_seeds(cfg, key, num_seeds)
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
    reach = seed_reach(curves, target)
    rows = []
    for arm in finals.arm.unique():
        d = mean.loc[arm]
        f = finals[finals.arm == arm]
        m, half = plotting.mean_ci(f.final_accuracy.to_numpy())
        rows.append({"bank": bank_name, "arm": arm, "target": target,
                     "rollouts_to_target": crossing(d.accuracy.to_numpy(),
                                                    d.rollouts.to_numpy(), target),
                     "seeds_reaching": int(np.isfinite(reach[arm]).sum()),
                     "final_accuracy": float(m), "final_accuracy_ci": float(half),
                     "final_entropy": float(d.entropy.iloc[-1]),
                     "all_incorrect_frac": float(f.all_incorrect_frac.mean()),
                     "all_incorrect_sd": float(f.all_incorrect_frac.std(ddof=1)),
                     "zero_adv_frac": float(d.zero_adv_frac.mean()),
                     "rollouts_total": float(f.rollouts_total.mean())})
    summary = pd.DataFrame(rows)
    base = summary.set_index("arm").rollouts_to_target["uniform GRPO"]
    summary["speedup_vs_uniform"] = base / summary.rollouts_to_target
    return curves, summary


def seed_reach(curves: pd.DataFrame, target: float) -> dict[str, np.ndarray]:
    """Per arm, the rollouts each seed spent until its accuracy first reached ``target``
    (NaN: never), seeds in order."""
    out = {}
    for arm in curves.arm.unique():
        a = curves[curves.arm == arm]
        acc = a.pivot(index="seed", columns="step", values="accuracy").to_numpy()
        spent = a.pivot(index="seed", columns="step", values="rollouts").to_numpy()
        out[arm] = np.array([crossing(acc[i], spent[i], target) for i in range(len(acc))])
    return out


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
