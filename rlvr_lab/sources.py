"""``python -m rlvr_lab.sources [claims.csv]``: refresh where each claim comes from.

``paper_ref`` and ``paper_value`` are bibliography, not results. This command rewrites those
two columns of a stored ``claims.csv`` (and the ``CLAIMS.md`` beside it, if there is one)
from the claims' current declarations (:func:`rlvr_lab.report.refresh_sources`), so a corrected
citation needs no rerun. It changes no other column, and exits 2 with a one-line error when a
row's rule, direction or thresholds differ from its declaration (that table is stale: rerun it
instead).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from rlvr_lab import experiments, io, report


def declared_claims() -> dict[tuple[str, str], object]:
    """``{(experiment, claim id): claims.Declared}`` of every registered experiment."""
    experiments.load_all()
    return {(name, spec.id): spec for name, exp in experiments.registry().items()
            for spec in exp.declared}


def refresh(csv: Path) -> int:
    """Rewrite the citations of ``csv`` and of the ``CLAIMS.md`` beside it, where there is one
    (``figures/rounding/`` keeps only its table); the number of rows changed."""
    df = pd.read_csv(csv)
    fresh = report.refresh_sources(df, declared_claims())
    io.atomic_write_text(csv, fresh.to_csv(index=False))
    md = csv.parent / "CLAIMS.md"
    if md.exists():
        io.atomic_write_text(md, experiments.claims_markdown(
            fresh, quick=csv.parent.name == "quick"))
    cols = list(report.SOURCE_COLUMNS)
    return int((fresh[cols].fillna("").astype(str) != df[cols].fillna("").astype(str))
               .any(axis=1).sum())


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    csv = io.claims_csv_argument(argv, "python -m rlvr_lab.sources")
    if isinstance(csv, str):
        print(csv, file=sys.stderr)
        return 2
    try:
        changed = refresh(csv)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    md = csv.parent / "CLAIMS.md"
    print(f"wrote the paper_ref / paper_value columns of {csv} ({changed} rows changed)"
          + (f" and {md}" if md.exists() else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
