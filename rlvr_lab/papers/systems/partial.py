"""APRIL active partial rollouts on the tiny transformer (GRPO with a verifier).

APRIL (code: RLsys-Foundation/APRIL, in slime) changes only the rollout of synchronous RL.
Each step the trainer needs ``N = num_prompts`` complete groups of ``G`` responses:

1. run ``ceil(r * N)`` groups at once (``r = over_provision``): first the FIFO buffer of
   groups left unfinished by earlier rounds, then fresh prompts;
2. stop the round as soon as ``N`` groups are complete and abort every other response;
3. train on the ``N`` complete groups; the others go (in arrival order) back to the FIFO
   buffer with their partial responses. A partial response is resumed next round as
   prompt + partial text under the *new* weights (the KV cache is re-prefilled), so one
   trajectory can span several policy versions.

Round model (lock-step decoding). Every live response gets one token per decode step, as in
a continuously batched engine with all ``r*N*G`` responses resident, so a response needing
``n`` more tokens finishes after ``n`` decode steps and a group after the maximum over its
members. The round therefore ends at ``t* =`` the N-th smallest group finish time; responses
then have ``min(n, t*)`` new tokens. We realise this by sampling every response to the end
(one jitted :func:`rlvr_lab.models.transformer.sample` call with the carried prefix *forced*,
the same causal computation as re-prefilling prompt + prefix) and truncating on the host:
sampling is causal, so the first ``t*`` new tokens are exactly what the aborted engine would
have produced; the discarded tail is regenerated next round under the new weights. Groups are
ranked by finish time (ties in slot order, buffer first); the first ``N`` form the batch, kept
in slot order; groups complete at ``t*`` beyond the first ``N`` stay in the buffer like the
unfinished ones (as in :func:`rlvr_lab.papers.systems.policies.run_partial`; slime's loop drops such
surplus groups, rare in continuous time but frequent with integer lengths, and APRIL's point is
that no rollout is discarded); a completed response of an unfinished group stays complete.
``over_provision=1`` runs exactly ``N`` groups, all of which must finish: plain synchronous
GRPO, and the same numbers as :func:`sequence.run`.

Bookkeeping (host-side NumPy; the sampler and the update are jitted and mapped over seeds).
Every kept token stores its token id, the log-prob and entropy *as generated* and the policy
version (training step) that generated it. A trained token is *stale* when its version is
older than the current one; ``RolloutBatch.stale`` flags it and its ``behav_logp`` is the old
policy's, so :class:`sequence.SequenceRLConfig` applies APRIL's treatments: ``none`` (the
original code: the trainer's own log-probs, no correction), ``mask_stale=True`` (drop the
stale segment) or ``rollout_correction="tis"`` (weight by ``min(pi_train/pi_behav, C)``).

``resume_delay`` (default 0 = APRIL) is a *staleness stress* that APRIL does not have: a
buffered group is resumed only after waiting that many extra steps, so prefixes lag by
``resume_delay + 1`` versions or more.

Per-step metrics (per seed), beside :func:`sequence.update`'s: ``pass1``, ``pass_at_G``,
``stale_token_frac`` (stale / valid trained tokens), ``lag_mean`` / ``lag_max`` (versions,
over stale tokens; 0 when none), ``resumed_group_frac`` (trained groups that carried tokens
from an earlier round), ``round_steps`` (decode steps t* of the round), ``round_tokens``
(tokens generated in the round, aborted partials included), ``buffer_groups`` (after the
round), and ``stale_k1`` / ``stale_k3`` / ``stale_chi2``: the train/rollout mismatch over the
stale tokens only (current-policy log-probs of the forced prefix vs the stored ones).
Deterministic for a key: step ``t`` uses ``fold_in(key, t)`` as :func:`sequence.run` does.
No checkpointing (the buffer would have to be saved too).
"""
from __future__ import annotations

import dataclasses
import functools
import math
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpy.typing as npt

from rlvr_lab import losses
from rlvr_lab.models import transformer
from rlvr_lab.models.transformer import PAD_ID
from rlvr_lab.train import sequence
from rlvr_lab import random_streams as streams

UNSET = -1  # version of a column that holds no kept token


@dataclasses.dataclass(frozen=True)
class PartialConfig:
    """APRIL settings around an RL config (all static).

    ``over_provision`` r >= 1: groups run per round = ``ceil(r * num_prompts)``.
    ``resume_delay`` >= 0: extra steps a buffered group waits before it is resumed (0 = APRIL;
    > 0 is a staleness stress, not part of APRIL).
    """

    rl: sequence.SequenceRLConfig = sequence.SequenceRLConfig()
    over_provision: float = 2.0
    resume_delay: int = 0

    def __post_init__(self):
        r = self.over_provision
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not 1 <= r < math.inf:
            raise ValueError(f"over_provision={r!r} is not allowed; use a finite number >= 1")
        d = self.resume_delay
        if isinstance(d, bool) or not isinstance(d, int) or d < 0:
            raise ValueError(f"resume_delay={d!r} is not allowed; use an int >= 0")
        if self.rl.data_parallel:
            raise ValueError("data_parallel=True is not allowed for partial rollouts; use False")

    @property
    def groups_per_round(self) -> int:
        return math.ceil(self.over_provision * self.rl.num_prompts - 1e-9)


class Group(NamedTuple):
    """One buffered group of G responses (NumPy; the columns past ``length`` are unset)."""

    problem: int          # index into the trainer's problem pool
    tokens: np.ndarray    # [G, N] int32, PAD past length
    logp: np.ndarray      # [G, N] float32, log-prob as generated
    entropy: np.ndarray   # [G, N] float32
    version: np.ndarray   # [G, N] int, policy version that generated the token (UNSET past)
    length: np.ndarray    # [G] kept tokens
    complete: np.ndarray  # [G] bool: ended with EOS or reached max_new_tokens
    ready: int = 0        # first step at which the group may be resumed


def new_group(problem: int, group_size: int, max_new_tokens: int) -> Group:
    shape = (group_size, max_new_tokens)
    return Group(int(problem), np.full(shape, PAD_ID, np.int32), np.zeros(shape, np.float32),
                 np.zeros(shape, np.float32), np.full(shape, UNSET, np.int64),
                 np.zeros(group_size, np.int64), np.zeros(group_size, bool))


def plan_round(finish: npt.ArrayLike, n_target: int) -> tuple[np.ndarray, int]:
    """Which groups complete first: ``(batch, t_stop)`` for group finish times ``finish [R]``.

    ``t_stop`` is the N-th smallest finish time (the round's decode steps); ``batch`` the first
    ``n_target`` groups in order of finish time (ties: lower slot first), returned in slot
    order. Pure NumPy.
    """
    finish = np.asarray(finish)
    if not 1 <= n_target <= finish.shape[0]:
        raise ValueError(f"n_target={n_target} must be in [1, {finish.shape[0]}]")
    order = np.argsort(finish, kind="stable")
    return np.sort(order[:n_target]), int(finish[order[n_target - 1]])


def advance(group: Group, tokens: np.ndarray, logp: npt.ArrayLike, entropy: npt.ArrayLike,
            length: npt.ArrayLike, t_stop: int, version: int) -> Group:
    """The group after a round: keep the prefix, append at most ``t_stop`` new tokens.

    ``tokens/logp/entropy [G, N]`` are the sampler's output with the prefix forced (so its
    first ``group.length`` tokens equal the prefix; their ``logp`` are the current policy's and
    are *not* stored: the prefix keeps the log-probs it was generated with). ``length [G]``:
    the sampled response lengths (through EOS).
    """
    k = group.length
    new_len = np.minimum(length, k + t_stop)
    cols = np.arange(tokens.shape[1])[None]
    old = cols < k[:, None]
    keep = cols < new_len[:, None]
    fresh = keep & ~old
    return group._replace(
        tokens=np.where(keep, tokens, PAD_ID).astype(np.int32),
        logp=np.where(old, group.logp, np.where(fresh, logp, 0.0)).astype(np.float32),
        entropy=np.where(old, group.entropy, np.where(fresh, entropy, 0.0)).astype(np.float32),
        version=np.where(old, group.version, np.where(fresh, version, UNSET)),
        length=new_len, complete=new_len == length)


class RoundStats(NamedTuple):
    t_stop: int        # decode steps of the round
    round_tokens: int  # tokens generated in the round (aborted partials included)
    resumed: int       # trained groups that carried tokens from an earlier round


class Round(NamedTuple):
    """One seed's round: ``running`` groups (slot order: resumed first), the same groups
    ``after`` the round, the ``batch`` slots trained on, the next ``buffer`` (FIFO), stats,
    and the raw sampler ``tokens``/``logp`` ``[R*G, N]`` (prefix forced)."""

    running: list
    after: list
    batch: np.ndarray
    buffer: list
    stats: RoundStats
    tokens: np.ndarray
    logp: np.ndarray


def run_round(groups: list, tokens: npt.ArrayLike, logp: npt.ArrayLike, entropy: npt.ArrayLike,
              mask: npt.ArrayLike, n_target: int,
              version: int) -> tuple[list[Group], np.ndarray, RoundStats]:
    """Host side of one round for one seed.

    ``groups``: the ``R`` running groups in slot order; ``tokens/logp/entropy/mask [R*G, N]``:
    the sampler's output (prefix forced). Returns ``(after, batch, RoundStats)``: every group
    after the round (slot order), and the slots of the ``n_target`` groups to train on.
    """
    r, g = len(groups), groups[0].length.shape[0]
    tokens, logp, entropy = (np.asarray(x).reshape(r, g, -1) for x in (tokens, logp, entropy))
    length = np.asarray(mask).sum(-1).reshape(r, g)
    prefix = np.stack([gr.length for gr in groups])
    need = length - prefix                       # new tokens each response needs this round
    batch, t_stop = plan_round(need.max(1), n_target)
    after = [advance(gr, tokens[i], logp[i], entropy[i], length[i], t_stop, version)
             for i, gr in enumerate(groups)]
    stats = RoundStats(t_stop, int(np.minimum(need, t_stop).sum()),
                       int((prefix[batch] > 0).any(1).sum()))
    return after, batch, stats


def batch_arrays(groups: list, version: int) -> dict:
    """Training arrays ``[B*G, N]`` of complete groups (rows ordered b*G + g)."""
    cat = lambda name: np.concatenate([getattr(gr, name) for gr in groups])  # noqa: E731
    tokens, ver = cat("tokens"), cat("version")
    mask = np.arange(tokens.shape[1])[None] < cat("length")[:, None]
    return {"tokens": tokens, "mask": mask, "behav_logp": cat("logp"),
            "entropy": cat("entropy"), "stale": mask & (ver < version),
            "lag": np.where(mask, version - ver, 0)}


# ----------------------------------------------------------------------------- jitted pieces
# module level, so that drivers of different treatments share the compiled code
@functools.partial(jax.jit, static_argnums=(1, 2))
def _candidates(keys, n_pool: int, n_run: int):
    """Fresh problems per seed ``[S, n_run]``: the draw of :class:`sequence.Trainer` when
    ``n_run == num_prompts``."""
    return jax.vmap(lambda k: jax.random.choice(streams.stream(k, streams.PROMPTS), n_pool, (n_run,),
                                                replace=False))(keys)


@functools.partial(jax.jit, static_argnames=("max_new_tokens", "top_p"))
def _sample(keys, policy, pool_prompts, pool_valid, rows, prefix, prefix_len, temperature, *,
            max_new_tokens: int, top_p: float):
    """Every running response sampled to the end with its kept prefix forced ``[S, R*G, N]``."""
    def one(key, pol, rows, prefix, prefix_len):
        return transformer.sample(streams.stream(key, streams.SAMPLES), pol, pool_prompts[rows],
                                  pool_valid[rows], max_new_tokens=max_new_tokens,
                                  temperature=temperature, top_p=top_p, prefix=prefix,
                                  prefix_len=prefix_len)
    return sequence.seed_map(one, (0, 0, 0, 0, 0))(keys, policy, rows, prefix, prefix_len)


_mismatch = jax.jit(jax.vmap(losses.mismatch_metrics))

# what a shared sequence.Trainer must agree on (data, sampling, evaluation); the rest of the
# RL config (loss, treatment, learning rate) may differ between drivers sharing it
TRAINER_FIELDS = ("base", "num_prompts", "num_generations", "temperature", "top_p",
                  "reward_scheme", "num_train_problems", "eval_problems", "eval_samples",
                  "num_iterations", "num_minibatches", "data_parallel")


# ----------------------------------------------------------------------------- the driver
class Driver:
    """APRIL around a :class:`sequence.Trainer`'s problem pool, verifier and evaluation.

    ``trainer`` may be shared between drivers whose RL configs differ only outside
    :data:`TRAINER_FIELDS` (e.g. the stale-prefix treatment), which saves building the pool
    and compiling the evaluation again.
    """

    def __init__(self, config: PartialConfig, base_policy=None, verbose: bool = False,
                 trainer: sequence.Trainer | None = None):
        self.config = config
        cfg = config.rl
        self.trainer = trainer or sequence.Trainer(cfg, base_policy=base_policy,
                                                   verbose=verbose)
        for name in TRAINER_FIELDS:
            if getattr(self.trainer.config, name) != getattr(cfg, name):
                raise ValueError(f"trainer.config.{name} differs from config.rl.{name}; the "
                                 "trainer must share data, sampling and evaluation settings")
        self.n_pool = self.trainer.pool_prompts.shape[0]
        if config.groups_per_round > self.n_pool:
            raise ValueError(f"over_provision={config.over_provision} needs "
                             f"{config.groups_per_round} problems per round; the pool has "
                             f"{self.n_pool}")

    def init(self, num_seeds: int) -> tuple[sequence.TrainState, list[list[Group]]]:
        """``(TrainState, buffers)`` at step 0: the SFT base and empty FIFO buffers."""
        return self.trainer.init_state(num_seeds), [[] for _ in range(num_seeds)]

    def _running(self, buffer: list, cand, step: int):
        """Groups of this round: ready buffered groups first (FIFO), then fresh problems."""
        cfg = self.config.rl
        n_run = self.config.groups_per_round
        take = set([i for i, gr in enumerate(buffer) if gr.ready <= step][:n_run])
        ready = [gr for i, gr in enumerate(buffer) if i in take]
        waiting = [gr for i, gr in enumerate(buffer) if i not in take]
        fresh = [new_group(p, cfg.num_generations, cfg.base.max_new_tokens)
                 for p in np.asarray(cand)[:n_run - len(ready)]]
        return ready + fresh, waiting

    def rollout(self, key: jax.Array, policy: transformer.Policy, buffers: list,
                step: int) -> list:
        """The APRIL round of every seed (no update): a :class:`Round` per seed.

        ``key`` is the step's rollout key (``random_streams.each(step_keys, ROLLOUT)``, ``[S]``).
        """
        cfg = self.config.rl
        tr = self.trainer
        g, n = cfg.num_generations, cfg.base.max_new_tokens
        cands = np.asarray(_candidates(key, self.n_pool, self.config.groups_per_round))
        running, waiting = zip(*(self._running(buf, c, step) for buf, c in zip(buffers, cands)))
        cat = lambda f: np.stack([np.concatenate([f(gr) for gr in run]) for run in running])  # noqa: E731
        out = _sample(key, policy, tr.pool_prompts, tr.pool_valid,
                      jnp.asarray(cat(lambda gr: np.repeat(gr.problem, g))),
                      jnp.asarray(cat(lambda gr: gr.tokens)),
                      jnp.asarray(cat(lambda gr: gr.length)), cfg.temperature,
                      max_new_tokens=n, top_p=cfg.top_p)
        tokens, logp, ent, mask = (np.asarray(x) for x in out)
        rounds = []
        for s, run in enumerate(running):
            after, batch, st = run_round(list(run), tokens[s], logp[s], ent[s], mask[s],
                                         cfg.num_prompts, step)
            chosen = set(batch.tolist())
            ready = step + 1 + self.config.resume_delay
            buffer = list(waiting[s]) + [gr._replace(ready=ready)
                                         for i, gr in enumerate(after) if i not in chosen]
            rounds.append(Round(list(run), after, batch, buffer, st, tokens[s], logp[s]))
        return rounds

    def train_step(self, key: jax.Array, state: sequence.TrainState, buffers: list, step: int
                   ) -> tuple[sequence.TrainState, list[list[Group]], dict[str, np.ndarray]]:
        """One APRIL round + one update for every seed -> ``(state, buffers, metrics)``."""
        cfg = self.config.rl
        tr = self.trainer
        num_seeds, g, n = len(buffers), cfg.num_generations, cfg.base.max_new_tokens
        step_keys = tr.step_keys(key, step, num_seeds)
        rounds = self.rollout(streams.each(step_keys, streams.ROLLOUT),
                              state.policy, buffers, step)
        batches = [[r.after[i] for i in r.batch] for r in rounds]
        buffers = [r.buffer for r in rounds]
        stats = [r.stats for r in rounds]
        # log-probs of the batch rows under the current policy (the prefix forced): what the
        # trainer sees, for the mismatch over the stale segment
        current = [r.logp.reshape(len(r.after), g, n)[r.batch].reshape(-1, n) for r in rounds]
        arrays = [batch_arrays(b, step) for b in batches]
        stack = lambda name: np.stack([a[name] for a in arrays])  # noqa: E731
        idx = np.stack([[gr.problem for gr in b] for b in batches])
        rows = jnp.asarray(np.repeat(idx, g, axis=1))
        rollout = sequence.RolloutBatch(
            prompts=tr.pool_prompts[rows], prompt_valid=tr.pool_valid[rows],
            tokens=jnp.asarray(stack("tokens")), mask=jnp.asarray(stack("mask")),
            behav_logp=jnp.asarray(stack("behav_logp")), entropy=jnp.asarray(stack("entropy")),
            stale=jnp.asarray(stack("stale")))
        rewards, correct = tr.verify(idx, rollout.tokens)
        upd_keys = streams.each(step_keys, streams.UPDATE)
        state, metrics = sequence.mapped_update(upd_keys, state, tr.base_policy, rollout,
                                                jnp.asarray(rewards), cfg)
        metrics = {k: np.asarray(v) for k, v in metrics.items()}
        metrics["pass1"] = correct.mean(axis=(1, 2))
        metrics[f"pass_at_{g}"] = correct.any(axis=2).mean(axis=1)
        stale, lag, valid = stack("stale"), stack("lag"), stack("mask")
        n_stale = stale.sum(axis=(1, 2))
        metrics["stale_token_frac"] = n_stale / np.maximum(valid.sum(axis=(1, 2)), 1)
        metrics["lag_mean"] = np.where(stale, lag, 0).sum(axis=(1, 2)) / np.maximum(n_stale, 1)
        metrics["lag_max"] = np.where(stale, lag, 0).max(axis=(1, 2)).astype(float)
        for name, values in _mismatch(jnp.asarray(np.stack(current)), rollout.behav_logp,
                                      rollout.stale).items():
            metrics[f"stale_{name}"] = np.where(n_stale > 0, np.asarray(values), 0.0)
        metrics["resumed_group_frac"] = np.array([st.resumed for st in stats]) / cfg.num_prompts
        metrics["round_steps"] = np.array([st.t_stop for st in stats], float)
        metrics["round_tokens"] = np.array([st.round_tokens for st in stats], float)
        metrics["buffer_groups"] = np.array([len(b) for b in buffers], float)
        return state, buffers, metrics

    def evaluate(self, key: jax.Array, state: sequence.TrainState, step: int) -> np.ndarray:
        """Held-out pass@k ``[S, eval_samples]`` (:meth:`sequence.Trainer.evaluate`)."""
        return self.trainer.evaluate(key, state, step)


def run(config: PartialConfig, key: jax.Array, num_seeds: int = 1, *, driver: Driver | None = None,
        stop_after: int | None = None, verbose: bool = False) -> sequence.Run:
    """Train ``num_seeds`` seeds with APRIL partial rollouts for ``config.rl.steps`` steps.

    Held-out evaluation at step 0, every ``eval_every`` steps and at the end, as
    :func:`sequence.run`; returns a :class:`sequence.Run` (``frame()``, ``eval_frame()``).
    ``stop_after``: stop (and evaluate) after that many steps -- a shorter run that reuses the
    code compiled for ``config`` (``steps`` is part of the static config).
    """
    driver = driver or Driver(config, verbose=verbose)
    cfg = config.rl
    last = cfg.steps if stop_after is None else min(stop_after, cfg.steps)
    start = time.perf_counter()
    state, buffers = driver.init(num_seeds)
    history: dict[str, list] = {}
    evals = {"step": [0], "pass_at": [driver.evaluate(key, state, 0)]}
    for step in range(last):
        state, buffers, out = driver.train_step(key, state, buffers, step)
        for k, v in out.items():
            history.setdefault(k, []).append(np.asarray(v))
        done = step + 1
        if done % cfg.eval_every == 0 or done == last:
            evals["step"].append(done)
            evals["pass_at"].append(driver.evaluate(key, state, done))
        if verbose:
            print(f"step {done}: pass1 {np.mean(out['pass1']):.3f} stale "
                  f"{np.mean(out['stale_token_frac']):.3f} t* {np.mean(out['round_steps']):.1f}")
    return sequence.Run(state=state, steps_done=last,
                        history={k: np.stack(v) for k, v in history.items()},
                        evals={"step": np.asarray(evals["step"]),
                               "pass_at": np.stack(evals["pass_at"])},
                        seconds=time.perf_counter() - start)
