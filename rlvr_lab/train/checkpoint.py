"""Checkpoints of arbitrary pytrees (parameters, optimiser state, PRNG keys) without pickle.

File layout (format version 2)::

    RLVR-LAB-CHECKPOINT v2\n
    <one JSON header line: {"format": 2, "meta": caller metadata, "treedef", "shapes",
     "dtypes", "payload_bytes"}>\n
    <payload: the leaves, flax.serialization.msgpack_serialize({"0": leaf0, ...})>
    <SHA-256 (hex) of every byte above>\n

Writes are atomic (temporary file + rename). :func:`load` checks, and raises
:class:`CheckpointError` with a one-line reason on any mismatch (never another exception): the
magic line and format version; the checksum over the whole content (header included, so an
edited header is as corrupt as an edited payload); that the header is a JSON object; the
metadata the caller expects (e.g. a config hash); the header's structure against the template;
and, leaf by leaf, that the decoded payload holds exactly the template's leaves with the
template's shapes and dtypes (a payload that disagrees with its own header, a missing or extra
leaf, a nested or object value are all rejected). Callers rebuild on CheckpointError instead of
using a bad file: the SFT cache retrains. The checksum detects corruption; it is not a
signature (whoever can write the cache can write a consistent file), which is why the payload
is verified against the expected tree rather than trusted. Files of format version 1 are
rejected (rebuilt once).
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

FORMAT = 2
MAGIC = b"RLVR-LAB-CHECKPOINT v2\n"
_OLD_MAGIC = b"RLVR-LAB-CHECKPOINT v"
_DIGEST = 64   # hex characters of the trailing SHA-256
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
    for i, a in enumerate(arrays):
        if not (np.issubdtype(a.dtype, np.number) or a.dtype == bool
                or jax.numpy.issubdtype(a.dtype, jax.numpy.floating)):
            raise TypeError(f"leaf {i} of dtype {a.dtype} is not allowed in a checkpoint; "
                            "leaves are numeric arrays or PRNG keys")
    payload = serialization.msgpack_serialize({str(i): a for i, a in enumerate(arrays)})
    header = {"format": FORMAT, "meta": meta or {}, **layout, "payload_bytes": len(payload)}
    body = MAGIC + json.dumps(header, sort_keys=True).encode() + b"\n" + payload
    _io.atomic_write_bytes(path, body + hashlib.sha256(body).hexdigest().encode() + b"\n")
    return path


def _read(path: Path) -> tuple[dict, bytes]:
    """``(header, payload)`` of a verified file: magic, format, checksum, a JSON object."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise
    except OSError as err:
        raise CheckpointError(f"cannot read checkpoint {path}: {err.strerror or err}") from None
    if not raw.startswith(MAGIC):
        if raw.startswith(_OLD_MAGIC):
            version = raw[len(_OLD_MAGIC):].split(b"\n", 1)[0][:8].decode(errors="replace")
            raise CheckpointError(f"{path} has checkpoint format version {version!r}; this "
                                  f"version reads only {FORMAT} (it is rebuilt)")
        raise CheckpointError(f"{path} is not an rlvr_lab checkpoint (bad header)")
    if len(raw) < len(MAGIC) + _DIGEST + 1 or not raw.endswith(b"\n"):
        raise CheckpointError(f"{path} is truncated")
    body, digest = raw[:-_DIGEST - 1], raw[-_DIGEST - 1:-1]
    if hashlib.sha256(body).hexdigest().encode() != digest:
        raise CheckpointError(f"{path} is corrupted (checksum mismatch)")
    head, sep, payload = body[len(MAGIC):].partition(b"\n")
    try:
        header = json.loads(head)
    except (ValueError, RecursionError):
        raise CheckpointError(f"{path} has a corrupted header") from None
    if not sep or not isinstance(header, dict):
        raise CheckpointError(f"{path} has a malformed header (not a JSON object)")
    if header.get("format") != FORMAT:
        raise CheckpointError(f"{path} has format {header.get('format')!r}; expected {FORMAT}")
    if not isinstance(header.get("meta"), dict):
        raise CheckpointError(f"{path} has malformed metadata (not a JSON object)")
    if header.get("payload_bytes") != len(payload):
        raise CheckpointError(f"{path} has a payload of {len(payload)} bytes; its header says "
                              f"{header.get('payload_bytes')!r}")
    return header, payload


def _restore_leaves(path: Path, payload: bytes, template_arrays: list) -> list:
    """The payload's leaves, each checked against the template's shape and dtype."""
    try:
        stored = serialization.msgpack_restore(payload)
    except Exception:  # noqa: BLE001 - any decoding failure is a bad file
        raise CheckpointError(f"{path} has an unreadable payload") from None
    if not isinstance(stored, dict):
        raise CheckpointError(f"{path} has a malformed payload (not a table of leaves)")
    expected = [str(i) for i in range(len(template_arrays))]
    if sorted(stored, key=str) != sorted(expected):
        missing = [k for k in expected if k not in stored]
        extra = [str(k) for k in stored if k not in expected]
        raise CheckpointError(f"{path} has the wrong leaves (missing {missing[:5]}, extra "
                              f"{extra[:5]})")
    out = []
    for i, want in enumerate(template_arrays):
        value = stored[str(i)]
        if not isinstance(value, (np.ndarray, np.generic)):
            raise CheckpointError(f"{path}: leaf {i} is a {type(value).__name__}, not an array")
        arr = np.asarray(value)
        if arr.shape != want.shape or arr.dtype != want.dtype:
            raise CheckpointError(f"{path}: leaf {i} is {arr.dtype}{list(arr.shape)}; expected "
                                  f"{want.dtype}{list(want.shape)}")
        out.append(arr)
    return out


def load(path: str | Path, template: _T, expect_meta: dict | None = None) -> _T:
    """Restore a tree shaped like ``template`` from ``path``; CheckpointError if anything is off
    (a missing file included).

    ``expect_meta``: keys that must be present in the stored metadata with equal values.
    """
    path = Path(path)
    try:
        return _load(path, template, expect_meta)
    except CheckpointError:
        raise
    except FileNotFoundError:
        raise CheckpointError(f"cannot read checkpoint {path}: no such file") from None
    except Exception as err:  # noqa: BLE001 - whatever a forged file triggers: one line
        raise CheckpointError(f"{path} is unreadable ({type(err).__name__})") from None


def _load(path: Path, template: _T, expect_meta: dict | None) -> _T:
    header, payload = _read(path)
    meta = header["meta"]
    for k, v in (expect_meta or {}).items():
        if meta.get(k) != v:
            raise CheckpointError(f"{path} was written for {k}={meta.get(k)!r}, expected {v!r}")
    leaves, treedef = jax.tree.flatten(template)
    arrays, layout = _describe(template)
    for field in ("treedef", "shapes", "dtypes"):
        if header.get(field) != layout[field]:
            raise CheckpointError(f"{path} does not match the expected structure ({field} differ)")
    stored = _restore_leaves(path, payload, arrays)
    out = [jax.random.wrap_key_data(arr, impl=jax.random.key_impl(leaf)) if _is_key(leaf)
           else jax.numpy.asarray(arr) for leaf, arr in zip(leaves, stored)]
    return jax.tree.unflatten(treedef, out)


def read_meta(path: str | Path) -> dict:
    """The metadata stored in a verified checkpoint (CheckpointError if the file is bad;
    FileNotFoundError if there is none)."""
    path = Path(path)
    try:
        return _read(path)[0]["meta"]
    except (CheckpointError, FileNotFoundError):
        raise
    except Exception as err:  # noqa: BLE001
        raise CheckpointError(f"{path} is unreadable ({type(err).__name__})") from None
