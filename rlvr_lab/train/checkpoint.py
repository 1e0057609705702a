"""Checkpoints of arbitrary pytrees (parameters, optimiser state, PRNG keys) without pickle.

File layout: a magic line, one JSON header line (caller metadata, the tree structure, leaf
shapes/dtypes and the SHA-256 of the payload), then the payload -- the leaves serialised with
``flax.serialization.msgpack_serialize``. Writes are atomic (temporary file + rename).
:func:`load` checks the magic, the metadata the caller expects (e.g. a config hash), the
checksum and the structure against a template, and raises :class:`CheckpointError` with a
one-line reason on any mismatch, so callers can rebuild instead of silently using a bad file.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, TypeVar

import jax
import numpy as np
from flax import serialization

from rlvr_lab import io as _io

MAGIC = b"RLVR-LAB-CHECKPOINT v1\n"
_T = TypeVar("_T")


class CheckpointError(ValueError):
    """A checkpoint file is missing, corrupted or does not match what the caller expects."""


cache_dir = _io.cache_dir
config_hash = _io.stable_hash


def _is_key(leaf) -> bool:
    return hasattr(leaf, "dtype") and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key)


def _to_numpy(leaf):
    return np.asarray(jax.random.key_data(leaf) if _is_key(leaf) else leaf)


def _describe(tree):
    leaves, treedef = jax.tree.flatten(tree)
    arrays = [_to_numpy(x) for x in leaves]
    return arrays, {"treedef": str(treedef), "shapes": [list(a.shape) for a in arrays],
                    "dtypes": [str(a.dtype) for a in arrays]}


def save(path: str | Path, tree: Any, meta: dict | None = None) -> Path:
    """Write ``tree`` (any pytree of arrays / typed keys) and JSON-able ``meta`` to ``path``."""
    path = Path(path)
    arrays, layout = _describe(tree)
    payload = serialization.msgpack_serialize({str(i): a for i, a in enumerate(arrays)})
    header = {"meta": meta or {}, **layout, "sha256": hashlib.sha256(payload).hexdigest()}
    _io.atomic_write_bytes(
        path, MAGIC + json.dumps(header, sort_keys=True).encode() + b"\n" + payload)
    return path


def load(path: str | Path, template: _T, expect_meta: dict | None = None) -> _T:
    """Restore a tree shaped like ``template`` from ``path``; CheckpointError if anything is off.

    ``expect_meta``: keys that must be present in the stored metadata with equal values.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise CheckpointError(f"cannot read checkpoint {path}: {err.strerror}") from None
    if not raw.startswith(MAGIC):
        raise CheckpointError(f"{path} is not an rlvr_lab checkpoint (bad header)")
    head, sep, payload = raw[len(MAGIC):].partition(b"\n")
    try:
        header = json.loads(head)
    except ValueError:
        raise CheckpointError(f"{path} has a corrupted header") from None
    if not sep or hashlib.sha256(payload).hexdigest() != header.get("sha256"):
        raise CheckpointError(f"{path} is corrupted (checksum mismatch)")
    for k, v in (expect_meta or {}).items():
        if header.get("meta", {}).get(k) != v:
            raise CheckpointError(f"{path} was written for {k}={header.get('meta', {}).get(k)!r}, "
                                  f"expected {v!r}")
    leaves, treedef = jax.tree.flatten(template)
    _, layout = _describe(template)
    for field in ("treedef", "shapes", "dtypes"):
        if header.get(field) != layout[field]:
            raise CheckpointError(f"{path} does not match the expected structure ({field} differ)")
    try:
        stored = serialization.msgpack_restore(payload)
    except Exception:
        raise CheckpointError(f"{path} has an unreadable payload") from None
    out = []
    for i, leaf in enumerate(leaves):
        arr = np.asarray(stored[str(i)])
        out.append(jax.random.wrap_key_data(arr, impl=jax.random.key_impl(leaf))
                   if _is_key(leaf) else jax.numpy.asarray(arr))
    return jax.tree.unflatten(treedef, out)


def read_meta(path: str | Path) -> dict:
    """The metadata stored in a checkpoint (CheckpointError if unreadable)."""
    raw = Path(path).read_bytes()
    if not raw.startswith(MAGIC):
        raise CheckpointError(f"{path} is not an rlvr_lab checkpoint (bad header)")
    try:
        return json.loads(raw[len(MAGIC):].partition(b"\n")[0]).get("meta", {})
    except ValueError:
        raise CheckpointError(f"{path} has a corrupted header") from None
