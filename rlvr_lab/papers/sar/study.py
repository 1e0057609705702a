"""The SAR study: teacher-forced pre-training of several bases, then every post-training arm
from each base with several seeds (seeds nested in bases, arms paired within a seed), with the
measurements the claims need.

:func:`run_bases` (and :func:`run_study`, one seed per base) returns a :class:`Study` of pandas
tables, each with ``base`` and ``seed`` columns (:func:`concat` joins batches of bases):

* ``curves``: one row per (arm, seed, step) -- Fréchet distance, support rate, pyramid
  consistency and per-scale marginal TV of ``num_samples`` generated images, at the end of
  pre-training (step 0 of every arm), after every post-training chunk, and at the start and
  the middle of pre-training (arm ``pretrain``, negative steps: the positive control);
* ``scales``: one row per (arm, seed, scale) at the end of an arm (``base`` = the pre-trained
  model) -- teacher-forced CE, CE on the model's own one-step contexts, their difference (the
  train-test mismatch), the per-scale gradient norm, and the exact optimum of the
  teacher-forced CE;
* ``timing``: wall seconds of every post-training chunk of every arm (the arms run
  interleaved, chunk by chunk, with one compiled step, so their ratio is measured in one run
  under the same load);
* ``passes``: forward passes per batch of each arm, counted as they execute;
* ``train``: per (arm, seed, step) the optimised loss and the largest gradient norm (the
  stability record).
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from rlvr_lab._registry import positive_int
from rlvr_lab.papers.sar import data
from rlvr_lab.papers.sar import evaluate
from rlvr_lab.papers.sar import model as sar_model
from rlvr_lab.papers.sar import train as sar_train


@dataclass(frozen=True)
class StudyConfig:
    """Everything static about one study. ``chunk`` steps run between two evaluations;
    ``pretrain_steps`` and ``post_steps`` must be multiples of it, and ``pretrain_steps`` an
    even multiple (the control evaluates the middle of pre-training)."""

    law: data.LawConfig = data.LawConfig()
    model: sar_model.ModelConfig = sar_model.ModelConfig()
    train: sar_train.TrainConfig = sar_train.TrainConfig(batch_size=32, pretrain_steps=3000,
                                                         post_steps=600, pretrain_lr=1e-2,
                                                         post_lr=1e-3)
    arms: tuple[str, ...] = ("tf", "sar", "sar_argmax", "student", "alternating")
    chunk: int = 100
    num_samples: int = 2048
    num_probe: int = 512
    csfl_weight: float = 1.0
    rollout_temperature: float = 1.0
    sample_temperature: float = 1.0
    extra: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    def __post_init__(self):
        positive_int("chunk", self.chunk)
        positive_int("num_samples", self.num_samples)
        positive_int("num_probe", self.num_probe)
        if self.num_samples < 2:
            raise ValueError(f"num_samples={self.num_samples} must be >= 2 (a covariance)")
        tc = self.train
        if tc.pretrain_steps % (2 * self.chunk) or tc.post_steps % self.chunk:
            raise ValueError(f"pretrain_steps={tc.pretrain_steps} must be a multiple of "
                             f"2*chunk={2 * self.chunk} and post_steps={tc.post_steps} of "
                             f"chunk={self.chunk}")
        known = sar_train.arms()
        bad = [a for a in self.arms if a not in known]
        if bad or "tf" not in self.arms or len(set(self.arms)) != len(self.arms):
            raise ValueError(f"arms={self.arms!r} must be distinct names among "
                             f"{', '.join(map(repr, known))} including 'tf'")
        for name in ("csfl_weight", "rollout_temperature", "sample_temperature"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
                raise ValueError(f"{name}={v!r} must be a number >= 0")

    def arm_specs(self) -> list[sar_train.Arm]:
        table = sar_train.arms(self.csfl_weight, self.rollout_temperature)
        return [table[a] for a in self.arms]

    def replace(self, **changes: Any) -> "StudyConfig":
        return dataclasses.replace(self, **changes)


class Study(NamedTuple):
    curves: pd.DataFrame
    scales: pd.DataFrame
    timing: pd.DataFrame
    passes: pd.DataFrame
    train: pd.DataFrame


def _quality_rows(probe: evaluate.Probe, arm: str, step: int, law, law_cfg, stats) -> list[dict]:
    samples = np.asarray(probe.samples)
    return [{"arm": arm, "seed": s, "step": step,
             **evaluate.quality(samples[s], probe.classes, law, law_cfg, stats)}
            for s in range(samples.shape[0])]


def _scale_rows(probe: evaluate.Probe, arm: str, stats) -> list[dict]:
    ce_tf, ce_own = np.asarray(probe.ce_tf), np.asarray(probe.ce_own)
    gn = np.asarray(probe.grad_norm)
    return [{"arm": arm, "seed": s, "scale": k, "ce_tf": ce_tf[s, k], "ce_own": ce_own[s, k],
             "mismatch": ce_own[s, k] - ce_tf[s, k], "grad_norm": gn[s, k],
             "optimal_ce": stats.optimal_ce[k]}
            for s in range(ce_tf.shape[0]) for k in range(ce_tf.shape[1])]


def _train_rows(info: sar_train.StepInfo, arm: str, t0: int) -> list[dict]:
    loss, gn = np.asarray(info.loss), np.asarray(info.grad_norm)            # [S, steps]
    return [{"arm": arm, "seed": s, "step": t0 + i + 1, "loss": loss[s, i],
             "grad_norm": gn[s, i]} for s in range(loss.shape[0]) for i in range(loss.shape[1])]


def run_study(key: jax.Array, num_seeds: int, config: StudyConfig,
              progress: Callable[[Iterable, str], Iterable] | None = None) -> Study:
    """One pre-trained base per seed (``num_seeds`` bases, one post-training seed each): see
    :func:`run_bases`."""
    positive_int("num_seeds", num_seeds)
    return run_bases(key, list(range(num_seeds)), 1, config, progress)


def seed_ids(base_ids: Sequence[int], seeds_per_base: int) -> np.ndarray:
    """Global seed ids of ``seeds_per_base`` post-training seeds of each base: base ``b``'s
    seed ``j`` is ``b * seeds_per_base + j`` (unique across batches of bases)."""
    return np.asarray([b * seeds_per_base + j for b in base_ids for j in range(seeds_per_base)])


def run_bases(key: jax.Array, base_ids: Sequence[int], seeds_per_base: int, config: StudyConfig,
              progress: Callable[[Iterable, str], Iterable] | None = None) -> Study:
    """Pre-train one model per base in ``base_ids`` (base ``b``: its own initialisation and
    data, from ``fold_in(key, b)`` streams, so a base is the same whichever batch it is run
    in), then post-train every arm from each base with ``seeds_per_base`` seeds (each seed its
    own batches and rollout draws, shared by the arms: paired), evaluating after every chunk.
    Every table has a ``base`` column and a ``seed`` column (:func:`seed_ids`); the rows of
    the base itself (arm ``pretrain``/``base``, step <= 0) are repeated for each of its seeds.
    ``progress(iterable, desc)`` wraps the loops (e.g. ``Context.progress``)."""
    base_ids = [int(b) for b in base_ids]
    if not base_ids or any(b < 0 for b in base_ids) or len(set(base_ids)) != len(base_ids):
        raise ValueError(f"base_ids={base_ids!r} must be distinct integers >= 0")
    positive_int("seeds_per_base", seeds_per_base)
    progress = progress or (lambda it, desc: it)
    law_cfg, tc = config.law, config.train
    law = data.enumerate_law(law_cfg)
    stats = evaluate.law_stats(law, law_cfg)
    k_init, k_data, k_probe, k_count, k_post = (
        jax.random.fold_in(key, i) for i in range(5))
    m = seeds_per_base
    seeds = seed_ids(base_ids, m)
    bases = np.repeat(base_ids, m)
    graphdef, init = sar_train.make_init(config.model, law_cfg, tc)
    state = init(jnp.stack([jax.random.fold_in(k_init, b) for b in base_ids]))
    pre_keys = jnp.stack([jax.random.fold_in(k_data, b) for b in base_ids])
    post_keys = jnp.stack([jax.random.fold_in(jax.random.fold_in(k_post, b), j)
                           for b in base_ids for j in range(m)])
    chunk = sar_train.make_chunk(graphdef, law_cfg, law, tc, config.chunk)
    probe = evaluate.make_probe(graphdef, law_cfg, law, k_probe, config.num_samples,
                                config.num_probe, config.sample_temperature)
    specs = config.arm_specs()
    tf_knobs = sar_train.knobs(sar_train.arms()["tf"], law_cfg.scales)

    def per_seed(tree):
        """A tree over bases ``[B, ...]`` -> over seeds ``[B * m, ...]``."""
        return jax.tree.map(lambda x: jnp.repeat(x, m, axis=0), tree)

    curves, scale_rows, timing, train_rows = [], [], [], []
    n_pre = tc.pretrain_steps // config.chunk
    # the untrained model: the positive control's starting point
    curves += _quality_rows(per_seed(probe(state.params)), "pretrain", -tc.pretrain_steps, law,
                            law_cfg, stats)
    for i in progress(range(n_pre), "pre-training"):
        state, info = chunk(state, pre_keys, i * config.chunk, tf_knobs, tc.pretrain_lr)
        train_rows += _train_rows(per_seed(info), "pretrain", i * config.chunk)
        if i + 1 == n_pre // 2:
            curves += _quality_rows(per_seed(probe(state.params)), "pretrain",
                                    -(tc.pretrain_steps // 2), law, law_cfg, stats)
    base_probe = per_seed(probe(state.params))
    base_rows = _quality_rows(base_probe, "base", 0, law, law_cfg, stats)
    curves += [{**r, "arm": "pretrain"} for r in base_rows]
    scale_rows += _scale_rows(base_probe, "base", stats)
    for spec in specs:
        curves += [{**r, "arm": spec.name} for r in base_rows]

    start_state = per_seed(state)
    states = {spec.name: start_state for spec in specs}
    t0 = tc.pretrain_steps
    for i in progress(range(tc.post_steps // config.chunk), "post-training arms"):
        for spec in specs:
            start = time.perf_counter()
            new, info = chunk(states[spec.name], post_keys, t0 + i * config.chunk,
                              sar_train.knobs(spec, law_cfg.scales), tc.post_lr)
            jax.block_until_ready(new)
            timing.append({"arm": spec.name, "chunk": i, "steps": config.chunk,
                           "seconds": time.perf_counter() - start})
            states[spec.name] = new
            train_rows += _train_rows(info, spec.name, t0 + i * config.chunk - tc.pretrain_steps)
            result = probe(new.params)
            step = (i + 1) * config.chunk
            curves += _quality_rows(result, spec.name, step, law, law_cfg, stats)
            if i + 1 == tc.post_steps // config.chunk:
                scale_rows += _scale_rows(result, spec.name, stats)

    one = jax.tree.map(lambda x: x[0], state.params)
    passes = sar_train.forward_passes(graphdef, one, law_cfg, law, specs, key=k_count)

    def relabel(rows):
        frame = pd.DataFrame(rows)
        idx = frame.seed.to_numpy()
        frame["seed"] = seeds[idx]
        frame.insert(1, "base", bases[idx])
        return frame

    return Study(curves=relabel(curves), scales=relabel(scale_rows),
                 timing=pd.DataFrame(timing),
                 passes=pd.DataFrame({"arm": list(passes), "forward_passes": list(
                     passes.values())}),
                 train=relabel(train_rows))


def concat(studies: Sequence[Study]) -> Study:
    """One :class:`Study` of several batches of bases (the timing of every batch, the pass
    counts of the first)."""
    if not studies:
        raise ValueError("concat() needs at least one study")
    timing = pd.concat([s.timing.assign(batch=i) for i, s in enumerate(studies)],
                       ignore_index=True)
    return Study(*(pd.concat([getattr(s, f) for s in studies], ignore_index=True)
                   for f in ("curves", "scales")), timing, studies[0].passes,
                 pd.concat([s.train for s in studies], ignore_index=True))
