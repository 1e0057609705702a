"""House style and figure output: ``save_figure(fig, name)`` -> ``figures/name.{png,pdf}``;
``interactive(fn, **sliders)`` for notebook sliders with a static fallback."""
from __future__ import annotations

import contextlib
import inspect
import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib
import matplotlib.pyplot as plt  # headless runs fall back to Agg; Jupyter sets its inline backend
import numpy as np
import numpy.typing as npt

from rlvr_lab import io as _io

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.typing import ColorType

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
def house_style() -> Iterator[None]:
    """Context manager applying the toolkit's matplotlib style.

    It never changes matplotlib's interactive state: the first figure made in a Jupyter kernel
    resolves the inline backend, which switches interactive mode on, and a plain
    ``rc_context`` would switch it back off on exit -- after which no later figure of the
    notebook is displayed. So the state reached inside the block is kept on exit."""
    interactive = matplotlib.is_interactive()
    try:
        with matplotlib.rc_context(STYLE):
            try:
                yield
            finally:
                interactive = matplotlib.is_interactive()
    finally:
        matplotlib.interactive(interactive)


figures_dir = _io.figures_dir
set_default_mode = _io.set_default_mode


def save_figure(fig: Figure, name: str, out_dir: str | Path | None = None) -> list[Path]:
    """Write ``fig`` as ``<out_dir>/<name>.png`` and ``.pdf`` atomically; returns both paths."""
    out = Path(out_dir) if out_dir is not None else figures_dir()
    with house_style():  # savefig.* (dpi, tight bbox) are read at save time
        return [_io.atomic_save(out / f"{name}.{ext}",
                                lambda tmp, ext=ext: fig.savefig(tmp, format=ext))
                for ext in ("png", "pdf")]


def mean_ci(values: npt.ArrayLike, axis: int = 0,
            level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Mean and half-width of a Student-t confidence interval along ``axis`` (seeds)."""
    from scipy import stats

    values = np.asarray(values, dtype=float)
    n = values.shape[axis]
    mean = values.mean(axis=axis)
    if n < 2:
        return mean, np.zeros_like(mean)
    sem = values.std(axis=axis, ddof=1) / np.sqrt(n)
    return mean, sem * stats.t.ppf(0.5 + level / 2, n - 1)


def band(ax: Axes, x: npt.ArrayLike, values: npt.ArrayLike, *, label: str | None = None,
         color: ColorType | None = None, level: float = 0.95, alpha: float = 0.2,
         **line_kw: Any) -> Line2D:
    """Plot the mean over seeds (axis 0 of ``values``) with a shaded ``level`` CI band."""
    mean, half = mean_ci(values, axis=0, level=level)
    (line,) = ax.plot(x, mean, label=label, color=color, **line_kw)
    ax.fill_between(x, mean - half, mean + half, color=line.get_color(), alpha=alpha, lw=0)
    return line


def subplots(*args: Any, **kwargs: Any) -> tuple[Figure, Any]:
    """``plt.subplots`` under the house style (figure keeps the style when saved later)."""
    with house_style():
        return plt.subplots(*args, **kwargs)


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    with house_style():
        fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def interactive(fn: Callable[..., Figure], **sliders: Any) -> Figure | None:
    """Sliders over ``fn(**values) -> Figure`` in Jupyter, with a static fallback.

    ``sliders`` maps keyword arguments of ``fn`` to ``ipywidgets.interact`` abbreviations
    (``(min, max, step)`` for a slider, a list for a dropdown); every slider starts at ``fn``'s
    default for that argument. In a kernel the figure at the defaults is always displayed as a
    plain ``image/png`` output (so an executed notebook shows it on GitHub and in nbviewer,
    where widgets do not run) and, when ipywidgets is installed, the sliders above it redraw
    that same output in place. Outside a kernel, or without ipywidgets, only the figure at the
    defaults is drawn. Returns that default figure outside a kernel, else None (so the cell
    does not display it twice)."""
    params = inspect.signature(fn).parameters
    for name in sliders:
        if name not in params or params[name].default is inspect.Parameter.empty:
            raise ValueError(f"slider {name!r} must be a keyword argument of {fn.__name__} "
                             "with a default value (the value the static figure shows)")
    if not _in_kernel():
        return fn()
    from IPython.display import DisplayHandle, Image, display

    handle = DisplayHandle()
    try:
        import ipywidgets
    except ImportError:
        ipywidgets = None
    if ipywidgets is not None:
        controls = {}
        for name, spec in sliders.items():
            control = ipywidgets.interactive.widget_from_abbrev(spec, params[name].default)
            control.description = name
            controls[name] = control

        # Redraw from the widgets' comm callbacks (not inside an Output widget), so the
        # update reaches the image output by its display id.
        def redraw(_change: Any) -> None:
            handle.update(Image(_png(fn(**{n: c.value for n, c in controls.items()}))))

        for control in controls.values():
            control.observe(redraw, names="value")
        display(ipywidgets.VBox(list(controls.values())))
    handle.display(Image(_png(fn())))
    return None
