"""Configuration of the Dyna loop: static sizes (``DynaConfig``) and the per-arm knobs
(``Arm``), which are arrays so that arms are ``vmap``-ped instead of recompiled."""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax.numpy as jnp

from rlvr_lab._registry import check_choice, positive_int
from rlvr_lab.envs.toy_web import SiteConfig

LOSSES = ("gspo", "ppo_clip")


@dataclass(frozen=True)
class DynaConfig:
    """Static settings shared by every arm of a run.

    Per step each of the site's tasks gets ``group_size`` trajectories (one GRPO group per
    task). A dreaming arm spends real interactions only at refresh steps (every
    ``refresh_every`` steps, the first included): ``refresh_episodes`` real episodes per task
    with the current policy, logged into the world model. The real-only arm trains on
    ``group_size`` real episodes per task every step. ``expert_episodes`` logged expert
    episodes per task form the fixed expert set (collected once, counted apart from the
    training interactions).
    """

    site: SiteConfig = SiteConfig()
    group_size: int = 8
    num_steps: int = 100
    learning_rate: float = 0.1
    refresh_every: int = 10
    refresh_episodes: int = 8
    expert_episodes: int = 4
    loss: str = "gspo"

    def __post_init__(self):
        if not isinstance(self.site, SiteConfig):
            raise ValueError(f"site={self.site!r} must be a toy_web.SiteConfig")
        for name in ("num_steps", "refresh_every", "refresh_episodes", "expert_episodes"):
            positive_int(name, getattr(self, name))
        positive_int("group_size", self.group_size)
        if self.group_size < 2:
            raise ValueError(f"group_size={self.group_size} must be >= 2 (a GRPO group "
                             "compares at least two trajectories)")
        if self.refresh_episodes > self.group_size:
            raise ValueError(f"refresh_episodes={self.refresh_episodes} must be <= "
                             f"group_size={self.group_size} (refresh episodes are drawn from "
                             "the step's real batch)")
        if isinstance(self.learning_rate, bool) or not self.learning_rate > 0:
            raise ValueError(f"learning_rate={self.learning_rate!r} must be > 0")
        check_choice("loss", self.loss, LOSSES)

    @property
    def horizon(self) -> int:
        return self.site.max_steps

    def replace(self, **changes: Any) -> "DynaConfig":
        return dataclasses.replace(self, **changes)


class Arm(NamedTuple):
    """One training arm: ``dream`` 0 (real rollouts) or 1 (dreamed rollouts, world model
    refreshed from real data); ``expert_ratio`` the probability that a slot of a group is an
    expert trajectory instead of a dreamed one; ``model_noise`` the hallucination mix of
    the world model (``world_model.with_noise``)."""

    dream: jnp.ndarray
    expert_ratio: jnp.ndarray
    model_noise: jnp.ndarray


def _unit(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"{name}={value!r} is not allowed; must be a number in [0, 1]")
    return float(value)


def real_arm() -> Arm:
    """Real-only RL: GRPO/GSPO on real rollouts every step."""
    return Arm(jnp.float32(0.0), jnp.float32(0.0), jnp.float32(0.0))


def dream_arm(expert_ratio: float = 0.0, model_noise: float = 0.0) -> Arm:
    """Dreamed rollouts in the learned world model, with expert trajectories interleaved at
    ``expert_ratio`` and the world model's error raised by ``model_noise``."""
    return Arm(jnp.float32(1.0), jnp.float32(_unit("expert_ratio", expert_ratio)),
               jnp.float32(_unit("model_noise", model_noise)))


def stack_arms(arms: Iterable[Arm]) -> Arm:
    """Arms stacked on a leading axis, for ``vmap``."""
    arms = list(arms)
    if not arms:
        raise ValueError("arms must not be empty")
    return Arm(*(jnp.stack(xs) for xs in zip(*arms)))
