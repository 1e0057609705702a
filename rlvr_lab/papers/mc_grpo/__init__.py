"""MC-GRPO: median-centred group baselines for small rollout budgets.

The estimator itself is core (:func:`rlvr_lab.advantages.mc_grpo`, public API); this package
holds the compute-matched baseline ``grpo_drop_one`` (:mod:`.estimators`, registered here) and
the exact sign-flip analysis (:mod:`.sign_flip`).
"""
from rlvr_lab import advantages
from rlvr_lab.papers.mc_grpo import estimators, sign_flip  # noqa: F401

advantages.register("grpo_drop_one", estimators.grpo_drop_one)
