"""Runner robustness: malformed stored results, truncated outputs, results that recorded errors."""
import json

import pandas as pd
import pytest

from rlvr_lab import experiments
from rlvr_lab.experiments import claim, experiment

CALLS = {"n": 0}


@experiment("_test_runner_a", paper="RunnerPaperA", claims=("ok",), quick_seeds=1)
def _runner_a(ctx):
    CALLS["n"] += 1
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1])
    ctx.save_figure(fig, "runner_a_fig")
    plt.close(fig)
    ctx.save_table(pd.DataFrame({"x": [1]}), "runner_a_table")
    return [claim("ok", "one is one", 1.0, True, "measured == 1")]


@experiment("_test_runner_b", paper="RunnerPaperB", claims=("ok_b",), quick_seeds=1)
def _runner_b(ctx):
    return [claim("ok_b", "two is two", 2.0, True, "measured == 2")]


@pytest.mark.parametrize("content", [b"garbage\x00\xff{", b"{}", b"[]",
                                     b'{"experiment": "_test_runner_b"}'])
def test_malformed_result_of_another_paper_is_warned_and_skipped(tmp_path, content, capsys):
    other = tmp_path / "results" / "_test_runner_b.json"
    other.parent.mkdir(parents=True)
    other.write_bytes(content)
    results, df = experiments.reproduce(quick=True, only="RunnerPaperA", out_dir=tmp_path,
                                        progress=False)
    assert "ok" in df["claim"].tolist() and "ok_b" not in df["claim"].tolist()
    assert "ignoring unreadable results file" in capsys.readouterr().err


@pytest.mark.parametrize("content", [b"garbage\x00\xff{", b"{}", b"[]"])
def test_malformed_own_result_is_recomputed(tmp_path, content):
    path = tmp_path / "results" / "_test_runner_a.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    CALLS["n"] = 0
    r = experiments.run("_test_runner_a", quick=True, out_dir=tmp_path)
    assert not r.skipped and CALLS["n"] == 1
    assert json.loads(path.read_text())["claims"][0]["id"] == "ok"


@pytest.mark.parametrize("victim", ["runner_a_fig.png", "data/runner_a_table.csv.gz"])
def test_truncated_or_missing_output_is_not_reused(tmp_path, victim):
    experiments.run("_test_runner_a", quick=True, out_dir=tmp_path)
    CALLS["n"] = 0
    (tmp_path / victim).write_bytes(b"")
    assert not experiments.run("_test_runner_a", quick=True, out_dir=tmp_path).skipped
    (tmp_path / victim).unlink()
    assert not experiments.run("_test_runner_a", quick=True, out_dir=tmp_path).skipped
    assert CALLS["n"] == 2
    assert experiments.run("_test_runner_a", quick=True, out_dir=tmp_path).skipped


def test_result_that_recorded_an_error_is_not_reused(tmp_path):
    experiments.run("_test_runner_a", quick=True, out_dir=tmp_path)
    path = tmp_path / "results" / "_test_runner_a.json"
    data = json.loads(path.read_text())
    data["error"] = "RuntimeError: boom"
    path.write_text(json.dumps(data))
    CALLS["n"] = 0
    assert not experiments.run("_test_runner_a", quick=True, out_dir=tmp_path).skipped
    assert CALLS["n"] == 1


def test_only_keeps_other_papers_rows(tmp_path):
    experiments.run("_test_runner_b", quick=True, out_dir=tmp_path)
    _, df = experiments.reproduce(quick=True, only="RunnerPaperA", out_dir=tmp_path,
                                  progress=False)
    assert {"ok", "ok_b"} <= set(df["claim"])


def test_config_hash_follows_the_source_digest(monkeypatch):
    exp = experiments.get("_test_runner_a")
    before = experiments.config_hash(exp, quick=True, seeds=1)
    monkeypatch.setattr(experiments, "_source_digest", lambda e: "changed")
    assert experiments.config_hash(exp, quick=True, seeds=1) != before


def test_failing_rows_show_their_reason_wrapped(tmp_path):
    df = pd.DataFrame([claim("bad", "s", 0.5, False, "c", reason="word " * 40).row()])
    table = experiments.format_table(df, width=60)
    assert "reason: word" in table and max(map(len, table.splitlines())) <= 60


def test_load_returns_the_stored_claims(tmp_path):
    experiments.run("_test_runner_b", quick=True, out_dir=tmp_path)
    df = experiments.load("_test_runner_b", out_dir=tmp_path)
    assert df["claim"].tolist() == ["ok_b"] and df["measured"].dtype.kind == "f"
    with pytest.raises(FileNotFoundError, match="_test_runner_a"):
        experiments.load("_test_runner_a", out_dir=tmp_path / "empty")


def test_library_edit_changes_the_source_digest(tmp_path, monkeypatch):
    exp = experiments.get("_test_runner_b")
    before = experiments._source_digest(exp)
    real = experiments.Path.rglob
    extra = tmp_path / "lazily_imported.py"
    extra.write_text("X = 1\n")
    monkeypatch.setattr(experiments.Path, "rglob",
                        lambda self, pat: [*real(self, pat), extra])
    assert experiments._source_digest(exp) != before


def test_claims_markdown_has_one_section_per_paper_with_counts(tmp_path):
    results = [experiments.run(n, quick=True, out_dir=tmp_path)
               for n in ("_test_runner_a", "_test_runner_b")]
    md = experiments.claims_markdown(experiments.claims_frame(results), quick=True)
    assert "## RunnerPaperA" in md and "## RunnerPaperB" in md
    assert "How to read" in md and "Source tags" in md and md.count("1 pass, 0 fail") == 2


@experiment("_test_runner_base", paper="RunnerPaperC", claims=("ok_c",), quick_seeds=1,
            sft_bases=("search", "quick", "search"))
def _runner_base(ctx):
    return [claim("ok_c", "three is three", 3.0, True, "measured == 3")]


def test_missing_bases_lists_uncached_bases_of_experiments_that_will_run(tmp_path,
                                                                       monkeypatch):
    from rlvr_lab.train import sft
    monkeypatch.setenv("RLVR_LAB_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "out"
    names = ["_test_runner_b", "_test_runner_base"]
    assert experiments.missing_bases(names, True, out, False) == ["search", "quick"]
    # a stored result for the same hash: the experiment will not run, nothing to train
    experiments.run("_test_runner_base", quick=True, out_dir=out)
    assert experiments.missing_bases(names, True, out, False) == []
    assert experiments.missing_bases(names, True, out, True) == ["search", "quick"]
    # a cached checkpoint is not trained again
    path = sft.checkpoint_path(sft.PRESETS["search"])
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")
    assert experiments.missing_bases(names, True, out, True) == ["quick"]


def test_unknown_sft_base_is_a_one_line_error_at_registration():
    with pytest.raises(ValueError, match=r"sft_bases=\['nope'\] are not allowed; choose from"):
        experiment("_test_runner_bad_base", paper="RunnerPaperD", claims=("ok_d",),
                   sft_bases=("quick", "nope"))
    assert "_test_runner_bad_base" not in experiments.registry()


def test_small_model_experiments_declare_their_sft_base():
    experiments.load_all()
    # every small-model study trains from an SFT base, except the throughput benchmark
    # (a randomly initialised transformer)
    bare = {n for n, e in experiments.registry().items()
            if e.setting == "small model" and not e.sft_bases and not n.startswith("_")}
    assert bare == {"brorl_throughput"}


def test_show_figures_displays_the_saved_pngs(tmp_path, monkeypatch, capsys):
    import IPython.display

    from rlvr_lab.experiments import Result, show_figures

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj))
    (tmp_path / "curve.png").write_bytes(
        b"\x89PNG\r\n\x1a\n" + bytes.fromhex("0000000d49484452000000010000000108020000009077"
                                              "53de"))
    res = Result(experiment="demo", paper="P", claims=[], figures=["curve", "missing"],
                 tables=[], seconds=0.0, config_hash="")
    assert show_figures(res, tmp_path) == [tmp_path / "curve.png"]
    assert len(shown) == 1 and isinstance(shown[0], IPython.display.Image)
    assert "figure 'missing' not found" in capsys.readouterr().out


def test_show_committed_figure_displays_the_full_run_png(tmp_path, monkeypatch, capsys):
    import IPython.display

    from rlvr_lab.experiments import show_committed_figure

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj))
    monkeypatch.setenv("RLVR_LAB_FIGURES", str(tmp_path))
    (tmp_path / "demo.png").write_bytes(
        b"\x89PNG\r\n\x1a\n" + bytes.fromhex("0000000d49484452000000010000000108020000009077"
                                              "53de"))
    assert show_committed_figure("demo") == tmp_path / "demo.png"
    assert len(shown) == 1 and isinstance(shown[0], IPython.display.Image)
    assert show_committed_figure("absent") is None and len(shown) == 1
    assert "no committed full-run figure 'absent'" in capsys.readouterr().out


def test_committed_claims_and_tables_read_the_full_run(tmp_path, monkeypatch, capsys):
    import pandas as pd

    from rlvr_lab.experiments import committed_claims, committed_table

    monkeypatch.setenv("RLVR_LAB_FIGURES", str(tmp_path))
    assert committed_claims("demo").empty
    assert "no committed full-run claims" in capsys.readouterr().out
    pd.DataFrame(dict(experiment=["demo", "demo", "other"], claim=["a", "b", "c"],
                      verdict=["pass", "fail", "pass"])).to_csv(tmp_path / "claims.csv",
                                                                index=False)
    rows = committed_claims("demo")
    assert list(rows.claim) == ["a", "b"] and rows.attrs["source"].endswith("claims.csv")
    assert list(committed_claims(["demo", "other"], ["c", "b"]).claim) == ["b", "c"]
    assert committed_claims("absent").empty
    (tmp_path / "data").mkdir()
    pd.DataFrame(dict(x=[1, 2])).to_csv(tmp_path / "data" / "demo_t.csv.gz", index=False)
    assert committed_table("demo_t").x.tolist() == [1, 2]
    # the committed repository's own full run
    monkeypatch.delenv("RLVR_LAB_FIGURES")
    real = committed_claims("mc_grpo_small")
    assert not real.empty and set(real.experiment) == {"mc_grpo_small"}
    assert {"method", "G", "step", "seed", "heldout_pass1"} <= set(
        committed_table("mc_grpo_small_heldout").columns)
