"""WebGym-style multi-turn agent rollouts: LLM turns interleaved with slow environment steps.

An episode has ``T`` turns (drawn per episode); each turn prefills the new observation
(``obs_tokens``; the history is in the prefix cache but still read by attention), decodes an
action, then waits for the environment (browser) for a random latency.

- **naive** (lock-step): a batch of ``E`` episodes advances turn by turn — every live episode
  generates, the batch waits for the slowest generation, then every live episode steps its
  environment and the batch waits for the slowest environment; the next batch starts when the
  longest episode of the batch ends.
- **async**: ``E`` episodes in flight, each on its own clock: when its action is decoded it
  steps the environment, and when the environment answers its next turn enters the engine's
  queue; a finished episode is replaced at once.

Both use the same engine (continuous batching) and the same number of concurrent episodes, so
the speed-up is what removing the barriers buys.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from rlvr_lab.papers.systems.engine import DEFAULT_ENGINE, DONE, Engine, EngineConfig
from rlvr_lab.papers.systems.lengths import LogNormal, as_rng

if TYPE_CHECKING:
    import jax


@dataclass(frozen=True)
class Latency:
    """Environment latency in seconds: log-normal with median ``median_s``, capped at max_s."""

    median_s: float = 3.0
    sigma: float = 0.8
    max_s: float = 120.0

    def __post_init__(self):
        if not (self.median_s >= 0 and self.sigma >= 0 and self.max_s >= self.median_s):
            raise ValueError(f"Latency(median_s={self.median_s!r}, sigma={self.sigma!r}, "
                             f"max_s={self.max_s!r}) is not allowed; use 0 <= median <= max, "
                             "sigma >= 0")

    def sample(self, rng: int | np.random.Generator | jax.Array, n: int) -> np.ndarray:
        rng = as_rng(rng)
        return np.minimum(self.median_s * np.exp(self.sigma * rng.standard_normal(n)),
                          self.max_s)


@dataclass(frozen=True)
class AgentWorkload:
    """Episodes of a web agent: turns, observation and action tokens, environment latency."""

    concurrency: int = 64                       # E episodes at once (a naive batch)
    min_turns: int = 2
    max_turns: int = 20
    obs_tokens: int = 1500                      # new observation per turn (prefilled)
    action_lengths: object = field(default_factory=lambda: LogNormal(200.0, 0.6, 1024))
    env: Latency = field(default_factory=Latency)

    def __post_init__(self):
        if not (isinstance(self.concurrency, (int, np.integer)) and self.concurrency >= 1):
            raise ValueError(f"concurrency={self.concurrency!r} is not allowed; use an int >= 1")
        if not 1 <= self.min_turns <= self.max_turns:
            raise ValueError(f"min_turns={self.min_turns!r}, max_turns={self.max_turns!r} not "
                             "allowed; use 1 <= min_turns <= max_turns")

    def turns(self, rng: int | np.random.Generator | jax.Array, n: int) -> np.ndarray:
        return as_rng(rng).integers(self.min_turns, self.max_turns + 1, size=n)


class _Episodes:
    """Per-episode plan (turns, action lengths, env latencies) drawn in a fixed order."""

    def __init__(self, wl: AgentWorkload, rng):
        self.wl, self.rng = wl, rng
        self.plans = []

    def new(self):
        n = int(self.wl.turns(self.rng, 1)[0])
        plan = (self.wl.action_lengths.sample(self.rng, n), self.wl.env.sample(self.rng, n))
        self.plans.append(plan)
        return len(self.plans) - 1

    def history(self, e, turn):
        actions = self.plans[e][0]
        return self.wl.obs_tokens * (turn + 1) + int(actions[:turn].sum())


def run_agents(seed: int | np.random.Generator | jax.Array,
               workload: AgentWorkload = AgentWorkload(),
               engine: EngineConfig = DEFAULT_ENGINE, *, n_workers: int = 1,
               n_episodes: int = 256,
               mode: str = "async") -> dict:
    """Simulate ``n_episodes`` episodes; returns episodes/s, wall time and GPU busy fraction."""
    if mode not in ("naive", "async"):
        raise ValueError(f"mode={mode!r} is not allowed; choose 'naive' or 'async'")
    rng = as_rng(seed)
    eng = Engine(engine, n_workers)
    eps = _Episodes(workload, rng)
    for _ in range(n_episodes):     # draw every plan first: both modes see the same episodes
        eps.new()

    def submit_turn(e, turn, t):
        actions = eps.plans[e][0]
        ctx = eps.history(e, turn)
        ids = eng.req.add(ctx, actions[turn], e, t, cached=ctx - workload.obs_tokens)
        turn_of[int(ids[0])] = turn
        eng.submit(ids, t)

    turn_of: dict[int, int] = {}
    t, finished, durations = 0.0, 0, []
    if mode == "naive":
        for start in range(0, n_episodes, workload.concurrency):
            batch = list(range(start, min(start + workload.concurrency, n_episodes)))
            t_batch, turn = t, 0
            while batch:
                eng.hold_until(t)
                for e in batch:
                    submit_turn(e, turn, t)
                t_gen = t
                while eng.in_flight() or eng.queue or eng.pending:
                    t_gen, _ = eng.pop()
                    eng.dispatch(t_gen)
                t = t_gen + max(eps.plans[e][1][turn] for e in batch)
                turn += 1
                batch = [e for e in batch if turn < len(eps.plans[e][0])]
            durations.append(t - t_batch)
        finished = n_episodes
    else:
        events: list[tuple[float, int, int]] = []     # (time, episode, next turn)
        nxt = min(workload.concurrency, n_episodes)
        for e in range(nxt):
            submit_turn(e, 0, 0.0)
        while finished < n_episodes:
            t_eng = eng.next_event_time()
            if events and events[0][0] <= t_eng:
                t, e, turn = heapq.heappop(events)
                if turn < len(eps.plans[e][0]):
                    submit_turn(e, turn, t)
                else:
                    finished += 1
                    if nxt < n_episodes:
                        submit_turn(nxt, 0, t)
                        nxt += 1
                continue
            t, ids = eng.pop()
            for i in ids:
                e, turn = int(eng.req.group[i]), turn_of[int(i)]
                heapq.heappush(events, (t + float(eps.plans[e][1][turn]), e, turn + 1))
            eng.dispatch(t)
    if not np.all(eng.req.status[: eng.req.n] == DONE):
        raise RuntimeError("agent simulation ended with unfinished requests")
    return {"mode": mode, "wall_time": t, "episodes_per_s": finished / t,
            "gpu_busy_fraction": float(eng.busy.sum() / (t * n_workers)),
            "turns": int(sum(len(p[0]) for p in eps.plans)),
            "tokens": int(eng.tokens_generated)}


def speedup(seed: int | np.random.Generator | jax.Array, workload: AgentWorkload = AgentWorkload(),
            engine: EngineConfig = DEFAULT_ENGINE, *, n_workers: int = 1,
            n_episodes: int = 256) -> float:
    """Async over naive episodes per second, same episodes and concurrency."""
    a = run_agents(seed, workload, engine, n_workers=n_workers, n_episodes=n_episodes,
                   mode="async")
    b = run_agents(seed, workload, engine, n_workers=n_workers, n_episodes=n_episodes,
                   mode="naive")
    return a["episodes_per_s"] / b["episodes_per_s"]
