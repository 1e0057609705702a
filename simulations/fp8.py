"""FP8 (and FP4) rollouts with token TIS / MIS correction on the tiny transformer (FP8-RL,
arXiv:2601.18150, veRL).

The rollout engine samples from a fake-quantised copy of the policy
(:mod:`rlvr_lab.papers.fp8.quant`): blockwise absmax-scaled weights of the linear layers
(128x128 blocks) and their input activations (1x128 blocks, one token x 128 channels -- the
whole width at d_model=64), re-quantised from the float32 weights at every step -- W8A8 for
E4M3, W4A4 for the coarse FP4 format E2M1. The trainer rescores the sampled tokens in float32,
so ``rho = pi_train / pi_rollout`` differs from 1 and :mod:`rlvr_lab.train.sequence` can
correct it (``rollout_correction`` "tis" / "mis", C = 2).

Two parts:

(a) :func:`mismatch_table` -- the exact per-token KL(pi_rollout || pi_train) and
    chi^2(pi_train || pi_rollout) over the vocabulary (:mod:`rlvr_lab.papers.fp8.mismatch`;
    the expectations of the trainer's sampled k3 and chi2), on the same prefixes for every
    setting: completions of the SFT base's held-out prompts sampled once from the float32 base.
    Weights only, weight blocks b x b for b in :data:`WEIGHT_BLOCKS` (whole = per-tensor); and
    activations only, 1 x b blocks for b in :data:`ACT_BLOCKS`. Each with and without
    *injected outlier channels* (:func:`~rlvr_lab.papers.fp8.quant.inject_outliers`, an exact
    reparametrisation of the same float32 function): :data:`OUTLIER_CHANNELS` random residual
    channels per placement, their LayerNorm outputs x :data:`OUTLIER` (activation outliers) or
    the kernel rows reading them x :data:`OUTLIER` (weight outliers). Without outliers the toy
    model's weights are too uniform, and at d_model=64 too small, for the block to matter.
(b) :func:`train_treatments` -- GRPO (``tiny_grpo``'s base and settings; quick: B=16 prompts,
    10 steps) from the SFT base with float32 rollouts, E4M3 W8A8 rollouts without correction,
    and E2M1 W4A4 rollouts without correction, with token TIS and with token MIS. All arms
    share the key: seed ``s`` sees the same prompts, the same sampling noise and the same
    evaluation draws in every arm (paired seeds).

Statistics (:mod:`rlvr_lab.stats`): the positive control is the float32 arm's per-seed
held-out pass@1 gain over the SFT base (:func:`simulations.tiny_grpo.control`); when it is not
above 0 the training claims are recorded inconclusive. "Recovers" is a paired non-inferiority
test against the float32 arm with margin :data:`MARGIN` (absolute held-out pass@1), stated
before the run; "degrades" a paired 95% t-interval above 0.

Claims (criteria fixed before the run):

- ``uncorrected_degrades_e4m3`` / ``uncorrected_degrades`` (E2M1): the paired per-seed gap
  (fp32 - uncorrected) of final held-out pass@1 has a 95% t-interval above 0 (gated).
- ``tis_recovers`` / ``mis_recovers`` (E2M1): the corrected arm is
  non-inferior to the float32 arm: the paired one-sided test of (corrected - fp32) against
  ``-MARGIN`` rejects at 5% (gated).
- ``mismatch_grows_with_block_e4m3`` / ``..._coarse``: with weight outliers (weights-only
  quantisation), the Spearman correlation between weight block size (whole tensor largest) and
  the mean exact KL over placements is >= 0.9 (6 sizes: at most one adjacent swap).
- ``act_mismatch_grows_with_block``: the same for E4M3 activation blocks (1 x b) with
  activation outliers (5 sizes: >= 0.9 allows one adjacent swap).
"""
from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from rlvr_lab import plotting, stats
from rlvr_lab.experiments import claim, experiment
from rlvr_lab.models import transformer
from rlvr_lab.papers.fp8 import mismatch, quant
from rlvr_lab.train import sequence, sft
from rlvr_lab.utils import jit_cpu_options
from simulations import tiny_grpo

PAPER = "FP8"
REF = "arXiv:2601.18150"
SETTING = "small model"
COARSE = "e2m1"
MARGIN = 0.05            # non-inferiority margin, absolute held-out pass@1
WEIGHT_BLOCKS = (4, 8, 16, 32, 64, None)   # b x b; None: the whole tensor (per-tensor scale)
ACT_BLOCKS = (4, 8, 16, 32, 64)            # 1 x b; 64 = the whole width (veRL's 1x128 here)
OUTLIER = 2.0 ** 8       # outlier magnitude (a power of two: the reparametrisation is exact)
OUTLIER_CHANNELS = 2     # outlier channels per placement, of d_model = 64
PAPER_VALUE = ("FP8-RL: W8A8 blockwise E4M3 (128x128 weights / 1x128 activations) rollouts; "
               "without correction the train/rollout mismatch grows and accuracy can drop, "
               "with token TIS/MIS (C=2) learning matches BF16")


def block_label(block) -> str:
    return "whole" if block is None else str(block)


# ----------------------------------------------------------------------------- (a) mismatch
@functools.partial(jax.jit, static_argnames=("max_new_tokens",))
def _prefixes(key, policy, prompts, valid, *, max_new_tokens):
    out = transformer.sample(key, policy, prompts, valid, max_new_tokens=max_new_tokens)
    return out.tokens, out.mask


@jax.jit
def _logits(policy, prompts, valid, tokens):
    return transformer.completion_logits(policy, prompts, valid, tokens)


@functools.partial(jax.jit, static_argnames=("hooks",))
def _act_sweep(policy, train_logits, prompts, valid, tokens, mask, *, hooks):
    """Mean exact KL and chi^2 for each activation hook (one compile for the whole sweep)."""
    out = []
    for hook in hooks:
        pol = transformer.Policy(dataclasses.replace(policy.config, act_hook=hook),
                                 policy.params)
        m = mismatch.vocab_mismatch(
            transformer.completion_logits(pol, prompts, valid, tokens), train_logits, mask)
        out.append(jnp.stack([m["kl_mean"], m["chi2_mean"]]))
    return jnp.stack(out)


@jax.jit
def _weight_point(qpolicy, train_logits, prompts, valid, tokens, mask):
    m = mismatch.vocab_mismatch(_logits(qpolicy, prompts, valid, tokens), train_logits, mask)
    return jnp.stack([m["kl_mean"], m["chi2_mean"]])


# the same as quant.quantise_params, jitted: one small compile per config beats eager ops; it
# runs once per config on the weights, so the faster compile of level 0 is all that matters
_quantise_params = jit_cpu_options(quant.quantise_params, static_argnums=1)


def outlier_channels(key, d_model: int, count: int = OUTLIER_CHANNELS) -> jnp.ndarray:
    """``count`` distinct residual channels, uniformly at random (one placement)."""
    return jax.random.choice(key, d_model, (count,), replace=False)


@dataclasses.dataclass(frozen=True)
class TableConfig:
    """What :func:`mismatch_table` sweeps (validated at construction)."""

    weight_formats: tuple = ("e4m3", COARSE)
    act_formats: tuple = ("e4m3",)
    magnitudes: tuple = (1.0, OUTLIER)     # outlier factors; 1 = no outliers
    placements: int = 4
    samples: int = 2                       # completions per held-out prompt

    def __post_init__(self):
        for name in ("weight_formats", "act_formats"):
            for fmt in getattr(self, name):
                quant.get_format(fmt)
        if not self.magnitudes or any(not (float(m) >= 1.0) for m in self.magnitudes):
            raise ValueError(f"magnitudes={self.magnitudes!r} is not allowed; give factors "
                             ">= 1 (1 = no outliers)")
        for name in ("placements", "samples"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name}={v!r} is not allowed; use a positive int")


QUICK_TABLE = TableConfig()
FULL_TABLE = TableConfig(weight_formats=("e4m3", COARSE, "int4"), act_formats=("e4m3", COARSE),
                         magnitudes=(1.0, 2.0 ** 4, OUTLIER, 2.0 ** 12), placements=8,
                         samples=4)


def eval_prefixes(trainer: sequence.Trainer, key, num_seeds: int):
    """``(prompts, valid, tokens, mask)``: completions of the trainer's evaluation prompts
    sampled from its float32 base, through the trainer's own compiled evaluation sampler (the
    same shapes as in training, so nothing new is compiled); the first seed's rows."""
    policy = jax.tree.map(lambda x: jnp.broadcast_to(x, (num_seeds,) + jnp.shape(x)),
                          trainer.base_policy)
    keys = jax.random.split(key, num_seeds)
    tokens = trainer._eval(keys, policy, trainer.eval_prompts, trainer.eval_valid)[0]
    eos = tokens == transformer.EOS_ID
    mask = (jnp.cumsum(eos, axis=1) - eos) == 0   # up to and including the first EOS
    return trainer.eval_prompts, trainer.eval_valid, tokens, mask


def mismatch_table(key, table: TableConfig = QUICK_TABLE, *, policy=None,
                   base: sft.SFTConfig = sft.PRESETS["quick"], prefixes=None) -> pd.DataFrame:
    """Exact rollout/trainer mismatch of fake-quantised engines vs block size and outliers.

    Prefixes: ``table.samples`` completions of every held-out prompt of ``base`` sampled once
    from the float32 ``policy`` (default: the cached SFT base), the same for every row, or
    ``prefixes = (prompts, valid, tokens, mask)`` (e.g. :func:`eval_prefixes`). For each
    outlier magnitude ``m`` and placement (``m = 1``: one placement, no outliers):
    ``kind="weights"``: weights-only quantisation of the policy with weight outliers (kernel
    rows x m) for every format and weight block; ``kind="activations"``: activation-only
    quantisation with activation outliers (LayerNorm outputs x m) for every activation block.
    Columns: kind, format, block, block_rank (0 = smallest), magnitude, placement, kl, chi2
    (per-token means over the prefixes; the trainer is the float32 policy with the same
    outliers -- the same function).
    """
    policy = sft.load_or_train(base, verbose=False) if policy is None else policy
    if prefixes is None:
        enc = sft.encode(base, sft.problems(base, "heldout"))
        prompts = jnp.tile(jnp.asarray(enc.prompts), (table.samples, 1))
        valid = jnp.tile(jnp.asarray(enc.prompt_valid), (table.samples, 1))
        tokens, mask = _prefixes(jax.random.fold_in(key, 0), policy, prompts, valid,
                                 max_new_tokens=base.max_new_tokens)
    else:
        prompts, valid, tokens, mask = prefixes
    rows = []
    hooks = {fmt: tuple(quant.QuantConfig("none", act_format=fmt, act_block=b).act_quant()
                        for b in ACT_BLOCKS) for fmt in table.act_formats}
    for magnitude in table.magnitudes:
        for placement in range(table.placements if magnitude > 1 else 1):
            channels = outlier_channels(jax.random.fold_in(key, 1 + placement),
                                        policy.config.d_model)
            common = dict(magnitude=float(magnitude), placement=placement)
            # weight outliers: kernel rows x m (factor 1/m on the LayerNorm outputs)
            wpol = quant.inject_outliers(policy, channels, 1.0 / magnitude)
            ref = _logits(wpol, prompts, valid, tokens)
            for fmt in table.weight_formats:
                for rank, block in enumerate(WEIGHT_BLOCKS):
                    qcfg = quant.QuantConfig(fmt, weight_block=block, quantise_activations=False)
                    q = transformer.Policy(wpol.config, _quantise_params(wpol.params, qcfg))
                    kl, chi2 = np.asarray(_weight_point(q, ref, prompts, valid, tokens, mask))
                    rows.append(dict(kind="weights", format=fmt, block=block_label(block),
                                     block_rank=rank, kl=float(kl), chi2=float(chi2), **common))
            # activation outliers: LayerNorm outputs x m
            apol = quant.inject_outliers(policy, channels, float(magnitude))
            ref = _logits(apol, prompts, valid, tokens)
            for fmt in table.act_formats:
                vals = np.asarray(_act_sweep(apol, ref, prompts, valid, tokens, mask,
                                             hooks=hooks[fmt]))
                for rank, (block, (kl, chi2)) in enumerate(zip(ACT_BLOCKS, vals)):
                    rows.append(dict(kind="activations", format=fmt, block=block_label(block),
                                     block_rank=rank, kl=float(kl), chi2=float(chi2), **common))
    return pd.DataFrame(rows)


def spearman(x, y) -> float:
    """Spearman rank correlation (average ranks for ties); 0 when either side is constant."""
    from scipy import stats as st
    if np.ptp(np.asarray(x, float)) == 0 or np.ptp(np.asarray(y, float)) == 0:
        return 0.0
    return float(st.spearmanr(x, y).statistic)


def block_trend(table: pd.DataFrame, kind: str, fmt: str, magnitude: float = OUTLIER,
                metric: str = "kl"):
    """``(spearman, means)``: rank correlation of block size with the mean ``metric`` over
    placements, for one kind (weights / activations), format and outlier magnitude."""
    d = table[(table.kind == kind) & (table.format == fmt) & (table.magnitude == magnitude)]
    means = d.groupby("block_rank")[metric].mean()
    return spearman(means.index, means.to_numpy()), means.to_numpy()


def mismatch_figure(table: pd.DataFrame):
    """Exact KL vs block size: weights (weight outliers) and activations (activation
    outliers), per format and outlier magnitude (mean and 95% CI over placements)."""
    fig, axes = plotting.subplots(1, 2, figsize=(11, 3.8))
    for ax, kind, blocks in ((axes[0], "weights", WEIGHT_BLOCKS),
                             (axes[1], "activations", ACT_BLOCKS)):
        d = table[table.kind == kind]
        for i, (fmt, dd) in enumerate(d.groupby("format", sort=False)):
            mags = sorted(dd.magnitude.unique())
            for j, mag in enumerate(mags):
                piv = dd[dd.magnitude == mag].pivot(index="placement", columns="block_rank",
                                                     values="kl").to_numpy()
                label = f"{fmt}, " + ("no outliers" if mag == 1 else f"outliers x{mag:g}")
                style = dict(color=f"C{i}", marker="o", ms=3,
                             alpha=0.35 + 0.65 * (j + 1) / len(mags),
                             ls="-" if mag == OUTLIER else (":" if mag == 1 else "--"))
                if piv.shape[0] > 1:
                    plotting.band(ax, np.arange(piv.shape[1]), piv, label=label, **style)
                else:
                    ax.plot(np.arange(piv.shape[1]), piv[0], label=label, **style)
        ax.set_xticks(np.arange(len(blocks)), [block_label(b) for b in blocks])
        ax.set_yscale("log")
        shape = "b x b" if kind == "weights" else "1 x b"
        ax.set(xlabel=f"{kind[:-1]} block ({shape}; whole = per-tensor)",
               ylabel="exact KL(pi_rollout || pi_train) per token",
               title=f"{kind} only, {OUTLIER_CHANNELS} outlier channels of 64")
        ax.legend(fontsize=6)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- (b) training
def rl_config(quick: bool) -> sequence.SequenceRLConfig:
    """``tiny_grpo``'s GRPO settings (base, lr, warm-up, G, PPO-clip, two minibatches) with
    per-step mismatch tracking; quick: B=16, 10 steps; full: B=32, 40 steps."""
    cfg = dataclasses.replace(tiny_grpo.rl_config(quick), track_mismatch=True,
                              correction_cap=2.0)
    if quick:
        return dataclasses.replace(cfg, steps=10, num_prompts=16, eval_every=10,
                                   eval_problems=128, eval_samples=4)
    return dataclasses.replace(cfg, steps=40, eval_every=10, eval_problems=128, eval_samples=8)


def treatments() -> dict:
    """name -> (QuantConfig or None for float32 rollouts, rollout_correction).

    E4M3 runs uncorrected only: its mismatch at this scale is small (k3 ~1e-3 per token, see
    the table), and every further arm costs quick mode two XLA compilations' worth of time.
    """
    fp8 = quant.QuantConfig("e4m3")      # W8A8, 128x128 / 1x128 blocks
    fp4 = quant.QuantConfig(COARSE)      # W4A4, same blocks
    return {"fp32": (None, "none"), "e4m3": (fp8, "none"), COARSE: (fp4, "none"),
            f"{COARSE}+TIS": (fp4, "tis"), f"{COARSE}+MIS": (fp4, "mis")}


def train_treatments(key, num_seeds: int, *, quick: bool = True, config=None, chosen=None,
                     base_policy=None, trainers: dict | None = None) -> pd.DataFrame:
    """GRPO from the SFT base with each rollout treatment (same key: paired seeds).

    Long form: treatment, seed, step, metric, value. Per-step metrics from the trainer (step t
    = the t-th batch: ``pass1`` of the rollout engine's samples, ``mismatch_k1/k3/chi2``,
    ``kept_frac``, ...) and held-out evaluations of the float32 policy as ``heldout_pass1``
    (step = updates done). ``trainers``: a dict that receives each treatment's Trainer.
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
        if trainers is not None:
            trainers[name] = trainer
        run = sequence.run(cfg, key, num_seeds, trainer=trainer)
        ev = run.eval_frame()
        ev = ev[ev.k == 1].drop(columns="k").rename(columns={"pass_at_k": "value"})
        frames += [run.frame().assign(treatment=name),
                   ev.assign(metric="heldout_pass1", treatment=name)]
    cols = ["treatment", "seed", "step", "metric", "value"]
    return pd.concat(frames, ignore_index=True)[cols]


def _share_compiled(trainer, qcfg, built: dict) -> None:
    """Reuse jitted pieces of earlier treatments' trainers where they compute the same thing.

    Compilation dominates these short runs (each ``Trainer`` jits its own rollout and
    evaluation; the update is :func:`sequence.mapped_update`, shared by every trainer, which
    recompiles only for a new ``rollout_correction``). The treatments share one RL config
    apart from that update-only setting, so evaluation (float32 sampling) is the same for all,
    and the rollout the same for the same quantisation.
    """
    for attr, tag in (("_eval", None), ("_rollout", qcfg)):
        if not hasattr(trainer, attr):  # the Trainer changed: just compile again
            continue
        donor = built.setdefault((attr, tag), getattr(trainer, attr))
        setattr(trainer, attr, donor)


def _per_seed(df, treatment, metric):
    d = df[(df.treatment == treatment) & (df.metric == metric)]
    return d.pivot(index="seed", columns="step", values="value")


def final_heldout(df: pd.DataFrame, treatment: str) -> np.ndarray:
    """Per-seed held-out pass@1 at the last evaluation (seed order)."""
    return _per_seed(df, treatment, "heldout_pass1").to_numpy()[:, -1]


def base_heldout(df: pd.DataFrame, treatment: str = "fp32") -> np.ndarray:
    """Per-seed held-out pass@1 of the SFT base (the step-0 evaluation)."""
    return _per_seed(df, treatment, "heldout_pass1").to_numpy()[:, 0]


def training_figure(df: pd.DataFrame):
    """Held-out pass@1, mismatch k3 and MIS kept fraction over steps, per treatment."""
    fig, axes = plotting.subplots(1, 3, figsize=(14, 3.8))
    for name in df.treatment.unique():
        piv = _per_seed(df, name, "heldout_pass1")
        plotting.band(axes[0], piv.columns.to_numpy(), piv.to_numpy(), label=name, marker="o",
                      ms=3)
        # 3-step running mean per seed, then the band in log10 (CI of the geometric mean)
        piv = _per_seed(df, name, "mismatch_k3")
        window = min(3, piv.shape[1])
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
def _k3(df, name) -> float:
    return float(_per_seed(df, name, "mismatch_k3").to_numpy().mean())


def control_of(df: pd.DataFrame) -> stats.Control:
    """The positive control: the float32 arm's per-seed held-out gain over the SFT base."""
    return tiny_grpo.control(base_heldout(df), final_heldout(df, "fp32"),
                             name="float32-rollout GRPO vs SFT base")


def recovery_claims(df: pd.DataFrame, note: str = "") -> list:
    """The four training claims, gated on the float32 arm's control (``note``: the setting,
    appended to each reason)."""
    control = control_of(df)
    ref = final_heldout(df, "fp32")
    finals = {t: final_heldout(df, t) for t in df.treatment.unique()}
    summary = ", ".join(f"{t} {v.mean():.3f}" for t, v in finals.items())
    context = (f"final held-out pass@1: {summary}; base {base_heldout(df).mean():.3f}; "
               f"{control.reason}{note}")
    out = []
    for fmt, cid, label in (("e4m3", "uncorrected_degrades_e4m3", "E4M3 W8A8"),
                            (COARSE, "uncorrected_degrades", "E2M1 W4A4")):
        gap = stats.paired_difference(ref, finals[fmt])
        out.append(claim(
            cid, f"training on {label} rollouts without correction lowers held-out pass@1 "
                 "relative to float32 rollouts",
            gap.mean, gap.above(0),
            "95% t-interval of the paired per-seed gap (fp32 - uncorrected) of final "
            "held-out pass@1 lies above 0",
            paper=PAPER, paper_value=PAPER_VALUE, setting=SETTING, paper_ref=f"{REF} abstract",
            reason=f"gap {gap}; per-token k3 of the rollouts {_k3(df, fmt):.2g}; {context}"))
    for fmt, tag, cid in ((COARSE, "TIS", "tis_recovers"), (COARSE, "MIS", "mis_recovers")):
        name = f"{fmt}+{tag}"
        eq = stats.equivalence(finals[name], ref, MARGIN)
        gap_none = stats.paired_difference(finals[fmt], ref)
        out.append(claim(
            cid, f"token {tag} (C=2) on {fmt} rollouts recovers float32-rollout held-out "
                 "pass@1 (not worse by more than the margin)",
            eq.mean, eq.not_worse,
            f"paired non-inferiority test of the per-seed difference ({tag} - fp32) of final "
            f"held-out pass@1 against -{MARGIN} rejects at 5% (the lower end of the 90% "
            f"interval is above -{MARGIN})",
            paper=PAPER, paper_value=PAPER_VALUE, setting=SETTING, paper_ref=f"{REF} abstract",
            reason=f"{tag} - fp32 {eq} (90% interval); uncorrected - fp32 {gap_none}; "
                   f"k3 {_k3(df, name):.2g} vs uncorrected {_k3(df, fmt):.2g}; {context}"))
    return stats.gate(out, control)


def block_claims(table: pd.DataFrame) -> list:
    """The block-size claims (outlier rows of ``table`` at magnitude :data:`OUTLIER`)."""
    n = table[(table.magnitude == OUTLIER)].placement.nunique()
    where = (f"{OUTLIER_CHANNELS} random outlier channels of 64, x{OUTLIER:g}, mean over {n} "
             f"placements; exact KL on the same prefixes for every block")
    out = []
    specs = [("weights", "e4m3", "mismatch_grows_with_block_e4m3", WEIGHT_BLOCKS,
              "weight block (b x b)"),
             ("weights", COARSE, "mismatch_grows_with_block_coarse", WEIGHT_BLOCKS,
              "weight block (b x b)"),
             ("activations", "e4m3", "act_mismatch_grows_with_block", ACT_BLOCKS,
              "activation block (1 x b)")]
    for kind, fmt, cid, blocks, what in specs:
        rho, means = block_trend(table, kind, fmt)
        rho0, means0 = block_trend(table, kind, fmt, magnitude=1.0)
        chi_rho, _ = block_trend(table, kind, fmt, metric="chi2")
        sizes = ", ".join(block_label(b) for b in blocks)
        contrast = ""
        if kind == "weights" and "int4" in set(table.format):
            rho_int, _ = block_trend(table, kind, "int4")
            contrast = f"; int4 (uniform grid, for contrast): Spearman {rho_int:+.2f}"
        out.append(claim(
            cid, f"with outlier channels, the {fmt} rollout/trainer mismatch grows with the "
                 f"{what.split(' (')[0]} size",
            rho, bool(rho >= 0.9 - 1e-9),
            f"Spearman correlation of {what} size ({sizes}) with the mean exact per-token "
            f"KL(pi_rollout || pi_train) over outlier placements >= 0.9 ({kind} only)",
            paper=PAPER, setting=SETTING, paper_ref=REF,
            paper_value="blockwise 128x128 (weights) / 1x128 (activations) scaling to limit "
                        "quantisation error (finer blocks, smaller error)",
            reason="mean KL by block " + ", ".join(
                f"{block_label(b)}: {v:.2e}" for b, v in zip(blocks, means))
                   + f" ({where}); chi^2 Spearman {chi_rho:+.2f}; without outliers Spearman "
                     f"{rho0:+.2f}, KL {means0.min():.2e}..{means0.max():.2e}" + contrast))
    return out


@experiment("fp8", sft_bases=("quick",), paper=PAPER,
            claims=("uncorrected_degrades_e4m3", "uncorrected_degrades", "tis_recovers",
                    "mis_recovers", "mismatch_grows_with_block_e4m3",
                    "mismatch_grows_with_block_coarse", "act_mismatch_grows_with_block"),
            default_seeds=8, quick_seeds=4, setting=SETTING)
def fp8(ctx):
    """FP8/FP4 fake-quantised rollouts: mismatch vs block size with outlier channels; GRPO
    with E4M3 / E2M1 rollouts, uncorrected and with token TIS / MIS."""
    trainers: dict = {}
    df = train_treatments(ctx.key(1), ctx.seeds, quick=ctx.quick, trainers=trainers)
    ctx.save_table(df, "fp8_training")
    ctx.save_figure(training_figure(df), "fp8_training")
    spec = QUICK_TABLE if ctx.quick else FULL_TABLE
    # prefixes from the float32 arm's compiled evaluation sampler (quick: no new compile)
    prefixes = eval_prefixes(trainers["fp32"], ctx.key(0), ctx.seeds) if ctx.quick else None
    table = mismatch_table(ctx.key(0), spec, policy=trainers["fp32"].base_policy,
                           prefixes=prefixes)
    ctx.save_table(table, "fp8_mismatch")
    ctx.save_figure(mismatch_figure(table), "fp8_mismatch_vs_block")
    cfg = rl_config(ctx.quick)
    note = (f" ({ctx.seeds} paired seeds, {cfg.steps} steps, B={cfg.num_prompts} "
            f"G={cfg.num_generations}, {cfg.eval_problems} held-out problems x "
            f"{cfg.eval_samples} samples)")
    return recovery_claims(df, note) + block_claims(table)
