"""AutoDeviceMapping on jax.sharding: stages on sub-meshes of 4 fake CPU devices give the
numbers of the single-device trainer (tokens identical, the rest within float noise)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from rlvr_lab.papers.roll import mapping as M

FOUR_DEVICES = textwrap.dedent("""
    import os
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    import sys
    sys.path.insert(0, "tests")
    import dataclasses, json
    import jax, numpy as np
    from small_model import RL, TINY
    from rlvr_lab.papers.roll import mapping as M
    from rlvr_lab.train import sequence, sft
    assert jax.device_count() == 4
    base = sft.load_or_train(TINY, verbose=False)
    cfg = dataclasses.replace(RL, num_prompts=4, num_generations=4)
    trainer = sequence.Trainer(cfg, base_policy=base)
    key = jax.random.key(11)
    ref_state, ref = trainer.train_step(key, trainer.init_state(2), 0)
    out = {}
    # colocated on devices 0-1 vs generation and scoring on 0-1, the update on 2-3 (generation
    # and scoring compile once for both: shared jits with the mesh static)
    for mp in (M.DeviceMapping.colocated(2),
               M.DeviceMapping((0, 1), (0, 1), (2, 3), "disaggregated 2+2")):
        mt = M.MappedTrainer(cfg, mp, trainer=trainer)
        state, m, batch = mt.train_step(key, mt.init_state(2), 0)
        params = jax.tree.leaves(state.policy)
        out[mp.name] = {
            "metric_diff": {k: float(np.max(np.abs(m[k] - ref[k]))) for k in m if k in ref},
            "param_diff": max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
                              for a, b in zip(params, jax.tree.leaves(ref_state.policy))),
            "update_devices": sorted(d.id for d in params[0].sharding.device_set),
            "gen_devices": sorted(d.id for d in batch.tokens.sharding.device_set),
            "transfer_bytes": mt.transfer_bytes}
    print(json.dumps(out))
""")


def test_four_fake_devices_mappings_match_single_device(base, cache):
    env = dict(os.environ, RLVR_LAB_CACHE=str(cache), JAX_PLATFORMS="cpu")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    proc = subprocess.run([sys.executable, "-c", FOUR_DEVICES], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    colo, dis = out["colocated 2"], out["disaggregated 2+2"]
    assert colo["update_devices"] == colo["gen_devices"] == [0, 1]
    assert dis["gen_devices"] == [0, 1] and dis["update_devices"] == [2, 3]
    assert colo["transfer_bytes"] == 0 and dis["transfer_bytes"] > 0
    for name, r in out.items():
        # the verifier saw the same tokens: rewards and pass@1 are exact
        assert r["metric_diff"]["reward"] == 0 and r["metric_diff"]["pass1"] == 0, name
        for k, v in r["metric_diff"].items():
            assert v <= 1e-5, (name, k, v)
        # one Adam step of lr 1e-3: parameters agree to a few percent of a step
        assert r["param_diff"] <= 5e-5, (name, r["param_diff"])


@pytest.mark.parametrize("kwargs, match", [
    (dict(generation=(), scoring=(0,), update=(0,)), "generation"),
    (dict(generation=(0, 0), scoring=(0,), update=(0,)), "generation"),
    (dict(generation=(0,), scoring=(-1,), update=(0,)), "scoring"),
    (dict(generation=(0,), scoring=(0,), update=[0]), "update"),
])
def test_mapping_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        M.DeviceMapping(**kwargs)


def test_mapping_needs_enough_devices():
    with pytest.raises(ValueError, match="devices are available"):
        M.DeviceMapping.disaggregated(1, 1).meshes(devices=[object()])
    mp = M.DeviceMapping.disaggregated(2, 3)
    assert mp.generation == (0, 1) and mp.update == (2, 3, 4) and not mp.colocated_stages
    assert M.DeviceMapping.colocated(3).colocated_stages
