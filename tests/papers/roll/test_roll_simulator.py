"""The colocated/disaggregated step-time model: closed forms against float64 references,
the ordering of the modes, memory feasibility, and the crossover finder."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_lab.papers.roll import simulator as SIM
from rlvr_lab.papers.systems.engine import TRAINER_PRESETS

SMALL = SIM.default_workload(16)


def test_costs_match_float64_reference():
    c = SIM.ClusterConfig()
    p = 8e9
    # offload + reload of the 16 B/param states sharded over 4 GPUs at 25 GB/s, reshard 16 GB
    assert math.isclose(c.switch_s(p, 4), 2 * (16.0 * p / 4) / 25e9 + 2.0 * p / 200e9)
    assert math.isclose(c.transfer_s(p), 2.0 * p / 25e9 + 0.5)
    assert c.min_train_gpus(p) == math.ceil(16.0 * p / (80e9 * 0.8)) == 2


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["1.5b", "8b"]), st.integers(2, 12),
       st.floats(0.5, 100), st.floats(0.5, 100))
def test_mode_ordering_and_closed_forms(model, devices, offload, network):
    cluster = SIM.ClusterConfig(offload_gb_s=offload, network_gb_s=network)
    out = SIM.step_times(model, devices, SMALL, cluster)
    # overlapping generation and training never takes longer than running them in turn
    assert out["disaggregated_async"] <= out["disaggregated"]
    params, trainer = SIM.MODEL_PARAMS[model], TRAINER_PRESETS[model]
    gen, tokens = SIM.generation(model, devices, SMALL)
    if devices >= cluster.min_train_gpus(params):
        want = gen + trainer.overhead_s + tokens * trainer.seconds_per_token / devices \
            + cluster.switch_s(params, devices)
        assert math.isclose(out["colocated"], want, rel_tol=1e-12)
    else:
        assert out["colocated"] == math.inf
    d_gen = out["disaggregated_async_gen_gpus"]
    if d_gen:
        g, tok = SIM.generation(model, d_gen, SMALL)
        t = trainer.overhead_s + tok * trainer.seconds_per_token / (devices - d_gen)
        assert math.isclose(out["disaggregated_async"], max(g, t + cluster.transfer_s(params)))


def test_more_generation_gpus_never_slow_generation_down():
    times = [SIM.generation("1.5b", w, SMALL)[0] for w in (1, 2, 4, 8)]
    assert all(a >= b for a, b in zip(times, times[1:]))
    # the same lengths for every worker count: the trained tokens do not change
    assert len({SIM.generation("1.5b", w, SMALL)[1] for w in (1, 2, 4, 8)}) == 1


def test_crossover_finder():
    df = pd.DataFrame({"model": ["a"] * 4 + ["b"] * 4, "devices": [2, 4, 8, 16] * 2,
                       "colocated": [1, 1, 1, 1, np.inf, 1, 1, 1],
                       "disaggregated_async": [2, 0.5, 2, 0.5, np.inf, 2, 2, 2]})
    out = SIM.crossover(df)
    assert out["a"]["from_devices"] == 16 and out["a"]["colocated_wins_smallest"]
    assert out["b"]["from_devices"] is None and out["b"]["colocated_wins_smallest"]


def test_splits_and_errors():
    assert SIM.splits(8, 2) == [1, 2, 3, 4, 5, 6]
    assert SIM.splits(8, 2, grid=None) == [1, 2, 3, 4, 5, 6]
    assert SIM.splits(2, 2) == []
    with pytest.raises(ValueError, match="devices"):
        SIM.step_times("8b", 1, SMALL)
    with pytest.raises(ValueError, match="model"):
        SIM.step_times("70b", 4, SMALL)
    with pytest.raises(ValueError, match="network_gb_s"):
        SIM.ClusterConfig(network_gb_s=0)
    with pytest.raises(ValueError, match="usable_fraction"):
        SIM.ClusterConfig(usable_fraction=1.5)
