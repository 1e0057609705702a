"""E3: rank-based rollout allocation with a widening range, and entropy-targeting temperature.

Both rules follow the authors' code (LiaoMengqi/E3-RL4LLMs).

Allocation. Prompts are ranked by their mean reward so far; ``rank_i = position / |D|`` in
[0, 1) with larger = harder; prompts never seen get weight 0 (the code's ``-100``). A batch of
``B`` prompts with budget ``N = n B`` gets::

    n_i = floor(n_min + (N - n_min B) rank_i / sum_j rank_j)

then the leftover ``N - sum n_i`` goes to the hardest prompts first, each filled up to
``n_max``. Once per epoch ``n_min -= n_update`` (not below ``n_low``) and ``n_max +=
n_update`` (not above ``n_high``): with n = 8, n_update = 2, [4, 12] the ranges are
[8, 8] -> [6, 10] -> [4, 12]. Note: in the authors' code the floor term is *not* capped at
``n_max`` — a prompt whose rank share is large (small batch, one hard prompt) can get more than
``n_max``; ``cap_at_max=True`` clips first and hands the excess to the leftover pass. The total
is exactly ``N`` either way (leftover room ``sum (n_max - n_i)^+ >= N - sum n_i``).

Temperature. With ``H_t`` the mean token entropy of the temperature-scaled policy and ``H*``
the target (the entropy measured at the first step), after every step::

    T <- T (1 + T ln(H* / H_t) / (ln V + ln ln V))

so ``H_t = H*`` is a fixed point, lower entropy raises T and higher entropy lowers it. In the
last ``annealing_ratio`` (40%) of training the target decays by a half cosine from ``H*_0`` to
``annealing_factor H*_0`` (0.9).

Length penalty (the authors' README, "not mentioned in the paper"; ``apply_length_penalty``
in their trainer). For the easiest prompts (rank <= ``penalty_threshold``, 0.1 in the README)
every correct rollout's reward becomes ``r - b`` with ``b = mu l / (1 + mu l)``, ``l`` its
length in tokens (``mu = 0.001`` for responses of thousands of tokens): shorter correct
answers earn more. README: at threshold 0.1, accuracy comparable to no penalty with ~40%
shorter responses. Note that with the group-normalised GRPO advantage the penalty changes
nothing in a group whose correct answers all have the same length (``{1-b, 0}`` normalises
to the same advantages as ``{1, 0}``): only a length spread among correct answers is acted on.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from rlvr_lab.train.budget import _check_budget, _static_int

UNSEEN = -100.0  # the code's rank marker for prompts without statistics (weight 0)


def e3_schedule(epoch: int, n: int = 8, *, n_update: int = 2, n_low: int = 4,
                n_high: int = 12) -> tuple[int, int]:
    """``(n_min, n_max)`` in epoch ``epoch`` (0-based): [8,8] -> [6,10] -> [4,12] by default."""
    epoch = _static_int("epoch", epoch)
    n = _static_int("n", n, 1)
    n_update = _static_int("n_update", n_update)
    if not 1 <= n_low <= n <= n_high:
        raise ValueError(f"n_low={n_low}, n={n}, n_high={n_high} are not allowed; "
                         f"need 1 <= n_low <= n <= n_high")
    return max(n - epoch * n_update, n_low), min(n + epoch * n_update, n_high)


def e3_ranks(mean_reward: ArrayLike, seen: ArrayLike | None = None) -> jax.Array:
    """Difficulty rank in [0, 1) per prompt from its mean reward: 1 - 1/|D| = hardest.

    ``position`` counts the seen prompts that are strictly easier (higher mean reward; ties
    share a position), so ``rank = position / |D|``; unseen prompts (``seen`` False) get 0 and
    thus no extra rollouts.
    """
    r = jnp.asarray(mean_reward)
    seen = jnp.ones(r.shape, bool) if seen is None else jnp.asarray(seen, bool)
    easier = (seen[None, :] & (r[None, :] > r[:, None])).sum(-1)
    return jnp.where(seen, easier / r.shape[0], 0.0).astype(
        r.dtype if jnp.issubdtype(r.dtype, jnp.floating) else jnp.float32)


def e3_allocation(rank: ArrayLike, budget: ArrayLike, n_min: int, n_max: int, *,
                  cap_at_max: bool = False) -> jax.Array:
    """Rollouts per prompt of a batch from difficulty ranks (authors' rule; int32 ``[B]``).

    ``rank`` ``[B]`` in [0, 1) (negative = unseen, weight 0); ``budget`` = ``n B`` in the
    paper. Exactly ``budget`` rollouts in total; every prompt gets at least ``n_min``.
    """
    rank = jnp.asarray(rank)
    if rank.ndim != 1 or rank.shape[0] == 0:
        raise ValueError(f"rank must have shape [B] with B >= 1; got shape {rank.shape}")
    n_min = _static_int("n_min", n_min)
    n_max = _static_int("n_max", n_max, n_min)
    _check_budget(budget, rank.shape[0], n_min, n_max)
    return e3_counts(rank, budget, n_min, n_max, cap_at_max=cap_at_max)


def e3_counts(rank: ArrayLike, budget: ArrayLike, n_min: ArrayLike, n_max: ArrayLike, *,
              cap_at_max: bool = False) -> jax.Array:
    """:func:`e3_allocation` without validation: ``n_min``/``n_max`` may be traced (the
    per-epoch schedule inside a ``lax.scan``)."""
    rank = jnp.asarray(rank)
    b = rank.shape[0]
    dtype = rank.dtype if jnp.issubdtype(rank.dtype, jnp.floating) else jnp.float32
    n_min = jnp.asarray(n_min, dtype)
    n_max = jnp.asarray(n_max, dtype)
    w = jnp.maximum(rank.astype(dtype), 0.0)  # unseen (-100) -> 0
    total = w.sum()
    share = jnp.where(total > 0, w / jnp.where(total > 0, total, 1.0), 0.0)
    budget_f = jnp.asarray(budget, dtype)
    counts = jnp.floor(n_min + (budget_f - n_min * b) * share)
    if cap_at_max:
        counts = jnp.minimum(counts, n_max)
    left = budget_f - counts.sum()
    # leftovers: hardest first (stable order on ties), each filled up to n_max
    order = jnp.argsort(-w, stable=True)
    room = jnp.maximum(n_max - counts[order], 0.0)
    before = jnp.cumsum(room) - room
    add_sorted = jnp.clip(left - before, 0.0, room)
    counts = counts + jnp.zeros_like(counts).at[order].set(add_sorted)
    return counts.astype(jnp.int32)


# ----------------------------------------------------------------------------- temperature
def entropy_scale(vocab_size: int) -> float:
    """``ln V + ln ln V``, the denominator of the E3 temperature rule (V >= 3)."""
    v = _static_int("vocab_size", vocab_size, 3)
    return math.log(v) + math.log(math.log(v))


def e3_temperature_update(temperature: ArrayLike, entropy: ArrayLike, target_entropy: ArrayLike,
                          vocab_size: int) -> jax.Array:
    """One E3 step ``T (1 + T ln(H* / H) / (ln V + ln ln V))``; ``H = H*`` leaves T unchanged.

    ``entropy`` is floored at 1e-12 so a collapsed policy gives a large finite increase.
    """
    h = jnp.maximum(jnp.asarray(entropy), 1e-12)
    t = jnp.asarray(temperature)
    return t * (1.0 + t * jnp.log(target_entropy / h) / entropy_scale(vocab_size))


def e3_target_entropy(step: ArrayLike, initial_target: ArrayLike, total_steps: int, *,
                      annealing_ratio: float = 0.4, annealing_factor: float = 0.9) -> jax.Array:
    """Target entropy at ``step``: ``H*_0`` until ``total_steps - int(total_steps * ratio)``,
    then a half cosine down to ``annealing_factor * H*_0`` at ``total_steps`` (code form)."""
    total_steps = _static_int("total_steps", total_steps, 1)
    if not 0.0 <= annealing_ratio <= 1.0:
        raise ValueError(f"annealing_ratio={annealing_ratio} is not allowed; it must lie in [0, 1]")
    start = total_steps - int(total_steps * annealing_ratio)
    span = max(total_steps - start, 1)
    progress = jnp.clip((jnp.asarray(step) - start) / span, 0.0, 1.0)
    decay = (1.0 - annealing_factor) * 0.5 * (1.0 + jnp.cos(jnp.pi * progress)) + annealing_factor
    return initial_target * decay


# ----------------------------------------------------------------------------- length penalty
def length_penalty(length: ArrayLike, coeff: ArrayLike) -> jax.Array:
    """E3's length bias ``b = mu l / (1 + mu l)`` of a response of ``l`` tokens (``mu`` =
    ``coeff`` >= 0; 0 at l = 0 or mu = 0, rising to 1 for long responses)."""
    x = jnp.asarray(coeff) * jnp.asarray(length)
    return x / (1.0 + x)


def apply_length_penalty(rewards: ArrayLike, lengths: ArrayLike, rank: ArrayLike, coeff: ArrayLike,
                         threshold: ArrayLike) -> jax.Array:
    """E3's length control (the authors' ``apply_length_penalty``): on easy prompts, subtract
    :func:`length_penalty` from the reward of every correct rollout, so a shorter correct
    answer earns more.

    ``rewards``/``lengths`` ``[B, n]``; ``rank`` ``[B]`` the prompt's difficulty rank (0 =
    easiest; :data:`UNSEEN` for prompts without statistics). As in the code, a rollout is
    correct when its reward is non-zero, an unseen prompt counts as rank 1, and the penalty
    applies where ``rank <= threshold`` (``threshold`` 0.1: the easiest tenth of the prompts).
    ``coeff = 0`` returns ``rewards`` unchanged. Jittable; all arguments may be traced.
    """
    rewards = jnp.asarray(rewards)
    rank = jnp.asarray(rank, rewards.dtype)
    rank = jnp.where(rank == UNSEEN, 1.0, rank)
    easy = (rank <= threshold)[:, None] & (rewards != 0)
    penalty = length_penalty(lengths, coeff).astype(rewards.dtype)
    return jnp.where(easy, rewards - penalty, rewards)


def expected_all_incorrect(key: jax.Array, p: ArrayLike, batch_sizes: Iterable[int],
                           ranges: Sequence[tuple[int, int]] | ArrayLike, draws: int,
                           n: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """At a fixed policy with success probabilities ``p`` ``[K]``: for each batch size of
    ``batch_sizes`` and each ``(n_min, n_max)`` of ``ranges``, the expected fraction of
    all-incorrect groups ``mean_i (1 - p_i)^{n_i}`` under E3's allocation of ``n B`` rollouts
    (ranks from ``p``, capped), averaged over ``draws`` random batches of ``B`` distinct prompts
    (the same draws for every range; batch ``B`` = the first ``B`` of a random permutation),
    and the share of prompts given more than ``n_max - 4`` rollouts (where a cap 4 lower would
    have bound). Returns two float64 arrays ``[len(batch_sizes), len(ranges)]`` (one
    compilation for all of them)."""
    ranges = jnp.asarray(ranges, jnp.float32).reshape(-1, 2)
    sizes = tuple(int(b) for b in batch_sizes)
    if not sizes or min(sizes) < 1 or max(sizes) > jnp.shape(p)[0]:
        raise ValueError(f"batch_sizes={batch_sizes!r} must lie in [1, {jnp.shape(p)[0]}]")
    frac, over = _expected_all_incorrect(key, jnp.asarray(p, jnp.float32), ranges, sizes,
                                         int(draws), int(n))
    return np.asarray(frac, np.float64), np.asarray(over, np.float64)


@functools.partial(jax.jit, static_argnums=(3, 4, 5))
def _expected_all_incorrect(key, p, ranges, batch_sizes, draws, n):
    rank = e3_ranks(p)
    perm = jax.vmap(lambda k: jax.random.permutation(k, p.shape[0]))(
        jax.random.split(key, draws))                                   # [D, K]
    frac, over = [], []
    for b in batch_sizes:
        idx = perm[:, :b]

        def one(lo_hi, idx=idx, b=b):
            counts = jax.vmap(lambda i: e3_counts(rank[i], n * b, lo_hi[0], lo_hi[1],
                                                  cap_at_max=True))(idx)
            return (jnp.mean((1.0 - p[idx]) ** counts),
                    jnp.mean((counts > lo_hi[1] - 4).astype(jnp.float32)))

        f, o = jax.vmap(one)(ranges)
        frac.append(f)
        over.append(o)
    return jnp.stack(frac), jnp.stack(over)
