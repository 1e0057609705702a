"""CurES: a curriculum from gradient optimisation — which prompts, and how many rollouts each.

:mod:`.posterior` the Beta posterior per prompt and the prompt samplers, :mod:`.allocation`
Neyman allocation, :mod:`.theory` gradient moments and convergence on the bank,
:mod:`.stage` the ``"cures"`` rollout stage (registered here); imported on demand:
:mod:`.study` the bank analyses and the equal-budget study, :mod:`.small` CurES and E3 on the
tiny transformer (one driver for all arms).
"""
from rlvr_lab.papers.cures import allocation, posterior, stage, theory  # noqa: F401
from rlvr_lab.train import rollout

rollout.register("cures", stage.STAGE)
