"""The ring of past parameters behind the small-model staleness study: version max(k - S, 0)
for every S <= H, against a plain Python list of all versions; and the staleness update's
naive / decoupled losses agreeing at S = 0."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_lab.papers.systems import stale

_push = jax.jit(stale.ring_push)
_get = jax.jit(stale.ring_get)


@given(st.integers(0, 4), st.integers(1, 12), st.data())
@settings(max_examples=15, deadline=None)
def test_ring_returns_version_k_minus_s(h, steps, data):
    params = {"w": jnp.zeros((2, 3)), "b": jnp.zeros(())}
    ring = stale.ring_init(params, h + 1)
    history = []                               # every version, for the reference
    for k in range(steps):
        version = {"w": jnp.full((2, 3), float(k)), "b": jnp.asarray(-float(k))}
        history.append(k)
        ring = _push(ring, version, k)
        s = data.draw(st.integers(0, h))
        got = _get(ring, k, s)
        want = history[max(k - s, 0)]
        assert float(got["b"]) == -want and np.all(np.asarray(got["w"]) == want)


def test_ring_edges_and_errors():
    ring = stale.ring_init(jnp.asarray(0.0), 3)
    assert ring.shape == (3,)
    for k in range(5):
        ring = stale.ring_push(ring, jnp.asarray(float(k)), k)
    # slots hold versions 3, 4, 2 (k mod 3); staleness 0..2 reach back to version 2
    assert [float(stale.ring_get(ring, 4, s)) for s in range(3)] == [4.0, 3.0, 2.0]
    assert float(stale.ring_get(jnp.asarray([0.0, 9.0]), 0, 1)) == 0.0   # before S steps: base
    with pytest.raises(ValueError, match="size"):
        stale.ring_init(jnp.asarray(0.0), 0)
    # traced version and staleness (vmapped over runs)
    vals = jax.vmap(stale.ring_get, in_axes=(None, None, 0))(ring, 4, jnp.arange(3))
    np.testing.assert_array_equal(np.asarray(vals), [4.0, 3.0, 2.0])
