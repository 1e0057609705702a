"""ECHO-2-style remote rollout workers: dissemination latency, bounded staleness, cost.

A central learner trains on ``learner_gpus`` GPUs; heterogeneous remote workers generate with
the latest weights they have received. Three pieces:

**Broadcast** (:func:`broadcast_delays`). A model of ``M`` bytes reaches worker j (1-based):
one-to-many from the learner's uplink ``b0`` (sent to one worker after another) at
``j*M/b0``, so the last worker waits ``D = N*M/b0``; a pipelined peer chain (learner -> w1 ->
w2 -> ..., the model cut into chunks of ``c`` bytes, each link ``b``) at
``M/b + (j-1)*c/b``, so ``D = M/b + (N-1)*c/b`` — almost flat in N. The chunk-level
store-and-forward simulation :func:`pipelined_broadcast_sim` checks the closed form.

**Capacity model** [ours; ECHO-2's equations were not retrievable]. Let ``T`` be the learner's
step time, ``B_tok`` the decode tokens a batch needs, ``Theta = sum_i theta_i`` the workers'
saturated decode throughput, ``D`` the dissemination latency (incl. loading), ``L`` the time a
worker needs to finish one group, and ``S`` the staleness bound (step k may use groups
started by version >= k-S). Version k-S is published when step k-S-1 ends; it reaches the
workers after D, a group is ready L later, and step k must start T before it ends, so in
steady state ``(S+1)*T_step >= T + D + L``. Throughput gives ``T_step >= B_tok/Theta``, and the
learner cannot go faster than ``T``. Hence

    T_step = max(T, B_tok/Theta, (T + D + L)/(S+1)),   utilisation U = T / T_step.

The learner stays busy iff ``Theta >= B_tok/T`` and ``D + L <= S*T``. :func:`provision` adds
workers cheapest-per-throughput first until the predicted U reaches a target.

**Simulation**: :func:`simulate` runs ``policies.run_async`` with per-worker speed, slots and
arrival delays and staleness bound S, so the model can be checked against it.

Worker types (:data:`WORKER_TYPES`) are assumptions: decode speed relative to an H100 scaled by
memory bandwidth, concurrency cap from KV memory left after the weights of a ~4B model
(``ENGINE_PRESETS["4b"]``), and ballpark public hourly rental prices (not the paper's numbers).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from rlvr_lab.papers.systems.engine import (
    ENGINE_PRESETS,
    TRAINER_PRESETS,
    Engine,
    EngineConfig,
    TrainerConfig,
)

from rlvr_lab.papers.systems.lengths import as_rng
from rlvr_lab.papers.systems.policies import Run, Workload, run_async

if TYPE_CHECKING:
    import jax

ENGINE_4B, TRAINER_4B = ENGINE_PRESETS["4b"], TRAINER_PRESETS["4b"]


@dataclass(frozen=True)
class WorkerType:
    """A rentable inference GPU: relative decode speed, concurrency cap, price in $/h."""

    name: str
    speed: float
    slots: int
    price_per_hour: float

    def __post_init__(self):
        if not (self.speed > 0 and self.slots >= 1 and self.price_per_hour >= 0):
            raise ValueError(f"WorkerType {self.name!r}: speed={self.speed!r}, slots="
                             f"{self.slots!r}, price={self.price_per_hour!r} not allowed; "
                             "use speed > 0, slots >= 1, price >= 0")


WORKER_TYPES = {   # slots: KV memory left after 8 GB of weights at ~1k-token contexts
    "h100": WorkerType("h100", 1.00, 256, 2.49),     # 3.35 TB/s, 80 GB
    "a100": WorkerType("a100", 0.60, 256, 1.29),     # 2.0 TB/s, 80 GB
    "l40s": WorkerType("l40s", 0.26, 192, 0.86),     # 0.86 TB/s, 48 GB
    "rtx4090": WorkerType("rtx4090", 0.30, 96, 0.34),  # 1.0 TB/s, 24 GB
}


# ----------------------------------------------------------------------------- broadcast
BROADCAST_MODES = ("one_to_many", "pipelined")


def broadcast_delays(n_workers: int, model_bytes: float, bandwidth: float, *,
                     mode: str = "pipelined", chunk_bytes: float = 64e6) -> np.ndarray:
    """Seconds until worker j = 1..N holds the whole new model (see the module docstring)."""
    if mode not in BROADCAST_MODES:
        raise ValueError(f"mode={mode!r} is not allowed; choose one of {BROADCAST_MODES}")
    if not (n_workers >= 0 and model_bytes > 0 and bandwidth > 0 and chunk_bytes > 0):
        raise ValueError(f"n_workers={n_workers!r}, model_bytes={model_bytes!r}, bandwidth="
                         f"{bandwidth!r}, chunk_bytes={chunk_bytes!r}: use N >= 0, sizes > 0")
    j = np.arange(1, n_workers + 1, dtype=np.float64)
    if mode == "one_to_many":
        return j * model_bytes / bandwidth
    return model_bytes / bandwidth + (j - 1) * chunk_bytes / bandwidth


def pipelined_broadcast_sim(n_workers: int, model_bytes: float, bandwidth: float,
                            chunk_bytes: float) -> np.ndarray:
    """Chunk-level store-and-forward simulation of the chain broadcast (a reference).

    Link j (node j-1 -> node j) sends chunks in order, one at a time, each in c/b seconds, and
    can forward a chunk only after receiving it. Returns when each worker has the last chunk.
    """
    m = math.ceil(model_bytes / chunk_bytes)
    hop = chunk_bytes / bandwidth
    have = np.zeros(m)                 # the learner holds every chunk at t = 0
    out = []
    for _ in range(n_workers):
        arrive = np.zeros(m)
        link_free = 0.0
        for i in range(m):
            arrive[i] = max(have[i], link_free) + hop
            link_free = arrive[i]
        out.append(arrive[-1])
        have = arrive
    return np.array(out)


# ----------------------------------------------------------------------------- capacity
def measure_worker(seed: int | np.random.Generator | jax.Array, worker: WorkerType,
                   workload: Workload, engine: EngineConfig = ENGINE_4B, *,
                   horizon_requests: int = 2000) -> tuple[float, float]:
    """Saturated decode throughput theta (tok/s) and group latency L (s) of one worker.

    Closed loop: a worker kept full (every finished request is replaced at once); theta is
    measured after the first quarter of the requests. L = E[max of G lengths] / (theta/slots),
    the time a group takes at the per-sequence token rate of a full worker.
    """
    rng = as_rng(seed)
    eng = Engine(engine, 1, speed=[worker.speed], slots=[worker.slots])
    lengths = workload.lengths.sample(rng, horizon_requests)
    nxt = min(worker.slots, horizon_requests)
    eng.submit(eng.req.add(workload.prompt_len, lengths[:nxt], 0, 0.0), 0.0)
    done, t_mark, tok_mark = 0, None, 0
    t = 0.0
    while done < horizon_requests:
        t, ids = eng.pop()
        done += ids.size
        if t_mark is None and done >= horizon_requests // 4:
            t_mark, tok_mark = t, eng.tokens_generated
        take = min(ids.size, horizon_requests - nxt)
        if take > 0:
            eng.submit(eng.req.add(workload.prompt_len, lengths[nxt:nxt + take], 0, t), t)
            nxt += take
        if nxt >= horizon_requests and eng.in_flight() < worker.slots:
            break     # the worker is no longer saturated
    theta = (eng.tokens_generated - tok_mark) / max(t - t_mark, 1e-12)
    draws = workload.lengths.sample(rng, 4000 * workload.group_size)
    g_max = draws.reshape(4000, workload.group_size).max(axis=1)
    latency = float(g_max.mean()) / (theta / worker.slots)
    return float(theta), latency


def predict_step_time(theta_total: float, t_train: float, batch_tokens: float,
                      dissemination: float, group_latency: float,
                      staleness_bound: int) -> float:
    """The capacity model's steady-state learner step time (module docstring)."""
    if theta_total <= 0:
        return math.inf
    return max(t_train, batch_tokens / theta_total,
               (t_train + dissemination + group_latency) / (staleness_bound + 1))


def predict_utilisation(theta_total: float, t_train: float, batch_tokens: float,
                        dissemination: float, group_latency: float,
                        staleness_bound: int) -> float:
    """Predicted learner utilisation ``T / T_step`` (1 = always busy)."""
    return t_train / predict_step_time(theta_total, t_train, batch_tokens, dissemination,
                                       group_latency, staleness_bound)


@dataclass(frozen=True)
class Network:
    """How new weights reach the workers."""

    model_bytes: float = 8e9          # ~4B parameters in bf16
    bandwidth: float = 1.25e9         # 10 Gbit/s per link (and learner uplink)
    chunk_bytes: float = 64e6
    mode: str = "pipelined"

    def delays(self, n_workers: int) -> np.ndarray:
        return broadcast_delays(n_workers, self.model_bytes, self.bandwidth, mode=self.mode,
                                chunk_bytes=self.chunk_bytes)


def batch_decode_tokens(workload: Workload, n: int = 200_000) -> float:
    return workload.n_groups * workload.group_size * workload.lengths.mean(n)


def learner_step_time(workload: Workload, trainer: TrainerConfig, learner_gpus: int) -> float:
    tokens = workload.n_groups * workload.group_size * (workload.prompt_len
                                                        + workload.lengths.mean())
    return trainer.step_time(tokens, learner_gpus)


def provision(pool: list[WorkerType], measured: dict, workload: Workload,
              trainer: TrainerConfig, learner_gpus: int, network: Network,
              staleness_bound: int, *, order: str = "cost", target: float = 0.95,
              seed: int | np.random.Generator | jax.Array = 0,
              model: str = "refined") -> tuple[list[WorkerType], float]:
    """Activate workers from ``pool`` one by one until the predicted utilisation >= target.

    ``order``: "cost" (cheapest price per unit throughput first — the provisioning rule),
    "throughput" (fastest first), or "random". ``model``: "refined"
    (:func:`predict_for_refined`) or "bound" (:func:`predict_for`).
    ``measured[name] = (theta, L)`` from :func:`measure_worker`. Returns (active workers,
    predicted utilisation).
    """
    if order not in ("cost", "throughput", "random"):
        raise ValueError(f"order={order!r} is not allowed; choose 'cost', 'throughput', 'random'")
    if model not in ("refined", "bound"):
        raise ValueError(f"model={model!r} is not allowed; choose 'refined' or 'bound'")
    if order == "cost":
        ranked = sorted(pool, key=lambda w: w.price_per_hour / measured[w.name][0])
    elif order == "throughput":
        ranked = sorted(pool, key=lambda w: -measured[w.name][0])
    else:
        ranked = [pool[i] for i in as_rng(seed).permutation(len(pool))]
    t_train = learner_step_time(workload, trainer, learner_gpus)
    b_tok = batch_decode_tokens(workload)
    active, util = [], 0.0
    for w in ranked:
        active.append(w)
        if model == "bound":
            util = predict_for(active, measured, t_train, b_tok, network, trainer,
                               staleness_bound)
        else:
            util = predict_for_refined(active, measured, workload, t_train, network, trainer,
                                       staleness_bound, seed=seed)[0]
        if util >= target:
            break
    return active, util


def predict_for(active: Sequence[WorkerType], measured: Mapping[str, tuple[float, float]],
                t_train: float, batch_tokens: float, network: Network, trainer: TrainerConfig,
                staleness_bound: int) -> float:
    """Bound model (the ECHO-2 paper): utilisation of a set of active workers from worst-case D."""
    theta = sum(measured[w.name][0] for w in active)
    d = float(network.delays(len(active)).max()) + trainer.weight_sync_s if active else 0.0
    # the batch is filled mostly by the fast workers: throughput-weighted group latency
    lat = sum(measured[w.name][0] * measured[w.name][1] for w in active) / max(theta, 1e-12)
    return predict_utilisation(theta, t_train, batch_tokens, d, lat, staleness_bound)


def predict_for_refined(active: Sequence[WorkerType],
                        measured: Mapping[str, tuple[float, float]], workload: Workload,
                        t_train: float, network: Network, trainer: TrainerConfig,
                        staleness_bound: int, *, seed: int | np.random.Generator | jax.Array = 0,
                        n_mc: int = 4000) -> tuple[float, float, float]:
    """Refined capacity model [ours]: only groups fresh enough at consumption count.

    A group starts at a uniform phase of the version clock on worker i (chosen in proportion
    to its throughput) whose local version lags by its dissemination delay ``D_i`` (+ load),
    takes ``l = max of G lengths / (theta_i/slots_i)``, and is used by the first learner step
    that starts after it completes; it is dropped if that step's version minus its start
    version exceeds S. With ``p(T_step)`` the fraction of groups kept, the learner step time
    is the smallest ``T_step >= T`` with ``B/T_step <= p(T_step) * Theta / E[group tokens]``
    (found by bisection; ``p`` grows with T_step); ``Theta`` is reduced by the fraction of
    time a worker spends loading weights (``weight_sync_s`` per version). Returns
    (utilisation, T_step, p).
    """
    if not active:
        return 0.0, math.inf, 0.0
    rng = as_rng(seed)
    thetas = np.array([measured[w.name][0] for w in active])
    rates = thetas / np.array([w.slots for w in active])
    delays = network.delays(len(active)) + trainer.weight_sync_s
    who = rng.choice(len(active), size=n_mc, p=thetas / thetas.sum())
    draws = workload.lengths.sample(rng, n_mc * workload.group_size).reshape(n_mc, -1)
    lat = draws.max(axis=1) / rates[who]
    phase = rng.random(n_mc)
    group_tokens = float(draws.sum(axis=1).mean())
    supply = thetas.sum() / group_tokens          # groups per second, all kept

    def kept(t_step):
        start = phase * t_step + 10 * t_step            # any time well after start-up
        v_loc = np.floor((start - delays[who]) / t_step)
        idle = t_step - t_train                          # step k trains in [k T_s + idle, ...)
        k = np.ceil((start + lat - idle) / t_step)
        return float(np.mean(k - v_loc <= staleness_bound))

    def feasible(t_step):   # a worker loading weights (weight_sync_s per version) is idle
        busy = max(0.0, 1.0 - trainer.weight_sync_s / t_step)
        return workload.n_groups / t_step <= kept(t_step) * supply * busy

    lo, hi = t_train, t_train
    while not feasible(hi):
        hi *= 2
        if hi > 1e6 * t_train:
            return 0.0, math.inf, 0.0
    if feasible(lo):
        return 1.0, t_train, kept(lo)
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if feasible(mid) else (mid, hi)
    return t_train / hi, hi, kept(hi)


def simulate(seed: int | np.random.Generator | jax.Array, active: list[WorkerType],
             workload: Workload, *,
             engine: EngineConfig = ENGINE_4B, trainer: TrainerConfig = TRAINER_4B,
             learner_gpus: int = 4, learner_price_per_hour: float = 2.49,
             network: Network = Network(), staleness_bound: int = 4, steps: int = 12,
             warmup: int | None = None) -> Run:
    """Run the remote-worker system; returns ``policies.Run`` with ECHO-2 extras in summary()."""
    n = len(active)
    if n == 0:
        raise ValueError("active=[] is not allowed; activate at least one worker")
    k_max = max(w.slots for w in active)
    eng_cfg = EngineConfig(engine.tau0, engine.tau1, engine.tau2, engine.prefill_per_token,
                           max(k_max, 1))
    run = run_async(seed, workload, eng_cfg, trainer, n_workers=n, train_gpus=learner_gpus,
                    steps=steps, eta=None, interrupt=False,
                    speed=[w.speed for w in active], slots=[w.slots for w in active],
                    delays=network.delays(n), max_staleness=staleness_bound, warmup=warmup)
    price = sum(w.price_per_hour for w in active) + learner_gpus * learner_price_per_hour
    run.extra["price_per_hour"] = price
    run.gpu_price_per_hour, run.n_gpus = price, 1      # cost_per_step = price * T_step
    return run
