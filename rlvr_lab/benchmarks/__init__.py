"""Performance measures for ``rlvr-lab bench``: each is a ratio of two speeds in one run.

A measure is ``fn(quick: bool) -> Measure`` registered with :func:`benchmark` (category
``benchmark`` of the one registry) in a module of this package listed in ``MODULES``;
``rlvr-lab bench`` imports them and prints one line per measure as
``NAME: RATIO x (details)``. Ratios, not absolute timings, so lines compare across machines.
"""
from __future__ import annotations

import importlib
import time
from dataclasses import dataclass
from typing import Callable

from rlvr_lab._registry import Registry

_MEASURES: Registry = Registry("benchmark")
MODULES = ("bandit", "rl_step", "transformer")   # the modules that register measures


@dataclass(frozen=True)
class Measure:
    name: str
    ratio: float
    details: str

    def line(self) -> str:
        return f"{self.name}: {self.ratio:.3g} x ({self.details})"

    def as_dict(self, *, quick: bool) -> dict:
        return {"name": self.name, "ratio": float(self.ratio), "details": self.details,
                "quick": bool(quick)}


def benchmark(name: str, *, overwrite: bool = False):
    """Register ``fn(quick) -> Measure`` under ``name``."""
    def deco(fn: Callable[[bool], Measure]):
        _MEASURES.register(name, fn, overwrite=overwrite)
        return fn
    return deco


def load_all() -> None:
    for name in MODULES:
        importlib.import_module(f"{__name__}.{name}")


def names() -> list[str]:
    load_all()
    return _MEASURES.names()


def run(name: str, quick: bool = False) -> Measure:
    load_all()
    return _MEASURES.get(name)(quick)


def best_time(fn: Callable[[], object], repeats: int = 3) -> float:
    """Best wall time of ``fn()`` over ``repeats`` calls (call once before to compile)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best
