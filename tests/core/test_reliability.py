"""Issue 44: stored results are keyed by what the run executed, outputs are verified on reuse,
write failures are one line with nothing half-written.

The experiments are dummies in a temporary folder (the folder of an experiment's module counts
as project source, like ``simulations/``), registered only for the test.
"""
import errno
import hashlib
import importlib.util
import json
import os
import sys
import tempfile
import uuid
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from rlvr_lab import experiments
from rlvr_lab import io as rio

EXPERIMENT = '''
from rlvr_lab.experiments import claim, experiment

CALLS = {{"n": 0}}


@experiment("{name}", paper="StalePaper{uid}", claims=("{name}_ok",), quick_seeds=1)
def run(ctx):
    CALLS["n"] += 1
    import {helper}                      # imported inside the function, as tiny_grpo was
    return [claim("{name}_ok", "the helper's value", {helper}.rl_config()["lr"], True, "any")]
'''

HELPER = 'def rl_config():\n    return {"lr": 5e-4}\n'


@pytest.fixture
def stale(tmp_path, monkeypatch):
    uid = uuid.uuid4().hex[:8]
    names = dict(name=f"_stale_{uid}", helper=f"stale_helper_{uid}", uid=uid)
    src = tmp_path / "src"
    src.mkdir()
    (src / f"{names['helper']}.py").write_text(HELPER)
    path = src / f"stale_exp_{uid}.py"
    path.write_text(EXPERIMENT.format(**names))
    monkeypatch.syspath_prepend(str(src))
    monkeypatch.setattr(experiments, "_LOADED", True)   # no import of the real experiments
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield SimpleNamespace(calls=module.CALLS, helper_file=src / f"{names['helper']}.py",
                          out=tmp_path / "out", **names)
    experiments._EXPERIMENTS._items.pop(names["name"], None)
    sys.modules.pop(names["helper"], None)


def _run(d, **kw):
    return experiments.run(d.name, quick=True, out_dir=d.out, **kw)


def check_function_level_import_is_in_the_key(d):
    first = _run(d)
    assert not first.skipped and d.calls["n"] == 1
    assert _run(d).skipped and d.calls["n"] == 1          # unchanged: reused
    # the edit: the learning rate of rl_config, 5e-4 -> 5e-2 (same file size)
    d.helper_file.write_text(HELPER.replace("5e-4", "5e-2"))
    again = _run(d)
    assert not again.skipped and d.calls["n"] == 2, "an edited lazily imported module was reused"
    assert _run(d).skipped and d.calls["n"] == 2


def test_function_level_import_is_in_the_key(stale):
    check_function_level_import_is_in_the_key(stale)
    stored = json.loads(experiments._result_path(stale.out, stale.name).read_text())
    assert str(stale.helper_file.resolve()) in stored["sources"]


def test_already_loaded_module_imported_again_in_a_later_run_is_recorded(stale):
    __import__(stale.helper)                          # loaded before the run
    assert stale.helper in sys.modules
    check_function_level_import_is_in_the_key(stale)


def test_the_check_fails_without_the_run_time_record(stale, monkeypatch):
    """The test above can fail: with only the experiment's own module recorded (imports
    crawled, not recorded), the edit of the lazily imported helper is reused."""
    real = experiments.run_sources
    monkeypatch.setattr(experiments, "run_sources", lambda exp, imported: real(exp, ()))
    with pytest.raises(AssertionError, match="was reused"):
        check_function_level_import_is_in_the_key(stale)


def test_result_without_a_source_record_is_recomputed(stale):
    _run(stale)
    path = experiments._result_path(stale.out, stale.name)
    data = json.loads(path.read_text())
    data.pop("sources")
    path.write_text(json.dumps(data))
    assert not _run(stale).skipped


def test_deleted_source_file_is_not_reused(stale):
    _run(stale)
    path = experiments._result_path(stale.out, stale.name)
    data = json.loads(path.read_text())
    data["sources"]["/nonexistent/gone.py"] = "0" * 64
    path.write_text(json.dumps(data))
    assert not _run(stale).skipped


def test_recording_restores_the_import_machinery():
    import builtins
    import importlib

    real_import, real_import_module = builtins.__import__, importlib.import_module
    with experiments._record_imports() as outer:
        with experiments._record_imports() as inner:
            import json as _json  # noqa: F401
            importlib.import_module("rlvr_lab.envs.arithmetic")
        from rlvr_lab.envs import countdown  # noqa: F401
    assert builtins.__import__ is real_import and importlib.import_module is real_import_module
    assert {"json", "rlvr_lab.envs.arithmetic"} <= inner <= outer
    assert "rlvr_lab.envs.countdown" in outer and "rlvr_lab.envs.countdown" not in inner


def test_real_experiment_records_its_modules():
    """A real experiment's record holds its own module and what it imports (dars_theory's
    module imports tiny_grpo); the library is there too."""
    exp = experiments.get("dars_theory")
    sources = experiments.run_sources(exp, ["simulations.tiny_grpo", "rlvr_lab.losses"])
    assert "simulations/tiny_grpo.py" in sources and "rlvr_lab/losses.py" in sources
    assert all(len(v) == 64 for v in sources.values())


# ----------------------------------------------------------------------------- outputs, writes
FIGURE_EXPERIMENT = '''
import pandas as pd

from rlvr_lab.experiments import claim, experiment

CALLS = {{"n": 0}}


@experiment("{name}", paper="OutputsPaper{uid}", claims=("{name}_ok",), quick_seeds=1)
def run(ctx):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    CALLS["n"] += 1
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1, 0, 1])
    ctx.save_figure(fig, "{name}_fig")
    plt.close(fig)
    ctx.save_table(pd.DataFrame({{"x": list(range(200))}}), "{name}_table")
    return [claim("{name}_ok", "one is one", 1.0, True, "measured == 1")]
'''


@pytest.fixture
def figs(tmp_path, monkeypatch):
    uid = uuid.uuid4().hex[:8]
    name = f"_outputs_{uid}"
    src = tmp_path / "src"
    src.mkdir()
    path = src / f"outputs_exp_{uid}.py"
    path.write_text(FIGURE_EXPERIMENT.format(name=name, uid=uid))
    monkeypatch.setattr(experiments, "_LOADED", True)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield SimpleNamespace(calls=module.CALLS, name=name, out=tmp_path / "out")
    experiments._EXPERIMENTS._items.pop(name, None)


def _damage(path, how):
    data = path.read_bytes()
    if how == "truncate":
        path.write_bytes(data[: len(data) // 2])      # a readable prefix, not empty
    elif how == "flip":
        path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))   # same size
    else:
        path.unlink()


@pytest.mark.parametrize("how", ["truncate", "flip", "delete"])
@pytest.mark.parametrize("victim", ["fig.png", "fig.pdf", "table.csv.gz"])
def test_broken_output_is_recomputed(figs, victim, how):
    experiments.run(figs.name, quick=True, out_dir=figs.out)
    assert experiments.run(figs.name, quick=True, out_dir=figs.out).skipped
    rel = f"data/{figs.name}_table.csv.gz" if victim.endswith("csv.gz") else \
        f"{figs.name}_{victim}"
    size = (figs.out / rel).stat().st_size
    _damage(figs.out / rel, how)
    again = experiments.run(figs.name, quick=True, out_dir=figs.out)
    assert not again.skipped and figs.calls["n"] == 2, f"{how} {victim} was reused"
    rewritten = (figs.out / rel).read_bytes()              # written again, whole
    assert abs(len(rewritten) - size) < 64
    assert again.outputs[rel] == hashlib.sha256(rewritten).hexdigest()
    assert experiments.run(figs.name, quick=True, out_dir=figs.out).skipped


def test_result_without_output_digests_is_recomputed(figs):
    experiments.run(figs.name, quick=True, out_dir=figs.out)
    path = experiments._result_path(figs.out, figs.name)
    data = json.loads(path.read_text())
    assert set(data["outputs"]) == {f"{figs.name}_fig.png", f"{figs.name}_fig.pdf",
                                    f"data/{figs.name}_table.csv.gz"}
    data.pop("outputs")
    path.write_text(json.dumps(data))
    assert not experiments.run(figs.name, quick=True, out_dir=figs.out).skipped


class _NoSpace:
    """A file object whose writes fail like a full disk after a few bytes."""

    def __init__(self, fh):
        self.fh = fh

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.fh.close()

    def write(self, data):
        self.fh.write(data[:3])
        raise OSError(errno.ENOSPC, "No space left on device")


def _full_disk(monkeypatch):
    real = os.fdopen
    monkeypatch.setattr(os, "fdopen", lambda fd, *a, **k: _NoSpace(real(fd, *a, **k)))


def _leftovers(folder):
    return [p for p in folder.rglob("*") if p.name.endswith(".tmp") or p.name.startswith(".")]


def test_atomic_write_on_a_full_disk_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    target = tmp_path / "a" / "f.bin"
    rio.atomic_write_bytes(target, b"old content")
    _full_disk(monkeypatch)
    with pytest.raises(rio.WriteError) as err:
        rio.atomic_write_bytes(target, b"new content" * 100)
    assert str(err.value) == f"cannot write {target}: No space left on device"
    assert err.value.errno == errno.ENOSPC and isinstance(err.value, OSError)
    assert target.read_bytes() == b"old content" and not _leftovers(tmp_path)


def test_folder_made_read_only_while_rendering_leaves_nothing(tmp_path, monkeypatch):
    """The figure is rendered away from the output folder; the folder refusing new files
    afterwards (read-only) is one WriteError and no temporary file."""
    out = tmp_path / "out"
    out.mkdir()

    def render(tmp):
        Path(tmp).write_bytes(b"\x89PNG rendered")
        assert not list(out.iterdir()), "rendered inside the output folder"
        real = tempfile.mkstemp

        def refuse(*a, dir=None, **k):
            if Path(dir) == out:
                raise PermissionError(errno.EACCES, "Permission denied")
            return real(*a, dir=dir, **k)
        monkeypatch.setattr(tempfile, "mkstemp", refuse)

    with pytest.raises(rio.WriteError, match=r"cannot write .*fig\.png: Permission denied"):
        rio.atomic_save(out / "fig.png", render)
    assert not list(out.iterdir())


def test_a_long_file_name_that_fits_gets_a_temporary_name_that_fits(tmp_path):
    name = "x" * 250 + ".png"                     # 254 characters: a legal name
    rio.atomic_write_bytes(tmp_path / name, b"ok")
    assert (tmp_path / name).read_bytes() == b"ok"
    with pytest.raises(rio.WriteError, match="name too long"):
        rio.atomic_write_bytes(tmp_path / ("y" * 300), b"no")
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_cli_run_on_a_full_disk_is_one_line(figs, monkeypatch, capsys):
    from rlvr_lab import cli

    experiments.run(figs.name, quick=True, out_dir=figs.out)   # an earlier, whole result
    stored = {p: p.read_bytes() for p in figs.out.rglob("*") if p.is_file()}
    _full_disk(monkeypatch)
    code = cli.main(["run", figs.name, "--quick", "--force", "--out", str(figs.out)])
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1, err
    assert err.startswith("rlvr-lab: error: cannot write ") and "No space left" in err
    assert "Traceback" not in err and not _leftovers(figs.out)
    assert {p: p.read_bytes() for p in figs.out.rglob("*") if p.is_file()} == stored


# ----------------------------------------------------------------------------- CLI
CLI_CALLS = {"n": 0}


@experiments.experiment("_rel_cli_tiny", paper="RelCliPaper", claims=("rel_tiny",),
                        quick_seeds=1)
def _rel_cli_tiny(ctx):
    CLI_CALLS["n"] += 1
    return [experiments.claim("rel_tiny", "three is three", 3.0, True, "measured == 3")]


def _usage_error(argv, capsys):
    from rlvr_lab import cli

    code = cli.main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, (code, err)
    return err


@pytest.mark.parametrize("parts", [["a" * 300], ["ok", "b" * 256, "c"]])
def test_out_with_a_name_too_long(tmp_path, capsys, parts):
    out = tmp_path.joinpath(*parts)
    calls = CLI_CALLS["n"]
    err = _usage_error(["run", "_rel_cli_tiny", "--quick", "--out", str(out)], capsys)
    assert "--out" in err and "at most 255" in err
    assert not list(tmp_path.iterdir()) and CLI_CALLS["n"] == calls


def test_out_with_a_path_too_long(tmp_path, capsys):
    out = tmp_path.joinpath(*["d" * 200] * 25)             # ~5000 characters
    err = _usage_error(["run", "_rel_cli_tiny", "--quick", "--out", str(out)], capsys)
    assert "--out" in err and "characters long" in err and not list(tmp_path.iterdir())


@pytest.mark.parametrize("argv, flag", [
    (["run", "_rel_cli_tiny", "--seeds", "3", "--seeds", "4"], "--seeds"),
    (["run", "_rel_cli_tiny", "--format", "md", "--format", "csv"], "--format"),
    (["reproduce", "--format", "md", "--format", "csv"], "--format"),
    (["reproduce", "--jobs", "1", "--jobs", "2"], "--jobs"),
])
def test_repeated_flags_are_rejected(argv, flag, capsys):
    err = _usage_error(argv, capsys)
    assert f"{flag} given twice" in err


@pytest.mark.parametrize("value", ["0", "-1", "99999", "1.5", "two", ""])
def test_bad_jobs_names_jobs(value, capsys):
    from rlvr_lab import cli

    err = _usage_error(["reproduce", "--quick", "--jobs", value], capsys)
    assert "--jobs" in err and "--seeds" not in err and repr(value) in err
    assert f"between 1 and {cli.MAX_JOBS}" in err


def test_bad_xla_flag_is_one_line_before_any_work(monkeypatch, capsys, tmp_path):
    from rlvr_lab import cli

    monkeypatch.setenv("XLA_FLAGS", "--bogus_flag")
    CLI_CALLS["n"] = 0
    err = _usage_error(["run", "_rel_cli_tiny", "--quick", "--out", str(tmp_path / "o")],
                       capsys)
    assert "XLA_FLAGS" in err and "--bogus_flag" in err and "unknown" in err
    assert CLI_CALLS["n"] == 0 and not (tmp_path / "o").exists()
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=abc")
    err = _usage_error(["run", "_rel_cli_tiny", "--quick", "--out", str(tmp_path / "o")],
                       capsys)
    assert "xla_backend_optimization_level" in err and "abc" in err
    # a valid flag passes (and the experiment runs)
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=1")
    assert cli.main(["run", "_rel_cli_tiny", "--quick", "--out", str(tmp_path / "o")]) == 0
    assert CLI_CALLS["n"] == 1


@pytest.mark.parametrize("var", ["RLVR_LAB_CACHE", "RLVR_LAB_XLA_CACHE", "RLVR_LAB_OUTPUT"])
def test_env_folder_that_is_a_file_is_one_line_naming_the_variable(var, tmp_path, monkeypatch,
                                                                    capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv(var, str(blocker))
    calls = CLI_CALLS["n"]
    err = _usage_error(["run", "_rel_cli_tiny", "--quick"], capsys)
    assert var in err and CLI_CALLS["n"] == calls


@pytest.mark.parametrize("bad", ["a\nb", "x\x00y", "tab\there"])
def test_out_with_control_characters(bad, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    err = _usage_error(["run", "_rel_cli_tiny", "--quick", "--out", bad], capsys)
    assert "--out" in err and "control character" in err and not list(tmp_path.iterdir())


def test_error_messages_stay_on_one_line_for_array_values():
    from rlvr_lab import advantages, metrics

    with pytest.raises(TypeError) as e:
        advantages.grpo(np.array([[object()] * 4] * 3))
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError) as e:
        metrics.pass_at_k(np.full((3, 4), 1 + 1j), 1, 1)
    assert "\n" not in str(e.value)
