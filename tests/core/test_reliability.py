"""Issue 44: stored results are keyed by what the run executed, outputs are verified on reuse,
write failures are one line with nothing half-written.

The experiments are dummies in a temporary folder (the folder of an experiment's module counts
as project source, like ``simulations/``), registered only for the test.
"""
import importlib.util
import json
import sys
import uuid
from types import SimpleNamespace

import pytest

from rlvr_lab import experiments

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
