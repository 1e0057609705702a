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

**One SFT base** (:func:`run_base`): phase 1 (GRPO at N=8 from the base, several seeds) to a
plateau; the base's own checkpoint (its phase-1 seed 0) is continued with N=8 and N=64 on
paired seeds (same key); the steady-state seconds per step of both arms; the mass balance on
the checkpoint's tens-digit decisions. :func:`seed_numbers` gives the per-seed numbers behind
the ``brorl_small`` claims.
"""
from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Iterable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from jax.typing import ArrayLike

from rlvr_lab.envs import tasks
from rlvr_lab.models import transformer
from rlvr_lab.papers.brorl import theory
from rlvr_lab.train import bases, sequence, sft

N_SMALL_LM, N_LARGE_LM = 8, 64   # rollouts per prompt of the two phase-2 arms
SMALL_N_VALUES = (1, 2, 4, 8, 16, 32, 64, 256, 1024)   # N of the mass-balance sweep


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
            counts = theory.sample_counts(k, zi, n_max, n)
            pg = theory.sampled_pg_mass_balance(zi, ci, counts, lr=lr)
            ideal = theory.mass_balance(zi, ci, counts > 0, lr=lr, n=n)
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


def step_seconds(trainer: sequence.Trainer, key: jax.Array, num_seeds: int,
                 steps: int = 2) -> float:
    """Steady-state wall seconds per training step of an already compiled ``trainer``."""
    state = trainer.init_state(num_seeds)
    start = time.perf_counter()
    for i in range(steps):
        state, _ = trainer.train_step(key, state, i)
    jax.block_until_ready(jax.tree.leaves(state.policy))
    return (time.perf_counter() - start) / steps


def run_base(phase1: sequence.SequenceRLConfig, base: int, keys: dict[str, jax.Array],
             num_seeds: int, phase2_steps: int, *, mass_problems: int = 256,
             mass_trials: int = 64) -> dict:
    """BroRL from SFT base ``base`` of ``phase1``'s preset (:func:`rlvr_lab.train.bases.with_base`).

    Phase 1: ``phase1`` (N=8) for ``num_seeds`` seeds. Phase 2 starts from **this base's own**
    saturated checkpoint (its phase-1 seed 0): N=64 for ``phase2_steps`` steps and N=8 for
    ``N_LARGE_LM // N_SMALL_LM`` times as many (equal rollouts), ``num_seeds`` seeds paired by
    key. ``keys``: ``"phase1"``, ``"phase2"``, ``"timing"``, ``"mass"`` (each folded with the
    base). Returns the runs, the seconds per step of each arm and the mass-balance sweep."""
    cfg = bases.with_base(phase1, base)
    trainer = sequence.Trainer(cfg)
    p1 = sequence.run(cfg, bases.base_key(keys["phase1"], base), num_seeds, trainer=trainer)
    ckpt = seed_slice(p1.state.policy, 0)
    # N=8 continues with phase 1's compiled functions: the same config (its static fields key
    # the update's compilation), stopped after 8 x phase2_steps steps (a multiple of
    # eval_every, so N=8 is evaluated there)
    t8 = continue_from(trainer, ckpt)
    c64 = dataclasses.replace(cfg, num_generations=N_LARGE_LM, steps=phase2_steps,
                              eval_every=phase2_steps)
    t64 = sequence.Trainer(c64, base_policy=ckpt)
    k2 = bases.base_key(keys["phase2"], base)
    arms = {"N=8": sequence.run(cfg, k2, num_seeds, trainer=t8,
                                stop_after=N_LARGE_LM // N_SMALL_LM * phase2_steps),
            "N=64": sequence.run(c64, k2, num_seeds, trainer=t64)}
    kt = bases.base_key(keys["timing"], base)
    seconds = {"N=8": step_seconds(t8, kt, num_seeds), "N=64": step_seconds(t64, kt, num_seeds)}
    logits, correct = decision_logits(ckpt, trainer.pool[:mass_problems], cfg.base)
    sweep = mass_balance_sweep(bases.base_key(keys["mass"], base), logits, correct,
                               SMALL_N_VALUES, trials=mass_trials)
    return dict(base=base, phase1=p1, arms=arms, seconds=seconds, sweep=sweep, logits=logits,
                correct=correct, p1=cfg, s64=phase2_steps)


def _pass1(run: sequence.Run) -> np.ndarray:
    return np.asarray(run.evals["pass_at"])[:, :, 0]        # [evaluations, seeds]


def seed_numbers(res: dict) -> dict[str, np.ndarray]:
    """The per-seed numbers of one base's :func:`run_base` (held-out pass@1 differences):
    ``control`` phase-1 final - SFT base; ``plateau`` phase-1 last evaluation - the one
    before; ``beyond`` N=64 after phase 2 - at the checkpoint; ``equal_rollouts`` N=64 - N=8
    after the same phase-2 rollouts; ``equal_wall_time`` N=64 - N=8 read at N=64's wall time
    on this machine (interpolated between N=8's evaluations, capped at its end). One value
    per base: ``mass_p_decrease``, P(exact dQ_pos < 0) of one sampled-PG step with
    ``max(SMALL_N_VALUES)`` rollouts over the checkpoint's decisions x trials."""
    ph = _pass1(res["phase1"])
    a8, a64 = _pass1(res["arms"]["N=8"]), _pass1(res["arms"]["N=64"])
    ratio = res["seconds"]["N=64"] / res["seconds"]["N=8"]
    x = np.asarray(res["arms"]["N=8"].evals["step"], float)
    wall_steps = min(ratio * res["s64"], x[-1])
    a8_wall = np.array([np.interp(wall_steps, x, a8[:, s]) for s in range(a8.shape[1])])
    p_decrease = float((res["sweep"]["pg_exact"][:, :, -1] < 0).mean())
    return {"control": ph[-1] - ph[0], "plateau": ph[-1] - ph[-2],
            "beyond": a64[-1] - a64[0], "equal_rollouts": a64[-1] - a8[-1],
            "equal_wall_time": a64[-1] - a8_wall, "mass_p_decrease": np.array([p_decrease])}


def mass_frame(sweeps: Iterable[dict]) -> pd.DataFrame:
    """Per N: P(exact dQ < 0) and the mean terms of both updates, over every decision (of
    every checkpoint given) and trial."""
    sweeps = list(sweeps)
    cat = {k: np.concatenate([s[k] for s in sweeps], axis=0) for k in sweeps[0]}
    rows = []
    for j, n in enumerate(SMALL_N_VALUES):
        row = {"N": n}
        for update in ("pg", "ideal"):
            exact = cat[f"{update}_exact"][:, :, j]
            row[f"{update}_p_decrease"] = float((exact < 0).mean())
            for t in theory.TERMS + ("total", "exact"):
                row[f"{update}_{t}"] = float(cat[f"{update}_{t}"][:, :, j].mean())
        rows.append(row)
    return pd.DataFrame(rows)
