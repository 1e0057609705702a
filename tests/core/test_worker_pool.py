"""Worker processes of `reproduce --jobs N`: a full run gives each experiment a fresh process
(compiled kernels pile up in a long-lived one until Linux's mapping limit kills it), a quick run
reuses workers, and the mapping-limit note names the fix."""
import sys

import pytest

from rlvr_lab import experiments


def test_full_runs_use_one_process_per_experiment_quick_runs_reuse_workers():
    assert experiments.pool_options(quick=True) == {}
    if sys.version_info >= (3, 11):
        assert experiments.pool_options(quick=False) == {"max_tasks_per_child": 1}
    else:
        assert experiments.pool_options(quick=False) == {}


@pytest.mark.parametrize("limit, noted", [("65530\n", True), ("262144\n", False),
                                          ("garbage", False)])
def test_map_count_note_only_at_the_default_limit(monkeypatch, limit, noted):
    real = experiments.Path

    class FakePath(type(real())):
        def read_text(self, *a, **k):
            if str(self) == "/proc/sys/vm/max_map_count":
                return limit
            return super().read_text(*a, **k)

    monkeypatch.setattr(experiments, "Path", FakePath)
    note = experiments.map_count_note()
    assert bool(note) == noted
    if noted:
        assert "sysctl -w vm.max_map_count" in note and "65530" in note
