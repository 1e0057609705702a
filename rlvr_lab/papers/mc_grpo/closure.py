"""Gap closure with a Fieller interval: how much of the G=2 -> G=8 gap a method closes.

``closure = mean(m - s) / mean(l - s)`` for per-seed final scores of the method at small G
(``m``), plain GRPO at small G (``s``) and at large G (``l``), measured on the same seeds
(paired). The interval is Fieller's for a ratio of two paired means: every ``theta`` for which
the paired t-test of ``(m - s) - theta (l - s)`` does not reject at ``level``, i.e. the
solutions of the quadratic
``(a - theta b)^2 <= q (s_aa - 2 theta s_ab + theta^2 s_bb)`` with ``a``, ``b`` the mean
differences, ``s`` their sample (co)variances, ``q = t^2 / n``.

Degenerate cases (documented, never NaN): when the denominator's mean is not significantly
different from 0 at ``level`` (``b^2 <= q s_bb``) the confidence set is unbounded and the
interval is ``(-inf, inf)``; fewer than two seeds or a non-finite value give ``(-inf, inf)``;
``mean(l - s) == 0`` gives the ratio ``+-inf`` (``0`` when ``mean(m - s)`` is 0 too).
"""
from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy import stats as _st

from rlvr_lab.stats import Interval


def _ratio(a: float, b: float) -> float:
    if b != 0:
        return a / b
    return 0.0 if a == 0 else math.copysign(math.inf, a)


def fieller_ratio(num: npt.ArrayLike, den: npt.ArrayLike, level: float = 0.95) -> Interval:
    """Ratio ``mean(num) / mean(den)`` of paired per-seed values with Fieller's interval."""
    if not 0 < level < 1:
        raise ValueError(f"level={level!r} is not allowed; must be strictly between 0 and 1")
    a_i, b_i = np.asarray(num, np.float64), np.asarray(den, np.float64)
    if a_i.ndim != 1 or a_i.shape != b_i.shape:
        raise ValueError(f"num and den need one value per seed each (1-D, same length); got "
                         f"shapes {a_i.shape} and {b_i.shape}")
    n = int(a_i.size)
    if n == 0:
        return Interval(0.0, -math.inf, math.inf, 0, level)
    a, b = float(a_i.mean()), float(b_i.mean())
    ratio = _ratio(a, b) if math.isfinite(a) and math.isfinite(b) else 0.0
    if n < 2 or not (np.all(np.isfinite(a_i)) and np.all(np.isfinite(b_i))):
        return Interval(ratio, -math.inf, math.inf, n, level)
    cov = np.cov(np.stack([a_i, b_i]), ddof=1)
    s_aa, s_ab, s_bb = float(cov[0, 0]), float(cov[0, 1]), float(cov[1, 1])
    q = float(_st.t.ppf(0.5 + level / 2, n - 1)) ** 2 / n
    qa = b * b - q * s_bb            # theta^2 coefficient
    qb = a * b - q * s_ab            # minus half the theta coefficient
    qc = a * a - q * s_aa
    if qa <= 0:
        return Interval(ratio, -math.inf, math.inf, n, level)
    disc = max(qb * qb - qa * qc, 0.0)   # >= 0 whenever qa > 0 (Cauchy-Schwarz); rounding
    root = math.sqrt(disc)
    return Interval(ratio, (qb - root) / qa, (qb + root) / qa, n, level)


def gap_closure(method_small: npt.ArrayLike, grpo_small: npt.ArrayLike,
                grpo_large: npt.ArrayLike, level: float = 0.95) -> Interval:
    """``(method_small - grpo_small) / (grpo_large - grpo_small)`` per seed-paired means, with
    :func:`fieller_ratio`'s interval (1 = the whole gap closed, 0 = none)."""
    m, s, l_ = (np.asarray(x, np.float64) for x in (method_small, grpo_small, grpo_large))
    return fieller_ratio(m - s, l_ - s, level)
