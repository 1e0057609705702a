"""ROLL's rollout scheduler: every sample's lifecycle, and dynamic sampling that aborts.

ROLL (arXiv:2506.06122; code: alibaba/ROLL, ``DynamicSamplingScheduler`` and its
``ReplayBuffer``) manages each prompt of the rollout stage from the moment it is polled until it
is consumed: a prompt is *begun* on the inference workers, its responses are scored by reward
workers as soon as each one ends (scoring overlaps generation), the whole group is then
*committed* (or filtered out), and once ``batch_size`` groups are committed the batch is handed
to training while everything still in flight is *aborted* instead of being finished.

States of one sample (response) here::

    QUEUED -> GENERATING -> REWARDED -> USED          (its group is in the training batch)
                  |             |----> FILTERED      (group rewards all equal: zero advantage)
                  |             |----> SURPLUS       (group informative, batch already full)
                  +-------------+----> ABORTED       (stopped in flight, or never started)

A *group* (the G responses of one prompt) is complete when all its samples are rewarded; its
completion time is the latest reward time. :class:`Scheduler` keeps per-sample states, times
and token counts and decides the batch:

- ``order="completion"`` (ROLL): complete groups are taken in completion order (ties: lower
  slot first); an informative one (rewards not all equal, DAPO's filter) is committed while the
  batch is short, a non-informative one is filtered. The batch is decided when the B-th
  informative group completes.
- ``order="slot"``: the first B informative groups in launch (slot) order, which is DAPO's
  finish-everything filter (:func:`rlvr_lab.train.rollout.informative_groups` on the groups in
  order). Deciding it needs every earlier slot complete, so it can also abort, but later.

With ``abort=True`` everything in flight when the batch is decided (plus the engine's reaction
lag, see :func:`schedule`) is aborted; with ``abort=False`` every launched group runs to the end
(the finish-everything baseline) and the same rule picks the batch. The batch is returned in
slot order, so for a fixed key the trained arrays equal the finish-everything filter's whenever
the same groups are chosen.

Token accounting (exact, per sample): ``generated = used + aborted + filtered + surplus`` and
``wasted = generated - used``; a sample's ``tokens`` never exceed its length.

Everything here is NumPy on the host: the scheduler only sees finish events and rewards, so the
same object drives the tiny transformer's chunked decoder (:mod:`rlvr_lab.papers.roll.engine`),
the event model of :func:`schedule` (lengths known in advance: the bank, the simulator, tests),
and anything else that reports ``finish``/``reward`` events.
"""
from __future__ import annotations

import heapq
import math
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

QUEUED, GENERATING, REWARDED, USED, ABORTED, FILTERED, SURPLUS = range(7)
STATE_NAMES = ("queued", "generating", "rewarded", "used", "aborted", "filtered", "surplus")
TERMINAL = (USED, ABORTED, FILTERED, SURPLUS)
ORDERS = ("completion", "slot")


def informative(rewards: npt.ArrayLike) -> np.ndarray:
    """Bool ``[...]``: a group's rewards (last axis) are not all equal (needs >= 2 samples).

    NumPy twin of :func:`rlvr_lab.train.rollout.informative_groups` without a mask.
    """
    r = np.asarray(rewards, np.float64)
    if r.shape[-1] < 2:
        return np.zeros(r.shape[:-1], bool)
    return r.max(-1) > r.min(-1)


def _int_at_least(name, value, low):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name}={value!r} is not allowed; use an int >= {low}")
    return int(value)


class Scheduler:
    """Lifecycle and batch decision for ``n_groups`` groups of ``group_size`` samples.

    Drive it with events in non-decreasing time: :meth:`start` (queued -> generating),
    :meth:`finish` (a sample's last token, with its token count), :meth:`reward` (its score is
    in), :meth:`advance` (process every group complete by time ``t``; returns True once the
    batch is decided), then :meth:`abort` (in-flight and queued samples) and :meth:`hand_over`
    (committed groups -> used). Times are decode steps (any monotone clock works).

    Public arrays: ``state [R, G]``, ``tokens [R, G]``, ``t_start [R]`` (-1: never started),
    ``t_finish``/``t_reward [R, G]`` (-1: not yet), ``t_complete [R]`` (-1), ``rewards [R, G]``;
    ``committed`` (group ids, in commit order), ``decided_at`` (time the batch was decided,
    None before), ``t_used`` (hand-over time), ``log`` (``(t, event, group, sample)`` tuples,
    sample -1 for group events).
    """

    def __init__(self, n_groups: int, group_size: int, batch_size: int, *,
                 order: str = "completion", abort: bool = True):
        self.R = _int_at_least("n_groups", n_groups, 1)
        self.G = _int_at_least("group_size", group_size, 1)
        self.B = _int_at_least("batch_size", batch_size, 1)
        if self.B > self.R:
            raise ValueError(f"batch_size={batch_size} is not allowed; use <= n_groups={n_groups}")
        if order not in ORDERS:
            raise ValueError(f"order={order!r} is not allowed; choose 'completion' or 'slot'")
        self.order, self.abort_enabled = order, bool(abort)
        shape = (self.R, self.G)
        self.state = np.full(shape, QUEUED, np.int8)
        self.tokens = np.zeros(shape, np.int64)
        self.rewards = np.full(shape, np.nan)
        self.t_start = np.full(self.R, -1, np.int64)
        self.t_finish = np.full(shape, -1, np.int64)
        self.t_reward = np.full(shape, -1, np.int64)
        self.t_complete = np.full(self.R, -1, np.int64)
        self.committed: list[int] = []
        self.decided_at: int | None = None
        self.t_used: int | None = None
        self.log: list[tuple[int, str, int, int]] = []
        self._resolved = np.zeros(self.R, bool)   # complete group already committed/dropped
        self._pending: list[tuple[int, int]] = []  # (t_complete, group), heap
        self._next_slot = 0                        # order="slot": first unresolved slot
        self._clock = 0

    # -- events ----------------------------------------------------------------------
    def _tick(self, t):
        t = int(t)
        if t < self._clock:
            raise ValueError(f"event at t={t} is earlier than the last event t={self._clock}")
        self._clock = t
        return t

    def start(self, groups: npt.ArrayLike, t: int) -> None:
        t = self._tick(t)
        for g in np.atleast_1d(groups):
            g = int(g)
            if self.t_start[g] >= 0 or self.state[g, 0] != QUEUED:
                raise ValueError(f"group {g} cannot start: it is not queued")
            self.t_start[g] = t
            self.state[g] = GENERATING
            self.log.append((t, "start", g, -1))

    def finish(self, t: int, group: int, sample: int, tokens: int) -> None:
        """Sample ``(group, sample)`` generated its last token at ``t`` (``tokens`` in all)."""
        t = self._tick(t)
        if self.state[group, sample] != GENERATING or self.t_finish[group, sample] >= 0:
            raise ValueError(f"sample ({group}, {sample}) is not generating")
        if tokens < 1:
            raise ValueError(f"tokens={tokens!r} is not allowed; a response has >= 1 token")
        self.t_finish[group, sample] = t
        self.tokens[group, sample] = int(tokens)
        self.log.append((t, "finish", int(group), int(sample)))

    def reward(self, t: int, group: int, sample: int, value: float) -> None:
        """The reward worker scored ``(group, sample)`` at ``t`` (after it finished)."""
        t = self._tick(t)
        if self.t_finish[group, sample] < 0 or self.state[group, sample] != GENERATING:
            raise ValueError(f"sample ({group}, {sample}) has not finished generating")
        self.rewards[group, sample] = float(value)
        self.t_reward[group, sample] = t
        self.state[group, sample] = REWARDED
        self.log.append((t, "reward", int(group), int(sample)))
        if np.all(self.state[group] == REWARDED):
            self.t_complete[group] = t
            heapq.heappush(self._pending, (t, int(group)))

    @property
    def decided(self) -> bool:
        return self.decided_at is not None

    def _resolve(self, g: int, t: int):
        """Commit complete group ``g`` or drop it (filtered / surplus)."""
        self._resolved[g] = True
        if not informative(self.rewards[g]):
            self.state[g] = FILTERED
            self.log.append((t, "filter", g, -1))
        elif len(self.committed) < self.B:
            self.committed.append(g)
            self.log.append((t, "commit", g, -1))
            if len(self.committed) == self.B:
                self.decided_at = t
                self.log.append((t, "decide", -1, -1))
        else:
            self.state[g] = SURPLUS
            self.log.append((t, "surplus", g, -1))

    def advance(self, t: int) -> bool:
        """Process every group complete by ``t`` (completion time, then slot); True once the
        batch is decided."""
        t = self._tick(t)
        while self._pending and self._pending[0][0] <= t:
            tc, g = heapq.heappop(self._pending)
            if self.order == "completion":
                self._resolve(g, tc)
            else:
                # the slot-order rule resolves a prefix of slots once all of them are complete
                while (self._next_slot < self.R and self.t_complete[self._next_slot] >= 0
                       and self.t_complete[self._next_slot] <= tc):
                    self._resolve(self._next_slot, tc)
                    self._next_slot += 1
        if self.decided and self.order == "slot":
            # complete groups beyond the B-th informative slot can no longer enter
            for g in np.flatnonzero((self.t_complete >= 0) & ~self._resolved):
                self._resolve(int(g), max(int(self.t_complete[g]), self.decided_at))
        return self.decided

    def abort(self, t: int, tokens: npt.ArrayLike | None = None) -> None:
        """Abort at ``t`` every sample not in a committed group and not yet dropped.

        ``tokens [R, G]``: tokens each in-flight sample had generated when stopped (ignored for
        samples that already finished; 0 for never-started ones). Committed groups are kept
        for :meth:`hand_over`.
        """
        t = self._tick(t)
        keep = np.zeros(self.R, bool)
        keep[self.committed] = True
        live = ~keep[:, None] & np.isin(self.state, (QUEUED, GENERATING, REWARDED))
        unfinished = live & (self.t_finish < 0)
        if tokens is not None:
            tokens = np.asarray(tokens, np.int64)
            if np.any(tokens[unfinished] < 0):
                raise ValueError("aborted token counts must be >= 0")
            self.tokens[unfinished] = tokens[unfinished]
        if not self.abort_enabled and np.any(live & (self.state == GENERATING)):
            raise RuntimeError("abort=False: every launched sample must finish before the "
                               "batch is handed over")
        never = live & (self.state == QUEUED)
        self.tokens[never] = 0
        self.state[live] = ABORTED
        for g in np.flatnonzero(live.any(1)):
            self._resolved[g] = True
            self.log.append((t, "abort", int(g), -1))

    def hand_over(self, t: int) -> np.ndarray:
        """The committed groups become USED at ``t``; returns them in slot order."""
        t = self._tick(t)
        batch = np.sort(np.asarray(self.committed, np.int64))
        for g in batch:
            if not np.all(self.state[g] == REWARDED):
                raise RuntimeError(f"group {g} handed over before all its samples were rewarded")
            self.state[g] = USED
            self.log.append((t, "use", int(g), -1))
        self.t_used = t
        return batch

    # -- bookkeeping -----------------------------------------------------------------
    def counts(self) -> dict:
        """Samples per state and tokens per terminal state (``generated``, ``wasted`` too)."""
        out = {f"samples_{name}": int((self.state == s).sum())
               for s, name in enumerate(STATE_NAMES)}
        for s in TERMINAL:
            out[f"tokens_{STATE_NAMES[s]}"] = int(self.tokens[self.state == s].sum())
        out["tokens_generated"] = int(self.tokens.sum())
        out["tokens_wasted"] = out["tokens_generated"] - out["tokens_used"]
        out["groups_used"] = len(self.committed) if self.t_used is not None else 0
        return out


class Schedule(NamedTuple):
    """What :func:`schedule` returns: the scheduler after hand-over, the batch (slot order),
    the decision time and the time generation stopped."""

    scheduler: Scheduler
    batch: np.ndarray
    decided_at: int | None
    t_stop: int

    @property
    def counts(self) -> dict:
        return self.scheduler.counts()


def schedule(lengths: npt.ArrayLike, rewards: npt.ArrayLike, batch_size: int, *,
             order: str = "completion", abort: bool = True, max_running: int | None = None,
             reward_delay: int = 0, granularity: int = 1, lag: int = 0) -> Schedule:
    """Run the scheduler on an event model where every response's length is known.

    ``lengths [R, G]`` (>= 1): tokens each response has when run to the end (EOS included);
    ``rewards [R, G]``. Lock-step decoding: a group started at ``s`` emits one token per
    response per step, so response j ends at ``s + L_j`` and is rewarded ``reward_delay``
    steps later (asynchronous reward workers). At most ``max_running`` groups generate at
    once (None: all start at 0); a queued group starts when a running group's last response
    ends, in slot order, until the batch is decided.

    The engine checks for an abort only every ``granularity`` decode steps and reacts ``lag``
    steps later (a decoder that runs chunks of k steps and scores a chunk while the next one
    runs has ``granularity=lag=k``), so with ``abort=True`` generation stops at
    ``ceil(t*/granularity)*granularity + lag`` (capped by the last event), where ``t*`` is the
    decision time; an in-flight response started at ``s`` then holds ``min(L, stop - s)``
    tokens. Groups that complete before the stop but after the decision are surplus or
    filtered. The batch itself depends only on completion times, never on ``granularity``
    or ``lag``.
    """
    lengths = np.asarray(lengths, np.int64)
    rewards = np.asarray(rewards, np.float64)
    if lengths.ndim != 2 or rewards.shape != lengths.shape:
        raise ValueError(f"lengths {lengths.shape} and rewards {rewards.shape} must be equal "
                         "[R, G] shapes")
    if lengths.size and lengths.min() < 1:
        raise ValueError(f"lengths must be >= 1, got min {lengths.min()}")
    if not np.all(np.isfinite(rewards)):
        raise ValueError("rewards must be finite")
    R, G = lengths.shape
    running_cap = R if max_running is None else _int_at_least("max_running", max_running, 1)
    _int_at_least("reward_delay", reward_delay, 0)
    k = _int_at_least("granularity", granularity, 1)
    _int_at_least("lag", lag, 0)
    sched = Scheduler(R, G, batch_size, order=order, abort=abort)
    events: list[tuple[int, int, int, int]] = []   # (t, kind, group, sample): 0 end, 1 reward
    queue = list(range(R))
    running = 0

    def launch(t):
        nonlocal running
        while queue and running < running_cap and not (abort and sched.decided):
            g = queue.pop(0)
            sched.start([g], t)
            running += 1
            for j in range(G):
                heapq.heappush(events, (t + int(lengths[g, j]), 0, g, j))
                heapq.heappush(events, (t + int(lengths[g, j]) + reward_delay, 1, g, j))

    launch(0)
    stop = None
    t = 0
    while events:
        t = events[0][0]
        if stop is not None and t > stop:
            break
        while events and events[0][0] == t:
            _, kind, g, j = heapq.heappop(events)
            if kind == 0:
                sched.finish(t, g, j, int(lengths[g, j]))
                if np.all(sched.t_finish[g] >= 0):   # the group's slot frees up
                    running -= 1
            else:
                sched.reward(t, g, j, float(rewards[g, j]))
        sched.advance(t)
        if abort and sched.decided and stop is None:
            stop = math.ceil(sched.decided_at / k) * k + lag
        launch(t)
    if stop is None or not events:
        stop = t if stop is None else min(stop, t)
    # tokens of responses still generating at the stop (lock-step: one per step since start)
    started = sched.t_start >= 0
    partial = np.where(started[:, None],
                       np.minimum(lengths, np.maximum(stop - sched.t_start[:, None], 0)), 0)
    sched.abort(stop, partial)
    batch = sched.hand_over(stop)
    return Schedule(sched, batch, sched.decided_at, stop)


def check(sched: Scheduler, batch_size: int | None = None,
          lengths: npt.ArrayLike | None = None) -> list[str]:
    """The scheduler's invariants; returns the violations (empty when all hold).

    1. every sample is in a terminal state; used groups are exactly the committed ones;
    2. no group is used before all its samples are rewarded (``t_used >= t_reward``);
    3. while the batch is short no complete informative group is dropped: with
       ``order="completion"`` the committed groups are the first informative groups in
       completion order (time, then slot), as many as the batch size allows;
    4. token counts add up (``generated = used + aborted + filtered + surplus``), finished
       samples hold their full length (``lengths`` if given), no sample exceeds it.
    """
    s = sched
    bad = []
    if not np.all(np.isin(s.state, TERMINAL)):
        bad.append("some samples are not in a terminal state")
    used = np.flatnonzero(np.all(s.state == USED, axis=1))
    if sorted(used.tolist()) != sorted(s.committed) or np.any(
            (s.state == USED).any(1) != (s.state == USED).all(1)):
        bad.append("used groups differ from the committed groups")
    for g in used:
        if np.any(s.t_reward[g] < 0) or s.t_used is None or s.t_used < s.t_reward[g].max():
            bad.append(f"group {g} used before all its samples were rewarded")
    complete = np.flatnonzero(s.t_complete >= 0)
    if s.order == "completion":
        order = sorted(complete.tolist(), key=lambda g: (s.t_complete[g], g))
        if s.decided_at is not None:
            order = [g for g in order if s.t_complete[g] <= s.decided_at]
        want = [g for g in order if informative(s.rewards[g])][:s.B]
        if want != list(s.committed):
            bad.append(f"committed {list(s.committed)} != first informative groups in "
                       f"completion order {want}")
        for g in complete:
            if informative(s.rewards[g]) and g not in s.committed and len(s.committed) < s.B:
                bad.append(f"complete informative group {g} dropped while the batch is short")
    else:
        done = np.flatnonzero(np.cumprod(s.t_complete >= 0))
        want = [g for g in done.tolist() if informative(s.rewards[g])][:s.B]
        if sorted(want) != sorted(s.committed):
            bad.append(f"committed {list(s.committed)} != first informative slots {want}")
    if batch_size is not None and s.B != batch_size:
        bad.append("batch size mismatch")
    c = s.counts()
    parts = sum(c[f"tokens_{STATE_NAMES[x]}"] for x in TERMINAL)
    if c["tokens_generated"] != parts:
        bad.append(f"tokens_generated {c['tokens_generated']} != sum over states {parts}")
    fin = s.t_finish >= 0
    if np.any(s.tokens < 0):
        bad.append("negative token count")
    if lengths is not None:
        lengths = np.asarray(lengths)
        if np.any(s.tokens > lengths):
            bad.append("a sample holds more tokens than its length")
        if np.any(s.tokens[fin] != lengths[fin]):
            bad.append("a finished sample does not hold its full length")
    if np.any(s.tokens[s.state == QUEUED] != 0) or np.any(s.tokens[s.t_start < 0] != 0):
        bad.append("a never-started sample holds tokens")
    return bad
