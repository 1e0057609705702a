"""SAR (arXiv:2512.06421): exposure bias in next-scale (coarse-to-fine) autoregressive
generation, and Self-Autoregressive Refinement -- a Stagger-Scale Rollout (SSR) with a
Contrastive Student-Forcing Loss (CSFL) -- as post-training, on a toy whose law is known.

``data``: a 1-D image law with a finite, enumerated support (exact density, per-scale
marginals and conditionals) and its VAR/FlexVAR scale pyramid; ``model``: a small next-scale
transformer with block-causal attention (flax.nnx) and scale-by-scale sampling; ``train``:
teacher-forced pre-training and the post-training arms (teacher forcing, SAR, full student
forcing, alternating schedule) in one compiled step; ``metrics``: Fréchet distance to the
exact law moments, marginal TV, support rate; ``evaluate``: the probe (samples, per-scale
train-test mismatch and gradient norms); ``study``: the whole study as tables.

Nothing here registers into the toolkit's registries; ``simulations/sar.py`` imports it.
"""
from rlvr_lab.papers.sar import data, evaluate, metrics, model, study, train  # noqa: F401
from rlvr_lab.papers.sar.study import (  # noqa: F401
    Study, StudyConfig, concat, run_bases, run_study)

__all__ = ["Study", "StudyConfig", "concat", "data", "evaluate", "metrics", "model", "run_bases",
           "run_study", "study", "train"]
