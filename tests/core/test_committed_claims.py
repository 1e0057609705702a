"""The committed full-run table (`figures/claims.csv`) keeps the engine's promises: every verdict
follows from its own columns, a `not applicable here` row states what the rule alone would give,
every small-model interval rests on at least 3 SFT bases, and (where a quick run sits beside it)
no claim passes in one run and fails in the other."""
import math

import pandas as pd
import pytest

from rlvr_lab import claims, report, sources

FULL = report.ROOT / "figures" / "claims.csv"
QUICK = report.ROOT / "figures" / "quick" / "claims.csv"
DECIDED = ("pass", "fail", "inconclusive")


def _table(path):
    if not path.is_file():
        pytest.skip(f"no {path.relative_to(report.ROOT)}")
    if path == QUICK and FULL.is_file() and path.stat().st_mtime < FULL.stat().st_mtime:
        # a quick table left from before the committed full run comes from other code
        pytest.skip("figures/quick/claims.csv predates figures/claims.csv; rerun "
                    "`rlvr-lab reproduce --quick` to compare")
    return pd.read_csv(path, keep_default_na=False, na_values=[""])


def _number(value) -> float:
    number = pd.to_numeric(value, errors="coerce")
    return math.nan if pd.isna(number) else float(number)


def _rule_verdict(row, *, gated: bool = True) -> str:
    control = row.control_verdict if gated and isinstance(row.control_verdict, str) else ""
    return claims.verdict_from(row.rule, row.direction, _number(row.estimate),
                               _number(row.ci_low), _number(row.ci_high),
                               _number(row.threshold), _number(row.fail_threshold), control)


def _declared_rows(df):
    return df[df.rule.isin(["superiority", "non_inferiority", "equivalence", "threshold",
                            "exact"])]


@pytest.mark.parametrize("path", [FULL, QUICK], ids=["full", "quick"])
def test_every_verdict_follows_from_its_columns(path):
    df = _declared_rows(_table(path))
    assert len(df), "no declared rows"
    wrong = [(r.experiment, r.claim, r.verdict, _rule_verdict(r))
             for r in df.itertuples() if r.verdict in DECIDED and r.verdict != _rule_verdict(r)]
    assert not wrong, f"verdicts that do not follow from their columns: {wrong}"


@pytest.mark.parametrize("path", [FULL, QUICK], ids=["full", "quick"])
def test_not_applicable_rows_say_what_the_rule_gives(path):
    df = _declared_rows(_table(path))
    rows = df[df.verdict == "not applicable here"]
    # the rule alone, before any gating on the positive control
    missing = [(r.claim, _rule_verdict(r, gated=False)) for r in rows.itertuples()
               if f"would give {_rule_verdict(r, gated=False)}" not in str(r.reason)]
    assert not missing, f"not-applicable rows whose reason hides the rule's verdict: {missing}"


def test_full_run_small_model_intervals_rest_on_three_bases():
    df = _declared_rows(_table(FULL))
    small = df[(df.setting == "small model") & (df.rule != "exact")
               & df.interval_method.astype(str).str.contains("base")]
    assert len(small)
    few = small[pd.to_numeric(small.n_bases, errors="coerce") < 3]
    assert few.empty, f"small-model intervals over fewer than 3 bases: {few.claim.tolist()}"


def test_no_claim_passes_in_one_run_and_fails_in_the_other():
    full, quick = _table(FULL), _table(QUICK)
    both = full.merge(quick, on=["experiment", "claim"], suffixes=("", "_quick"))
    pair = both.verdict + "/" + both.verdict_quick
    flips = both[pair.isin(["pass/fail", "fail/pass"])]
    assert flips.empty, f"pass in one run, fail in the other: {flips.claim.tolist()}"


def test_claim_ids_are_unique():
    df = _table(FULL)
    assert not df.duplicated(["experiment", "claim"]).any()


def test_committed_sources_match_the_declarations():
    """`paper_ref` / `paper_value` of the committed table are the declarations' (refreshed by
    `python -m rlvr_lab.sources`), and every row's rule and thresholds are still the
    declared ones (otherwise the table is stale and refresh_sources refuses)."""
    df = _table(FULL)
    fresh = report.refresh_sources(df, sources.declared_claims())
    cols = list(report.SOURCE_COLUMNS)
    stale = df[(fresh[cols].fillna("").astype(str) != df[cols].fillna("").astype(str))
               .any(axis=1)]
    assert stale.empty, ("claims.csv cites other sources than the declarations; run `python "
                         f"-m rlvr_lab.sources`: {list(stale.claim)}")


def test_refresh_sources_takes_only_the_citation_and_refuses_a_changed_rule():
    spec = claims.Declared("c", statement="s", rule="superiority", threshold=0.1,
                           fail_threshold=0.0, paper_ref="Sec. 3, Table 2", paper_value="+2 pp")
    row = dict(experiment="e", claim="c", rule="superiority", direction=">", threshold=0.1,
               fail_threshold=0.0, paper_ref="abstract", paper_value="", estimate=0.5,
               verdict="pass")
    out = report.refresh_sources(pd.DataFrame([row]), {("e", "c"): spec})
    assert out.loc[0, "paper_ref"] == "Sec. 3, Table 2" and out.loc[0, "paper_value"] == "+2 pp"
    assert out.loc[0, "estimate"] == 0.5 and out.loc[0, "verdict"] == "pass"
    with pytest.raises(ValueError, match="threshold"):
        report.refresh_sources(pd.DataFrame([{**row, "threshold": 0.05}]), {("e", "c"): spec})
    with pytest.raises(ValueError, match="not declared"):
        report.refresh_sources(pd.DataFrame([{**row, "claim": "gone"}]), {("e", "c"): spec})


def test_sources_command_rejects_bad_arguments(tmp_path, capsys):
    assert sources.main(["--bogus"]) == 2
    assert "usage" in capsys.readouterr().err
    assert sources.main([str(tmp_path / "missing.csv")]) == 2
    assert "not a file" in capsys.readouterr().err


def test_sources_refresh_writes_claims_md_only_where_one_exists(tmp_path):
    """Bug caught: refreshing ``figures/rounding/claims.csv`` created a ``CLAIMS.md`` in a
    folder that keeps only its table."""
    table = pd.read_csv(FULL)
    bare, paired = tmp_path / "bare", tmp_path / "paired"
    for d in (bare, paired):
        d.mkdir()
        table.head(3).to_csv(d / "claims.csv", index=False)
    (paired / "CLAIMS.md").write_text("old\n")
    sources.refresh(bare / "claims.csv")
    sources.refresh(paired / "claims.csv")
    assert not (bare / "CLAIMS.md").exists()
    assert (paired / "CLAIMS.md").read_text() != "old\n"
