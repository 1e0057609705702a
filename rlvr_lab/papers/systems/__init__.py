"""Rollout-system simulator: what would synchronous, APRIL, AReaL, ECHO-2 or async agents buy
with *your* length distribution, model and cluster?

Modules (loaded lazily, each independent):

- ``lengths``  — response-length laws (truncated log-normal, heavy-tailed mix, empirical).
- ``engine``   — cost model (decode step ``tau0 + tau1*b + tau2*sum ctx``, prefill, trainer)
  and the event core: continuous batching on W workers x K slots (see its docstring for why an
  event queue).
- ``policies`` — synchronous, APRIL partial rollouts, verl over-sampling with drop, fully
  asynchronous with AReaL's staleness rule; every run gives throughput, trainer idle fraction,
  time per step, staleness distribution, off-policy token fraction, cost per step.
- ``echo``     — ECHO-2 remote workers: broadcast latency, capacity model, provisioning rule.
- ``agents``   — WebGym-style multi-turn agents with environment latency (naive vs async).
- ``learning`` — couples simulated staleness to training on the prompt bank (naive PPO vs
  AReaL decoupled PPO).
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    "EngineConfig": "engine", "TrainerConfig": "engine", "Engine": "engine",
    "ENGINE_PRESETS": "engine", "TRAINER_PRESETS": "engine",
    "LogNormal": "lengths", "HeavyTailMix": "lengths", "Empirical": "lengths",
    "constant": "lengths",
    "Workload": "policies", "run_sync": "policies", "run_partial": "policies",
    "run_async": "policies", "areal_admits": "policies",
    "broadcast_delays": "echo", "predict_utilisation": "echo", "provision": "echo",
    "WORKER_TYPES": "echo",
    "AgentWorkload": "agents", "Latency": "agents", "run_agents": "agents",
}


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    if name in ("lengths", "engine", "policies", "echo", "agents", "learning"):
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_EXPORTS))
