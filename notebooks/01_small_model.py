# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # The small-model setting: a tiny transformer, SFT, then GRPO
#
# The papers' claims are about LLMs. This notebook builds the smallest setting that still has
# tokens, variable lengths and a sampling temperature: a character-level decoder-only
# transformer (`rlvr_lab.models.transformer`, flax.nnx) trained **from scratch** on a verifiable
# task, warm-started by SFT, then trained with GRPO (`rlvr_lab.train.sequence`) using the core
# estimators and losses (`advantages.compute("grpo", ...)`, `losses.get("ppo_clip")`,
# `losses.aggregate(..., "token-mean")`).
#
# It calls the same functions as `simulations/tiny_grpo.py` (`rlvr-lab run tiny_grpo`), so the
# curves agree with `figures/tiny_grpo_curves.png`. Set `RLVR_LAB_QUICK=1` for a fast run.

# %%
import dataclasses
import os

import jax
import numpy as np
import pandas as pd

from rlvr_lab.envs import arithmetic, countdown, tasks, tokenizer
from rlvr_lab.models import transformer
from rlvr_lab.train import sequence, sft
from simulations import tiny_grpo as TG

QUICK = bool(os.environ.get("RLVR_LAB_QUICK"))
pd.set_option("display.width", 120)

# %% [markdown]
# ## 1. The tasks
#
# **Arithmetic** with a short worked format: the sum is written least-significant digit first
# (the order in which carries appear, so a causal model can produce it digit by digit), then `>`
# and the answer. **Countdown**: reach the target with the given numbers, each exactly once.
# Verifiers parse the text with their own small parser (never `eval`); malformed text scores 0.
# The multi-level reward (format 0.5 + correctness 1.5) is there for the MC-GRPO sign-flip
# studies.

# %%
rng = np.random.default_rng(0)
rows = []
for name, levels in (("arithmetic", (1, 2, 3, 4)), ("countdown", (2, 3, 4))):
    for p in tasks.generate(name, rng, 4, levels):
        rows.append(dict(task=name, level=p.difficulty, prompt=p.prompt, solution=p.solution,
                         verdict=tuple(tasks.verify(p, p.solution))))
pd.DataFrame(rows)

# %%
p = arithmetic.make_problem(47, 85)
for text in ["231>132", "000>132", "231>133", "132", "231>0132", "hello"]:
    v = tasks.verify(p, text)
    print(f"{text!r:12} correct={v.correct!s:5} format={v.format_ok!s:5} "
          f"multi-level reward={tasks.reward(v, 'multi')}")

# %% [markdown]
# ## 2. SFT warm start
#
# `sft.load_or_train` trains the base policy on reference solutions (one jitted `lax.scan`,
# deterministic) and caches it under `.rlvr_cache/` keyed by a hash of the config. It is stopped
# early on purpose: held-out pass@1 should be moderate so that RL has room. Below: samples from
# an untrained model, then from the SFT base.

# %%
base_cfg = sft.PRESETS["quick"]
heldout = sft.problems(base_cfg, "heldout")
untrained = transformer.init(jax.random.key(0), base_cfg.model_config())
print(base_cfg.model_config(), f"{base_cfg.model_config().num_params():,} parameters")
TG.samples_table(untrained, base_cfg, heldout, jax.random.key(1))

# %%
base = sft.load_or_train(base_cfg)
ev = sft.evaluate(jax.random.key(2), base, base_cfg, heldout, n_samples=4 if QUICK else 16)
levels = np.array([p.difficulty for p in heldout])
print(f"held-out pass@1 {ev.pass1:.3f}, pass@{ev.n} {ev.pass_at(ev.n):.3f}")
print({int(d): round(float(ev.counts[levels == d].mean() / ev.n), 3) for d in np.unique(levels)})
TG.samples_table(base, base_cfg, heldout, jax.random.key(3))

# %% [markdown]
# ## 3. GRPO
#
# `TG.rl_config(quick)` is the experiment's setting: 16 prompts x G=8 rollouts per step,
# PPO-clip (on-policy: one update per batch), token-mean aggregation, no KL, Adam with a short
# warm-up. All seeds run at once (`vmap` over a leading seed axis); the verifier runs on the host
# between the jitted rollout and update. Held-out problems are evaluated every `eval_every`
# steps.

# %%
config = TG.rl_config(quick=True)
seeds = 4
if QUICK:
    config = dataclasses.replace(config, steps=10, eval_every=5, eval_problems=32)
    seeds = 2
run, trainer = TG.run_study(config, jax.random.key(0), seeds)
print(f"{run.steps_done} steps x {seeds} seeds in {run.seconds:.0f} s")
fig = TG.plot(run, config)

# %%
g = TG.gains(run)
print("per-seed change of held-out pass@1:", np.round(g[:, 0], 3))
print(f"per-seed change of held-out pass@{g.shape[1]}:", np.round(g[:, -1], 3))
run.frame().groupby("metric").value.describe()[["mean", "min", "max"]]

# %%
TG.samples_table(TG.seed_policy(run, 0), base_cfg, heldout, jax.random.key(3))

# %% [markdown]
# ## 4. Reading the result
#
# The experiment's claims (`rlvr-lab run tiny_grpo`) are computed from these quantities: the
# per-seed change of held-out pass@1 (does RL beat its SFT base?) and of pass@k at the largest
# k (does RL *narrow* the set of problems the model can solve, as Yue et al. 2025 argue, or
# widen it?). See `figures/CLAIMS.md` for the numbers of the committed full run; at this scale
# and budget a null or negative result is a legitimate outcome and is reported as such.
