"""Rollout stages: which prompts, how many rollouts each, which samples enter the update.

A stage is written once against a :class:`Sampler` — "give me ``n`` scored rollouts for these
prompts" — so the same stage runs on the tabular bank (:class:`BankSampler`, everything
traced inside the trainer's ``lax.scan``) and on the transformer
(:class:`rlvr_lab.train.sequence.SequenceSampler`, generation jitted and the verifier called
back on the host). Shapes are static: a stage returns groups padded to ``[B, G_max]`` with a
validity ``mask``, plus the number of rollouts it actually generated (``spent``) so that
budgets compare honestly.

``RolloutStage(init, sample)``:
``init(sampler, shape, **options) -> state`` and
``sample(key, sampler, shape, state, **options) -> (Rollout, state)``, where ``shape`` is a
:class:`StageShape` (prompts per step, rollouts per prompt) and ``options`` come from the
trainer config's ``rollout_options``. Core stages: ``uniform`` and ``dynamic_sampling``
(DAPO); paper packages register theirs (``dars``, ``cures``, ``e3``, ``brorl_schedule``).
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Protocol

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from rlvr_lab._registry import Registry
from rlvr_lab.envs import prompt_bank
from rlvr_lab.models import tabular


class Rollout(NamedTuple):
    prompts: jnp.ndarray         # [B] int prompt indices
    answers: Any                 # pytree, leaves [B, G_max, ...]: what was sampled
    rewards: jnp.ndarray         # [B, G_max] float
    mask: jnp.ndarray            # [B, G_max] bool, valid rollouts
    behav_log_prob: jnp.ndarray  # [B, G_max] (bank) or [B, G_max, N] (tokens): sampling log-prob
    spent: jnp.ndarray           # scalar int32: rollouts generated to produce this batch
    correct: Any = None          # [B, G_max] bool: the verifier's verdict (None: unknown)


class StageShape(NamedTuple):
    """What a stage needs from the trainer config: prompts per step and rollouts per prompt."""

    batch_size: int
    num_generations: int


class Sampler(Protocol):
    """The policy-agnostic interface stages are written against."""

    num_prompts: int   # size of the prompt pool

    def choose(self, key: jax.Array, batch_size: int) -> jax.Array: ...
    def sample(self, key: jax.Array, prompts: jax.Array, num: int) -> Rollout: ...
    def draw(self, key: jax.Array, batch_size: int, num: int) -> Rollout: ...
    def success_probability(self) -> jax.Array | None:
        ...   # [num_prompts] exact, or None when unknown


class RolloutStage(NamedTuple):
    init: Callable[..., Any]
    sample: Callable[..., tuple]


_STAGES: Registry = Registry("stage", "rollout stage")


def register(name: str, stage: RolloutStage, *, overwrite: bool = False) -> RolloutStage:
    return _STAGES.register(name, stage, overwrite=overwrite)


def get(name_or_stage: str | RolloutStage) -> RolloutStage:
    """A registered stage by name; a :class:`RolloutStage` passes through."""
    if isinstance(name_or_stage, RolloutStage):
        return name_or_stage
    return _STAGES.get(name_or_stage)


def names() -> list[str]:
    return _STAGES.names()


# ----------------------------------------------------------------------------- sampling helpers
def shuffle(key: jax.Array, n: int) -> jax.Array:
    """A uniformly random permutation of ``range(n)`` without sorting.

    Each element's position is its rank among 32-bit random keys (ties broken by index, so
    the ranks are always distinct), then one scatter inverts the ranks. For the small n used
    here (prompts, groups) the O(n^2) comparisons are 2-3x cheaper under vmap on CPU than
    ``jax.random.permutation``'s sorts, the slowest ops of the trainer.
    """
    bits = jax.random.bits(key, (n,), jnp.uint32)
    idx = jnp.arange(n)
    before = (bits[None, :] < bits[:, None]) | ((bits[None, :] == bits[:, None])
                                                & (idx[None, :] < idx[:, None]))
    return jnp.zeros(n, idx.dtype).at[before.sum(-1)].set(idx)


def choose_prompts(key: jax.Array, num_prompts: int, batch_size: int) -> jax.Array:
    """``batch_size`` distinct prompt indices, uniformly (all prompts in order if B == K)."""
    if batch_size == num_prompts:
        return jnp.arange(num_prompts)
    return shuffle(key, num_prompts)[:batch_size]


def generate(key: jax.Array, logits: jax.Array, bank: prompt_bank.PromptBank, prompts: jax.Array,
             num_samples: int, temperature: ArrayLike = 1.0) -> Rollout:
    """Sample ``num_samples`` answers for each prompt of the bank and score them."""
    rows = logits[prompts]
    answers = tabular.sample(key, rows, num_samples, temperature)
    rewards = prompt_bank.rewards_of(bank, prompts, answers)
    logp = tabular.answer_log_prob(rows, answers, temperature)
    mask = jnp.ones(answers.shape, bool)
    return Rollout(prompts, answers, rewards, mask, logp,
                   jnp.asarray(answers.size, jnp.int32),
                   prompt_bank.is_correct(bank, prompts, answers))


class BankSampler(NamedTuple):
    """The tabular policy ``softmax(logits / T)`` on a prompt bank; fully traceable."""

    logits: jnp.ndarray
    bank: Any
    temperature: Any = 1.0

    @property
    def num_prompts(self) -> int:
        return self.bank.logits0.shape[0]

    def choose(self, key: jax.Array, batch_size: int) -> jax.Array:
        return choose_prompts(key, self.num_prompts, batch_size)

    def sample(self, key: jax.Array, prompts: jax.Array, num: int) -> Rollout:
        return generate(key, self.logits, self.bank, prompts, num, self.temperature)

    def draw(self, key: jax.Array, batch_size: int, num: int) -> Rollout:
        k_prompt, k_sample = jax.random.split(key)
        return self.sample(k_sample, self.choose(k_prompt, batch_size), num)

    def success_probability(self) -> jax.Array:
        pi = jnp.exp(tabular.log_policy(self.logits, self.temperature))
        return jnp.sum(jnp.where(self.bank.correct, pi, 0.0), axis=-1)


def padded_groups(key: jax.Array, sampler: Sampler, prompts: jax.Array, counts: jax.Array,
                  g_max: int) -> Rollout:
    """``g_max`` rollouts per prompt, the first ``counts[i]`` valid; ``spent = sum counts``
    (the padding is not charged: a real engine would not generate it)."""
    batch = sampler.sample(key, prompts, g_max)
    mask = jnp.arange(g_max)[None, :] < counts[:, None]
    return batch._replace(mask=mask, spent=counts.sum().astype(jnp.int32))


def concat_groups(first: Rollout, second: Rollout, second_mask: ArrayLike) -> Rollout:
    """Append ``second``'s rollouts to ``first``'s groups (same prompts), ``second_mask``
    marking which of them are valid."""
    cat = lambda a, b: jnp.concatenate([a, b], axis=1)  # noqa: E731
    return first._replace(answers=jax.tree.map(cat, first.answers, second.answers),
                          rewards=cat(first.rewards, second.rewards),
                          mask=cat(first.mask, second_mask),
                          behav_log_prob=cat(first.behav_log_prob, second.behav_log_prob),
                          correct=cat(first.correct, second.correct & second_mask))


# ----------------------------------------------------------------------------- group filters
def _valid(rewards, mask):
    rewards = jnp.asarray(rewards)
    if rewards.ndim != 2:
        raise ValueError(f"rewards must have shape [B, G]; got shape {rewards.shape}")
    mask = jnp.ones(rewards.shape, bool) if mask is None else jnp.asarray(mask, bool)
    if mask.shape != rewards.shape:
        raise ValueError(f"mask shape {mask.shape} does not match rewards shape {rewards.shape}")
    return rewards, mask


def informative_groups(rewards: ArrayLike, mask: ArrayLike | None = None) -> jax.Array:
    """Bool ``[B]``: the group has two valid rollouts with different rewards.

    Groups whose valid rewards are all equal (all correct, all wrong, or fewer than two valid
    rollouts) have zero group-relative advantage and are dropped by dynamic sampling.
    """
    rewards, mask = _valid(rewards, mask)
    big = jnp.asarray(jnp.inf, rewards.dtype) if jnp.issubdtype(rewards.dtype, jnp.floating) \
        else jnp.iinfo(rewards.dtype).max
    lo = jnp.where(mask, rewards, big).min(-1)
    hi = jnp.where(mask, rewards, -big).max(-1)
    return (mask.sum(-1) >= 2) & (hi > lo)


def dynamic_sampling_filter(rewards: ArrayLike, mask: ArrayLike | None = None) -> jax.Array:
    """The validity mask with every non-informative group masked out (``[B, G]`` bool)."""
    rewards, mask = _valid(rewards, mask)
    return mask & informative_groups(rewards, mask)[:, None]


def group_outcomes(rewards: ArrayLike, mask: ArrayLike | None = None, *,
                   threshold: float = 0.5) -> tuple[jax.Array, jax.Array]:
    """Per-group flags ``(all_correct, all_incorrect)`` (bool ``[B]``) for binary rewards.

    A rollout is correct when ``reward > threshold``. A group without valid rollouts is
    neither (both flags False).
    """
    rewards, mask = _valid(rewards, mask)
    correct = rewards > threshold
    n = mask.sum(-1)
    hits = (correct & mask).sum(-1)
    return (n > 0) & (hits == n), (n > 0) & (hits == 0)


# ----------------------------------------------------------------------------- core stages
def no_state(sampler: Sampler, shape: StageShape, **options: Any) -> tuple[()]:
    return ()


def _uniform(key, sampler: Sampler, shape: StageShape, state, **options):
    return sampler.draw(key, shape.batch_size, shape.num_generations), state


def _dynamic_sampling(key, sampler: Sampler, shape: StageShape, state, *, max_rounds: int = 3):
    """DAPO dynamic sampling: draw up to ``max_rounds`` batches of B prompts, keep the first B
    groups whose rewards are not all equal; if too few, the rest stay masked out. ``spent``
    counts only the rounds needed to fill the batch (all of them when it never fills)."""
    B, G = shape
    rounds = jax.vmap(lambda k: sampler.draw(k, B, G))(jax.random.split(key, max_rounds))
    flat = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]),
                        rounds._replace(spent=jnp.zeros((max_rounds, 1))))
    good = informative_groups(flat.rewards, flat.mask)
    order = jnp.argsort(~good, stable=True)[:B]
    n_good_before = jnp.cumsum(good)
    # rounds needed: the round holding the B-th informative group, or all rounds
    last = jnp.where(n_good_before[-1] >= B, jnp.argmax(n_good_before >= B), good.shape[0] - 1)
    spent = ((last // B) + 1) * B * G
    out = jax.tree.map(lambda x: x[order], flat._replace(spent=None))
    return out._replace(mask=out.mask & good[order][:, None], spent=spent.astype(jnp.int32)), \
        state


register("uniform", RolloutStage(no_state, _uniform))
register("dynamic_sampling", RolloutStage(no_state, _dynamic_sampling))
