"""Seed-level statistics every experiment uses to decide a claim.

A claim about arms compares numbers measured per seed. The helpers here give Student-t
intervals over seeds (:func:`mean_interval`), paired differences when arms share a seed's
randomness (:func:`paired_difference`), an equivalence / non-inferiority test with a stated
margin (:func:`equivalence`, two one-sided tests, TOST). Claims are decided by the claims
engine (:mod:`rlvr_lab.claims`: declared rules, nested SFT bases, the positive-control gate);
these are the descriptive intervals of tables and figures.

Conventions: ``level`` is the two-sided confidence level of a reported interval; tests use
``alpha = 1 - level`` per side. With fewer than two seeds, or a non-finite value, an interval is
``(-inf, inf)`` and every test fails to decide, rather than raising or returning NaN. With zero
spread (all seeds equal) the interval collapses to the mean.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
import numpy as np
import numpy.typing as npt
from scipy import stats as _st


@dataclass(frozen=True)
class Interval:
    """Mean over ``n`` seeds with a two-sided ``level`` t-interval ``[low, high]``."""

    mean: float
    low: float
    high: float
    n: int
    level: float = 0.95

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def above(self, value: float = 0.0) -> bool:
        """The whole interval lies strictly above ``value``."""
        return bool(self.low > value)

    def below(self, value: float = 0.0) -> bool:
        """The whole interval lies strictly below ``value``."""
        return bool(self.high < value)

    def __str__(self) -> str:
        return f"{self.mean:+.4g} [{self.low:+.4g}, {self.high:+.4g}] (n={self.n})"


@dataclass(frozen=True)
class Equivalence(Interval):
    """A TOST result: ``[low, high]`` is the ``1 - 2*alpha`` interval of the difference.

    ``not_worse``: the difference is above ``-margin`` (one-sided test at ``alpha``);
    ``equivalent``: it is also below ``+margin`` (both one-sided tests reject).
    """

    margin: float = 0.0
    p_not_worse: float = 1.0
    p_not_better: float = 1.0
    alpha: float = 0.05

    @property
    def not_worse(self) -> bool:
        return bool(self.p_not_worse < self.alpha)

    @property
    def equivalent(self) -> bool:
        return bool(max(self.p_not_worse, self.p_not_better) < self.alpha)


def _values(x, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one value per seed (1-D); got shape {arr.shape}")
    return arr


def _check_level(level: float) -> float:
    if isinstance(level, bool) or not (0.0 < float(level) < 1.0):
        raise ValueError(f"level={level!r} is not allowed; must be strictly between 0 and 1")
    return float(level)


def _t_interval(values: np.ndarray, level: float) -> Interval:
    n = int(values.size)
    mean = float(values.mean()) if n else float("nan")
    if n < 2 or not np.all(np.isfinite(values)):
        return Interval(mean, -math.inf, math.inf, n, level)
    sem = float(values.std(ddof=1)) / math.sqrt(n)
    half = sem * float(_st.t.ppf(0.5 + level / 2, n - 1))
    return Interval(mean, mean - half, mean + half, n, level)


def mean_interval(x: npt.ArrayLike, level: float = 0.95) -> Interval:
    """Mean of per-seed values ``x`` with a two-sided Student-t interval."""
    return _t_interval(_values(x, "x"), _check_level(level))


def paired_difference(a: npt.ArrayLike, b: npt.ArrayLike, level: float = 0.95) -> Interval:
    """Interval of ``mean(a - b)`` for arms measured on the same seeds (paired t)."""
    a, b = _values(a, "a"), _values(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"paired arms need one value per seed each; got {a.size} and {b.size}")
    return _t_interval(a - b, _check_level(level))


def _one_sided_p(diff: float, se: float, dof: float, threshold: float, greater: bool) -> float:
    """p-value of H0: true difference <= threshold (``greater``) or >= threshold."""
    if not (math.isfinite(diff) and math.isfinite(se)) or dof <= 0:
        return 1.0
    gap = diff - threshold if greater else threshold - diff
    if se == 0.0:
        return 0.0 if gap > 0 else 1.0
    return float(_st.t.sf(gap / se, dof))


def equivalence(a: npt.ArrayLike, b: npt.ArrayLike, margin: float, *, paired: bool = True,
                level: float = 0.95) -> Equivalence:
    """Two one-sided tests that ``mean(a) - mean(b)`` lies within ``(-margin, +margin)``.

    ``paired`` arms share each seed (a t-test on per-seed differences); unpaired arms use
    Welch's t. The reported interval is the ``1 - 2*alpha`` interval (alpha = 1 - level), the
    one whose inclusion in ``(-margin, margin)`` is equivalent to both tests rejecting.
    """
    level = _check_level(level)
    if isinstance(margin, bool) or not (math.isfinite(float(margin)) and float(margin) > 0):
        raise ValueError(f"margin={margin!r} is not allowed; must be a finite number > 0")
    margin = float(margin)
    a, b = _values(a, "a"), _values(b, "b")
    alpha = 1.0 - level
    if paired:
        if a.shape != b.shape:
            raise ValueError(f"paired arms need one value per seed each; got {a.size} and "
                             f"{b.size}")
        d = a - b
        n = int(d.size)
        diff = float(d.mean()) if n else float("nan")
        ok = n >= 2 and np.all(np.isfinite(d))
        se = float(d.std(ddof=1)) / math.sqrt(n) if ok else math.inf
        dof = float(n - 1)
    else:
        n = int(min(a.size, b.size))
        diff = float(a.mean() - b.mean()) if a.size and b.size else float("nan")
        ok = a.size >= 2 and b.size >= 2 and np.all(np.isfinite(a)) and np.all(np.isfinite(b))
        if ok:
            va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
            se = float(math.sqrt(va + vb))
            # Welch-Satterthwaite degrees of freedom; equal spreads of zero leave it undefined
            dof = (float((va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1)))
                   if va + vb > 0 else float(a.size + b.size - 2))
        else:
            se, dof = math.inf, 0.0
    if ok:
        half = se * float(_st.t.ppf(1 - alpha, dof)) if se > 0 else 0.0
        low, high = diff - half, diff + half
    else:
        low, high = -math.inf, math.inf
    return Equivalence(diff, low, high, n, 1 - 2 * alpha if alpha < 0.5 else level,
                       margin=margin,
                       p_not_worse=_one_sided_p(diff, se, dof, -margin, greater=True),
                       p_not_better=_one_sided_p(diff, se, dof, margin, greater=False),
                       alpha=alpha)
