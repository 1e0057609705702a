"""Small-model RL step speed: model FLOPs utilisation of one GRPO step, single and 8 seeds.

The step is the one every small-model study repeats: draw 8 prompts, sample 8 completions
each (prompt width 8, 32 new tokens, KV cache), verify them on the host, and one full-batch
PPO-clip update with beta = 0 (no reference pass), through :class:`rlvr_lab.train.sequence.
Trainer` exactly as the studies call it. The model is the issue's reference size (d_model 128,
4 layers, 4 heads, ~0.8M parameters; random weights: the cost of a step does not depend on
them, every completion runs to the full 32 tokens in the compiled decode loop).

Model FLOPs per step = 2 x params per generated token + 6 x params per trained token
(prompt + completion, padded; each prompt once per group where the update shares the
prompt's pass, ``share_prompt_prefix``, as in this workload), the usual accounting; MFU =
model FLOP/s over the FLOP/s of a 2048^2 float32 matmul measured in the same run.

- ``rl_step_mfu``: one seed; the line also times the same step in a fresh plain Python
  process (:func:`plain_python_seconds`: no ``GLIBC_TUNABLES``, malloc as ``import rlvr_lab``
  sets it), as a script or notebook runs it;
- ``rl_step_mfu_8_seeds``: 8 seeds in one call (``seed_map``), per-seed MFU (FLOPs of 8 steps
  over the time of the 8-seed step), the price a multi-seed study pays per seed;
- ``rl_step_mfu_bf16``: one seed with the linear layers in bfloat16 (``TransformerConfig.
  dtype``, mixed precision), MFU against a 2048^2 *bfloat16* matmul measured in the same run:
  on CPUs with AVX-512 BF16 that peak is about twice float32's, so this line says how much
  of the faster matmuls the step keeps (no goal: the studies train in float32);
- ``small_study_seed_steps``: the throughput a small-model study sees, in seed-steps per
  second: the training step of ``tiny_grpo``'s quick arm (the ``quick`` SFT preset's d_model
  64, 2-layer model, 32 prompts x 8 completions, two PPO-clip minibatches; :func:`study_config`)
  over 8 seeds in one seed-mapped call, against the same step run for one seed at a time
  (ratio: how much mapping the seeds buys). Held-out evaluations are not included;
- ``small_study_bases``: the same step as the claims engine runs a look of the full plan,
  4 SFT bases x 2 seeds: all 8 seeds in one :class:`rlvr_lab.train.bases.BatchedBases` step
  against one step per base, one base after another (the loop :func:`rlvr_lab.train.bases.
  run_bases` ran before), timed alternately in one run. Each seed runs the same per-seed
  program either way (bit for bit the same numbers), so the ratio is what one call per phase
  saves in host work: dispatches, key schedules, prompt draws, thread hand-offs.

Each line also times the step's rollout and update on their own, each with its MFU on its own
FLOPs: the decode's matmuls are a few rows each and run far below the peak, so the step's MFU
sits between the two.

Each line says whether the process ran with the command line's malloc tuning
(:data:`rlvr_lab.allocator.MALLOC_TUNABLES`, on for ``rlvr-lab bench`` unless
``RLVR_LAB_MALLOC_TUNING=0``): the update's 155 MB of temporaries are then reused instead of
mapped afresh at every call, about 25% of the step.
"""
from __future__ import annotations

import dataclasses
import os

import jax
import jax.numpy as jnp

from rlvr_lab.benchmarks import Measure, benchmark, best_time, wall_times
from rlvr_lab.benchmarks.transformer import matmul_peak
from rlvr_lab.models import transformer
from rlvr_lab.train import bases, sequence, sft
from rlvr_lab import random_streams as streams

PROMPTS, GENERATIONS, NEW_TOKENS = 8, 8, 32


def step_config(quick: bool) -> sequence.SequenceRLConfig:
    # arithmetic with 1-2 digit operands: prompt width 8; 8 solution tokens + 24 slack = 32
    base = sft.SFTConfig(difficulties=(1, 2), d_model=128, n_layers=4, n_heads=4,
                         gen_slack=NEW_TOKENS - 8, num_heldout=64, num_train=64, steps=1)
    return sequence.SequenceRLConfig(base=base, num_prompts=PROMPTS,
                                     num_generations=GENERATIONS, beta=0.0, warmup_steps=0,
                                     num_train_problems=512, eval_problems=8)


def trained_tokens(config: sequence.SequenceRLConfig) -> int:
    """Token positions one update's pass computes: every row's prompt + completion (padded),
    or, where the prompt's pass is shared by its group (:func:`sequence.prompt_group`), each
    prompt once plus every row's completion."""
    mc = config.base.model_config()
    rows = config.num_prompts * config.num_generations
    new = config.base.max_new_tokens
    if sequence.prompt_group(config, mc, config.num_generations) is None:
        return rows * mc.max_len
    return config.num_prompts * (mc.max_len - new) + rows * new


def phase_flops(config: sequence.SequenceRLConfig) -> tuple[float, float]:
    """Model FLOPs of one step's ``(rollout, update)``: 2 x params per generated token and
    6 x params per trained token (:func:`trained_tokens`)."""
    mc = config.base.model_config()
    rows = config.num_prompts * config.num_generations
    params = mc.num_params()
    return (rows * 2.0 * params * config.base.max_new_tokens,
            6.0 * params * trained_tokens(config))


def step_flops(config: sequence.SequenceRLConfig) -> float:
    return sum(phase_flops(config))


def _phase_seconds(trainer: sequence.Trainer, key: jax.Array, state: sequence.TrainState,
                   repeats: int, timer=best_time) -> tuple[float, float]:
    """Times (``timer``: best by default) of the step's two compiled phases on their own,
    ``(rollout, update)``, as :meth:`~rlvr_lab.train.sequence.Trainer.train_step` calls them;
    says where a step's time goes (the step also verifies on the host)."""
    num_seeds = jax.tree.leaves(state.opt_state)[0].shape[0]
    keys = trainer.step_keys(key, 0, num_seeds)

    def rollout():
        return jax.block_until_ready(
            trainer.sample_batch(streams.each(keys, streams.ROLLOUT), state.policy))

    idx, batch = rollout()
    rewards = jnp.asarray(trainer.verify(idx, batch.tokens)[0])

    def update():
        return jax.block_until_ready(
            trainer.update_from_batch(streams.each(keys, streams.UPDATE), state, batch, rewards))

    update()   # compiled by the step already; a first call settles the allocator
    return timer(rollout, repeats), timer(update, repeats)


def _trainer(quick: bool, dtype: str = "float32") -> sequence.Trainer:
    """The bench step's trainer (random weights of the config's model in ``dtype``)."""
    config = step_config(quick)
    mc = dataclasses.replace(config.base.model_config(), dtype=dtype)
    return sequence.Trainer(config, base_policy=transformer.init(jax.random.key(0), mc))


def plain_python_main(quick: bool, repeats: int) -> None:
    """Print the best time (seconds) of the ``rl_step_mfu`` step over ``repeats`` calls: what
    :func:`plain_python_seconds` runs in a fresh interpreter."""
    print(best_time(_stepper(_trainer(quick), 1)[1], repeats))


def plain_python_seconds(quick: bool, repeats: int) -> tuple[float, str]:
    """The same step timed in a fresh plain Python process, as a script or notebook runs it:
    no ``GLIBC_TUNABLES`` (the command line's restart), so malloc is as ``import rlvr_lab``
    leaves it. Returns ``(best seconds, that process's malloc setting)``; raises
    ``RuntimeError`` with the child's last line when it fails."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    code = ("from rlvr_lab.benchmarks import rl_step; "
            f"rl_step.plain_python_main({quick!r}, {repeats}); print(rl_step._malloc_setting())")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=900)
    lines = out.stdout.strip().splitlines()
    if out.returncode or len(lines) < 2:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the plain-Python step failed: {last}")
    return float(lines[-2]), lines[-1]


def _measure(name: str, quick: bool, num_seeds: int, goal: float | None,
             dtype: str = "float32") -> Measure:
    trainer = _trainer(quick, dtype)
    config, mc = trainer.config, trainer.base_policy.config
    key, one, holder = _stepper(trainer, num_seeds)
    # best of 10 (20): a step is ~0.2 s and this machine's speed drifts between calls
    repeats = 10 if quick else 20
    seconds = best_time(one, repeats)
    roll_s, update_s = _phase_seconds(trainer, key, holder["state"], 5 if quick else 10)
    peak = matmul_peak(2048, 3, dtype)
    flops = num_seeds * step_flops(config)
    mfu = flops / seconds / peak
    roll_mfu, update_mfu = (num_seeds * f / s / peak
                            for f, s in zip(phase_flops(config), (roll_s, update_s)))
    per = f"{seconds / num_seeds * 1e3:.0f} ms per seed-step, " if num_seeds > 1 else ""
    plain = ""
    if num_seeds == 1 and dtype == "float32":
        # the step as users run it: a fresh plain Python process, after this process's timing
        plain_s, how = plain_python_seconds(quick, repeats)
        plain = (f"; from a plain Python process (no GLIBC_TUNABLES: {how}) the same step takes "
                 f"{plain_s * 1e3:.0f} ms ({plain_s / seconds:.2f}x this process's)")
    target = "no goal" if goal is None else f"goal >= {goal:g}"
    return Measure(name, mfu,
                   f"MFU {mfu:.1%} per seed: GRPO step (rollout + verify + update) of "
                   f"{mc.num_params() / 1e6:.2f}M params, {PROMPTS}x{GENERATIONS} completions, "
                   f"prompt {config.base.prompt_width} + {config.base.max_new_tokens} new tokens"
                   f", beta 0, {num_seeds} seed(s), {dtype} linear layers: "
                   f"{seconds * 1e3:.0f} ms per step ({per}{flops / seconds / 1e9:.1f} GFLOP/s "
                   f"model vs {peak / 1e9:.1f} GFLOP/s {dtype} matmul peak; on their own the "
                   f"rollout takes {roll_s * 1e3:.0f} ms at MFU {roll_mfu:.0%}, the update "
                   f"{update_s * 1e3:.0f} ms at {update_mfu:.0%}); {target}; "
                   f"{jax.devices()[0].platform}, {_malloc_setting()}{plain}", goal=goal)


def _malloc_setting() -> str:
    """How this process's malloc is set, which the step's speed depends on: ``"malloc tuned"``
    under the command line's ``GLIBC_TUNABLES`` (:data:`rlvr_lab.allocator.MALLOC_TUNABLES`:
    reused, huge-page temporaries), ``"malloc tuned in process"`` where ``import rlvr_lab``
    applied them with ``mallopt`` (all but huge pages), else ``"malloc default"`` (with why)."""
    from rlvr_lab import allocator

    # tune_in_process reads GLIBC_TUNABLES itself (and is a cached no-op after import)
    result = allocator.tune_in_process()
    return ("malloc tuned" if result.startswith("already") else
            "malloc tuned in process" if result == "tuned" else
            f"malloc in process: {result}" if result.startswith("tuned") else
            f"malloc default ({result})")


@benchmark("rl_step_mfu")
def rl_step_mfu(quick: bool) -> Measure:
    return _measure("rl_step_mfu", quick, 1, 0.5)


@benchmark("rl_step_mfu_8_seeds")
def rl_step_mfu_8_seeds(quick: bool) -> Measure:
    return _measure("rl_step_mfu_8_seeds", quick, 8, 0.4)


@benchmark("rl_step_mfu_bf16")
def rl_step_mfu_bf16(quick: bool) -> Measure:
    return _measure("rl_step_mfu_bf16", quick, 1, None, "bfloat16")


STUDY_SEEDS = 8


def study_config() -> sequence.SequenceRLConfig:
    """The training step of ``tiny_grpo``'s quick arm (``simulations/tiny_grpo.rl_config``,
    repeated here: the library does not import ``simulations``), the step most small-model
    studies repeat: the ``quick`` SFT preset's model (d_model 64, 2 layers), 32 prompts x 8
    completions, 2 minibatches of PPO-clip, token-mean, beta 0."""
    return sequence.SequenceRLConfig(
        base=sft.PRESETS["quick"], num_prompts=32, num_generations=8, num_minibatches=2,
        learning_rate=5e-4, warmup_steps=5, advantage="grpo", policy_loss="ppo_clip",
        epsilon=0.2, loss_agg_mode="token-mean", beta=0.0, temperature=1.0, steps=30,
        eval_every=15, eval_problems=64, eval_samples=4)


def _stepper(trainer: sequence.Trainer, num_seeds: int):
    """``(key, one, holder)``: ``one()`` runs the next ``trainer.train_step`` on ``num_seeds``
    seeds and waits for it; the first step, which compiles, has run already. ``holder``
    keeps the current state (``holder["state"]``)."""
    state = trainer.init_state(num_seeds)
    key = jax.random.key(1)
    state, _ = trainer.train_step(key, state, 0)           # compile
    jax.block_until_ready(state)
    holder = {"state": state, "step": 1}

    def one():
        holder["state"], _ = trainer.train_step(key, holder["state"], holder["step"])
        holder["step"] += 1
        jax.block_until_ready(holder["state"])

    return key, one, holder


def _steps_per_second(trainer: sequence.Trainer, num_seeds: int, repeats: int) -> float:
    """Best steps per second of ``trainer.train_step`` on ``num_seeds`` seeds (first step,
    which compiles, excluded)."""
    return 1.0 / best_time(_stepper(trainer, num_seeds)[1], repeats)


@benchmark("small_study_seed_steps")
def small_study_seed_steps(quick: bool) -> Measure:
    config = study_config()
    mc = config.base.model_config()
    # random weights of the preset's architecture (no SFT run): every completion decodes the
    # full budget in the compiled loop, so a step's cost does not depend on the weights
    trainer = sequence.Trainer(config, base_policy=transformer.init(jax.random.key(0), mc))
    repeats = 3 if quick else 10
    mapped = STUDY_SEEDS * _steps_per_second(trainer, STUDY_SEEDS, repeats)
    single = _steps_per_second(trainer, 1, repeats)
    return Measure("small_study_seed_steps", mapped / single,
                   f"{mapped:.1f} seed-steps/s ({1e3 / mapped:.0f} ms per seed-step) with "
                   f"{STUDY_SEEDS} seeds in one seed-mapped train_step vs {single:.1f} with one "
                   f"seed per call; tiny_grpo's quick arm: {mc.num_params() / 1e6:.2f}M params "
                   f"(d={mc.d_model} L={mc.n_layers}), {config.num_prompts}x"
                   f"{config.num_generations} completions, prompt {config.base.prompt_width} + "
                   f"{config.base.max_new_tokens} new tokens, {config.num_minibatches} "
                   f"minibatches, beta 0; best of {repeats} after a compiling step; held-out "
                   f"evaluations not included; {jax.devices()[0].platform}, "
                   f"{_malloc_setting()}")


STUDY_BASES, STUDY_SEEDS_PER_BASE = 4, 2   # the full plan's first look (tiny_grpo, drgrpo)


@benchmark("small_study_bases")
def small_study_bases(quick: bool) -> Measure:
    config = study_config()
    mc = config.base.model_config()
    ids, spb = list(range(STUDY_BASES)), STUDY_SEEDS_PER_BASE
    # random weights per base (no SFT runs): the cost of a step does not depend on them
    trainers = [sequence.Trainer(bases.with_base(config, b),
                                 base_policy=transformer.init(jax.random.key(b), mc))
                for b in ids]
    batched = bases.BatchedBases(trainers, ids, spb)
    # one step per base, one base after another (the loop run_bases ran before)
    steppers = [_stepper(t, spb)[1] for t in trainers]
    per_base = lambda: [one() for one in steppers]  # noqa: E731
    together = _stepper(batched, batched.num_seeds)[1]
    repeats = 3 if quick else 8
    loop_times, batched_times = [], []
    for _ in range(repeats):           # alternately: the machine's drift hits both alike
        loop_times += wall_times(per_base, 1)
        batched_times += wall_times(together, 1)
    seeds = batched.num_seeds
    rate, loop_rate = seeds / min(batched_times), seeds / min(loop_times)
    return Measure("small_study_bases", rate / loop_rate,
                   f"{rate:.1f} seed-steps/s ({1e3 / rate:.0f} ms per seed-step) with "
                   f"{STUDY_BASES} SFT bases x {spb} seeds in one BatchedBases train_step vs "
                   f"{loop_rate:.1f} with one train_step per base; the step of "
                   f"small_study_seed_steps, same per-seed programs (the ratio is host work "
                   f"saved); best of {repeats}, alternated, after a compiling step; "
                   f"held-out evaluations not included; {jax.devices()[0].platform}, "
                   f"{_malloc_setting()}")
