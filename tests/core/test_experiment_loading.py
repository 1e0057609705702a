"""Experiment metadata and discovery: `setting=` fills claims' empty setting; importing
rlvr_lab never imports simulations; load_all imports the repository's simulations/ by path,
so a folder named `simulations` in the working directory cannot shadow it."""
import json
import subprocess
import sys
import textwrap

import pytest

from rlvr_lab import experiments
from rlvr_lab.experiments import claim, experiment


@experiment("_test_setting", paper="SettingPaper", claims=("plain", "own_setting"),
            setting="bank", quick_seeds=1)
def _setting(ctx):
    return [claim("plain", "s", 1.0, True, "c"),
            claim("own_setting", "s", 1.0, True, "c", setting="theory")]


def test_setting_fills_only_empty_settings(tmp_path):
    result = experiments.run("_test_setting", quick=True, out_dir=tmp_path)
    assert {c.id: c.setting for c in result.claims} == {"plain": "bank",
                                                          "own_setting": "theory"}
    assert experiments.load("_test_setting", out_dir=tmp_path)["setting"].tolist() == [
        "bank", "theory"]


def test_unknown_setting_is_rejected():
    with pytest.raises(ValueError, match="setting='laptop'.*'small model'"):
        experiment("_test_bad_setting", paper="P", claims=("c",), setting="laptop")


def _python(code, cwd):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_import_is_lazy_and_a_simulations_folder_in_cwd_does_not_shadow(tmp_path):
    fake = tmp_path / "simulations"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise RuntimeError('the wrong simulations package')\n")
    out = _python("""
        import json, sys
        import rlvr_lab, rlvr_lab.experiments, rlvr_lab.cli, rlvr_lab.report
        from rlvr_lab import experiments
        early = sorted(m for m in sys.modules if m.split('.')[0] == 'simulations')
        names = experiments.names()
        print(json.dumps({"early": early, "errors": experiments.LOAD_ERRORS,
                          "has": "grpo_family" in names}))
    """, tmp_path)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"early": [], "errors": {}, "has": True}


def test_a_foreign_simulations_module_is_reported_not_used(monkeypatch):
    import types

    monkeypatch.setitem(sys.modules, "simulations", types.ModuleType("simulations"))
    with pytest.raises(ImportError, match="different package named 'simulations'"):
        experiments._simulations_package()


@experiment("_test_load_after_run", paper="LoadPaper", claims=("here",), quick_seeds=1)
def _load_after_run(ctx):
    return [claim("here", "s", 2.0, True, "c")]


def test_load_reads_what_the_cli_run_wrote_and_says_where(tmp_path, monkeypatch, capsys):
    """`rlvr-lab run NAME --quick` then `experiments.load(NAME, quick=True)`: no out_dir."""
    from rlvr_lab import cli

    monkeypatch.setenv("RLVR_LAB_OUTPUT", str(tmp_path / "user"))
    monkeypatch.setenv("RLVR_LAB_FIGURES", str(tmp_path / "figures"))
    with pytest.raises(FileNotFoundError, match="user.*figures.*rlvr-lab run"):
        experiments.load("_test_load_after_run", quick=True)
    assert cli.main(["run", "_test_load_after_run", "--quick"]) == 0
    capsys.readouterr()
    df = experiments.load("_test_load_after_run", quick=True)
    written = tmp_path / "user" / "quick" / "results" / "_test_load_after_run.json"
    assert df["measured"].tolist() == [2.0] and df.attrs["source"] == str(written)
    assert str(written) in capsys.readouterr().out
    # a later reproduce-style run into the figures folder is newer, so it is the one read
    experiments.run("_test_load_after_run", quick=True, out_dir=tmp_path / "figures" / "quick")
    df = experiments.load("_test_load_after_run", quick=True, verbose=False)
    assert df.attrs["source"].startswith(str(tmp_path / "figures"))
