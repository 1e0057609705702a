"""FP8 (and FP4) rollouts on the tiny transformer: the computations of the ``fp8`` experiment.

(a) :func:`mismatch_table` -- the exact per-token KL(pi_rollout || pi_train) and
    chi^2(pi_train || pi_rollout) over the vocabulary (:mod:`rlvr_lab.papers.fp8.mismatch`)
    of fake-quantised engines (:mod:`rlvr_lab.papers.fp8.quant`) against the float32 policy,
    on the same prefixes for every setting, vs weight block (b x b) and activation block
    (1 x b), with and without injected outlier channels (an exact reparametrisation of the
    same float32 function, :func:`~rlvr_lab.papers.fp8.quant.inject_outliers`).
(b) :func:`train_treatments` -- GRPO from an SFT base with each rollout treatment
    (:func:`treatments`), all from one key: seed ``s`` sees the same prompts, sampling noise
    and evaluation draws in every arm (paired seeds).
"""
from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from rlvr_lab import plotting
from rlvr_lab.models import transformer
from rlvr_lab.papers.fp8 import mismatch, quant
from rlvr_lab.train import bases, sequence, sft
from rlvr_lab.utils import jit_cpu_options
from rlvr_lab import random_streams as streams

COARSE = "e2m1"
MARGIN = 0.05            # non-inferiority margin, absolute held-out pass@1
WEIGHT_BLOCKS = (4, 8, 16, 32, 64, None)   # b x b; None: the whole tensor (per-tensor scale)
ACT_BLOCKS = (4, 8, 16, 32, 64)            # 1 x b; 64 = the whole width (veRL's 1x128 here)
OUTLIER = 2.0 ** 8       # outlier magnitude (a power of two: the reparametrisation is exact)
OUTLIER_CHANNELS = 2     # outlier channels per placement, of d_model = 64


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


# per SFT base: the block claims take one rank correlation per (base, outlier placement),
# with the interval over base means, so every base adds its own placements
QUICK_TABLE = TableConfig(placements=2)
FULL_TABLE = TableConfig(weight_formats=("e4m3", COARSE, "int4"), act_formats=("e4m3", COARSE),
                         magnitudes=(1.0, 2.0 ** 4, OUTLIER, 2.0 ** 12), placements=3,
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
        tokens, mask = _prefixes(streams.stream(key, "prefixes"), policy, prompts, valid,
                                 max_new_tokens=base.max_new_tokens)
    else:
        prompts, valid, tokens, mask = prefixes
    rows = []
    hooks = {fmt: tuple(quant.QuantConfig("none", act_format=fmt, act_block=b).act_quant()
                        for b in ACT_BLOCKS) for fmt in table.act_formats}
    for magnitude in table.magnitudes:
        for placement in range(table.placements if magnitude > 1 else 1):
            channels = outlier_channels(streams.stream(key, "outlier-placement", placement),
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
    from scipy import stats
    if np.ptp(np.asarray(x, float)) == 0 or np.ptp(np.asarray(y, float)) == 0:
        return 0.0
    return float(stats.spearmanr(x, y).statistic)


def block_trend(table: pd.DataFrame, kind: str, fmt: str, magnitude: float = OUTLIER,
                metric: str = "kl"):
    """``(spearman, means)``: rank correlation of block size with the mean ``metric`` over
    placements, for one kind (weights / activations), format and outlier magnitude."""
    d = table[(table.kind == kind) & (table.format == fmt) & (table.magnitude == magnitude)]
    means = d.groupby("block_rank")[metric].mean()
    return spearman(means.index, means.to_numpy()), means.to_numpy()


def placement_trends(table: pd.DataFrame, kind: str, fmt: str, magnitude: float = OUTLIER,
                     metric: str = "kl") -> tuple[np.ndarray, np.ndarray]:
    """``(rho, base)``: for each outlier placement (and SFT base, when the table has a ``base``
    column), the rank correlation of block size with ``metric``; the placement is the random
    draw, so these are the per-seed values of the block-size claims."""
    d = table[(table.kind == kind) & (table.format == fmt) & (table.magnitude == magnitude)]
    if "base" not in d:
        d = d.assign(base=0)
    rho, base = [], []
    for (b, _), g in d.groupby(["base", "placement"], sort=True):
        g = g.sort_values("block_rank")
        rho.append(spearman(g.block_rank.to_numpy(), g[metric].to_numpy()))
        base.append(b)
    return np.asarray(rho, dtype=float), np.asarray(base)


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
                piv = dd[dd.magnitude == mag].pivot(index=[c for c in ("base", "placement")
                                                           if c in dd], columns="block_rank",
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


def treatments() -> dict:
    """name -> (QuantConfig or None for float32 rollouts, rollout_correction).

    E4M3 runs uncorrected only: its mismatch at this scale is small (k3 ~1e-3 per token, see
    the table), and every further arm costs quick mode two XLA compilations' worth of time.
    """
    fp8 = quant.QuantConfig("e4m3")      # W8A8, 128x128 / 1x128 blocks
    fp4 = quant.QuantConfig(COARSE)      # W4A4, same blocks
    return {"fp32": (None, "none"), "e4m3": (fp8, "none"), COARSE: (fp4, "none"),
            f"{COARSE}+TIS": (fp4, "tis"), f"{COARSE}+MIS": (fp4, "mis")}


def train_treatments(key, num_seeds: int, config: sequence.SequenceRLConfig, *, chosen=None,
                     base_policy=None, trainers: dict | None = None,
                     built: dict | None = None) -> pd.DataFrame:
    """GRPO from ``config``'s SFT base with each rollout treatment (same key: paired seeds).

    Long form: treatment, seed, step, metric, value. Per-step metrics from the trainer (step t
    = the t-th batch: ``pass1`` of the rollout engine's samples, ``mismatch_k1/k3/chi2``,
    ``kept_frac``, ...) and held-out evaluations of the float32 policy as ``heldout_pass1``
    (step = updates done). ``trainers``: a dict that receives each treatment's Trainer.
    ``built``: the compiled pieces to share (:func:`share_compiled`), e.g. one dict for the
    runs of several SFT bases of one preset (the data enter the compiled functions as
    arguments, so a base's own prompts and policy are used).
    """
    chosen = treatments() if chosen is None else chosen
    base_policy = (sft.load_or_train(config.base, verbose=False) if base_policy is None
                   else base_policy)
    built = {} if built is None else built
    frames = []
    for name, (qcfg, correction) in chosen.items():
        trainer = _treatment_trainer(config, qcfg, correction, base_policy, built)
        if trainers is not None:
            trainers[name] = trainer
        run = sequence.run(trainer.config, key, num_seeds, trainer=trainer)
        frames.append(_treatment_frame(name, run))
    return pd.concat(frames, ignore_index=True)[_COLUMNS]


def train_treatments_bases(key, base_ids, num_seeds: int, config: sequence.SequenceRLConfig,
                           *, chosen=None, trainers: list | None = None,
                           built: dict | None = None) -> list[pd.DataFrame]:
    """:func:`train_treatments` from each SFT base in ``base_ids``
    (:func:`rlvr_lab.train.bases.with_base`, keys :func:`~rlvr_lab.train.bases.base_key`):
    one frame per base, as ``train_treatments(base_key(key, b), num_seeds, with_base(config,
    b))`` gives it, bit for bit with two or more seeds per base. Each treatment runs every
    base's seeds as one run (:func:`rlvr_lab.train.bases.run_trainers`). ``trainers``: a list
    that receives each base's ``{treatment: Trainer}``."""
    chosen = treatments() if chosen is None else chosen
    built = {} if built is None else built
    configs = [bases.with_base(config, b) for b in base_ids]
    policies = [sft.load_or_train(c.base, verbose=False) for c in configs]
    per_base: list[dict] = [{} for _ in configs]
    frames: list[list] = [[] for _ in configs]
    for name, (qcfg, correction) in chosen.items():
        built_now = [_treatment_trainer(c, qcfg, correction, p, built)
                     for c, p in zip(configs, policies)]
        for mine, tr in zip(per_base, built_now):
            mine[name] = tr
        for frame, run in zip(frames, bases.run_trainers(built_now, key, base_ids, num_seeds)):
            frame.append(_treatment_frame(name, run))
    if trainers is not None:
        trainers.extend(per_base)
    return [pd.concat(f, ignore_index=True)[_COLUMNS] for f in frames]


_COLUMNS = ["treatment", "seed", "step", "metric", "value"]


def _treatment_trainer(config, qcfg, correction: str, base_policy, built: dict):
    """The trainer of one treatment: ``correction`` applied, rollouts through ``qcfg``'s
    fake-quantised engine (None: float32), compiled pieces shared through ``built``."""
    cfg = dataclasses.replace(config, rollout_correction=correction)
    rollout_fn = None if qcfg is None else quant.make_rollout_fn(qcfg)
    trainer = sequence.Trainer(cfg, base_policy=base_policy, rollout_fn=rollout_fn)
    share_compiled(trainer, qcfg, built)
    return trainer


def _treatment_frame(name: str, run: sequence.Run) -> pd.DataFrame:
    """A treatment's per-step metrics and held-out pass@1 (``heldout_pass1``), long form."""
    ev = run.eval_frame()
    ev = ev[ev.k == 1].drop(columns="k").rename(columns={"pass_at_k": "value"})
    return pd.concat([run.frame().assign(treatment=name),
                      ev.assign(metric="heldout_pass1", treatment=name)], ignore_index=True)


def share_compiled(trainer, qcfg, built: dict) -> None:
    """Reuse jitted pieces of earlier treatments' trainers where they compute the same thing.

    Compilation dominates these short runs (each ``Trainer`` jits its own rollout and
    evaluation; the update is :func:`sequence.mapped_update`, shared by every trainer, which
    recompiles only for a new ``rollout_correction``). The treatments share one RL config
    apart from that update-only setting, so evaluation (float32 sampling) is the same for all,
    and the rollout the same for the same quantisation.
    """
    for attr, tag in (("_eval", None), ("_eval_each", None), ("_rollout", qcfg)):
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



def seed_numbers(df: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per-seed final held-out pass@1 differences of one base's run (seed order):
    ``gain`` (fp32 - SFT base), ``gap_<fmt>`` (fp32 - uncorrected) and ``<tag>_minus_fp32``
    (corrected - fp32) for every treatment present."""
    ref = final_heldout(df, "fp32")
    out = {"gain": ref - base_heldout(df)}
    for name in df.treatment.unique():
        if name == "fp32":
            continue
        if "+" in name:
            out[f"{name.split('+')[1].lower()}_minus_fp32"] = final_heldout(df, name) - ref
        else:
            out[f"gap_{name}"] = ref - final_heldout(df, name)
    return out
