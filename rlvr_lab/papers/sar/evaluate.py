"""Measuring a next-scale model: generation quality and exposure bias, per seed.

:func:`make_probe` compiles one function that, for every seed's parameters,

1. generates ``num_samples`` pyramids scale by scale (classes balanced, fixed uniforms shared
   by every arm and checkpoint: common random numbers, so differences between arms are not
   sampling noise);
2. on a fixed batch of ``num_probe`` pyramids of the law, measures per scale
   * ``ce_tf``: the cross-entropy of the ground-truth tokens under teacher forcing;
   * ``ce_own``: the same tokens when every coarser scale is replaced by the model's own
     one-step prediction of it (drawn from its teacher-forced output, as the Stagger-Scale
     Rollout does); ``ce_own - ce_tf`` is the **train-test mismatch** of the scale;
   * ``grad_norm``: the norm of the gradient of the scale's teacher-forced loss alone (the
     scale's share of the learning signal: the per-scale difficulty of the paper).

Host-side :func:`quality` turns the generated pyramids into the exact-law metrics of
:mod:`rlvr_lab.papers.sar.metrics` (Fréchet distance, per-scale marginal TV, support rate,
pyramid consistency).

The probe runs rarely, so it is compiled with XLA's backend optimisation level 0 (about 2x
faster to compile, slower to run): compile time dominates a quick run on a CPU.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpy.typing as npt
from flax import nnx

from rlvr_lab.papers.sar import data
from rlvr_lab.papers.sar import metrics
from rlvr_lab.papers.sar import model
from rlvr_lab.papers.sar import train
from rlvr_lab.utils import FAST_COMPILE


class Probe(NamedTuple):
    samples: jax.Array       # [S, N, T] generated flat pyramids
    classes: jax.Array       # [N] their classes
    ce_tf: jax.Array         # [S, scales]
    ce_own: jax.Array        # [S, scales]
    grad_norm: jax.Array     # [S, scales]


def make_probe(graphdef: nnx.GraphDef, law_cfg: data.LawConfig, law: data.Law, key: jax.Array,
               num_samples: int, num_probe: int, temperature: float = 1.0,
               fast_compile: bool = True) -> Callable[[nnx.State], Probe]:
    """Jitted ``probe(params [S]) -> Probe`` with every random number fixed by ``key``."""
    k_gen, k_law, k_own = jax.random.split(key, 3)
    gen_classes = jnp.arange(num_samples, dtype=jnp.int32) % law_cfg.num_classes
    probe_classes, probe_flat = data.sample(k_law, law, num_probe)
    u_own = jax.random.uniform(k_own, (num_probe, law_cfg.seq_len, law_cfg.levels))
    scales = law_cfg.scales
    S = len(scales)

    def scale_loss(params, w):
        ce = train.token_ce(model.forward(graphdef, params, probe_classes, probe_flat), probe_flat)
        return (train.per_scale_mean(ce, scales).mean(0) * w).sum()

    def one(params):
        samples = model.sample(k_gen, graphdef, params, gen_classes, law_cfg, temperature)
        logits_tf = model.forward(graphdef, params, probe_classes, probe_flat)
        ce_tf = train.per_scale_mean(train.token_ce(logits_tf, probe_flat), scales).mean(0)
        own = model.gumbel_argmax(u_own, logits_tf, temperature)
        logits_own = model.forward(graphdef, params, probe_classes, own)
        ce_own = train.per_scale_mean(train.token_ce(logits_own, probe_flat), scales).mean(0)
        grads = jax.vmap(jax.grad(scale_loss), in_axes=(None, 0))(params, jnp.eye(S))
        sq = sum(jnp.sum(g.reshape(S, -1) ** 2, -1) for g in jax.tree.leaves(grads))
        return samples, ce_tf, ce_own, jnp.sqrt(sq)

    fn = jax.vmap(one)

    def probe(params):
        samples, ce_tf, ce_own, gn = fn(params)
        return Probe(samples, gen_classes, ce_tf, ce_own, gn)

    return jax.jit(probe, compiler_options=FAST_COMPILE if fast_compile else None)


class LawStats(NamedTuple):
    """Exact quantities of the law the metrics compare with."""

    mu: np.ndarray
    cov: np.ndarray
    marginals: list
    optimal_ce: np.ndarray


def law_stats(law: data.Law, law_cfg: data.LawConfig) -> LawStats:
    mu, cov = metrics.law_feature_moments(law, law_cfg.levels)
    return LawStats(mu, cov, data.scale_marginals(law, law_cfg),
                    data.optimal_scale_loss(law, law_cfg))


def quality(samples: npt.ArrayLike, classes: npt.ArrayLike, law: data.Law, law_cfg: data.LawConfig,
            stats: LawStats) -> dict:
    """Exact-law metrics of one seed's generated flat pyramids ``[N, T]``."""
    flat = np.asarray(samples)
    images = flat[:, -law_cfg.length:]
    tv = metrics.marginal_tv(flat, stats.marginals, law_cfg)
    out = {"fd": metrics.fd_to_law(images, stats.mu, stats.cov, law_cfg.levels),
           "support": metrics.support_rate(classes, images, law),
           "consistent": float(np.mean(data.consistent(flat, law_cfg.scales)))}
    out.update({f"tv_{k}": float(v) for k, v in enumerate(tv)})
    return out
