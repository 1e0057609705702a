"""The estimator and loss zoo (issue 42): every estimator x policy-loss family of rlvr_lab, head
to head on the prompt bank at G = 2, 4 and 8 and equal rollouts, and the orderings the papers
state, decided by the claims engine.

Arms (:func:`rlvr_lab.papers.zoo.arena.arms`): each advantage estimator (GRPO, Dr.GRPO, RLOO,
REINFORCE++, REINFORCE++-baseline, OPO, GPG, GRPO pass@k) with verl's ``vanilla`` PPO loss;
each policy loss (GPG's plain gradient, Clip-Cov, KL-Cov, GMPO, SAPO, CISPO, GSPO) with GRPO's
advantages; and GPG as its paper runs it. Every arm spends 64 rollouts per step (64/G prompts
of G), takes 4 full-batch Adam steps per batch (so the clipped and gated losses act off
policy), and runs from the same seed keys at every G (paired). One compilation for all. Quick
runs train only the two arms the claims read (GRPO + vanilla, GPG + gpg), 120 steps as in
full runs; the ranking of all 16 is a full-run figure.

``zoo_small`` (small model, :mod:`rlvr_lab.papers.zoo.small`): the estimator arms -- GRPO,
Dr.GRPO (with its ``seq-mean-token-sum-norm`` aggregation), RLOO, REINFORCE++-baseline, GPG
(its loss), OPO (with the response lengths) and the optimal token baseline (token level, with
the sampling policy's realized energy), each with the PPO clip -- and the loss arms: GRPO's
advantages with each further policy-loss family (DAPO clip-higher, dual clip, Clip-Cov,
KL-Cov, GSPO, CISPO, GMPO, SAPO; GSPO, GMPO and SAPO with the per-sequence mean their papers
optimise). Not the full estimator x loss product: each estimator arm isolates the estimator
under one loss, each loss arm the loss under one estimator. ``tiny_grpo``'s recipe at G = 2, 4,
8 and 32 rollouts per step, 12 steps, seeds nested in the ``quick`` SFT bases (tiny_grpo's
plans: quick 3 bases x 1 seed, full 4 x 2, up to 6 x 2), every (arm, G) and seed in one
compiled step; GRPO's gain over its SFT base is the study's positive control. Quick runs train
only the arms of the claims they decide (GRPO, Dr.GRPO, GPG: same steps and evaluation as in
full runs); the loss claims are ``full_only`` (:mod:`rlvr_lab.papers.zoo.small_losses`), and a
full run trains all 15 arms.

The claims -- the orderings the papers state (RLOO unbiased where GRPO is not, ReMax's variance,
OPO's baseline, GPG against GRPO, Dr.GRPO keeping pass@1; on the small model also GSPO's clipped
tokens and accuracy, CISPO against DAPO, the entropy of clip-higher, Clip-Cov and KL-Cov, GMPO
and SAPO against GRPO) -- are declared once below
(``CLAIMS``, ``SMALL_CLAIMS``) with their paper values, locations, estimands and rules;
``figures/claims.csv`` has their verdicts.
"""
from __future__ import annotations

import functools

import numpy as np
import pandas as pd
from matplotlib import colormaps

from rlvr_lab import advantages, claims, plotting, stats
from rlvr_lab.envs import prompt_bank
from rlvr_lab.envs.prompt_bank import PromptBankConfig
from rlvr_lab.experiments import Context, experiment
from rlvr_lab.papers.zoo import arena, gradient, small, small_losses
from rlvr_lab.train import bases
from simulations import tiny_grpo

PAPER = "GRPO"
BANK = PromptBankConfig(num_prompts=64, vocab_size=16, difficulty_a=1.0, difficulty_b=3.0)
EXACT_TOLERANCE = 1e-9
NOISE_FLOOR = 1e-6
CONTROL_G = 8

CLAIMS = (
    claims.Declared(
        "zoo_grpo_learns", control=True,
        statement="GRPO raises the bank's exact accuracy at G = 8 (the study's positive "
                  "control)",
        paper_value="mirrors DeepSeekMath: GRPO raises top-1 accuracy over its starting "
                    "(SFT) model, GSM8K 82.9 -> 88.2%, MATH 46.8 -> 51.7% (CoT, Table 5); the "
                    "bank starts from its initial policy, not an SFT model",
        paper_ref=tiny_grpo.RL_OVER_SFT_REF,
        estimand="final minus initial exact mean success probability, GRPO + vanilla, G = 8, "
                 "per seed", unit="accuracy", rule="superiority", threshold=0.0),
    claims.Declared(
        "zoo_rloo_unbiased", paper="RLOO",
        statement="the leave-one-out baseline gives an unbiased policy gradient (RLOO)",
        paper_value="unbiased: the baseline of each rollout excludes it",
        paper_ref=("arXiv:2402.14740 Sec. 2.3 (the RLOO estimator; section from a third-party "
                   "excerpt card, paper text not read) (inferred)"),
        estimand="largest |expected gradient / exact gradient - 1| over the bank's prompts at "
                 "G = 2, 4, 8 (closed form, float64)", unit="ratio",
        rule="exact", direction="<", threshold=EXACT_TOLERANCE, gated=False),
    claims.Declared(
        "zoo_grpo_biased", paper="Dr.GRPO",
        statement="GRPO's std-normalised update is not the gradient of mean accuracy: it "
                  "re-weights questions by the std of their rewards",
        paper_value="std normalisation biases the objective towards too easy and too hard "
                    "questions (no single number)",
        paper_ref="arXiv:2503.20783 Sec. 3.1 (Eq. 3, the std term)",
        estimand="1 - cos(expected GRPO update over the bank, exact gradient of mean "
                 f"accuracy) at G = {CONTROL_G} (closed form, float64)", unit="1 - cos",
        rule="threshold", threshold=NOISE_FLOOR, gated=False,
        note="RLOO's and Dr.GRPO's expected updates are exact multiples of the gradient"),
    claims.Declared(
        "zoo_remax_variance", paper="GRPO",
        statement="ReMax's greedy-response baseline lowers the variance of the REINFORCE "
                  "gradient", paper_value="a variance reduction technique (no single number)",
        paper_ref=("ReMax, arXiv:2310.10505 abstract and Algorithm 1 (the greedy baseline; "
                   "Algorithm 1 read in the authors' README, liziniu/ReMax images/algorithm.png: "
                   "the reward of a do_sample=False response is subtracted)"),
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
        paper_ref=("OPO, arXiv:2505.23585 abstract (optimal baseline minimising gradient "
                   "variance; code merged into veRL); veRL docs/algo/opo.md (Optimal Reward "
                   "Baseline), core_algos.py compute_opo_outcome_advantage (sum l r / sum l)"),
        estimand="largest |OPO - Dr.GRPO| advantage on the bank's groups", unit="advantage",
        rule="exact", direction="<", threshold=EXACT_TOLERANCE, gated=False,
        not_applicable="the bank's answers are one token long: every length weight is equal "
                       "and OPO is Dr.GRPO"),
    claims.Declared(
        "zoo_gpg_beats_grpo", paper="GRPO",
        statement="GPG (group-mean advantages rescaled for groups without signal, plain "
                  "policy-gradient loss) trains better than GRPO at equal rollouts",
        paper_value="GPG outperforms GRPO (no single margin on our task); README, "
                    "Qwen2.5-Math-7B average: 47.8 (F_norm=1, alpha=B/(B-M)) vs 43.7 (GRPO)",
        paper_ref=("GPG, arXiv:2504.02546 abstract; authors' README (AMAP-ML/GPG), table 'Math "
                   "reasoning results on Qwen2.5-Math-7B model' (GRPO vs four GPG rows)"),
        estimand="final exact accuracy, GPG + gpg minus GRPO + vanilla, averaged over "
                 "G = 2, 4, 8, per seed (paired)", unit="accuracy",
        rule="superiority", threshold=0.0),
)


def arena_config(quick: bool) -> arena.ArenaConfig:
    """The same 120 steps in quick and full runs (quick differs in seeds and arms): the claims
    compare final accuracies, and a shorter quick run would test an earlier stage of training
    (GPG was behind GRPO after 30 steps and ahead after 120)."""
    del quick
    return arena.ArenaConfig(BANK, steps=120)


# quick runs train only the arms the claims read (GRPO + vanilla, GPG as its paper runs it):
# the same runs as in a full run, without the 14 ranking-only arms (the quick budget)
QUICK_ARMS = (arena.Arm("grpo", "vanilla"), arena.Arm("gpg", "gpg"))


def zoo_arms(quick: bool) -> tuple[arena.Arm, ...]:
    return QUICK_ARMS if quick else arena.arms()


def ranking(curves: np.ndarray, arms: tuple[arena.Arm, ...]) -> pd.DataFrame:
    """Final exact accuracy per (arm, G): mean and 95% interval over seeds, and the rank."""
    rows = []
    for a, arm in enumerate(arms):
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


def plot_curves(curves: np.ndarray, arms: tuple[arena.Arm, ...], scales: pd.DataFrame,
                errors: dict):
    fig, axes = plotting.subplots(1, 4, figsize=(18, 4.2))
    steps = np.arange(curves.shape[-1])
    colors = colormaps["tab20"].colors
    for ax, (g, group) in zip(axes[:2], [(0, arena.GROUPS[0]), (2, arena.GROUPS[2])]):
        for a, arm in enumerate(arms):
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
    arms = zoo_arms(ctx.quick)
    curves = arena.run(arena_config(ctx.quick), ctx.stream("arena"), ctx.seeds, arms)
    table = ranking(curves, arms)
    exact, scales, directions = exact_numbers(bank)
    errors = remax_errors(ctx.stream("remax"), bank, 500 if ctx.quick else 4000)

    labels = [a.label for a in arms]
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
    ctx.save_figure(plot_curves(curves, arms, scales, errors), "zoo_curves")
    return ctx.decide(samples)


# ----------------------------------------------------------------------------- small model
# The recipe (chosen on one pilot base before any claim was run; the claims' thresholds come
# from the papers and the bank study): tiny_grpo's GRPO settings with 32 rollouts per step
# (16 prompts x 2 ... 4 x 8), learning rate 5e-4 with 2 warm-up steps, 12 steps, all 128
# held-out problems x 1 sample (the pilot's 64 x 2 cost the same; more problems, less
# variance). On the pilot base every arm rose from 0.48 to 0.57-0.70 held-out pass@1 in 12
# steps; at 1e-3 the G = 8 arms (4 prompts per step) fell below the base.
SMALL_ROLLOUTS, SMALL_STEPS, SMALL_LR = 32, 12, 5e-4
DRGRPO_MARGIN = 0.05    # drgrpo_keeps_pass1's margin (simulations/drgrpo.py)
PASS1 = "final held-out pass@1"


def small_config(base: int = 0) -> small.ZooConfig:
    """The same 12 steps and evaluation in quick and full runs (they differ in seeds, and in
    the arms: quick trains only those of its claims): the claims compare final accuracies, and
    a shorter quick run would test another stage of training (the bank zoo's quick/full
    conflict)."""
    rl = tiny_grpo.rl_config(True).replace(learning_rate=SMALL_LR, warmup_steps=2,
                                           eval_problems=128)
    return small.ZooConfig(bases.with_base(rl, base), rollouts=SMALL_ROLLOUTS,
                           steps=SMALL_STEPS, eval_samples=1)


SMALL_CLAIMS = (
    claims.Declared(
        "zoo_small_grpo_learns", control=True,
        statement="GRPO raises held-out pass@1 over the SFT base at 32 rollouts per step, "
                  "averaged over G = 2, 4, 8 (the small zoo's positive control)",
        paper_value=tiny_grpo.RL_OVER_SFT_VALUE,
        paper_ref=tiny_grpo.RL_OVER_SFT_REF,
        estimand=f"{PASS1} of GRPO minus the SFT base's, mean over G = 2, 4, 8, per seed",
        unit="pass@1", rule="superiority", threshold=0.0),
    claims.Declared(
        "zoo_small_gpg_beats_grpo", paper="GRPO",
        statement="GPG (group-mean advantages rescaled for groups without signal, plain "
                  "policy-gradient loss) trains better than GRPO at equal rollouts (tiny "
                  "transformer)",
        paper_value="consistently outperforms GRPO (no single margin on our task)",
        paper_ref="GPG, arXiv:2504.02546 abstract and Figure 1 (GPG vs GRPO across tasks)",
        estimand=f"{PASS1}, GPG + gpg minus GRPO + vanilla, mean over G = 2, 4, 8, per seed "
                 "(paired)", unit="pass@1", rule="superiority", threshold=0.0),
    claims.Declared(
        "zoo_small_drgrpo_keeps_pass1", paper="Dr.GRPO",
        statement="Dr.GRPO (no std scaling, constant-normaliser aggregation) keeps GRPO's "
                  "held-out accuracy at equal rollouts (tiny transformer, G = 2, 4, 8)",
        paper_value="comparable accuracy to GRPO with shorter responses",
        paper_ref="arXiv:2503.20783 Sec. 3.2, Figure 6 (bottom)",
        estimand=f"{PASS1}, Dr.GRPO minus GRPO, mean over G = 2, 4, 8, per seed (paired)",
        unit="pass@1", rule="non_inferiority", threshold=-DRGRPO_MARGIN),
) + small_losses.CLAIMS


def small_numbers(res: small.Result) -> dict[str, np.ndarray]:
    """Per seed of one base: the numbers behind :data:`SMALL_CLAIMS` whose arms ran."""
    label = [a.label for a in res.arms]
    final = res.final                                         # [A, G, S]
    grpo = final[label.index("GRPO")]
    out = {"zoo_small_grpo_learns": grpo.mean(0) - res.base}
    if "GPG" in label:
        out["zoo_small_gpg_beats_grpo"] = (final[label.index("GPG")] - grpo).mean(0)
    if "Dr.GRPO" in label:
        out["zoo_small_drgrpo_keeps_pass1"] = (final[label.index("Dr.GRPO")] - grpo).mean(0)
    return out | small_losses.numbers(res)


def small_ranking(res: small.Result) -> pd.DataFrame:
    rows = []
    for a, arm in enumerate(res.arms):
        for g, group in enumerate(res.groups):
            iv = stats.mean_interval(res.final[a, g])
            rows.append(dict(arm=arm.label, estimator=arm.estimator, loss=arm.loss,
                             agg=arm.agg, G=group, final=iv.mean, low=iv.low, high=iv.high,
                             gain=float((res.final[a, g] - res.base).mean())))
    table = pd.DataFrame(rows)
    table["rank"] = table.groupby("G")["final"].rank(ascending=False, method="min").astype(int)
    return table.sort_values(["G", "rank"]).reset_index(drop=True)


def plot_small(res: small.Result, table: pd.DataFrame):
    """Training-batch pass@1 per step at each G, and the final held-out ranking."""
    groups = res.groups
    fig, axes = plotting.subplots(1, len(groups) + 1, figsize=(18, 4.2))
    colors = colormaps["tab20"].colors
    window = 3                                      # a 3-step mean: 32 rollouts are noisy
    curves = res.history["pass1"]                                       # [T, A, G, S]
    smooth = np.stack([np.convolve(c, np.ones(window) / window, "valid")
                       for c in curves.reshape(curves.shape[0], -1).T]).T.reshape(
        (curves.shape[0] - window + 1,) + curves.shape[1:])
    steps = np.arange(window, curves.shape[0] + 1)
    for ax, (g, group) in zip(axes, enumerate(groups)):
        for a, arm in enumerate(res.arms):
            plotting.band(ax, steps, smooth[:, a, g].T, label=arm.label,
                          color=colors[a % 20], bounds=(0, 1))
        ax.set(xlabel=f"step ({SMALL_ROLLOUTS} rollouts each)",
               ylabel=f"training pass@1 ({window}-step mean)",
               title=f"G = {group}, {SMALL_ROLLOUTS // group} prompts per step")
    axes[0].legend(fontsize=7)
    ax = axes[-1]
    for g, group in enumerate(groups):
        t = table[table["G"] == group].set_index("arm").loc[[a.label for a in res.arms]]
        y = np.arange(len(t)) + (g - 1) * 0.25
        ax.errorbar(t["final"], y, xerr=[t["final"] - t["low"], t["high"] - t["final"]],
                    fmt="o", capsize=2, label=f"G = {group}")
    ax.axvline(float(res.base.mean()), color="0.4", ls="--", lw=0.8, label="SFT base")
    ax.set_yticks(np.arange(len(res.arms)), [a.label for a in res.arms], fontsize=8)
    ax.set(xlabel="final held-out pass@1 (95% CI over seeds)", title="ranking at equal rollouts")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


# zoo_small's own plan: tiny_grpo's first look (4 bases x 2 seeds), then +2 bases while a
# claim is undecided, up to 10 bases (four looks, each at alpha / 4). Why: at 6 bases the
# positive control zoo_small_grpo_learns was +0.076 [-0.009, +0.160] (committed 829911e run),
# so it gated every other claim of the study to inconclusive; its spread (base means ~0.065)
# puts the lower bound above 0 near 9-10 bases even at the stricter per-look level. A base
# costs ~26 s on 2 idle cores (157 s at 6), so the cap adds at most ~105 s to the full run.
# The cap was raised after that run's look, not before it: the looks of this plan are fixed
# before the run that uses it, and the earlier run's decisions are not reused.
SMALL_PLAN = claims.SeedPlan(bases=4, seeds_per_base=2, batch_bases=2, max_bases=10)


@functools.lru_cache(maxsize=8)
def small_driver(base: int) -> small.Driver:
    """One driver per SFT base and process; every base reuses base 0's compiled programs."""
    return small.Driver(small_config(base), share=None if base == 0 else small_driver(0))


@experiment("zoo_small", sft_bases=("quick",), paper=PAPER, setting="small model",
            claims=SMALL_CLAIMS, default_seeds=8, quick_seeds=4, plan=SMALL_PLAN,
            quick_plan=tiny_grpo.QUICK_PLAN)
def zoo_small(ctx: Context):
    """Estimator x loss families on the tiny transformer at G = 2, 4, 8 and equal rollouts,
    seeds nested in SFT bases, gated on GRPO's gain over the base."""
    key, results, arms = ctx.stream("rl"), [], []

    def measure(base_ids, open_ids):
        # the first look fixes the arms: those the open claims read, all of them when every
        # claim is open (full runs); quick runs skip the loss claims (full_only), so their arms
        arms[:] = arms or small_losses.arms_for(open_ids)
        new = [small_driver(b).run(bases.base_key(key, b), arms, ctx.plan.seeds_per_base,
                                   progress=lambda it, b=b: ctx.progress(it, f"base {b} steps"))
               for b in base_ids]
        results.extend(new)
        numbers = [small_numbers(r) for r in new]
        labels = bases.labels(base_ids, ctx.plan.seeds_per_base)
        return claims.nested_by_base(numbers, labels, open_ids)

    decided, _ = ctx.sequential(measure)
    res = small.concat_results(results)
    table = small_ranking(res)
    ctx.save_table(table, "zoo_small_ranking")
    mean_pass1 = res.history["pass1"].mean(-1)                        # [T, A, G]
    ctx.save_table(pd.DataFrame([dict(arm=res.arms[a].label, G=res.groups[g], step=t + 1,
                                      train_pass1=v)
                                 for (t, a, g), v in np.ndenumerate(mean_pass1)]),
                   "zoo_small_curves")
    ctx.save_figure(plot_small(res, table), "zoo_small")
    return decided
