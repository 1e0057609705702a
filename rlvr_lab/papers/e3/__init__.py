"""E3: rank-based rollout allocation and entropy-targeting temperature.

:mod:`.allocation` the schedules and counts, :mod:`.stage` the ``"e3"`` rollout stage
(registered here) and the temperature-rule training loop on the bank.
"""
from rlvr_lab.papers.e3 import allocation, stage  # noqa: F401
from rlvr_lab.train import rollout

rollout.register("e3", stage.STAGE)
