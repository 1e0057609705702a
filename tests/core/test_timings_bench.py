"""Recorded experiment times (`list`), `bench --json/--save`, and `reproduce --jobs`."""
from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest

from rlvr_lab import benchmarks, cli, experiments, io


def test_record_time_round_trip_and_format(tmp_path):
    path = tmp_path / "timings.json"
    experiments.record_time("a", quick=True, seeds=4, seconds=12.345, path=path)
    experiments.record_time("a", quick=False, seeds=8, seconds=600.0, path=path)
    experiments.record_time("b", quick=True, seeds=2, seconds=1.0, path=path)
    data = experiments.read_timings(path)
    assert data["a"]["quick"]["seconds"] == 12.3 and data["a"]["quick"]["seeds"] == 4
    assert data["a"]["full"]["seconds"] == 600.0 and set(data) == {"a", "b"}
    assert experiments.format_seconds(12.3) == "12 s"
    assert experiments.format_seconds(600.0) == "10.0 min"
    assert experiments.format_seconds(None) == "-"


def test_unreadable_or_missing_timings_are_empty(tmp_path):
    assert experiments.read_timings(tmp_path / "missing.json") == {}
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert experiments.read_timings(bad) == {}
    # no folder to record into (an installed package outside a checkout): silently skipped
    experiments.record_time("a", quick=True, seeds=1, seconds=1.0,
                            path=tmp_path / "nope" / "timings.json")
    assert not (tmp_path / "nope").exists()


def test_only_runs_into_the_tracked_figures_are_recorded(tmp_path, monkeypatch):
    monkeypatch.setenv("RLVR_LAB_FIGURES", str(tmp_path / "figs"))
    (tmp_path / "figs").mkdir()
    experiments.run("_test_timed", quick=True, out_dir=tmp_path / "elsewhere")
    assert experiments.read_timings() == {}
    experiments.run("_test_timed", quick=True)                  # default out: figs/quick
    assert experiments.read_timings()["_test_timed"]["quick"]["seeds"] == 1


@experiments.experiment("_test_timed", paper="TestPaper", claims=("ok",), quick_seeds=1,
                        default_seeds=1)
def _timed(ctx):
    return [experiments.claim("ok", "ok", 1.0, True, "always, a runner test")]


def test_list_shows_recorded_times(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RLVR_LAB_FIGURES", str(tmp_path))
    experiments.record_time("grpo_family", quick=True, seeds=4, seconds=42.0)
    assert cli.main(["list"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines()
                if ln.startswith("grpo_family "))
    assert "(quick 42 s  full -)" in line


@benchmarks.benchmark("_test_measure", overwrite=True)
def _measure(quick: bool) -> benchmarks.Measure:
    return benchmarks.Measure("_test_measure", 2.0 if quick else 3.0, "a test line", goal=2.5)


def test_bench_json_parses_and_lines_go_to_stderr(capsys):
    assert cli.main(["bench", "--only", "_test_measure", "--quick", "--json"]) == 0
    out, err = capsys.readouterr()
    records = json.loads(out)
    assert records == [{"name": "_test_measure", "ratio": 2.0, "details": "a test line",
                        "goal": 2.5, "quick": True}]
    assert "_test_measure: 2 x (a test line)" in err


def test_bench_save_writes_json_and_figure(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RLVR_LAB_FIGURES", str(tmp_path))
    assert cli.main(["bench", "--only", "_test_measure", "--save"]) == 0
    assert json.loads((tmp_path / "bench.json").read_text())[0]["ratio"] == 3.0
    assert (tmp_path / "bench.png").stat().st_size > 0
    block = benchmarks.readme_block(json.loads((tmp_path / "bench.json").read_text()), "t")
    assert "| `_test_measure` | 3 | 2.5 | a test line |" in block


def test_reproduce_jobs_rejects_bad_values():
    with pytest.raises(ValueError, match="jobs"):
        experiments.reproduce(quick=True, only="E3", jobs=0)
    assert cli.main(["reproduce", "--jobs", "0"]) == 2


def test_parallel_runner_gives_the_sequential_numbers(tmp_path):
    """Two worker processes on two cheap real experiments: the same claims as one process
    (numbers do not depend on where an experiment runs)."""
    from tqdm import tqdm

    names = ["systems_april", "systems_webgym"]
    seq = [experiments.run(n, quick=True, out_dir=tmp_path / "seq", force=True) for n in names]
    with tqdm(total=2, disable=True) as bar:
        par = experiments._run_parallel(names, 2, True, tmp_path / "par", True, bar)
    assert [r.experiment for r in par] == names and not any(r.error for r in par)
    cols = ["claim", "measured", "verdict"]
    for a, b in zip(seq, par):
        pd.testing.assert_frame_equal(a.claims_frame()[cols], b.claims_frame()[cols])


def test_file_lock_serialises(tmp_path):
    with io.file_lock(tmp_path / "x.lock"):
        assert (tmp_path / "x.lock").exists()
    with io.file_lock(tmp_path / "x.lock"):     # released: can be taken again
        pass


def test_rl_step_bench_config_and_flops():
    from rlvr_lab.benchmarks import rl_step

    cfg = rl_step.step_config(quick=True)
    mc = cfg.base.model_config()
    assert (cfg.base.prompt_width, cfg.base.max_new_tokens) == (8, 32)
    assert (mc.d_model, mc.n_layers, cfg.num_prompts, cfg.num_generations) == (128, 4, 8, 8)
    assert cfg.beta == 0.0 and cfg.num_iterations == cfg.num_minibatches == 1
    p = mc.num_params()
    assert 0.7e6 < p < 0.9e6
    # the update shares each prompt's pass over its 8 completions: 8 x 8 + 64 x 32 positions
    assert cfg.share_prompt_prefix and rl_step.trained_tokens(cfg) == 8 * 8 + 64 * 32
    assert rl_step.step_flops(cfg) == pytest.approx(64 * 2 * p * 32 + 6 * p * (64 + 64 * 32))
    assert rl_step.phase_flops(cfg) == pytest.approx((64 * 2 * p * 32, 6 * p * (64 + 64 * 32)))
    per_row = dataclasses.replace(cfg, share_prompt_prefix=False)
    assert rl_step.trained_tokens(per_row) == 64 * 40
    assert rl_step.phase_flops(per_row) == pytest.approx((64 * 2 * p * 32, 64 * 6 * p * 40))


def test_a_broken_pool_reruns_its_unfinished_experiments_once(tmp_path, monkeypatch, capsys):
    """A worker that dies breaks the pool: the experiments it had not finished run once more
    in a fresh pool (finished ones are kept); a second break records them as failed."""
    from tqdm import tqdm

    calls = []

    def one_break(order, bases, jobs, quick, out, force, bar, done, *, last_attempt):
        calls.append((list(order), last_attempt))
        if len(calls) == 1:                      # "a" finished, then the pool broke
            done["a"] = "result a"
            return [n for n in order if n != "a"]
        for n in order:
            done[n] = f"result {n}"
        return []

    monkeypatch.setattr(experiments, "missing_bases", lambda *a, **k: [])
    monkeypatch.setattr(experiments, "_pool_pass", one_break)
    with tqdm(total=3, disable=True) as bar:
        out = experiments._run_parallel(["a", "b", "c"], 2, True, tmp_path, False, bar)
    assert out == ["result a", "result b", "result c"]
    assert [c[1] for c in calls] == [False, True] and sorted(calls[1][0]) == ["b", "c"]
    assert "rerunning 2 unfinished" in capsys.readouterr().err


def test_plain_python_step_runs_in_a_fresh_process_without_the_tunables(monkeypatch):
    """``rl_step_mfu``'s plain-Python figure: a child interpreter without ``GLIBC_TUNABLES``,
    its best time and malloc setting read from its last two lines; a failed child is one
    RuntimeError naming its last error line."""
    import subprocess

    from rlvr_lab.benchmarks import rl_step

    seen = {}

    def fake_run(argv, env, **kwargs):
        seen.update(argv=argv, env=env)
        return subprocess.CompletedProcess(argv, 0, "compiling\n0.125\ntuned\n", "")

    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=1")
    monkeypatch.setattr(subprocess, "run", fake_run)
    assert rl_step.plain_python_seconds(True, 3) == (0.125, "tuned")
    assert "GLIBC_TUNABLES" not in seen["env"]
    assert "plain_python_main(True, 3)" in seen["argv"][-1]
    monkeypatch.setattr(subprocess, "run", lambda argv, env, **kw: subprocess.CompletedProcess(
        argv, 1, "", "Traceback ...\nValueError: RLVR_LAB_MALLOC='x' is not allowed"))
    with pytest.raises(RuntimeError, match="plain-Python step failed: ValueError: RLVR_LAB"):
        rl_step.plain_python_seconds(True, 3)


def test_cpu_description_reads_cpuinfo_and_falls_back(tmp_path, monkeypatch):
    import builtins

    fake = tmp_path / "cpuinfo"
    fake.write_text("processor\t: 0\nmodel name\t: Test CPU 9000\nflags\t\t: fpu sse4_2 avx2\n"
                    "processor\t: 1\nmodel name\t: Test CPU 9000\nflags\t\t: fpu avx512f\n")
    real_open = builtins.open
    monkeypatch.setattr(builtins, "open", lambda path, *a, **k: real_open(
        fake if str(path) == "/proc/cpuinfo" else path, *a, **k))
    assert benchmarks.cpu_description() == "Test CPU 9000, AVX2"    # the first CPU's flags

    def no_cpuinfo(path, *a, **k):
        if str(path) == "/proc/cpuinfo":
            raise OSError("no such file")
        return real_open(path, *a, **k)

    monkeypatch.setattr(builtins, "open", no_cpuinfo)
    assert benchmarks.cpu_description()       # platform's name, never empty
