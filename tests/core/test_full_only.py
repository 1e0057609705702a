"""``full_only`` claims: a quick run neither measures nor decides them (``not evaluated``, with
the declared reason) and a full run decides them as declared."""
import numpy as np
import pytest

from rlvr_lab import claims
from rlvr_lab.experiments import Context

CONTROL = claims.Declared("learns", statement="c", rule="superiority", threshold=0.0,
                          control=True)
CHEAP = claims.Declared("cheap", statement="x", rule="superiority", threshold=0.0)
COSTLY = claims.Declared("costly", statement="y", rule="superiority", threshold=0.0,
                         unit="pass@1", full_only="its arm costs too much")
PLAN = claims.SeedPlan(bases=3, seeds_per_base=2, batch_bases=1, max_bases=3)


def _context(quick: bool, tmp_path) -> Context:
    return Context(name="e", quick=quick, seeds=6, out_dir=tmp_path,
                   declared=(CONTROL, CHEAP, COSTLY), plan=PLAN)


def _measure(asked):
    def measure(base_ids, open_ids):
        asked.append(set(open_ids))
        labels = np.repeat(base_ids, 2)
        return {cid: claims.nested(np.linspace(0.5, 1.0, labels.size), labels)
                for cid in open_ids}
    return measure


def test_quick_run_skips_full_only_claims(tmp_path):
    ctx, asked = _context(True, tmp_path), []
    rows, _ = ctx.sequential(_measure(asked))
    assert asked == [{"learns", "cheap"}]     # never measured
    assert [r.id for r in rows] == ["learns", "cheap", "costly"]   # declared order
    skipped = rows[2]
    assert skipped.verdict == "not evaluated"
    assert "its arm costs too much" in skipped.reason and "full" in skipped.reason
    assert np.isnan(skipped.measured) and skipped.rule == "superiority"
    assert skipped.unit == "pass@1"
    assert [r.verdict for r in rows[:2]] == ["pass", "pass"]


def test_full_run_decides_full_only_claims(tmp_path):
    ctx, asked = _context(False, tmp_path), []
    rows, _ = ctx.sequential(_measure(asked))
    assert asked == [{"learns", "cheap", "costly"}]
    assert [r.verdict for r in rows] == ["pass", "pass", "pass"]


def test_one_look_decide_ignores_samples_of_skipped_claims(tmp_path):
    ctx = _context(True, tmp_path)
    rows = ctx.decide({"learns": np.ones(4), "cheap": np.ones(4), "costly": np.ones(4)})
    assert [r.verdict for r in rows][2] == "not evaluated"
    with pytest.raises(ValueError, match="declared without a sample"):
        _context(False, tmp_path).decide({"learns": np.ones(4), "cheap": np.ones(4)})


def test_a_positive_control_cannot_be_full_only():
    with pytest.raises(ValueError, match="positive control cannot be full_only"):
        claims.Declared("c", statement="s", rule="superiority", threshold=0.0, control=True,
                        full_only="no")
