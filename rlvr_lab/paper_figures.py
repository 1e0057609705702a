"""``python -m rlvr_lab.paper_figures [claims.csv]``: the paper's numbers beside ours.

One figure per central paper (GRPO family with Dr.GRPO, MC-GRPO, DARS, BroRL, CurES). Each
row is one comparison the paper reports in numbers (:data:`rlvr_lab.reported.REPORTED`): on
the left the paper's arms in its own units, with their difference; on the right our estimate
of the claim that restates it, with its interval, the declared pass / fail thresholds, the
verdict and, where the units agree, the paper's effect on our axis (a star). The figures are
drawn from a stored ``claims.csv`` alone, so ``reproduce`` writes them beside the table and
this command redraws them without a rerun.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from rlvr_lab import io, plotting
from rlvr_lab.reported import REPORTED, Reported, for_claim

# figure name -> the papers (the ``paper`` column of claims.csv) whose claims it shows
FIGURES: dict[str, tuple[str, ...]] = {
    "grpo_family": ("GRPO", "Dr.GRPO", "RLOO", "DAPO", "GSPO"),
    "mc_grpo": ("MC-GRPO",),
    "dars": ("DARS",),
    "brorl": ("BroRL",),
    "cures": ("CurES",),
}
VERDICT_COLOURS = {"pass": "#3a8a3f", "fail": "#d1495b", "inconclusive": "#edae49",
                   "not applicable here": "#888888", "not evaluated": "#888888"}


def figure_name(key: str) -> str:
    return f"paper_vs_ours_{key}"


def _rows(df: pd.DataFrame, papers: tuple[str, ...]) -> list[tuple[pd.Series, Reported]]:
    part = df[df.paper.isin(papers)]
    rows = []
    for _, row in part.iterrows():
        rows.extend((row, rep) for rep in for_claim(row.claim))
    return rows


def _unreported(df: pd.DataFrame, papers: tuple[str, ...]) -> int:
    """Claims of these papers that the paper states without a number we can draw."""
    part = df[df.paper.isin(papers)]
    reported = {r.claim for r in REPORTED}
    text = part.paper_value.fillna("").astype(str)
    statement = part.get("statement", pd.Series("", index=part.index))
    control = statement.fillna("").astype(str).str.contains("positive control")
    stated = ~text.str.strip().isin(["", "derived"]) & ~control
    return int((stated & ~part.claim.isin(reported)).sum())


def _finite(x) -> float | None:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _paper_panel(ax, rep: Reported) -> None:
    if rep.arms:
        xs = [v for _, v in rep.arms]
        ax.plot(xs, [0] * len(xs), "o", color="#555555", ms=6, zorder=3)
        for i, (label, v) in enumerate(rep.arms):
            ax.annotate(f"{label}: {v:g}", (v, 0), textcoords="offset points",
                        xytext=(0, 6 + 10 * (i % 2)), ha="center", fontsize=7)
        lo, hi = min(xs), max(xs)
    else:
        ax.plot([rep.difference], [0], "o", color="#555555", ms=6, zorder=3)
        ax.axvline(0, color="black", lw=0.6)
        lo, hi = min(0.0, rep.difference), max(0.0, rep.difference)
    pad = 0.35 * (hi - lo) or 1.0
    ax.set_xlim(lo - pad, hi + pad)
    ax.set_ylim(-1, 2.2)
    ax.set_yticks([])
    unit = "pp" if rep.unit == "%" else rep.unit   # a difference of percents
    ax.set_title(f"paper: {rep.metric}  (difference {rep.delta:+.3g} {unit})".strip(),
                 fontsize=8, loc="left")
    ax.tick_params(labelsize=7)


def _our_panel(ax, row: pd.Series, rep: Reported) -> None:
    est, lo, hi = (_finite(row.get(c)) for c in ("estimate", "ci_low", "ci_high"))
    verdict = str(row.get("verdict", ""))
    colour = VERDICT_COLOURS.get(verdict, "#888888")
    xs = [v for v in (est, lo, hi, 0.0) if v is not None]
    sides = (-1, 1) if row.get("rule") == "equivalence" else (1,)   # +-margin
    for column, style in (("fail_threshold", ":"), ("threshold", "--")):
        t = _finite(row.get(column))
        for side in sides if t is not None else ():
            ax.axvline(side * t, color="#555555", lw=0.8, ls=style)
            xs.append(side * t)
    ax.axvline(0, color="black", lw=0.5)
    if est is not None:
        err = None if lo is None or hi is None else [[est - lo], [hi - est]]
        ax.errorbar([est], [0], xerr=err, fmt="o", color=colour, ms=6, capsize=3, zorder=3)
    if rep.on_our_axis is not None:
        ax.plot([rep.on_our_axis], [0], "*", color="black", ms=9, zorder=4)
        xs.append(rep.on_our_axis)
    span = (max(xs) - min(xs)) or 1.0
    ax.set_xlim(min(xs) - 0.12 * span, max(xs) + 0.12 * span)
    ax.set_ylim(-1, 1)
    ax.set_yticks([])
    ax.set_title(f"ours: {row.claim} ({row.setting}) -> {verdict}", fontsize=8, loc="left",
                 color=colour)
    ax.set_xlabel(str(row.get("unit", "")), fontsize=7, labelpad=1)
    ax.tick_params(labelsize=7)


def paper_figure(df: pd.DataFrame, key: str) -> Figure | None:
    """The figure ``key`` of :data:`FIGURES` from a claims table (``None`` when none of its
    claims is in ``df`` with a reported number)."""
    if key not in FIGURES:
        raise ValueError(f"unknown figure {key!r}; valid: {', '.join(FIGURES)}")
    papers = FIGURES[key]
    rows = _rows(df, papers)
    if not rows:
        return None
    with plotting.house_style():
        fig, axes = plt.subplots(len(rows), 2, figsize=(11, 1.05 * len(rows) + 1.0),
                                 squeeze=False, gridspec_kw={"width_ratios": (1, 1.2)})
        for (row, rep), (left, right) in zip(rows, axes):
            _paper_panel(left, rep)
            _our_panel(right, row, rep)
        more = _unreported(df, papers)
        fig.suptitle(f"{' / '.join(papers)}: the paper's numbers (left) beside ours (right)",
                     fontsize=10)
        fig.text(0.01, 0.005,
                 "right: our estimate and interval, colour = verdict; dashed = pass threshold, "
                 "dotted = fail threshold; star = the paper's effect on our axis where units "
                 f"agree.  {more} more claims of these papers are stated without a number "
                 "(figures/CLAIMS.md).", fontsize=7, va="bottom")
        fig.tight_layout(rect=(0, 0.03, 1, 0.97))
    return fig


def committed_figure(key: str, csv: str | Path | None = None) -> Figure | None:
    """The figure ``key`` drawn from a stored table, by default the committed full run's
    ``figures/claims.csv`` (what the notebooks show beside their quick runs)."""
    path = Path(csv) if csv is not None else io.figures_dir() / "claims.csv"
    return paper_figure(pd.read_csv(path), key)


def write_all(df: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """Draw every figure of :data:`FIGURES` that has rows into ``out_dir``."""
    written = []
    for key in FIGURES:
        fig = paper_figure(df, key)
        if fig is None:
            continue
        written += plotting.save_figure(fig, figure_name(key), out_dir)
        plt.close(fig)
    return written


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    csv = io.claims_csv_argument(argv, "python -m rlvr_lab.paper_figures")
    if isinstance(csv, str):
        print(csv, file=sys.stderr)
        return 2
    paths = write_all(pd.read_csv(csv), csv.parent)
    print(f"wrote {len([p for p in paths if p.suffix == '.png'])} figures into {csv.parent}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
