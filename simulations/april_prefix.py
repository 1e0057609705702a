"""APRIL on the tiny transformer: what to do with the stale prefix of a resumed response.

APRIL (``rlvr_lab.papers.systems.partial``) over-provisions r·N groups (r = 2), stops the round
when N groups are complete, and resumes the unfinished responses next step under the new
weights, so the start of a trained response can come from an older policy. The original APRIL
code trains on those tokens as if on-policy; newer slime can mask them or apply token-level
TIS. We compare, with ``tiny_grpo``'s GRPO settings on the heavy-tailed task:

- ``sync``: synchronous GRPO (r = 1: every group finishes, no stale tokens);
- ``none``: APRIL, stale tokens trained as if on-policy (the trainer's own log-probs);
- ``mask``: APRIL, stale tokens dropped from the loss (``mask_stale=True``);
- ``tis``:  APRIL, tokens weighted by ``min(pi_train / pi_behav, 2)`` (``rollout_correction``).

The task is :mod:`rlvr_lab.envs.search` (``sft.PRESETS["search"]``): a worked linear scan whose
length follows P(k) ~ 1/k, so responses are 3-11 tokens with most short and a few long -- the
length profile where partial rollouts matter. Its SFT base saw half its demonstrations scan
one digit too far, so synchronous GRPO has a large gain to make: the positive control.

All four share the key, so seed ``s`` starts from the same problems (paired seeds). A
*staleness stress* panel (not APRIL) resumes buffered groups only after ``STRESS_DELAY`` extra
steps, so the prefixes lag by ``STRESS_DELAY + 1`` versions or more.

Statistics (:mod:`rlvr_lab.stats`): the positive control is the synchronous arm's per-seed
held-out gain over the base (:func:`simulations.tiny_grpo.control`); when it is not above 0
the quality claims are recorded inconclusive (:func:`rlvr_lab.stats.gate`). "Does not hurt" is
a paired non-inferiority test and "unchanged" a paired equivalence test (TOST) with the margin
``MARGIN`` of held-out pass@1, stated before the run.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from rlvr_lab import plotting, stats
from rlvr_lab.experiments import claim, experiment
from rlvr_lab.papers.systems import partial
from rlvr_lab.train import sequence, sft
from simulations import tiny_grpo

PAPER = "APRIL"
TREATMENTS = {  # name -> (over-provisioning r, RL config changes)
    "sync": (1.0, {}),
    "none": (2.0, {}),
    "mask": (2.0, {"mask_stale": True}),
    "tis": (2.0, {"rollout_correction": "tis", "correction_cap": 2.0}),
}
STRESS_DELAY = 2
STRESS_STEPS = 20   # the stress panel is shorter (full mode only)
STRESS = f"stress (resume delay {STRESS_DELAY})"
WARMUP = 2   # steps 0-1 are the start-up of the buffer (empty at step 0)
MARGIN = 0.05   # equivalence / non-inferiority margin, absolute held-out pass@1


def rl_config(quick: bool) -> sequence.SequenceRLConfig:
    """``tiny_grpo``'s GRPO settings on the search task, with the mismatch metrics on
    (quick: 10 steps of N=16 groups; full: 40 steps of N=32)."""
    base = tiny_grpo.rl_config(quick, base=sft.PRESETS["search"])
    if quick:
        return dataclasses.replace(base, steps=10, num_prompts=16, eval_every=5,
                                   eval_problems=64, eval_samples=4, track_mismatch=True)
    return dataclasses.replace(base, steps=40, eval_every=10, eval_problems=128,
                               eval_samples=8, track_mismatch=True)


def run_treatments(rl: sequence.SequenceRLConfig, key, num_seeds: int, *, names=None,
                   resume_delay: int = 0, trainer: sequence.Trainer | None = None,
                   stop_after: int | None = None, verbose: bool = False) -> dict:
    """``{treatment: sequence.Run}`` (all from ``key``; one shared problem pool/evaluator).

    ``names``: a subset of :data:`TREATMENTS`; ``stop_after``: fewer steps than ``rl.steps``.
    """
    names = names or tuple(TREATMENTS)
    trainer = trainer or sequence.Trainer(rl)
    runs = {}
    for name in names:
        r, changes = TREATMENTS[name]
        config = partial.PartialConfig(dataclasses.replace(rl, **changes), over_provision=r,
                                       resume_delay=resume_delay if r > 1 else 0)
        runs[name] = partial.run(config, key, num_seeds, stop_after=stop_after,
                                 driver=partial.Driver(config, trainer=trainer), verbose=verbose)
    return runs


def heldout_pass1(run: sequence.Run) -> np.ndarray:
    """Held-out pass@1 ``[S, E]`` (evaluations at ``run.evals["step"]``)."""
    return np.asarray(run.evals["pass_at"])[:, :, 0].T


def summary(runs: dict, setting: str = "APRIL") -> pd.DataFrame:
    """One row per (treatment, seed): final held-out pass@1 and the staleness it trained on."""
    rows = []
    for name, run in runs.items():
        pa = heldout_pass1(run)
        h = {k: np.asarray(v)[WARMUP:] for k, v in run.history.items()}
        for s in range(pa.shape[0]):
            rows.append(dict(
                setting=setting, treatment=name, seed=s, base_pass1=pa[s, 0],
                final_pass1=pa[s, -1], stale_token_frac=h["stale_token_frac"][:, s].mean(),
                resumed_group_frac=h["resumed_group_frac"][:, s].mean(),
                lag_mean=h["lag_mean"][:, s].mean(), lag_max=h["lag_max"][:, s].max(),
                stale_k3=h["stale_k3"][:, s].mean(), mismatch_k3=h["mismatch_k3"][:, s].mean(),
                round_steps=h["round_steps"][:, s].mean(),
                train_pass1=h["pass1"][:, s].mean()))
    return pd.DataFrame(rows)


def per_seed(table: pd.DataFrame, treatment: str, col: str = "final_pass1",
             setting: str = "APRIL") -> np.ndarray:
    """``col`` of one treatment, one value per seed (seed order)."""
    t = table[(table.setting == setting) & (table.treatment == treatment)]
    return t.sort_values("seed")[col].to_numpy()


def paired_diff(table: pd.DataFrame, a: str, b: str, col: str = "final_pass1",
                setting: str = "APRIL") -> stats.Interval:
    """Paired 95% t-interval of ``a - b`` per seed."""
    return stats.paired_difference(per_seed(table, a, col, setting),
                                   per_seed(table, b, col, setting))


def _smooth(values, window):
    return np.stack([np.convolve(v, np.ones(window) / window, "valid") for v in values])


def figure(runs: dict, stress: dict | None = None):
    """Held-out and train pass@1, stale-token fraction, stale-segment mismatch (+ stress)."""
    ncols = 3 if stress else 2
    fig, axes = plotting.subplots(2, ncols, figsize=(4.6 * ncols, 7.4))
    colors = {name: f"C{i}" for i, name in enumerate(TREATMENTS)}
    label = {"sync": "synchronous", "none": "APRIL, no correction", "mask": "APRIL, mask stale",
             "tis": "APRIL, TIS (C=2)"}
    ax = axes[0, 0]
    for name, run in runs.items():
        plotting.band(ax, run.evals["step"], heldout_pass1(run), label=label[name],
                      color=colors[name], marker="o", ms=3)
    ax.set(xlabel="RL step", ylabel="held-out pass@1", title="held-out pass@1 (mean, 95% CI)")
    ax.legend()
    ax = axes[1, 0]
    steps = len(next(iter(runs.values())).history["pass1"])
    window = max(1, min(5, steps // 4))
    for name, run in runs.items():
        plotting.band(ax, np.arange(window, steps + 1), _smooth(run.history["pass1"].T, window),
                      label=label[name], color=colors[name])
    ax.set(xlabel="RL step", ylabel="train-batch pass@1",
           title=f"train batch pass@1 ({window}-step mean)")
    ax = axes[0, 1]
    t = np.arange(steps)
    for name, run in runs.items():
        if name != "sync":
            plotting.band(ax, t, run.history["stale_token_frac"].T, label=label[name],
                          color=colors[name])
    ax.axhline(0.4, color="0.5", ls=":", lw=0.8, label="APRIL README: ~40% per round")
    ax.set(xlabel="RL step", ylabel="stale tokens / trained tokens", ylim=(0, 1),
           title="off-policy (stale) token fraction")
    ax.legend()
    ax = axes[1, 1]
    for name, run in runs.items():
        if name != "sync":
            plotting.band(ax, t, run.history["stale_k3"].T, label=f"{label[name]}: stale tokens",
                          color=colors[name])
    # (mask: the stale tokens get no gradient, so the policy drifts less on them)
    for name in ("none",):
        plotting.band(ax, t, runs[name].history["mismatch_k3"].T, color=colors[name], ls="--",
                      label="no correction: all tokens")
    ax.set(xlabel="RL step", ylabel="k3 = E[ρ - log ρ - 1]",
           title="train/rollout mismatch (ρ = π_train/π_behav)")
    ax.legend()
    if stress:
        ax = axes[0, 2]
        plotting.band(ax, runs["sync"].evals["step"], heldout_pass1(runs["sync"]),
                      label=label["sync"], color=colors["sync"], marker="o", ms=3)
        for name, run in stress.items():
            plotting.band(ax, run.evals["step"], heldout_pass1(run), label=label[name],
                          color=colors[name], marker="o", ms=3)
        ax.set(xlabel="RL step", ylabel="held-out pass@1",
               title=f"STRESS (not APRIL): resumed {STRESS_DELAY} steps later")
        ax.legend()
        ax = axes[1, 2]
        ts = np.arange(len(stress["none"].history["stale_k3"]))
        for name, run in stress.items():
            plotting.band(ax, ts, run.history["stale_k3"].T, label=f"{label[name]}",
                          color=colors[name])
        ax2 = ax.twinx()
        ax2.plot(ts, stress["none"].history["lag_mean"].mean(1), "k:", lw=1,
                 label="mean lag of stale tokens")
        ax2.set_ylabel("versions")
        ax2.grid(False)
        ax2.legend(loc="lower right")
        ax.set(xlabel="RL step", ylabel="k3 over stale tokens",
               title="STRESS: mismatch of the stale segment")
        ax.legend(loc="upper left")
    fig.tight_layout()
    return fig


def frames(runs: dict, setting: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Long-form per-step metrics and held-out evaluations of every treatment."""
    hist = pd.concat([r.frame().assign(treatment=n, setting=setting) for n, r in runs.items()])
    ev = pd.concat([r.eval_frame().assign(treatment=n, setting=setting) for n, r in runs.items()])
    return hist, ev


@experiment("systems_april_prefix", sft_bases=("search",), paper=PAPER, setting="small model",
            claims=("april_prefix_off_policy_tokens", "april_prefix_accuracy_vs_sync",
                    "april_prefix_treatments_equal"), default_seeds=8, quick_seeds=4)
def run(ctx):
    """APRIL on the tiny transformer: synchronous vs partial rollouts with stale prefixes
    trained as is, masked, or TIS-corrected."""
    rl = rl_config(ctx.quick)
    trainer = sequence.Trainer(rl)
    key = ctx.key(0)
    runs = run_treatments(rl, key, ctx.seeds, trainer=trainer)
    # the stress panel only in full mode (quick mode must stay within a minute)
    stress = None if ctx.quick else run_treatments(
        rl, key, ctx.seeds, names=("none", "mask", "tis"), resume_delay=STRESS_DELAY,
        trainer=trainer, stop_after=STRESS_STEPS)
    sets = [(runs, "APRIL")] + ([(stress, STRESS)] if stress else [])
    table = pd.concat([summary(r, name) for r, name in sets])
    ctx.save_table(table, "systems_april_prefix_summary")
    hist, ev = (pd.concat(x) for x in zip(*(frames(r, name) for r, name in sets)))
    ctx.save_table(hist, "systems_april_prefix_metrics")
    ctx.save_table(ev, "systems_april_prefix_heldout")
    ctx.save_figure(figure(runs, stress), "systems_april_prefix")

    mean = table.groupby(["setting", "treatment"]).mean(numeric_only=True)
    april = mean.loc["APRIL"]
    off = float(april.loc["none", "stale_token_frac"])
    control = tiny_grpo.control(per_seed(table, "sync", "base_pass1"),
                                per_seed(table, "sync"), name="synchronous GRPO vs SFT base")
    final = {t: per_seed(table, t) for t in TREATMENTS}
    vs_sync = stats.equivalence(final["none"], final["sync"], MARGIN)
    eqs = {t: stats.equivalence(final[t], final["none"], MARGIN) for t in ("mask", "tis")}
    worst = max(eqs, key=lambda t: abs(eqs[t].mean))
    if stress:
        sm = mean.loc[STRESS]
        sdiffs = {t: paired_diff(table, t, "none", setting=STRESS) for t in ("mask", "tis")}
        stress_note = (f"STRESS (not APRIL; {STRESS_STEPS} steps; prefixes resumed "
                       f"{STRESS_DELAY} steps later, lag "
                       f"{sm.loc['none', 'lag_mean']:.2f}, k3 {sm.loc['none', 'stale_k3']:.2g})"
                       f": mask - none {sdiffs['mask']}, TIS - none {sdiffs['tis']}")
    else:
        stress_note = "staleness stress: full mode only"
    setting = (f"{ctx.seeds} paired seeds, {rl.steps} steps, N={rl.num_prompts} groups of "
               f"G={rl.num_generations}, r=2, search task, {rl.eval_problems} held-out "
               f"problems x {rl.eval_samples} samples; {control.reason}")
    tost = f"TOST margin {MARGIN} held-out pass@1, 90% interval"
    quality = [
        claim("april_prefix_accuracy_vs_sync",
              "APRIL (no correction) does not hurt accuracy at equal training steps",
              vs_sync.mean, vs_sync.not_worse,
              f"paired non-inferiority test of final held-out pass@1 (APRIL-none - "
              f"synchronous) against -{MARGIN} at 5% (the lower end of the 90% interval is "
              f"above -{MARGIN})", paper=PAPER, paper_value="+2.1% average accuracy (max +8%)",
              reason=f"difference {vs_sync} ({tost}); synchronous final "
                     f"{april.loc['sync', 'final_pass1']:.3f}, APRIL-none "
                     f"{april.loc['none', 'final_pass1']:.3f} from base "
                     f"{april.loc['sync', 'base_pass1']:.3f} ({setting})"),
        claim("april_prefix_treatments_equal",
              "with APRIL's one-version-stale prefixes, masking or TIS-correcting the stale "
              "segment leaves final accuracy unchanged vs no correction",
              eqs[worst].mean, all(e.equivalent for e in eqs.values()),
              f"paired TOST: both mask - none and TIS - none of final held-out pass@1 lie "
              f"within +-{MARGIN} (both one-sided tests reject at 5%)", paper=PAPER,
              paper_value="original code: no correction; newer slime offers mask / TIS "
                          "(no accuracy comparison published)",
              reason=f"mask - none {eqs['mask']}, TIS - none {eqs['tis']} ({tost}); k3 over "
                     f"stale tokens {april.loc['none', 'stale_k3']:.2g} (lag "
                     f"{april.loc['none', 'lag_mean']:.2f} versions); {stress_note} "
                     f"({setting})"),
    ]
    return [
        claim("april_prefix_off_policy_tokens",
              "without correction, a sizeable share of APRIL's trained tokens come from an "
              "older policy version (small model, real partial rollouts)", off,
              0.2 <= off <= 0.6,
              f"stale-token fraction of APRIL-none, mean over steps >= {WARMUP} and seeds, in "
              "[20%, 60%] (as systems_april)", paper=PAPER,
              paper_value="~40% off-policy tokens per round (APRIL README)",
              reason=f"{april.loc['none', 'resumed_group_frac']:.0%} of trained groups were "
                     f"resumed; round cut after {april.loc['none', 'round_steps']:.1f} decode "
                     f"steps vs {april.loc['sync', 'round_steps']:.1f} synchronous; search "
                     f"responses are heavy-tailed (P(k) ~ 1/k, 3-11 tokens) ({setting})"),
    ] + stats.gate(quality, control)
