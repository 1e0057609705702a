"""DARS on the tiny transformer: budget matching and equal-progress readings.

The DARS stage (:mod:`.stage`) runs on the transformer through ``SequenceSampler``; what the
small-model study adds is how arms that spend different numbers of rollouts per step are
compared:

- :func:`budget_steps` -- the number of GRPO steps (``num_prompts * n`` rollouts each) whose
  total equals a budget (DARS's measured spend), so the arms meet at **equal rollouts**;
- :func:`value_at_level` -- a per-seed metric (token entropy) read when another metric
  (smoothed batch pass@1) first reaches a level, i.e. at **equal progress**;
- :func:`smooth` -- trailing moving average of per-step curves;
- :func:`interaction` -- the depth x breadth interaction of a 2x2, per seed.

All are NumPy (float64) on per-seed curves ``[seeds, steps]``; degenerate inputs are
documented per function and never give NaN except where a seed never reaches a level (then
that seed's value is NaN and the caller reports how many seeds reached it).
"""
from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt


def budget_steps(total_rollouts: float, num_prompts: int, n: int) -> int:
    """Steps of ``num_prompts * n`` rollouts whose total is closest to ``total_rollouts``
    (at least 1)."""
    if num_prompts < 1 or n < 1:
        raise ValueError(f"num_prompts={num_prompts!r} and n={n!r} must be >= 1")
    if not (math.isfinite(total_rollouts) and total_rollouts >= 0):
        raise ValueError(f"total_rollouts={total_rollouts!r} must be a finite number >= 0")
    return max(1, int(round(total_rollouts / (num_prompts * n))))


def smooth(curves: npt.ArrayLike, window: int) -> np.ndarray:
    """Trailing mean over ``window`` steps of ``curves [S, T]`` (the first steps average what
    exists so far), float64."""
    x = np.asarray(curves, np.float64)
    if x.ndim != 2:
        raise ValueError(f"curves must be [seeds, steps]; got shape {x.shape}")
    if window < 1:
        raise ValueError(f"window={window!r} must be >= 1")
    c = np.cumsum(np.pad(x, ((0, 0), (1, 0))), axis=1)
    t = np.arange(1, x.shape[1] + 1)
    lo = np.maximum(t - window, 0)
    return (c[:, t] - c[:, lo]) / (t - lo)


def value_at_level(level_curves: npt.ArrayLike, value_curves: npt.ArrayLike,
                   level: float) -> np.ndarray:
    """Per seed, ``value`` where ``level_curves`` first reaches ``level`` (linear interpolation
    between the two steps around the crossing; the first step if it starts above). ``[S]``;
    NaN for a seed that never reaches the level."""
    lev = np.asarray(level_curves, np.float64)
    val = np.asarray(value_curves, np.float64)
    if lev.shape != val.shape or lev.ndim != 2:
        raise ValueError(f"curves must both be [seeds, steps]; got {lev.shape} and {val.shape}")
    out = np.full(lev.shape[0], np.nan)
    for i in range(lev.shape[0]):
        hit = np.flatnonzero(lev[i] >= level)
        if hit.size == 0:
            continue
        j = hit[0]
        if j == 0:
            out[i] = val[i, 0]
            continue
        w = (level - lev[i, j - 1]) / (lev[i, j] - lev[i, j - 1])
        out[i] = val[i, j - 1] + w * (val[i, j] - val[i, j - 1])
    return out


def interaction(dars_b: npt.ArrayLike, breadth: npt.ArrayLike, dars: npt.ArrayLike,
                grpo: npt.ArrayLike) -> np.ndarray:
    """The 2x2 interaction of depth (DARS) and breadth, per seed (float64):
    ``(dars_b - breadth) - (dars - grpo)``, the DARS gain with breadth minus the DARS gain
    without it (0 when the two effects add). All four are per-seed arrays of one shape, each
    DARS cell paired with its GRPO cell at the DARS cell's own rollouts."""
    cells = [np.asarray(x, np.float64) for x in (dars_b, breadth, dars, grpo)]
    if len({c.shape for c in cells}) != 1:
        raise ValueError("the four cells must have one shape; got "
                         f"{[c.shape for c in cells]}")
    return (cells[0] - cells[1]) - (cells[2] - cells[3])
