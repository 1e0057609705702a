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

from roll_distributed_case import case

from rlvr_lab.papers.roll import distributed as D

SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path[:0] = ["tests", "tests/papers/roll"]
    pid, port = int(sys.argv[1]), sys.argv[2]
    from rlvr_lab.papers.roll import distributed as D
    D.initialize(f"localhost:{port}", 2, pid)
    import jax
    from roll_distributed_case import case
    print(json.dumps(dict(case(), processes=jax.process_count(), devices=jax.device_count())))
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
             for pid in (0, 1)]
    outs = []
    try:
        one = case()           # the single-process reference, computed while they run
        for p in procs:
            stdout, stderr = p.communicate(timeout=900)
            assert p.returncode == 0, stderr[-3000:]
            outs.append(json.loads(stdout.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    two, two_b = outs
    assert two["processes"] == two_b["processes"] == 2 and two["devices"] == 2
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
