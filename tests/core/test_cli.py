"""CLI hostile inputs: one line, exit 2, nothing written; --version; run --strict."""
import pytest

from rlvr_lab import cli


@pytest.mark.parametrize("argv, needle", [
    (["run", "grpo_family", "--seeds", "\uff13"], "ASCII digits"),
    (["run", "grpo_family", "--seeds", "1_0"], "'1_0'"),
    (["run", "grpo_family", "--seeds", " 3 "], "' 3 '"),
    (["run", "grpo_family", "--seeds", "100000000"], f"between 1 and {cli.MAX_SEEDS}"),
    (["run", "grpo_family", "--out", ""], "--out '' is empty"),
    (["run", "grpo_family", "--out", "a", "--out", "b"], "given twice"),
    (["reproduce", "--only", "A", "--only", "B"], "given twice"),
])
def test_hostile_input_is_one_line_exit_2(argv, needle, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err and "Traceback" not in err


def test_long_values_are_truncated_in_messages(capsys):
    assert cli.main(["run", "x" * 100_000]) == 2
    err = capsys.readouterr().err
    assert "x" * (cli.MAX_SHOWN + 1) not in err and "..." in err


def test_out_paths_that_would_leave_stray_folders_or_dangle(tmp_path, capsys):
    dangling = tmp_path / "link"
    dangling.symlink_to(tmp_path / "missing" / "target")
    assert cli.main(["run", "grpo_family", "--out", str(dangling)]) == 2
    assert cli.main(["run", "grpo_family", "--out", str(tmp_path / "a/b/../../x")]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link"]


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0 and "rlvr-lab" in capsys.readouterr().out
