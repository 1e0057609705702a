"""Issue 44, checkpoints: forged files are rejected with CheckpointError (never another
exception), the payload is checked leaf by leaf against the expected tree, the checksum covers
the header too, and the SFT cache retrains on a forged file."""
import dataclasses
import hashlib
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import serialization
from small_model import TINY

from rlvr_lab.train import checkpoint, sft

TREE = {"w": jnp.arange(6, dtype=jnp.float32).reshape(2, 3), "b": jnp.zeros(3, jnp.int32),
        "key": jax.random.key(3)}


def _parts(path):
    raw = path.read_bytes()
    body = raw[:-65]
    head, _, payload = body[len(checkpoint.MAGIC):].partition(b"\n")
    return json.loads(head), payload


def _forge(path, header, payload, *, magic=checkpoint.MAGIC, fix_checksum=True):
    """A file in the checkpoint layout with ``header`` and ``payload`` and (by default) a
    correct checksum: what someone who knows the format can write."""
    head = header if isinstance(header, bytes) else json.dumps(header).encode()
    body = magic + head + b"\n" + payload
    digest = hashlib.sha256(body).hexdigest() if fix_checksum else "0" * 64
    path.write_bytes(body + digest.encode() + b"\n")
    return path


def _leaves_payload(leaves):
    return serialization.msgpack_serialize({str(i): np.asarray(a) for i, a in enumerate(leaves)})


@pytest.fixture
def saved(tmp_path):
    path = checkpoint.save(tmp_path / "t.ckpt", TREE, {"config_hash": "abc"})
    header, payload = _parts(path)
    leaves = [np.asarray(jax.random.key_data(x)) if x.dtype == jax.random.key(0).dtype
              else np.asarray(x) for x in jax.tree.leaves(TREE)]
    return path, header, payload, leaves


def test_roundtrip(saved):
    path, header, _, _ = saved
    out = checkpoint.load(path, TREE, {"config_hash": "abc"})
    np.testing.assert_array_equal(out["w"], TREE["w"])
    assert out["b"].dtype == jnp.int32
    assert (jax.random.key_data(out["key"]) == jax.random.key_data(TREE["key"])).all()
    assert header["format"] == checkpoint.FORMAT == 2 and checkpoint.read_meta(path) == {
        "config_hash": "abc"}


def _rejected(path, match=None):
    with pytest.raises(checkpoint.CheckpointError, match=match) as err:
        checkpoint.load(path, TREE, {"config_hash": "abc"})
    assert "\n" not in str(err.value)
    return str(err.value)


def _mutated(leaves, i, value):
    out = list(leaves)
    out[i] = value
    return out


@pytest.mark.parametrize("case", ["shape", "dtype", "missing", "extra", "nested", "scalar",
                                  "text", "bytes"])
def test_payload_that_disagrees_with_the_tree_is_rejected(saved, case):
    """The header still describes the right tree and the checksum is right: only the payload
    lies. Before, a wrong shape or dtype loaded silently and a missing leaf was a KeyError."""
    path, header, _, leaves = saved
    i = [k for k, _ in enumerate(leaves) if leaves[k].dtype == np.float32][0]
    forged = {
        "shape": lambda: _leaves_payload(_mutated(leaves, i, np.zeros((3, 2), np.float32))),
        "dtype": lambda: _leaves_payload(_mutated(leaves, i, leaves[i].astype(np.float64))),
        "missing": lambda: _leaves_payload(leaves[:-1]),
        "extra": lambda: _leaves_payload(leaves + [np.zeros(1, np.float32)]),
        "nested": lambda: serialization.msgpack_serialize(
            {**{str(k): a for k, a in enumerate(leaves)}, str(i): {"x": leaves[i]}}),
        "scalar": lambda: serialization.msgpack_serialize(
            {**{str(k): a for k, a in enumerate(leaves)}, str(i): 1.5}),
        "text": lambda: serialization.msgpack_serialize(
            {**{str(k): a for k, a in enumerate(leaves)}, str(i): "w"}),
        "bytes": lambda: b"\x93\x01\x02\x03",
    }[case]()
    header = {**header, "payload_bytes": len(forged)}
    _rejected(_forge(path, header, forged))


@pytest.mark.parametrize("header", [b"[1, 2, 3]", b'"text"', b"null", b"{", b"[" * 100000,
                                    json.dumps({"format": 2, "meta": [1]}).encode()])
def test_malformed_header_is_rejected(saved, header):
    path, _, payload, _ = saved
    _rejected(_forge(path, header, payload))


def test_header_edits_need_the_checksum(saved):
    """The checksum covers the header: an edited config hash is corruption."""
    path, header, payload, _ = saved
    _rejected(_forge(path, {**header, "meta": {"config_hash": "abc", "x": 1}}, payload,
                     fix_checksum=False), "checksum")
    raw = path.read_bytes()
    path.write_bytes(raw.replace(b'"abc"', b'"abd"'))
    _rejected(path, "checksum")


def test_header_lies_are_rejected(saved):
    path, header, payload, _ = saved
    _rejected(_forge(path, {**header, "format": 3}, payload), "format")
    _rejected(_forge(path, {**header, "payload_bytes": 5}, payload), "payload")
    _rejected(_forge(path, {**header, "shapes": [[3, 2], [3], [2]]}, payload), "structure")
    _rejected(_forge(path, {**header, "meta": {"config_hash": "xyz"}}, payload), "config_hash")
    _rejected(_forge(path, header, payload, magic=b"RLVR-LAB-CHECKPOINT v1\n"), "version")


def test_truncated_and_foreign_files(saved, tmp_path):
    path, *_ = saved
    raw = path.read_bytes()
    for cut in (1, 10, 65, len(raw) // 2, len(raw) - 1):
        path.write_bytes(raw[:cut])
        _rejected(path)
    path.write_bytes(b"")
    _rejected(path)
    with pytest.raises(checkpoint.CheckpointError, match="no such file"):
        checkpoint.load(tmp_path / "none.ckpt", TREE)
    with pytest.raises(FileNotFoundError):       # sequence.run starts fresh on this one
        checkpoint.read_meta(tmp_path / "none.ckpt")
    path.write_bytes(b"[1, 2]")
    with pytest.raises(checkpoint.CheckpointError):
        checkpoint.read_meta(path)


def test_sft_cache_retrains_on_a_forged_checkpoint(cache):
    config = dataclasses.replace(TINY, steps=3)
    first = sft.load_or_train(config, verbose=False)
    path = sft.checkpoint_path(config)
    header, payload = _parts(path)
    leaves = [np.asarray(x) for x in jax.tree.leaves(first)]
    bad = _leaves_payload([np.zeros(leaves[0].shape + (2,), leaves[0].dtype)]
                          + leaves[1:])
    _forge(path, {**header, "payload_bytes": len(bad)}, bad)
    with pytest.warns(UserWarning, match="rejected.*retraining"):
        rebuilt = sft.load_or_train(config, verbose=False)
    for a, b in zip(jax.tree.leaves(first), jax.tree.leaves(rebuilt)):
        np.testing.assert_array_equal(a, b)
    _forge(path, b"[1, 2, 3]", payload)           # a list header: retrained, not a crash
    with pytest.warns(UserWarning, match="rejected.*retraining"):
        sft.load_or_train(config, verbose=False)
    assert checkpoint.read_meta(path)["config_hash"] == config.hash()


def test_rl_checkpoint_with_forged_metadata_starts_fresh(base, tmp_path):
    """The RL checkpoint's own metadata (steps done, history) is forged but consistent with
    the checksum: the run warns and starts from the SFT base instead of crashing."""
    from small_model import RL

    from rlvr_lab.train import sequence

    key = jax.random.key(7)
    cfg = dataclasses.replace(RL, steps=2, eval_every=2)
    trainer = sequence.Trainer(cfg, base_policy=base)
    path = tmp_path / "rl.ckpt"
    sequence.run(cfg, key, 1, trainer=trainer, checkpoint_path=path, stop_after=1)
    header, payload = _parts(path)
    for forged in ({"steps_done": "x"}, {"history": [1, 2]}, {"evals": None},
                   {"steps_done": -3}):
        _forge(path, {**header, "meta": {**header["meta"], **forged}}, payload)
        with pytest.warns(UserWarning, match="not used"):
            fresh = sequence.run(cfg, key, 1, trainer=trainer, checkpoint_path=path,
                                 stop_after=1)
        assert fresh.steps_done == 1, forged
