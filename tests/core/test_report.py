"""README verdict table: counts per paper (old and new claims.csv), the marker block, when
`reproduce` rewrites it, and that the committed README matches the committed claims.csv."""
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


def _t_rows(samples, level=0.95, seeds=False):
    """Claims rows whose intervals are the engine's t intervals of ``samples`` (float64)."""
    from scipy import stats as st
    rows = []
    for i, x in enumerate(samples):
        x = np.asarray(x, np.float64)
        m = x.size
        se = x.std(ddof=1) / np.sqrt(m)
        half = se * st.t.ppf(0.5 + level / 2, m - 1)
        rows.append(dict(experiment="e", claim=f"c{i}", setting="small model",
                         estimate=x.mean(), ci_low=x.mean() - half, ci_high=x.mean() + half,
                         level=level, interval_method=f"t over {m} "
                         + ("seeds" if seeds else "base means")))
    return pd.DataFrame(rows)


def test_standard_errors_recover_the_t_interval_spread():
    rng = np.random.default_rng(0)
    samples = [rng.normal(size=m) for m in (2, 3, 6, 16)]
    df = _t_rows(samples, level=0.975)
    want = [np.std(x, ddof=1) / np.sqrt(len(x)) for x in samples]
    np.testing.assert_allclose(report.standard_errors(df), want, rtol=1e-12)
    df_seeds = _t_rows(samples, seeds=True)
    np.testing.assert_allclose(report.standard_errors(df_seeds), want, rtol=1e-12)


def test_standard_errors_nan_without_a_t_interval():
    df = _t_rows([[0.0, 1.0, 2.0]] * 4)
    df.loc[0, "interval_method"] = "exact"
    df.loc[1, "interval_method"] = "Clopper-Pearson over 12 trials"
    df.loc[2, "ci_low"] = -np.inf
    se = report.standard_errors(df)
    assert se.isna().tolist() == [True, True, True, False]
    assert report.standard_errors(df.drop(columns="level")).isna().all()


def test_agreement_by_hand():
    a = _t_rows([[0.0, 1.0, 2.0], [1.0, 1.0, 4.0]])
    b = _t_rows([[1.0, 2.0, 3.0], [0.0, 1.0, 2.0]])
    got = report.agreement(a, b)
    se_a = [1 / np.sqrt(3), np.sqrt(3) / np.sqrt(3)]
    se_b = [1 / np.sqrt(3), 1 / np.sqrt(3)]
    want = [(1.0 - 2.0) / np.hypot(se_a[0], se_b[0]), (2.0 - 1.0) / np.hypot(se_a[1], se_b[1])]
    np.testing.assert_allclose(got.z, want, rtol=1e-12)
    assert report.agreement_line(a, a).count("**0**") == 1


def test_agreement_is_about_standard_normal_when_intervals_are_honest():
    # two runs drawing 20 base means each from the same distribution: z ~ t-ish, rms ~ 1
    rng = np.random.default_rng(1)
    a = _t_rows(rng.normal(size=(400, 20)))
    b = _t_rows(rng.normal(size=(400, 20)))
    z = report.agreement(a, b).z
    assert 0.9 < float(np.sqrt((z ** 2).mean())) < 1.15
    assert 0.02 < float((z.abs() > 1.96).mean()) < 0.09
    # a shift between runs the intervals do not know about shows as rms > 1
    shifted = _t_rows(rng.normal(size=(400, 20)) + 0.5)
    assert float(np.sqrt((report.agreement(a, shifted).z ** 2).mean())) > 1.5


@settings(deadline=None, max_examples=50)
@given(st.lists(st.floats(-5, 5), min_size=3, max_size=8),
       st.lists(st.floats(-5, 5), min_size=3, max_size=8))
def test_agreement_is_antisymmetric(x, y):
    a, b = _t_rows([x]), _t_rows([y])
    za, zb = report.agreement(a, b).z, report.agreement(b, a).z
    np.testing.assert_allclose(za.to_numpy(), -zb.to_numpy(), equal_nan=True)
