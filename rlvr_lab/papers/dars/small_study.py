"""The DARS small-model study (``dars_small``): arms, one SFT base's runs, per-seed numbers.

Arms on the tiny transformer, all with DARS's advantage ``r - mean`` (no std): GRPO N=8,
GRPO N=32, DARS-ET (n_max 32), DARS-HW (n_max 64) and breadth ``+B`` (:data:`BREADTH` x the
prompts per step in one full-batch update) on GRPO N=8 and on DARS-HW (:data:`DARS_B`, which
runs until its rollouts equal DARS-HW's, :func:`run_to_budget`).
:func:`run_base` trains the arms from one SFT base with one key, so the arms are paired seed
by seed; GRPO N=8 runs on until its rollouts equal the largest DARS budget of that base and
is evaluated at the equal-steps point and at each DARS arm's budget (:func:`run_evaluated`),
so every DARS arm is compared with GRPO at its **own** rollouts; likewise ``GRPO N=8 +B`` is
evaluated at DARS-HW +B's budget (the depth x breadth 2x2). :func:`small_numbers` turns one
base's runs into the per-seed numbers of the claims.
"""
from __future__ import annotations

import dataclasses
import math
import time

import numpy as np
import pandas as pd

from rlvr_lab.papers.dars.small import budget_steps, interaction, smooth, value_at_level
from rlvr_lab.train import bases, sequence

N_STAGE1 = 8
SMALL_N_MAX = {"DARS-ET": 32, "DARS-HW": 64}
BREADTH = 4          # the +B arm: BREADTH x the prompts per step, one full-batch update
DARS_B = "DARS-HW +B"   # the depth x breadth cell: DARS-HW with breadth, to DARS-HW's rollouts
# GRPO N=8 always runs (last); DARS_B runs before GRPO N=8 +B, which is read at its budget
ARMS = ("DARS-ET", "DARS-HW", "GRPO N=32", DARS_B, "GRPO N=8 +B")


def small_base(rl: sequence.SequenceRLConfig, quick: bool) -> sequence.SequenceRLConfig:
    """``rl`` (tiny_grpo's recipe) with DARS's advantage ``r - mean`` (no std) for every arm
    (quick: B=16, 12 steps, pass@k to k=8 on 64 held-out problems; full: B=32, 60 steps,
    k to 64 on 64)."""
    common = dict(advantage="grpo", scale_rewards="none", num_generations=N_STAGE1)
    if quick:
        return dataclasses.replace(rl, steps=12, num_prompts=16, eval_every=6, eval_problems=64,
                                   eval_samples=8, **common)
    return dataclasses.replace(rl, steps=60, num_prompts=32, eval_every=15, eval_problems=64,
                               eval_samples=64, **common)


def small_arm(base, name: str, steps: int | None = None):
    """The config of one arm (``steps`` overrides the base's, e.g. GRPO at DARS's budget).
    The +B arm is also evaluated at ``steps // BREADTH`` (its equal-rollouts point)."""
    changes: dict = {} if steps is None else {"steps": steps}
    depth = name.removesuffix(" +B")
    if depth == "GRPO N=32":
        changes["num_generations"] = 4 * N_STAGE1
    elif depth in SMALL_N_MAX:
        sched = depth.split("-")[1].lower()
        changes.update(rollout="dars", rollout_options=(("schedule", sched),
                                                        ("n_max", SMALL_N_MAX[depth])))
    if name.endswith(" +B"):
        changes.update(num_prompts=BREADTH * base.num_prompts, num_minibatches=1,
                       eval_every=math.gcd(base.eval_every, max(1, base.steps // BREADTH)))
    return dataclasses.replace(base, **changes)


def small_rollouts(run, config) -> np.ndarray:
    """``[steps, seeds]`` rollouts generated per step (a stage reports its spend; a uniform
    step spends ``num_prompts * num_generations``)."""
    if "rollouts" in run.history:
        return np.asarray(run.history["rollouts"], np.float64)
    steps, seeds = np.asarray(run.history["pass1"]).shape
    return np.full((steps, seeds), float(config.num_prompts * config.num_generations))


def eval_at(run, step: int) -> np.ndarray:
    """Held-out pass@k ``[seeds, K]`` at the evaluation of ``step`` (must be one)."""
    steps = list(np.asarray(run.evals["step"]))
    if step not in steps:
        raise ValueError(f"no evaluation at step {step}; evaluated at {steps}")
    return np.asarray(run.evals["pass_at"])[steps.index(step)]


def run_evaluated(trainer: sequence.Trainer, key, num_seeds: int, eval_steps) -> sequence.Run:
    """:func:`rlvr_lab.train.sequence.run` (same key schedule, so the same trajectory) that
    evaluates held-out pass@k at ``eval_steps`` (and steps 0 and ``config.steps``)."""
    start, steps = time.perf_counter(), trainer.config.steps
    at = sorted({0, steps, *(int(t) for t in eval_steps if 0 <= t <= steps)})
    state = trainer.init_state(num_seeds)
    history: dict[str, list] = {}
    evals = {"step": [0], "pass_at": [trainer.evaluate(key, state, 0)]}
    for t in range(steps):
        state, out = trainer.train_step(key, state, t)
        for k, v in out.items():
            history.setdefault(k, []).append(np.asarray(v))
        if t + 1 in at:
            evals["step"].append(t + 1)
            evals["pass_at"].append(trainer.evaluate(key, state, t + 1))
    return sequence.Run(state=state, steps_done=steps,
                        history={k: np.stack(v) for k, v in history.items()},
                        evals={"step": np.asarray(evals["step"]),
                               "pass_at": np.stack(evals["pass_at"])},
                        seconds=time.perf_counter() - start)


def stop_at_budget(spent: float, last_step: float, budget: float) -> bool:
    """Whether a run that has spent ``spent`` rollouts (the last step ``last_step`` of them)
    is closer to ``budget`` now than after one more such step: ``spent + last_step / 2 >=
    budget``."""
    return spent + last_step / 2 >= budget


def run_to_budget(trainer: sequence.Trainer, key, num_seeds: int,
                  budget: float) -> sequence.Run:
    """:func:`rlvr_lab.train.sequence.run` (same key schedule) stopped after the step whose
    total rollouts (mean over seeds) lie closest to ``budget`` (:func:`stop_at_budget`, the
    next step's spend predicted by the last one's; at most ``config.steps`` steps), evaluated
    at step 0 and there."""
    start = time.perf_counter()
    state = trainer.init_state(num_seeds)
    history: dict[str, list] = {}
    evals = {"step": [0], "pass_at": [trainer.evaluate(key, state, 0)]}
    uniform = float(trainer.config.num_prompts * trainer.config.num_generations)
    spent, t = 0.0, 0
    for t in range(trainer.config.steps):
        state, out = trainer.train_step(key, state, t)
        for k, v in out.items():
            history.setdefault(k, []).append(np.asarray(v))
        last = float(np.mean(out["rollouts"])) if "rollouts" in out else uniform
        spent += last
        if stop_at_budget(spent, last, budget):
            break
    evals["step"].append(t + 1)
    evals["pass_at"].append(trainer.evaluate(key, state, t + 1))
    return sequence.Run(state=state, steps_done=t + 1,
                        history={k: np.stack(v) for k, v in history.items()},
                        evals={"step": np.asarray(evals["step"]),
                               "pass_at": np.stack(evals["pass_at"])},
                        seconds=time.perf_counter() - start)


def run_base(base_cfg, key, base: int, num_seeds: int, arms=ARMS, base_policy=None):
    """Train ``arms`` (and GRPO N=8) from SFT base ``base`` with ``num_seeds`` seeds. GRPO
    N=8 runs ``max(S, each DARS arm's budget in GRPO steps)`` steps, evaluated every
    ``eval_every``, at ``S`` and at each budget. Returns ``(runs, configs, info)``; ``info``
    maps ``"budget <arm>"`` / ``"steps <arm>"`` (rollouts; steps of GRPO N=8 at the arm's own
    prompts per step, i.e. of ``GRPO N=8 +B`` for :data:`DARS_B`) for each DARS arm."""
    cfg0 = bases.with_base(base_cfg, base)
    rl_key = bases.base_key(key, base)
    policy = base_policy
    runs, configs, info = {}, {}, {}
    for name in [a for a in ARMS if a in arms]:
        # DARS-HW +B runs until its rollouts equal DARS-HW's (at most S steps); GRPO N=8 +B
        # is also evaluated at DARS-HW +B's budget (and runs on to it if beyond S)
        target = info.get(f"steps {DARS_B}") if name == "GRPO N=8 +B" else None
        hw_budget = info.get("budget DARS-HW") if name == DARS_B else None
        steps = (cfg0.steps // BREADTH if name == DARS_B and hw_budget is None else
                 None if target is None else max(cfg0.steps, target))
        configs[name] = small_arm(cfg0, name, steps=steps)
        trainer = sequence.Trainer(configs[name], base_policy=policy)
        policy = trainer.base_policy
        if hw_budget is not None:
            runs[name] = run_to_budget(trainer, rl_key, num_seeds, hw_budget)
        elif target is None:
            runs[name] = sequence.run(configs[name], rl_key, num_seeds, trainer=trainer)
        else:
            every, total = configs[name].eval_every, configs[name].steps
            runs[name] = run_evaluated(trainer, rl_key, num_seeds,
                                       [*range(every, total + 1, every), target])
        if name in SMALL_N_MAX or name == DARS_B:
            budget = float(small_rollouts(runs[name], configs[name]).sum(0).mean())
            info[f"budget {name}"] = budget
            info[f"steps {name}"] = budget_steps(budget, configs[name].num_prompts, N_STAGE1)
    s, every = cfg0.steps, cfg0.eval_every
    targets = [info[f"steps {n}"] for n in SMALL_N_MAX if f"steps {n}" in info]
    total = max([s, *targets])
    configs["GRPO N=8"] = small_arm(cfg0, "GRPO N=8", steps=total)
    trainer = sequence.Trainer(configs["GRPO N=8"], base_policy=policy)
    runs["GRPO N=8"] = run_evaluated(trainer, rl_key, num_seeds,
                                     [*range(every, total + 1, every), s, *targets])
    return runs, configs, info


def small_frame(runs, configs) -> pd.DataFrame:
    """Long-form held-out pass@k (method, step, seed, rollouts spent, k, pass_at_k)."""
    rows = []
    for name, run in runs.items():
        spent = np.cumsum(small_rollouts(run, configs[name]), axis=0)
        pa = np.asarray(run.evals["pass_at"])
        for e, step in enumerate(np.asarray(run.evals["step"])):
            for s in range(pa.shape[1]):
                rollouts = 0.0 if step == 0 else float(spent[step - 1, s])
                for k in (1, 2, 4, 8, 16, 32, 64):
                    if k <= pa.shape[2]:
                        rows.append(dict(method=name, step=int(step), seed=s, rollouts=rollouts,
                                         k=k, pass_at_k=float(pa[e, s, k - 1])))
    return pd.DataFrame(rows)


def entropy_window(base_cfg) -> int:
    return max(2, base_cfg.steps // 8)


def small_numbers(runs, configs, info, base_cfg) -> dict[str, np.ndarray]:
    """One base's per-seed numbers, keyed by claim id (only those whose arms ran). All
    differences are paired (same base, same seed, same key)."""
    s, early = base_cfg.steps, base_cfg.eval_every
    g8 = runs["GRPO N=8"]
    out = {"small_grpo_raises_pass1": eval_at(g8, s)[:, 0] - eval_at(g8, 0)[:, 0]}
    if "DARS-ET" in runs:
        dars_end = eval_at(runs["DARS-ET"], s)
        out["small_dars_passk_equal_budget"] = (
            dars_end[:, -1] - eval_at(g8, info["steps DARS-ET"])[:, -1])
        out["small_dars_passk_equal_steps"] = dars_end[:, -1] - eval_at(g8, s)[:, -1]
        spent = small_rollouts(runs["DARS-ET"], configs["DARS-ET"])
        last = max(1, s // 4)
        out["small_dars_no_extra_cost_at_convergence"] = (
            spent[-last:].mean(0) / (base_cfg.num_prompts * N_STAGE1))
    if "DARS-HW" in runs:
        out["small_dars_hw_passk_equal_budget"] = (
            eval_at(runs["DARS-HW"], s)[:, -1] - eval_at(g8, info["steps DARS-HW"])[:, -1])
    if "GRPO N=32" in runs:
        n32 = runs["GRPO N=32"]
        out["small_naive_n32_speeds_early"] = eval_at(n32, early)[:, 0] - eval_at(g8, early)[:, 0]
        out["small_naive_n32_early_not_final"] = eval_at(n32, s)[:, -1] - eval_at(g8, s)[:, -1]
    if {"DARS-HW", DARS_B, "GRPO N=8 +B"} <= set(runs):
        # depth x breadth at equal rollouts: DARS-HW +B at its end (its rollouts ~ DARS-HW's),
        # each DARS cell minus its GRPO cell read at the DARS cell's own measured rollouts
        db = runs[DARS_B]
        out["dars_breadth_depth_orthogonal"] = interaction(
            eval_at(db, int(np.asarray(db.evals["step"])[-1]))[:, -1],
            eval_at(runs["GRPO N=8 +B"], info[f"steps {DARS_B}"])[:, -1],
            eval_at(runs["DARS-HW"], s)[:, -1], eval_at(g8, info["steps DARS-HW"])[:, -1])
    if "GRPO N=8 +B" in runs:
        b = runs["GRPO N=8 +B"]
        out["small_breadth_raises_pass1_equal_rollouts"] = (
            eval_at(b, s // BREADTH)[:, 0] - eval_at(g8, s)[:, 0])
        w = entropy_window(base_cfg)
        curves = lambda run, m: smooth(np.asarray(run.history[m])[:s].T, w)  # noqa: E731
        p1_b, p1_8 = curves(b, "pass1"), curves(g8, "pass1")
        ent_b, ent_8 = curves(b, "entropy"), curves(g8, "entropy")
        # each seed's own level: 0.9 x the lower of its two final smoothed batch pass@1, which
        # both arms of that seed reach (the run-wide level left seeds out)
        levels = 0.9 * np.minimum(p1_b[:, -1], p1_8[:, -1])
        out["small_breadth_entropy_higher_equal_pass1"] = np.array([
            value_at_level(p1_b[i:i + 1], ent_b[i:i + 1], lv)[0]
            - value_at_level(p1_8[i:i + 1], ent_8[i:i + 1], lv)[0]
            for i, lv in enumerate(levels)])
    return out
