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
    """One bench line: ``ratio`` of two speeds (or a utilisation) measured in one run, what it
    measures in ``details``, and the ``goal`` the toolkit aims at (None: no target)."""

    name: str
    ratio: float
    details: str
    goal: float | None = None

    def line(self) -> str:
        return f"{self.name}: {self.ratio:.3g} x ({self.details})"

    def as_dict(self, *, quick: bool) -> dict:
        return {"name": self.name, "ratio": float(self.ratio), "details": self.details,
                "goal": self.goal, "quick": bool(quick)}


def figure(measures: list[Measure], title: str = "rlvr-lab bench"):
    """One horizontal bar per measure (log scale), its goal as a tick; a figure for the
    README's performance section."""
    from rlvr_lab import plotting

    fig, ax = plotting.subplots(figsize=(7.5, 0.55 * len(measures) + 1.2))
    y = range(len(measures))
    ratios = [m.ratio for m in measures]
    ax.barh(list(y), ratios, color=["#55a868" if m.goal is None or m.ratio >= m.goal
                                    else "#c44e52" for m in measures])
    for i, m in enumerate(measures):
        ax.text(m.ratio, i, f" {m.ratio:.3g}", va="center", fontsize=8)
        if m.goal is not None:
            ax.plot([m.goal, m.goal], [i - 0.4, i + 0.4], color="k", lw=2)
    ax.set_yticks(list(y), [m.name for m in measures])
    ax.set_xscale("log")
    ax.invert_yaxis()
    ax.set_xlabel("ratio (x) or utilisation; black tick = goal; red = below goal")
    ax.set_title(title)
    fig.tight_layout()
    return fig


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
