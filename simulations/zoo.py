"""The estimator and loss zoo (issue 42): every estimator x policy-loss family of rlvr_lab, head
to head on the prompt bank at G = 2, 4 and 8 and equal rollouts, and the orderings the papers
state, decided by the claims engine.

Arms (:func:`rlvr_lab.papers.zoo.arena.arms`): each advantage estimator (GRPO, Dr.GRPO, RLOO,
REINFORCE++, REINFORCE++-baseline, OPO, GPG, GRPO pass@k) with verl's ``vanilla`` PPO loss;
each policy loss (GPG's plain gradient, Clip-Cov, KL-Cov, GMPO, SAPO, CISPO, GSPO) with GRPO's
advantages; and GPG as its paper runs it. Every arm spends 64 rollouts per step (64/G prompts
of G), takes 4 full-batch Adam steps per batch (so the clipped and gated losses act off
policy), and runs from the same seed keys at every G (paired). One compilation for all.

Claims (:mod:`rlvr_lab.claims`; thresholds fixed before the first run):

- ``zoo_grpo_learns`` (positive control): GRPO's exact accuracy gain at G = 8.
- ``zoo_rloo_unbiased`` (exact): the leave-one-out baseline's expected gradient equals the
  exact gradient on every bank prompt at G = 2, 4, 8 (closed form,
  :mod:`rlvr_lab.papers.zoo.gradient`); largest |scale - 1| below 1e-9.
- ``zoo_grpo_biased`` (threshold): GRPO's expected update over the bank is not parallel to the
  gradient of mean accuracy at G = 8 (its std re-weights prompts by difficulty): 1 - cos above
  1e-6 (the float64 noise floor; the claim is only that it is not 0).
- ``zoo_remax_variance`` (superiority, below 0): per draw of one rollout per prompt, the
  relative squared error of the gradient with ReMax's greedy baseline minus that of plain
  REINFORCE (both unbiased: the difference is variance).
- ``zoo_opo_length_baseline``: OPO's length-weighted baseline; not applicable on the bank (one-
  token answers make it Dr.GRPO); the measurement reported is max |OPO - Dr.GRPO|.
- ``zoo_gpg_beats_grpo`` (superiority): GPG's final accuracy minus GRPO's, per seed, averaged
  over G = 2, 4, 8.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import colormaps

from rlvr_lab import advantages, claims, plotting, stats
from rlvr_lab.envs import prompt_bank
from rlvr_lab.envs.prompt_bank import PromptBankConfig
from rlvr_lab.experiments import Context, experiment
from rlvr_lab.papers.zoo import arena, gradient

PAPER = "GRPO"
BANK = PromptBankConfig(num_prompts=64, vocab_size=16, difficulty_a=1.0, difficulty_b=3.0)
EXACT_TOLERANCE = 1e-9
NOISE_FLOOR = 1e-6
CONTROL_G = 8

CLAIMS = (
    claims.Declared(
        "zoo_grpo_learns", control=True,
        statement="GRPO raises the bank's exact accuracy at G = 8 (the study's positive "
                  "control)", paper_value="", paper_ref="derived",
        estimand="final minus initial exact mean success probability, GRPO + vanilla, G = 8, "
                 "per seed", unit="accuracy", rule="superiority", threshold=0.0),
    claims.Declared(
        "zoo_rloo_unbiased", paper="RLOO",
        statement="the leave-one-out baseline gives an unbiased policy gradient (RLOO)",
        paper_value="unbiased: the baseline of each rollout excludes it",
        paper_ref="arXiv:2402.14740 (the RLOO estimator; leave-one-out baseline)",
        estimand="largest |expected gradient / exact gradient - 1| over the bank's prompts at "
                 "G = 2, 4, 8 (closed form, float64)", unit="ratio",
        rule="exact", direction="<", threshold=EXACT_TOLERANCE, gated=False),
    claims.Declared(
        "zoo_grpo_biased", paper="Dr.GRPO",
        statement="GRPO's std-normalised update is not the gradient of mean accuracy: it "
                  "re-weights questions by the std of their rewards",
        paper_value="std normalisation biases the objective towards too easy and too hard "
                    "questions (no single number)",
        paper_ref="arXiv:2503.20783 Sec. 3.1 (Eq. 2, the std term)",
        estimand="1 - cos(expected GRPO update over the bank, exact gradient of mean "
                 f"accuracy) at G = {CONTROL_G} (closed form, float64)", unit="1 - cos",
        rule="threshold", threshold=NOISE_FLOOR, gated=False,
        note="RLOO's and Dr.GRPO's expected updates are exact multiples of the gradient"),
    claims.Declared(
        "zoo_remax_variance", paper="GRPO",
        statement="ReMax's greedy-response baseline lowers the variance of the REINFORCE "
                  "gradient", paper_value="a variance reduction technique (no single number)",
        paper_ref="ReMax, arXiv:2310.10505 abstract and Algorithm 1 (the greedy baseline)",
        estimand="per draw of one rollout per prompt: |g - grad J|^2 / |grad J|^2 with the "
                 "greedy baseline minus without (plain REINFORCE), paired draws",
        unit="relative squared error", rule="superiority", direction="<", threshold=0.0,
        gated=False,
        note="both are unbiased (the greedy answer does not depend on the sample); with 0/1 "
             "rewards the greedy baseline helps where it is near a prompt's success "
             "probability and hurts where it is not"),
    claims.Declared(
        "zoo_opo_length_baseline", paper="GRPO",
        statement="OPO's length-weighted baseline is the variance-minimising constant baseline "
                  "when the score norm grows with response length",
        paper_value="optimal baseline b = sum l r / sum l",
        paper_ref="OPO, arXiv:2505.23585 (the optimal reward baseline)",
        estimand="largest |OPO - Dr.GRPO| advantage on the bank's groups", unit="advantage",
        rule="exact", direction="<", threshold=EXACT_TOLERANCE, gated=False,
        not_applicable="the bank's answers are one token long: every length weight is equal "
                       "and OPO is Dr.GRPO"),
    claims.Declared(
        "zoo_gpg_beats_grpo", paper="GRPO",
        statement="GPG (group-mean advantages rescaled for groups without signal, plain "
                  "policy-gradient loss) trains better than GRPO at equal rollouts",
        paper_value="GPG outperforms GRPO (no single margin on our task)",
        paper_ref="GPG, arXiv:2504.02546 abstract",
        estimand="final exact accuracy, GPG + gpg minus GRPO + vanilla, averaged over "
                 "G = 2, 4, 8, per seed (paired)", unit="accuracy",
        rule="superiority", threshold=0.0),
)


def arena_config(quick: bool) -> arena.ArenaConfig:
    """The same 120 steps in quick and full runs (quick differs only in seeds): the claims
    compare final accuracies, and a shorter quick run would test an earlier stage of training
    (GPG was behind GRPO after 30 steps and ahead after 120)."""
    del quick
    return arena.ArenaConfig(BANK, steps=120)


def ranking(curves: np.ndarray) -> pd.DataFrame:
    """Final exact accuracy per (arm, G): mean and 95% interval over seeds, and the rank."""
    rows = []
    for a, arm in enumerate(arena.arms()):
        for g, group in enumerate(arena.GROUPS):
            iv = stats.mean_interval(curves[a, g, :, -1])
            rows.append(dict(estimator=arm.estimator, loss=arm.loss, arm=arm.label, G=group,
                             final=iv.mean, low=iv.low, high=iv.high,
                             gain=float((curves[a, g, :, -1] - curves[a, g, :, 0]).mean())))
    table = pd.DataFrame(rows)
    table["rank"] = table.groupby("G")["final"].rank(ascending=False, method="min").astype(int)
    return table.sort_values(["G", "rank"]).reset_index(drop=True)


def exact_numbers(bank: prompt_bank.PromptBank) -> tuple[dict, pd.DataFrame]:
    """The closed-form claims and the expected-gradient scale of each group estimator."""
    p = np.asarray(bank.p0, np.float64)
    rloo_err = max(float(np.abs(gradient.gradient_scale("rloo", p, g) - 1).max())
                   for g in arena.GROUPS)
    cos_err = gradient.direction_error("grpo", bank.logits0, bank.correct, CONTROL_G)
    rewards = np.asarray(bank.correct, np.float64)                 # every answer once
    opo_gap = float(np.abs(np.asarray(advantages.opo(rewards, lengths=np.ones_like(rewards)))
                           - np.asarray(advantages.dr_grpo(rewards))).max())
    grid = np.linspace(0.02, 0.98, 49)
    scales = pd.DataFrame([dict(estimator=e, G=g, p=x, scale=s)
                           for e in ("grpo", "dr_grpo", "rloo", "opo", "grpo_passk")
                           for g in arena.GROUPS
                           for x, s in zip(grid, gradient.gradient_scale(e, grid, g))])
    directions = pd.DataFrame([dict(estimator=e, G=g, one_minus_cos=gradient.direction_error(
        e, bank.logits0, bank.correct, g)) for e in ("grpo", "dr_grpo", "rloo", "grpo_passk")
        for g in arena.GROUPS])
    return ({"zoo_rloo_unbiased": claims.value(rloo_err),
             "zoo_grpo_biased": claims.value(cos_err),
             "zoo_opo_length_baseline": claims.value(opo_gap)}, scales, directions)


def remax_errors(key, bank: prompt_bank.PromptBank, draws: int) -> dict[str, np.ndarray]:
    greedy = bank.reward_table[np.arange(bank.num_prompts), np.argmax(bank.logits0, -1)]
    return {name: gradient.single_rollout_errors(key, bank.logits0, bank.reward_table, b, draws)
            for name, b in (("REINFORCE", np.zeros(bank.num_prompts)), ("ReMax", greedy))}


def plot_ranking(table: pd.DataFrame):
    fig, axes = plotting.subplots(1, len(arena.GROUPS), figsize=(15, 5.5), sharex=True)
    for ax, group in zip(axes, arena.GROUPS):
        t = table[table["G"] == group].sort_values("final")
        y = np.arange(len(t))
        ax.errorbar(t["final"], y, xerr=[t["final"] - t["low"], t["high"] - t["final"]],
                    fmt="o", capsize=3)
        ax.set_yticks(y, t["arm"], fontsize=8)
        ax.set(xlabel="final exact accuracy (95% CI over seeds)",
               title=f"G = {group}, {arena.ROLLOUTS_PER_STEP // group} prompts per step")
    fig.tight_layout()
    return fig


def plot_curves(curves: np.ndarray, scales: pd.DataFrame, errors: dict):
    fig, axes = plotting.subplots(1, 4, figsize=(18, 4.2))
    steps = np.arange(curves.shape[-1])
    colors = colormaps["tab20"].colors
    for ax, (g, group) in zip(axes[:2], [(0, arena.GROUPS[0]), (2, arena.GROUPS[2])]):
        for a, arm in enumerate(arena.arms()):
            plotting.band(ax, steps, curves[a, g], label=arm.label, color=colors[a % 20],
                          ls="-" if arm.loss == "vanilla" else "--")
        ax.set(xlabel="step (64 rollouts each)", ylabel="exact accuracy", title=f"G = {group}")
    axes[0].legend(fontsize=6, ncol=2)
    ax = axes[2]
    for name, s in scales[scales["G"] == CONTROL_G].groupby("estimator"):
        ax.plot(s["p"], s["scale"], label=name)
    ax.axhline(1.0, color="k", lw=0.8, ls="--")
    ax.set(xlabel="success probability p", ylabel="E[update] / exact gradient",
           title=f"expected-gradient scale per prompt, G = {CONTROL_G}", yscale="log")
    ax.legend(fontsize=7)
    ax = axes[3]
    ax.boxplot(list(errors.values()))
    ax.set_xticks(np.arange(1, len(errors) + 1), list(errors))
    ax.set(ylabel="|g - grad J|^2 / |grad J|^2", yscale="log",
           title="one rollout per prompt: greedy baseline")
    fig.tight_layout()
    return fig


@experiment("zoo", paper=PAPER, setting="bank", claims=CLAIMS)
def zoo(ctx: Context):
    """Every estimator x loss family on the bank at G = 2, 4, 8 and equal rollouts; exact
    expected gradients; ReMax's greedy baseline."""
    bank = prompt_bank.make_bank(BANK)
    curves = arena.run(arena_config(ctx.quick), ctx.stream("arena"), ctx.seeds)
    table = ranking(curves)
    exact, scales, directions = exact_numbers(bank)
    errors = remax_errors(ctx.stream("remax"), bank, 500 if ctx.quick else 4000)

    labels = [a.label for a in arena.arms()]
    grpo, gpg = labels.index("grpo + vanilla"), labels.index("gpg + gpg")
    g8 = arena.GROUPS.index(CONTROL_G)
    samples = {
        "zoo_grpo_learns": claims.seeds(curves[grpo, g8, :, -1] - curves[grpo, g8, :, 0]),
        "zoo_remax_variance": claims.seeds(errors["ReMax"] - errors["REINFORCE"]),
        "zoo_gpg_beats_grpo": claims.seeds((curves[gpg, :, :, -1]
                                            - curves[grpo, :, :, -1]).mean(0)),
        **exact}

    ctx.save_table(table, "zoo_ranking")
    ctx.save_table(scales, "zoo_gradient_scale")
    ctx.save_table(directions, "zoo_gradient_direction")
    mean_curves = curves.mean(2)                                        # [arm, G, step]
    ctx.save_table(pd.DataFrame([dict(arm=labels[a], G=arena.GROUPS[g], step=t, accuracy=v)
                                 for (a, g, t), v in np.ndenumerate(mean_curves)]),
                   "zoo_curves")
    ctx.save_figure(plot_ranking(table), "zoo_ranking")
    ctx.save_figure(plot_curves(curves, scales, errors), "zoo_curves")
    return ctx.decide(samples)
