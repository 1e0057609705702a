"""The notebooks as a course uses them: figures that display, sources in sync, quick switch.

The committed ``.ipynb`` carry the outputs of ``python notebooks/execute.py`` (quick mode);
nbmake re-executes them in CI but cannot look at what a cell displayed, so the figure check
runs on the committed outputs, the sync check makes sure those outputs belong to the current
sources, and ``test_every_figure_displays_in_a_kernel`` guards the mechanism that used to hide
figures (matplotlib's interactive state) in a real kernel.
"""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import matplotlib
import nbformat
import pytest

from rlvr_lab import course, plotting

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
_spec = importlib.util.spec_from_file_location("notebooks_execute", NOTEBOOKS / "execute.py")
execute = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(execute)
SOURCES = execute.sources()
IDS = [p.stem for p in SOURCES]


def test_every_notebook_has_a_jupytext_source():
    assert SOURCES, "no jupytext sources found"
    for ipynb in NOTEBOOKS.glob("*.ipynb"):
        assert ipynb.with_suffix(".py") in SOURCES, f"{ipynb.name} has no paired .py source"
    for py in SOURCES:
        assert py.with_suffix(".ipynb").exists(), f"{py.name} has no paired .ipynb"


def _cells(nb):
    return [(c.cell_type, c.source.strip()) for c in nb.cells]


@pytest.mark.parametrize("py", SOURCES, ids=IDS)
def test_pair_in_sync(py):
    """A hand edit of either file of a pair (or an edit not followed by execute.py) fails."""
    import jupytext

    source = jupytext.read(py)
    committed = nbformat.read(py.with_suffix(".ipynb"), as_version=4)
    a, b = _cells(source), _cells(committed)
    diff = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
    assert len(a) == len(b) and not diff, (
        f"{py.name} and its .ipynb differ ({len(a)} vs {len(b)} cells, first differing cell "
        f"{diff[:1]}); run `python notebooks/execute.py {py.stem[:2]}`")
    ids = [c.get("id") for c in committed.cells]
    assert all(ids) and len(set(ids)) == len(ids), "cell ids missing or repeated"


def test_execute_uses_the_course_definition_of_a_figure_cell():
    assert execute.figure_report is course.figure_report
    assert execute.makes_figure is course.makes_figure


def test_sync_check_catches_a_hand_edit(tmp_path):
    import jupytext

    py = SOURCES[0]
    nb = nbformat.read(py.with_suffix(".ipynb"), as_version=4)
    code = next(c for c in nb.cells if c.cell_type == "code")
    code.source += "\nprint('edited in Jupyter')"
    assert _cells(jupytext.read(py)) != _cells(nb)


@pytest.mark.parametrize("py", SOURCES, ids=IDS)
def test_figure_cells_show_images(py):
    """Every cell that makes a figure has an image/png output, and only those do."""
    nb = nbformat.read(py.with_suffix(".ipynb"), as_version=4)
    report = course.figure_report(nb)   # the one definition, also execute.py's
    assert report["executed"], f"{py.stem}.ipynb has no outputs; run notebooks/execute.py"
    assert not report["missing"], f"figure cells without an image: {report['missing']}"
    assert not report["unexpected"], (
        f"cells with an image that the figure-call pattern does not see: {report['unexpected']}")
    assert report["figure_cells"] == report["image_cells"] > 0


@pytest.mark.parametrize("py", SOURCES, ids=IDS)
def test_quick_switch_and_output_folder(py):
    """A visible ``QUICK = quick_mode()`` first code cell; no write into the tracked figures/."""
    nb = nbformat.read(py.with_suffix(".ipynb"), as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    first = next(s for s in code if "import" in s and "pip" not in s)
    assert re.search(r"^QUICK = quick_mode\(default=True\)", first, re.M), (
        "first code cell sets QUICK, quick unless RLVR_LAB_QUICK=0")
    text = "\n".join(code)
    assert "RLVR_LAB_QUICK\"" not in text and "environ.get(\"RLVR_LAB_QUICK" not in text
    for call in re.finditer(r"\b(?:experiments|E)\.run\(([^)]*)\)", text):
        assert "out_dir=" in call.group(1), f"experiments.run without out_dir=: {call.group(0)}"
    assert "figures_dir(" not in text and "default_out_dir(" not in text


@pytest.mark.parametrize("raw, quick", [("1", True), ("true", True), ("0", False),
                                         ("false", False), ("", False)])
def test_quick_switch_values(monkeypatch, raw, quick):
    from rlvr_lab.io import quick_mode

    monkeypatch.setenv("RLVR_LAB_QUICK", raw)
    assert quick_mode() is quick


def test_house_style_keeps_interactive_state():
    was = matplotlib.is_interactive()
    try:
        for state in (True, False):
            matplotlib.interactive(state)
            fig, _ = plotting.subplots()
            matplotlib.pyplot.close(fig)
            assert matplotlib.is_interactive() is state
        # a backend that switches interactive mode on inside the block keeps it on
        matplotlib.interactive(False)
        with plotting.house_style():
            matplotlib.interactive(True)
        assert matplotlib.is_interactive()
    finally:
        matplotlib.interactive(was)


def test_interactive_fallback_outside_a_kernel():
    def draw(a=1.0):
        fig, ax = plotting.subplots()
        ax.plot([0, a])
        return fig

    fig = plotting.interactive(draw, a=(0.0, 2.0, 0.1))
    assert fig.axes[0].lines[0].get_ydata()[1] == 1.0
    matplotlib.pyplot.close(fig)
    with pytest.raises(ValueError, match="keyword argument"):
        plotting.interactive(draw, b=(0, 1))


@pytest.mark.slow
def test_every_figure_displays_in_a_kernel(monkeypatch):
    """The old bug: the first plotting.subplots figure showed, later ones did not."""
    from nbclient import NotebookClient

    monkeypatch.delenv("MPLBACKEND", raising=False)  # conftest's Agg; the kernel picks inline
    figure = ("from rlvr_lab import plotting\nfig, ax = plotting.subplots()\n"
              "ax.plot([0, 1]); ax.set(xlabel='x', ylabel='y');")
    widget = ("def draw(a=1.0):\n    fig, ax = plotting.subplots()\n    ax.plot([0, a])\n"
              "    return fig\nplotting.interactive(draw, a=(0.0, 2.0, 0.1))")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s)
                                         for s in (figure, figure, figure, widget)])
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    assert [course.has_image(c) for c in nb.cells] == [True] * 4
    kinds = [set(o.get("data", {})) for o in nb.cells[-1].outputs]
    assert any("application/vnd.jupyter.widget-view+json" in k for k in kinds), kinds
    assert sum("image/png" in k for k in kinds) == 1
