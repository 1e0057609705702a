"""MC-GRPO study pieces (arXiv:2601.22582): reward laws and flip tables, the prompt-bank
G-sweep, the mad pitfall and the small-model arms, as ``simulations/mc_grpo.py`` and
``notebooks/02_mc_grpo.ipynb`` use them.

Everything here measures; nothing decides a claim (the claims are declared beside their
experiments in ``simulations/mc_grpo.py`` and decided by :mod:`rlvr_lab.claims`).
:func:`seed_numbers` turns the final scores of the G-sweep's arms into the per-seed numbers
behind its four comparison claims.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pandas as pd

from rlvr_lab import advantages, losses, plotting
from rlvr_lab.envs import prompt_bank
from rlvr_lab.envs.prompt_bank import PromptBankConfig
from rlvr_lab.models import tabular
from rlvr_lab.papers.mc_grpo import sign_flip
from rlvr_lab.papers.mc_grpo import small
from rlvr_lab.papers.mc_grpo.closure import gap_closure
from rlvr_lab.train import bases, rollout, sequence
from rlvr_lab.train.bandit import BanditConfig, metrics_frame, train_seeds
from rlvr_lab import random_streams as streams

GROUP_SIZES = (2, 3, 4, 6, 8, 12, 16)
PAPER_LAW = ((0.0, 1.5, 2.0), (0.3, 0.2, 0.5))  # the repo's format (1.5) + correctness (2) levels
# the three ways of spending a group: mean on G, mean on G+1 (same samples as the median,
# one rollout dropped from the loss: the compute-matched baseline), median on G+1
ESTIMATORS = {"mean (G)": ("mean", 0), "mean (G+1, drop 1)": ("mean", 1),
              "median (G+1)": ("median", 0)}


def map_laws() -> list[sign_flip.RewardLaw]:
    """Reward laws of the map: binary, 3-level format+correctness, outliers, noisy/heavy tails."""
    return [
        sign_flip.discrete_law("binary p=0.2", (0.0, 1.0), (0.8, 0.2)),
        sign_flip.discrete_law("binary p=0.5", (0.0, 1.0), (0.5, 0.5)),
        sign_flip.discrete_law("binary p=0.8", (0.0, 1.0), (0.2, 0.8)),
        sign_flip.discrete_law("{0,1.5,2} (.3,.2,.5) paper-like", *PAPER_LAW),
        sign_flip.discrete_law("{0,1.5,2} (.5,.3,.2) hard", (0.0, 1.5, 2.0), (0.5, 0.3, 0.2)),
        sign_flip.discrete_law("{0,1.5,2} (.1,.6,.3) format-rich", (0.0, 1.5, 2.0),
                               (0.1, 0.6, 0.3)),
        sign_flip.discrete_law("{0,1,2} uniform", (0.0, 1.0, 2.0), (1 / 3, 1 / 3, 1 / 3)),
        sign_flip.discrete_law("outlier {0,1,10} (.5,.45,.05)", (0.0, 1.0, 10.0),
                               (0.5, 0.45, 0.05)),
        sign_flip.student_t_law("Bern(.5)+0.3 t2 heavy noise", 0.5, 0.3, 2.0),
        sign_flip.lognormal_law("lognormal s=1 skewed", 1.0),
        sign_flip.noisy_binary_law("Bern(.5)+N(0,.3^2)", 0.5, 0.3),
        sign_flip.noisy_binary_law("Bern(.2)+N(0,.3^2)", 0.2, 0.3),
    ]


def flip_table(key, laws, group_sizes=GROUP_SIZES, references=("mean", "median"),
               num_groups: int = 1 << 16) -> pd.DataFrame:
    """Long-form flip/zeroing probabilities: law, G, estimator, reference, values and CIs.

    Exact for discrete laws (half-widths 0), Monte Carlo with ``num_groups`` otherwise.
    """
    rows = []
    for li, law in enumerate(laws):
        for ei, (est, (baseline, extra)) in enumerate(ESTIMATORS.items()):
            k = jax.random.fold_in(jax.random.fold_in(key, li), ei)
            out = sign_flip.law_flip_sweep(k, law, [g + extra for g in group_sizes],
                                           baseline=baseline, references=references,
                                           num_groups=num_groups)
            for gi, g in enumerate(group_sizes):
                for ri, ref in enumerate(references):
                    rows.append(dict(law=law.name, exact=law.discrete, G=g, estimator=est,
                                     reference=ref, flip=out["flip"][gi, ri],
                                     flip_hw=out["flip_half_width"][gi, ri],
                                     zero=out["zero"][gi, ri],
                                     zero_hw=out["zero_half_width"][gi, ri]))
    return pd.DataFrame(rows)


def median_gain(table: pd.DataFrame, *, reference: str = "mean", quantity: str = "flip",
                against: str = "mean (G)") -> pd.DataFrame:
    """[law x G] matrix of ``quantity(against) - quantity(median (G+1))`` (> 0: median better)."""
    t = table[table.reference == reference]
    wide = t.pivot_table(index=["law", "G"], columns="estimator", values=quantity)
    gain = (wide[against] - wide["median (G+1)"]).unstack("G")
    return gain.reindex(list(dict.fromkeys(t.law)))




def simplex_table(values=PAPER_LAW[0], group_sizes=(2, 4, 8), step: float = 0.05,
                  reference: str = "mean") -> pd.DataFrame:
    """Exact flip gain mean(G) − median(G+1) over the probability simplex of a 3-level law."""
    rows = []
    m = int(round(1 / step))
    for i in range(m + 1):
        for j in range(m + 1 - i):
            probs = np.array([m - i - j, i, j], dtype=float) / m
            for g in group_sizes:
                mean = sign_flip.sign_flip_probability(values, probs, g, reference=reference)
                med = sign_flip.sign_flip_probability(values, probs, g, baseline="median",
                                                      reference=reference)
                rows.append(dict(p0=probs[0], p1=probs[1], p2=probs[2], G=g, mean=mean,
                                 median=med, gain=mean - med))
    return pd.DataFrame(rows)



STUDY_SCALES = ("mad", "std", "none")


def format_bank(**changes) -> PromptBankConfig:
    """The prompt bank with the repo's levels: wrong 0, well-formatted wrong 1.5, correct 2."""
    kw = dict(num_prompts=64, vocab_size=16, reward="format", correct_reward=0.5,
              format_reward=1.5, format_fraction=0.5, difficulty_a=1.0, difficulty_b=3.0)
    return PromptBankConfig(**(kw | changes))


def study_base(quick: bool, bank: PromptBankConfig | None = None) -> BanditConfig:
    """Shared trainer settings: 2 PPO epochs per generation (as the paper), Adam, no KL."""
    return BanditConfig(bank=format_bank() if bank is None else bank,
                        steps=30 if quick else 100, num_prompts=32, num_generations=2,
                        num_iterations=2, num_minibatches=1, learning_rate=0.05,
                        loss_agg_mode="token-mean", eval_ks=(1,))


def study_configs(base: BanditConfig, group_sizes=(2, 4, 8), scales=STUDY_SCALES,
                  compute_matched: bool = True) -> dict[tuple[str, int], BanditConfig]:
    """``{(method, G): config}``; G is the number of rollouts in the loss for every method."""
    out = {}
    for g in group_sizes:
        out[("GRPO", g)] = base.replace(num_generations=g, advantage="grpo",
                                        scale_rewards="group")
        for s in scales:
            out[(f"MC-GRPO {s}", g)] = base.replace(
                num_generations=g + 1, advantage="mc_grpo", advantage_options=(("scale", s),))
        if compute_matched:
            out[("GRPO G+1 drop 1", g)] = base.replace(
                num_generations=g + 1, advantage="grpo_drop_one",
                advantage_options=(("scale", "std"),))
    return out


def run_study(key, configs: dict, seeds: int) -> dict[tuple[str, int], dict[str, np.ndarray]]:
    """Train every config on ``seeds`` seeds (same seed keys for every config)."""
    return {name: {k: np.asarray(v) for k, v in train_seeds(cfg, key, seeds)[1].items()}
            for name, cfg in configs.items()}


def study_frame(results) -> pd.DataFrame:
    return pd.concat([metrics_frame(m, method=name, G=g) for (name, g), m in results.items()],
                     ignore_index=True)


def final_table(results, metric: str = "accuracy") -> pd.DataFrame:
    """Final-step mean and 95% CI half-width over seeds per (method, G)."""
    rows = []
    for (name, g), m in results.items():
        mean, half = plotting.mean_ci(m[metric][:, -1])
        rows.append(dict(method=name, G=g, mean=float(mean), ci95=float(half),
                         seeds=m[metric].shape[0], rollouts_per_step=float(m["rollouts"][0, 0])))
    return pd.DataFrame(rows)



def bank_flip_rates(bank_config: PromptBankConfig, g: int) -> dict[str, float]:
    """Exact flip/zeroing rates at G on the bank's initial per-prompt reward laws, averaged
    over prompts (each prompt: the law of R under its initial softmax policy)."""
    bank = prompt_bank.make_bank(bank_config)
    pi = np.asarray(jax.nn.softmax(bank.logits0, axis=-1), np.float64)
    table = np.asarray(bank.reward_table, np.float64)
    out = {}
    for name, (baseline, extra) in ESTIMATORS.items():
        stats_ = [sign_flip.flip_statistics(table[k], pi[k] / pi[k].sum(), g + extra,
                                            baseline=baseline)
                  for k in range(table.shape[0])]
        out[name] = float(np.mean([s.flip for s in stats_]))
        out[name + " zero"] = float(np.mean([s.zero for s in stats_]))
    return out




def binary_bank(**changes) -> PromptBankConfig:
    kw = dict(num_prompts=64, vocab_size=16, reward="binary", difficulty_a=1.0, difficulty_b=3.0)
    return PromptBankConfig(**(kw | changes))


def first_step_stats(key, bank_config: PromptBankConfig, g: int, scale: str, optimizer: str,
                     learning_rate: float, *, epsilon: float = 0.2, num_batches: int = 16,
                     eps: float = 1e-3):
    """What one optimizer step on MC-GRPO advantages does, before any clipping can act.

    For ``num_batches`` batches (every prompt, ``g + 1`` rollouts at the initial policy) take
    one ``optimizer`` step on the first-epoch PPO loss (ratio 1, so it equals the pg loss) and
    return per batch: the largest |A|, the fraction of kept non-zero-advantage rollouts whose
    new ratio lies in PPO's clipped region (the gradient that the second epoch would ignore),
    and the mean KL(new || old) over prompts.
    """
    bank = prompt_bank.make_bank(bank_config)
    prompts = jnp.arange(bank.num_prompts)
    opt = getattr(optax, optimizer)(learning_rate)

    def one(k):
        batch = rollout.generate(k, bank.logits0, bank, prompts, g + 1)
        adv, keep = advantages.mc_grpo(batch.rewards, scale=scale, eps=eps)

        def loss(logits):
            logp = tabular.answer_log_prob(logits, batch.answers)
            return losses.aggregate(losses.pg(logp, None, adv), keep, "token-mean")

        grads = jax.grad(loss)(bank.logits0)
        updates, _ = opt.update(grads, opt.init(bank.logits0), bank.logits0)
        new = optax.apply_updates(bank.logits0, updates)
        old_lp = tabular.answer_log_prob(bank.logits0, batch.answers)
        new_lp = tabular.answer_log_prob(new, batch.answers)
        live = keep & (adv != 0)
        clipped = losses.is_clipped(new_lp, old_lp, adv, epsilon=epsilon) & live
        return (jnp.max(jnp.abs(jnp.where(keep, adv, 0))),
                clipped.sum() / jnp.maximum(live.sum(), 1),
                tabular.kl_divergence(new, bank.logits0).mean())

    max_abs, clip_frac, kl = jax.jit(jax.vmap(one))(jax.random.split(key, num_batches))
    return dict(max_abs_adv=np.asarray(max_abs), clipped_frac=np.asarray(clip_frac),
                kl=np.asarray(kl))


PITFALL_OPTIMIZERS = {"SGD lr=1": ("sgd", 1.0), "Adam lr=0.05": ("adam", 0.05)}


def first_step_table(key, bank_config, g: int = 4, scales=STUDY_SCALES,
                     num_batches: int = 16) -> pd.DataFrame:
    rows = []
    for i, (opt_name, (opt, lr)) in enumerate(PITFALL_OPTIMIZERS.items()):
        for j, scale in enumerate(scales):
            out = first_step_stats(streams.stream(streams.stream(key, "first-step", i), "group-size", j), bank_config, g, scale,
                                   opt, lr, num_batches=num_batches)
            for b in range(num_batches):
                rows.append(dict(optimizer=opt_name, scale=scale, batch=b,
                                 **{k: float(v[b]) for k, v in out.items()}))
    return pd.DataFrame(rows)


def pitfall_configs(quick: bool) -> dict[str, BanditConfig]:
    """MC-GRPO on binary rewards, G+1=5: scales x optimizers x (ratio clip | none | grad clip)."""
    base = BanditConfig(bank=binary_bank(), steps=20 if quick else 60, num_prompts=32,
                        num_generations=5, advantage="mc_grpo", num_iterations=2,
                        num_minibatches=1, optimizer="sgd", learning_rate=1.0,
                        loss_agg_mode="token-mean", eval_ks=(1, 8))

    def mc(scale, **kw):
        return base.replace(advantage_options=(("scale", scale),), **kw)

    configs = {"SGD, PPO clip, mad": mc("mad"), "SGD, PPO clip, std": mc("std"),
               "SGD, no clip (pg), mad": mc("mad", policy_loss="pg")}
    if not quick:
        configs |= {"SGD, PPO clip, none": mc("none"),
                    "SGD, PPO clip + grad-norm 1, mad": mc("mad", max_grad_norm=1.0),
                    "Adam, PPO clip, mad": mc("mad", optimizer="adam", learning_rate=0.05),
                    "Adam, PPO clip, std": mc("std", optimizer="adam", learning_rate=0.05)}
    return configs



# the authors' training options: KL to the reference with beta 0.04 and gradient-norm
# clipping at 1.0 (the sequence trainer always clips; 1.0 is its default)
AUTHORS = dict(beta=0.04, max_grad_norm=1.0)
SMALL_METHODS = {   # name -> (extra rollouts, estimator, options); G = rollouts in the loss
    "GRPO": (0, "grpo", ()),
    "MC-GRPO": (1, "mc_grpo_rescaled", (("scale", "mad"), ("rescale", True))),
    "GRPO G+1 drop min|r|": (1, "grpo_drop_min_abs", ()),
    "MC-GRPO std, no rescale": (1, "mc_grpo", (("scale", "std"),)),
    "MC-GRPO mad, no rescale": (1, "mc_grpo", (("scale", "mad"),)),
}


def small_base(rl: sequence.SequenceRLConfig, quick: bool) -> sequence.SequenceRLConfig:
    """``rl`` (``tiny_grpo``'s GRPO recipe) with the authors' options, on the partial-credit
    reward (quick: B=16, 14 steps; full: B=32, 60 steps, to a plateau), 128 held-out
    problems."""
    if quick:
        return dataclasses.replace(rl, steps=14, num_prompts=16, eval_every=7,
                                   eval_problems=128, eval_samples=4, **AUTHORS)
    return dataclasses.replace(rl, steps=60, eval_every=10, eval_problems=128, eval_samples=8,
                               **AUTHORS)


def small_configs(base, arms) -> dict:
    """``{(method, G): SequenceRLConfig}`` for ``arms`` = iterable of (method, G)."""
    out = {}
    for method, g in arms:
        extra, est, opts = SMALL_METHODS[method]
        out[(method, g)] = dataclasses.replace(base, num_generations=g + extra, advantage=est,
                                               advantage_options=opts)
    return out


def small_arms(quick: bool) -> list[tuple[str, int]]:
    if quick:
        return [("GRPO", 2), ("MC-GRPO", 2), ("GRPO G+1 drop min|r|", 2), ("GRPO", 8)]
    return ([(m, g) for g in (2, 4, 8) for m in ("GRPO", "MC-GRPO", "GRPO G+1 drop min|r|")]
            + [("MC-GRPO std, no rescale", 2), ("MC-GRPO mad, no rescale", 2)])


def heldout_pass1(run) -> np.ndarray:
    """``[evaluations, seeds]`` held-out pass@1 of a ``sequence.Run``."""
    return np.asarray(run.evals["pass_at"])[:, :, 0]


def small_table(runs) -> pd.DataFrame:
    rows = []
    for (method, g), run in runs.items():
        pa = heldout_pass1(run)
        for e, step in enumerate(np.asarray(run.evals["step"])):
            for s in range(pa.shape[1]):
                rows.append(dict(method=method, G=g, step=int(step), seed=s,
                                 heldout_pass1=float(pa[e, s])))
    return pd.DataFrame(rows)


def law_flip_table(laws: np.ndarray, values, group_sizes=GROUP_SIZES) -> pd.DataFrame:
    """Exact flip/zeroing rates averaged over per-prompt discrete laws ``[P, L]`` (rows:
    level frequencies) for mean (G), mean (G+1, drop min|r|) and median (G+1)."""
    rows = []
    baselines = {"mean (G)": "mean", "mean (G+1, drop min|r|)": "mean_drop_min",
                 "median (G+1)": "median"}
    for g in group_sizes:
        for name, b in baselines.items():
            st_ = [sign_flip.flip_statistics(values, p, g, baseline=b) for p in laws if p.max() < 1]
            n_const = int(sum(p.max() >= 1 for p in laws))   # one level: no flips, no zeros
            flip = sum(s.flip for s in st_) / (len(st_) + n_const)
            zero = sum(s.zero for s in st_) / (len(st_) + n_const)
            rows.append(dict(G=g, estimator=name, flip=flip, zero=zero))
    return pd.DataFrame(rows)


def flip_range(table: pd.DataFrame) -> list[int]:
    """The G at which the median (G+1) flips fewer signs than the mean (G)."""
    w = table.pivot_table(index="G", columns="estimator", values="flip")
    return [int(g) for g in w.index if w.loc[g, "median (G+1)"] < w.loc[g, "mean (G)"]]




def flip_reduction(table: pd.DataFrame, g: int = 2) -> float:
    """Relative flip reduction ``(P_mean(G) - P_median(G+1)) / P_mean(G)`` from a
    :func:`law_flip_table` (``0`` when the mean never flips at ``G``)."""
    w = table.pivot_table(index="G", columns="estimator", values="flip")
    mean, med = float(w.loc[g, "mean (G)"]), float(w.loc[g, "median (G+1)"])
    return (mean - med) / mean if mean > 0 else 0.0


# ============================================================================ the G-sweep's claims
CLOSURE_MIN = 0.5   # gap closure: MC-GRPO(2) recovers more than half the GRPO(2) -> GRPO(8) gain


def seed_numbers(final: dict, mc: tuple[str, int] = ("MC-GRPO", 2),
                 drop: tuple[str, int] | None = ("GRPO G+1 drop min|r|", 2)
                 ) -> dict[str, np.ndarray]:
    """Per-seed numbers of the G-sweep's comparison claims from paired final scores
    ``final[(method, G)]`` (same seed, same base in every arm), keyed by the claim id without
    its prefix (each one whose arms are in ``final``):

    - ``mc_improves_g2``: MC(2) - GRPO(2);
    - ``g2_matches_g8_within_1pct``: MC(2) - GRPO(8);
    - ``gap_closure``: (MC(2) - GRPO(2)) - CLOSURE_MIN (GRPO(8) - GRPO(2)), above 0 exactly
      when the closure ratio exceeds CLOSURE_MIN (for a positive gap): Fieller's test of
      ``closure = CLOSURE_MIN`` is the t-test of this difference;
    - ``beats_compute_matched``: MC(2) - drop-min(2) (when ``drop`` is given).
    """
    arm = {k: np.asarray(v, float) for k, v in final.items()}
    g2, g8, mc2 = arm.get(("GRPO", 2)), arm.get(("GRPO", 8)), arm.get(mc)
    out = {}
    if mc2 is not None and g2 is not None:
        out["mc_improves_g2"] = mc2 - g2
    if mc2 is not None and g8 is not None:
        out["g2_matches_g8_within_1pct"] = mc2 - g8
    if mc2 is not None and g2 is not None and g8 is not None:
        out["gap_closure"] = (mc2 - g2) - CLOSURE_MIN * (g8 - g2)
    if mc2 is not None and drop is not None and drop in arm:
        out["beats_compute_matched"] = mc2 - arm[drop]
    return out


# ============================================================================ across losses
# ``mc_grpo_across_losses``: the median (MC-GRPO) and the mean baseline of the authors' code
# (``--mc=False``: G+1 rollouts, mean/std over all, the smallest-|reward| one dropped) at G=2
# under three policy losses. Each loss is a set of SequenceRLConfig fields (the trainer reads
# the loss from the registry by ``policy_loss`` and the options it declares; nothing branches
# on these names). The study's other arms keep tiny_grpo's token mean (TRL's "bnpo"), so the
# GRPO loss here has arms of its own:
LOSSES = {
    # the authors' --loss_type grpo (TRL): PPO clip, epsilon_low = epsilon_high = 0.2 (TRL's
    # default), each sequence's token mean, then the mean over sequences
    "GRPO": dict(policy_loss="ppo_clip", epsilon=0.2, epsilon_high=None,
                 loss_agg_mode="seq-mean-token-mean"),
    # DAPO (arXiv:2503.14476): clip-higher (0.2, 0.28) and the token mean over the batch (the
    # authors' --loss_type dapo aggregation: token sum / active tokens; their recipes set no
    # epsilon_high, so the clip-higher half is DAPO's, as the issue asks)
    "DAPO": dict(policy_loss="ppo_clip", epsilon=0.2, epsilon_high=0.28,
                 loss_agg_mode="token-mean"),
    # GSPO (arXiv:2507.18071): one length-normalised ratio per sequence clipped to
    # [1 - 3e-4, 1 + 4e-4] (the paper's range), sequence mean (the authors' trainer:
    # importance_sampling_level="sequence" with --loss_type grpo)
    "GSPO": dict(policy_loss="gspo", epsilon=3e-4, epsilon_high=4e-4,
                 loss_agg_mode="seq-mean-token-mean"),
}
LOSS_BASELINES = {"median": "MC-GRPO", "mean": "GRPO G+1 drop min|r|"}
LOSS_G = 2
ACROSS = "mc_grpo_across_losses"


def loss_arm(baseline: str, loss: str) -> tuple[str, int]:
    """The arm key ``(method, G)`` of a baseline ("median" | "mean") under a loss."""
    return (f"{LOSS_BASELINES[baseline]}, {loss} loss", LOSS_G)


def loss_claim(loss: str | None = None) -> str:
    """The claim id of one loss (``mc_grpo_across_losses_dapo``), or of the conjunction."""
    return ACROSS if loss is None else f"{ACROSS}_{loss.lower()}"


def loss_configs(base, names: Iterable[str] = tuple(LOSSES)) -> dict:
    """``{loss_arm(baseline, loss): config}``: :data:`SMALL_METHODS`' median and mean arms at
    G=2 with each loss's fields; held-out evaluation at step 0 and at the end only (the claims
    read the final pass@1)."""
    out = {}
    for loss in names:
        for b, method in LOSS_BASELINES.items():
            (cfg,) = small_configs(base, [(method, LOSS_G)]).values()
            out[loss_arm(b, loss)] = dataclasses.replace(cfg, eval_every=cfg.steps,
                                                         **LOSSES[loss])
    return out


def loss_gains(final: dict, names: Sequence[str] = tuple(LOSSES)) -> dict[str, np.ndarray]:
    """Per-seed numbers of the across-losses claims from paired final scores ``final[arm]``:
    ``loss_claim(L)``: median minus mean baseline under loss L (same seed, same base), for
    each L whose two arms are in ``final``; ``loss_claim()``: the mean of those gains per
    seed, when every loss's arms are there (a mean, not the per-seed minimum: the minimum of
    noisy gains sits below the smallest mean gain, so its fail side would be biased) (losses run on more SFT bases in later looks: over
    their common first seeds, which come from the same bases)."""
    out = {}
    for loss in names:
        med, mean = final.get(loss_arm("median", loss)), final.get(loss_arm("mean", loss))
        if med is not None and mean is not None:
            out[loss_claim(loss)] = np.asarray(med, float) - np.asarray(mean, float)
    per = [out.get(loss_claim(loss)) for loss in names]
    if per and all(g is not None for g in per):
        n = min(g.size for g in per)
        out[ACROSS] = np.mean(np.stack([g[:n] for g in per]), axis=0)
    return out


def closure_table(final: dict, methods=("MC-GRPO", "GRPO G+1 drop min|r|")) -> pd.DataFrame:
    """Descriptive gap closure ``(X(G) - GRPO(G)) / (GRPO(8) - GRPO(G))`` per method and G with
    Fieller's 95% interval over seeds (seeds treated as independent; the claims use
    :func:`seed_numbers`). Seeds are paired by position: an arm with more seeds (run on more
    SFT bases) is cut to the common first ones."""
    rows = []
    for method in methods:
        for g in sorted({g for m, g in final if m == method and g < 8}):
            if ("GRPO", g) not in final:
                continue
            arms = [np.asarray(final[k]) for k in ((method, g), ("GRPO", g), ("GRPO", 8))]
            n = min(a.size for a in arms)   # arms run on more bases: their first n seeds pair
            iv = gap_closure(*(a[:n] for a in arms))
            rows.append(dict(method=method, G=g, closure=iv.mean, low=iv.low, high=iv.high,
                             seeds=n))
    return pd.DataFrame(rows)


def bank_authors_configs(base: BanditConfig, arms) -> dict[tuple[str, int], BanditConfig]:
    """The small model's arms on the bank: ``{(method, G): BanditConfig}``."""
    out = {}
    for method, g in arms:
        extra, est, opts = SMALL_METHODS[method]
        out[(method, g)] = base.replace(num_generations=g + extra, advantage=est,
                                        advantage_options=opts)
    return out


BANK_ARMS = ([(m, g) for g in (2, 4, 8) for m in ("GRPO", "MC-GRPO", "GRPO G+1 drop min|r|")]
             + [("MC-GRPO std, no rescale", 2), ("MC-GRPO mad, no rescale", 2)])


def mad_errors(key, bank_config: PromptBankConfig, group: int = 5,
               eps: float = 1e-3) -> np.ndarray:
    """Relative error ``|A| eps - 1`` of every kept non-zero MC-GRPO advantage (mad scale) on
    one sampled batch of ``group`` rollouts per prompt at the initial policy (0 when
    ``|A| = 1/eps``)."""
    b = prompt_bank.make_bank(bank_config)
    batch = rollout.generate(key, b.logits0, b, jnp.arange(b.num_prompts), group)
    adv, keep = advantages.mc_grpo(batch.rewards, scale="mad", eps=eps)
    adv = np.asarray(adv, np.float64)
    live = np.asarray(keep) & (adv != 0)
    return np.abs(adv[live]) * eps - 1.0


# ============================================================================ small model, bases
def run_small_bases(configs: dict, key, base_ids: Sequence[int], seeds_per_base: int, *,
                    law_key, law_prompts: int, law_samples: int = 32,
                    run_only: Iterable | None = None,
                    progress: Callable[[Iterable, str], Iterable] | None = None):
    """The arms ``run_only`` (default: all) of ``configs`` from each SFT base in ``base_ids``
    (base ``b``: :func:`rlvr_lab.train.bases.with_base`), every arm with the same key per
    base (paired seeds), and each base's own per-prompt reward laws (:func:`small.reward_law`).

    Returns ``({arm: [Run per base]}, [laws per base])``."""
    run_only = set(configs if run_only is None else run_only)
    # every base's trainers first (an arm's trainers share compiled calls with the base's
    # other arms), then each arm over all bases as one run where it batches
    per_base = [small.make_trainers({n: bases.with_base(c, b) for n, c in configs.items()})
                for b in base_ids]
    laws = [small.reward_law(next(iter(trainers.values())), bases.base_key(law_key, b),
                             num_prompts=law_prompts, samples=law_samples)
            for trainers, b in zip(per_base, base_ids)]
    items = [name for name in configs if name in run_only]
    if progress is not None:
        items = progress(items, f"arms, bases {list(base_ids)}")
    runs = {name: bases.run_trainers([trainers[name] for trainers in per_base], key,
                                     base_ids, seeds_per_base)
            for name in items}
    return runs, laws
