"""DARS / DARS-B (arXiv:2508.13755): difficulty-adaptive rollout sampling (depth) and large
batches (breadth).

:mod:`.theory` the cumulative advantage of a GRPO group (the depth bias), :mod:`.allocation`
the ET/HW schedules of extra rollouts, :mod:`.stage` the two-stage rollout stage ``"dars"``
(registered here; breadth is the trainer's ``batch_size``), :mod:`.small` budget matching and
equal-progress readings for the small-model study.
"""
from rlvr_lab.papers.dars import allocation, small, stage, theory  # noqa: F401
from rlvr_lab.train import rollout

rollout.register("dars", stage.STAGE)
