"""Named randomness streams.

Every random draw in the toolkit comes from a key folded with the *name* of what it is for
(``"prompts"``, ``"rollout"``, ``"update"``, ``"evaluation"``, ...), never with a bare number:
the name says what the stream is, adding a stream never shifts another, and two code paths that
must draw the same numbers (a paper's trainer and the reference trainer it is compared with,
so that arms are paired) do so by using the same name.

The salt of a name is a stable 31-bit hash of its UTF-8 bytes (CRC-32, shifted right by one
so it fits a non-negative int32), the same on every platform and Python version.
"""
from __future__ import annotations

import zlib

import jax
from jax.typing import ArrayLike

# the streams of one training step, shared by every trainer that pairs with sequence.Trainer
ROLLOUT = "rollout"          # sampling the step's batch (prompts, then completions)
UPDATE = "update"            # minibatch permutation / dropout of the optimiser step
EVALUATION = "evaluation"    # held-out evaluation after the step
PROMPTS = "prompts"          # which prompts a rollout draws
SAMPLES = "samples"          # the completions of those prompts


def salt(name: str) -> int:
    """The stable integer that ``name`` folds into a key."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"stream name={name!r} is not allowed; give a non-empty string")
    return zlib.crc32(name.encode()) >> 1


def stream(key: jax.Array, name: str, index: ArrayLike | None = None) -> jax.Array:
    """The key of stream ``name`` (and, with ``index``, its ``index``-th member, e.g. one per
    outlier placement) derived from ``key``."""
    out = jax.random.fold_in(key, salt(name))
    return out if index is None else jax.random.fold_in(out, index)


@jax.jit
def _fold_each(keys: jax.Array, data: ArrayLike) -> jax.Array:
    return jax.vmap(jax.random.fold_in, in_axes=(0, None))(keys, data)


def each(keys: jax.Array, name: str) -> jax.Array:
    """:func:`stream` of ``name`` for every key of ``keys [S]``, in one compiled call."""
    return _fold_each(keys, salt(name))
