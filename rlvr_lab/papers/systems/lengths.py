"""Response-length laws for the rollout simulator.

A law is a frozen dataclass with ``sample(rng, n) -> int64 array`` of decode lengths in
``[1, l_max]`` and ``mean()`` (exact for the empirical law, numerical otherwise). Three
laws cover what the systems papers talk about:

- :class:`LogNormal` — ``round(exp(N(log median, sigma^2)))`` clipped to ``[1, l_max]``:
  ``sigma`` is the tail-heaviness knob (0 = all lengths equal to the median).
- :class:`HeavyTailMix` — a log-normal body plus a fraction ``tail_frac`` of responses that run
  to (near) the length cap, the shape of reasoning-model length histograms where a few
  responses hit ``max_response_length`` and stall a synchronous batch.
- :class:`Empirical` — resample an observed array of lengths (e.g. from your own logs).

Samplers take a ``numpy.random.Generator`` (the simulator is NumPy; see ``engine.py``);
:func:`as_rng` turns an int seed or a typed ``jax.random.key`` into one, deterministically.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import jax


def as_rng(seed: int | np.random.Generator | jax.Array) -> np.random.Generator:
    """A NumPy generator from an int seed, a typed ``jax.random.key``, or a generator."""
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, (int, np.integer)):
        return np.random.default_rng(int(seed))
    try:  # a typed jax key: use its raw bits as the seed sequence
        import jax
        data = np.asarray(jax.random.key_data(seed)).ravel()
        return np.random.default_rng([int(x) for x in data])
    except Exception as err:
        raise ValueError(f"seed={seed!r} is not allowed; use an int, a jax.random.key or a "
                         "numpy Generator") from err


def _check_lmax(l_max):
    if not (isinstance(l_max, (int, np.integer)) and l_max >= 1):
        raise ValueError(f"l_max={l_max!r} is not allowed; use an int >= 1")


@dataclass(frozen=True)
class LogNormal:
    """Log-normal decode lengths with median ``median`` and log-std ``sigma``, capped at l_max."""

    median: float = 2000.0
    sigma: float = 0.8
    l_max: int = 8192

    def __post_init__(self):
        _check_lmax(self.l_max)
        if not self.median >= 1:
            raise ValueError(f"median={self.median!r} is not allowed; use a value >= 1")
        if not self.sigma >= 0:
            raise ValueError(f"sigma={self.sigma!r} is not allowed; use a value >= 0")

    def sample(self, rng: int | np.random.Generator | jax.Array, n: int) -> np.ndarray:
        rng = as_rng(rng)
        x = np.exp(np.log(self.median) + self.sigma * rng.standard_normal(n))
        return np.clip(np.rint(x), 1, self.l_max).astype(np.int64)

    def mean(self, n: int = 200_000) -> float:
        return float(self.sample(np.random.default_rng(12345), n).mean())


@dataclass(frozen=True)
class HeavyTailMix:
    """Log-normal body; a fraction ``tail_frac`` of responses is uniform in
    ``[tail_lo*l_max, l_max]``."""

    median: float = 1500.0
    sigma: float = 0.6
    tail_frac: float = 0.05
    tail_lo: float = 0.8
    l_max: int = 8192

    def __post_init__(self):
        LogNormal(self.median, self.sigma, self.l_max)  # validates the body
        if not 0 <= self.tail_frac <= 1:
            raise ValueError(f"tail_frac={self.tail_frac!r} is not allowed; use "
                             "0 <= tail_frac <= 1")
        if not 0 < self.tail_lo <= 1:
            raise ValueError(f"tail_lo={self.tail_lo!r} is not allowed; use 0 < tail_lo <= 1")

    def sample(self, rng: int | np.random.Generator | jax.Array, n: int) -> np.ndarray:
        rng = as_rng(rng)
        body = LogNormal(self.median, self.sigma, self.l_max).sample(rng, n)
        tail = rng.integers(int(np.ceil(self.tail_lo * self.l_max)), self.l_max + 1, size=n)
        return np.where(rng.random(n) < self.tail_frac, tail, body).astype(np.int64)

    def mean(self, n: int = 200_000) -> float:
        return float(self.sample(np.random.default_rng(12345), n).mean())


@dataclass(frozen=True)
class Empirical:
    """Resample (with replacement) from an observed array of decode lengths."""

    lengths: tuple = (1000,)

    def __post_init__(self):
        arr = np.asarray(self.lengths)
        if arr.ndim != 1 or arr.size == 0 or not np.all(arr >= 1):
            raise ValueError(f"lengths={self.lengths!r} is not allowed; use a non-empty 1-d "
                             "sequence of lengths >= 1")
        object.__setattr__(self, "lengths", tuple(int(x) for x in np.rint(arr)))

    @property
    def l_max(self) -> int:
        return max(self.lengths)

    def sample(self, rng: int | np.random.Generator | jax.Array, n: int) -> np.ndarray:
        rng = as_rng(rng)
        return np.asarray(self.lengths, dtype=np.int64)[rng.integers(0, len(self.lengths), n)]

    def mean(self, n: int = 0) -> float:
        return float(np.mean(self.lengths))


def constant(length: int) -> Empirical:
    """Every response has exactly ``length`` tokens (the no-tail reference)."""
    return Empirical((int(length),))


def tail_ratio(law: LogNormal | HeavyTailMix | Empirical, n: int = 100_000) -> float:
    """max/mean of ``n`` draws: how long the slowest response of a batch is vs the average."""
    x = law.sample(np.random.default_rng(7), n)
    return float(x.max() / x.mean())
