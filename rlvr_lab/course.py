"""The notebooks as a course: the course path, measured runtimes, Colab / nbviewer links, and
``check_*`` helpers that tell a student whether an exercise's answer is right.

Runtimes are never typed by hand: ``notebooks/execute.py`` measures each notebook's quick-mode
run and stores it in ``notebooks/runtimes.json`` (:func:`record_runtime`), writes the
``**Runtime:**`` line at the top of the notebook (:func:`set_runtime_line`) and regenerates the
course table of ``notebooks/README.md`` (:func:`course_block`). A notebook not measured yet
says "to be measured".

Links to open a notebook in Colab or nbviewer are built from the repository URL declared in
``pyproject.toml`` (``[project.urls] Repository``) or ``CITATION.cff`` (``repository-code``)
and written into the course table and each notebook's header cell (:func:`sync_links`);
without one nothing is written and the table says how links appear, instead of guessing an
address.

What counts as a *figure cell* (a cell that must show an image) is defined here once
(:func:`makes_figure`, :func:`figure_report`), for ``notebooks/execute.py`` and the tests.

Every ``check_*`` helper computes the right answer with the library (nothing is typed in),
compares it with the student's, prints one line, "right" or "not yet" with why and a hint,
and returns a :class:`Verdict` (truthy when right). ``answer=None`` (the exercise cell as
committed) prints the hint only, so a notebook runs end to end before anyone answers.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlvr_lab import io

# --------------------------------------------------------------------------- the course path


@dataclass(frozen=True)
class Lesson:
    """One notebook on the course path: ``minutes`` of class time it is given (reading and
    exercises; the runtime is measured separately), its level and what it teaches."""

    notebook: str
    minutes: int
    level: str
    teaches: str


# from easy to hard; the minutes add up to 90 (the whole lecture and lab)
COURSE: tuple[Lesson, ...] = (
    Lesson("00_quickstart", 20, "start here",
           "the RLVR step by hand: sample, reward, group advantage, the four loss "
           "aggregations; the jitted trainer; one experiment and its claims"),
    Lesson("10_grpo_from_scratch", 20, "core",
           "GRPO in about 30 lines of plain JAX on the prompt bank, checked against the "
           "library's trainer, then the same with the library"),
    Lesson("02_mc_grpo", 15, "a first follow-up",
           "mean vs median baselines: sign flips computed exactly; the `mad` pitfall"),
    Lesson("03_dars", 10, "rollout allocation",
           "cumulative advantage, DARS schedules, depth vs breadth"),
    Lesson("01_small_model", 15, "scaling up",
           "a tiny transformer, verifiers, SFT warm start, GRPO and pass@k"),
    Lesson("06_rollout_systems", 10, "systems",
           "APRIL, AReaL, ECHO-2, WebGym and ROLL on one cost model"),
)
# the rest, for after the lecture (in the order of the folder)
FURTHER: tuple[Lesson, ...] = (
    Lesson("04_brorl", 0, "further", "BroRL's mass balance, rollout-size sweep"),
    Lesson("05_cures_e3", 0, "further", "Neyman allocation, CurES sampling, E3 temperature"),
    Lesson("07_rollout_efficiency", 0, "further", "SPEC-RL lenience, FP8 rollouts, TIS/MIS"),
    Lesson("08_dynaweb", 0, "further", "Dyna in a learned world model of a toy web"),
    Lesson("09_sar", 0, "further", "exposure bias in next-scale generation"),
)


def notebooks_dir() -> Path:
    root = io.repo_root()
    return (root if root is not None else Path.cwd()) / "notebooks"


# --------------------------------------------------------------------------------- runtimes

RUNTIMES_FILE = "runtimes.json"
RUNTIME_PREFIX = "**Runtime:**"
TO_BE_MEASURED = ("to be measured (quick mode; `python notebooks/execute.py` measures it "
                  "and writes this line)")


def runtimes(path: str | Path | None = None) -> dict[str, dict]:
    """``{notebook: {"seconds", "cores", "date", "mode"}}`` as measured by execute.py."""
    path = Path(path) if path is not None else notebooks_dir() / RUNTIMES_FILE
    if not path.is_file():
        return {}
    return json.loads(path.read_text())


def record_runtime(notebook: str, seconds: float, path: str | Path | None = None,
                   *, cores: int | None = None, date: str | None = None,
                   load: float | None = None) -> dict:
    """Store one measured quick-mode runtime (called by ``notebooks/execute.py``). ``load``:
    the machine's 1-minute load average when the run started; above 1.5 x the cores, other
    jobs shared the machine and the runtime is an upper bound (the text says so)."""
    path = Path(path) if path is not None else notebooks_dir() / RUNTIMES_FILE
    table = runtimes(path)
    table[notebook] = {"seconds": round(float(seconds), 1), "cores": cores or os.cpu_count(),
                       "date": date or _dt.date.today().isoformat(), "mode": "quick"}
    if load is not None:
        table[notebook]["load"] = round(float(load), 1)
    io.atomic_write_text(path, json.dumps(dict(sorted(table.items())), indent=1) + "\n")
    return table[notebook]


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    return f"{seconds} s" if seconds < 120 else f"{seconds // 60} min {seconds % 60:02d} s"


def runtime_text(entry: dict | None) -> str:
    """The text after ``**Runtime:**``: a measurement with its machine, or a placeholder."""
    if not entry:
        return TO_BE_MEASURED
    shared = ""
    # the executor's own previous notebook keeps the 1-minute load near the core count, so
    # only a load well above it says that other jobs were running
    if entry.get("shared") or entry.get("load", 0.0) > 1.5 * entry["cores"]:
        load = f", load {entry['load']:g}" if "load" in entry else ""
        shared = f" while other jobs shared the cores{load}: an upper bound"
    return (f"{_duration(entry['seconds'])} in quick mode on {entry['cores']} CPU cores "
            f"(measured by `notebooks/execute.py`, {entry['date']}{shared}); full settings "
            "(`RLVR_LAB_QUICK=0`) take longer")


_RUNTIME_LINE = re.compile(r"^(# )?\*\*Runtime:\*\*.*$", re.M)


def set_runtime_line(text: str, entry: dict | None) -> str:
    """``text`` (a jupytext source or a markdown cell) with its runtime line rewritten."""
    def repl(m):
        return f"{m.group(1) or ''}{RUNTIME_PREFIX} {runtime_text(entry)}"
    new, n = _RUNTIME_LINE.subn(repl, text, count=1)
    if not n:
        raise ValueError("no '**Runtime:**' line found")
    return new


# ----------------------------------------------------------------------------- figure cells

# A code cell "makes a figure" when it calls one of these: plotting.subplots/interactive, a
# module's *figure*/plot* function (``show_figures``, ``show_committed_figure``,
# ``slide_figure``, ``M.plot_small``, ...), pyplot's drawing calls, IPython's ``Image`` (a saved
# PNG) or ``display(fig...)`` of a figure made earlier. The committed notebooks must show an
# image for exactly these cells (and no image elsewhere). This is the one definition:
# ``notebooks/execute.py`` (which fails a run that breaks it) and ``tests/core/test_notebooks.py``
# (which checks the committed outputs) both call :func:`figure_report`.
FIGURE_CALL = re.compile(
    r"(\bsubplots|\binteractive|\w*figures?|\bplot\w*|\bImage|"
    r"plt\.(?:hist|bar|scatter|imshow))\s*\(|\bdisplay\(\s*fig")
# calls that mention a figure but draw none: closing figures, a figures folder, saving
_NOT_A_FIGURE = re.compile(r"\b(?:plt\.close|figures_dir|save_figure)\s*\(")


def makes_figure(source: str) -> bool:
    """Whether a code cell's ``source`` makes a figure (comments ignored)."""
    code = "\n".join(line.split("#", 1)[0] for line in source.splitlines())
    return bool(FIGURE_CALL.search(_NOT_A_FIGURE.sub("", code)))


def has_image(cell) -> bool:
    """Whether an executed cell shows an image (an ``image/png`` output)."""
    return any("image/png" in out.get("data", {}) for out in cell.get("outputs", []))


def figure_report(nb) -> dict:
    """Figure cells vs cells with an image in an executed notebook (``nbformat``), and the
    indices of the cells where they disagree (``missing``: a figure cell without an image;
    ``unexpected``: an image in a cell that is not a figure cell)."""
    code = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    figure_cells = [i for i, c in code if makes_figure(c.source)]
    image_cells = [i for i, c in code if has_image(c)]
    return dict(figure_cells=len(figure_cells), image_cells=len(image_cells),
                images=sum(sum("image/png" in o.get("data", {}) for o in c.get("outputs", []))
                           for _, c in code),
                missing=sorted(set(figure_cells) - set(image_cells)),
                unexpected=sorted(set(image_cells) - set(figure_cells)),
                executed=any(c.get("outputs") for _, c in code))


# ------------------------------------------------------------------------------------ links

def repository_url(root: str | Path | None = None) -> str | None:
    """The repository URL declared in ``pyproject.toml`` (``[project.urls]``: Repository,
    Source or Homepage) or ``CITATION.cff`` (``repository-code``), else None."""
    root = Path(root) if root is not None else io.repo_root()
    if root is None:
        return None
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        urls = _project_urls(pyproject.read_text())
        for key in ("Repository", "repository", "Source", "source", "Homepage", "homepage"):
            if urls.get(key):
                return urls[key].rstrip("/")
    cff = root / "CITATION.cff"
    if cff.is_file():
        m = re.search(r"^repository-code:\s*['\"]?([^'\"\s]+)", cff.read_text(), re.M)
        if m:
            return m.group(1).rstrip("/").removesuffix(".git")
    return None


def _project_urls(text: str) -> dict[str, str]:
    """``[project.urls]`` of a pyproject (tomllib where there is one, Python 3.11+)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the table's simple ``key = "value"`` lines
        m = re.search(r"^\[project\.urls\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
        return dict(re.findall(r'^\s*"?([\w.-]+)"?\s*=\s*"([^"]*)"', m.group(1), re.M)
                    ) if m else {}
    return {k: str(v) for k, v in
            tomllib.loads(text).get("project", {}).get("urls", {}).items()}


def notebook_links(notebook: str, url: str | None, branch: str = "main") -> dict[str, str]:
    """``{"colab": ..., "nbviewer": ...}`` for ``notebooks/<notebook>.ipynb`` of a GitHub
    repository ``url``; empty when there is no URL or it is not on GitHub."""
    m = re.match(r"https?://github\.com/([^/]+)/([^/]+?)(?:\.git)?$", url or "")
    if not m:
        return {}
    owner, repo = m.groups()
    path = f"{owner}/{repo}/blob/{branch}/notebooks/{notebook}.ipynb"
    return {"colab": f"https://colab.research.google.com/github/{path}",
            "nbviewer": f"https://nbviewer.org/github/{path}"}


COURSE_START = ("<!-- course:start (generated by `python -m rlvr_lab.course`; "
                "do not edit) -->")
COURSE_END = "<!-- course:end -->"


def course_block(url: str | None = None, measured: dict | None = None) -> str:
    """The course table of ``notebooks/README.md``: path order, class minutes, measured
    runtime and the Colab / nbviewer links."""
    url = repository_url() if url is None else url
    measured = runtimes() if measured is None else measured
    lines = ["| # | notebook | level | class time | runtime (quick) | what it teaches | open |",
             "|---|---|---|---:|---|---|---|"]
    for i, lesson in enumerate((*COURSE, *FURTHER), 1):
        entry = measured.get(lesson.notebook)
        run = (f"{_duration(entry['seconds'])} ({entry['cores']} cores, {entry['date']})"
               if entry else "to be measured")
        links = notebook_links(lesson.notebook, url)
        opened = " · ".join(f"[{k}]({v})" for k, v in links.items()) or "—"
        minutes = f"{lesson.minutes} min" if lesson.minutes else "after class"
        lines.append(f"| {i if lesson.minutes else ''} | [`{lesson.notebook}`]"
                     f"({lesson.notebook}.ipynb) | {lesson.level} | {minutes} | {run} | "
                     f"{lesson.teaches} | {opened} |")
    total = sum(lesson.minutes for lesson in COURSE)
    lines += ["", f"Class time on the path: {total} min. Runtimes are measured by "
              "`notebooks/execute.py` (quick mode) and stored in `notebooks/runtimes.json`; "
              "\"to be measured\" means the notebook has not been timed since it changed."]
    if not links_available(url):
        lines += ["", "No Colab / nbviewer links: the repository URL is not declared yet. Once "
                  "`[project.urls] Repository = \"https://github.com/OWNER/REPO\"` is set in "
                  "`pyproject.toml` (or `repository-code` in `CITATION.cff`), "
                  "`python -m rlvr_lab.course` (and every `notebooks/execute.py` run) writes "
                  "them into the `open` column above and into each notebook's header cell, "
                  "under its runtime line."]
    return "\n".join(lines)


def links_available(url: str | None) -> bool:
    return bool(notebook_links("x", url))


def sync_course_block(readme: str | Path | None = None, url: str | None = None,
                      measured: dict | None = None) -> Path:
    """Rewrite the course table of ``notebooks/README.md`` in place (``url``: the repository
    URL, default :func:`repository_url`; ``measured``: the runtimes, default
    :func:`runtimes`)."""
    from rlvr_lab import bibliography

    path = Path(readme) if readme is not None else notebooks_dir() / "README.md"
    text = path.read_text()
    new = bibliography.replace_block(text, course_block(url, measured), COURSE_START,
                                     COURSE_END)
    if new != text:
        io.atomic_write_text(path, new)
    return path


LINKS_PREFIX = "**Open:**"
_LINKS_LINE = re.compile(r"^(# )?\*\*Open:\*\*.*\n?", re.M)


def links_line(notebook: str, url: str | None) -> str | None:
    """The header-cell line with a notebook's Colab / nbviewer links (without the ``# ``
    of a jupytext source), or None when ``url`` gives no links."""
    links = notebook_links(notebook, url)
    if not links:
        return None
    return (f"{LINKS_PREFIX} [Open in Colab]({links['colab']}) · "
            f"[view on nbviewer]({links['nbviewer']})")


def set_links_line(text: str, line: str | None) -> str:
    """``text`` (a jupytext source, whose header lines start with ``# ``, or a markdown cell)
    with its links line set to ``line``: replaced where there is one, else put after the
    ``**Runtime:**`` line; ``None`` removes an existing one and otherwise changes nothing."""
    m = _LINKS_LINE.search(text)
    if line is None:
        return text if m is None else text[:m.start()] + text[m.end():]
    if m is not None:
        return text[:m.start()] + f"{m.group(1) or ''}{line}\n" + text[m.end():]
    r = _RUNTIME_LINE.search(text)
    if r is None:
        raise ValueError("no '**Runtime:**' line to put the links after")
    prefix = r.group(1) or ""
    return text[:r.end()] + f"\n{prefix.rstrip()}\n{prefix}{line}" + text[r.end():]


def sync_links(root: str | Path | None = None) -> list[Path]:
    """Write the Colab / nbviewer links, built from the repository URL that ``pyproject.toml``
    or ``CITATION.cff`` under ``root`` declares (:func:`repository_url`), into the course
    table of ``<root>/notebooks/README.md`` and the header cell of every notebook pair there
    (the ``.py`` source and its ``.ipynb`` alike, so the pair stays in sync). Without a
    declared URL it writes nothing (the README table says how links appear). Returns the
    files it changed."""
    import nbformat

    root = Path(root) if root is not None else io.repo_root()
    if root is None:
        return []
    url = repository_url(root)
    if not links_available(url):
        return []
    folder = root / "notebooks"
    changed = []
    readme = folder / "README.md"
    if readme.is_file():
        before = readme.read_text()
        sync_course_block(readme, url=url, measured=runtimes(folder / RUNTIMES_FILE))
        if readme.read_text() != before:
            changed.append(readme)
    for py in sorted(folder.glob("[0-9][0-9]_*.py")):
        line = links_line(py.stem, url)
        text = py.read_text()
        if _RUNTIME_LINE.search(text) is None:
            continue
        new = set_links_line(text, line)
        if new != text:
            py.write_text(new)
            changed.append(py)
        ipynb = py.with_suffix(".ipynb")
        if ipynb.is_file():
            nb = nbformat.read(ipynb, as_version=4)
            first = next((c for c in nb.cells if c.cell_type == "markdown"), None)
            if first is not None and _RUNTIME_LINE.search(first.source):
                cell = set_links_line(first.source, line)
                if cell != first.source:
                    first.source = cell
                    nbformat.write(nb, ipynb)
                    changed.append(ipynb)
    return changed


# ----------------------------------------------------------------------------------- checks

@dataclass(frozen=True)
class Verdict:
    """What a check found: ``right``, and the line it printed."""

    right: bool
    message: str

    def __bool__(self) -> bool:
        return self.right

    def __repr__(self) -> str:
        return self.message

    def _ipython_display_(self) -> None:
        """Shown as the last value of a cell: nothing more (the check has printed its line)."""


def _say(right: bool, exercise: str, why: str, hint: str) -> Verdict:
    if right:
        message = f"[{exercise}] right. {why}"
    else:
        message = f"[{exercise}] not yet: {why} Hint: {hint}"
    print(message)
    return Verdict(right, message)


def _waiting(exercise: str, hint: str) -> Verdict:
    message = f"[{exercise}] no answer yet (replace None). Hint: {hint}"
    print(message)
    return Verdict(False, message)


def _close(answer: Any, expected: Any, rtol: float, atol: float) -> bool:
    try:
        a = np.asarray(answer, dtype=float)
        e = np.asarray(expected, dtype=float)
        return a.shape == e.shape and bool(np.allclose(a, e, rtol=rtol, atol=atol))
    except (TypeError, ValueError):
        return False


def check_value(exercise: str, answer: Any, expected: Any, *, hint: str, what: str = "value",
                rtol: float = 1e-3, atol: float = 1e-6) -> Verdict:
    """Generic numeric check: ``answer`` against ``expected`` (computed by the caller)."""
    if answer is None:
        return _waiting(exercise, hint)
    if _close(answer, expected, rtol, atol):
        return _say(True, exercise, f"{what} = {np.round(np.asarray(expected, float), 4)}.",
                    hint)
    return _say(False, exercise, f"your {what} {np.round(np.asarray(answer, float), 4)} is "
                f"not the {what} the library computes.", hint)


def check_choice(exercise: str, answer: Any, expected: Any, *, why: str, hint: str) -> Verdict:
    """A yes/no or set answer; ``why`` explains the right one."""
    if answer is None:
        return _waiting(exercise, hint)
    norm = (lambda v: frozenset(v) if isinstance(v, (set, frozenset, list, tuple)) else v)
    if norm(answer) == norm(expected):
        return _say(True, exercise, why, hint)
    return _say(False, exercise, f"{answer!r} is not it.", hint)


# notebook 00 ---------------------------------------------------------------------------

def check_wasted_fraction(p: Any, group_size: int, answer: float | None) -> Verdict:
    """00, exercise 1: the fraction of groups with no signal, ``mean(p^G + (1-p)^G)``."""
    p = np.asarray(p, dtype=np.float64)
    expected = float(np.mean(p ** group_size + (1 - p) ** group_size))
    return check_value(f"00.1, G={group_size}", answer, expected, what="wasted fraction",
                       hint="a group carries no signal when all G rollouts succeed (p^G) or "
                            "all fail ((1-p)^G); average over the bank's prompts.")


def aggregation_weights(lengths: Iterable[int], rewards: Iterable[float]) -> dict[str, Any]:
    """Each response's weight in the loss gradient under the four ``loss_agg_mode`` s
    (notebook 00, section 3), at the first PPO epoch."""
    import jax
    import jax.numpy as jnp

    from rlvr_lab import advantages, losses

    lengths = np.asarray(list(lengths))
    adv = advantages.grpo(jnp.asarray([list(rewards)], jnp.float32))[0]
    n, width = len(lengths), int(lengths.max())
    mask = jnp.arange(width)[None, :] < jnp.asarray(lengths)[:, None]
    token_loss = losses.ppo_clip(jnp.zeros((n, width)), jnp.zeros((n, width)),
                                 jnp.broadcast_to(adv[:, None], (n, width)), epsilon=0.2)
    return {mode: np.asarray(jax.grad(lambda tl, m=mode: losses.aggregate(tl, mask, m))(
        token_loss).sum(-1)) for mode in losses.AGG_MODES}


def check_changed_modes(answer: Iterable[str] | None, *, before=(3, 12, 4, 16),
                        after=(3, 12, 4, 32), rewards=(1.0, 1.0, 0.0, 0.0),
                        response: int = 2) -> Verdict:
    """00, exercise 2: the modes in which the short wrong response's weight changes when the
    long wrong one doubles in length."""
    a, b = aggregation_weights(before, rewards), aggregation_weights(after, rewards)
    expected = {m for m in a if not np.isclose(a[m][response], b[m][response], rtol=1e-6)}
    return check_choice("00.2", None if answer is None else set(answer), expected,
                        why=f"the modes that change it: {sorted(expected)}; they divide by a "
                            "count that grows with the long response (all tokens, or B x T).",
                        hint="for each mode, ask what the loss is divided by: the total token "
                             "count, the padded length T, or only the response's own length.")


def check_adam_batch_scaling(adam_coincide: bool | None, sgd_coincide: bool | None) -> Verdict:
    """00, exercise 3: with ``scale_rewards="batch"``, do GRPO and Dr.GRPO coincide under
    Adam, and under SGD? (Answer with two booleans.)"""
    if adam_coincide is None or sgd_coincide is None:
        return _waiting("00.3", "Adam divides each coordinate's step by its own gradient "
                                "scale; SGD does not.")
    return check_choice("00.3", (adam_coincide, sgd_coincide), (True, False),
                        why="one batch std per step is a rescaling Adam removes (up to its "
                            "epsilon and the moving averages), while under SGD it acts as a "
                            "step-dependent learning rate.",
                        hint="Adam divides each coordinate's step by its own gradient scale; "
                             "SGD does not.")


# notebook 01 ---------------------------------------------------------------------------

def check_multilevel_rewards(answer: dict[str, float] | None, a: int = 47, b: int = 85,
                             texts: Iterable[str] = ("231>132", "23>132", "231>13")) -> Verdict:
    """01, exercise 1: the multi-level reward of each string for the problem ``a + b``."""
    from rlvr_lab.envs import arithmetic, tasks

    problem = arithmetic.make_problem(a, b)
    texts = list(texts)
    expected = {t: float(tasks.reward(tasks.verify(problem, t), "multi")) for t in texts}
    hint = ("call tasks.verify(problem, text) and read its correct / format_ok fields; the "
            "multi-level reward adds a format part and a correctness part.")
    if answer is None:
        return _waiting("01.1", hint)
    wrong = [t for t in texts if not _close(answer.get(t, np.nan), expected[t], 1e-6, 1e-6)]
    if not wrong:
        return _say(True, "01.1", f"rewards {expected}.", hint)
    return _say(False, "01.1", f"the reward of {wrong} is not what the verifier gives.", hint)


def check_pass_at_k(answer: float | None, n: int = 16, c: int = 4, k: int = 4) -> Verdict:
    """01, exercise 2: pass@k from n samples with c correct (by brute force or the formula)."""
    from math import comb

    expected = 1 - comb(n - c, k) / comb(n, k)
    return check_value("01.2", answer, expected, what=f"pass@{k} (n={n}, c={c})",
                       hint="count the k-subsets of the n samples that hold no correct one: "
                            "C(n-c, k) of C(n, k).")


def check_all_equal_fraction(answer: float | None, p: float = 0.9, group_size: int = 8, *,
                             exercise: str = "01.3") -> Verdict:
    """01, exercise 3 (and 04, exercise 3): the probability that a group of G rewards is all
    equal when each succeeds with probability p."""
    expected = p ** group_size + (1 - p) ** group_size
    return check_value(f"{exercise}, p={p:g}, G={group_size}", answer, expected,
                       what="all-equal probability", hint="all G succeed or all G fail; for "
                       "small p, (1-p)^G is close to exp(-G p).")


# notebook 02 ---------------------------------------------------------------------------

def check_binary_flips(answer: float | None, group_sizes: Iterable[int] = (2, 4, 8)) -> Verdict:
    """02, exercise 1: the largest flip probability of the mean and median baselines over
    ``group_sizes`` for binary rewards."""
    from rlvr_lab.papers.mc_grpo import sign_flip

    expected = max(float(sign_flip.flip_statistics((0.0, 1.0), (0.6, 0.4), g, baseline=b).flip)
                   for g in group_sizes for b in ("mean", "median"))
    return check_value("02.1", answer, expected, what="largest flip probability",
                       hint="any baseline computed from 0/1 rewards lies in [0, 1]: what sign "
                            "do 1 - b and 0 - b have?")


def check_outlier_share(answer: float | None, group_size: int = 8,
                        outlier_prob: float = 0.05) -> Verdict:
    """02, exercise 2: the probability that a group of G rewards from the law {0, 1, 10} with
    probabilities (0.5, 0.45, 0.05) holds at least one 10 (which pulls the mean above 1)."""
    expected = 1 - (1 - outlier_prob) ** group_size
    return check_value(f"02.2, G={group_size}", answer, expected,
                       what="probability of at least one 10",
                       hint="one minus the probability that none of the G rewards is a 10.")


def check_mad_advantage(answer: float | None, eps: float = 1e-3) -> Verdict:
    """02, exercise 3: the minority rollout's advantage under MC-GRPO's ``mad`` scale for the
    group (0, 0, 1)."""
    import jax.numpy as jnp

    from rlvr_lab import advantages

    adv = advantages.mc_grpo(jnp.asarray([[0.0, 0.0, 1.0]]), scale="mad", eps=eps)
    expected = float(np.asarray(adv.adv if hasattr(adv, "adv") else adv[0])[0, 2])
    return check_value("02.3", answer, expected, what="advantage of the rollout with reward 1",
                       hint="the median of (0, 0, 1) is 0; what is the median of the absolute "
                            "deviations (0, 0, 1)?")


# notebook 03 ---------------------------------------------------------------------------

def check_expected_cumulative_advantage(fn: Callable[[Any, int], Any] | None,
                                        n: int = 8) -> Verdict:
    """03, exercise 1: ``fn(p, N)`` your closed form of ``E[2 N a (1 - a)]``, a = C/N,
    C ~ Binomial(N, p); checked against the library's on a grid of p."""
    from rlvr_lab.papers.dars import theory

    hint = "expand E[C] = Np and E[C^2] = Np(1-p) + N^2 p^2."
    if fn is None:
        return _waiting("03.1", hint)
    p = np.linspace(0, 1, 11)
    expected = np.asarray(theory.expected_cumulative_advantage(p, n), float)
    return check_value("03.1", np.asarray(fn(p, n), float), expected,
                       what=f"E[cumulative advantage] at N={n}", hint=hint)


def check_hw_extra(extra: int | None, cost_ratio: float | None = None, n: int = 8,
                   n_max: int = 64, all_wrong_share: float = 0.25) -> Verdict:
    """03, exercise 2: HW's extra rollouts for an all-wrong prompt at N, and the batch's cost
    relative to GRPO N when ``all_wrong_share`` of the prompts are all wrong."""
    from rlvr_lab.papers.dars.allocation import dars_extra_rollouts

    want = int(np.asarray(dars_extra_rollouts(np.array([0.0]), n, n_max, schedule="hw"))[0])
    hint = ("call allocation.dars_extra_rollouts(np.array([0.0]), N, n_max, schedule='hw'); "
            "the cost ratio is 1 + share x extra / N.")
    if extra is None:
        return _waiting("03.2", hint)
    if cost_ratio is None:
        return check_value("03.2", extra, want, what="extra rollouts", hint=hint)
    return check_value("03.2", (extra, cost_ratio), (want, 1 + all_wrong_share * want / n),
                       what="(extra rollouts, cost ratio)", hint=hint)


def check_bank_shares_parameters(answer: bool | None) -> Verdict:
    """03, exercise 3: does training on one prompt of the bank move another prompt's policy?"""
    return check_choice("03.3", answer, False,
                        why="each prompt has its own row of logits, so an update on one prompt "
                            "leaves every other row unchanged (its gradient rows are exactly 0); "
                            "an LLM shares its parameters across prompts.",
                        hint="look at the trainer's loss_fn: which rows of the [K, V] logits "
                             "does a minibatch's gradient touch?")


# notebook 04 ---------------------------------------------------------------------------

def check_full_coverage(unsampled: float | None, total_nonnegative: bool | None = None,
                        vocab: int = 2000, num_correct: int = 50) -> Verdict:
    """04, exercise 1: at full coverage (every token sampled) the value of the unsampled term
    and whether the total change of the correct mass is >= 0 (BroRL's mass balance)."""
    import jax
    import jax.numpy as jnp

    from rlvr_lab.papers.brorl import theory

    hint = "with S = every token, which tokens are left for the unsampled term to sum over?"
    if unsampled is None or total_nonnegative is None:
        return _waiting("04.1", hint)
    with jax.enable_x64(True):
        z = jax.random.normal(jax.random.key(1), (vocab,), jnp.float64)
        out = theory.mass_balance(z, jnp.arange(vocab) < num_correct, jnp.ones(vocab, bool),
                                  lr=0.1, n=vocab)
        want = (float(out["unsampled"]) or 0.0, bool(float(out["total"]) >= 0))  # no -0
    if _close(unsampled, want[0], 1e-6, 1e-12) and bool(total_nonnegative) == want[1]:
        return _say(True, "04.1", f"unsampled term {want[0]:g}, total >= 0: {want[1]}.", hint)
    return _say(False, "04.1", f"the library gives unsampled = {want[0]:g} and total >= 0 "
                f"{want[1]}.", hint)


def check_mass_vs_tokens(answer: bool | None) -> Verdict:
    """04, exercise 2: can the correct mass rise while most correct tokens go down?"""
    return check_choice("04.2", answer, True,
                        why="the mass is a sum: the large correct tokens gain more than the "
                            "many small ones lose ('rich get richer' inside C).",
                        hint="compare a sum over tokens with a count of tokens.")


# notebook 05 ---------------------------------------------------------------------------

def check_cures_uniform_ratio(answer: float | None, t_min: float = 100.0) -> Verdict:
    """05, exercise 1: the largest q_max / q_min CurES' sampler can produce with the authors'
    t = 100 (Acc + 1) (the exponent sqrt(p(1-p)) / t is at most 0.5 / t_min)."""
    expected = float(np.exp(0.5 / t_min))
    return check_value("05.1", answer, expected, what="largest probability ratio", rtol=1e-3,
                       hint="bound the exponent: sqrt(p(1-p)) <= 0.5 and t >= 100.")


def check_neyman_factor(answer: float | None, p: Iterable[float] = (0.01, 0.5)) -> Verdict:
    """05, exercise 2: the factor by which Neyman allocation lowers the gradient variance
    against uniform allocation, for Bernoulli prompts with success probabilities ``p``."""
    from rlvr_lab.papers.cures import theory

    p = np.asarray(list(p), float)
    sigma = np.sqrt(p * (1 - p))
    uniform = len(p) * float(np.sum(sigma ** 2))
    neyman = float(np.asarray(theory.neyman_variance(sigma ** 2, 1.0)))
    return check_value("05.2", answer, uniform / neyman, what="uniform / Neyman variance",
                       rtol=5e-3, hint="Neyman: (sum sigma)^2 / n; uniform: K sum sigma^2 / n, "
                       "with sigma = sqrt(p(1-p)).")


def check_e3_temperature(answer: float | None, temperature: float = 1.0,
                         entropy_ratio: float = 0.5, vocab_size: int = 16) -> Verdict:
    """05, exercise 3: E3's temperature after one step from T when H_t = ratio x H*."""
    from rlvr_lab.papers.e3 import allocation

    expected = float(allocation.e3_temperature_update(temperature, entropy_ratio, 1.0,
                                                       vocab_size))
    return check_value("05.3", answer, expected, what="temperature after one step", rtol=5e-3,
                       hint="T <- T (1 + T ln(H*/H_t) / (ln V + ln ln V)).")


# notebook 06 ---------------------------------------------------------------------------

def check_staleness_bound(answer: int | None, step_time: float = 60.0,
                          dissemination: float = 140.0) -> Verdict:
    """06, exercise 1: the smallest staleness bound S at which the dissemination term
    ``(T + D + L) / (S + 1)`` no longer exceeds the step time T."""
    expected = next(s for s in range(10_000)
                    if (step_time + dissemination) / (s + 1) <= step_time + 1e-12)
    return check_value("06.1", answer, expected, what="smallest S", hint="solve "
                       "(T + D + L) / (S + 1) <= T for the smallest integer S.")


def check_decode_limit(answer: float | None, preset: str = "8b",
                       context: int = 3000) -> Verdict:
    """06, exercise 2: a worker's tokens/s for many sequences of context c (the large-b limit
    of b / step_time(b, b c))."""
    from rlvr_lab.papers.systems.engine import ENGINE_PRESETS

    engine = ENGINE_PRESETS[preset]
    expected = 1.0 / (engine.tau1 + engine.tau2 * context)
    return check_value(f"06.2, {preset}", answer, expected, what="tokens/s limit", rtol=1e-3,
                       hint="one step makes b tokens in tau0 + b (tau1 + tau2 c) seconds; let "
                            "b grow.")


def check_april_tail(answer: str | None) -> Verdict:
    """06, exercise 3: for which tail of response lengths ('light', 'moderate', 'heavy')
    APRIL gains most."""
    return check_choice("06.3", None if answer is None else str(answer).strip().lower(),
                        "moderate",
                        why="a group is complete only when its slowest response is: with a "
                            "heavy tail most groups still hold a long response, with a light "
                            "one there is little idle time to win.",
                        hint="a step ends when N groups are complete; when is a group "
                             "complete?")


# notebook 10 ---------------------------------------------------------------------------

def check_group_advantage(fn: Callable[[Any], Any] | None, seed: int = 0) -> Verdict:
    """10, exercise: ``fn(rewards [B, G]) -> advantages [B, G]``, GRPO's group-normalised
    advantage; checked against ``advantages.grpo`` on random binary and graded rewards."""
    import jax.numpy as jnp

    from rlvr_lab import advantages

    hint = "(r - mean over the group) / (sample std over the group, ddof=1, + 1e-6)."
    if fn is None:
        return _waiting("10.1", hint)
    rng = np.random.default_rng(seed)
    cases = [rng.integers(0, 2, (16, 8)).astype(np.float32),
             rng.choice([0.0, 0.5, 1.5, 2.0], (16, 8)).astype(np.float32)]
    for rewards in cases:
        want = np.asarray(advantages.grpo(jnp.asarray(rewards)))
        got = np.asarray(fn(jnp.asarray(rewards)), float)
        if got.shape != want.shape:
            return _say(False, "10.1", f"shape {got.shape}, expected {want.shape}.", hint)
        if not np.allclose(got, want, rtol=1e-4, atol=1e-4):
            worst = np.unravel_index(np.argmax(np.abs(got - want)), want.shape)
            return _say(False, "10.1", f"at group {worst[0]} (rewards {rewards[worst[0]]}) "
                        f"you give {got[worst]:.4f}, GRPO gives {want[worst]:.4f}.", hint)
    return _say(True, "10.1", "your advantages equal advantages.grpo on binary and graded "
                "rewards.", hint)


def check_clipped_loss(fn: Callable[[Any, Any, Any], Any] | None, epsilon: float = 0.2,
                       seed: int = 0) -> Verdict:
    """10, exercise: ``fn(logp, old_logp, adv) -> scalar``, the PPO-clipped loss averaged over
    all tokens (``token-mean``); checked against ``losses.ppo_clip`` + ``losses.aggregate``."""
    import jax.numpy as jnp

    from rlvr_lab import losses

    hint = (f"ratio = exp(logp - old_logp); loss = -min(ratio A, clip(ratio, 1-{epsilon}, "
            f"1+{epsilon}) A), averaged over every rollout.")
    if fn is None:
        return _waiting("10.2", hint)
    rng = np.random.default_rng(seed)
    old = jnp.asarray(rng.normal(-2, 0.5, (8, 4)), jnp.float32)
    logp = old + jnp.asarray(rng.normal(0, 0.4, (8, 4)), jnp.float32)  # many clipped ratios
    adv = jnp.asarray(rng.normal(0, 1, (8, 4)), jnp.float32)
    mask = jnp.ones(old.shape, bool)
    want = float(losses.aggregate(losses.ppo_clip(logp, old, adv, mask, epsilon=epsilon),
                                  mask, "token-mean"))
    return check_value("10.2", fn(logp, old, adv), want, what="clipped loss", rtol=1e-4,
                       hint=hint)


def check_rloo_factor(answer: float | None, group_size: int = 8, seed: int = 0) -> Verdict:
    """10, exercise 3: the factor between RLOO's and Dr.GRPO's advantages for groups of G,
    measured on random rewards with the library's estimators."""
    import jax.numpy as jnp

    from rlvr_lab import advantages

    rewards = jnp.asarray(np.random.default_rng(seed).integers(0, 2, (64, group_size)),
                          jnp.float32)
    a, b = np.asarray(advantages.rloo(rewards)), np.asarray(advantages.dr_grpo(rewards))
    nonzero = np.abs(b) > 1e-6
    expected = float(np.median(a[nonzero] / b[nonzero]))
    return check_value(f"10.3, G={group_size}", answer, expected, what="RLOO / Dr.GRPO factor",
                       hint="RLOO's baseline leaves rollout i out: mean over the other G-1; "
                            "write r_i - that mean in terms of r_i - the group mean.")


# notebook 07 ---------------------------------------------------------------------------

def spec_rl_reused_fraction(log_lenience: Any, spread: float, length: int) -> np.ndarray:
    """SPEC-RL's expected reused fraction of an ``length``-token cached response when the
    per-token log-ratio log(pi_new / pi_old) is Gaussian with spread ``spread`` and mean
    ``-spread^2 / 2`` (notebook 07's slider): with a = E[min(1, l e^x)] per token,
    ``sum_{k=1}^{n} a^k / n``."""
    from scipy import stats

    log_lenience = np.asarray(log_lenience, dtype=np.float64)
    mu, ell = -spread * spread / 2, np.exp(log_lenience)
    a = (stats.norm.cdf((mu + log_lenience) / spread)
         + ell * np.exp(mu + spread * spread / 2)
         * stats.norm.cdf((-log_lenience - mu - spread * spread) / spread))
    a = np.minimum(a, 1.0)
    k = np.arange(1, length + 1)
    return (a[..., None] ** k).sum(-1) / length


def check_half_reuse_lenience(answer: float | None, spread: float = 0.3,
                              length: int = 12) -> Verdict:
    """07, exercise 1: the log lenience ln l at which a ``length``-token response keeps half
    its tokens on average (log-ratio spread ``spread``), to 0.05."""
    grid = np.linspace(-1.0, 3.0, 4001)
    reused = spec_rl_reused_fraction(grid, spread, length)
    expected = float(grid[np.argmax(reused >= 0.5)])
    hint = ("move the slider's ln l until the right panel's curve for s = 0.3 crosses 0.5, or "
            "search a grid with course.spec_rl_reused_fraction(grid, 0.3, 12).")
    if answer is None:
        return _waiting("07.1", hint)
    if abs(float(answer) - expected) <= 0.05:
        return _say(True, "07.1", f"half the tokens are kept at ln l = {expected:.2f} "
                    f"(l = {np.exp(expected):.2f}); as s -> 0 every l >= 1 keeps them all.",
                    hint)
    got = float(spec_rl_reused_fraction(float(answer), spread, length))
    return _say(False, "07.1", f"at ln l = {float(answer):g} a response keeps "
                f"{got:.2f} of its tokens on average, not 0.5.", hint)


def check_cut_distribution(answer: str | None) -> Verdict:
    """07, exercise 2: from which distribution must the token at the cut be resampled for
    l = 1 to be exactly on-policy ('new', 'old' or 'residual')?"""
    return check_choice("07.2", None if answer is None else str(answer).strip().lower(),
                        "residual",
                        why="speculative decoding's guarantee resamples a rejected position "
                            "from the normalised residual max(0, pi_new - pi_old); resampling "
                            "from pi_new (SPEC-RL's code) over-weights the tokens pi_old "
                            "already proposed.",
                        hint="the accepted tokens already carry min(pi_old, pi_new) of the "
                             "mass; what is left of pi_new at a rejection?")


def check_k3_small_mismatch(answer: float | None, sigma: float = 0.1) -> Verdict:
    """07, exercise 3: E[k3] = E[rho - log rho - 1] when log rho ~ N(0, sigma^2); the
    small-mismatch approximation E[(log rho)^2] / 2 = sigma^2 / 2 is accepted too (2%)."""
    expected = float(np.expm1(sigma * sigma / 2))   # E[e^x] - E[x] - 1, x ~ N(0, sigma^2)
    hint = (f"k3 = f(log rho) with f(x) = e^x - x - 1 >= 0; f(x) = x^2/2 + O(x^3), and "
            f"E[x^2] = sigma^2 = {sigma * sigma:g}.")
    if answer is None:
        return _waiting(f"07.3, sigma={sigma:g}", hint)
    if float(answer) < 0:
        return _say(False, f"07.3, sigma={sigma:g}", "k3 is never negative: e^x - x - 1 "
                    ">= 0 for every x (convex, minimum 0 at x = 0).", hint)
    return check_value(f"07.3, sigma={sigma:g}", answer, expected, what="E[k3]", rtol=0.02,
                       hint=hint)


def check_e4m3_outlier_onset(answer: float | None) -> Verdict:
    """07, exercise 4: the outlier magnitude (ratio of a block's largest entry to the others)
    from which E4M3 pushes the other entries of a block into subnormals: its largest normal
    over its smallest normal, read from ``jnp.finfo``; within a factor 2."""
    import jax.numpy as jnp

    info = jnp.finfo(jnp.float8_e4m3fn)
    expected = float(info.max) / float(info.smallest_normal)
    hint = ("a block is scaled so that its largest entry lands on the format's largest value; "
            "an entry r times smaller lands at max / r. When is that below the smallest "
            "normal number (jnp.finfo(jnp.float8_e4m3fn))?")
    if answer is None:
        return _waiting("07.4", hint)
    if float(answer) > 0 and abs(np.log2(float(answer) / expected)) <= 1:
        return _say(True, "07.4", f"{float(info.max):g} / {float(info.smallest_normal):g} = "
                    f"{expected:g}: beyond about 3e4 the other entries become subnormal.", hint)
    lands = float(info.max) / float(answer) if float(answer) > 0 else float("nan")
    where = ("still a normal number" if lands >= float(info.smallest_normal)
             else "far below the smallest normal")
    return _say(False, "07.4", f"at {float(answer):g} the other entries land near {lands:.3g}, "
                f"{where} (the onset is max / smallest normal).", hint)


# notebook 08 ---------------------------------------------------------------------------

def purchase_trap_probability(site, horizon: int, task: int = 0) -> float:
    """The exact probability that the uniform policy reaches the purchase page within
    ``horizon`` steps of task ``task`` (an episode that succeeds has ended)."""
    from rlvr_lab.envs import toy_web as W
    from rlvr_lab.papers.dynaweb import world_model as wm

    kernel = np.asarray(wm.policy_kernel(W.transition_tensor(site), wm.uniform_policy(site)),
                        np.float64)
    dist = np.eye(site.num_obs)[int(W.home_obs(site))]
    win = np.asarray(W.success_obs_mask(site))[task]
    bought, trapped = int(W.purchased_obs(site)), 0.0
    for _ in range(horizon):
        dist = dist @ kernel
        trapped += dist[bought]
        dist[bought] = 0.0
        dist[win] = 0.0
    return float(trapped)


def check_purchase_trap(answer: float | None, site=None, horizon: int | None = None) -> Verdict:
    """08, exercise 1: the probability that the uniform policy triggers the purchase trap
    within the horizon, for the first task of ``site``."""
    hint = ("a dynamic program over observations: push the home observation's distribution "
            "through the uniform policy's kernel (wm.policy_kernel) `horizon` times, adding the "
            "mass that reaches PURCHASED and removing it (and the success mass) each step.")
    if site is None or horizon is None:
        return _waiting("08.1", hint + " Pass site= and horizon= too.")
    if answer is None:
        return _waiting("08.1", hint)
    return check_value("08.1", answer, purchase_trap_probability(site, horizon),
                       what="probability of a purchase", rtol=1e-3, atol=1e-9, hint=hint)


def check_refresh_steps(answer: int | None, num_steps: int, refresh_every: int = 30) -> Verdict:
    """08, exercise 2: how many steps of a run of ``num_steps`` steps collect real episodes
    (refresh the world model) with ``refresh_every`` (the first step included)."""
    expected = len(range(0, num_steps, refresh_every))
    return check_value(f"08.2, refresh_every={refresh_every}", answer, expected,
                       what="refresh steps",
                       hint="a dreaming arm refreshes at the steps t with t % refresh_every "
                            "== 0, t = 0 .. num_steps - 1 (dyna.py); each costs "
                            "refresh_episodes real episodes per task.")


def check_expert_advantage(answer: float | None, group_size: int = 8) -> Verdict:
    """08, exercise 3: GRPO's advantage of one expert success (reward 1) in a group whose
    other ``group_size - 1`` dreams failed (reward 0)."""
    import jax.numpy as jnp

    from rlvr_lab import advantages

    rewards = jnp.zeros((1, group_size), jnp.float32).at[0, 0].set(1.0)
    expected = float(np.asarray(advantages.grpo(rewards))[0, 0])
    hint = ("(1 - group mean) / (sample std of the group, ddof = 1); without the expert the "
            "group's rewards are all 0 and every advantage is 0.")
    if answer is not None and abs(float(answer)) < 1e-9:
        return _say(False, f"08.3, G={group_size}", "0 is the advantage of the all-failed "
                    "group *without* the expert; with it the group's rewards differ.", hint)
    return check_value(f"08.3, G={group_size}", answer, expected,
                       what="the expert's advantage", rtol=1e-3, hint=hint)


# notebook 09 ---------------------------------------------------------------------------

def _final_by_arm(curves, column: str):
    last = curves[curves.step == curves.step.max()]
    return last.groupby("arm")[column].mean()


def check_argmax_gap(answer: bool | None, curves=None) -> Verdict:
    """09, exercise 1: does taking the argmax parent (``sar_argmax``) shrink SAR's quality loss
    (final FD above teacher forcing's)? Judged on your rerun's ``curves`` (arms tf, sar,
    sar_argmax)."""
    hint = ("run the solution's study with arms ('tf', 'sar', 'sar_argmax') and pass its "
            "curves=alt.curves; compare each arm's final FD with tf's.")
    if answer is None or curves is None:
        return _waiting("09.1", hint)
    fd = _final_by_arm(curves, "fd")
    if not {"tf", "sar", "sar_argmax"} <= set(fd.index):
        return _say(False, "09.1", f"curves holds the arms {sorted(fd.index)}; the check needs "
                    "tf, sar and sar_argmax.", hint)
    gap_sar, gap_argmax = fd["sar"] - fd["tf"], fd["sar_argmax"] - fd["tf"]
    shrinks = bool(gap_argmax < gap_sar)
    why = (f"FD above teacher forcing: sar {gap_sar:+.3f}, sar_argmax {gap_argmax:+.3f} "
           f"({'smaller' if shrinks else 'not smaller'} with argmax parents).")
    if bool(answer) == shrinks:
        return _say(True, "09.1", why, hint)
    return _say(False, "09.1", f"your run says otherwise: {why}", hint)


def check_distill_scale(answer: int | None, scales=None) -> Verdict:
    """09, exercise 2: the scale index whose train-test mismatch changes most between ``sar``
    and ``sar_distill``, judged on your rerun's ``scales`` table (mean over seeds)."""
    hint = ("run the study with arms ('tf', 'sar', 'sar_distill') and pass scales=alt.scales; "
            "compare the mean `mismatch` of the two arms scale by scale.")
    if answer is None or scales is None:
        return _waiting("09.2", hint)
    m = scales.groupby(["arm", "scale"]).mismatch.mean().unstack("scale")
    if not {"sar", "sar_distill"} <= set(m.index):
        return _say(False, "09.2", f"scales holds the arms {sorted(m.index)}; the check needs "
                    "sar and sar_distill.", hint)
    change = (m.loc["sar_distill"] - m.loc["sar"]).abs()
    expected = int(change.idxmax())
    return check_value("09.2", answer, expected, what="scale index with the largest change",
                       hint=hint)


def check_perfect_base(answer: bool | None) -> Verdict:
    """09, exercise 3: with a base whose one-step predictions are always right, do SAR's
    student-pass contexts differ from teacher forcing's?"""
    return check_choice("09.3", answer, False,
                        why="the staggered rollout's contexts are the base's own one-step "
                            "predictions of each parent; where the base is right they equal "
                            "the ground truth, so SAR and teacher forcing coincide and the "
                            "harm scales with the base's one-step error.",
                        hint="where does an SSR context differ from the ground-truth parent?")


def main(argv: list[str] | None = None) -> None:
    """``python -m rlvr_lab.course``: regenerate the course table of notebooks/README.md and,
    once the repository URL is declared, write the Colab / nbviewer links into it and into
    every notebook's header cell."""
    print(f"wrote {sync_course_block()}")
    changed = sync_links()
    if changed:
        print("links written into", ", ".join(str(p) for p in changed))
    elif not links_available(repository_url()):
        print("no repository URL declared ([project.urls] Repository in pyproject.toml): "
              "no Colab / nbviewer links written")


if __name__ == "__main__":
    main()
