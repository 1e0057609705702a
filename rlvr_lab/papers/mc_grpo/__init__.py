"""MC-GRPO (arXiv:2601.22582): median-centred group baselines for small rollout budgets.

The estimator itself is core (:func:`rlvr_lab.advantages.mc_grpo`, public API); this package
holds the compute-matched baselines ``grpo_drop_one`` and ``grpo_drop_min_abs`` (the authors'
drop-the-smallest-|reward| rule), the authors' ``mc_grpo_rescaled`` (per-group (G+1)/#non-zero
rescale) (:mod:`.estimators`, registered here), the exact sign-flip analysis
(:mod:`.sign_flip`) and the small-model pieces (:mod:`.small`: a partial-credit reward and
a trainer that uses it).
"""
from rlvr_lab import advantages
from rlvr_lab.papers.mc_grpo import estimators, sign_flip  # noqa: F401

advantages.register("grpo_drop_one", estimators.grpo_drop_one)
advantages.register("grpo_drop_min_abs", estimators.grpo_drop_min_abs)
advantages.register("mc_grpo_rescaled", estimators.mc_grpo_rescaled)
