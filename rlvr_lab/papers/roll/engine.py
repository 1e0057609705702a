"""ROLL's scheduler on the tiny transformer: a chunked decoder that really stops.

Each RL step the :class:`Driver` launches ``R = ceil(over_provision * B)`` groups of G
responses (B = ``num_prompts``), decodes them lock-step in chunks of ``chunk`` decode steps
(:func:`decode_chunk`, one jitted call per chunk, seeds mapped, KV cache carried between
calls), and after every chunk hands the responses that ended in it to the host verifier and to
one :class:`~rlvr_lab.papers.roll.scheduler.Scheduler` per seed. When a seed's scheduler has
decided its batch (B informative groups, DAPO's filter), that seed's rows are stopped before
the next chunk: the tokens they would still have generated are never computed. The update is
:func:`rlvr_lab.train.sequence.update` on the B chosen groups (slot order; a short batch is
padded and masked, as DAPO does).

``overlap=True`` is ROLL's asynchronous reward: the next chunk is dispatched *before* the host
scores the previous one (JAX dispatch is asynchronous, so verification runs while the device
decodes); the price is one chunk of reaction lag, ``lag = chunk`` in
:func:`~rlvr_lab.papers.roll.scheduler.schedule`. ``abort=False`` runs every group to the
end (the finish-everything filter). For one key both modes generate the same tokens up to the
stop (sampling is causal and row-independent), so the batch of the aborting driver equals the
finish-everything filter's whenever the same groups are chosen, and the token counts the
device reports equal :func:`~rlvr_lab.papers.roll.scheduler.schedule` on the full lengths.

A lock-step engine still spends device time on stopped rows of a seed that is not finished
(mapped seeds share the loop); token counts are what a continuously batched engine would
generate: the non-padding tokens of each response.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from rlvr_lab.envs import tasks
from rlvr_lab.models import transformer
from rlvr_lab.models.transformer import EOS_ID, PAD_ID
from rlvr_lab.papers.roll import scheduler as roll_scheduler
from rlvr_lab.train import sequence
from rlvr_lab import random_streams as streams


@dataclasses.dataclass(frozen=True)
class RollConfig:
    """ROLL's rollout settings around an RL config (all static).

    ``over_provision`` r >= 1: groups launched per step ``ceil(r * num_prompts)``;
    ``order`` ``"completion"`` (ROLL) or ``"slot"`` (DAPO's filter order); ``abort``: stop the
    in-flight responses once the batch is decided (False: finish everything); ``chunk``: decode
    steps per device call; ``overlap``: score a chunk while the next one decodes.
    """

    rl: sequence.SequenceRLConfig = sequence.SequenceRLConfig()
    over_provision: float = 2.0
    order: str = "completion"
    abort: bool = True
    chunk: int = 1
    overlap: bool = False

    def __post_init__(self):
        r = self.over_provision
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not 1 <= r < math.inf:
            raise ValueError(f"over_provision={r!r} is not allowed; use a finite number >= 1")
        if self.order not in roll_scheduler.ORDERS:
            raise ValueError(f"order={self.order!r} is not allowed; choose 'completion' or "
                             "'slot'")
        if not isinstance(self.abort, bool) or not isinstance(self.overlap, bool):
            raise ValueError(f"abort={self.abort!r}, overlap={self.overlap!r}: use booleans")
        c = self.chunk
        if isinstance(c, bool) or not isinstance(c, int) or c < 1:
            raise ValueError(f"chunk={c!r} is not allowed; use an int >= 1")
        if self.rl.data_parallel:
            raise ValueError("data_parallel=True is not allowed here; use a device mapping "
                             "(rlvr_lab.papers.roll.mapping)")

    @property
    def groups_per_step(self) -> int:
        return math.ceil(self.over_provision * self.rl.num_prompts - 1e-9)

    @property
    def lag(self) -> int:
        """Decode steps between a decision and the stop beyond the chunk boundary."""
        return self.chunk if self.overlap else 0


# ----------------------------------------------------------------------------- decoder
class DecodeState(NamedTuple):
    """One seed's decoder: KV cache, next-token logits, finished rows and the outputs so far."""

    cache: Any
    logits: jnp.ndarray    # [B, V] logits of the next token
    done: jnp.ndarray      # [B] bool
    tokens: jnp.ndarray    # [B, N] int32 (PAD where nothing was generated)
    logp: jnp.ndarray      # [B, N]
    entropy: jnp.ndarray   # [B, N]
    mask: jnp.ndarray      # [B, N] bool: a token was generated there


def _valid_positions(prompt_valid, max_new_tokens):
    b = prompt_valid.shape[0]
    valid = jnp.concatenate([prompt_valid, jnp.ones((b, max_new_tokens), bool)], axis=1)
    return valid, transformer.positions_for(valid)


def prefill(policy: transformer.Policy, prompts: jax.Array, prompt_valid: jax.Array, *,
            max_new_tokens: int) -> DecodeState:
    """The prompt pass of :func:`rlvr_lab.models.transformer.sample` (cache, first logits)."""
    b, p = prompts.shape
    valid, positions = _valid_positions(prompt_valid, max_new_tokens)
    logits, cache = transformer.module(policy)(prompts, positions[:, :p], prompt_valid,
                                               return_cache=True)
    pad = ((0, 0), (0, max_new_tokens), (0, 0), (0, 0))
    cache = tuple((jnp.pad(k, pad), jnp.pad(v, pad)) for k, v in cache)
    shape = (b, max_new_tokens)
    return DecodeState(cache, logits[:, -1], jnp.zeros((b,), bool),
                       jnp.full(shape, PAD_ID, jnp.int32), jnp.zeros(shape), jnp.zeros(shape),
                       jnp.zeros(shape, bool))


def decode_steps(key: jax.Array, policy: transformer.Policy, state: DecodeState,
                 prompt_valid: jax.Array, start: ArrayLike, stop: ArrayLike,
                 temperature: ArrayLike, top_p: float = 1.0) -> DecodeState:
    """Decode steps ``start <= i < stop`` (traced scalars) of one seed.

    Step ``i`` draws with ``fold_in(key, i)`` exactly as :func:`transformer.sample` does, so
    the tokens are the same as one uninterrupted call; after EOS (or once ``done`` was set
    from outside: an abort) a row emits PAD with ``mask`` False.
    """
    model = transformer.module(policy)
    n = state.tokens.shape[1]
    p = prompt_valid.shape[1]
    valid, positions = _valid_positions(prompt_valid, n)
    columns = jnp.arange(p + n)

    def body(i, st: DecodeState):
        # the private helpers of transformer.sample, so both draw identical tokens
        logp_all = transformer._log_probs(st.logits, temperature)
        token = transformer._draw(jax.random.fold_in(key, i), logp_all, top_p)
        logp = jnp.take_along_axis(logp_all, token[:, None], axis=-1)[:, 0]
        live = ~st.done
        token = jnp.where(live, token, PAD_ID).astype(jnp.int32)
        ent = jnp.where(live, transformer._entropy(logp_all), 0.0)
        col = p + i
        logits, cache = model.decode(token, positions[:, col], col, st.cache,
                                     valid & (columns <= col)[None])
        put = lambda buf, x: buf.at[:, i].set(x.astype(buf.dtype))  # noqa: E731
        return DecodeState(cache, logits, st.done | (token == EOS_ID), put(st.tokens, token),
                           put(st.logp, jnp.where(live, logp, 0.0)), put(st.entropy, ent),
                           put(st.mask, live))

    return jax.lax.fori_loop(start, stop, body, state)


@functools.partial(jax.jit, static_argnames=("max_new_tokens",))
def _prefill(policy, prompts, prompt_valid, *, max_new_tokens: int):
    return sequence.seed_map(functools.partial(prefill, max_new_tokens=max_new_tokens),
                             (0, 0, 0))(policy, prompts, prompt_valid)


@functools.partial(jax.jit, static_argnames=("top_p",))
def decode_chunk(keys: jax.Array, policy: transformer.Policy, state: DecodeState,
                 prompt_valid: jax.Array, stopped: jax.Array, start: ArrayLike, stop: ArrayLike,
                 temperature: ArrayLike, *, top_p: float = 1.0) -> DecodeState:
    """Steps ``[start, stop)`` for every seed; ``stopped [S]`` seeds are aborted first."""
    state = state._replace(done=state.done | stopped[:, None])
    return sequence.seed_map(decode_steps, in_axes=(0, 0, 0, 0, None, None, None, None))(
        keys, policy, state, prompt_valid, start, stop, temperature, top_p)


@functools.partial(jax.jit, static_argnums=(1, 2))
def _candidates(keys, n_pool: int, n_run: int):
    """``n_run`` distinct problems per seed (the draw of :class:`sequence.Trainer` when
    ``n_run == num_prompts``)."""
    return jax.vmap(lambda k: jax.random.choice(streams.stream(k, streams.PROMPTS), n_pool, (n_run,),
                                                replace=False))(keys)


# ----------------------------------------------------------------------------- driver
class Round(NamedTuple):
    """One seed's rollout step: the scheduler, the batch and every response (``[R, G, N]``)."""

    problems: np.ndarray   # [R] pool indices, slot order
    scheduler: roll_scheduler.Scheduler
    batch: np.ndarray      # chosen group slots, slot order
    tokens: np.ndarray     # [R, G, N]
    logp: np.ndarray
    entropy: np.ndarray
    mask: np.ndarray       # [R, G, N] generated tokens
    correct: np.ndarray    # [R, G] verifier verdicts (False where never scored)
    t_stop: int            # decode step at which the seed's generation stopped

    @property
    def counts(self) -> dict:
        return self.scheduler.counts()


class Driver:
    """ROLL's rollout stage around a :class:`sequence.Trainer`'s pool, verifier and evaluation.

    ``trainer`` may be shared between drivers whose RL configs agree on the data and
    sampling settings checked below (the loss or learning rate may differ).
    """

    def __init__(self, config: RollConfig, base_policy=None, verbose: bool = False,
                 trainer: sequence.Trainer | None = None):
        self.config = config
        cfg = config.rl
        self.trainer = trainer or sequence.Trainer(cfg, base_policy=base_policy,
                                                   verbose=verbose)
        for name in ("base", "num_prompts", "num_generations", "temperature", "top_p",
                     "reward_scheme", "num_train_problems"):
            if getattr(self.trainer.config, name) != getattr(cfg, name):
                raise ValueError(f"trainer.config.{name} differs from config.rl.{name}")
        self.n_pool = self.trainer.pool_prompts.shape[0]
        if config.groups_per_step > self.n_pool:
            raise ValueError(f"over_provision={config.over_provision} needs "
                             f"{config.groups_per_step} problems per step; the pool has "
                             f"{self.n_pool}")
        self.verify_seconds = 0.0   # host time spent scoring (overlapped when overlap=True)

    def _score(self, problems, tokens):
        start = time.perf_counter()
        probs = [self.trainer.pool[int(j)] for j in problems]
        rewards, correct = tasks.score_completions(
            probs, np.asarray(tokens)[None], self.config.rl.reward_scheme,
            allow_truncated=self.config.rl.allow_truncated_completions)
        self.verify_seconds += time.perf_counter() - start
        return rewards[0], correct[0]

    def rollout(self, key: jax.Array, policy: transformer.Policy, *,
                abort: bool | None = None) -> list[Round]:
        """One rollout step for every seed (``key [S]``: the step's rollout keys).

        ``abort`` overrides the config (False: the finish-everything run of the same key).
        """
        cfg, rl = self.config, self.config.rl
        abort = cfg.abort if abort is None else abort
        R, G, B, N = cfg.groups_per_step, rl.num_generations, rl.num_prompts, \
            rl.base.max_new_tokens
        cands = np.asarray(_candidates(key, self.n_pool, R))           # [S, R]
        n_seeds = cands.shape[0]
        rows = jnp.asarray(np.repeat(cands, G, axis=1))                  # [S, R*G], g*G + j
        prompts, valid = self.trainer.pool_prompts[rows], self.trainer.pool_valid[rows]
        state = _prefill(policy, prompts, valid, max_new_tokens=N)
        sample_keys = streams.each(key, streams.SAMPLES)
        scheds = [roll_scheduler.Scheduler(R, G, B, order=cfg.order, abort=abort)
                  for _ in range(n_seeds)]
        for sch in scheds:
            sch.start(np.arange(R), 0)
        fed = np.zeros((n_seeds, R * G), bool)
        correct = np.zeros((n_seeds, R, G), bool)
        stopped = np.zeros(n_seeds, bool)
        t_stop = np.full(n_seeds, N)

        def feed(snapshot, t):
            """Score the responses that ended by decode step ``t`` and advance."""
            mask, tokens = (np.asarray(x) for x in snapshot)
            length = mask.sum(-1)
            # ended: EOS emitted or the length cap reached (an aborted row has neither)
            eos = ((tokens == EOS_ID) & mask).any(-1)
            ended = (eos | (length >= N)) & ~fed
            for s in range(n_seeds):
                idx = np.flatnonzero(ended[s])
                if not idx.size:
                    continue
                rewards, ok = self._score(cands[s, idx // G], tokens[s, idx])
                for m in np.argsort(length[s, idx], kind="stable"):
                    i = int(idx[m])
                    g, j, L = i // G, i % G, int(length[s, i])
                    scheds[s].finish(L, g, j, L)
                    scheds[s].reward(L, g, j, float(rewards[m]))
                    correct[s, g, j] = bool(ok[m])
                fed[s, idx] = True
            for s in range(n_seeds):
                if scheds[s].advance(t) and abort and not stopped[s]:
                    stopped[s] = True      # applied before the next chunk is dispatched
                    t_stop[s] = min(t + cfg.lag, N)

        t, pending = 0, None
        while t < N and not stopped.all():
            end = min(t + cfg.chunk, N)
            state = decode_chunk(sample_keys, policy, state, valid, jnp.asarray(stopped),
                                 t, end, rl.temperature, top_p=rl.top_p)
            snapshot = (state.mask, state.tokens)
            if cfg.overlap and pending is not None:
                feed(*pending)        # scored while the chunk just dispatched decodes
            pending = (snapshot, end)
            if not cfg.overlap:
                feed(*pending)
                pending = None
            t = end
            if np.asarray(state.done).all():   # every row ended (or was stopped)
                break
        if pending is not None:
            feed(*pending)
        tokens, logp, ent, mask = (np.asarray(x).reshape(n_seeds, R, G, N) for x in
                                   (state.tokens, state.logp, state.entropy, state.mask))
        rounds = []
        for s, sch in enumerate(scheds):
            # a seed that never decided stopped when its longest response ended
            stop = int(t_stop[s]) if stopped[s] else int(mask[s].sum(-1).max())
            sch.abort(max(stop, sch._clock), mask[s].sum(-1))
            batch = sch.hand_over(sch._clock)
            rounds.append(Round(cands[s], sch, batch, tokens[s], logp[s], ent[s], mask[s],
                                correct[s], stop))
        return rounds

    def batch_arrays(self, rounds: list[Round]
                     ) -> tuple[sequence.RolloutBatch, np.ndarray, np.ndarray, np.ndarray]:
        """Training rows ``[S, B*G, ...]``, rewards and group mask ``[S, B, G]`` of the chosen
        groups (slot order; a short batch repeats its first slot, masked out)."""
        rl = self.config.rl
        B, G = rl.num_prompts, rl.num_generations
        pick, gmask = [], []
        for r in rounds:
            chosen = list(r.batch) + [int(r.batch[0]) if len(r.batch) else 0] * (B - len(r.batch))
            pick.append(chosen)
            gmask.append(np.arange(B) < len(r.batch))
        pick = np.asarray(pick)
        take = lambda name: np.stack([getattr(r, name)[p] for r, p in zip(rounds, pick)])  # noqa: E731
        problems = np.stack([r.problems[p] for r, p in zip(rounds, pick)])   # [S, B]
        rows = jnp.asarray(np.repeat(problems, G, axis=1))
        flat = lambda x: jnp.asarray(x.reshape(x.shape[0], B * G, -1))  # noqa: E731
        batch = sequence.RolloutBatch(
            prompts=self.trainer.pool_prompts[rows], prompt_valid=self.trainer.pool_valid[rows],
            tokens=flat(take("tokens")), mask=flat(take("mask")), behav_logp=flat(take("logp")),
            entropy=flat(take("entropy")))
        rewards = np.stack([r.scheduler.rewards[p] for r, p in zip(rounds, pick)])
        group_mask = np.repeat(np.stack(gmask)[:, :, None], G, axis=2)
        correct = np.stack([r.correct[p] for r, p in zip(rounds, pick)]) & group_mask
        return batch, np.nan_to_num(rewards).astype(np.float32), group_mask, correct

    def rollout_keys(self, key: jax.Array, step: int, num_seeds: int) -> jax.Array:
        """The step's rollout keys ``[S]`` (those of :class:`sequence.Trainer`)."""
        keys = self.trainer.step_keys(key, step, num_seeds)
        return streams.each(keys, streams.ROLLOUT)

    def learn(self, key: jax.Array, state: sequence.TrainState, step: int, rounds: list[Round]
              ) -> tuple[sequence.TrainState, dict[str, np.ndarray]]:
        """One update of every seed on its round's batch -> ``(state, metrics)``."""
        n_seeds = len(rounds)
        step_keys = self.trainer.step_keys(key, step, n_seeds)
        batch, rewards, group_mask, correct = self.batch_arrays(rounds)
        upd = streams.each(step_keys, streams.UPDATE)
        state, metrics = sequence.mapped_update(upd, state, self.trainer.base_policy, batch,
                                                jnp.asarray(rewards), self.config.rl,
                                                group_mask=jnp.asarray(group_mask))
        metrics = {k: np.asarray(v) for k, v in metrics.items()}
        metrics["pass1"] = correct.sum((1, 2)) / np.maximum(group_mask.sum((1, 2)), 1)
        for name in rounds[0].counts:
            metrics[name] = np.array([r.counts[name] for r in rounds], float)
        metrics["t_stop"] = np.array([r.t_stop for r in rounds], float)
        return state, metrics

    def train_step(self, key: jax.Array, state: sequence.TrainState, step: int, *,
                   compare: bool = False
                   ) -> tuple[sequence.TrainState, dict[str, np.ndarray], dict[str, list[Round]]]:
        """One ROLL rollout + one update for every seed -> ``(state, metrics, rounds)``.

        ``compare=True`` also runs the finish-everything rollout of the same key and returns
        it as ``rounds["finish"]`` (the trained batch is always the configured one's).
        """
        n_seeds = jax.tree.leaves(state.opt_state)[0].shape[0]
        roll_keys = self.rollout_keys(key, step, n_seeds)
        rounds = {"roll": self.rollout(roll_keys, state.policy)}
        if compare:
            rounds["finish"] = self.rollout(roll_keys, state.policy, abort=False)
        state, metrics = self.learn(key, state, step, rounds["roll"])
        return state, metrics, rounds


def same_batch(a: Round, b: Round) -> bool:
    """Both rounds train on the same groups with identical tokens, log-probs and rewards."""
    if len(a.batch) != len(b.batch) or np.any(a.batch != b.batch):
        return False
    ga, gb = a.batch, b.batch
    return bool(np.array_equal(a.problems[ga], b.problems[gb])
                and np.array_equal(a.tokens[ga], b.tokens[gb])
                and np.array_equal(a.mask[ga], b.mask[gb])
                and np.array_equal(a.logp[ga], b.logp[gb])
                and np.array_equal(a.scheduler.rewards[ga], b.scheduler.rewards[gb]))


def completion_order_batch(full: Round, batch_size: int,
                           order: str = "completion") -> roll_scheduler.Schedule:
    """The batch the scheduler would pick from a finish-everything round's lengths/rewards."""
    lengths = full.mask.sum(-1)
    return roll_scheduler.schedule(lengths, full.scheduler.rewards, batch_size, order=order,
                                   abort=False)
