"""The estimator and loss zoo: every registered advantage estimator and policy loss, head to
head on the prompt bank at equal rollouts (issue 42; the study is ``simulations/zoo.py``).

- :mod:`~rlvr_lab.papers.zoo.gradient`: the exact expected policy gradient of any group
  estimator on a binary-reward bank (enumerating the number of correct rollouts in a group),
  and sampled single-rollout gradients for ReMax's greedy baseline.
- :mod:`~rlvr_lab.papers.zoo.arena`: one compiled training loop for every (estimator, loss,
  G) arm and seed at once (the arm is a traced index, so adding an arm adds no compilation).

Nothing is registered here: the estimators and losses live in :mod:`rlvr_lab.advantages` and
:mod:`rlvr_lab.losses`.
"""
from rlvr_lab.papers.zoo import arena, gradient

__all__ = ["arena", "gradient"]
