"""The fixed-staleness study on the tiny transformer, one SFT base at a time
(``systems_staleness_small`` in ``simulations/rollout_systems.py``).

Every arm trains from the same SFT base with the same RL key (paired seeds) at a fixed
staleness ``S`` (:mod:`rlvr_lab.papers.systems.stale`): ``S = 0`` (naive = decoupled there),
then naive and decoupled PPO at each ``S > 0``. Base ``b`` is base ``b`` of the recipe's SFT
preset (:mod:`rlvr_lab.train.bases`), with its own pool, held-out set and evaluator.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

import jax
import numpy as np
import pandas as pd

from rlvr_lab.papers.cures import small
from rlvr_lab.papers.systems.stale import StaleArm, StaleDriver
from rlvr_lab.train import bases, sequence

STALE_S = {True: (0, 4, 8), False: (0, 2, 4, 8)}   # quick / full
STEPS = {True: 12, False: 60}                      # as the CurES / E3 small-model studies
EVAL_EVERY = {True: 3, False: 10}
POOL = 128          # training prompts (revisited 2-3 times in a quick run)
EPOCHS = 2          # PPO epochs, so the clip around the proximal policy binds


def recipe(rl: sequence.SequenceRLConfig, quick: bool) -> small.DriverConfig:
    """The GRPO recipe ``rl`` with B = 16 prompts x G = 8 on a 128-prompt pool and two warm-up
    steps (the CurES / E3 small-model studies' settings), as the evaluator's config."""
    rl = dataclasses.replace(rl, num_prompts=16, warmup_steps=2, num_train_problems=POOL,
                             eval_problems=64 if quick else 128)
    return small.DriverConfig(rl, g_max=12, n_high=12, steps_per_epoch=4)


def arms(quick: bool) -> dict[str, StaleArm]:
    """``S = 0`` (naive = decoupled there), then naive and decoupled PPO at each ``S > 0``."""
    out = {"S=0": StaleArm(0, False)}
    for s in STALE_S[quick][1:]:
        out[f"S={s} naive"] = StaleArm(s, False)
        out[f"S={s} decoupled"] = StaleArm(s, True)
    return out


def run_base(config: small.DriverConfig, key: jax.Array, base: int, num_seeds: int,
             quick: bool, progress: Callable[[range], Iterable[int]] | None = None
             ) -> small.Result:
    """Every arm of :func:`arms`, ``num_seeds`` paired seeds, from SFT base ``base``."""
    cfg = dataclasses.replace(config, rl=bases.with_base(config.rl, base))
    evaluator = small.Driver(cfg)
    driver = StaleDriver(dataclasses.replace(cfg.rl, num_iterations=EPOCHS),
                         max(STALE_S[quick]), evaluator)
    return driver.run(bases.base_key(key, base), list(arms(quick).values()), num_seeds,
                      STEPS[quick], eval_every=EVAL_EVERY[quick], final_calls=2,
                      progress=progress)


def final_pass1(res: small.Result, names: list[str]) -> dict[str, np.ndarray]:
    """Held-out pass@1 per seed: ``"base"`` (the SFT base) and each arm at the end."""
    final = res.final[0].mean(axis=(-1, -2))                       # [A, S]
    out = {"base": res.base[0].mean(axis=(-1, -2))[0]}
    out.update(zip(names, final))
    return out


def frames(res: small.Result, names: list[str], base: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-step metrics and held-out pass@1 of one base, long form (arm, base, seed, step)."""
    a, s = len(names), res.history["pass1"].shape[2]
    hist = pd.concat([pd.DataFrame({"arm": names[i], "base": base, "seed": j,
                                    "step": np.arange(res.steps),
                                    **{k: v[:, i, j] for k, v in res.history.items()}})
                      for i in range(a) for j in range(s)], ignore_index=True)
    p1 = res.pass1()
    ev = pd.concat([pd.DataFrame({"arm": names[i], "base": base, "seed": j,
                                  "step": res.eval_steps, "heldout_pass1": p1[:, i, j]})
                    for i in range(a) for j in range(s)], ignore_index=True)
    return hist, ev
