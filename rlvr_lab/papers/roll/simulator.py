"""Colocated vs disaggregated device mappings: step time vs devices and model size.

On ``D`` GPUs a synchronous RL step generates ``N x G`` responses, then trains on them.

- **colocated** (all stages on all D GPUs, ROLL's default): ``gen(D) + train(D) + switch(D)``;
  the context switch offloads the trainer's states (``train_bytes_per_param`` x P, sharded
  over D) to the host and back (``offload_gb_s``, twice) and reshards the new weights into
  the inference engine (``reshard_gb_s``). The training phase needs
  ``train_bytes_per_param x P / D`` to fit in usable GPU memory.
- **disaggregated, synchronous**: ``D_g`` GPUs generate, ``D_t = D - D_g`` train;
  ``gen(D_g) + transfer + train(D_t)``, where the weights (``weight_bytes_per_param`` x P)
  travel to the generation GPUs at ``network_gb_s`` (pipelined broadcast: one model's bytes
  plus ``transfer_latency_s``). The same on-policy algorithm as colocated.
- **disaggregated, one-step asynchronous** (ROLL's ``async_generation_ratio = 1``: step k+1
  is generated while step k trains, one policy version stale):
  ``max(gen(D_g), train(D_t) + transfer)``.

The best split ``D_g`` is searched for each D. ``gen(W)`` is *measured* with the rollout
simulator's event core (:func:`rlvr_lab.papers.systems.policies.run_sync`: continuous
batching on W workers, the heavy-tailed length law, ``ENGINE_PRESETS``), so it carries the
long-tail floor: more GPUs stop helping once the longest response dominates. ``train`` is
``TRAINER_PRESETS``' cost ``overhead + tokens x seconds_per_token / D_t``. Bandwidths and
memory are order-of-magnitude assumptions (H100-class node, PCIe 5, 200 Gb/s network),
plausible, not measured; every field is overridable.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from rlvr_lab.papers.systems.engine import ENGINE_PRESETS, TRAINER_PRESETS
from rlvr_lab.papers.systems.lengths import HeavyTailMix
from rlvr_lab.papers.systems.policies import Workload, run_sync

# parameters of the engine presets (rlvr_lab.papers.systems.engine)
MODEL_PARAMS = {"1.5b": 1.5e9, "4b": 4.0e9, "7b": 7.6e9, "8b": 8.0e9}
MODES = ("colocated", "disaggregated", "disaggregated_async")


def _positive(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            value > 0 and math.isfinite(value)):
        raise ValueError(f"{name}={value!r} is not allowed; use a finite number > 0")


@dataclasses.dataclass(frozen=True)
class ClusterConfig:
    """Memory and bandwidth of the cluster (GB = 1e9 bytes)."""

    gpu_memory_gb: float = 80.0
    usable_fraction: float = 0.8          # of GPU memory, for states or weights + KV
    train_bytes_per_param: float = 16.0   # bf16 weights + grads, fp32 master + Adam m, v
    weight_bytes_per_param: float = 2.0   # bf16 inference weights
    offload_gb_s: float = 25.0            # GPU <-> host (PCIe 5 x16, achieved)
    reshard_gb_s: float = 200.0           # trainer -> inference layout on the same GPUs
    network_gb_s: float = 25.0            # trainer GPUs -> generation GPUs (200 Gb/s)
    transfer_latency_s: float = 0.5

    def __post_init__(self):
        for f in dataclasses.fields(self):
            _positive(f.name, getattr(self, f.name))
        if self.usable_fraction > 1:
            raise ValueError(f"usable_fraction={self.usable_fraction!r} is not allowed; "
                             "use a number in (0, 1]")

    @property
    def usable_bytes(self) -> float:
        return self.gpu_memory_gb * 1e9 * self.usable_fraction

    def min_train_gpus(self, params: float) -> int:
        """GPUs whose memory holds the sharded training states."""
        return max(1, math.ceil(self.train_bytes_per_param * params / self.usable_bytes))

    def switch_s(self, params: float, gpus: int) -> float:
        """Colocated context switch: offload + reload the trainer's shard, reshard weights."""
        shard = self.train_bytes_per_param * params / gpus
        return 2 * shard / (self.offload_gb_s * 1e9) \
            + self.weight_bytes_per_param * params / (self.reshard_gb_s * 1e9)

    def transfer_s(self, params: float) -> float:
        """Disaggregated: the new weights to the generation GPUs (pipelined broadcast)."""
        return self.weight_bytes_per_param * params / (self.network_gb_s * 1e9) \
            + self.transfer_latency_s


DEFAULT_CLUSTER = ClusterConfig()


def default_workload(n_groups: int = 512) -> Workload:
    """``n_groups`` prompts x 8 responses of the heavy-tailed reasoning length law (cap
    8192)."""
    return Workload(n_groups=n_groups, group_size=8, prompt_len=512, lengths=HeavyTailMix())


@functools.lru_cache(maxsize=None)
def generation(model: str, workers: int, workload: Workload, seed: int = 0,
               steps: int = 1) -> tuple[float, float]:
    """``(seconds, train tokens)`` per step: synchronous generation of the whole batch on
    ``workers`` inference GPUs (mean over ``steps`` simulated steps, same lengths for every
    worker count)."""
    run = run_sync(seed, workload, ENGINE_PRESETS[model], TRAINER_PRESETS[model],
                   n_workers=workers, steps=steps)
    df = run.steps
    tokens = df["consumed_tokens"] + df["consumed_samples"] * workload.prompt_len
    return float(df["rollout_time"].mean()), float(tokens.mean())


SPLIT_GRID = (1 / 8, 1 / 4, 3 / 8, 1 / 2, 5 / 8, 3 / 4, 7 / 8)


def splits(devices: int, need: int, grid: Sequence[float] | None = SPLIT_GRID) -> list[int]:
    """Candidate generation GPU counts ``D_g`` (``grid=None``: every feasible one)."""
    top = devices - need
    if top < 1:
        return []
    if grid is None:
        return list(range(1, top + 1))
    cand = {1, top} | {int(round(f * devices)) for f in grid}
    return sorted(c for c in cand if 1 <= c <= top)


def step_times(model: str, devices: int, workload: Workload | None = None,
               cluster: ClusterConfig = DEFAULT_CLUSTER, seed: int = 0,
               grid: Sequence[float] | None = SPLIT_GRID) -> dict:
    """Seconds per step of each mode on ``devices`` GPUs (``inf`` where it does not fit) and
    the best generation split of the disaggregated modes (searched over :func:`splits`)."""
    if model not in MODEL_PARAMS:
        raise ValueError(f"model={model!r} is not allowed; choose one of {sorted(MODEL_PARAMS)}")
    if isinstance(devices, bool) or not isinstance(devices, (int, np.integer)) or devices < 2:
        raise ValueError(f"devices={devices!r} is not allowed; use an int >= 2")
    workload = workload or default_workload()
    params, trainer = MODEL_PARAMS[model], TRAINER_PRESETS[model]
    need = cluster.min_train_gpus(params)
    out = {"model": model, "devices": int(devices), "params": params}
    gen, tokens = generation(model, int(devices), workload, seed)
    out["colocated"] = (gen + trainer.step_time(tokens, devices)
                        + cluster.switch_s(params, devices)) if devices >= need else math.inf
    out["colocated_gen"], out["colocated_train"] = gen, trainer.step_time(tokens, devices)
    transfer = cluster.transfer_s(params)
    best = {"disaggregated": (math.inf, 0), "disaggregated_async": (math.inf, 0)}
    for d_gen in splits(int(devices), need, grid):
        g, tok = generation(model, d_gen, workload, seed)
        t = trainer.step_time(tok, devices - d_gen)
        for mode, value in (("disaggregated", g + transfer + t),
                            ("disaggregated_async", max(g, t + transfer))):
            if value < best[mode][0]:
                best[mode] = (value, d_gen)
    for mode, (value, d_gen) in best.items():
        out[mode], out[f"{mode}_gen_gpus"] = value, d_gen
    out["transfer_s"], out["switch_s"] = transfer, cluster.switch_s(params, devices)
    return out


def sweep(models: Iterable[str] = tuple(MODEL_PARAMS),
          devices: Sequence[int] = (2, 4, 8, 16, 32), workload: Workload | None = None,
          cluster: ClusterConfig = DEFAULT_CLUSTER, seed: int = 0,
          grid: Sequence[float] | None = SPLIT_GRID) -> pd.DataFrame:
    """One row per (model, D) with every mode's step time and the speed-ups over colocated."""
    rows = [step_times(m, d, workload, cluster, seed, grid) for m in models for d in devices]
    df = pd.DataFrame(rows)
    df["async_speedup"] = df["colocated"] / df["disaggregated_async"]
    df["sync_speedup"] = df["colocated"] / df["disaggregated"]
    return df


def crossover(df: pd.DataFrame, mode: str = "disaggregated_async") -> dict:
    """Per model: the smallest D from which ``mode`` beats colocated at every larger D in the
    sweep (None: never), and whether colocated wins at the smallest D where it fits."""
    out = {}
    for model, g in df.sort_values("devices").groupby("model", sort=False):
        wins = (g[mode] < g["colocated"]).to_numpy()
        devices = g["devices"].to_numpy()
        first = None
        for i in range(len(wins)):
            if wins[i:].all():
                first = int(devices[i])
                break
        fits = np.isfinite(g["colocated"].to_numpy())
        colocated_first = bool(fits.any() and not wins[np.argmax(fits)])
        out[model] = {"from_devices": first, "colocated_wins_smallest": colocated_first,
                      "wins": wins.tolist(), "devices": devices.tolist()}
    return out
