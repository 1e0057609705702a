"""GRPO and its baseline family on the prompt bank (paper tag "GRPO": DeepSeekMath,
arXiv:2402.03300; RLOO, Dr.GRPO and DAPO as in docs/papers.md).

Learning curves for GRPO, Dr.GRPO, RLOO and a DAPO-style run (clip-higher + dynamic sampling
+ token-mean), and two exact checks of what the estimators compute. There is no paper package:
the training loop is ``rlvr_lab.train.bandit`` on ``rlvr_lab.envs.prompt_bank`` with a tabular
policy, the estimators are ``rlvr_lab.advantages`` and ``rlvr_lab.losses``.

- RLOO = G/(G-1) x Dr.GRPO on every sampled batch (float64), the leave-one-out advantage
  computed from its definition and by ``advantages.rloo``;
- the sampled policy gradient with the RLOO baseline, averaged over many draws, equals the
  exact gradient of the expected reward, while Dr.GRPO's group-mean baseline (which includes
  the rollout itself) shrinks it by (G-1)/G. Per draw, the sampled gradient is projected on
  the exact one; the per-coordinate coverage of the exact gradient (part of the former
  criterion) is reported in ``grpo_family_gradient``.

Every recipe is trained at each of :data:`LEARNING_RATES` (one compilation per recipe, the
rates vmapped) from the same seed keys (paired seeds), and compared with GRPO at the same cell;
the learning claim folds the two halves of the former criterion (a gain, and no large loss
against GRPO) into one per-seed number and takes the worst recipe and rate per seed, which is
conservative for a pass. Equal training steps, not equal rollouts: DAPO's dynamic sampling
spends up to three batches per step.

The claims are declared once below (:data:`CLAIMS`) with their paper values, locations,
estimands and rules; ``figures/claims.csv`` has their verdicts.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from rlvr_lab import advantages, claims, losses, plotting, stats
from rlvr_lab.envs import prompt_bank
from rlvr_lab.envs.prompt_bank import PromptBankConfig
from rlvr_lab.experiments import Context, experiment
from rlvr_lab.models import tabular
from rlvr_lab.train import rollout
from rlvr_lab.utils import enable_x64, jit_cpu_options, loop_options
from rlvr_lab.train import bandit
from rlvr_lab.train.bandit import BanditConfig, metrics_frame

PAPER = "GRPO"
LEARNING_RATES = (0.02, 0.05, 0.1)   # Adam; 0.05 is the curves' rate
MIN_GAIN = 0.10    # "learns": the 95% interval of the exact accuracy gain lies above this
MARGIN = 0.05      # non-inferiority margin vs GRPO, absolute exact accuracy
TOLERANCE = 1e-12  # float64 tolerance of the RLOO = G/(G-1) Dr.GRPO identity
GRADIENT_MARGIN = 0.02  # equivalence margin of the projection ratio (1/G = 0.125 at G=8)


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
    return BanditConfig(bank=bank, steps=40 if quick else 150, num_prompts=32,
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


def rloo_vs_dr_grpo_errors(key, bank, group: int, num_batches: int) -> np.ndarray:
    """Per sampled batch, in float64, the largest of |LOO - G/(G-1) Dr.GRPO| and
    |advantages.rloo - LOO| over its advantages, where LOO = r_i - mean_{j != i} r_j is
    computed from its definition (``advantages.rloo`` itself is written in the scaled form,
    so comparing it with Dr.GRPO alone would check the code against itself)."""
    batches = sampled_batches(key, bank.logits0, bank, num_batches, group)
    with enable_x64():
        r = jnp.asarray(np.asarray(batches.rewards, np.float64))      # [N, K, G]
        loo = r - (r.sum(-1, keepdims=True) - r) / (group - 1)
        rloo = jax.vmap(advantages.rloo)(r)
        dr = jax.vmap(advantages.dr_grpo)(r)
        err = jnp.maximum(jnp.abs(loo - group / (group - 1) * dr), jnp.abs(rloo - loo))
        return np.asarray(err.reshape(num_batches, -1).max(axis=1), np.float64)


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


def projections(grads, exact) -> np.ndarray:
    """Per draw: the projection of the sampled gradient on ``exact``, divided by |exact|^2
    (1 for an unbiased estimator on average)."""
    g = np.asarray(grads, np.float64).reshape(grads.shape[0], -1)
    e = np.asarray(exact, np.float64).ravel()
    return g @ e / (e @ e)


def worst_cell(swept: dict, gain_floor: float) -> np.ndarray:
    """Per seed, the smallest over recipes and rates of ``min(final - GRPO's final, gain -
    gain_floor)`` (exact accuracy): ``all_methods_learn``'s estimand."""
    ref = swept["GRPO"]["accuracy"][:, :, -1]                          # [R, S]
    cells = []
    for m in swept.values():
        acc = m["accuracy"]                                            # [R, S, T]
        cells.append(np.minimum(acc[:, :, -1] - ref, acc[:, :, -1] - acc[:, :, 0] - gain_floor))
    return np.min(np.concatenate(cells, axis=0), axis=0)


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


# Dr.GRPO's policy-gradient derivation (Appendix A of the 2025-03-26 preprint, arXiv:2503.20783)
DR_APPENDIX_A = "arXiv:2503.20783 Appendix A"
CLAIMS = (
    claims.Declared(
        "rloo_equals_scaled_dr_grpo",
        statement="RLOO advantages equal G/(G-1) times Dr.GRPO advantages on sampled batches",
        paper_value="identity (algebra): r_i - mean_{j!=i} r_j = G/(G-1) (r_i - mean_G), "
                    "stated in Dr.GRPO's Appendix A",
        paper_ref=(f"{DR_APPENDIX_A} ('Unbiasedness of A~': G/(G-1) A~_i,t = A^RLOO_i,t; read "
                   "in the authors' preprint PDF, sail-sg/understand-r1-zero at commit "
                   "08db9b8)"),
        estimand="largest of |LOO - G/(G-1) Dr.GRPO| and |advantages.rloo - LOO| over one "
                 "sampled batch (float64; LOO = r_i - mean_{j!=i} r_j from its definition), "
                 "per batch", unit="advantage",
        rule="exact", direction="<", threshold=TOLERANCE),
    claims.Declared(
        "rloo_gradient_unbiased",
        statement="the RLOO-baseline policy gradient, averaged over draws, equals the exact "
                  "gradient",
        paper_value="unbiased (leave-one-out baseline): projection ratio 1 (derived: a "
                    "baseline independent of the rollout adds no bias, Dr.GRPO Appendix A, Eq. 5)",
        paper_ref=(f"{DR_APPENDIX_A} (Eq. 5: a baseline that does not depend on the sampled "
                   "token adds zero expected gradient; RLOO as the unbiased form of A~) (derived "
                   "from it)"),
        estimand="projection of one draw's sampled gradient on the exact gradient / |exact|^2, "
                 "minus 1, per draw", unit="ratio",
        rule="equivalence", direction="<", threshold=GRADIENT_MARGIN,
        note="a baseline that excludes the rollout is independent of its action, so E[b grad "
             "log pi] = 0"),
    claims.Declared(
        "dr_grpo_gradient_shrink",
        statement="the group-mean baseline (Dr.GRPO) shrinks the expected gradient by (G-1)/G",
        paper_value="(G-1)/G (algebra): 0.875 at G=8 (derived: A~ = (G-1)/G A^RLOO, the "
                    "scale Dr.GRPO's Appendix A folds into the learning rate)",
        paper_ref=(f"{DR_APPENDIX_A} ('Unbiasedness of A~': A~ is RLOO's advantage up to the "
                   "factor (G-1)/G) (derived from it)"),
        estimand="projection of one draw's sampled gradient on the exact gradient / |exact|^2, "
                 "minus (G-1)/G, per draw", unit="ratio",
        rule="equivalence", direction="<", threshold=GRADIENT_MARGIN,
        note="the group mean contains the rollout itself with weight 1/G"),
    claims.Declared(
        "all_methods_learn",
        statement="GRPO, Dr.GRPO, RLOO and DAPO all raise the exact mean success probability "
                  f"(by more than {MIN_GAIN:g}), and none falls behind GRPO by more than "
                  f"{MARGIN:g}, at each of three learning rates",
        paper_value="Dr.GRPO 'maintains reasoning performance' (abstract; Sec. 3.2, Fig. 6, "
                    "plot 5: average benchmark score against GRPO); DAPO 50 vs naive GRPO 30 on "
                    "AIME24 (DAPO Table 1); RLOO against GRPO: no location read; the "
                    "three-learning-rate check is ours",
        paper_ref=("arXiv:2503.20783 Sec. 3.2, Figure 6 (Dr.GRPO vs GRPO); arXiv:2503.14476 "
                   "Sec. 4.2, Table 1 (DAPO's techniques added to naive GRPO)"),
        estimand=f"per seed, the smallest over recipes and learning rates {LEARNING_RATES} of "
                 f"min(final accuracy - GRPO's final accuracy, accuracy gain - "
                 f"{MIN_GAIN + MARGIN:g}) (paired seeds)", unit="exact accuracy",
        rule="non_inferiority", direction=">", threshold=-MARGIN),
)


@experiment("grpo_family", paper=PAPER, setting="bank", claims=CLAIMS)
def run(ctx: Context):
    """GRPO / Dr.GRPO / RLOO / DAPO learning curves on the prompt bank; exact gradient checks."""
    base = base_config(ctx.quick)
    bank = prompt_bank.make_bank(base.bank)
    group = base.num_generations

    # -- learning curves: every recipe at every rate from the same seed keys (paired)
    frames, curves, swept = [], {}, {}
    rate = LEARNING_RATES.index(base.learning_rate)
    for name, cfg in ctx.progress(algorithms(base).items(), "recipes", total=4):
        swept[name] = train_rates(cfg, ctx.stream("curves"), ctx.seeds)
        curves[name] = {k: v[rate] for k, v in swept[name].items()}
        frames.append(metrics_frame(curves[name], algorithm=name))
    ctx.save_table(pd.concat(frames, ignore_index=True), "grpo_family_curves")
    table = learning_table(swept)
    ctx.save_table(table, "grpo_family_learning_rates")

    fig, axes = plotting.subplots(1, 3, figsize=(13, 3.8))
    # GRPO, Dr.GRPO and RLOO lie on top of each other under Adam: dashes and dots let the
    # lower curves show through, and the legend says that they coincide
    styles = {"GRPO": dict(lw=3.0), "Dr.GRPO": dict(ls="--", lw=2.0), "RLOO": dict(ls=":", lw=2.0)}
    for name, m in curves.items():
        steps = np.arange(m["accuracy"].shape[1])
        kw = styles.get(name, {})
        plotting.band(axes[0], steps, m["accuracy"], label=name, bounds=(0, 1), **kw)
        plotting.band(axes[1], np.cumsum(m["rollouts"].mean(0)) / 1e3, m["accuracy"], label=name,
                      bounds=(0, 1), **kw)
        plotting.band(axes[2], steps, m["zero_adv_frac"], label=name, bounds=(0, 1), **kw)
    axes[0].set(xlabel="step", ylabel="mean success probability (exact)",
                title=f"learning curves, {ctx.seeds} seeds, 95% CI")
    axes[1].set(xlabel="rollouts generated (thousands)", ylabel="mean success probability",
                title="same runs per rollout spent")
    axes[2].set(xlabel="step", ylabel="fraction of groups with all-zero advantage",
                title="groups without signal")
    axes[0].legend(title="GRPO, Dr.GRPO, RLOO coincide\n(Adam removes their scale)",
                   title_fontsize=8)
    ctx.save_figure(fig, "grpo_family_curves")

    # -- exact checks
    draws = 2000 if ctx.quick else 20000
    errors = rloo_vs_dr_grpo_errors(ctx.stream("identity"), bank, group,
                                    256 if ctx.quick else 2048)
    exact = prompt_bank.exact_policy_gradient(bank.logits0, bank.reward_table)
    grads = {name: sampled_gradients(ctx.stream(f"gradient {name}"), bank, name, group, draws)
             for name in ("rloo", "dr_grpo")}
    proj = {name: projections(g, exact) for name, g in grads.items()}
    checks = {name: gradient_check(g, exact) for name, g in grads.items()}
    shrink = (group - 1) / group
    ctx.save_table(pd.DataFrame([
        {"estimator": name, "draws": draws, "coverage": cov, "projection_ratio": ratio,
         "ratio_se": se, "expected": 1.0 if name == "rloo" else shrink}
        for name, (cov, ratio, se) in checks.items()]), "grpo_family_gradient")

    fig, ax = plotting.subplots(figsize=(5, 3.6))
    ratios = [checks[n][1] for n in ("rloo", "dr_grpo")]
    ses = [1.96 * checks[n][2] for n in ("rloo", "dr_grpo")]
    ax.errorbar([0, 1], ratios, yerr=ses, fmt="o", capsize=4)
    ax.axhline(1.0, color="k", lw=0.8, ls="--", label="exact gradient")
    ax.axhline(shrink, color="C1", lw=0.8, ls=":", label=f"(G-1)/G = {shrink:.3f}")
    ax.set_xticks([0, 1], ["RLOO", "Dr.GRPO"])
    ax.set(ylabel="projection of mean sampled gradient\non the exact gradient",
           title=f"{draws} draws, G={group}")
    ax.legend()
    ctx.save_figure(fig, "grpo_family_gradient")

    return ctx.decide({
        "rloo_equals_scaled_dr_grpo": claims.seeds(errors),
        "rloo_gradient_unbiased": claims.seeds(proj["rloo"] - 1.0),
        "dr_grpo_gradient_shrink": claims.seeds(proj["dr_grpo"] - shrink),
        "all_methods_learn": claims.seeds(worst_cell(swept, MIN_GAIN + MARGIN)),
    })
