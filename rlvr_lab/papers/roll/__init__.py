"""ROLL (arXiv:2506.06122): rollout scheduler with per-sample lifecycle, device mapping, and
runs past one process.

- ``scheduler`` — per-sample states (queued -> generating -> rewarded -> used / aborted /
  filtered / surplus), dynamic sampling that aborts in-flight responses once the batch holds
  enough informative groups, exact token accounting; an event model for known lengths.
- ``engine``    — the scheduler on the tiny transformer: a chunked KV-cache decoder that
  really stops aborted rows, with the reward scored while the next chunk decodes.
- ``mapping``   — AutoDeviceMapping on ``jax.sharding``: generation, scoring and update
  stages on chosen sub-meshes (colocated or disaggregated), parameters transferred each step.
- ``distributed`` — the seed-sweep and sequence trainers under ``jax.distributed`` (seeds
  sharded over processes, results gathered).
- ``simulator`` — colocated vs disaggregated step time vs devices and model size on the
  rollout-system cost model, with the parameter-transfer and context-switch costs.

Modules are imported when used (``from rlvr_lab.papers.roll import scheduler``): ROLL
registers no estimator or stage, and ``engine``/``mapping`` import JAX models.
"""
