"""Experiment runner (atomic writes, resume by config hash, claims table) and CLI errors."""
import json
import subprocess
import sys

import pandas as pd
import pytest

from rlvr_lab import cli, experiments
from rlvr_lab.experiments import claim, experiment

CALLS = {"n": 0}


@experiment("_test_dummy", paper="TestPaper", claims=("adds_up", "fails_honestly"),
            quick_seeds=2, default_seeds=3)
def _dummy(ctx):
    CALLS["n"] += 1
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, ctx.seeds])
    ctx.save_figure(fig, "dummy_fig")
    plt.close(fig)
    ctx.save_table(pd.DataFrame({"seed": range(ctx.seeds)}), "dummy_table")
    return [claim("adds_up", "1 + 1 = 2", 1 + 1, 1 + 1 == 2, "measured == 2"),
            claim("fails_honestly", "a failing claim stays failing", 0.5, 0.5 > 1,
                  "measured > 1", reason="toy scale")]


def test_run_writes_everything_and_reuses_result(tmp_path):
    CALLS["n"] = 0
    r1 = experiments.run("_test_dummy", quick=True, out_dir=tmp_path)
    assert not r1.skipped and CALLS["n"] == 1
    assert (tmp_path / "dummy_fig.png").stat().st_size > 0
    assert (tmp_path / "dummy_fig.pdf").stat().st_size > 0
    assert pd.read_csv(tmp_path / "data" / "dummy_table.csv.gz")["seed"].tolist() == [0, 1]
    stored = json.loads((tmp_path / "results" / "_test_dummy.json").read_text())
    assert stored["seeds"] == 2 and len(stored["claims"]) == 2
    r2 = experiments.run("_test_dummy", quick=True, out_dir=tmp_path)
    assert r2.skipped and CALLS["n"] == 1
    assert [c.passed for c in r2.claims] == [True, False]
    experiments.run("_test_dummy", quick=True, seeds=3, out_dir=tmp_path)  # new hash
    assert CALLS["n"] == 2
    assert not list(tmp_path.rglob("*.tmp"))


def test_claims_table_files(tmp_path):
    results = [experiments.run("_test_dummy", quick=True, out_dir=tmp_path)]
    df = experiments.write_claims(results, tmp_path, quick=True)
    csv = pd.read_csv(tmp_path / "claims.csv")
    for col in ("experiment", "paper", "claim", "statement", "paper_value", "measured",
                "criterion", "verdict"):
        assert col in csv.columns
    assert csv["verdict"].tolist() == ["pass", "fail"]
    md = (tmp_path / "CLAIMS.md").read_text()
    assert "**FAIL**" in md and "toy scale" in md and "1 pass, 1 fail" in md
    assert len(df) == 2


def test_failing_experiment_is_recorded_not_hidden(tmp_path):
    @experiment("_test_broken", paper="TestPaper", claims=("never",))
    def _broken(ctx):
        raise RuntimeError("boom")

    r = experiments.run("_test_broken", quick=True, out_dir=tmp_path, catch=True)
    assert r.error and r.claims[0].passed is False and "boom" in r.claims[0].reason
    with pytest.raises(RuntimeError, match="boom"):
        experiments.run("_test_broken", quick=True, out_dir=tmp_path, force=True)


def test_nonfinite_measurement_fails_the_claim():
    c = claim("x", "s", float("nan"), True, "measured < 1")
    assert c.passed is False and "not finite" in c.reason


def test_simulation_modules_import_cleanly():
    experiments.load_all()
    assert experiments.LOAD_ERRORS == {}
    assert "grpo_family" in experiments.names()


@pytest.mark.parametrize("argv, needle", [
    (["run", "no_such_experiment"], "unknown experiment 'no_such_experiment'"),
    (["run", "grpo_family", "--seeds", "0"], "'0'"),
    (["run", "grpo_family", "--seeds", "-3"], "'-3'"),
    (["run", "grpo_family", "--seeds", "two"], "'two'"),
    (["run", "grpo_family", "--seeds", "1.5"], "'1.5'"),
    (["reproduce", "--only", "NoSuchPaper"], "unknown paper 'NoSuchPaper'"),
    (["reproduce", "--frobnicate"], "'--frobnicate'"),
    (["bench", "--only", "nope"], "unknown benchmark 'nope'"),
    (["explode"], "invalid choice: 'explode'"),
    ([], "required"),
])
def test_cli_bad_input_is_one_line_exit_2(argv, needle, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err and "Traceback" not in err


def test_cli_unwritable_out_writes_nothing(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert cli.main(["run", "_test_dummy", "--quick", "--out", str(blocker / "sub")]) == 2
    assert "--out" in capsys.readouterr().err
    assert cli.main(["run", "_test_dummy", "--quick", "--out", str(blocker)]) == 2
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_cli_run_and_list(tmp_path, capsys):
    assert cli.main(["run", "_test_dummy", "--quick", "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "adds_up" in out and "FAIL" in out
    assert cli.main(["list"]) == 0
    assert "grpo_family" in capsys.readouterr().out


def test_console_script_exit_code_without_traceback():
    proc = subprocess.run([sys.executable, "-m", "rlvr_lab.cli", "run", "nope", "--seeds", "3"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_written_files_get_the_usual_permissions(tmp_path):
    import os
    import stat

    experiments.run("_test_dummy", quick=True, out_dir=tmp_path, force=True)
    umask = os.umask(0)
    os.umask(umask)
    for name in ("dummy_fig.png", "dummy_fig.pdf", "results/_test_dummy.json",
                 "data/dummy_table.csv.gz"):
        mode = stat.S_IMODE((tmp_path / name).stat().st_mode)
        assert mode == 0o666 & ~umask, (name, oct(mode))
