"""Rollout-system simulator: what would synchronous, APRIL, AReaL, ECHO-2 or async agents buy
with *your* length distribution, model and cluster?

Modules (the simulator's are imported here; ``learning`` and ``partial`` train with JAX and
are imported when used):

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
- ``partial``  — APRIL's partial rollouts for real on the tiny transformer (stale-prefix
  treatments).
"""
from rlvr_lab.papers.systems import agents, echo, engine, lengths, policies  # noqa: F401
from rlvr_lab.papers.systems.agents import AgentWorkload, Latency, run_agents
from rlvr_lab.papers.systems.echo import (
    WORKER_TYPES,
    broadcast_delays,
    predict_utilisation,
    provision,
)
from rlvr_lab.papers.systems.engine import (
    ENGINE_PRESETS,
    TRAINER_PRESETS,
    Engine,
    EngineConfig,
    TrainerConfig,
)
from rlvr_lab.papers.systems.lengths import Empirical, HeavyTailMix, LogNormal, constant
from rlvr_lab.papers.systems.policies import (
    Workload,
    areal_admits,
    run_async,
    run_partial,
    run_sync,
)

__all__ = [
    "AgentWorkload", "ENGINE_PRESETS", "Empirical", "Engine", "EngineConfig", "HeavyTailMix",
    "Latency", "LogNormal", "TRAINER_PRESETS", "TrainerConfig", "WORKER_TYPES", "Workload",
    "areal_admits", "broadcast_delays", "constant", "predict_utilisation", "provision",
    "run_agents", "run_async", "run_partial", "run_sync",
]
