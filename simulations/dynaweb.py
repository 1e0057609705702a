"""DynaWeb (arXiv:2601.22149): RL inside a learned world model of a toy web, with expert
trajectories interleaved, against real-only RL at equal real interactions.

Setting ("toy"): one procedurally generated site per seed (``rlvr_lab.envs.toy_web``, 10
pages, 3 links, a 3-value form, 2 reach + 2 form tasks, flaky pages, a purchase trap, horizon
10), a tabular policy per task trained with GRPO group advantages over whole trajectories and
the GSPO loss (``rlvr_lab.papers.dynaweb.dyna``). Arms share each seed's site, expert set,
hallucination table and random numbers (paired):

* ``real``: GRPO/GSPO on 8 real episodes per task every step;
* ``dream``: the same on 8 dreamed episodes per task in a tabular world model refreshed every
  10 steps from 8 real episodes per task of the current policy;
* ``expert rho``: ``dream`` with each slot replaced by a logged expert trajectory with
  probability rho (the fixed expert set, 4 episodes per task, counted apart);
* ``noise eps``: ``dream`` in the model mixed with hallucinations at eps (raises its error).

Success is the exact success probability of the policy on the true site (mean over tasks).
"At equal real interactions" compares an arm's final success with the real-only arm's success
interpolated at the same cumulative count of real environment steps (same seed).

Claims (criteria stated before the run; the expert ratio of the claims is 0.25). A claimed
positive effect passes when its 95% t-interval over seeds lies above 0, fails when it lies
below 0, and is inconclusive when it contains 0 (more seeds would decide):

- ``imagination_sample_efficiency``: dream - real at equal real interactions, paired over
  seeds.
- ``expert_raises_final_success``: final success of expert 0.25 - dream, paired.
- ``expert_lowers_seed_variance``: the seed-to-seed standard deviation of final success is lower
  with the expert share (ratio expert / dream < 1, Pitman-Morgan paired test of equal variances,
  one-sided p < 0.05); a ratio below 1 that the test cannot confirm is inconclusive.
- ``dreaming_harmful_above_error_threshold``: the gain of dreaming over real-only (equal
  interactions) is positive at the learned model's error and negative at the largest error of
  the sweep (95% intervals); the measured value is the H-step model error where the seed-mean
  gain crosses 0.

Positive control: real-only RL must raise the success of the uniform starting policy by more
than 0.1 (95% interval); otherwise the comparison claims are inconclusive.
"""
from __future__ import annotations

import math

import jax
import numpy as np
import pandas as pd
from scipy import stats as st

from rlvr_lab import plotting, stats
from rlvr_lab.experiments import claim, experiment
from rlvr_lab.papers.dynaweb import DynaConfig, dream_arm, make_run_arms, real_arm, stack_arms

PAPER = "DynaWeb"
REF = "arXiv:2601.22149"
CLAIM_RATIO = 0.25
CONTROL_MIN_GAIN = 0.1
NOT_PUBLIC = "no number in the public abstract"


def study_config(quick: bool) -> DynaConfig:
    return DynaConfig(num_steps=60 if quick else 150)


def arm_specs(quick: bool) -> list[tuple[str, object]]:
    """(name, Arm) of every arm; the first two are ``real`` and ``dream``."""
    ratios = (0.25, 0.5) if quick else (0.1, 0.25, 0.5, 0.75)
    noises = (0.25, 0.5, 1.0) if quick else (0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0)
    return ([("real", real_arm()), ("dream", dream_arm())]
            + [(f"expert {r:g}", dream_arm(expert_ratio=r)) for r in ratios]
            + [(f"noise {e:g}", dream_arm(model_noise=e)) for e in noises])


def run_study(key, num_seeds: int, config: DynaConfig, specs):
    """Train every arm on every seed (one jit). Returns (curves, summary) DataFrames:
    curves per (arm, seed, step); summary per (arm, seed) with the gain at equal interactions."""
    names = [n for n, _ in specs]
    metrics, summary = make_run_arms(config)(jax.random.split(key, num_seeds),
                                             stack_arms([a for _, a in specs]))
    success = np.asarray(metrics.success).mean(-1)                    # [S, arms, steps]
    inter = np.asarray(metrics.interactions, dtype=float)
    init = np.asarray(summary.initial_success).mean(-1)[:, 0]         # [S]
    S, M, T = success.shape
    curves = pd.DataFrame({
        "arm": np.repeat(np.array(names), T)[None].repeat(S, 0).ravel(),
        "seed": np.repeat(np.arange(S), M * T),
        "step": np.tile(np.arange(1, T + 1), S * M),
        "success": success.ravel(), "interactions": inter.ravel(),
        "batch_success": np.asarray(metrics.batch_success).ravel(),
        "one_step_error": np.asarray(metrics.one_step_error).ravel(),
        "horizon_error": np.asarray(metrics.horizon_error).ravel()})
    rows = []
    for s in range(S):
        x_real = np.concatenate([[0.0], inter[s, 0]])
        y_real = np.concatenate([[init[s]], success[s, 0]])
        for m, name in enumerate(names):
            final, spent = success[s, m, -1], inter[s, m, -1]
            reached = np.nonzero(y_real >= final)[0]
            rows.append({
                "arm": name, "seed": s, "final_success": final, "initial_success": init[s],
                "interactions": spent,
                "real_at_equal_interactions": np.interp(spent, x_real, y_real),
                "real_interactions_to_match": x_real[reached[0]] if reached.size else np.inf,
                "one_step_error": np.asarray(metrics.one_step_error)[s, m].mean(),
                "horizon_error": np.asarray(metrics.horizon_error)[s, m].mean(),
                "collapsed_tasks": int((np.asarray(metrics.success)[s, m, -1] < 0.1).sum()),
                "expert_interactions": int(np.asarray(summary.expert_interactions)[s, m])})
    table = pd.DataFrame(rows)
    table["gain_equal_interactions"] = table.final_success - table.real_at_equal_interactions
    k_err = pd.DataFrame([{"arm": name, "seed": s, "k": k + 1, "policy": pol,
                           "error": float(np.asarray(arr)[s, m, k])}
                          for pol, arr in (("uniform", summary.k_errors_uniform),
                                           ("final", summary.k_errors_policy))
                          for s in range(S) for m, name in enumerate(names)
                          for k in range(config.horizon)])
    return curves, table, k_err


def per_seed(table, arm, column):
    return table[table.arm == arm].sort_values("seed")[column].to_numpy(dtype=float)


def error_sweep(table):
    """Seed means and intervals of gain vs H-step error over the dream arms without experts,
    ordered by error."""
    arms = ["dream"] + sorted({a for a in table.arm if a.startswith("noise")},
                              key=lambda a: float(a.split()[1]))
    rows = []
    for arm in arms:
        gain = stats.mean_interval(per_seed(table, arm, "gain_equal_interactions"))
        err = stats.mean_interval(per_seed(table, arm, "horizon_error"))
        rows.append({"arm": arm, "noise": 0.0 if arm == "dream" else float(arm.split()[1]),
                     "error": err.mean, "error_low": err.low, "error_high": err.high,
                     "gain": gain.mean, "gain_low": gain.low, "gain_high": gain.high})
    return pd.DataFrame(rows).sort_values("error", kind="stable").reset_index(drop=True)


def crossing(errors, gains) -> float:
    """The error where the gain first turns from > 0 to <= 0 (linear interpolation); NaN if
    it never does."""
    for i in range(1, len(gains)):
        if gains[i - 1] > 0 >= gains[i]:
            e0, e1, g0, g1 = errors[i - 1], errors[i], gains[i - 1], gains[i]
            return float(e0 + (e1 - e0) * g0 / (g0 - g1))
    return float("nan")


def pitman_morgan(a, b):
    """Paired test of var(a) = var(b): ``corr(a - b, a + b)`` is 0 iff the variances are
    equal. Returns (sd ratio sd(a)/sd(b), one-sided p for var(a) < var(b))."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    ratio = a.std(ddof=1) / b.std(ddof=1) if b.std(ddof=1) > 0 else float("nan")
    d, s = a - b, a + b
    if len(a) < 3 or d.std() == 0 or s.std() == 0:
        return ratio, float("nan")
    r = float(np.corrcoef(d, s)[0, 1])
    t = r * math.sqrt((len(a) - 2) / max(1 - r * r, 1e-12))
    return ratio, float(st.t.cdf(t, len(a) - 2))


# ----------------------------------------------------------------------------- figures
def success_figure(curves, table, arms=("real", "dream", f"expert {CLAIM_RATIO:g}")):
    """Success vs cumulative real interactions (seed bands on a common log grid)."""
    fig, ax = plotting.subplots(figsize=(6.4, 4.2))
    for arm in arms:
        d = curves[curves.arm == arm]
        top = d.groupby("seed").interactions.max().min()
        grid = np.geomspace(50, top, 60)
        rows = []
        for s, g in d.groupby("seed"):
            init = table[(table.arm == arm) & (table.seed == s)].initial_success.iloc[0]
            x = np.concatenate([[0.0], g.interactions.to_numpy()])
            y = np.concatenate([[init], g.success.to_numpy()])
            rows.append(np.interp(grid, x, y))
        plotting.band(ax, grid, np.array(rows), label=arm)
    init = table[table.arm == "real"].initial_success.mean()
    ax.axhline(init, color="k", ls=":", lw=1, label=f"uniform start ({init:.2f})")
    ax.set_xscale("log")
    ax.set_xlabel("cumulative real environment interactions (steps)")
    ax.set_ylabel("exact success probability (mean over tasks)")
    ax.set_title("DynaWeb toy: success per real interaction")
    ax.legend(loc="lower right")
    fig.tight_layout()
    return fig


def error_figure(sweep, k_err, threshold):
    """Gain at equal interactions vs H-step model error; k-step error vs k."""
    fig, (ax, bx) = plotting.subplots(1, 2, figsize=(11, 4.2))
    ax.errorbar(sweep.error, sweep.gain, yerr=[sweep.gain - sweep.gain_low,
                                               sweep.gain_high - sweep.gain],
                fmt="o-", capsize=3, label="dream - real (equal real interactions)")
    for _, r in sweep.iterrows():
        ax.annotate(f"eps={r.noise:g}", (r.error, r.gain), fontsize=8,
                    textcoords="offset points", xytext=(4, 4))
    ax.axhline(0, color="k", lw=1, ls=":", label="no gain (criterion)")
    if math.isfinite(threshold):
        ax.axvline(threshold, color="#d1495b", ls="--", lw=1,
                   label=f"measured threshold {threshold:.2f}")
    ax.set_xlabel("H-step world-model error (TV, uniform policy; mean over training)")
    ax.set_ylabel("final success gain over real-only")
    ax.set_title("when dreaming turns harmful")
    ax.legend(loc="lower left")
    d = k_err[(k_err.policy == "uniform")]
    for _, r in sweep.iterrows():
        v = d[d.arm == r.arm].pivot(index="seed", columns="k", values="error").to_numpy()
        plotting.band(bx, np.arange(1, v.shape[1] + 1), v, label=f"eps={r.noise:g}")
    if math.isfinite(threshold):
        bx.axhline(threshold, color="#d1495b", ls="--", lw=1, label="measured threshold")
    bx.set_xlabel("imagined steps k")
    bx.set_ylabel("k-step error (TV from home, uniform policy)")
    bx.set_title("final world models: error vs horizon")
    bx.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig


def ratio_figure(table):
    """Final success and its seed-to-seed spread vs the expert share rho."""
    arms = ["dream"] + sorted({a for a in table.arm if a.startswith("expert")},
                              key=lambda a: float(a.split()[1]))
    rho = np.array([0.0 if a == "dream" else float(a.split()[1]) for a in arms])
    fig, (ax, bx) = plotting.subplots(1, 2, figsize=(11, 4.0))
    ivs = [stats.mean_interval(per_seed(table, a, "final_success")) for a in arms]
    ax.errorbar(rho, [i.mean for i in ivs], yerr=[[i.mean - i.low for i in ivs],
                                                   [i.high - i.mean for i in ivs]],
                fmt="o-", capsize=3, label="mean (95% CI)")
    for x, a in zip(rho, arms):
        v = per_seed(table, a, "final_success")
        ax.plot(np.full(v.size, x), v, ".", color="#555555", alpha=0.6)
    real = stats.mean_interval(per_seed(table, "real", "final_success"))
    ax.axhline(real.mean, color="k", ls=":", lw=1, label="real-only, its full run")
    ax.set_xlabel("expert share rho")
    ax.set_ylabel("final exact success")
    ax.set_title("expert interleaving: final success (dots: seeds)")
    ax.legend(loc="lower right")
    bx.plot(rho, [per_seed(table, a, "final_success").std(ddof=1) for a in arms], "o-",
            label="sd over seeds")
    bx.plot(rho, [per_seed(table, a, "collapsed_tasks").mean() for a in arms], "s--",
            label="collapsed tasks per seed (success < 0.1)")
    bx.set_xlabel("expert share rho")
    bx.set_ylabel("spread / collapses")
    bx.set_title("stability")
    bx.legend()
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- claims
@experiment("dynaweb", paper=PAPER, setting="toy", quick_seeds=4, default_seeds=8,
            claims=("imagination_sample_efficiency", "expert_raises_final_success",
                    "expert_lowers_seed_variance", "dreaming_harmful_above_error_threshold"))
def run(ctx):
    """Dyna on a toy web: dreaming vs real-only at equal real interactions, expert share,
    model error."""
    config = study_config(ctx.quick)
    curves, table, k_err = run_study(ctx.key(0), ctx.seeds, config, arm_specs(ctx.quick))
    sweep = error_sweep(table)
    threshold = crossing(sweep.error.to_numpy(), sweep.gain.to_numpy())
    ctx.save_table(curves, "dynaweb_curves")
    ctx.save_table(table, "dynaweb_summary")
    ctx.save_table(k_err.groupby(["arm", "policy", "k"], as_index=False).error.mean(),
                   "dynaweb_k_step_errors")
    ctx.save_figure(success_figure(curves, table), "dynaweb_success_vs_interactions")
    ctx.save_figure(error_figure(sweep, k_err, threshold), "dynaweb_gain_vs_model_error")
    ctx.save_figure(ratio_figure(table), "dynaweb_expert_ratio")
    crossings = horizon_crossings(k_err, sweep, threshold)
    return claims_from(table, sweep, threshold, crossings)


def claims_from(table, sweep, threshold, crossings=None):
    common = dict(paper=PAPER, setting="toy")
    expert = f"expert {CLAIM_RATIO:g}"
    control = stats.positive_control(
        per_seed(table, "real", "final_success") - per_seed(table, "real", "initial_success"),
        min_gain=CONTROL_MIN_GAIN, name="real-only RL vs the uniform start")

    gain = stats.mean_interval(per_seed(table, "dream", "gain_equal_interactions"))
    spent = per_seed(table, "dream", "interactions")
    matched = per_seed(table, "dream", "real_interactions_to_match") / spent
    passed, verdict, note = stats.decide_sign(gain)
    c1 = claim("imagination_sample_efficiency",
               "Dreaming in a learned world model raises success per real interaction over "
               "real-only RL",
               gain.mean, passed,
               "dream final success - real-only success at the same real interactions "
               "(paired over seeds): 95% t-interval above 0", verdict=verdict,
               paper_value=f"WebArena/WebVoyager gains over the base agent; {NOT_PUBLIC}",
               paper_ref=f"{REF} abstract", reason=(
                   f"gain {gain}; dream used {spent.mean():.0f} real steps on average; "
                   f"real-only needs x{np.median(matched):.1f} (median over seeds) as many to "
                   f"reach the dream arm's final success; {control.reason}{note}"), **common)

    diff = stats.paired_difference(per_seed(table, expert, "final_success"),
                                   per_seed(table, "dream", "final_success"))
    passed, verdict, note = stats.decide_sign(diff)
    c2 = claim("expert_raises_final_success",
               f"Interleaving expert trajectories (rho = {CLAIM_RATIO:g}) raises final success "
               "over dreaming alone",
               diff.mean, passed,
               f"final success, expert {CLAIM_RATIO:g} - dream (paired): 95% t-interval above 0",
               verdict=verdict,
               paper_value=f"'improves stability and sample efficiency'; {NOT_PUBLIC}",
               paper_ref=f"{REF} abstract",
               reason=(f"difference {diff}; the logged expert set holds "
                       f"{per_seed(table, expert, 'expert_interactions').mean():.0f} expert "
                       f"steps per seed, not counted as training interactions{note}"),
               **common)

    ratio, p = pitman_morgan(per_seed(table, expert, "final_success"),
                             per_seed(table, "dream", "final_success"))
    collapse = {a: per_seed(table, a, "collapsed_tasks").sum() for a in (expert, "dream")}
    verdict = None
    if math.isfinite(ratio) and ratio < 1 and not (p < 0.05):
        verdict = "inconclusive"
    c3 = claim("expert_lowers_seed_variance",
               "Interleaving expert trajectories lowers the seed-to-seed spread of final "
               "success (fewer collapsed runs) compared with dreaming alone",
               ratio, bool(math.isfinite(ratio) and ratio < 1 and p < 0.05),
               "sd over seeds of final success, expert / dream < 1 with a one-sided "
               "Pitman-Morgan paired test p < 0.05",
               paper_value=f"'for stability'; {NOT_PUBLIC}", paper_ref=f"{REF} abstract",
               verdict=verdict,
               reason=(f"sd ratio {ratio:.3g}, p = {p:.3g}; collapsed tasks (success < 0.1) "
                       f"summed over seeds: dream {collapse['dream']:.0f}, expert "
                       f"{collapse[expert]:.0f}"
                       + ("; more seeds would decide" if verdict else "")), **common)

    low, high = sweep.iloc[0], sweep.iloc[-1]
    helps, hurts = low.gain_low > 0, high.gain_high < 0
    # decided: helps at low error and hurts at high error (pass), or an interval on the
    # wrong side of 0 (fail); an interval containing 0 leaves it open
    wrong_side = low.gain_high < 0 or high.gain_low > 0
    verdict = None if (helps and hurts) or wrong_side else "inconclusive"
    c4 = claim("dreaming_harmful_above_error_threshold",
               "Dreaming helps only while the world model's H-step error stays below a "
               "threshold; beyond it dreaming is worse than real-only RL",
               threshold, bool(helps and hurts and math.isfinite(threshold)),
               "gain over real-only at equal interactions: 95% interval above 0 at the lowest "
               "model error and below 0 at the highest; measured = error where the seed-mean "
               "gain crosses 0", verdict=verdict,
               paper_value="not studied in the paper (toy question)", paper_ref=f"{REF} abstract",
               reason=(f"gain {low.gain:+.3f} [{low.gain_low:+.3f}, {low.gain_high:+.3f}] at "
                       f"error {low.error:.3f} ({low.arm}); {high.gain:+.3f} "
                       f"[{high.gain_low:+.3f}, {high.gain_high:+.3f}] at error "
                       f"{high.error:.3f} ({high.arm})"
                       + ("" if not crossings else "; first imagined step whose k-step error "
                          "passes the threshold: " + ", ".join(
                              f"{a} k={k:g}" if math.isfinite(k) else f"{a} never (k<=H)"
                              for a, k in crossings.items()))
                       + ("; an interval contains 0: more seeds would decide" if verdict else
                          "")), **common)
    return stats.gate([c1, c2, c3, c4], control)


def horizon_crossings(k_err, sweep, threshold) -> dict[str, float]:
    """For each arm of the error sweep, the first imagined step k at which the seed-mean k-step
    error (uniform policy, final model) exceeds the threshold; NaN if none within H."""
    out = {}
    d = k_err[k_err.policy == "uniform"].groupby(["arm", "k"]).error.mean()
    for arm in sweep.arm:
        curve = d[arm]
        above = curve[curve > threshold] if math.isfinite(threshold) else curve.iloc[:0]
        out[arm] = float(above.index[0]) if len(above) else float("nan")
    return out
