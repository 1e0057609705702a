"""Mutation-style tests of the runner (``rlvr_lab.experiments``): each check catches one bug.

Every ``check_*`` below states a property of resume/reuse that a plausible bug breaks; the test
``test_<check>`` runs it on the real runner, and ``test_injected_bug_is_caught`` injects that
bug (a monkeypatched runner function, named in ``BUGS``) and asserts the same check then fails.
The experiments are tiny dummies written to a temporary folder and registered only for the
test (the slow import of every paper's experiments is skipped). The Ctrl-C handler is checked
by ``tests/core/test_cli.py::test_ctrl_c_exits_130_without_traceback`` (a subprocess).
"""
import importlib.util
import json
import os
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from rlvr_lab import experiments
from rlvr_lab import io as rio

DUMMY = '''
import pandas as pd

from rlvr_lab.experiments import claim, experiment

STATE = {{"a": 0, "b": 0, "a2": 0, "fail": False, "interrupt": False, "figure": None}}


@experiment("{a}", paper="{pa}", claims=("{a}_ok",), quick_seeds=1)
def run_a(ctx):
    """Writes a figure and a table."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    STATE["a"] += 1
    fig, ax = plt.subplots(figsize=(1, 1))
    ax.plot([0, 1])
    ctx.save_figure(STATE["figure"] or fig, "{a}_fig")
    plt.close(fig)
    ctx.save_table(pd.DataFrame({{"x": [1]}}), "{a}_table")
    return [claim("{a}_ok", "one is one", 1.0, True, "measured == 1")]


@experiment("{a2}", paper="{pa}", claims=("{a2}_ok",), quick_seeds=1)
def run_a2(ctx):
    """Fails or is interrupted on demand."""
    STATE["a2"] += 1
    if STATE["interrupt"]:
        raise KeyboardInterrupt
    if STATE["fail"]:
        raise RuntimeError("injected failure")
    return [claim("{a2}_ok", "three is three", 3.0, True, "measured == 3")]


@experiment("{b}", paper="{pb}", claims=("{b}_ok",), quick_seeds=1)
def run_b(ctx):
    """Another paper."""
    STATE["b"] += 1
    return [claim("{b}_ok", "two is two", 2.0, True, "measured == 2")]
'''


@pytest.fixture
def dummy(tmp_path, monkeypatch):
    """Three registered dummy experiments (papers A and B) in a temporary module."""
    uid = uuid.uuid4().hex[:8]
    names = dict(a=f"_fault_{uid}_a", a2=f"_fault_{uid}_a2", b=f"_fault_{uid}_b",
                 pa=f"FaultPaperA{uid}", pb=f"FaultPaperB{uid}")
    path = tmp_path / "src" / f"fault_dummy_{uid}.py"
    path.parent.mkdir()
    path.write_text(DUMMY.format(**names))
    monkeypatch.setattr(experiments, "_LOADED", True)   # no import of the real experiments
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield SimpleNamespace(state=module.STATE, path=path, out=tmp_path / "out", **names)
    for name in (names["a"], names["a2"], names["b"]):
        experiments._EXPERIMENTS._items.pop(name, None)


def _run(d, name, **kw):
    return experiments.run(name, quick=True, out_dir=d.out, **kw)


# ----------------------------------------------------------------------------- the checks
def check_missing_or_empty_outputs_are_recomputed(d):
    """Bug caught: resume reuses a result whose figure or table is missing or empty (a crash
    or a user deleted it), so the output is never written again."""
    _run(d, d.a)
    for victim, damage in ((f"{d.a}_fig.png", "truncate"), (f"data/{d.a}_table.csv.gz",
                                                             "delete")):
        path = d.out / victim
        path.write_bytes(b"") if damage == "truncate" else path.unlink()
        calls = d.state["a"]
        assert not _run(d, d.a).skipped, f"{damage}d {victim} was reused"
        assert d.state["a"] == calls + 1
        assert path.is_file() and path.stat().st_size > 0
    assert _run(d, d.a).skipped   # intact outputs are reused


class _CrashingFigure:
    """A figure whose save writes half a file and then fails (a crash mid-write)."""

    def savefig(self, path, **kw):
        Path(path).write_bytes(b"\x89PNG half a file")
        raise OSError("disk full (injected)")


def check_writes_are_atomic(d):
    """Bug caught: non-atomic writes. A crash while saving must leave neither a partial file
    under the final name nor a stray temporary file; results, tables and figures are replaced
    by a rename (a new file), never rewritten in place (where a crash leaves half a file)."""
    first = _run(d, d.a)
    outputs = [experiments._result_path(d.out, d.a), d.out / f"data/{d.a}_table.csv.gz",
               d.out / f"{d.a}_fig.png"]
    before = {p: (p.stat().st_ino, p.read_bytes()) for p in outputs}
    _run(d, d.a, force=True)
    for p in outputs:
        assert p.stat().st_ino != before[p][0], f"{p.name} was rewritten in place"
    assert not [p for p in d.out.rglob("*") if p.name.endswith(".tmp")]
    # a crash while writing the figure: the previous file stays whole, nothing half-written
    d.state["figure"] = _CrashingFigure()
    stored = outputs[2].read_bytes()
    with pytest.raises(OSError, match="injected"):
        _run(d, d.a, force=True)
    assert outputs[2].read_bytes() == stored, "a crash left a partial figure"
    assert not [p for p in d.out.rglob("*") if p.name.endswith(".tmp")]
    assert experiments._read_result(outputs[0]).config_hash == first.config_hash


def check_source_edit_invalidates_the_cache(d, monkeypatch):
    """Bug caught: a config hash without the source digest; an edit of the experiment's module
    or of any library file (even one imported lazily inside a function) must rerun it."""
    first = _run(d, d.b)
    assert _run(d, d.b).skipped
    with open(d.path, "a") as fh:
        fh.write("\n# an edit\n")
    again = _run(d, d.b)
    assert not again.skipped and again.config_hash != first.config_hash, \
        "an edited experiment module reused its stored result"
    lazy = d.path.parent / "lazily_imported_library_module.py"
    lazy.write_text("X = 1\n")
    real = Path.rglob
    monkeypatch.setattr(Path, "rglob", lambda self, pat: [*real(self, pat), lazy])
    _run(d, d.b)   # a new library file: computed once, then reused
    assert _run(d, d.b).skipped
    lazy.write_text("X = 2\n")
    assert not _run(d, d.b).skipped, "an edited library module reused the stored result"


def check_only_keeps_other_papers_rows(d):
    """Bug caught: ``reproduce --only`` writes claims.csv/CLAIMS.md with its own paper's rows
    only, dropping the rows of papers run earlier."""
    experiments.reproduce(quick=True, only=d.pa, out_dir=d.out, progress=False)
    _, df = experiments.reproduce(quick=True, only=d.pb, out_dir=d.out, progress=False)
    assert {f"{d.a}_ok", f"{d.a2}_ok", f"{d.b}_ok"} <= set(df["claim"]), \
        "--only dropped another paper's rows"
    stored = (d.out / "claims.csv").read_text()
    assert f"{d.a}_ok" in stored and d.pa in (d.out / "CLAIMS.md").read_text()


def check_only_keeps_rows_of_a_table_without_results(d):
    """Bug caught: on a fresh clone (the tracked claims.csv, no ``results/`` folder)
    ``reproduce --only`` wrote a table with its own paper's rows only."""
    experiments.reproduce(quick=True, only=d.pa, out_dir=d.out, progress=False)
    experiments.reproduce(quick=True, only=d.pb, out_dir=d.out, progress=False)
    for name in (d.a, d.a2):
        experiments._result_path(d.out, name).unlink()
    _, df = experiments.reproduce(quick=True, only=d.pb, out_dir=d.out, progress=False)
    assert {f"{d.a}_ok", f"{d.a2}_ok", f"{d.b}_ok"} <= set(df["claim"]), \
        "--only dropped the rows of experiments that have no results file"
    assert list(df["experiment"]) == sorted(df["experiment"]), "rows out of experiment order"


def check_result_that_recorded_an_error_is_not_reused(d):
    """Bug caught: a result file that recorded an exception (``reproduce`` catches it) is
    reused, so the experiment is never retried once the cause is fixed."""
    d.state["fail"] = True
    failed = experiments.run(d.a2, quick=True, out_dir=d.out, catch=True)
    assert failed.error and failed.claims[0].verdict == "fail"
    d.state["fail"] = False
    calls = d.state["a2"]
    retried = _run(d, d.a2)
    assert not retried.skipped and d.state["a2"] == calls + 1, "a recorded error was reused"
    assert not retried.error and retried.claims[0].verdict == "pass"


CORRUPT = [b"garbage\x00\xff{", b"{}", b"[]", b'{"experiment": "x"}', b'{"claims": [{}]}', b""]


def check_corrupt_result_of_another_paper_is_skipped(d, capsys):
    """Bug caught: a corrupt results file of *another* paper makes ``reproduce --only`` fail
    with a traceback (UnicodeDecodeError / KeyError / AttributeError in the merge)."""
    for content in CORRUPT:
        other = experiments._result_path(d.out, d.b)
        other.parent.mkdir(parents=True, exist_ok=True)
        other.write_bytes(content)
        _, df = experiments.reproduce(quick=True, only=d.pa, out_dir=d.out, progress=False)
        assert f"{d.a2}_ok" in set(df["claim"]) and f"{d.b}_ok" not in set(df["claim"])
        assert "ignoring unreadable results file" in capsys.readouterr().err


def check_interrupt_keeps_finished_experiments(d):
    """Bug caught: results stored only at the end of ``reproduce``, so Ctrl-C loses every
    experiment that had finished (the rerun must reuse them, and compute the rest)."""
    d.state["interrupt"] = True
    with pytest.raises(KeyboardInterrupt):   # a (a figure) finishes, then a2 is interrupted
        experiments.reproduce(quick=True, only=d.pa, out_dir=d.out, progress=False)
    d.state["interrupt"] = False
    results, _ = experiments.reproduce(quick=True, only=d.pa, out_dir=d.out, progress=False)
    by_name = {r.experiment: r for r in results}
    assert by_name[d.a].skipped, "a finished experiment was lost by the interrupt"
    assert not by_name[d.a2].skipped


CHECKS = {
    "outputs": check_missing_or_empty_outputs_are_recomputed,
    "atomic": check_writes_are_atomic,
    "source": check_source_edit_invalidates_the_cache,
    "only": check_only_keeps_other_papers_rows,
    "table": check_only_keeps_rows_of_a_table_without_results,
    "error": check_result_that_recorded_an_error_is_not_reused,
    "corrupt": check_corrupt_result_of_another_paper_is_skipped,
    "interrupt": check_interrupt_keeps_finished_experiments,
}


def _call(check, d, monkeypatch, capsys):
    extra = {"monkeypatch": monkeypatch, "capsys": capsys}
    names = check.__code__.co_varnames[1:check.__code__.co_argcount]
    return check(d, **{n: extra[n] for n in names})


@pytest.mark.parametrize("name", list(CHECKS))
def test_runner_property(name, dummy, monkeypatch, capsys):
    _call(CHECKS[name], dummy, monkeypatch, capsys)


# ----------------------------------------------------------------------------- injected bugs
def _reuse_without_output_check(path, chash, out_dir):
    result = experiments._read_result(path)
    return result if result and result.config_hash == chash and not result.error else None


def _reuse_despite_error(path, chash, out_dir):
    result = experiments._read_result(path)
    return result if result and result.config_hash == chash else None


def _read_without_guard(path):
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    return experiments.Result(data["experiment"], data["paper"],
                              [experiments._claim_from_dict(c) for c in data["claims"]],
                              list(data["figures"]), list(data.get("tables", [])),
                              float(data["seconds"]), data["config_hash"], skipped=True)


def _in_place_bytes(path, data):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:   # truncates and rewrites the same file
        fh.write(data)
    return path


def _in_place_save(path, write):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        os.truncate(path, 0)
    write(str(path))
    return path


def _inject_non_atomic(monkeypatch):
    monkeypatch.setattr(experiments, "atomic_write_text",
                        lambda p, t: _in_place_bytes(p, t.encode()))
    monkeypatch.setattr(experiments, "atomic_write_bytes", _in_place_bytes)
    monkeypatch.setattr(rio, "atomic_save", _in_place_save)


def _inject_results_written_at_the_end(monkeypatch):
    real = experiments.atomic_write_text
    monkeypatch.setattr(experiments, "atomic_write_text",
                        lambda p, t: None if Path(p).parent.name == "results" else real(p, t))


BUGS = {
    "outputs": lambda mp: mp.setattr(experiments, "_load_result", _reuse_without_output_check),
    "atomic": _inject_non_atomic,
    "source": lambda mp: mp.setattr(experiments, "_source_digest", lambda exp: "constant"),
    "only": lambda mp: mp.setattr(experiments, "_merge_previous", lambda out, results: results),
    "table": lambda mp: mp.setattr(experiments, "_rows_without_results",
                                   lambda out, results: None),
    "error": lambda mp: mp.setattr(experiments, "_load_result", _reuse_despite_error),
    "corrupt": lambda mp: mp.setattr(experiments, "_read_result", _read_without_guard),
    "interrupt": _inject_results_written_at_the_end,
}


@pytest.mark.parametrize("name", list(CHECKS))
def test_injected_bug_is_caught(name, dummy, monkeypatch, capsys):
    """Each check fails (assertion or crash) once its bug is injected."""
    BUGS[name](monkeypatch)
    with pytest.raises(Exception):  # noqa: B017 - an assertion or the bug's own traceback
        _call(CHECKS[name], dummy, monkeypatch, capsys)
