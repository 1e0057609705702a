"""BroRL: broadened exploration with many rollouts per prompt.

:mod:`.theory` the mass balance of one policy-gradient step on softmax logits, :mod:`.stage`
the ``"brorl_schedule"`` rollout stage (small N, then large N; registered here). The studies of
``simulations/brorl.py`` (imported when used): :mod:`.sweep` the synthetic mass-balance sweeps,
:mod:`.training` the prompt-bank study, :mod:`.small` the tiny-transformer study, :mod:`.plots`
their figures.
"""
from rlvr_lab.papers.brorl import stage, theory  # noqa: F401
from rlvr_lab.train import rollout

rollout.register("brorl_schedule", stage.STAGE)
