"""House style and figure output: ``save_figure(fig, name)`` -> ``figures/name.{png,pdf}``."""
from __future__ import annotations

import contextlib
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt  # headless runs fall back to Agg; Jupyter sets its inline backend
import numpy as np

from rlvr_lab import io as _io

STYLE = {
    "figure.figsize": (6.4, 4.0),
    "figure.dpi": 110,
    "savefig.dpi": 150,
    "savefig.bbox": "tight",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 8,
    "legend.frameon": False,
    "lines.linewidth": 1.6,
    "axes.prop_cycle": matplotlib.cycler(color=[
        "#1b6ca8", "#d1495b", "#3a8a3f", "#edae49", "#6c4f9c", "#00798c", "#8d6a4f", "#555555"]),
    "pdf.fonttype": 42,
}


@contextlib.contextmanager
def house_style():
    """Context manager applying the toolkit's matplotlib style."""
    with matplotlib.rc_context(STYLE):
        yield


figures_dir = _io.figures_dir
set_default_mode = _io.set_default_mode


def save_figure(fig, name: str, out_dir: str | Path | None = None) -> list[Path]:
    """Write ``fig`` as ``<out_dir>/<name>.png`` and ``.pdf`` atomically; returns both paths."""
    out = Path(out_dir) if out_dir is not None else figures_dir()
    return [_io.atomic_save(out / f"{name}.{ext}",
                            lambda tmp, ext=ext: fig.savefig(tmp, format=ext))
            for ext in ("png", "pdf")]


def mean_ci(values, axis=0, level=0.95):
    """Mean and half-width of a Student-t confidence interval along ``axis`` (seeds)."""
    from scipy import stats

    values = np.asarray(values, dtype=float)
    n = values.shape[axis]
    mean = values.mean(axis=axis)
    if n < 2:
        return mean, np.zeros_like(mean)
    sem = values.std(axis=axis, ddof=1) / np.sqrt(n)
    return mean, sem * stats.t.ppf(0.5 + level / 2, n - 1)


def band(ax, x, values, *, label=None, color=None, level=0.95, alpha=0.2, **line_kw):
    """Plot the mean over seeds (axis 0 of ``values``) with a shaded ``level`` CI band."""
    mean, half = mean_ci(values, axis=0, level=level)
    (line,) = ax.plot(x, mean, label=label, color=color, **line_kw)
    ax.fill_between(x, mean - half, mean + half, color=line.get_color(), alpha=alpha, lw=0)
    return line


def subplots(*args, **kwargs):
    """``plt.subplots`` under the house style (figure keeps the style when saved later)."""
    with house_style():
        return plt.subplots(*args, **kwargs)
