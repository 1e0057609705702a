"""DARS / DARS-B (arXiv:2508.13755, docs/papers.md): the depth bias of GRPO,
difficulty-adaptive rollouts, breadth, and pass@k on the prompt bank and the tiny transformer.

Experiments (the computation lives in ``rlvr_lab.papers.dars``: ``study`` for the bank and the
theory tables, ``small_study`` for the transformer, ``figures``):

* ``dars_theory`` — the cumulative advantage ``sum|A|`` of a group as a function of accuracy
  (plug-in closed form vs its exact expectation over the binomial group accuracy, with and
  without std), the ET/HW schedules, and the exact expected ``sum|A|`` and rollout cost of a
  DARS group vs p.
* ``dars_study`` — training on a prompt bank with many hard prompts: GRPO N=8, GRPO N=32,
  DARS-ET, DARS-HW, each with and without breadth (large batch, full-batch updates, 2 epochs,
  vs 4 mini-batch updates per step); quick mode runs GRPO N=8/N=32, DARS-ET/HW and DARS-HW +B.
  Pass@1 / pass@k (exact population values ``1-(1-p)^k``, and the unbiased estimator from 128
  samples at the end), token entropy and rollouts spent, at equal steps and at equal rollout
  budget (GRPO N=8's total rollouts). In the bank prompts share no parameters, so the
  sharpening cost of N=32 and the gradient-noise side of breadth cannot show there:
  ``dars_small`` repeats the study where they can.
* ``dars_small`` (small model) — the tiny transformer of ``tiny_grpo`` (SFT base with
  carry-dropping demonstrations, binary verifier), DARS's advantage ``r - mean`` for every arm:
  GRPO N=8, GRPO N=32, DARS-ET (N=8, n_max=32), DARS-HW (n_max=64) and breadth +B (4x the
  prompts per step in one full-batch update). The **headline is equal budget**: GRPO N=8 runs
  on until its rollouts equal each DARS arm's measured total for that SFT base, and each DARS
  arm is compared with GRPO at its own rollouts; equal steps is a claim of its own. Seeds are
  nested in SFT bases (``SMALL_PLAN``), arms paired within a seed (same key); the positive
  control ``small_grpo_raises_pass1`` (GRPO N=8 gains over its base) gates the study. The
  depth x breadth 2x2 adds DARS-HW +B (4x the prompts per step, stopped at the step whose
  rollouts lie closest to DARS-HW's total), run only while ``dars_breadth_depth_orthogonal``
  is open; each DARS cell is compared with GRPO at its own rollouts; DARS-ET-B is not run.
  Quick mode runs GRPO N=8, GRPO N=32 and DARS-ET only: the claims that need DARS-HW or +B
  are full-run only.

The claims are declared once below (``THEORY_CLAIMS``, ``STUDY_CLAIMS``, ``SMALL_CLAIMS``) with
their paper values, locations, estimands and rules; ``figures/claims.csv`` has their verdicts.
The functions below are also what ``notebooks/03_dars.ipynb`` calls, so the figures agree.
"""
from __future__ import annotations

import pandas as pd

from rlvr_lab import claims, experiments
from rlvr_lab.experiments import experiment
from rlvr_lab.papers.dars.figures import (  # noqa: F401  (the notebook reads them from here)
    passk_figure, rollouts_figure, small_figure, style, theory_figure, training_figure)
from rlvr_lab.papers.dars.small_study import (  # noqa: F401
    ARMS, BREADTH, DARS_B, SMALL_N_MAX, entropy_window, eval_at, run_base, small_arm,
    small_frame, small_numbers, small_rollouts)
from rlvr_lab.papers.dars.small_study import small_base as _small_base
from rlvr_lab.papers.dars.study import (  # noqa: F401
    DEPTH, FULL, METHODS, N_MAX, N_STAGE1, PAPER_NUMBERS, QUICK, QUICK_METHODS, StudySettings,
    at_budget, at_level, curve_matrix, entropy_level, expected_cumulative_advantage_dars,
    peak_errors, per_seed, plugin_gap, run_study, schedule_table, study_numbers,
    summary_table, theory_curves)
from rlvr_lab.train import bases
from simulations import tiny_grpo

PAPER = "DARS"
ABSTRACT = "arXiv:2508.13755 abstract"
# the numbers of the paper's main results table, as read in the authors' README
# the schedule that spends extra rollouts only on prompts below 0.5 stage-1 accuracy
SCHEDULE_CODE = (f"{ABSTRACT}; mechanism: authors' code (yangzhch6/DARS) "
                 "verl/verl/trainer/ppo/ray_dars_trainer.py, schedule_ET / schedule_HW (no "
                 "second-stage rollouts once a prompt's stage-1 accuracy is >= 0.5)")
README_TABLE = (f"{ABSTRACT}; numbers: authors' README (yangzhch6/DARS), Experimental Results "
                "table, 1.5B rows (the paper's table number not found)")
P = PAPER_NUMBERS
_style = style
Claim = claims.Declared
PASSK_128 = "pass@128 (exact population value, mean over prompts)"
NOT_FINAL_MARGIN = 0.01   # below the paper's smallest DARS gain (+1.6 pp Pass@128, ET)
COST_RATIO = 1.1          # "(almost) no extra cost": at most 10% more rollouts than B N
# depth x breadth: the interaction must lie within +-ORTHOGONAL_MARGIN (half of DARS-HW's
# Pass@128 gain over GRPO in the README table, 82.1 - 79.6 = +2.5 pp) and fails wholly beyond
# the whole gain (breadth erasing or doubling it); fixed before the first run
ORTHOGONAL_MARGIN = round((P["DARS-HW"][1] - P["GRPO"][1]) / 2 / 100, 6)   # 0.0125
ORTHOGONAL_FAIL = round((P["DARS-HW"][1] - P["GRPO"][1]) / 100, 6)          # 0.025


def _sup(id_, statement, estimand, unit, paper_value, note="", **kw):
    """A paired difference whose 95% interval must lie above 0 (below 0 fails)."""
    kw.setdefault("paper_ref", ABSTRACT)
    return Claim(id_, statement=statement, rule="superiority", direction=">", threshold=0.0,
                 estimand=estimand, unit=unit, paper_value=paper_value, note=note, **kw)


def _not_final(id_, k, estimand):
    return Claim(id_, rule="non_inferiority", direction="<", threshold=NOT_FINAL_MARGIN,
                 statement=f"naively raising N (8 -> 32) does not raise final pass@{k} (equal "
                           "steps; the early speed-up is a claim of its own)",
                 estimand=estimand, unit=f"pass@{k}",
                 paper_value="N=32 converges faster; Pass@K not higher (can be lower)",
                 paper_ref=ABSTRACT,
                 note=f"margin {NOT_FINAL_MARGIN} < the paper's smallest DARS gain (+1.6 pp)")


def _cost(id_, estimand, note):
    return Claim(id_, statement="at convergence DARS spends (almost) no more rollouts than GRPO",
                 rule="threshold", direction="<", threshold=COST_RATIO, estimand=estimand,
                 unit="x B N", paper_value="no extra inference cost at convergence", note=note,
                 paper_ref=SCHEDULE_CODE)


# ----------------------------------------------------------------------------- theory
THEORY_CLAIMS = (Claim(
    "cumulative_advantage_peak", rule="exact", direction="<", threshold=1e-9,
    statement="Σ|A| = 2N·a(1−a) (no std) / 2N·√(a(1−a)) (std) peaks at a = 0.5 and vanishes "
              "at a = 0 and 1; the same holds for its exact expectation over the binomial "
              "group accuracy",
    paper_value="2N·a(1−a), peak at 0.5, 0 at a ∈ {0,1}",
    paper_ref=("arXiv:2508.13755 abstract; closed form in the authors' code "
               "verl/verl/trainer/ppo/ray_dars_trainer.py, schedule_ET / schedule_HW "
               "(equation number not found)"),
    estimand="per curve (plug-in/expected x none/std, N=8, 401-point grid): argmax − 0.5, the "
             "values at a = 0 and 1, the count of interior points <= 0",
    unit="(a, Σ|A|, points)",
    note="expected/plug-in = (N−1)/N without std: the plug-in overstates what a prompt gets"),)


@experiment("dars_theory", paper=PAPER, setting="theory", claims=THEORY_CLAIMS)
def run_theory(ctx):
    """Cumulative advantage closed forms (plug-in vs expected) and the DARS schedules."""
    curves = theory_curves()
    table = schedule_table()
    ctx.save_table(curves, "dars_theory_curves")
    ctx.save_table(table, "dars_schedule_table")
    ctx.save_figure(theory_figure(curves, table), "dars_theory")
    return ctx.decide({"cumulative_advantage_peak": claims.seeds(peak_errors(curves))})


# ----------------------------------------------------------------------------- bank study
STUDY_CLAIMS = (
    _sup("naive_n32_speeds_early", "naively raising N (8 -> 32) speeds early progress",
         "pass@1 of GRPO N=32 minus N=8 at 20% of the steps, per seed", "pass@1",
         "N=32 converges faster",),
    _not_final("naive_n32_early_not_final", 128,
               "final pass@128 of GRPO N=32 minus N=8 (equal steps), per seed"),
    _sup("dars_raises_passk_et", "DARS-ET raises pass@128 over GRPO (N=8) at equal steps",
         f"final {PASSK_128}, DARS-ET minus GRPO N=8, per seed", "pass@128",
         f"Pass@128 {P['DARS-ET'][1]} vs {P['GRPO'][1]}", paper_ref=README_TABLE),
    _sup("dars_raises_passk_et_equal_budget",
         "DARS-ET raises pass@128 over GRPO (N=8) at GRPO's total rollout budget",
         f"{PASSK_128} once GRPO N=8's total rollouts are spent (interpolated), DARS-ET minus "
         "GRPO N=8, per seed", "pass@128",
         f"Pass@128 {P['DARS-ET'][1]} vs {P['GRPO'][1]} (equal steps); 'no extra "
         "inference cost at convergence'", paper_ref=README_TABLE),
    _sup("dars_raises_passk_hw", "DARS-HW raises pass@128 over GRPO (N=8) at equal steps",
         f"final {PASSK_128}, DARS-HW minus GRPO N=8, per seed", "pass@128",
         f"Pass@128 {P['DARS-HW'][1]} vs {P['GRPO'][1]}", paper_ref=README_TABLE),
    _sup("dars_raises_passk_hw_equal_budget",
         "DARS-HW raises pass@128 over GRPO (N=8) at GRPO's total rollout budget",
         f"{PASSK_128} once GRPO N=8's total rollouts are spent (interpolated), DARS-HW minus "
         "GRPO N=8, per seed", "pass@128",
         f"Pass@128 {P['DARS-HW'][1]} vs {P['GRPO'][1]} (equal steps); 'no extra "
         "inference cost at convergence'", paper_ref=README_TABLE),
    _sup("breadth_raises_pass1",
         "breadth (4x batch, full-batch updates, 2 epochs) raises pass@1 at equal steps",
         "final pass@1, +B minus mini-batch, minimum over the methods run with and without "
         "breadth, per seed", "pass@1",
         f"Avg@128 ET {P['DARS-ET'][0]}→{P['DARS-ET-B'][0]}, "
         f"HW {P['DARS-HW'][0]}→{P['DARS-HW-B'][0]}", paper_ref=README_TABLE),
    _sup("breadth_keeps_entropy_higher",
         "breadth keeps token entropy higher (final entropy, equal steps)",
         "final token entropy, +B minus mini-batch, minimum over the methods run with and "
         "without breadth, per seed", "nats",
         "higher token entropy with large breadth (curves)",
         note="per step breadth trains on 4x the prompts, so the bank policy sharpens faster"),
    _sup("breadth_keeps_entropy_higher_equal_pass1",
         "breadth keeps token entropy higher at equal progress",
         "token entropy when pass@1 first reaches 0.9 x the lowest final mean pass@1 of all "
         "methods, +B minus mini-batch, minimum over the methods, per seed", "nats",
         "higher token entropy with large breadth (curves)"),
    _sup("dars_b_both", "DARS-HW-B raises both pass@1 and pass@128 over GRPO at equal steps",
         "the smaller of the final pass@1 and pass@128 gains of DARS-HW +B over GRPO N=8, "
         "per seed", "pass@k",
         f"{P['GRPO'][0]}/{P['GRPO'][1]} → {P['DARS-HW-B'][0]}/{P['DARS-HW-B'][1]}",
         paper_ref=README_TABLE),
    _cost("dars_no_extra_cost_at_convergence",
          "rollouts per step over the last 10% of steps / (B N), the larger of DARS-ET and "
          "DARS-HW, per seed",
          "bank prompts still at stage-1 accuracy 0 keep triggering the largest stage 2"),
)


@experiment("dars_study", paper=PAPER, setting="bank", claims=STUDY_CLAIMS)
def run_study_experiment(ctx):
    """GRPO N=8/32 vs DARS-ET/HW, ± breadth, on a bank with many hard prompts."""
    s, methods = (QUICK, QUICK_METHODS) if ctx.quick else (FULL, METHODS)
    result = run_study(ctx.stream("bank"), s, ctx.seeds, methods)
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
    return ctx.decide({k: claims.seeds(v) for k, v in study_numbers(result, s).items()})


def study_claims(result: dict, s: StudySettings) -> list[experiments.Claim]:
    """The ``dars_study`` claims decided from a :func:`run_study` result (for the notebook)."""
    specs = experiments.get("dars_study").declared
    return [experiments.Claim.from_decision(d) for d in claims.decide_all(
        specs, {k: claims.seeds(v) for k, v in study_numbers(result, s).items()})]


# ----------------------------------------------------------------------------- small model
# dars_small is the most expensive study of the reproduction (870 s full at 8 seeds in one
# program, five arms, DARS-HW's padded stage alone ~8x GRPO N=8 per step): 3 bases x 2 seeds
# first, one more base while a claim is undecided, at most 4 bases = the same 8 seeds at most,
# so the full run stays near today's ~900 s (2 looks). Quick: tiny_grpo's plan.
# dars_breadth_depth_orthogonal adds DARS-HW +B while it is open: 4B prompts a step through
# the padded n_max=64 stage until its rollouts reach DARS-HW's, at most S/4 steps' worth of
# DARS-HW's compute (8x GRPO N=8's per step; ~0.7 of it, as its spend per step runs ~1.4x
# DARS-HW's x4): a base with every arm costs ~27-29.5 instead of ~21.5 GRPO-N=8-runs
# (+27-37%), the full run (2094 s in figures/timings.json) ~2650-2870 s if it stays open to
# the last look (estimated from the arms' rollouts per step, not timed).
SMALL_PLAN = claims.SeedPlan(bases=3, seeds_per_base=2, batch_bases=1, max_bases=4)
# DARS-HW and the two +B arms cost about half of dars_small's quick time (142 -> 225 s warm
# when the +B arms came); quick runs skip the claims only they serve (claims.Declared.full_only)
FULL_ONLY = "DARS-HW and the +B arms would double dars_small's quick time"
HELD = "held-out pass@k_max (k_max: 64 full, 8 quick)"
PAPER_ET = f"Pass@128 {P['DARS-ET'][1]} vs {P['GRPO'][1]} (Qwen2.5-Math-1.5B)"
SMALL_CLAIMS = (
    Claim("small_grpo_raises_pass1", control=True, rule="superiority", direction=">",
          threshold=0.0,
          statement="GRPO N=8 (advantage r - mean) raises held-out pass@1 over the SFT base "
                    "(the study's positive control)",
          estimand="held-out pass@1 of GRPO N=8 at step S minus the SFT base's, per seed",
          unit="pass@1",
          paper_value=tiny_grpo.RL_OVER_SFT_VALUE,
          paper_ref=tiny_grpo.RL_OVER_SFT_REF),
    _sup("small_dars_passk_equal_budget",
         "DARS-ET raises held-out pass@k over GRPO (N=8) at equal rollouts (the headline)",
         f"{HELD} of DARS-ET at step S minus GRPO N=8 at the step where its rollouts equal "
         "DARS-ET's (mean over the base's seeds), per seed", "pass@k",
         f"{PAPER_ET}; 'no extra inference cost at convergence'", paper_ref=README_TABLE),
    _sup("small_dars_passk_equal_steps",
         "DARS-ET raises held-out pass@k over GRPO (N=8) at equal steps",
         f"{HELD} at step S, DARS-ET minus GRPO N=8, per seed", "pass@k", PAPER_ET,
         paper_ref=README_TABLE,
         note="equal steps, so DARS spends ~1.4x GRPO's rollouts; the equal-rollout reading is "
              "small_dars_passk_equal_budget"),
    _sup("small_naive_n32_speeds_early", "naively raising N (8 -> 32) speeds early progress",
         "held-out pass@1 of GRPO N=32 minus N=8 at the first evaluation (step S/4 full, S/2 "
         "quick), per seed", "pass@1", "N=32 converges faster",),
    _not_final("small_naive_n32_early_not_final", "k_max",
               f"{HELD} at step S, GRPO N=32 minus N=8, per seed"),
    _cost("small_dars_no_extra_cost_at_convergence",
          "DARS-ET rollouts per step over the last quarter of the run / (B N), per seed",
          "read at the end of the run; DARS pays extra only while prompts sit below 0.5"),
    _sup("small_dars_hw_passk_equal_budget",
         "DARS-HW raises held-out pass@k over GRPO (N=8) at equal rollouts",
         f"{HELD} of DARS-HW at step S minus GRPO N=8 at the step where its rollouts equal "
         "DARS-HW's own, per seed", "pass@k", f"Pass@128 {P['DARS-HW'][1]} vs {P['GRPO'][1]}",
         paper_ref=README_TABLE,
         note="GRPO N=8 is read at DARS-HW's own budget (it was DARS-ET's, 1.32x less)",
         full_only=FULL_ONLY),
    _sup("small_breadth_raises_pass1_equal_rollouts",
         "breadth (4x the prompts per step, one full-batch update) raises held-out pass@1 at "
         "equal rollouts and equal updates per prompt",
         "held-out pass@1 of +B at step S/4 minus GRPO N=8 at step S (same rollouts), per "
         "seed", "pass@1",
         f"Avg@128 ET {P['DARS-ET'][0]}->{P['DARS-ET-B'][0]}, HW {P['DARS-HW'][0]}->"
         f"{P['DARS-HW-B'][0]} (equal steps)", paper_ref=README_TABLE,
         full_only=FULL_ONLY),
    _sup("small_breadth_entropy_higher_equal_pass1",
         "breadth keeps token entropy higher at equal progress",
         "token entropy (+B minus GRPO N=8) when the smoothed batch pass@1 first reaches 0.9 x "
         "the lower of the seed's two final values, per seed", "nats",
         "higher token entropy with large breadth (curves)",
         full_only=FULL_ONLY),
    Claim("dars_breadth_depth_orthogonal", rule="equivalence", direction="<",
          threshold=ORTHOGONAL_MARGIN, fail_threshold=ORTHOGONAL_FAIL, level=0.90,
          statement="depth (DARS-HW) and breadth (4x the prompts per step, one full-batch "
                    "update) are orthogonal: at equal rollouts DARS's held-out pass@k gain "
                    "is the same with and without breadth (the two effects add)",
          estimand=f"{HELD}: (DARS-HW +B minus GRPO N=8 +B) minus (DARS-HW minus GRPO N=8), "
                   "DARS-HW at step S, DARS-HW +B stopped at DARS-HW's rollouts, each GRPO "
                   "cell read at its DARS cell's measured rollouts (means over the base's "
                   "seeds), per seed", unit="pass@k",
          paper_value=f"breadth and depth are orthogonal dimensions; Pass@128 GRPO "
                      f"{P['GRPO'][1]}, DARS-HW {P['DARS-HW'][1]}, DARS-HW-B "
                      f"{P['DARS-HW-B'][1]} (no GRPO-B row)", paper_ref=README_TABLE,
          note=f"margin {ORTHOGONAL_MARGIN:.4g} = half of DARS-HW's Pass@128 gain (82.1 - "
               f"79.6 = +2.5 pp, README 1.5B rows), fail beyond {ORTHOGONAL_FAIL:.3g} = the "
               "whole gain; 90% interval (TOST at 5%); all four cells at DARS-HW's rollouts "
               "(to within half a step of DARS-HW +B)", full_only=FULL_ONLY),
)
# the arms each small-model claim needs besides GRPO N=8 (a base added while some claims are
# still open runs only theirs)
SMALL_ARMS = {"small_grpo_raises_pass1": (), "small_dars_passk_equal_budget": ("DARS-ET",),
              "small_dars_passk_equal_steps": ("DARS-ET",),
              "small_naive_n32_speeds_early": ("GRPO N=32",),
              "small_naive_n32_early_not_final": ("GRPO N=32",),
              "small_dars_no_extra_cost_at_convergence": ("DARS-ET",),
              "small_dars_hw_passk_equal_budget": ("DARS-HW",),
              "small_breadth_raises_pass1_equal_rollouts": ("GRPO N=8 +B",),
              "small_breadth_entropy_higher_equal_pass1": ("GRPO N=8 +B",),
              "dars_breadth_depth_orthogonal": ("DARS-HW", DARS_B, "GRPO N=8 +B")}


def small_base(quick: bool):
    """``tiny_grpo``'s recipe with DARS's advantage ``r - mean`` for every arm."""
    return _small_base(tiny_grpo.rl_config(quick), quick)


def run_small(key, quick: bool, num_seeds: int, progress=None):
    """One SFT base (base 0), for the notebook: DARS-ET, GRPO N=32 and GRPO N=8 (full mode
    adds DARS-HW and +B). Returns ``(runs, configs, info)``; ``info["budget"]`` is DARS-ET's
    rollouts, ``info["grpo_steps"]`` GRPO N=8's steps at that budget."""
    arms = ("DARS-ET", "GRPO N=32") if quick else ARMS
    runs, configs, info = run_base(small_base(quick), key, 0, num_seeds, arms)
    return runs, configs, {"budget": info["budget DARS-ET"],
                           "grpo_steps": info["steps DARS-ET"], **info}


@experiment("dars_small", sft_bases=("quick",), paper=PAPER, setting="small model",
            claims=SMALL_CLAIMS, plan=SMALL_PLAN, quick_plan=tiny_grpo.QUICK_PLAN)
def run_small_experiment(ctx):
    """GRPO N=8 vs N=32 vs DARS on the tiny transformer at equal steps and equal rollouts."""
    base = small_base(ctx.quick)
    m = ctx.plan.seeds_per_base
    key = ctx.stream("rl")
    frames, first = [], {}

    def measure(base_ids, open_ids):
        arms = {a for cid in open_ids for a in SMALL_ARMS[cid]}
        numbers = []
        for b in ctx.progress(base_ids, "SFT bases"):
            runs, configs, info = run_base(base, key, b, m, arms)
            numbers.append(small_numbers(runs, configs, info, base))
            frames.append(small_frame(runs, configs).assign(base=b))
            first.setdefault("runs", (runs, configs))
        labels = bases.labels(base_ids, m)
        return claims.nested_by_base(numbers, labels, open_ids)

    decided, _ = ctx.sequential(measure)
    frame = pd.concat(frames, ignore_index=True)
    ctx.save_table(frame, "dars_small_heldout")
    runs, configs = first["runs"]
    ctx.save_figure(small_figure(frame, runs, configs, entropy_window(base)), "dars_small")
    return decided
