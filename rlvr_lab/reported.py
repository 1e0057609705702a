"""What the papers report in numbers, beside the claims that restate them.

A claim's ``paper_value`` is text written for a reader. :data:`REPORTED` holds the numbers in
that text that a figure can draw: the arms a paper compares and their values in the paper's
own units (``arms``, baseline first), or the difference alone where the paper gives only that
(``difference``). ``on_our_axis`` places the paper's effect on our estimand's axis where the
units agree (a probability, a log ratio); ``how`` says how it follows from the paper's numbers.
Nothing here decides a verdict: the thresholds of every claim are declared with the claim, and
the paper's number is drawn beside our interval, not tested against it.

Every value must appear in its claim's declared ``paper_value`` (``tests/core/test_reported``
checks it), so a number typed here cannot drift from the declaration it comes from.
:func:`rlvr_lab.paper_figures.paper_figure` draws them.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reported:
    """One comparison a paper reports: ``metric`` names what was measured and where."""

    claim: str
    metric: str
    arms: tuple[tuple[str, float], ...] = ()
    difference: float | None = None
    unit: str = ""
    on_our_axis: float | None = None
    how: str = ""

    def __post_init__(self):
        if bool(self.arms) == (self.difference is not None):
            raise ValueError(f"{self.claim}: give either arms (at least two) or a difference, "
                             f"not {'both' if self.arms else 'neither'}")
        if self.arms and len(self.arms) < 2:
            raise ValueError(f"{self.claim}: arms={self.arms!r} needs at least two arms")
        if (self.on_our_axis is None) != (not self.how):
            raise ValueError(f"{self.claim}: on_our_axis and how go together")

    @property
    def delta(self) -> float:
        """The paper's effect in its units: last arm minus the first, or the difference."""
        if self.difference is not None:
            return self.difference
        return self.arms[-1][1] - self.arms[0][1]


_PP = "percentage points / 100 (the paper's percent as a probability)"

REPORTED: tuple[Reported, ...] = (
    # --- BroRL (arXiv:2510.01180 v1)
    Reported("brorl_revival_equal_rollouts", "Math score, Table 1 (about equal samples)",
             (("ProRL N=16, +10,439k samples", 62.02), ("BroRL N=512, +11,226k samples", 62.62)),
             unit="score (%)", on_our_axis=0.006, how=_PP),
    Reported("brorl_revival_equal_rollouts", "Code score, Table 1 (about equal samples)",
             (("ProRL N=16", 52.74), ("BroRL N=512", 53.31)), unit="score (%)",
             on_our_axis=0.0057, how=_PP),
    Reported("fewer_filtered_groups", "dynamic-sampling pass rate, Table 2",
             (("N=16", 41.0), ("N=512", 62.0)), unit="% of groups kept",
             on_our_axis=-0.21,
             how="a kept group is one that is not all-equal: -(62% - 41%) of groups filtered"),
    Reported("large_n_raises_throughput", "generation throughput, Table 2 (H100 GPUs)",
             (("N=16", 36.5), ("N=512", 72.4)), unit="samples/s", on_our_axis=0.685,
             how="ln(72.4 / 36.5)"),
    # --- DARS (arXiv:2508.13755; numbers: authors' README, Qwen2.5-Math-1.5B)
    *(Reported(claim, "Pass@128", (("GRPO", 79.6), ("DARS-ET", 81.2)), unit="%",
               on_our_axis=0.016, how=_PP)
      for claim in ("dars_raises_passk_et", "dars_raises_passk_et_equal_budget",
                    "small_dars_passk_equal_budget", "small_dars_passk_equal_steps")),
    *(Reported(claim, "Pass@128", (("GRPO", 79.6), ("DARS-HW", 82.1)), unit="%",
               on_our_axis=0.025, how=_PP)
      for claim in ("dars_raises_passk_hw", "dars_raises_passk_hw_equal_budget",
                    "small_dars_hw_passk_equal_budget")),
    Reported("breadth_raises_pass1", "Avg@128 (equal steps)",
             (("DARS-ET", 50.0), ("DARS-ET-B", 52.5)), unit="%", on_our_axis=0.025, how=_PP),
    Reported("small_breadth_raises_pass1_equal_rollouts", "Avg@128 (equal steps)",
             (("DARS-ET", 50.0), ("DARS-ET-B", 52.5)), unit="%", on_our_axis=0.025, how=_PP),
    Reported("dars_b_both", "Pass@128", (("GRPO", 79.6), ("DARS-HW-B", 82.2)), unit="%"),
    Reported("dars_breadth_depth_orthogonal", "Pass@128 (no GRPO-B row in the paper)",
             (("GRPO", 79.6), ("DARS-HW", 82.1), ("DARS-HW-B", 82.2)), unit="%"),
    # --- MC-GRPO (arXiv:2601.22582)
    *(Reported(claim, "GSM8K, Qwen3-1.7B, G=2", difference=4.62, unit="points")
      for claim in ("bank_mc_improves_g2", "small_mc_improves_g2", "mc_grpo_improves_g2")),
    # the sign-flip rate of Fig. 2b (v1), read off the figure; the worked example this entry
    # drew before (0.100 vs 0.075) is not in v1 (docs/claim_locations.md, seventh pass)
    *(Reported(claim, "sign-flip rate at k=2, Qwen3-1.7B / GSM8K (read off Fig. 2b)",
               (("mean baseline", 5.8), ("median baseline", 2.8)), unit="%",
               on_our_axis=0.517, how="relative reduction (5.8 - 2.8) / 5.8")
      for claim in ("flip_reduction_g2", "bank_median_lowers_flips", "small_median_lowers_flips")),
    # --- CurES (arXiv:2510.01037 abstract)
    Reported("cures_small_final_accuracy", "8 math benchmarks, 1.5B, over GRPO",
             difference=3.30, unit="points"),
    Reported("cures_small_final_accuracy", "8 math benchmarks, 7B, over GRPO",
             difference=4.82, unit="points"),
    # --- GRPO family
    Reported("zoo_gpg_beats_grpo", "average accuracy, Qwen2.5-Math-7B (authors' README)",
             (("GRPO", 43.7), ("GPG", 47.8)), unit="%"),
    Reported("zoo_small_gmpo_beats_grpo", "average Pass@1 on math benchmarks, 7B",
             difference=4.1, unit="pp", on_our_axis=0.041, how=_PP),
)


def for_claim(claim_id: str) -> tuple[Reported, ...]:
    """The paper's reported comparisons behind ``claim_id`` (empty when it gives none)."""
    return tuple(r for r in REPORTED if r.claim == claim_id)
