"""Claims decided as curves over an assumption (pass on the whole plausible band, fail
nowhere in it, inconclusive on part of it), windows around a paper's number, and the
per-seed numbers the rollout-system experiments hand to the claims engine."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from rlvr_lab import claims
from rlvr_lab.papers.systems.study import (
    HEAVY,
    TAILS,
    april_seed_numbers,
    areal_seed_numbers,
    band_share,
)
from simulations import april_prefix, rollout_systems


def _decide(spec_id: str, sample) -> str:
    specs = {s.id: s for s in (rollout_systems.ECHO_CLAIMS + rollout_systems.WEBGYM_CLAIMS
                               + rollout_systems.APRIL_CLAIMS + rollout_systems.AREAL_CLAIMS)}
    return claims.decide(specs[spec_id], sample).verdict


def test_band_share_whole_none_and_part():
    x = pd.Series([0.3, 1.0, 2.0, 5.0, 10.0, 30.0])
    assert band_share(x, pd.Series([False, False, True, True, True, False]), (2.0, 10.0)) \
        == (1.0, "holds at 2, 5, 10")
    share, region = band_share(x, pd.Series([True, True, False, False, False, True]),
                               (2.0, 10.0))
    assert share == 0.0 and region.startswith("holds at 0.3")
    part = pd.Series([False, False, False, True, True, True])
    share, region = band_share(x, part, (2.0, 10.0))
    assert math.isclose(share, 2 / 3) and region == "holds at 5, 10, 30"
    assert band_share(x, part, (0.3, 0.3))[0] == 0.0


def test_band_without_grid_points_is_not_evaluated():
    x = pd.Series([1.0, 2.0])
    share, region = band_share(x, pd.Series([True, False]), (5.0, 6.0))
    assert math.isnan(share)
    assert band_share(x, pd.Series([False, False]), (1, 2))[1] == "holds nowhere"


@pytest.mark.parametrize("cid", ["echo_cost_reduction", "webgym_async_speedup"])
def test_band_share_is_decided_three_ways(cid):
    assert _decide(cid, claims.value(1.0)) == "pass"
    assert _decide(cid, claims.value(0.0)) == "fail"
    assert _decide(cid, claims.value(0.4)) == "inconclusive"
    assert _decide(cid, claims.value(float("nan"))) == "inconclusive"


def test_windows_are_the_old_windows():
    # april: gain within [11.25%, 45%] <=> |log(gain / 22.5%)| < log 2
    gain = lambda g: claims.value(math.log(g / rollout_systems.APRIL_PAPER_GAIN))  # noqa: E731
    assert _decide("april_throughput_gain", gain(0.12)) == "pass"
    assert _decide("april_throughput_gain", gain(0.44)) == "pass"
    assert _decide("april_throughput_gain", gain(0.10)) == "fail"
    assert _decide("april_throughput_gain", gain(0.50)) == "fail"
    # off-policy tokens within [20%, 60%]
    assert _decide("april_off_policy_tokens", claims.value(0.55 - 0.40)) == "pass"
    assert _decide("april_off_policy_tokens", claims.value(0.78 - 0.40)) == "fail"
    # AReaL: speed-up within 2.57 ÷/x 1.25
    speed = lambda s: claims.value(math.log(s / 2.57))  # noqa: E731
    assert _decide("areal_speedup", speed(2.1)) == "pass"
    assert _decide("areal_speedup", speed(1.73)) == "fail"
    assert _decide("areal_speedup", speed(3.3)) == "fail"
    # the staleness bound is an invariant: any violation fails
    assert _decide("areal_staleness_bound", claims.seeds([0.0, 0.0, 0.0])) == "pass"
    assert _decide("areal_staleness_bound", claims.seeds([0.0, 0.01])) == "fail"


def test_april_seed_numbers_from_a_sweep_table():
    rows = []
    gains = {0: (0.1, 0.2, 0.3), 1: (0.1, 0.3, 0.2)}
    for seed, g in gains.items():
        for law, x in zip(TAILS, g):
            rows.append(dict(law=law, seed=seed, r=2.0, policy="april",
                             rollout_throughput_gain=x, off_policy_token_fraction=0.4 + x))
            rows.append(dict(law=law, seed=seed, r=3.0, policy="april",
                             rollout_throughput_gain=9.0, off_policy_token_fraction=9.0))
    per = april_seed_numbers(pd.DataFrame(rows))
    np.testing.assert_allclose(per.heavy_mean, [0.25, 0.25])
    np.testing.assert_allclose(per.min_step, [0.1, -0.1])
    np.testing.assert_allclose(per.off_policy, [0.6, 0.7])
    assert list(per[HEAVY[1]]) == [0.3, 0.2]


def test_areal_seed_numbers_pick_the_best_mean_configuration():
    rows = [dict(seed=s, eta=-1, policy="sync", gen=4, train=4, speedup=1.0, over_eta=0.0)
            for s in (0, 1)]
    for s in (0, 1):
        for eta, speed in ((0, 1.2), (8, 2.0), (16, 5.0)):
            rows.append(dict(seed=s, eta=eta, policy="async", gen=2, train=2,
                             speedup=speed + 0.1 * s, over_eta=0.1 * (eta == 16)))
            rows.append(dict(seed=s, eta=eta, policy="async", gen=3, train=1,
                             speedup=speed - 0.5, over_eta=0.5))
    top, per = areal_seed_numbers(pd.DataFrame(rows))
    assert (top.eta, top.gen) == (8, 2)                      # eta = 16 is outside eta <= 8
    np.testing.assert_allclose(per.drop_duplicates("seed").speedup, [2.0, 2.1])
    # the staleness of each eta's best split only (the 3:1 split's 0.5 is never best)
    assert set(per.over_eta) == {0.0, 0.1}


def test_april_prefix_seed_numbers_skip_treatments_not_run():
    rows = [dict(setting="APRIL", treatment=t, seed=s, base_pass1=0.3, final_pass1=f + s / 10,
                 stale_token_frac=0.5)
            for t, f in (("sync", 0.6), ("none", 0.5)) for s in (1, 0)]
    out = april_prefix.seed_numbers(pd.DataFrame(rows))
    assert set(out) == {"april_prefix_sync_learns", "april_prefix_off_policy_tokens",
                        "april_prefix_accuracy_vs_sync"}
    np.testing.assert_allclose(out["april_prefix_sync_learns"], [0.3, 0.4])
    np.testing.assert_allclose(out["april_prefix_accuracy_vs_sync"], [-0.1, -0.1])
    only_sync = april_prefix.seed_numbers(pd.DataFrame(rows[:2]))
    assert set(only_sync) == {"april_prefix_sync_learns"}


def test_declarations_match_the_engine_rules():
    for spec in (rollout_systems.SMALL_CLAIMS + april_prefix.CLAIMS):
        if spec.rule in ("non_inferiority", "equivalence") and spec.unit == "pass@1":
            assert abs(spec.threshold) <= 0.05, spec.id
    vs_sync = {s.id: s for s in april_prefix.CLAIMS}["april_prefix_accuracy_vs_sync"]
    assert -vs_sync.threshold < 0.021            # below the paper's +2.1 pp gain
    assert [s.id for s in april_prefix.CLAIMS if s.control] == ["april_prefix_sync_learns"]
    assert [s.id for s in rollout_systems.SMALL_CLAIMS if s.control] == [
        "areal_small_sync_learns"]
