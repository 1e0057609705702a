"""README verdict table: counts per paper (old and new claims.csv), the marker block, when
`reproduce` rewrites it, and that the committed README matches the committed claims.csv."""
import pandas as pd
import pytest

from rlvr_lab import bibliography, cli, experiments, report

FRAME = pd.DataFrame({
    "paper": ["DARS", "DARS", "DARS", "ECHO-2", "E3", "Other"],
    "verdict": ["pass", "fail", "inconclusive", "not evaluated", "pass", "fail"]})


def test_counts_per_paper():
    table = report.counts(FRAME)
    assert list(table.index) == ["DARS", "E3", "ECHO-2", "Other"]
    assert table.loc["DARS"].tolist() == [1, 1, 1, 0, 0, 3]
    assert table.loc["ECHO-2", "not evaluated"] == 1
    assert int(table["claims"].sum()) == len(FRAME)


def test_old_claims_csv_with_passed_column():
    old = pd.DataFrame({"paper": ["A", "A", "B"], "passed": [True, False, None]})
    assert report.verdicts_of(old).tolist() == ["pass", "fail", "not evaluated"]
    strings = pd.DataFrame({"paper": ["A"], "passed": ["True"]})
    assert report.verdicts_of(strings).tolist() == ["pass"]


def test_verdict_table_links_papers_and_totals():
    text = report.verdict_table(FRAME)
    assert "[DARS](https://arxiv.org/abs/2508.13755) | 1 | 1 | 1 | 0 | 0 | 3 |" in text
    assert "| Other | 0 | 1 | 0 | 0 | 0 | 1 |" in text
    assert "| **all** | **2** | **2** | **1** | **0** | **1** | **6** |" in text


def _readme(tmp_path):
    path = tmp_path / "README.md"
    path.write_text(f"# title\n\n{report.START}\nstale\n{report.END}\n\nrest\n")
    return path


def test_sync_readme_only_for_full_runs_into_the_checkout_figures(tmp_path):
    readme = _readme(tmp_path)
    figures = report.ROOT / "figures"
    assert report.sync_readme(FRAME, figures, quick=True, readme=readme) is None
    assert report.sync_readme(FRAME, tmp_path, quick=False, readme=readme) is None
    assert "stale" in readme.read_text()
    assert report.sync_readme(FRAME, figures, quick=False, readme=readme) == readme
    text = readme.read_text()
    assert "stale" not in text and "**6**" in text and text.endswith("rest\n")
    assert report.sync_readme(FRAME, figures, quick=False, readme=readme) == readme
    assert readme.read_text() == text  # idempotent
    no_markers = tmp_path / "plain.md"
    no_markers.write_text("no markers\n")
    assert report.sync_readme(FRAME, figures, quick=False, readme=no_markers) is None


def test_reproduce_command_syncs_the_readme(tmp_path, monkeypatch, capsys):
    calls = []
    df = FRAME.assign(experiment="x", claim="c", measured=1.0, measured_text="", reason="")
    monkeypatch.setenv("RLVR_LAB_FIGURES", str(tmp_path))
    monkeypatch.setattr(experiments, "reproduce", lambda **kw: ([], df))
    monkeypatch.setattr(experiments, "sync_readme",
                        lambda d, out, *, quick: calls.append((len(d), out, quick)))
    assert cli.main(["reproduce", "--format", "csv"]) == 0
    assert calls == [(len(df), experiments.default_out_dir(False), False)]


def test_committed_readme_matches_committed_claims():
    csv = report.ROOT / "figures" / "claims.csv"
    if not csv.is_file():
        pytest.skip("no committed claims.csv")
    text = (report.ROOT / "README.md").read_text()
    block = report.verdict_table(pd.read_csv(csv))
    assert report.replace_block(text, block) == text, (
        "README verdict table is stale: run `python -m rlvr_lab.report`")


def _claims(verdicts, measured, settings=None):
    n = len(verdicts)
    return pd.DataFrame({"experiment": ["e"] * n, "claim": [f"c{i}" for i in range(n)],
                         "paper": ["DARS"] * n,
                         "setting": settings or ["bank"] * n, "verdict": verdicts,
                         "measured": measured})


def test_verdict_changes_and_rounding_table():
    base = _claims(["pass", "fail", "pass", "not evaluated"], [1.0, 2.0, 3.0, None],
                   ["bank", "small model", "small model", "bank"])
    other = _claims(["pass", "pass", "pass"], [1.1, 2.5, 3.0]).drop(columns="setting")
    both = report.verdict_changes(base, other)
    assert both.changed.tolist() == [False, True, False, False]
    assert both.other_verdict.tolist() == ["pass", "pass", "pass", "not evaluated"]
    text = report.rounding_table(base, other)
    assert "| bank | 1 | 0 |" in text and "| small model | 2 | 1 |" in text
    assert "| **all** | **3** | **1** |" in text
    assert "| e | `c1` | fail | pass | 2 | 2.5 |" in text
    assert "`c0`" not in text


def test_rounding_block_in_the_readme(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"x\n{report.ROUNDING_START}\nstale\n{report.ROUNDING_END}\ny\n")
    base, other = tmp_path / "a.csv", tmp_path / "b.csv"
    _claims(["pass", "fail"], [1.0, 2.0]).to_csv(base, index=False)
    _claims(["pass", "pass"], [1.0, 3.0]).to_csv(other, index=False)
    report.main(["--rounding", str(other), str(base), str(readme)])
    text = readme.read_text()
    assert "stale" not in text and "| **all** | **2** | **1** |" in text
    assert text.startswith("x\n") and text.endswith("y\n")


def test_rounding_block_lives_in_the_reproducibility_page():
    page = (report.ROOT / report.ROUNDING_DOC).read_text()
    assert report.ROUNDING_START in page and report.ROUNDING_END in page
    assert report.ROUNDING_START not in (report.ROOT / "README.md").read_text()


def test_committed_page_matches_the_committed_rounding_run():
    csv, other = (report.ROOT / "figures" / "claims.csv", report.ROOT / report.ROUNDING_CSV)
    if not (csv.is_file() and other.is_file()):
        pytest.skip("no committed rounding run")
    text = (report.ROOT / report.ROUNDING_DOC).read_text()
    block = report.rounding_table(pd.read_csv(csv), pd.read_csv(other))
    assert bibliography.replace_block(text, block, report.ROUNDING_START,
                                      report.ROUNDING_END) == text, (
        "docs/reproducibility.md rounding table is stale: run "
        "`python -m rlvr_lab.report --rounding`")


def test_stable_column_and_pass_fail_flips():
    keys = dict(experiment=["e", "e", "e", "e"], claim=["a", "b", "c", "d"],
                setting=["small model"] * 4, measured=[1.0, 2.0, 3.0, 4.0])
    base = pd.DataFrame({**keys, "verdict": ["pass", "fail", "inconclusive", "pass"]})
    other = pd.DataFrame({**keys, "verdict": ["pass", "pass", "fail", "pass"]}).iloc[:3]
    out = report.stability(base, other)
    assert out["stable"].tolist() == ["yes", "no: pass", "no: fail", ""]
    assert report.flips(base, other)["claim"].tolist() == ["b"]
    block = report.rounding_table(base, other)
    assert "Pass in one run and fail in the other: **1** (`b`)" in block


def test_why_not_pass_paragraph_per_paper():
    df = pd.DataFrame({
        "paper": ["P"] * 4, "claim": ["a", "b", "c", "d"],
        "verdict": ["pass", "fail", "inconclusive", "not applicable here"],
        "paper_value": ["", "+22.5%", "", ""], "measured": [1.0, 0.3, 0.1, 0.2],
        "measured_text": [""] * 4, "estimate": [1.0, 0.3, 0.1, 0.2],
        "unit": ["x", "fraction of tokens", "pass@1", "ratio"],
        "reason": ["", "+0.3 [0.2, 0.4] is wholly on the fail side of +0.5. Mechanism: the "
                   "window is around the paper's value. More text.",
                   "straddles the threshold; about 12 bases x 2 seeds (~24 seeds) would "
                   "decide it at the observed spread", "a GPU effect (the rule alone would "
                   "give fail)"]})
    text = report.why_not_pass(df)
    assert "1 fail, 1 inconclusive, 1 not applicable here, of 4" in text
    assert "`b` (+0.3 fraction of tokens vs the paper's +22.5%): the window is around the " \
           "paper's value;" not in text  # one failing claim: the list ends with a period
    assert "`b` (+0.3 fraction of tokens vs the paper's +22.5%): the window is around the " \
           "paper's value." in text
    assert "Inconclusive" in text and "`c`" in text and "`d`: a GPU effect" in text
    assert report.why_not_pass(df.iloc[:1]) == ""
    row = df.assign(unit="log ratio", estimate=1.024).iloc[1]
    assert report._measured_with_unit(row) == "+1.024 log ratio (x2.78)"
    md = experiments.claims_markdown(df.assign(experiment="e", statement="s", paper_ref="",
                                               criterion="c", rule="equivalence",
                                               ci_low=0.0, ci_high=1.0, level=0.95,
                                               n_seeds=4, n_bases=1), quick=True)
    assert "**Why claims do not pass**" in md
