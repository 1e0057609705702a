"""Claims decided as curves over an assumption: pass on the whole plausible band, fail
nowhere in it, inconclusive on part of it."""
from __future__ import annotations

import math

import pandas as pd

from simulations.rollout_systems import band_verdict


def test_band_verdict_whole_none_and_part():
    x = pd.Series([0.3, 1.0, 2.0, 5.0, 10.0, 30.0])
    all_in = pd.Series([False, False, True, True, True, False])
    assert band_verdict(x, all_in, (2.0, 10.0))[:2] == (1.0, "pass")
    none_in = pd.Series([True, True, False, False, False, True])
    share, verdict, region = band_verdict(x, none_in, (2.0, 10.0))
    assert (share, verdict) == (0.0, "fail") and region.startswith("holds at 0.3")
    part = pd.Series([False, False, False, True, True, True])
    share, verdict, region = band_verdict(x, part, (2.0, 10.0))
    assert verdict == "inconclusive" and math.isclose(share, 2 / 3)
    assert region == "holds at 5, 10, 30"
    assert band_verdict(x, part, (0.3, 0.3))[:2] == (0.0, "fail")


def test_band_without_grid_points_is_not_evaluated():
    x = pd.Series([1.0, 2.0])
    share, verdict, region = band_verdict(x, pd.Series([True, False]), (5.0, 6.0))
    assert math.isnan(share) and verdict is None
    assert band_verdict(x, pd.Series([False, False]), (1, 2))[2] == "holds nowhere"
