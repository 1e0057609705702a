"""DARS multi-stage rollouts as a rollout stage (DARS paper, difficulty-adaptive rollouts).

One step of DARS, with every shape fixed so it runs under ``jit``/``vmap``/``lax.scan``, on any
:class:`~rlvr_lab.train.rollout.Sampler` (the prompt bank or the transformer):

1. stage 1: ``N = num_generations`` rollouts for each of the B prompts;
2. per-prompt stage-1 accuracy ``â`` -> ``extra = dars_extra_rollouts(â, N, n_max, schedule,
   scale)`` (0 for ``â >= 0.5``);
3. stage 2: ``n_max - N`` rollouts are drawn for every prompt (the fixed maximum shape) and
   only the first ``extra`` of each row are marked valid;
4. merge into ``[B, n_max]`` groups with a validity mask;
5. drop the groups whose merged accuracy is 0 or 1 (they carry no advantage);

and the advantage (configure ``advantage="grpo", scale_rewards="none"`` for DARS's
``A = r - mean``) and the PPO update are the trainer's own. ``spent = B N + sum(extra)`` is
the number of rollouts DARS actually generates (the padding of step 3 is not counted: a real
engine would not run it).

``rollout="dars"`` in a trainer config, with ``rollout_options=(("schedule", "et"),
("n_max", 32))`` (``scale`` defaults to "none"). The stage state accumulates run totals
(extra rollouts, groups rescued by stage 2 from an all-wrong stage 1, groups dropped) that
the final rollout state exposes.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from rlvr_lab._registry import check_choice
from rlvr_lab.envs.prompt_bank import PromptBank
from rlvr_lab.papers.dars.allocation import SCALES, SCHEDULES, dars_extra_rollouts
from rlvr_lab.train import rollout as rollout_stages
from rlvr_lab.train.rollout import BankSampler, Rollout, RolloutStage, Sampler, StageShape


class DarsInfo(NamedTuple):
    """What happened inside one DARS rollout (all ``[B]`` except where noted)."""

    stage1_acc: jnp.ndarray      # accuracy of the N stage-1 rollouts
    extra: jnp.ndarray           # int32 stage-2 rollouts granted
    merged_acc: jnp.ndarray      # accuracy of the merged N + extra rollouts
    kept: jnp.ndarray            # bool: group survives the 0 < acc < 1 filter
    stage2_mask: jnp.ndarray     # [B, n_max - N] bool: valid stage-2 rollouts


class DarsTotals(NamedTuple):
    """Run totals carried in the stage state (float32 scalars)."""

    extra: jnp.ndarray           # stage-2 rollouts generated
    rescued: jnp.ndarray         # groups all-wrong after stage 1 with a success after stage 2
    dropped: jnp.ndarray         # groups removed by the 0 < acc < 1 filter
    groups: jnp.ndarray          # groups sampled


def check_options(n: int, *, schedule: str = "et", n_max: int = 32,
                  scale: str = "none") -> None:
    """One-line ValueErrors for bad stage options (called at trace time by the stage)."""
    check_choice("schedule", schedule, SCHEDULES)
    check_choice("scale", scale, SCALES)
    if isinstance(n_max, bool) or not isinstance(n_max, int) or n_max < n:
        raise ValueError(f"n_max={n_max!r} is not allowed; it must be an int >= "
                         f"num_generations={n}")


def dars_rollout(key: jax.Array, sampler: Sampler, prompts: jax.Array, n: int, n_max: int, *,
                 schedule: str = "et", scale: str = "none") -> tuple[Rollout, DarsInfo]:
    """Two-stage DARS sampling for ``prompts [B]``; groups of fixed width ``n_max``.

    Accuracy is the fraction of correct rollouts (the verifier's verdict), so non-binary
    rewards are handled too. Returns the merged :class:`Rollout` (mask: valid and kept) and a
    :class:`DarsInfo`.
    """
    check_options(n, schedule=schedule, n_max=n_max, scale=scale)
    k1, k2 = jax.random.split(key)
    first = sampler.sample(k1, prompts, n)
    acc1 = first.correct.mean(-1)
    extra = dars_extra_rollouts(acc1, n, n_max, schedule=schedule, scale=scale)
    width2 = n_max - n
    if width2 > 0:
        mask2 = jnp.arange(width2) < extra[:, None]
        merged = rollout_stages.concat_groups(first, sampler.sample(k2, prompts, width2), mask2)
    else:
        merged, mask2 = first, jnp.zeros((prompts.shape[0], 0), bool)
    n_correct = merged.correct.sum(-1)
    total = n + extra
    merged_acc = n_correct / total
    kept = (n_correct > 0) & (n_correct < total)
    spent = (prompts.shape[0] * n + extra.sum()).astype(jnp.int32)
    out = merged._replace(mask=merged.mask & kept[:, None], spent=spent)
    return out, DarsInfo(acc1, extra, merged_acc, kept, mask2)


def bank_dars_rollout(key: jax.Array, logits: jax.Array, bank: PromptBank, prompts: jax.Array,
                      n: int, n_max: int, *, schedule: str = "et", scale: str = "none",
                      temperature: float = 1.0) -> tuple[Rollout, DarsInfo]:
    """:func:`dars_rollout` on the prompt bank's policy ``softmax(logits / T)``."""
    return dars_rollout(key, BankSampler(logits, bank, temperature), prompts, n, n_max,
                        schedule=schedule, scale=scale)


def _init(sampler, shape, **options):
    zero = jnp.zeros((), jnp.float32)
    return DarsTotals(zero, zero, zero, zero)


def _sample(key, sampler: Sampler, shape: StageShape, totals: DarsTotals, *,
            schedule: str = "et", n_max: int = 32, scale: str = "none"):
    k_prompt, k_sample = jax.random.split(key)
    prompts = sampler.choose(k_prompt, shape.batch_size)
    out, info = dars_rollout(k_sample, sampler, prompts, shape.num_generations, n_max,
                             schedule=schedule, scale=scale)
    f32 = jnp.float32
    rescued = (info.stage1_acc == 0) & (info.merged_acc > 0)
    totals = DarsTotals(totals.extra + info.extra.sum().astype(f32),
                        totals.rescued + rescued.sum().astype(f32),
                        totals.dropped + (~info.kept).sum().astype(f32),
                        totals.groups + f32(prompts.shape[0]))
    return out, totals


STAGE = RolloutStage(_init, _sample)
