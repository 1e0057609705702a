"""Dr.GRPO (arXiv:2503.20783): GRPO's length and std biases, on the bank and the small model.

Dr.GRPO (Sec. 3.1, Eq. 2-3, Figure 1 right) finds two optimisation biases in GRPO: the
per-response ``1/|o|`` normalisation penalises a long wrong answer less than a short one, so
wrong answers grow longer during training; and dividing advantages by the group's reward std
up-weights questions that are too easy or too hard. Dr.GRPO removes both terms. The paper
reports equal accuracy for the two; the non-inferiority margin of our accuracy comparison is
ours, fixed before the run.

Arms (small model, equal rollouts: the same prompts, groups and steps for both): GRPO as in the
paper's critique (std-scaled advantages, ``seq-mean-token-mean``: each response's loss divided
by its length) and Dr.GRPO (``r - mean``, ``seq-mean-token-sum-norm``: a constant normaliser),
everything else as ``tiny_grpo``, on the search task (``sft.PRESETS["search"]``), whose flawed
demonstrations scan one digit too far: the typical wrong answer is one token longer than the
right one, and lengths vary from 3 to 11 tokens. Seeds are nested in SFT bases and paired
across arms (:mod:`rlvr_lab.train.bases`); the positive control ``drgrpo_grpo_raises_pass1``
gates the study. The length bias is measured on the wrong rollouts late in training; the std
bias on the trained GRPO policy's own rollouts, against the closed form ``1 / (s_k + eps)``
(:func:`rlvr_lab.papers.drgrpo.bias.std_weight`).

Bank counterparts: the exact expected-gradient flow of a tabular policy over answers of
lengths 3-8 (one short right answer), ``G = 8``; and :func:`rlvr_lab.advantages.grpo` over
``dr_grpo`` on every binary group of sizes 2-16, against the same closed form.

The claims are declared once below (``CLAIMS``) with their paper values, locations, estimands
and rules; ``figures/claims.csv`` has their verdicts.
"""
from __future__ import annotations

import jax
import numpy as np
import pandas as pd

from rlvr_lab import advantages, claims, plotting
from rlvr_lab.experiments import experiment
from rlvr_lab.papers.drgrpo import bias
from rlvr_lab.train import bases, sequence, sft
from simulations import tiny_grpo

PAPER = "Dr.GRPO"
REF = "arXiv:2503.20783"
# the bank's answers: one right answer of 4 tokens, wrong answers of 3 to 8 tokens
BANK_LENGTHS = np.array([4, 3, 5, 6, 7, 8], dtype=float)
BANK_CORRECT = np.array([True, False, False, False, False, False])
BANK_G, BANK_STEPS, BANK_LR = 8, 300, 2.0
# Full runs: tiny_grpo's 4 bases x 2 seeds first, then 4 more bases per look while a claim is
# undecided, up to 16 bases (32 seeds per arm): four looks, each at alpha / 4. The cap was 6
# bases until the run of 2026-12-06, which left drgrpo_length_bias undecided (+0.16 tokens
# [-0.11, +0.43] over 6 bases; about 12 bases would decide it at that spread). The larger cap
# was set before the next run; its extra looks make each look stricter.
FULL_PLAN = claims.SeedPlan(bases=4, seeds_per_base=2, batch_bases=4, max_bases=16)

CLAIMS = (
    claims.Declared(
        "drgrpo_grpo_raises_pass1", control=True,
        statement="GRPO raises held-out pass@1 over the SFT base on the search task (the "
                  "study's positive control)",
        paper_value=tiny_grpo.RL_OVER_SFT_VALUE,
        paper_ref=tiny_grpo.RL_OVER_SFT_REF,
        estimand="held-out pass@1 after GRPO minus the base's, per seed", unit="pass@1",
        rule="superiority", threshold=0.0),
    claims.Declared(
        "drgrpo_length_bias",
        statement="under GRPO, wrong responses are longer than under Dr.GRPO at equal "
                  "rollouts (the length bias of the per-response 1/|o| normalisation)",
        paper_value="GRPO's wrong responses keep growing longer; Dr.GRPO's do not "
                    "(Figure 1 right; no single number)",
        paper_ref=f"{REF} Sec. 3.1 (Eq. 3, the 1/|o_i| term), Figure 1 (right); Sec. 3.2, Figure 6",
        estimand="mean length of wrong rollouts over the last quarter of training steps, "
                 "GRPO - Dr.GRPO, per seed", unit="tokens",
        rule="superiority", threshold=0.0,
        note="a wrong answer's penalty per token is 1/|o| under GRPO, constant under Dr.GRPO"),
    claims.Declared(
        "drgrpo_std_bias",
        statement="std normalisation weights a group with k of G correct by 1/(std_k + eps), "
                  "more for too easy or too hard questions than for balanced ones",
        paper_value="questions with lower reward std get higher weight (Sec. 3.1)",
        paper_ref=f"{REF} Sec. 3.1 (Eq. 3, the std term), Figure 5",
        estimand="largest relative error of GRPO/Dr.GRPO advantage ratios on the trained "
                 "GRPO policy's rollouts against 1/(s_k + eps)", unit="relative error",
        rule="exact", direction="<", threshold=1e-4, gated=False),
    claims.Declared(
        "drgrpo_keeps_pass1",
        statement="Dr.GRPO keeps GRPO's held-out accuracy (token efficiency at no accuracy cost)",
        paper_value="comparable accuracy to GRPO with shorter responses (Sec. 3.2, Figure 6)",
        paper_ref=f"{REF} Sec. 3.2, Figure 6 (bottom); Sec. 3.4, Figure 8 (right)",
        estimand="final held-out pass@1, Dr.GRPO - GRPO, per seed", unit="pass@1",
        rule="non_inferiority", threshold=-0.05),
    claims.Declared(
        "drgrpo_length_bias_bank", setting="bank",
        statement="on an exact tabular policy over answers of different lengths, GRPO's "
                  "expected update leaves wrong answers longer than Dr.GRPO's",
        paper_value="wrong responses grow longer under GRPO (Sec. 3.1)",
        paper_ref=f"{REF} Sec. 3.1 (Eq. 3, the 1/|o_i| term)",
        estimand=f"expected wrong-answer length after {BANK_STEPS} steps of the exact "
                 "expected-gradient flow, GRPO - Dr.GRPO", unit="tokens",
        rule="threshold", threshold=0.0, gated=False),
    claims.Declared(
        "drgrpo_std_bias_bank", setting="bank",
        statement="our GRPO advantage equals Dr.GRPO's times the closed-form std weight on "
                  "every binary group", paper_value="Eq. 3 (the std term)",
        paper_ref=f"{REF} Sec. 3.1 (Eq. 3, the std term)",
        estimand="largest relative error of grpo/dr_grpo against 1/(s_k + eps), G = 2..16",
        unit="relative error", rule="exact", direction="<", threshold=1e-5, gated=False),
)


def arms(quick: bool) -> dict[str, sequence.SequenceRLConfig]:
    """GRPO as critiqued and Dr.GRPO, otherwise tiny_grpo's settings on the search task."""
    base = tiny_grpo.rl_config(quick, base=sft.PRESETS["search"])
    return {"GRPO": base.replace(advantage="grpo", scale_rewards="group",
                                 loss_agg_mode="seq-mean-token-mean"),
            "Dr.GRPO": base.replace(advantage="dr_grpo", loss_agg_mode="seq-mean-token-sum-norm")}


def ratio_errors(rewards: np.ndarray) -> tuple[np.ndarray, pd.DataFrame]:
    """Relative errors of grpo/dr_grpo against the closed form on groups ``[N, G]`` of binary
    rewards, and the mean measured ratio per ``k``."""
    rewards = np.asarray(rewards, np.float32).reshape(-1, rewards.shape[-1])
    g = rewards.shape[1]
    a_grpo = np.asarray(advantages.grpo(rewards), np.float64)
    a_dr = np.asarray(advantages.dr_grpo(rewards), np.float64)
    k = (rewards > 0).sum(1)
    use = (k > 0) & (k < g)
    ratio = a_grpo[use] / a_dr[use]
    want = bias.std_weight(k[use], g)[:, None]
    errors = np.abs(ratio / want - 1).reshape(-1)
    table = pd.DataFrame({"k": k[use], "ratio": ratio.mean(1)}).groupby("k").mean().reset_index()
    table["closed_form"] = bias.std_weight(table["k"].to_numpy(), g)
    return errors, table


def bank_numbers() -> tuple[dict, dict]:
    flow = bias.length_flow(np.zeros(BANK_LENGTHS.size), BANK_LENGTHS, BANK_CORRECT, BANK_G,
                            BANK_STEPS, BANK_LR)
    errs = []
    for g in (2, 4, 8, 16):
        groups = (np.arange(2 ** g)[:, None] >> np.arange(g)) & 1 if g <= 8 else (
            np.tril(np.ones((g + 1, g)), -1)[:, ::-1])  # every k for G = 16 (order irrelevant)
        errs.append(ratio_errors(groups.astype(np.float32))[0])
    return ({"drgrpo_length_bias_bank": claims.value(flow["grpo"][-1] - flow["dr_grpo"][-1]),
             "drgrpo_std_bias_bank": np.concatenate(errs)}, flow)


def plot(run_by_arm: dict, ratio_table: pd.DataFrame, flow: dict, g: int):
    fig, axes = plotting.subplots(1, 3, figsize=(13, 3.8))
    ax = axes[0]
    for name, run in run_by_arm.items():
        wrong = np.asarray(run.history["incorrect_length"]).T          # [S, steps]
        plotting.band(ax, np.arange(1, wrong.shape[1] + 1), wrong, label=name)
    ax.set(xlabel="RL step", ylabel="tokens", title="length of wrong rollouts (small model)")
    ax.legend()
    ax = axes[1]
    ks = np.arange(1, g)
    ax.plot(ks, bias.std_weight(ks, g), "-", color="0.4", label="closed form 1/(s_k+eps)")
    ax.plot(ratio_table["k"], ratio_table["ratio"], "o", label="measured on GRPO rollouts")
    ax.set(xlabel=f"correct answers k in a group of G={g}", ylabel="GRPO / Dr.GRPO advantage",
           title="std weight per difficulty")
    ax.legend()
    ax = axes[2]
    steps = np.arange(flow["grpo"].size)
    ax.plot(steps, flow["grpo"], label="GRPO (1/|o|)")
    ax.plot(steps, flow["dr_grpo"], label="Dr.GRPO (constant)")
    ax.set(xlabel="step of the exact expected update", ylabel="expected wrong length (tokens)",
           title=f"bank: answers of {int(BANK_LENGTHS.min())}-{int(BANK_LENGTHS.max())} tokens")
    ax.legend()
    fig.tight_layout()
    return fig


@experiment("drgrpo", paper=PAPER, setting="small model", sft_bases=("search",),
            claims=CLAIMS, plan=FULL_PLAN, quick_plan=tiny_grpo.QUICK_PLAN)
def drgrpo(ctx):
    """GRPO vs Dr.GRPO at equal rollouts: the length bias and the std weight, small model and
    exact bank."""
    configs = arms(ctx.quick)
    spb = ctx.plan.seeds_per_base
    bank, flow = bank_numbers()
    runs: dict[str, list] = {name: [] for name in configs}
    rollout_rewards = []

    def measure(base_ids, open_ids):
        trainers = {}

        def make(cfg):
            trainers[cfg.base.seed] = sequence.Trainer(cfg)
            return trainers[cfg.base.seed]

        new = {name: bases.run_bases(cfg, ctx.stream("rl"), base_ids, spb,
                                     trainer=make if name == "GRPO" else None)
               for name, cfg in configs.items()}
        for name in configs:
            runs[name].extend(new[name])
        for b, run in zip(base_ids, new["GRPO"]):
            trainer = trainers[bases.base_config(configs["GRPO"].base, b).seed]
            keys = jax.random.split(bases.base_key(ctx.stream("probe"), b), spb)
            idx, batch = trainer.sample_batch(keys, run.state.policy)
            rollout_rewards.append(trainer.verify(idx, batch.tokens)[0])
        labels = bases.labels(base_ids, spb)

        def per_seed(fn, name):
            return bases.per_seed(new[name], fn)

        final = lambda r: np.asarray(r.evals["pass_at"])[-1, :, 0]        # noqa: E731
        gain = lambda r: np.asarray(r.evals["pass_at"])[-1, :, 0] - np.asarray(  # noqa: E731
            r.evals["pass_at"])[0, :, 0]

        def late_wrong(r):
            wrong = np.asarray(r.history["incorrect_length"])               # [steps, S]
            return wrong[-max(1, wrong.shape[0] // 4):].mean(0)

        return {
            "drgrpo_grpo_raises_pass1": claims.nested(per_seed(gain, "GRPO"), labels),
            "drgrpo_length_bias": claims.nested(
                per_seed(late_wrong, "GRPO") - per_seed(late_wrong, "Dr.GRPO"), labels),
            "drgrpo_std_bias": ratio_errors(np.concatenate(rollout_rewards, axis=0))[0],
            "drgrpo_keeps_pass1": claims.nested(
                per_seed(final, "Dr.GRPO") - per_seed(final, "GRPO"), labels),
            **bank}

    decided, _ = ctx.sequential(measure)
    combined = {name: bases.concat_runs(r) for name, r in runs.items()}
    g = configs["GRPO"].num_generations
    _, ratio_table = ratio_errors(np.concatenate(rollout_rewards, axis=0))
    ctx.save_figure(plot(combined, ratio_table, flow, g), "drgrpo_biases")
    ctx.save_table(pd.concat([r.frame().assign(arm=name) for name, r in combined.items()]),
                   "drgrpo_metrics")
    ctx.save_table(ratio_table, "drgrpo_std_weight")
    ctx.save_table(pd.DataFrame({"step": np.arange(flow["grpo"].size),
                                 "grpo_wrong_length": flow["grpo"],
                                 "dr_grpo_wrong_length": flow["dr_grpo"]}), "drgrpo_bank_flow")
    return decided
