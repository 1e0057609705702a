"""Past one process: the seed-sweep (bank) and sequence trainers under jax.distributed with
two local CPU processes give the numbers of one process."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from rlvr_lab.papers.roll import distributed as D

SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, "tests")
    pid, port = int(sys.argv[1]), sys.argv[2]
    from rlvr_lab.papers.roll import distributed as D
    if pid >= 0:
        D.initialize(f"localhost:{port}", 2, pid)
    import dataclasses
    import jax, numpy as np
    from small_model import RL, TINY
    from rlvr_lab.envs.prompt_bank import PromptBankConfig
    from rlvr_lab.train import bandit, sft
    cfg = bandit.BanditConfig(bank=PromptBankConfig(num_prompts=8, vocab_size=6), num_steps=3,
                              batch_size=4, num_generations=4)
    _, m = D.bank_train_seeds(cfg, jax.random.key(0), 3)
    rl = dataclasses.replace(RL, steps=1, eval_every=1)
    base = sft.load_or_train(TINY, verbose=False)
    run = D.sequence_run(rl, jax.random.key(5), 3, base_policy=base)
    print(json.dumps({"processes": jax.process_count(), "devices": jax.device_count(),
                      "acc": np.asarray(m["accuracy"]).tolist(),
                      "loss": run.history["loss"].tolist(), "pass1": run.history["pass1"].tolist(),
                      "evals": np.asarray(run.evals["pass_at"]).tolist()}))
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def test_two_processes_match_one(base, cache):
    env = dict(os.environ, RLVR_LAB_CACHE=str(cache), JAX_PLATFORMS="cpu")
    env.pop("XLA_FLAGS", None)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    port = str(_free_port())
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT, str(pid), port], cwd=root, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for pid in (0, 1, -1)]   # -1: the single-process reference, run alongside
    outs = []
    try:
        for p in procs:
            stdout, stderr = p.communicate(timeout=600)
            assert p.returncode == 0, stderr[-3000:]
            outs.append(json.loads(stdout.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    two, two_b, one = outs
    assert two["processes"] == two_b["processes"] == 2 and one["processes"] == 1
    assert two["devices"] == 2
    for name in ("acc", "loss", "pass1", "evals"):
        np.testing.assert_allclose(two[name], one[name], rtol=1e-5, atol=1e-6, err_msg=name)
        np.testing.assert_array_equal(two[name], two_b[name], err_msg=name)
    assert np.asarray(one["loss"]).shape == (1, 3)   # [steps, seeds]: all seeds gathered


@pytest.mark.parametrize("n, procs, blocks", [(3, 2, [(0, 2, 4), (2, 2, 4)]),
                                              (4, 2, [(0, 2, 4), (2, 2, 4)]),
                                              (1, 3, [(0, 1, 3), (1, 1, 3), (2, 1, 3)])])
def test_seed_blocks_cover_the_seeds(n, procs, blocks):
    assert [D.seed_block(n, p, procs) for p in range(procs)] == blocks
    with pytest.raises(ValueError, match="num_seeds"):
        D.seed_block(0, 0, 1)
