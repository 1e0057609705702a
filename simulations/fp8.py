"""FP8 (and FP4) rollouts with token TIS / MIS correction on the tiny transformer (veRL).

The rollout engine samples from a fake-quantised copy of the policy
(:mod:`rlvr_lab.papers.fp8.quant`: blockwise absmax-scaled E4M3 weights of the linear layers,
1x128 activation blocks -- W8A8), re-quantised from the float32 weights at every step; the
trainer rescores the sampled tokens
in float32, so ``rho = pi_train / pi_rollout`` differs from 1 and
:mod:`rlvr_lab.train.sequence` can correct it (``rollout_correction`` "tis" / "mis", C = 2).

Two parts:

(a) :func:`mismatch_table` -- k1, k3, chi^2 between the quantised engine's and the float32
    trainer's log-probs on the engine's own sampled tokens (plus the exact per-position
    KL(pi_rollout || pi_train) over the vocabulary, a low-noise companion of k3), on the SFT
    base's held-out prompts, for weight block sizes 16..128 and the whole tensor, for E4M3
    and the coarse FP4 format E2M1 with weights only and with W+A quantisation, and int4
    (weights only) as an integer-grid contrast.
(b) :func:`train_treatments` -- GRPO (``tiny_grpo``'s settings with B=8 prompts, seeds
    vmapped) with float32 rollouts, E2M1 (W4A4) rollouts without correction, with token TIS
    and with token MIS (E4M3 W8A8 rollouts on request: ``treatments(include_e4m3=True)``).
    E2M1 is used for the corrections because E4M3's mismatch at this scale is tiny (k3 ~ 1e-3
    per token for weights, ~2.5e-3 with activations; see the table), too small to move a
    0.1M-parameter model's learning curve in 100 steps.

Claims (pre-stated; computed in the run):

- ``uncorrected_degrades``: held-out pass@1 (float32 policy; mean of the last two
  evaluations) is lower after training on E2M1 rollouts without correction than on float32
  rollouts. Paired per seed (same keys, same prompts per step); passes when the 95%
  t-interval of the gap (fp32 - uncorrected) lies above 0.
- ``tis_recovers`` / ``mis_recovers``: the gap fp32 - corrected is smaller than the
  uncorrected gap (means) and its 95% t-interval includes 0 or lies below it.
- ``mismatch_grows_with_block_e4m3`` / ``..._coarse``: with weights-only quantisation, the
  Spearman rank correlation between block size (whole tensor largest) and the mean k3 over
  rollout keys is >= 0.9 (one-sided p < 0.05 for 5 sizes).
"""
from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from rlvr_lab import losses, plotting
from rlvr_lab.papers.fp8 import quant
from rlvr_lab.envs import tasks
from rlvr_lab.experiments import claim, experiment
from rlvr_lab.models import transformer
from rlvr_lab.train import sequence, sft
from simulations.tiny_grpo import rl_config as grpo_config

PAPER = "FP8"
BLOCKS = (16, 32, 64, 128, None)  # None: the whole tensor (per-tensor scale)
COARSE = "e2m1"
PAPER_VALUE = ("veRL FP8 report: W8A8 blockwise E4M3 (128x128 / 1x128) rollouts; without "
               "correction accuracy drops, with token TIS (C=2) it matches BF16")


def block_label(block) -> str:
    return "whole" if block is None else str(block)


# ----------------------------------------------------------------------------- (a) mismatch
@functools.partial(jax.jit, static_argnames=("max_new_tokens",))
def _measure(key, rollout_policy, train_policy, prompts, valid, *, max_new_tokens):
    """Sample with the rollout policy, rescore with the trainer's: mismatch metrics + tokens."""
    out = transformer.sample(key, rollout_policy, prompts, valid, max_new_tokens=max_new_tokens)
    lp_roll = jax.nn.log_softmax(
        transformer.completion_logits(rollout_policy, prompts, valid, out.tokens), axis=-1)
    lp_train = jax.nn.log_softmax(
        transformer.completion_logits(train_policy, prompts, valid, out.tokens), axis=-1)
    train_logp = jnp.take_along_axis(lp_train, out.tokens[..., None], axis=-1)[..., 0]
    m = losses.mismatch_metrics(train_logp, out.logp, out.mask)
    kl = (jnp.exp(lp_roll) * (lp_roll - lp_train)).sum(-1)
    m["kl"] = losses.masked_mean(kl, out.mask)
    return m, out.tokens


# the same as quant.quantise_policy, jitted: one small compile per config beats eager ops
_quantise_params = jax.jit(quant.quantise_params, static_argnums=1)


FULL_SETTINGS = (("e4m3", False), ("e4m3", True), (COARSE, False), (COARSE, True),
                 ("int4", False))
QUICK_SETTINGS = (("e4m3", False), (COARSE, False))


def mismatch_table(key, *, policy=None, base: sft.SFTConfig = sft.PRESETS["quick"],
                   settings=FULL_SETTINGS, blocks=BLOCKS, num_keys: int = 3,
                   samples: int = 4) -> pd.DataFrame:
    """Rollout/trainer mismatch of fake-quantised rollouts vs weight block size.

    For each ``(format, activations)`` in ``settings`` (activations False: weights only;
    True: also the inputs of the linear layers in 1x128 blocks), each weight block (square
    ``b x b``; None = whole tensor) and each of ``num_keys`` rollout keys: ``samples``
    completions of every held-out prompt of ``base`` from the quantised policy, rescored by
    the float32 ``policy`` (default: the cached SFT base).
    Columns: format, block, block_rank (0 = smallest, whole tensor last), activations, key,
    k1, k3, chi2, kl (exact, per token), pass1 (the quantised engine's held-out pass@1).
    The same rollout keys are used for every setting (common random numbers).
    """
    policy = sft.load_or_train(base, verbose=False) if policy is None else policy
    problems = sft.problems(base, "heldout")
    enc = sft.encode(base, problems)
    prompts = jnp.tile(jnp.asarray(enc.prompts), (samples, 1))
    valid = jnp.tile(jnp.asarray(enc.prompt_valid), (samples, 1))
    rows = []
    for fmt, acts in settings:
        for rank, block in enumerate(blocks):
            qcfg = quant.QuantConfig(fmt, weight_block=block, quantise_activations=acts)
            qpolicy = transformer.Policy(
                dataclasses.replace(policy.config, act_hook=qcfg.act_quant()),
                _quantise_params(policy.params, qcfg))
            for i in range(num_keys):
                m, tokens = _measure(jax.random.fold_in(key, i), qpolicy, policy, prompts,
                                     valid, max_new_tokens=base.max_new_tokens)
                _, correct = tasks.score_completions(
                    problems, np.asarray(tokens).reshape(samples, len(problems), -1))
                rows.append(dict(format=fmt, block=block_label(block), block_rank=rank,
                                 activations=acts, key=i,
                                 **{k: float(v) for k, v in m.items()},
                                 pass1=float(correct.mean())))
    return pd.DataFrame(rows)


def spearman(x, y) -> float:
    """Spearman rank correlation (average ranks for ties); 0 when either side is constant."""
    from scipy import stats
    if np.ptp(np.asarray(x, float)) == 0 or np.ptp(np.asarray(y, float)) == 0:
        return 0.0
    return float(stats.spearmanr(x, y).statistic)


def block_trend(table: pd.DataFrame, fmt: str, metric: str = "k3", activations: bool = False):
    """``(spearman, means)``: rank correlation of block size with the mean ``metric``."""
    d = table[(table.format == fmt) & (table.activations == activations)]
    means = d.groupby("block_rank")[metric].mean()
    return spearman(means.index, means.to_numpy()), means.to_numpy()


def mismatch_figure(table: pd.DataFrame):
    """k3, exact KL and the engine's pass@1 vs weight block size, per format and setting."""
    fig, axes = plotting.subplots(1, 3, figsize=(14, 3.8))
    labels = [b for b in table.sort_values("block_rank").block.unique()]
    colors = {}
    for (fmt, acts), d in table.groupby(["format", "activations"], sort=False):
        color = colors.setdefault(fmt, f"C{len(colors)}")
        name = f"{fmt} {'W+A' if acts else 'W only'}"
        for ax, metric in zip(axes, ("k3", "kl", "pass1")):
            piv = d.pivot(index="key", columns="block_rank", values=metric).to_numpy()
            plotting.band(ax, np.arange(piv.shape[1]), piv, label=name, color=color,
                          ls="--" if acts else "-", marker="o", ms=3)
    for ax, title, ylabel in (
            (axes[0], "k3 = E[rho - log rho - 1] on sampled tokens", "k3 per token"),
            (axes[1], "exact KL(pi_rollout || pi_train) per token", "nats per token"),
            (axes[2], "held-out pass@1 of the quantised engine", "pass@1")):
        ax.set_xticks(np.arange(len(labels)), labels)
        ax.set(xlabel="weight block (b x b; whole = per-tensor)", ylabel=ylabel, title=title)
    for ax in axes[:2]:
        ax.set_yscale("log")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- (b) training
def rl_config(quick: bool) -> sequence.SequenceRLConfig:
    """``tiny_grpo``'s GRPO settings with per-step mismatch tracking (quick: shorter)."""
    cfg = dataclasses.replace(grpo_config(quick), track_mismatch=True, correction_cap=2.0)
    if quick:  # a pipeline check: too short for GRPO's held-out gain (it dips first)
        return dataclasses.replace(cfg, steps=12, num_prompts=8, eval_every=12,
                                   eval_problems=32, eval_samples=4)
    # B=8 prompts (not tiny_grpo's 16): four treatments x 100 steps fit the 4-minute budget
    return dataclasses.replace(cfg, steps=100, num_prompts=8, eval_every=25, eval_problems=128,
                               eval_samples=8)


def treatments(include_e4m3: bool = False) -> dict:
    """name -> (QuantConfig or None for float32 rollouts, rollout_correction).

    ``include_e4m3`` adds E4M3 W8A8 rollouts without correction (left out of the experiment
    runs for time: its per-token mismatch is ~30x below E2M1's, see :func:`mismatch_table`).
    """
    coarse = quant.QuantConfig(COARSE)
    out = {"fp32": (None, "none"), COARSE: (coarse, "none"), f"{COARSE}+TIS": (coarse, "tis"),
           f"{COARSE}+MIS": (coarse, "mis")}
    if include_e4m3:
        out["e4m3"] = (quant.QuantConfig("e4m3"), "none")
    return out


def train_treatments(key, num_seeds: int, *, quick: bool = True, config=None, chosen=None,
                     base_policy=None) -> pd.DataFrame:
    """GRPO from the SFT base with each rollout treatment (same key: paired seeds).

    Long form: treatment, seed, step, metric, value. Per-step metrics from the trainer (step t
    = the t-th batch: ``pass1`` of the rollout engine's samples, ``mismatch_k1/k3/chi2``,
    ``kept_frac``, ...) and held-out evaluations of the float32 policy as ``heldout_pass1``
    (step = updates done).
    """
    config = rl_config(quick) if config is None else config
    chosen = treatments() if chosen is None else chosen
    base_policy = (sft.load_or_train(config.base, verbose=False) if base_policy is None
                   else base_policy)
    frames = []
    built: dict = {}
    for name, (qcfg, correction) in chosen.items():
        cfg = dataclasses.replace(config, rollout_correction=correction)
        rollout_fn = None if qcfg is None else quant.make_rollout_fn(qcfg)
        trainer = sequence.Trainer(cfg, base_policy=base_policy, rollout_fn=rollout_fn)
        _share_compiled(trainer, qcfg, built)
        run = sequence.run(cfg, key, num_seeds, trainer=trainer)
        ev = run.eval_frame()
        ev = ev[ev.k == 1].drop(columns="k").rename(columns={"pass_at_k": "value"})
        frames += [run.frame().assign(treatment=name),
                   ev.assign(metric="heldout_pass1", treatment=name)]
    cols = ["treatment", "seed", "step", "metric", "value"]
    return pd.concat(frames, ignore_index=True)[cols]


def _share_compiled(trainer, qcfg, built: dict) -> None:
    """Reuse jitted pieces of earlier treatments' trainers where they compute the same thing.

    Compilation dominates these short runs (each ``Trainer`` jits its own rollout, update and
    evaluation). The treatments share one RL config apart from ``rollout_correction`` (an
    update-only setting), so evaluation (float32 sampling) is the same for all, and the
    rollout the same for the same quantisation; the update takes the config as a static
    argument, so one jitted update serves all (recompiling only for a new correction).
    """
    for attr, tag in (("_eval", None), ("_rollout", qcfg), ("_update", None)):
        if not hasattr(trainer, attr):  # the Trainer changed: just compile again
            continue
        donor = built.setdefault((attr, tag), getattr(trainer, attr))
        setattr(trainer, attr, donor)


def _per_seed(df, treatment, metric):
    d = df[(df.treatment == treatment) & (df.metric == metric)]
    return d.pivot(index="seed", columns="step", values="value")


def final_heldout(df: pd.DataFrame, treatment: str, last: int = 2) -> np.ndarray:
    """Per-seed held-out pass@1 averaged over the last ``last`` evaluations after step 0."""
    values = _per_seed(df, treatment, "heldout_pass1").to_numpy()
    return values[:, -min(last, values.shape[1] - 1):].mean(1)


def training_figure(df: pd.DataFrame):
    """Held-out pass@1, mismatch k3 and MIS kept fraction over steps, per treatment."""
    fig, axes = plotting.subplots(1, 3, figsize=(14, 3.8))
    for name in df.treatment.unique():
        piv = _per_seed(df, name, "heldout_pass1")
        plotting.band(axes[0], piv.columns.to_numpy(), piv.to_numpy(), label=name, marker="o",
                      ms=3)
        # 5-step running mean per seed, then the band in log10 (CI of the geometric mean)
        piv = _per_seed(df, name, "mismatch_k3")
        window = min(5, piv.shape[1])
        smooth = np.stack([np.convolve(v, np.ones(window) / window, "valid")
                           for v in piv.to_numpy()])
        steps = piv.columns.to_numpy()[window - 1:]
        plotting.band(axes[1], steps, np.log10(np.maximum(smooth, 1e-8)), label=name)
        piv = _per_seed(df, name, "kept_frac")
        plotting.band(axes[2], piv.columns.to_numpy(), piv.to_numpy(), label=name)
    axes[0].set(xlabel="RL step", ylabel="held-out pass@1 (float32 policy)",
                title="learning curves (mean, 95% CI)")
    axes[1].set(xlabel="RL step", ylabel="log10 k3 per token (floored at 1e-8)",
                title=f"train/rollout mismatch ({window}-step mean; fp32: float noise)")
    axes[2].set(xlabel="RL step", ylabel="fraction of tokens kept",
                title="tokens kept in the loss (MIS: rho in [1/C, C])")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- claims
def recovery_claims(df: pd.DataFrame, note: str = "") -> list:
    """The three training claims (``note`` is appended to each reason)."""
    ref = final_heldout(df, "fp32")
    gap_none = ref - final_heldout(df, COARSE)
    m0, h0 = plotting.mean_ci(gap_none)
    out = [claim("uncorrected_degrades",
                 f"training on {COARSE} rollouts without correction lowers held-out pass@1 "
                 "relative to float32 rollouts",
                 m0, passed=bool(m0 - h0 > 0),
                 criterion="95% t-interval of the per-seed gap (fp32 - uncorrected) of "
                           "held-out pass@1 (mean of the last two evaluations) lies above 0",
                 paper_value=PAPER_VALUE,
                 reason=f"gap {m0:+.3f} +- {h0:.3f} over {len(ref)} seeds; fp32 "
                        f"{ref.mean():.3f}{note}")]
    for tag, cid in (("TIS", "tis_recovers"), ("MIS", "mis_recovers")):
        gap = ref - final_heldout(df, f"{COARSE}+{tag}")
        m, h = plotting.mean_ci(gap)
        out.append(claim(
            cid, f"token {tag} (C=2) on {COARSE} rollouts recovers float32-rollout held-out "
                 "pass@1", m, passed=bool(m < m0 and m - h <= 0),
            criterion=f"mean gap (fp32 - {tag}) < uncorrected gap and its 95% t-interval "
                      "includes 0 or lies below it",
            paper_value=PAPER_VALUE,
            reason=f"gap {m:+.3f} +- {h:.3f} vs uncorrected {m0:+.3f} +- {h0:.3f}{note}"))
    return out


def block_claims(table: pd.DataFrame) -> list:
    """The two block-size claims (weights-only rows of ``table``)."""
    contrast = ""
    if ((table.format == "int4") & ~table.activations).any():
        rho_int, means_int = block_trend(table, "int4")
        contrast = (f"; int4 (integer grid, for contrast): Spearman {rho_int:+.2f}, k3 "
                    f"{means_int[0]:.2e} -> {means_int[-1]:.2e}")
    out = []
    for fmt, cid in (("e4m3", "mismatch_grows_with_block_e4m3"),
                     (COARSE, "mismatch_grows_with_block_coarse")):
        rho, means = block_trend(table, fmt)
        kl_rho, _ = block_trend(table, fmt, "kl")
        out.append(claim(
            cid, f"the {fmt} rollout/trainer mismatch grows with the weight block size",
            rho, passed=bool(rho >= 0.9 - 1e-9),
            criterion="Spearman correlation of block size (16, 32, 64, 128, whole) with the "
                      "mean k3 (weights-only quantisation) >= 0.9",
            paper_value="blockwise 128x128 / 1x128 scaling chosen to limit quantisation "
                        "error (finer blocks, smaller error)",
            reason="mean k3 by block " + ", ".join(
                f"{block_label(b)}: {v:.2e}" for b, v in zip(BLOCKS, means))
                   + f"; exact-KL Spearman {kl_rho:+.2f}" + contrast))
    return out


@experiment("fp8", paper=PAPER,
            claims=("uncorrected_degrades", "tis_recovers", "mis_recovers",
                    "mismatch_grows_with_block_e4m3", "mismatch_grows_with_block_coarse"),
            default_seeds=4, quick_seeds=2)
def fp8(ctx):
    """FP8/FP4 fake-quantised rollouts: mismatch vs block size; GRPO with TIS/MIS correction."""
    table = mismatch_table(ctx.key(0), settings=QUICK_SETTINGS if ctx.quick else FULL_SETTINGS,
                           num_keys=2 if ctx.quick else 3, samples=2 if ctx.quick else 4)
    ctx.save_table(table, "fp8_mismatch")
    ctx.save_figure(mismatch_figure(table), "fp8_mismatch_vs_block")
    df = train_treatments(ctx.key(1), ctx.seeds, quick=ctx.quick)
    ctx.save_table(df, "fp8_training")
    ctx.save_figure(training_figure(df), "fp8_training")
    cfg = rl_config(ctx.quick)
    note = (f" ({cfg.steps} steps, B={cfg.num_prompts} G={cfg.num_generations}, "
            f"{cfg.eval_problems} held-out problems x {cfg.eval_samples} samples"
            + ("; quick mode: a pipeline check, too short for a learning effect)" if ctx.quick
               else ")"))
    return recovery_claims(df, note) + block_claims(table)
