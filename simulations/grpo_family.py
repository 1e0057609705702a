"""GRPO and its baseline family on the prompt bank (paper tag "GRPO").

Learning curves for GRPO, Dr.GRPO, RLOO and a DAPO-style run (clip-higher + dynamic sampling
+ token-mean), and two exact checks of what the estimators compute:

- RLOO = G/(G-1) x Dr.GRPO on every sampled batch (float64);
- the sampled policy gradient with the RLOO baseline, averaged over many draws, equals the
  exact gradient of the expected reward (per-coordinate 95% CI coverage), while Dr.GRPO's
  group-mean baseline (which includes the rollout itself) shrinks it by (G-1)/G.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from rlvr_lab import advantages, losses, plotting
from rlvr_lab.envs import prompt_bank
from rlvr_lab.envs.prompt_bank import PromptBankConfig
from rlvr_lab.experiments import Context, claim, experiment
from rlvr_lab.models import tabular
from rlvr_lab.train import rollout
from rlvr_lab.utils import enable_x64
from rlvr_lab.train.bandit import BanditConfig, metrics_frame, train_seeds

PAPER = "GRPO"


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

    # -- learning curves
    frames, curves = [], {}
    for i, (name, cfg) in enumerate(algorithms(base).items()):
        _, m = train_seeds(cfg, ctx.key(i), ctx.seeds)
        curves[name] = {k: np.asarray(v) for k, v in m.items()}
        frames.append(metrics_frame(m, algorithm=name))
    import pandas as pd
    ctx.save_table(pd.concat(frames, ignore_index=True), "grpo_family_curves")

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

    initial = {n: m["accuracy"][:, 0] for n, m in curves.items()}
    gains = {n: m["accuracy"][:, -1] - initial[n] for n, m in curves.items()}
    lows = {n: plotting.mean_ci(g)[0] - plotting.mean_ci(g)[1] for n, g in gains.items()}
    worst = min(lows, key=lows.get)
    return [
        claim("rloo_equals_scaled_dr_grpo",
              "RLOO advantages equal G/(G-1) times Dr.GRPO advantages on sampled batches",
              err, err <= 1e-12, "max abs difference <= 1e-12 (float64)",
              paper_value="identity (algebra)"),
        claim("rloo_gradient_unbiased",
              "the RLOO-baseline policy gradient, averaged over draws, equals the exact gradient",
              cov_rloo, cov_rloo >= 0.90 and abs(ratio_rloo - 1) <= 3 * se_rloo,
              "95% CI covers the exact value in >= 90% of coordinates and the projection "
              f"ratio is within 3 SE of 1 (ratio {ratio_rloo:.4f} +- {se_rloo:.4f})",
              paper_value="unbiased (leave-one-out baseline)"),
        claim("dr_grpo_gradient_shrink",
              "the group-mean baseline (Dr.GRPO) shrinks the expected gradient by (G-1)/G",
              ratio_dr, abs(ratio_dr - shrink) <= 3 * se_dr and abs(ratio_dr - 1) > 3 * se_dr,
              f"projection ratio within 3 SE of (G-1)/G={shrink:.4f} and not within 3 SE of 1 "
              f"(SE {se_dr:.4f}; coverage of the unscaled exact gradient {cov_dr:.2f})",
              paper_value="(G-1)/G (algebra)"),
        claim("all_methods_learn",
              "GRPO, Dr.GRPO, RLOO and DAPO all raise the exact mean success probability",
              lows[worst], lows[worst] > 0,
              f"lower 95% CI bound of the accuracy gain > 0 for every method (worst: {worst}; "
              "measured = that bound)", paper_value="all improve"),
    ]
