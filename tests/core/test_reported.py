"""The papers' reported numbers (`rlvr_lab.reported`) and the figures that draw them beside
ours (`rlvr_lab.paper_figures`): every number is one the claim's declaration states, every
figure row is one reported comparison of a claim in the table, and the command line refuses
bad input with one line."""
import matplotlib.pyplot as plt
import pandas as pd
import pytest

from rlvr_lab import paper_figures, sources
from rlvr_lab.reported import REPORTED, Reported, for_claim


@pytest.fixture(scope="module")
def declared():
    return {claim: spec for (_, claim), spec in sources.declared_claims().items()}


def test_every_reported_claim_is_declared(declared):
    missing = sorted({r.claim for r in REPORTED} - set(declared))
    assert missing == []


@pytest.mark.parametrize("rep", REPORTED, ids=lambda r: f"{r.claim}:{r.metric[:20]}")
def test_every_reported_number_is_in_the_declared_paper_value(declared, rep):
    text = str(declared[rep.claim].paper_value)
    numbers = [v for _, v in rep.arms] or [rep.difference]
    absent = [v for v in numbers if f"{v:g}" not in text]
    assert absent == [], f"{rep.claim}: {absent} not in {text!r}"


def test_delta_is_the_last_arm_minus_the_first_or_the_difference():
    assert Reported("c", "m", (("a", 1.5), ("b", 2.0), ("c", 4.0))).delta == 2.5
    assert Reported("c", "m", difference=-0.3).delta == -0.3


@pytest.mark.parametrize("kwargs", [
    {}, {"arms": (("a", 1.0),)}, {"arms": (("a", 1.0), ("b", 2.0)), "difference": 1.0},
    {"difference": 1.0, "on_our_axis": 0.01}, {"difference": 1.0, "how": "x"}])
def test_a_malformed_entry_is_refused(kwargs):
    with pytest.raises(ValueError, match="c:"):
        Reported("c", "m", **kwargs)


def _table(claim_ids, paper="BroRL"):
    return pd.DataFrame({
        "experiment": "x", "paper": paper, "setting": "small model", "claim": claim_ids,
        "paper_value": "v", "verdict": "inconclusive", "rule": "superiority",
        "estimate": -0.01, "ci_low": -0.07, "ci_high": 0.05, "threshold": 0.0,
        "fail_threshold": 0.0, "unit": "pass@1"})


def test_one_figure_row_per_reported_comparison_of_a_claim_in_the_table():
    claim = "brorl_revival_equal_rollouts"
    fig = paper_figures.paper_figure(_table([claim, "not_reported"]), "brorl")
    try:
        assert len(fig.axes) == 2 * len(for_claim(claim)) >= 2
        titles = [ax.get_title(loc="left") for ax in fig.axes[1::2]]
        assert all(claim in t and "inconclusive" in t for t in titles)
    finally:
        plt.close(fig)


def test_no_figure_without_a_reported_row_and_an_unknown_key_is_refused():
    assert paper_figures.paper_figure(_table(["not_reported"]), "brorl") is None
    with pytest.raises(ValueError, match="unknown figure 'nope'; valid: grpo_family"):
        paper_figures.paper_figure(_table(["x"]), "nope")


def test_write_all_writes_png_and_pdf(tmp_path):
    paths = paper_figures.write_all(_table(["fewer_filtered_groups"]), tmp_path)
    assert sorted(p.name for p in paths) == ["paper_vs_ours_brorl.pdf",
                                             "paper_vs_ours_brorl.png"]


def test_the_command_refuses_bad_arguments_with_one_line(tmp_path, capsys):
    assert paper_figures.main(["--x"]) == 2
    assert paper_figures.main([str(tmp_path / "absent.csv")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("error: ") for line in err)


def test_committed_figure_reads_a_stored_table(tmp_path):
    csv = tmp_path / "claims.csv"
    _table(["brorl_revival_equal_rollouts"]).to_csv(csv, index=False)
    fig = paper_figures.committed_figure("brorl", csv)
    try:
        assert len(fig.axes) == 2 * len(for_claim("brorl_revival_equal_rollouts"))
    finally:
        plt.close(fig)
