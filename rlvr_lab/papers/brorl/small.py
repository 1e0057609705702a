"""BroRL on the tiny transformer: the mass balance on the model's own token distribution, and
continuing a plateaued GRPO run with few or many rollouts per prompt.

**The decision token.** On the carry task the error a plateaued policy still makes is the
carry: in the worked answer ``reversed(R)>R`` the second token is the tens digit, which is
right only if the carry out of the units column is added. :func:`decision_logits` teacher-forces
the reference's first token and returns the policy's logits ``[V]`` over the whole vocabulary
at that position, with the reference token as the correct set C (problems whose answer has at
least two digits). Those real distributions replace the synthetic Gaussian/Zipf logits of the
bank study in :func:`mass_balance_sweep`: for N rollouts of that token (multiplicities drawn
from the model's own probabilities) the three terms of the sampled policy gradient and of the
paper's idealised update (:mod:`.theory`), and the **exact** change of the correct mass over
the full vocabulary after the step.

**Continuing a checkpoint.** :func:`continue_from` gives a trainer whose start and reference
policy is a trained checkpoint (one policy for every seed), reusing the compiled functions of
the trainer that produced it.
"""
from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from rlvr_lab.envs import tasks
from rlvr_lab.models import transformer
from rlvr_lab.papers.brorl import theory as mb
from rlvr_lab.train import sft

if TYPE_CHECKING:
    from rlvr_lab.train import sequence

def decision_logits(policy: transformer.Policy, problems: Iterable[tasks.Problem],
                    config: sft.SFTConfig) -> tuple[np.ndarray, np.ndarray]:
    """``(logits [P, V] float64, correct [P, V] bool)`` at the tens-digit position of each
    problem's reference completion (first reference token teacher-forced). Problems whose
    answer has one digit (no tens digit) are skipped; ``P`` counts the others."""
    keep = [p for p in problems if p.target >= 10]
    if not keep:
        raise ValueError("no problem with a two-digit answer: there is no tens-digit decision")
    enc = sft.encode(config, keep)
    logits = transformer.completion_logits(policy, jnp.asarray(enc.prompts),
                                           jnp.asarray(enc.prompt_valid),
                                           jnp.asarray(enc.solutions))[:, 1]
    ref = np.asarray(enc.solutions)[:, 1]
    correct = np.arange(logits.shape[-1])[None, :] == ref[:, None]
    return np.asarray(logits, np.float64), correct


def mass_balance_sweep(key: jax.Array, logits: ArrayLike, correct: ArrayLike,
                       n_values: Iterable[int], *, trials: int = 32,
                       lr: float = 0.01) -> dict[str, np.ndarray]:
    """Per (prompt, trial, N): the three mass-balance terms, their sum and the exact change of
    the correct mass, for the sampled policy gradient (``"pg_*"``) and the paper's idealised
    update on the distinct sampled set (``"ideal_*"``); arrays ``[P, trials, len(n_values)]``.

    The ``max(n_values)`` draws of a trial are made once and N takes their prefix (common
    random numbers across N). float64 (enables x64 locally).
    """
    n_values = tuple(int(n) for n in n_values)
    if not n_values or min(n_values) < 1:
        raise ValueError(f"n_values={n_values!r} must be integers >= 1")
    if trials < 1:
        raise ValueError(f"trials={trials!r} must be >= 1")
    n_max = max(n_values)
    with jax.enable_x64(True):
        z = jnp.asarray(logits, jnp.float64)
        c = jnp.asarray(correct, bool)

        def one(k, zi, ci, n):
            counts = mb.sample_counts(k, zi, n_max, n)
            pg = mb.sampled_pg_mass_balance(zi, ci, counts, lr=lr)
            ideal = mb.mass_balance(zi, ci, counts > 0, lr=lr, n=n)
            return ({f"pg_{t}": v for t, v in pg.items()}
                    | {f"ideal_{t}": v for t, v in ideal.items()})

        over_n = jax.vmap(one, in_axes=(None, None, None, 0))
        over_trials = jax.vmap(over_n, in_axes=(0, None, None, None))
        over_prompts = jax.vmap(over_trials, in_axes=(0, 0, 0, None))
        keys = jax.random.split(key, z.shape[0] * trials).reshape(z.shape[0], trials)
        out = jax.jit(over_prompts)(keys, z, c, jnp.asarray(n_values))
        return {k: np.asarray(v) for k, v in out.items()}


def continue_from(trainer: sequence.Trainer, policy: transformer.Policy) -> sequence.Trainer:
    """``trainer`` with ``policy`` as its start and KL reference (one policy for every seed).

    A shallow copy: the compiled rollout, update and evaluation take the policy as an argument,
    so they are reused; run it with the same config (``sequence.run(..., stop_after=k)`` for a
    shorter run keeps the update's static config, hence its compilation)."""
    out = copy.copy(trainer)
    out.base_policy = policy
    return out


def seed_slice(tree: Any, seed: int = 0) -> Any:
    """One seed's entry of a seed-stacked pytree (e.g. ``Run.state.policy``)."""
    return jax.tree.map(lambda x: x[seed], tree)
