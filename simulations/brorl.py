"""BroRL (arXiv:2510.01180, broadened exploration): mass balance, reviving a saturated run, and
the same on the tiny transformer.

Three experiments; the computation lives in ``rlvr_lab.papers.brorl`` (:mod:`.sweep` the
synthetic sweeps, :mod:`.training` the bank study, :mod:`.small` the transformer study,
:mod:`.plots` the figures).

1. ``brorl_mass_balance`` (toy/theory). One step of the paper's idealised update and of the
   realistic sampled policy gradient on synthetic token distributions (Gaussian logits at
   several temperatures, Zipf laws; |C| correct tokens at initial correct mass Q0), N swept;
   and a relaxed multi-step sweep (larger step, resampling every step). A trial is the unit.
   The first-order check compares the three-term sum with the Richardson limit of
   exact(eta)/eta and with the identity built from the softmax derivative.
2. ``brorl_training`` (bank). N=16 until the accuracy flattens, then N=16 vs N=512 from the
   same state (the ``brorl_schedule`` rollout stage switches the group size mid-run), compared
   at equal steps and at equal phase-2 rollouts (N=16 runs 32x the steps).
3. ``brorl_small`` (small model). Per SFT base: GRPO at N=8 to a plateau (phase 1), then from
   **that base's own** saturated checkpoint (its phase-1 seed 0) N=8 vs N=64 on paired seeds
   (phase 2, equal rollouts: N=8 runs 8x the steps); and the mass balance of a sampled-PG step
   with 1024 rollouts on the checkpoint's own tens-digit distribution. Seeds are nested in SFT
   bases (``SMALL_PLAN``); the positive control ``small_phase1_raises_pass1`` (phase-1 GRPO
   gains over its base) gates the study. The paper gives no equal-rollout number for the
   revival, so the equal-rollout comparison is ours. The equal-wall-time comparison is not
   applicable on this CPU (decoding is compute-bound, so large N buys no throughput); it is
   measured and reported.

The claims are declared once below (``MASS_CLAIMS``, ``TRAINING_CLAIMS``, ``SMALL_CLAIMS``)
with their paper values, locations, estimands and rules; ``figures/claims.csv`` has their
verdicts.
"""
from __future__ import annotations

import dataclasses

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from rlvr_lab import claims
from rlvr_lab.experiments import experiment
from rlvr_lab.papers.brorl import plots, small, sweep, training
from rlvr_lab.papers.brorl.plots import plot_training, small_figure
# FAMILIES, SweepConfig, make_logits: for the notebook
from rlvr_lab.papers.brorl.sweep import FAMILIES, FULL, QUICK, SweepConfig, make_logits  # noqa
from rlvr_lab.papers.brorl.training import TRAIN_FULL, TRAIN_QUICK, training_frame, training_study
from rlvr_lab.train import bases
from simulations import tiny_grpo

PAPER = "BroRL"
V1 = "arXiv:2510.01180v1"  # the full text read: arXiv v1 (Oct 2025)
SATURATED = f"{V1} Sec. 4.2.3 (Table 1, Fig. 1: ProRL N=16 vs BroRL N=512 from the 3K-step ckpt)"
THEOREM = f"{V1} Sec. 2 (Theorem 1, implication (i); Lemma 2, Corollary 3)"
VANISH = 0.01   # "falls below 1%": the mass-decrease claims' threshold (the module's criterion)

# ============================================================================ mass balance
MASS_CLAIMS = (
    claims.Declared(
        "mass_balance_first_order", setting="theory",
        statement="The three-term mass-balance sum equals the first-order change of the "
                  "correct mass",
        paper_value="exact first-order identity (derived)",
        estimand="per trial, N and update (float64): |Richardson limit of exact(eta)/eta - "
                 "three-term total| / condition scale, over 1e-6; and |three-term total - "
                 "sum_j p_j (c_j - Q) dz_j| / size of the terms, over 1e-10",
        unit="x tolerance", rule="exact", direction="<", threshold=1.0),
    claims.Declared(
        "p_mass_decrease_vanishes", setting="toy",
        statement="P(dQ_pos < 0) after one step of the paper's idealised update falls below 1% "
                  "as N grows, in the hardest setting (the one with the largest P at N=16)",
        paper_value="-> 0 as N grows (no numbers public)",
        estimand="per trial of the hardest setting (smallest Q0, largest P(dQ<0) at N=16): 1 "
                 "if one idealised step with the largest N lowered the correct mass, else 0",
        unit="probability", rule="threshold", direction="<", threshold=VANISH,
        note="the unsampled term, the only one that can be negative, empties as N covers "
             "the vocabulary; P at N=16 is in the brorl_one_step table"),
    claims.Declared(
        "p_mass_decrease_vanishes_sampled_pg", setting="toy",
        statement="P(dQ_pos < 0) after one step of the realistic sampled policy gradient falls "
                  "below 1% as N grows, in the hardest setting (the one with the largest P at "
                  "N=16)",
        paper_value="-> 0 as N grows (no numbers public)",
        estimand="per trial of the hardest setting (smallest Q0, largest P(dQ<0) at N=16): 1 "
                 "if one sampled-PG step with the largest N lowered the correct mass, else 0",
        unit="probability", rule="threshold", direction="<", threshold=VANISH,
        note="with multiplicities a sampled correct token with p above its frequency is "
             "pushed down, a term the idealised update does not have"),
    claims.Declared(
        "all_correct_tokens_increase", setting="toy",
        statement="With a sufficiently large N the probability of every correct token "
                  "increases (relaxed: several steps with a large step size, resampling each "
                  "step; idealised update)",
        paper_value="all correct tokens increase for large N",
        estimand="per trial of the relaxed setting where it is rarest at the largest N: 1 if "
                 "every correct token ended above its initial probability, else 0",
        unit="probability", rule="threshold", direction=">", threshold=0.99,
        note="at full coverage a tiny correct token moves by -p.dz, negative when the correct "
             "set is more concentrated than the wrong one (sum_C p^2/Q_pos > sum_W p^2/Q_neg)"),
)


def mass_balance_study(key_fn, configs: dict, save_figure=None, save_table=None) -> dict:
    """The sweeps of ``configs`` (``FULL``/``QUICK``; ``key_fn(name)`` -> key), their figures
    and tables, and the per-trial samples of the claims (keyed by claim id)."""
    out = sweep.run_sweeps(key_fn, configs)
    summary, relaxed, one = out["summary"], out["relaxed"], configs["one_step"]
    figures = {}
    for cfg in [c for k, c in configs.items() if k != "relaxed"]:
        sub = summary[summary.vocab_size == cfg.vocab_size]
        tag = "" if cfg.vocab_size == one.vocab_size else f"_v{cfg.vocab_size}"
        figures[f"brorl_p_decrease_vs_n{tag}"] = plots.plot_vs_n(
            sub, "p_decrease", "P(dQ_pos < 0)", hline=VANISH,
            title="P(correct mass decreases after one step); " + cfg.describe())
        figures[f"brorl_correct_down_vs_n{tag}"] = plots.plot_vs_n(
            sub, "frac_correct_down", "fraction of correct tokens down",
            title="Correct tokens whose probability decreases; " + cfg.describe())
    hard = summary[(summary.q0 == summary.q0.min()) & (summary.vocab_size == one.vocab_size)]
    show = list(hard[(hard.N == 16) & (hard["update"] == "sampled_pg")]
                .sort_values("p_decrease", ascending=False)["setting"].iloc[:2])
    show += [s for s in summary[(summary.q0 == summary.q0.max()) &
                                (summary.num_correct == summary.num_correct.max())]
             ["setting"].unique()[:1]]
    figures["brorl_terms_vs_n"] = plots.plot_terms(
        summary[summary.vocab_size == one.vocab_size], show)
    figures["brorl_first_order"] = plots.plot_first_order(out["curve"])
    figures["brorl_relaxed"] = plots.plot_relaxed(relaxed)
    n_max, n_relaxed = max(one.n_values), max(configs["relaxed"].n_values)
    samples = {
        # the first-order check runs in the main one-step sweep (first_order_etas)
        "mass_balance_first_order": claims.seeds(sweep.first_order_errors(out["frames"][0])),
        "p_mass_decrease_vanishes": claims.proportion(sweep.p_decrease_trials(
            out["trials"], summary, "idealised", n_max)),
        "p_mass_decrease_vanishes_sampled_pg": claims.proportion(sweep.p_decrease_trials(
            out["trials"], summary, "sampled_pg", n_max)),
        "all_correct_tokens_increase": claims.proportion(sweep.all_up_trials(
            out["relaxed_trials"], relaxed, n_relaxed)),
    }
    if save_figure is not None:
        for name, fig in figures.items():
            save_figure(fig, name)
    if save_table is not None:
        save_table(summary, "brorl_one_step")
        save_table(relaxed, "brorl_relaxed")
        save_table(out["curve"], "brorl_first_order")
    return {**out, "figures": figures, "samples": samples}


@experiment("brorl_mass_balance", paper=PAPER, claims=MASS_CLAIMS, default_seeds=16,
            quick_seeds=4)
def run_mass_balance(ctx):
    """BroRL mass balance: one-step N-sweep (both updates) and relaxed multi-step sweep."""
    out = mass_balance_study(lambda name: ctx.stream(f"mass_{name}"),
                             QUICK if ctx.quick else FULL,
                             save_figure=ctx.save_figure, save_table=ctx.save_table)
    for fig in out["figures"].values():
        plt.close(fig)
    return ctx.decide(out["samples"])


# ============================================================================ bank training
TRAINING_CLAIMS = (
    claims.Declared(
        "large_n_revives_saturated", setting="bank",
        statement="After N=16 training saturates, continuing with N=512 gains more accuracy "
                  "than continuing with N=16 (same number of steps)",
        paper_value="BroRL revives ProRL-1.5B saturated after 3K steps",
        estimand="accuracy (mean success probability over the bank) after phase 2 with N=512 "
                 "minus with N=16, same phase 1 and keys, per seed", unit="accuracy",
        rule="superiority", direction=">", threshold=0.01, fail_threshold=0.0,
        note="per step a larger group sees more of a hard prompt's rare correct answers"),
    claims.Declared(
        "brorl_revival_equal_rollouts", setting="bank", paper_ref=SATURATED,
        statement="large-N rollouts revive the saturated policy at equal rollouts: after N=16 "
                  "saturates, continuing with N=512 ends above continuing with N=16 after the "
                  "same number of phase-2 rollouts (N=16 runs 32x the steps)",
        paper_value="Table 1 at about equal samples (ProRL N=16 +10,439k, BroRL N=512 "
                    "+11,226k): Math 62.02 vs 62.62, Code 52.74 vs 53.31",
        estimand="accuracy (mean success probability over the bank) after budget_steps "
                 "phase-2 steps at N=512 minus after 32 x budget_steps steps at N=16 (equal "
                 "phase-2 rollouts), same phase 1 and keys, per seed", unit="accuracy",
        rule="superiority", direction=">", threshold=0.0, fail_threshold=0.0,
        note="one update per RL step in both arms, as the paper keeps the number of PPO "
             "mini-batches per step, so at equal samples N=16 makes 32x the updates; the bank "
             "is where the mass-balance theory is exact and seeds are cheap, so it decides "
             "this comparison (the small model's twin, small_revival_equal_rollouts, cannot "
             "resolve a gain of the paper's size)"),
    claims.Declared(
        "fewer_filtered_groups", setting="bank",
        statement="Large N leaves fewer groups with all-equal rewards (filtered by dynamic "
                  "sampling)",
        paper_value="dynamic-sampling pass rate 41% at N=16, 62% at N=512 (Table 2)",
        paper_ref=f"{V1} Sec. 4.2.4, Table 2 (Dynamic Sampling Pass Rate)",
        estimand="mean fraction of phase-2 groups with all-equal rewards, N=512 minus N=16, "
                 "per seed", unit="fraction of groups",
        rule="superiority", direction="<", threshold=0.0,
        note="a group is all-equal with probability p^N + (1 - p)^N, falling with N"),
)


# Seeds. The run of 8 seeds on the stream "train" (committed until 2026-12-07) left
# brorl_revival_equal_rollouts inconclusive (+0.0013 [-0.018, +0.021]); it and 136 seeds on
# keys outside any run (-0.018 and -0.016 at 8 and 128 seeds, per-seed spread 0.027-0.030)
# served as a pilot that sizes this run, and nothing else: the criterion is the one declared
# before them (pass above 0, fail below 0). At the pilot's spread 64 seeds give a 95%
# half-width of about 0.007 (a difference of the pilot's size is decided with power above
# 0.99; one of the paper's +0.006 is not). The stream is new ("branches"), so none of the
# pilot's seeds enter the decision. Cost: ~1.1 s a seed on 2 idle cores (~70 s in all).
BANK_SEEDS = 64


@experiment("brorl_training", paper=PAPER, claims=TRAINING_CLAIMS, default_seeds=BANK_SEEDS,
            quick_seeds=3)
def run_training(ctx):
    """BroRL on the prompt bank: saturate at N=16, then continue at N=16 vs N=512."""
    study = TRAIN_QUICK if ctx.quick else TRAIN_FULL
    # one key for phase 1 and both branches of every seed (the branches are paired)
    res = training_study(ctx.stream("branches"), study, ctx.seeds)
    df = training_frame(res, study)
    ctx.save_table(df, "brorl_training")
    fig = plot_training(df, res, study)
    ctx.save_figure(fig, "brorl_training")
    plt.close(fig)
    return ctx.decide(training_samples(training.seed_numbers(df, study)))


def training_samples(numbers: dict) -> dict:
    """The bank claims' per-seed samples from :func:`training.seed_numbers`."""
    return {"large_n_revives_saturated": claims.seeds(numbers["gain"]),
            "fewer_filtered_groups": claims.seeds(numbers["filtered"]),
            "brorl_revival_equal_rollouts": claims.seeds(numbers["budget_large"]
                                                         - numbers["budget_small"])}


# ============================================================================ small model
PLATEAU_MARGIN = 0.03   # phase 1 has plateaued: last-segment change within +-0.03
# Its own full plan: every base trains its own phase 1 and both phase-2 arms and compiles its
# own trainers, so tiny_grpo.FULL_PLAN (4 x 2, up to 6 x 2 = 12 seeds) would cost about twice
# today's 167 s at 8 seeds, or more. Phase 2 starts from one checkpoint per base, so the
# phase-2 comparisons vary mostly from base to base: 1 seed per base, 4 bases (+2 while a
# claim is undecided, up to 6) keeps the run near today's (estimated 150-230 s on 2 idle
# cores, not timed) and gives the interval more base means. Quick: tiny_grpo.QUICK_PLAN.
# small_revival_equal_rollouts at the spread of the run that set this plan (-0.0068 [-0.031,
# +0.017] at 6 bases; base means spread ~0.019) would need about 41 bases to be decided,
# ~1760 s (~6.8x the full run's 258 s at 6 bases, ~43 s a base): beyond ~2x, so max_bases
# stays 6 and it may stay inconclusive. A cap of 12 (~2x) would still leave an estimate of
# -0.007 straddling 0. (The committed run: -0.007 [-0.042, +0.028], about 80 bases.)
SMALL_PLAN = claims.SeedPlan(bases=4, seeds_per_base=1, batch_bases=2, max_bases=6)


def small_phase1(quick: bool):
    """``tiny_grpo``'s recipe at N=8 (quick: B=16, 24 steps; full: B=32, 100 steps)."""
    rl = tiny_grpo.rl_config(quick)
    if quick:
        return dataclasses.replace(rl, num_prompts=16, steps=24, eval_every=8, eval_problems=64,
                                   eval_samples=4)
    return dataclasses.replace(rl, steps=100, eval_every=10, eval_problems=128, eval_samples=8)


def small_phase2_steps(quick: bool) -> int:
    """Steps of the N=64 continuation (N=8 runs 8x as many: equal rollouts; a multiple of
    phase 1's ``eval_every``, so N=8 is evaluated there)."""
    return 2 if quick else 5


def run_small(key, quick: bool, num_seeds: int, base: int = 0) -> dict:
    """One SFT base of ``brorl_small`` (:func:`rlvr_lab.papers.brorl.small.run_base`) with the
    experiment's settings; ``key`` seeds every stream."""
    keys = {name: bases.base_key(key, i) for i, name in
            enumerate(("phase1", "phase2", "timing", "mass"))}
    return small.run_base(small_phase1(quick), base, keys, num_seeds, small_phase2_steps(quick),
                          mass_problems=64 if quick else 256, mass_trials=16 if quick else 64)


def _paired(what: str) -> str:
    return f"held-out pass@1 {what}, per seed (paired: same base, checkpoint and key)"


SMALL_CLAIMS = (
    claims.Declared(
        "small_phase1_raises_pass1", control=True, paper="GRPO",
        statement="phase-1 GRPO (N=8) raises held-out pass@1 over the SFT base (the study's "
                  "positive control)",
        paper_value=tiny_grpo.RL_OVER_SFT_VALUE,
        paper_ref=tiny_grpo.RL_OVER_SFT_REF,
        estimand="held-out pass@1 after phase 1 minus the SFT base's, per seed", unit="pass@1",
        rule="superiority", direction=">", threshold=0.0),
    claims.Declared(
        "small_phase1_plateau", paper_ref=SATURATED,
        statement="phase-1 GRPO (N=8) has saturated: held-out pass@1 no longer moves",
        paper_value="ProRL saturates after ~3K steps",
        estimand="held-out pass@1 at phase 1's last evaluation minus at the one before "
                 "(eval_every steps earlier), per seed", unit="pass@1",
        rule="equivalence", direction="<", threshold=PLATEAU_MARGIN, level=0.90,
        note="90% interval: the paired TOST at 5% the module used before"),
    claims.Declared(
        "small_large_n_improves_beyond_plateau", paper_ref=SATURATED,
        statement="continuing the saturated checkpoint with N=64 raises held-out pass@1",
        paper_value="continuous improvement beyond the saturation point",
        estimand=_paired("of N=64 after phase 2 minus at the checkpoint"), unit="pass@1",
        rule="superiority", direction=">", threshold=0.0),
    claims.Declared(
        "small_revival_equal_rollouts", paper_ref=SATURATED,
        statement="large-N rollouts revive the saturated policy at equal rollouts: from each "
                  "base's own plateaued checkpoint, continuing with N=64 ends above "
                  "continuing with N=8 after the same number of phase-2 rollouts",
        paper_value="Table 1 at about equal samples (ProRL N=16 +10,439k, BroRL N=512 "
                    "+11,226k): Math 62.02 vs 62.62, Code 52.74 vs 53.31",
        estimand=_paired("N=64 minus N=8 after the same phase-2 rollouts (N=8 runs 8x the "
                         "steps)"), unit="pass@1",
        rule="superiority", direction=">", threshold=0.0, fail_threshold=0.0,
        note="fail side zero: Table 1's gain at about equal samples (+0.6 points) is far "
             "below this setting's resolution (a few points at 6 bases): excluding it is "
             "out of reach here; the bank's brorl_revival_equal_rollouts decides the "
             "comparison; equal wall time is small_large_n_beats_n8_equal_wall_time"),
    claims.Declared(
        "small_large_n_beats_n8_equal_wall_time",
        paper_ref=(f"{V1} Sec. 4.2.4, Table 2 (72.4 vs 36.5 samples/s); equal training time: "
                   "Sec. 4.2.3, Table 1"),
        statement="from the checkpoint N=64 ends above N=8 at equal wall time",
        paper_value="large N nearly doubles generation throughput on GPUs",
        estimand=_paired("N=64 minus N=8 read at N=64's wall time on this machine "
                         "(interpolated between N=8's evaluations)"), unit="pass@1",
        rule="superiority", direction=">", threshold=0.0,
        not_applicable="the paper's wall-time gain comes from memory-bound GPU decoding "
                       "turning compute-bound at large N; on this CPU decoding is "
                       "compute-bound already, so a step of N=64 costs ~8x one of N=8 and "
                       "equal wall time is equal rollouts"),
    claims.Declared(
        "small_mass_decrease_vanishes_sampled_pg", paper_ref=THEOREM,
        statement="on the transformer's own tens-digit distribution, one sampled "
                  "policy-gradient step with many rollouts almost never lowers the correct "
                  "mass",
        paper_value="-> 0 as N grows (no numbers public)",
        estimand="P(exact dQ_pos < 0) of one sampled-PG step (lr 0.01) with N=1024 rollouts "
                 "over the checkpoint's decisions x trials, one value per base",
        unit="probability", rule="threshold", direction="<", threshold=VANISH,
        note="the decision is the tens digit (the carry); P at every N is in the "
             "brorl_small_mass_balance table"),
)
SMALL_NUMBERS = {"small_phase1_raises_pass1": "control", "small_phase1_plateau": "plateau",
                 "small_large_n_improves_beyond_plateau": "beyond",
                 "small_revival_equal_rollouts": "equal_rollouts",
                 "small_large_n_beats_n8_equal_wall_time": "equal_wall_time",
                 "small_mass_decrease_vanishes_sampled_pg": "mass_p_decrease"}


@experiment("brorl_small", sft_bases=("quick",), paper=PAPER, setting="small model",
            claims=SMALL_CLAIMS, default_seeds=8, quick_seeds=4, plan=SMALL_PLAN,
            quick_plan=tiny_grpo.QUICK_PLAN)
def run_small_experiment(ctx):
    """BroRL on the tiny transformer: N=8 vs N=64 from each SFT base's plateaued GRPO
    checkpoint, and the mass balance on the model's own token distribution."""
    results = []
    key = ctx.stream("small")

    def measure(base_ids, open_ids):
        new = [run_small(key, ctx.quick, ctx.plan.seeds_per_base, base=b) for b in base_ids]
        results.extend(new)
        numbers = [small.seed_numbers(r) for r in new]
        labels = bases.labels(base_ids, ctx.plan.seeds_per_base)
        per_base = {"small_mass_decrease_vanishes_sampled_pg"}   # one value per checkpoint
        return {cid: claims.nested(np.concatenate([n[SMALL_NUMBERS[cid]] for n in numbers]),
                                   base_ids if cid in per_base else labels)
                for cid in open_ids}

    decided, _ = ctx.sequential(measure)
    mass = small.mass_frame(r["sweep"] for r in results)
    ctx.save_table(mass, "brorl_small_mass_balance")
    ctx.save_table(pd.concat([r["arms"][n].eval_frame().assign(arm=n, base=r["base"])
                              for r in results for n in r["arms"]]), "brorl_small_phase2")
    ctx.save_table(pd.DataFrame([{"base": r["base"], "arm": n, "seconds_per_step": s}
                                 for r in results for n, s in r["seconds"].items()]),
                   "brorl_small_seconds")
    phase1 = bases.concat_runs([r["phase1"] for r in results])
    arms = {n: bases.concat_runs([r["arms"][n] for r in results]) for n in ("N=8", "N=64")}
    fig = small_figure(phase1, arms, results[0]["p1"].num_prompts, mass)
    ctx.save_figure(fig, "brorl_small")
    plt.close(fig)
    return decided
