"""DynaWeb (arXiv:2601.22149): RL of an agent inside a learned world model of the (toy) web,
with expert trajectories interleaved among the dreamed rollouts.

``world_model``: tabular counts model, hallucination noise, exact one-step / k-step errors and
exact success probabilities; ``dyna``: the Dyna loop (``make_train(config) -> train(key,
arm)``, ``make_run_arms`` for seeds x arms); ``config``: ``DynaConfig`` and the arms. The
environment is ``rlvr_lab.envs.toy_web``.
"""
from rlvr_lab.papers.dynaweb import world_model  # noqa: F401
from rlvr_lab.papers.dynaweb.config import (Arm, DynaConfig, dream_arm, real_arm,  # noqa: F401
                                            stack_arms)
from rlvr_lab.papers.dynaweb.dyna import (Metrics, Summary, Trajectory,  # noqa: F401
                                          collect_expert, expert_logits, make_run_arms,
                                          make_train, policy_loss, rollout)

__all__ = ["Arm", "DynaConfig", "Metrics", "Summary", "Trajectory", "collect_expert",
           "dream_arm", "expert_logits", "make_run_arms", "make_train", "policy_loss", "real_arm",
           "rollout", "stack_arms", "world_model"]
