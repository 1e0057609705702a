"""BroRL: broadened exploration with many rollouts per prompt.

:mod:`.theory` the mass balance of one policy-gradient step on softmax logits, :mod:`.stage`
the ``"brorl_schedule"`` rollout stage (small N, then large N; registered here).
"""
from rlvr_lab.papers.brorl import stage, theory  # noqa: F401
from rlvr_lab.train import rollout

rollout.register("brorl_schedule", stage.STAGE)
