"""CLI hostile inputs: one line, exit 2, nothing written; --version; run --strict."""
import os

import pytest

from rlvr_lab import cli
from rlvr_lab.experiments import claim, experiment


@experiment("_test_cli_tiny", paper="CliPaper", claims=("tiny",), quick_seeds=1)
def _tiny(ctx):
    return [claim("tiny", "three is three", 3.0, True, "measured == 3")]


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


def test_run_writes_to_the_user_output_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RLVR_LAB_OUTPUT", str(tmp_path / "user"))
    assert cli.main(["run", "_test_cli_tiny", "--quick"]) == 0
    assert (tmp_path / "user" / "quick" / "results" / "_test_cli_tiny.json").exists()


def test_unusable_output_env_is_rejected_before_work(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("RLVR_LAB_OUTPUT", str(blocker))
    assert cli.main(["run", "_test_cli_tiny"]) == 2
    assert "not a directory" in capsys.readouterr().err


SLEEPER = """
import sys, time
from rlvr_lab import cli
from rlvr_lab.experiments import experiment

@experiment("_test_cli_sleeper", paper="CliSleeper", claims=("never",))
def _sleep(ctx):
    print("started", flush=True)
    time.sleep(60)

sys.exit(cli.main(["run", "_test_cli_sleeper", "--quick", "--out", sys.argv[1]]))
"""


def test_ctrl_c_exits_130_without_traceback(tmp_path):
    import signal
    import subprocess
    import sys

    # the child gets the default SIGINT disposition: a test process may have inherited or set
    # "ignore" (an ignored SIGINT survives exec, and Python then installs no KeyboardInterrupt
    # handler), which is not what a user's terminal gives the CLI
    proc = subprocess.Popen([sys.executable, "-c", SLEEPER, str(tmp_path / "o")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdout.readline().strip() == "started"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err and "interrupted" in err
    assert not list((tmp_path / "o").rglob("*.json"))


@pytest.mark.parametrize("fmt, needle", [("csv", "claim,statement"), ("json", '"claim":"tiny"'),
                                         ("md", "##CliPaper"), ("table", "tiny")])
def test_run_formats(tmp_path, fmt, needle, capsys):
    assert cli.main(["run", "_test_cli_tiny", "--quick", "--out", str(tmp_path),
                     "--format", fmt]) == 0
    assert needle in capsys.readouterr().out.replace(" ", "")


def test_append_xla_flag_keeps_a_users_setting(monkeypatch):
    from rlvr_lab.io import append_xla_flag

    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
    assert append_xla_flag("--xla_backend_optimization_level=1")
    assert os.environ["XLA_FLAGS"] == ("--xla_force_host_platform_device_count=2 "
                                       "--xla_backend_optimization_level=1")
    assert not append_xla_flag("--xla_backend_optimization_level=3")
    assert os.environ["XLA_FLAGS"].endswith("level=1")
    monkeypatch.delenv("XLA_FLAGS")
    assert append_xla_flag("--xla_backend_optimization_level=0")
    assert os.environ["XLA_FLAGS"] == "--xla_backend_optimization_level=0"


def test_malloc_tuned_env_adds_the_tunables_and_keeps_a_users_values():
    tuned = cli.malloc_tuned_env({"PATH": "/bin"})
    assert tuned["PATH"] == "/bin"
    assert tuned["GLIBC_TUNABLES"].split(":") == [f"{k}={v}"
                                                  for k, v in cli.MALLOC_TUNABLES.items()]
    mine = cli.malloc_tuned_env({"GLIBC_TUNABLES": "glibc.malloc.arena_max=4:glibc.pthread.x=1"})
    items = mine["GLIBC_TUNABLES"].split(":")
    assert items[:2] == ["glibc.malloc.arena_max=4", "glibc.pthread.x=1"]
    assert "glibc.malloc.arena_max=1" not in items and "glibc.malloc.hugetlb=1" in items
    # already tuned (the restarted process), or switched off: no restart
    assert cli.malloc_tuned_env(tuned) is None
    assert cli.malloc_tuned_env({"RLVR_LAB_MALLOC_TUNING": "off"}) is None


def test_command_line_restarts_under_the_malloc_tuning(monkeypatch):
    """From a command line, a computing command (run, reproduce, bench) execs the same entry
    point again with the tunables added (same arguments), after its flags parsed; `list`,
    bad flags and calls with argv (tests, notebooks) never restart."""
    import platform
    import sys

    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc tunables are Linux/glibc-only")
    calls = []
    monkeypatch.setattr(cli.os, "execve", lambda *a: calls.append(a))
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    monkeypatch.delenv("RLVR_LAB_MALLOC_TUNING", raising=False)
    for argv in (["rlvr-lab", "list"], ["rlvr-lab", "bench", "--bogus"]):
        monkeypatch.setattr(sys, "argv", argv)
        cli.main()
    assert cli.main(["bench", "--only", "no_such_measure"]) == 2 and calls == []
    monkeypatch.setattr(sys, "argv", ["rlvr-lab", "bench", "--only", "no_such_measure"])
    assert cli.main() == 2                   # execve is patched out: this process goes on
    (exe, argv, env), = calls
    assert exe == sys.executable and argv[0] == sys.executable and argv[1] == "-c"
    assert "from rlvr_lab.cli import main" in argv[2]
    assert argv[3:] == ["bench", "--only", "no_such_measure"]
    assert env["GLIBC_TUNABLES"] == cli.malloc_tuned_env({})["GLIBC_TUNABLES"]


def test_restarted_command_line_keeps_exit_status_and_one_line_errors():
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    entry = "import sys; from rlvr_lab.cli import main; sys.exit(main())"
    bad = subprocess.run([sys.executable, "-c", entry, "bench", "--only", "no_such_measure"],
                         env=env, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert "no_such_measure" in bad.stderr and "Traceback" not in bad.stderr
