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
         bounds: tuple[float | None, float | None] | None = None, **line_kw: Any) -> Line2D:
    """Plot the mean over seeds (axis 0 of ``values``) with a shaded ``level`` CI band.

    ``bounds=(low, high)`` clips the band to the range the quantity can take (a probability:
    ``(0, 1)``; an entropy: ``(0, None)``): with few seeds (quick mode) a t interval can
    otherwise leave it, e.g. a success probability's band above 1."""
    mean, half = mean_ci(values, axis=0, level=level)
    (line,) = ax.plot(x, mean, label=label, color=color, **line_kw)
    low, high = mean - half, mean + half
    if bounds is not None:
        low, high = (np.clip(v, bounds[0], bounds[1]) for v in (low, high))
    ax.fill_between(x, low, high, color=line.get_color(), alpha=alpha, lw=0)
    return line


def legend_outside(fig: Figure, handles: list | None = None, labels: list | None = None, *,
                   ax: Axes | None = None, width: float = 0.22, **kw: Any):
    """One legend to the right of every panel, never over the data: the panels are laid out in
    the left ``1 - width`` of the figure. Handles and labels default to those of ``ax`` (or
    the first axes)."""
    if handles is None:
        handles, labels = (ax or fig.axes[0]).get_legend_handles_labels()
    legend = fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1 - width, 0.5),
                        fontsize=kw.pop("fontsize", 8), frameon=False, **kw)
    fig.tight_layout(rect=(0, 0, 1 - width, 0.95 if fig.get_suptitle() else 1))
    return legend


# 16:9 at 13.33 x 7.5 in (a slide), fonts large enough to read from the back of a room
SLIDE_SIZE = (13.33, 7.5)
SLIDE_STYLE = {"font.size": 20, "axes.titlesize": 24, "axes.labelsize": 22,
               "xtick.labelsize": 18, "ytick.labelsize": 18, "legend.fontsize": 17,
               "lines.linewidth": 3.0, "figure.titlesize": 24}


def slide_figure(fig: Figure, panel: int = 0, *, title: str | None = None,
                 legend: bool | None = None) -> Figure:
    """A slide-ready single-panel copy of one panel of ``fig``: 16:9, large fonts, the panel's
    lines, bands, bars, labels, scales, limits and legend redrawn on a new figure (the
    original is left as it was). ``panel`` indexes ``fig.axes``; ``legend`` None keeps a
    legend where the figure had one.

    Usage in a notebook: ``plotting.slide_figure(fig, 0)``; to keep it,
    ``plotting.save_figure(plotting.slide_figure(fig, 0), "name_slide", out_dir)``.
    """
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Rectangle
    from matplotlib.ticker import FixedLocator, ScalarFormatter

    src = fig.axes[panel]
    # every part is copied on its own: a part that cannot be copied is left out, so a slide
    # is always made (a notebook cell never fails on an unusual panel)
    keep = contextlib.suppress(Exception)
    with house_style(), plt.rc_context(SLIDE_STYLE):
        new, ax = plt.subplots(figsize=SLIDE_SIZE)
        for coll in src.collections:
            with keep:
                if isinstance(coll, PolyCollection) and len(coll.get_facecolor()):
                    for path in coll.get_paths():
                        ax.fill(*path.vertices.T, color=coll.get_facecolor()[0], lw=0)
        for line in src.get_lines():
            with keep:
                ax.plot(*line.get_data(), color=line.get_color(), ls=line.get_linestyle(),
                        marker=line.get_marker(), label=line.get_label(),
                        lw=max(line.get_linewidth() * 1.8, 2.5))
        for patch in src.patches:
            with keep:
                if isinstance(patch, Rectangle):
                    ax.add_patch(Rectangle(patch.get_xy(), patch.get_width(),
                                           patch.get_height(), color=patch.get_facecolor()))
        with keep:
            ax.set_xscale(src.get_xscale())
        with keep:
            ax.set_yscale(src.get_yscale())
        with keep:
            ax.set(xlim=src.get_xlim(), ylim=src.get_ylim())
        ax.set(xlabel=src.get_xlabel(), ylabel=src.get_ylabel(),
               title=src.get_title() if title is None else title)
        with keep:  # categorical ticks (bar charts) keep their names; numeric ones are redrawn
            if isinstance(src.xaxis.get_major_locator(), FixedLocator) and not isinstance(
                    src.xaxis.get_major_formatter(), ScalarFormatter):
                ax.set_xticks(src.get_xticks(), [t.get_text() for t in src.get_xticklabels()])
                ax.set_xlim(src.get_xlim())
        if legend or (legend is None and (src.get_legend() is not None or fig.legends)):
            if ax.get_legend_handles_labels()[0]:
                old = src.get_legend()
                title_text = old.get_title().get_text() if old is not None else ""
                ax.legend(title=title_text or None)
        with keep:
            new.tight_layout()
    return new


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
