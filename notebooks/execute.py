"""Re-execute the notebooks in quick mode and write their outputs into the paired ``.ipynb``.

The jupytext percent files ``notebooks/NN_name.py`` are the sources; each ``.ipynb`` beside
one holds the same cells plus the outputs of a quick-mode run, so GitHub and nbviewer show
the figures. Run after any change of a notebook or of the library it calls:

    nice -n 10 python notebooks/execute.py            # every notebook, one at a time
    nice -n 10 python notebooks/execute.py 02 05      # only those whose name starts so

For each notebook: the ``.ipynb`` inputs are first brought in line with the ``.py``
(``jupytext --update --to ipynb``, which keeps the existing cell ids, so an edit does not
rewrite every id), then it is executed with ``RLVR_LAB_QUICK=1`` in ``notebooks/`` and written
in place. A notebook in which a cell that makes a figure shows no image fails the run (see
``rlvr_lab.course.figure_report``, the one definition of a figure cell;
``tests/core/test_notebooks.py`` checks the committed outputs with the same function).

Each run is timed: the wall time of the executed notebook (kernel start included) goes into
``notebooks/runtimes.json`` and into the ``**Runtime:**`` line at the top of the notebook (the
``.py`` and the ``.ipynb`` alike), and the course table of ``notebooks/README.md`` is
regenerated from it (``rlvr_lab.course``). Nothing else writes those numbers. Once the
repository URL is declared (``[project.urls] Repository`` in ``pyproject.toml``), the Colab /
nbviewer links go under the runtime line and into the course table too; without one, nothing.
The slowest cells of each run are printed, to see where a notebook spends its time.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:   # ``python notebooks/execute.py`` from a checkout
    sys.path.insert(0, str(HERE.parent))

# What counts as a figure cell (a code cell that must show an image, and the only cells that
# may) is defined once, in ``rlvr_lab.course`` (``FIGURE_CALL``, :func:`makes_figure`); this
# script and ``tests/core/test_notebooks.py`` both use :func:`figure_report` from there.
from rlvr_lab.course import FIGURE_CALL, figure_report, has_image, makes_figure  # noqa: E402,F401


def sources() -> list[Path]:
    """The jupytext sources: ``notebooks/NN_*.py`` that declare an ``ipynb`` pairing."""
    return sorted(p for p in HERE.glob("[0-9][0-9]_*.py")
                  if "formats: ipynb,py:percent" in p.read_text())


def execute(py: Path, timeout: int = 900) -> dict:
    import nbformat
    from nbclient import NotebookClient

    ipynb = py.with_suffix(".ipynb")
    # .py -> .ipynb whatever the timestamps (a fresh clone has arbitrary ones); --update
    # keeps the existing cell ids and outputs of unchanged cells
    subprocess.run([sys.executable, "-m", "jupytext", "--update", "--to", "ipynb", "--quiet",
                    str(py)], check=True)
    nb = nbformat.read(ipynb, as_version=4)
    env = {"RLVR_LAB_QUICK": "1", "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu")}
    old = {k: os.environ.get(k) for k in (*env, "MPLBACKEND")}
    os.environ.update(env)  # the kernel inherits this process's environment
    os.environ.pop("MPLBACKEND", None)  # so that the kernel uses the inline backend
    load = os.getloadavg()[0]   # other jobs on the machine make the runtime an upper bound
    start = time.perf_counter()
    try:
        NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=True,
                       resources={"metadata": {"path": str(HERE)}}).execute()
        seconds = time.perf_counter() - start
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    slowest = cell_seconds(nb)   # read the timings, then drop them from the committed file
    _write_runtime(py, nb, seconds, load)
    nbformat.write(nb, ipynb)
    # the .ipynb is now newer than the .py with the same inputs; refresh the pairing stamp
    py.touch()
    return dict(figure_report(nb), seconds=seconds, slowest=slowest)


def cell_seconds(nb, top: int = 5) -> list[tuple[int, float]]:
    """The ``top`` slowest code cells of an executed notebook as ``(cell index, seconds)``,
    from nbclient's timing metadata, which is then removed (the committed ``.ipynb`` keeps no
    timestamps, so a re-execution does not rewrite every cell's metadata)."""
    from datetime import datetime

    times = []
    for i, cell in enumerate(nb.cells):
        timing = cell.get("metadata", {}).pop("execution", None)
        if cell.cell_type != "code" or not timing:
            continue
        try:
            start = datetime.fromisoformat(timing["iopub.execute_input"].replace("Z", "+00:00"))
            end = datetime.fromisoformat(timing["shell.execute_reply"].replace("Z", "+00:00"))
        except (KeyError, ValueError):
            continue
        times.append((i, (end - start).total_seconds()))
    return sorted(times, key=lambda t: -t[1])[:top]


def _write_runtime(py: Path, nb, seconds: float, load: float) -> None:
    """Store the measured runtime and write it into the notebook's runtime line (both files
    of the pair carry the same text, so they stay in sync)."""
    from rlvr_lab import course

    entry = course.record_runtime(py.stem, seconds, load=load)
    # the Colab / nbviewer links under it, once the repository URL is declared (else nothing)
    links = course.links_line(py.stem, course.repository_url())
    text = course.set_runtime_line(py.read_text(), entry)
    py.write_text(text if links is None else course.set_links_line(text, links))
    first = next(c for c in nb.cells if c.cell_type == "markdown")
    first.source = course.set_runtime_line(first.source, entry)
    if links is not None:
        first.source = course.set_links_line(first.source, links)


def main(argv: list[str]) -> int:
    chosen = [p for p in sources() if not argv or any(p.name.startswith(a) for a in argv)]
    failed = []
    for py in chosen:
        try:
            report = execute(py)
        except Exception as err:  # a failing cell: report it, leave the .ipynb as it was
            print(f"{py.stem}: FAILED, outputs not written: {type(err).__name__}: "
                  f"{str(err).strip().splitlines()[-1][:300]}", flush=True)
            failed.append(py.stem)
            continue
        print(f"{py.stem}: {report['figure_cells']} figure cells, {report['image_cells']} "
              f"with an image ({report['images']} images)"
              + (f"; MISSING in cells {report['missing']}" if report["missing"] else "")
              + (f"; unexpected in cells {report['unexpected']}" if report["unexpected"]
                 else ""), flush=True)
        print(f"    {report['seconds']:.0f} s; slowest cells: "
              + ", ".join(f"{i}: {t:.1f} s" for i, t in report["slowest"]), flush=True)
        if report["missing"] or report["unexpected"]:
            failed.append(py.stem)
    from rlvr_lab import course

    print(f"course table: {course.sync_course_block()}")
    if failed:
        print("failed (execution or figure check):", ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
