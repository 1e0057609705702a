"""Re-execute the notebooks in quick mode and write their outputs into the paired ``.ipynb``.

The jupytext percent files ``notebooks/NN_name.py`` are the sources; each ``.ipynb`` beside
one holds the same cells plus the outputs of a quick-mode run, so GitHub and nbviewer show
the figures. Run after any change of a notebook or of the library it calls:

    nice -n 10 python notebooks/execute.py            # every notebook, one at a time
    nice -n 10 python notebooks/execute.py 02 05      # only those whose name starts so

For each notebook: the ``.ipynb`` inputs are first brought in line with the ``.py``
(``jupytext --update --to ipynb``, which keeps the existing cell ids, so an edit does not
rewrite every id), then it is executed with ``RLVR_LAB_QUICK=1`` in ``notebooks/`` and written in place.
A notebook in which a cell that makes a figure shows no image fails the run (see
:func:`figure_report`; ``tests/core/test_notebooks.py`` checks the committed outputs the same
way).

Each run is timed: the wall time of the executed notebook (kernel start included) goes into
``notebooks/runtimes.json`` and into the ``**Runtime:**`` line at the top of the notebook (the
``.py`` and the ``.ipynb`` alike), and the course table of ``notebooks/README.md`` is
regenerated from it (``rlvr_lab.course``). Nothing else writes those numbers.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# A code cell "makes a figure" when it calls one of these: plotting.subplots/interactive,
# a module's *figure*/plot* function, pyplot's drawing calls, IPython's Image (a saved PNG) or
# ``display(fig...)`` of a figure made earlier. The committed notebooks must
# show an image for exactly these cells (and no image elsewhere), so the regex is the single
# definition of a figure cell that both this script and the test use.
FIGURE_CALL = re.compile(
    r"(\bsubplots|\binteractive|\w*figures?|\bplot\w*|\bImage|plt\.(?:hist|bar|scatter|imshow))\s*\(|\bdisplay\(\s*fig")
_NOT_A_FIGURE = re.compile(r"\b(?:plt\.close|figures_dir|save_figure)\s*\(")


def sources() -> list[Path]:
    """The jupytext sources: ``notebooks/NN_*.py`` that declare an ``ipynb`` pairing."""
    return sorted(p for p in HERE.glob("[0-9][0-9]_*.py")
                  if "formats: ipynb,py:percent" in p.read_text())


def makes_figure(source: str) -> bool:
    code = "\n".join(line.split("#", 1)[0] for line in source.splitlines())
    return bool(FIGURE_CALL.search(_NOT_A_FIGURE.sub("", code)))


def has_image(cell) -> bool:
    return any("image/png" in out.get("data", {}) for out in cell.get("outputs", []))


def figure_report(nb) -> dict:
    """Figure cells vs cells with an image, and the indices of cells where they disagree."""
    code = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    figure_cells = [i for i, c in code if makes_figure(c.source)]
    image_cells = [i for i, c in code if has_image(c)]
    return dict(figure_cells=len(figure_cells), image_cells=len(image_cells),
                images=sum(sum("image/png" in o.get("data", {}) for o in c.get("outputs", []))
                           for _, c in code),
                missing=sorted(set(figure_cells) - set(image_cells)),
                unexpected=sorted(set(image_cells) - set(figure_cells)),
                executed=any(c.get("outputs") for _, c in code))


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
        NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                       resources={"metadata": {"path": str(HERE)}}).execute()
        seconds = time.perf_counter() - start
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    _write_runtime(py, nb, seconds, load)
    nbformat.write(nb, ipynb)
    # the .ipynb is now newer than the .py with the same inputs; refresh the pairing stamp
    py.touch()
    return figure_report(nb)


def _write_runtime(py: Path, nb, seconds: float, load: float) -> None:
    """Store the measured runtime and write it into the notebook's runtime line (both files
    of the pair carry the same text, so they stay in sync)."""
    from rlvr_lab import course

    entry = course.record_runtime(py.stem, seconds, load=load)
    py.write_text(course.set_runtime_line(py.read_text(), entry))
    first = next(c for c in nb.cells if c.cell_type == "markdown")
    first.source = course.set_runtime_line(first.source, entry)


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
        if report["missing"] or report["unexpected"]:
            failed.append(py.stem)
    from rlvr_lab import course

    print(f"course table: {course.sync_course_block()}")
    if failed:
        print("failed (execution or figure check):", ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
