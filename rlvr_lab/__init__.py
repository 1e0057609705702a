"""rlvr_lab: a JAX toolkit to analyse RLVR algorithms (GRPO family and 2025 follow-ups).

An RLVR step is a pipeline of small pure functions — pick prompts, allocate rollouts, sample,
reward, advantage, loss, update — and each module holds one stage.
"""
from rlvr_lab import advantages, allocation, losses, metrics, theory  # noqa: F401
from rlvr_lab import mc_baselines  # noqa: F401  (registers the compute-matched "grpo_drop_one")

__version__ = "0.1.0"
