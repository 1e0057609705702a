"""Cost model and event core of the rollout simulator: continuous batching on W workers.

**Cost model.** One inference worker is one GPU serving one model replica with continuous
batching of at most ``K`` concurrent sequences. A decode step over ``b`` active sequences whose
contexts sum to ``C`` tokens takes ``tau0 + tau1*b + tau2*C`` seconds (weights read + launch
overhead; per-sequence matmul and sampling; KV-cache read), and produces one token per
sequence. Admitting requests stalls the worker for ``prefill_per_token`` seconds per prompt
(or resumed prefix) token. Between two events of a worker its batch is constant and each
context grows by one per step, so ``n`` steps take, in closed form,
``n*(tau0 + tau1*b + tau2*C) + tau2*b*n*(n-1)/2`` — see :meth:`EngineConfig.steps_time`.

**Why an event queue and not token-by-token vectorisation.** A reasoning batch runs 10^3–10^4
decode steps and hundreds of workers are out of phase with one another; stepping every token
of every worker would cost 10^7 array updates per training step. With the closed form, each
worker jumps from one completion to the next in O(K) NumPy work, and the global queue is an
``argmin`` over a length-W array of next-event times (cheaper than a heap at W <= 10^3 because
every admission or weight update reschedules a worker). The cost of a simulation is
O(#requests * (K + W)) NumPy element-operations: thousands of requests on hundreds of
workers take well under a second. Policies (``policies.py``, ``echo.py``, ``agents.py``) drive
the core: they submit requests, pop completions, abort, and push weight versions.

**Defaults** (:data:`ENGINE_PRESETS`, :data:`TRAINER_PRESETS`) are order-of-magnitude
calibrations for one H100-class GPU (~3 TB/s HBM, ~400 TFLOP/s achieved bf16), bf16 weights and
KV cache, GQA: for an 8B Llama-style model the weights are ~16 GB (tau0 ≈ 8 ms incl. launch
overhead), a token costs 2*8e9 FLOP (tau1 ≈ 3e-5 s), the KV cache is 131 kB/token
(32 layers x 8 KV heads x 128 dims x K,V x 2 bytes; tau2 ≈ 4.4e-8 s per context token per step),
prefill ≈ 4e-5 s/token, and ~60 GB of KV memory admits K ≈ 128 sequences of ~3k tokens.
Training costs ~8 x params FLOP per token (forward+backward plus log-prob recomputation) at
~35% MFU. Every field is overridable; these are plausible, not measured, numbers.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt


def _positive(name, value, *, allow_zero=True):
    ok = value >= 0 if allow_zero else value > 0
    if not (isinstance(value, (int, float, np.integer, np.floating)) and ok
            and math.isfinite(value)):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name}={value!r} is not allowed; use a finite number {bound}")


@dataclass(frozen=True)
class EngineConfig:
    """Decode/prefill cost model of one inference worker (one GPU); times in seconds."""

    tau0: float = 8e-3                # per decode step (weight read + launch overhead)
    tau1: float = 3e-5                # per active sequence per step
    tau2: float = 4.4e-8              # per context token per step (KV-cache read)
    prefill_per_token: float = 4e-5   # per prompt / resumed-prefix token on admission
    max_concurrency: int = 128        # K: concurrent sequences per worker

    def __post_init__(self):
        for name in ("tau1", "tau2", "prefill_per_token"):
            _positive(name, getattr(self, name))
        _positive("tau0", self.tau0, allow_zero=False)
        if not (isinstance(self.max_concurrency, (int, np.integer)) and self.max_concurrency >= 1):
            raise ValueError(f"max_concurrency={self.max_concurrency!r} is not allowed; "
                             "use an int >= 1")

    def step_time(self, b: float, ctx_sum: float) -> float:
        """Seconds for one decode step of ``b`` sequences whose contexts sum to ``ctx_sum``."""
        return self.tau0 + self.tau1 * b + self.tau2 * ctx_sum

    def steps_time(self, n: npt.ArrayLike, b: float, ctx_sum: float) -> float | np.ndarray:
        """Seconds for ``n`` consecutive steps of a fixed batch (contexts grow by 1 per step)."""
        if not isinstance(n, (int, float)):
            n = np.asarray(n, dtype=np.float64)
        return n * (self.tau0 + self.tau1 * b + self.tau2 * ctx_sum) \
            + self.tau2 * b * n * (n - 1) / 2

    def steps_started_before(self, dt: float, b: float, ctx_sum: float) -> int:
        """Number of steps that start strictly before ``dt`` seconds have passed.

        The smallest integer ``n`` with ``steps_time(n) >= dt`` (0 when ``dt <= 0``): the root
        of the quadratic, corrected by one in either direction for rounding.
        """
        if dt <= 0:
            return 0
        a = self.step_time(b, ctx_sum)
        c = self.tau2 * b
        if c == 0:
            n = math.ceil(dt / a)
        else:  # c/2 n^2 + (a - c/2) n - dt = 0
            p = a - c / 2
            n = math.ceil((-p + math.sqrt(p * p + 2 * c * dt)) / c)
        n = max(n, 0)
        while n > 0 and self.steps_time(n - 1, b, ctx_sum) >= dt:
            n -= 1
        while self.steps_time(n, b, ctx_sum) < dt:
            n += 1
        return n

    def prefill_time(self, tokens: float) -> float:
        return self.prefill_per_token * tokens


@dataclass(frozen=True)
class TrainerConfig:
    """Learner cost: ``overhead_s + tokens * seconds_per_token / gpus``, then a weight sync."""

    seconds_per_token: float = 1.6e-4   # per GPU: ~8 x 8e9 FLOP/token at ~35% MFU
    overhead_s: float = 3.0             # optimizer step, data movement, logging
    weight_sync_s: float = 2.0          # pushing new weights into the inference engines

    def __post_init__(self):
        for name in ("seconds_per_token", "overhead_s", "weight_sync_s"):
            _positive(name, getattr(self, name))

    def step_time(self, tokens: float, gpus: int = 1) -> float:
        if gpus < 1:
            raise ValueError(f"gpus={gpus!r} is not allowed; use >= 1")
        return self.overhead_s + tokens * self.seconds_per_token / gpus


DEFAULT_ENGINE = EngineConfig()
DEFAULT_TRAINER = TrainerConfig()

ENGINE_PRESETS = {
    # Qwen2.5-1.5B-like: 3 GB of weights, 28 layers x 2 KV heads x 128 dims -> 28.7 kB/token.
    "1.5b": EngineConfig(tau0=4e-3, tau1=8e-6, tau2=1.0e-8, prefill_per_token=1e-5,
                         max_concurrency=256),
    # Qwen3-4B-like: 8 GB of weights, 36 layers x 8 KV heads x 128 dims -> 147 kB/token.
    "4b": EngineConfig(tau0=5e-3, tau1=2e-5, tau2=4.4e-8, prefill_per_token=2.5e-5,
                       max_concurrency=256),
    # Qwen2.5-7B-like: 15 GB, 28 layers x 4 KV heads -> 57 kB/token.
    "7b": EngineConfig(tau0=7.5e-3, tau1=2.8e-5, tau2=1.9e-8, prefill_per_token=3.5e-5,
                       max_concurrency=128),
    # Llama-3-8B-like: 16 GB, 32 layers x 8 KV heads -> 131 kB/token (the default).
    "8b": EngineConfig(),
}
TRAINER_PRESETS = {
    "1.5b": TrainerConfig(seconds_per_token=3e-5, overhead_s=1.0, weight_sync_s=0.5),
    "4b": TrainerConfig(seconds_per_token=9e-5),
    "7b": TrainerConfig(seconds_per_token=1.4e-4),
    "8b": TrainerConfig(),
}


# ----------------------------------------------------------------------------- requests
QUEUED, RUNNING, DONE, PARTIAL, DROPPED = 0, 1, 2, 3, 4
_EMPTY = np.iinfo(np.int64).max // 4


class Requests:
    """Growable table of requests: prompt and target decode length, progress, versions.

    ``segments[i]`` lists ``(version, tokens)`` pairs: how many of request i's tokens each
    policy version generated (a resumed or weight-updated request spans several versions).
    """

    def __init__(self, capacity: int = 1024):
        self.n = 0
        self._cap = 0
        self.segments: list[list[list[int]]] = []
        self._grow(capacity)

    _FIELDS: ClassVar[dict] = {"prompt": np.int64, "target": np.int64, "generated": np.int64,
               "status": np.int8, "group": np.int64, "v_start": np.int64,
               "t_submit": np.float64, "t_finish": np.float64, "worker": np.int64,
               "seg_start": np.int64, "prefills": np.int64, "cached": np.int64}

    def _grow(self, cap):
        for name, dtype in self._FIELDS.items():
            new = np.zeros(cap, dtype)
            if self._cap:
                new[: self._cap] = getattr(self, name)
            setattr(self, name, new)
        self._cap = cap

    def add(self, prompt: npt.ArrayLike, target: npt.ArrayLike, group: npt.ArrayLike, t: float,
            cached: npt.ArrayLike = 0) -> np.ndarray:
        """New queued requests; ``cached`` prompt tokens are in the prefix cache (not prefilled
        on first admission)."""
        target = np.atleast_1d(np.asarray(target, np.int64))
        m = target.size
        if np.any(target < 1):
            raise ValueError(f"target lengths must be >= 1, got min {target.min()}")
        while self.n + m > self._cap:
            self._grow(2 * self._cap)
        ids = np.arange(self.n, self.n + m)
        self.prompt[ids] = prompt
        self.target[ids] = target
        self.generated[ids] = 0
        self.status[ids] = QUEUED
        self.group[ids] = group
        self.v_start[ids] = -1
        self.t_submit[ids] = t
        self.t_finish[ids] = np.nan
        self.worker[ids] = -1
        self.prefills[ids] = 0
        self.cached[ids] = cached
        self.segments.extend([] for _ in range(m))
        self.n += m
        return ids

    def tokens_by_staleness(self, ids: npt.ArrayLike, version: int) -> tuple[int, int]:
        """(tokens generated by a version older than ``version``, all tokens) of ``ids``."""
        old = total = 0
        for i in np.atleast_1d(ids):
            for v, k in self.segments[i]:
                total += k
                if v < version:
                    old += k
        return old, total


# ----------------------------------------------------------------------------- event core
class Engine:
    """W inference workers x K slots, continuous batching, a shared FIFO queue.

    Each worker's state is valid at its own ``clock``; it is advanced lazily to the time of its
    next completion or to the time of an outside event (admission, abort, weight update). A
    step that has started before an outside event always completes (engines abort and swap
    weights at step boundaries). ``speed[w]`` divides all of worker w's times (heterogeneous
    GPUs).
    """

    def __init__(self, config: EngineConfig, n_workers: int, *, speed=None, slots=None,
                 requests=None):
        if not (isinstance(n_workers, (int, np.integer)) and n_workers >= 1):
            raise ValueError(f"n_workers={n_workers!r} is not allowed; use an int >= 1")
        self.cfg = config
        self.W, self.K = int(n_workers), config.max_concurrency
        self.speed = np.ones(self.W) if speed is None else np.asarray(speed, np.float64)
        if self.speed.shape != (self.W,) or np.any(self.speed <= 0):
            raise ValueError(f"speed must be {self.W} positive numbers, got {speed!r}")
        self.cap = np.full(self.W, self.K, np.int64) if slots is None else \
            np.asarray(slots, np.int64)
        if self.cap.shape != (self.W,) or np.any(self.cap < 1) or np.any(self.cap > self.K):
            raise ValueError(f"slots must be {self.W} ints in [1, {self.K}], got {slots!r}")
        self.req = requests if requests is not None else Requests()
        self.slot = -np.ones((self.W, self.K), np.int64)
        self.rem = np.full((self.W, self.K), _EMPTY, np.int64)   # _EMPTY on free slots
        self.nact = np.zeros(self.W, np.int64)      # active sequences per worker
        self.ctxsum = np.zeros(self.W, np.int64)    # sum of their contexts
        self.ctx = np.zeros((self.W, self.K), np.int64)
        self.clock = np.zeros(self.W)
        self.version = np.zeros(self.W, np.int64)
        self.next_t = np.full(self.W, np.inf)
        self.busy = np.zeros(self.W)          # seconds spent decoding or prefilling
        self.blocked = np.zeros(self.W, bool)  # workers that take no new request
        self.queue: deque = deque()
        self.pending: list[tuple[float, int]] = []   # completions found while advancing
        self.tokens_generated = 0
        self.tokens_prefilled = 0

    # -- bookkeeping -------------------------------------------------------------------
    def _reschedule(self, w):
        b = int(self.nact[w])
        if b == 0:
            self.next_t[w] = np.inf
            return
        n = int(self.rem[w].min())
        self.next_t[w] = (self.clock[w]
                          + self.cfg.steps_time(n, b, int(self.ctxsum[w])) / self.speed[w])

    def _free_slot(self, w, k):
        self.slot[w, k] = -1
        self.rem[w, k] = _EMPTY
        self.ctxsum[w] -= self.ctx[w, k]
        self.ctx[w, k] = 0
        self.nact[w] -= 1

    def _close_segment(self, i, w):
        done = int(self.req.generated[i] - self.req.seg_start[i])
        if done > 0:
            seg = self.req.segments[i]
            v = int(self.version[w])
            if seg and seg[-1][0] == v:
                seg[-1][1] += done
            else:
                seg.append([v, done])
        self.req.seg_start[i] = self.req.generated[i]

    def _apply_steps(self, w, n):
        """Run ``n`` decode steps of worker w's current batch; finished requests go to pending."""
        b = int(self.nact[w])
        if n <= 0 or b == 0:
            return
        active = self.slot[w] >= 0
        dt = self.cfg.steps_time(n, b, int(self.ctxsum[w])) / self.speed[w]
        self.clock[w] += dt
        self.busy[w] += dt
        self.rem[w][active] -= n
        self.ctx[w][active] += n
        self.ctxsum[w] += n * b
        self.req.generated[self.slot[w][active]] += n
        self.tokens_generated += n * b
        for k in np.flatnonzero(self.rem[w] == 0):
            i = int(self.slot[w, k])
            self._close_segment(i, w)
            self.req.status[i] = DONE
            self.req.t_finish[i] = self.clock[w]
            self._free_slot(w, k)
            self.pending.append((float(self.clock[w]), i))

    def advance(self, w: int, t: float) -> None:
        """Bring worker w to time t: every step that starts before t runs to its end."""
        b = int(self.nact[w])
        if b and t > self.clock[w]:
            n = self.cfg.steps_started_before((t - self.clock[w]) * self.speed[w], b,
                                              int(self.ctxsum[w]))
            self._apply_steps(w, min(n, int(self.rem[w].min())))
        self.clock[w] = max(self.clock[w], t)
        self._reschedule(w)

    # -- events ------------------------------------------------------------------------
    def next_event_time(self) -> float:
        t = float(self.next_t.min())
        if self.pending:
            t = min(t, min(s for s, _ in self.pending))
        return t

    def pop(self) -> tuple[float, np.ndarray]:
        """Process the earliest completion(s): returns ``(t, ids)`` (``ids`` empty if none)."""
        t_pend = min((s for s, _ in self.pending), default=math.inf)
        w = int(np.argmin(self.next_t))
        if self.next_t[w] < t_pend:
            self._apply_steps(w, int(self.rem[w].min()))
            self._reschedule(w)
        if not self.pending:
            return math.inf, np.zeros(0, np.int64)
        t = min(s for s, _ in self.pending)
        ids = np.array([i for s, i in self.pending if s == t], np.int64)
        self.pending = [(s, i) for s, i in self.pending if s != t]
        return t, ids

    def submit(self, ids: npt.ArrayLike, t: float, *, front: bool = False) -> None:
        """Put requests in the shared queue (``front=True``: served first, in order)."""
        ids = [int(i) for i in np.atleast_1d(ids)]
        self.req.status[ids] = QUEUED
        if front:
            self.queue.extendleft(reversed(ids))
        else:
            self.queue.extend(ids)
        self.dispatch(t)

    def free_slots(self) -> int:
        """Free slots on workers that are not blocked."""
        return int((self.cap - self.nact)[~self.blocked].sum())

    def in_flight(self) -> int:
        return int(self.nact.sum())

    def dispatch(self, t: float) -> None:
        """Fill free slots from the queue at time t, each into the worker with most free slots."""
        if not self.queue:
            return
        # a Python list: W is small, and numpy's per-call cost dominated this loop
        free = np.where(self.blocked, 0, self.cap - self.nact).tolist()
        admitted: dict[int, list[int]] = {}
        while self.queue:
            most = max(free)
            if most <= 0:
                break
            w = free.index(most)      # the first worker with most free slots (as argmax)
            admitted.setdefault(w, []).append(self.queue.popleft())
            free[w] -= 1
        for w, ids in admitted.items():
            self.advance(w, t)
            tokens = 0
            for i, k in zip(ids, np.flatnonzero(self.slot[w] < 0)):
                self.slot[w, k] = i
                self.nact[w] += 1
                self.rem[w, k] = self.req.target[i] - self.req.generated[i]
                self.ctx[w, k] = self.req.prompt[i] + self.req.generated[i]
                self.ctxsum[w] += self.ctx[w, k]
                tokens += int(self.ctx[w, k]) - int(self.req.cached[i])
                self.req.cached[i] = 0   # a resumed request re-prefills everything
                self.req.status[i] = RUNNING
                self.req.worker[i] = w
                self.req.prefills[i] += 1
                self.req.seg_start[i] = self.req.generated[i]
                if self.req.v_start[i] < 0:
                    self.req.v_start[i] = self.version[w]
            stall = self.cfg.prefill_time(tokens) / self.speed[w]
            self.clock[w] += stall
            self.busy[w] += stall
            self.tokens_prefilled += tokens
            self._reschedule(w)

    def abort(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """Stop everything at time t: returns (partial in-flight ids, never-started queued ids).

        Requests that finish in the step running at t complete normally (they land in
        ``pending``; pop them before the next phase).
        """
        partial = []
        for w in range(self.W):
            self.advance(w, t)
            for k in np.flatnonzero(self.slot[w] >= 0):
                i = int(self.slot[w, k])
                self._close_segment(i, w)
                self.req.status[i] = PARTIAL
                self._free_slot(w, k)
                partial.append(i)
            self._reschedule(w)
        queued = list(self.queue)
        self.queue.clear()
        self.req.status[queued] = PARTIAL
        return np.array(partial, np.int64), np.array(queued, np.int64)

    def set_version(self, t: float, version: int, workers: npt.ArrayLike | None = None, *,
                    pause: float = 0.0, interrupt: bool = True) -> None:
        """Load weights ``version`` on ``workers`` at time t after ``pause`` seconds of transfer.

        In-flight requests keep going under the new weights (AReaL's interruptible
        generation): their KV cache is recomputed, so each pays a re-prefill of its context.
        With ``interrupt=False`` the worker keeps its batch and no re-prefill is charged (the
        swap is treated as free at a step boundary).
        """
        workers = range(self.W) if workers is None else np.atleast_1d(workers)
        for w in workers:
            w = int(w)
            self.advance(w, t)
            active = np.flatnonzero(self.slot[w] >= 0)
            for k in active:
                self._close_segment(int(self.slot[w, k]), w)
            self.version[w] = version
            stall = pause
            if interrupt and active.size:
                tokens = int(self.ctx[w][active].sum())
                stall += self.cfg.prefill_time(tokens) / self.speed[w]
                self.tokens_prefilled += tokens
                self.busy[w] += self.cfg.prefill_time(tokens) / self.speed[w]
            self.clock[w] += stall
            self._reschedule(w)

    def hold_until(self, t: float) -> None:
        """Idle workers cannot start before t (e.g. GPUs lent to the trainer until then)."""
        self.clock = np.maximum(self.clock, t)
        for w in range(self.W):
            self._reschedule(w)
