"""GRPO and its baseline family on the prompt bank (paper tag "GRPO").

Learning curves for GRPO, Dr.GRPO, RLOO and a DAPO-style run (clip-higher + dynamic sampling
+ token-mean), and two exact checks of what the estimators compute:

- RLOO = G/(G-1) x Dr.GRPO on every sampled batch (float64);
- the sampled policy gradient with the RLOO baseline, averaged over many draws, equals the
  exact gradient of the expected reward (per-coordinate 95% CI coverage), while Dr.GRPO's
  group-mean baseline (which includes the rollout itself) shrinks it by (G-1)/G.

``all_methods_learn`` is a comparison that can fail: every recipe is trained at each of
:data:`LEARNING_RATES` (one compilation per recipe, the rates vmapped) from the same seed keys
(paired seeds), and each must both learn (95% interval of its accuracy gain above
:data:`MIN_GAIN`) and not fall behind GRPO by more than :data:`MARGIN` (paired
non-inferiority test of the final exact accuracy) at every rate. Equal training steps, not
equal rollouts: DAPO's dynamic sampling spends up to three batches per step.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from rlvr_lab import advantages, losses, plotting, stats
from rlvr_lab.envs import prompt_bank
from rlvr_lab.envs.prompt_bank import PromptBankConfig
from rlvr_lab.experiments import Context, claim, experiment
from rlvr_lab.models import tabular
from rlvr_lab.train import rollout
from rlvr_lab.utils import enable_x64, jit_cpu_options, loop_options
from rlvr_lab.train import bandit
from rlvr_lab.train.bandit import BanditConfig, metrics_frame

PAPER = "GRPO"
LEARNING_RATES = (0.02, 0.05, 0.1)   # Adam; 0.05 is the curves' rate
MIN_GAIN = 0.10    # "learns": the 95% interval of the exact accuracy gain lies above this
MARGIN = 0.05      # non-inferiority margin vs GRPO, absolute exact accuracy


def algorithms(base: BanditConfig) -> dict[str, BanditConfig]:
    """The four recipes compared, differing only in the stages the papers change."""
    return {
        "GRPO": base.replace(advantage="grpo", scale_rewards="group",
                             loss_agg_mode="seq-mean-token-mean"),
        "Dr.GRPO": base.replace(advantage="dr_grpo", loss_agg_mode="seq-mean-token-sum-norm"),
        "RLOO": base.replace(advantage="rloo", loss_agg_mode="seq-mean-token-mean"),
        "DAPO": base.replace(advantage="grpo", epsilon_high=0.28, rollout="dynamic_sampling",
                             rollout_options=(("max_rounds", 3),), loss_agg_mode="token-mean"),
    }


def base_config(quick: bool) -> BanditConfig:
    bank = PromptBankConfig(num_prompts=64, vocab_size=16, difficulty_a=1.0, difficulty_b=3.0)
    return BanditConfig(bank=bank, num_steps=40 if quick else 150, batch_size=32,
                        num_generations=8, num_iterations=2, num_minibatches=4,
                        learning_rate=0.05, eval_ks=(1, 8))


def train_rates(config: BanditConfig, key, num_seeds: int, rates=LEARNING_RATES) -> dict:
    """Metrics ``[R, S, T]`` of ``config`` at each learning rate (vmapped: one compilation),
    seed ``s`` keyed by ``fold_in(key, s)`` whatever the recipe (paired seeds)."""
    hp = bandit.Hparams.from_config(config)
    r = len(rates)
    hps = bandit.Hparams(jnp.asarray(rates, jnp.float32),
                         *(jnp.broadcast_to(x, (r,)) for x in hp[1:]))
    train = jit_cpu_options(jax.vmap(jax.vmap(bandit.make_train(config), in_axes=(0, None)),
                                      in_axes=(None, 0)),
                             options=loop_options(bandit.table_cells(config, r * num_seeds)))
    _, metrics = train(bandit.seed_keys(key, num_seeds), hps)
    return {k: np.asarray(v) for k, v in metrics.items()}


def learning_table(curves: dict, rates=LEARNING_RATES) -> pd.DataFrame:
    """Per (recipe, rate): the accuracy gain's 95% interval and the paired difference to GRPO
    of the final accuracy with its non-inferiority test at :data:`MARGIN`."""
    rows = []
    for name, m in curves.items():
        for i, lr in enumerate(rates):
            acc = m["accuracy"][i]
            gain = stats.mean_interval(acc[:, -1] - acc[:, 0])
            vs = stats.equivalence(acc[:, -1], curves["GRPO"]["accuracy"][i][:, -1], MARGIN)
            rows.append(dict(method=name, learning_rate=lr, final=float(acc[:, -1].mean()),
                             gain=gain.mean, gain_low=gain.low, gain_high=gain.high,
                             learns=gain.above(MIN_GAIN), vs_grpo=vs.mean, vs_grpo_low=vs.low,
                             vs_grpo_high=vs.high, not_worse=vs.not_worse or name == "GRPO"))
    return pd.DataFrame(rows)


def sampled_batches(key, logits, bank, num_batches: int, group: int):
    """Rewards of ``num_batches`` batches of ``group`` rollouts for every prompt."""
    prompts = jnp.arange(bank.num_prompts)

    def one(k):
        return rollout.generate(k, logits, bank, prompts, group)

    return jax.vmap(one)(jax.random.split(key, num_batches))


def rloo_vs_dr_grpo_error(key, bank, group: int, num_batches: int) -> float:
    """max |RLOO - G/(G-1) Dr.GRPO| over sampled batches, computed in float64."""
    batches = sampled_batches(key, bank.logits0, bank, num_batches, group)
    with enable_x64():
        r = jnp.asarray(np.asarray(batches.rewards, np.float64))
        rloo = jax.vmap(advantages.rloo)(r)
        dr = jax.vmap(advantages.dr_grpo)(r)
        return float(jnp.max(jnp.abs(rloo - group / (group - 1) * dr)))


def sampled_gradients(key, bank, estimator: str, group: int, num_draws: int):
    """Per-draw gradients of the expected reward estimated by the pg loss with ``estimator``.

    The loss is ``aggregate(pg(log pi(a), A), "token-mean")`` over all K*G rollouts, so
    ``-grad`` estimates ``d/dlogits mean_k E_k[R]`` (exact for an unbiased baseline).
    """
    prompts = jnp.arange(bank.num_prompts)

    def one(k):
        batch = rollout.generate(k, bank.logits0, bank, prompts, group)
        adv = advantages.compute(estimator, batch.rewards, batch.mask).adv

        def loss(logits):
            logp = tabular.answer_log_prob(logits, batch.answers).reshape(-1, 1)
            token_loss = losses.pg(logp, None, adv.reshape(-1, 1))
            return losses.aggregate(token_loss, None, "token-mean")

        return -jax.grad(loss)(bank.logits0)

    return jax.lax.map(one, jax.random.split(key, num_draws), batch_size=256)


def gradient_check(grads, exact):
    """95% CI coverage of ``exact`` per coordinate, and the projection ratio on ``exact``."""
    g = np.asarray(grads, np.float64).reshape(grads.shape[0], -1)
    e = np.asarray(exact, np.float64).ravel()
    mean = g.mean(0)
    se = g.std(0, ddof=1) / np.sqrt(g.shape[0])
    live = se > 0
    coverage = float(np.mean(np.abs(mean[live] - e[live]) <= 1.96 * se[live]))
    proj = g @ e / (e @ e)
    ratio, ratio_se = float(proj.mean()), float(proj.std(ddof=1) / np.sqrt(len(proj)))
    return coverage, ratio, ratio_se


@experiment("grpo_family", paper=PAPER, setting="bank", claims=(
    "rloo_equals_scaled_dr_grpo", "rloo_gradient_unbiased", "dr_grpo_gradient_shrink",
    "all_methods_learn"))
def run(ctx: Context):
    """GRPO / Dr.GRPO / RLOO / DAPO learning curves on the prompt bank; exact gradient checks."""
    base = base_config(ctx.quick)
    bank = prompt_bank.make_bank(base.bank)
    group = base.num_generations

    # -- learning curves: every recipe at every rate from the same seed keys (paired)
    frames, curves, swept = [], {}, {}
    rate = LEARNING_RATES.index(base.learning_rate)
    for name, cfg in ctx.progress(algorithms(base).items(), "recipes", total=4):
        swept[name] = train_rates(cfg, ctx.key(0), ctx.seeds)
        curves[name] = {k: v[rate] for k, v in swept[name].items()}
        frames.append(metrics_frame(curves[name], algorithm=name))
    ctx.save_table(pd.concat(frames, ignore_index=True), "grpo_family_curves")
    table = learning_table(swept)
    ctx.save_table(table, "grpo_family_learning_rates")

    fig, axes = plotting.subplots(1, 3, figsize=(13, 3.8))
    for name, m in curves.items():
        steps = np.arange(m["accuracy"].shape[1])
        plotting.band(axes[0], steps, m["accuracy"], label=name)
        plotting.band(axes[1], np.cumsum(m["rollouts"].mean(0)) / 1e3, m["accuracy"], label=name)
        plotting.band(axes[2], steps, m["zero_adv_frac"], label=name)
    axes[0].set(xlabel="step", ylabel="mean success probability (exact)",
                title=f"learning curves, {ctx.seeds} seeds, 95% CI")
    axes[1].set(xlabel="rollouts generated (thousands)", ylabel="mean success probability",
                title="same runs per rollout spent")
    axes[2].set(xlabel="step", ylabel="fraction of groups with all-zero advantage",
                title="groups without signal")
    axes[0].legend()
    ctx.save_figure(fig, "grpo_family_curves")

    # -- exact checks
    draws = 2000 if ctx.quick else 20000
    err = rloo_vs_dr_grpo_error(ctx.key(100), bank, group, 256 if ctx.quick else 2048)
    exact = prompt_bank.exact_policy_gradient(bank.logits0, bank.reward_table)
    cov_rloo, ratio_rloo, se_rloo = gradient_check(
        sampled_gradients(ctx.key(101), bank, "rloo", group, draws), exact)
    cov_dr, ratio_dr, se_dr = gradient_check(
        sampled_gradients(ctx.key(102), bank, "dr_grpo", group, draws), exact)
    shrink = (group - 1) / group

    fig, ax = plotting.subplots(figsize=(5, 3.6))
    ax.errorbar([0, 1], [ratio_rloo, ratio_dr], yerr=[1.96 * se_rloo, 1.96 * se_dr], fmt="o",
                capsize=4)
    ax.axhline(1.0, color="k", lw=0.8, ls="--", label="exact gradient")
    ax.axhline(shrink, color="C1", lw=0.8, ls=":", label=f"(G-1)/G = {shrink:.3f}")
    ax.set_xticks([0, 1], ["RLOO", "Dr.GRPO"])
    ax.set(ylabel="projection of mean sampled gradient\non the exact gradient",
           title=f"{draws} draws, G={group}")
    ax.legend()
    ctx.save_figure(fig, "grpo_family_gradient")

    others = table[table.method != "GRPO"]
    worst = others.loc[others.vs_grpo_low.idxmin()]
    slow = table.loc[table.gain_low.idxmin()]
    learn_ok = bool(table.learns.all() and table.not_worse.all())
    per_rate = "; ".join(
        f"lr {lr:g}: " + ", ".join(f"{r.method} {r.gain:+.2f}" + (
            "" if r.method == "GRPO" else f" ({r.vs_grpo:+.3f} [{r.vs_grpo_low:+.3f}, "
                                           f"{r.vs_grpo_high:+.3f}])")
            for r in sub.itertuples()) for lr, sub in table.groupby("learning_rate"))
    return [
        claim("rloo_equals_scaled_dr_grpo",
              "RLOO advantages equal G/(G-1) times Dr.GRPO advantages on sampled batches",
              err, err <= 1e-12, "max abs difference <= 1e-12 (float64)",
              paper_value="identity (algebra)", setting="bank"),
        claim("rloo_gradient_unbiased",
              "the RLOO-baseline policy gradient, averaged over draws, equals the exact gradient",
              cov_rloo, cov_rloo >= 0.90 and abs(ratio_rloo - 1) <= 3 * se_rloo,
              "95% CI covers the exact value in >= 90% of coordinates and the projection "
              f"ratio is within 3 SE of 1 (ratio {ratio_rloo:.4f} +- {se_rloo:.4f})",
              paper_value="unbiased (leave-one-out baseline)", setting="bank"),
        claim("dr_grpo_gradient_shrink",
              "the group-mean baseline (Dr.GRPO) shrinks the expected gradient by (G-1)/G",
              ratio_dr, abs(ratio_dr - shrink) <= 3 * se_dr and abs(ratio_dr - 1) > 3 * se_dr,
              f"projection ratio within 3 SE of (G-1)/G={shrink:.4f} and not within 3 SE of 1 "
              f"(SE {se_dr:.4f}; coverage of the unscaled exact gradient {cov_dr:.2f})",
              paper_value="(G-1)/G (algebra)", setting="bank"),
        claim("all_methods_learn",
              "GRPO, Dr.GRPO, RLOO and DAPO all raise the exact mean success probability, and "
              "none falls behind GRPO, at each of three learning rates",
              float(worst.vs_grpo_low), learn_ok,
              f"at every Adam learning rate in {LEARNING_RATES}: the 95% t-interval of each "
              f"recipe's accuracy gain (final - initial, {ctx.seeds} seeds) lies above "
              f"{MIN_GAIN:+.2f}, and each recipe's final exact accuracy minus GRPO's (paired "
              f"seeds) passes a non-inferiority test at margin {MARGIN} (5%, one-sided); "
              "measured = the lowest lower end of those 90% intervals",
              paper_value="each recipe trains at least as well as GRPO (Dr.GRPO, RLOO, DAPO "
                          "papers)", setting="bank",
              reason=f"worst vs GRPO: {worst.method} at lr {worst.learning_rate:g}; smallest "
                     f"gain: {slow.method} at lr {slow.learning_rate:g} ({slow.gain:+.3f} "
                     f"[{slow.gain_low:+.3f}, {slow.gain_high:+.3f}]); gains (and difference "
                     f"to GRPO) {per_rate}; equal steps ({base.num_steps}), DAPO spends up to "
                     "3 batches per step"),
    ]
