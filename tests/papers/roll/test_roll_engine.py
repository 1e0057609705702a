"""ROLL's scheduler on the tiny transformer: the chunked decoder draws the tokens of
transformer.sample, aborting changes no trained sample, and the device's token counts equal
the event model's."""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from small_model import RL, TINY

from rlvr_lab.models import transformer
from rlvr_lab.papers.roll import engine as E
from rlvr_lab.papers.roll import scheduler as S
from rlvr_lab.train import sequence, sft

CFG = dataclasses.replace(RL, num_prompts=4, num_generations=4)


@pytest.fixture(scope="module")
def trainer(base):
    return sequence.Trainer(CFG, base_policy=base)


@pytest.mark.parametrize("chunk", [1, 3])
def test_chunked_decoder_matches_sample(base, chunk):
    prompts = jnp.asarray(sft.encode(TINY, sft.problems(TINY, "heldout")[:6]).prompts)
    valid = prompts != transformer.PAD_ID
    key = jax.random.key(3)
    n = TINY.max_new_tokens
    ref = transformer.sample(key, base, prompts, valid, max_new_tokens=n)
    pol = jax.tree.map(lambda x: x[None], base)
    st = E._prefill(pol, prompts[None], valid[None], max_new_tokens=n)
    for a in range(0, n, chunk):
        st = E.decode_chunk(key[None], pol, st, valid[None], jnp.zeros(1, bool), a,
                            min(a + chunk, n), 1.0)
    np.testing.assert_array_equal(st.tokens[0], ref.tokens)
    np.testing.assert_array_equal(st.mask[0], ref.mask)
    np.testing.assert_allclose(st.logp[0], ref.logp, atol=1e-5)
    np.testing.assert_allclose(st.entropy[0], ref.entropy, atol=1e-5)


@pytest.mark.parametrize("kw", [dict(), dict(chunk=2, overlap=True), dict(order="slot")])
def test_abort_changes_no_trained_sample_and_counts_are_exact(trainer, kw):
    rc = E.RollConfig(CFG, over_provision=2.0, **kw)
    d = E.Driver(rc, trainer=trainer)
    keys = jax.random.split(jax.random.key(4), 2)
    policy = trainer.init_state(2).policy
    roll = d.rollout(keys, policy)
    full = d.rollout(keys, policy, abort=False)
    for r, f in zip(roll, full):
        lengths = f.mask.sum(-1)
        assert S.check(r.scheduler, CFG.num_prompts, lengths) == []
        assert S.check(f.scheduler, CFG.num_prompts, lengths) == []
        assert E.same_batch(r, f)
        # the event model on the full lengths predicts every response's token count
        model = S.schedule(lengths, f.scheduler.rewards, CFG.num_prompts, order=rc.order,
                           granularity=rc.chunk, lag=rc.lag)
        np.testing.assert_array_equal(model.scheduler.tokens, r.mask.sum(-1))
        np.testing.assert_array_equal(model.batch, r.batch)
        c, cf = r.counts, f.counts
        assert c["tokens_generated"] == int(r.mask.sum()) <= cf["tokens_generated"]
        assert c["tokens_used"] == cf["tokens_used"]
        # generated tokens up to the stop are the finish-everything run's
        np.testing.assert_array_equal(r.tokens[r.mask], f.tokens[r.mask])
        if rc.order == "slot":
            info = S.informative(f.scheduler.rewards)
            assert r.batch.tolist() == np.flatnonzero(info)[:CFG.num_prompts].tolist()


def test_train_step_and_short_batches(trainer):
    d = E.Driver(E.RollConfig(CFG, over_provision=1.5), trainer=trainer)
    state = trainer.init_state(2)
    state, m, rounds = d.train_step(jax.random.key(0), state, 0, compare=True)
    for name in ("loss", "grad_norm", "pass1", "tokens_generated", "tokens_aborted"):
        assert np.all(np.isfinite(m[name])), name
    assert np.all(m["tokens_generated"] == m["tokens_used"] + m["tokens_aborted"]
                  + m["tokens_filtered"] + m["tokens_surplus"])
    # a short batch is padded with its first slot (or slot 0) and masked out
    r = rounds["roll"][0]
    short = r._replace(batch=r.batch[:1])
    empty = r._replace(batch=r.batch[:0])
    _, rewards, gmask, _ = d.batch_arrays([short, empty])
    assert gmask[0].sum() == CFG.num_generations and gmask[1].sum() == 0
    assert np.all(np.isfinite(rewards))


def test_config_errors():
    with pytest.raises(ValueError, match="over_provision"):
        E.RollConfig(CFG, over_provision=0.5)
    with pytest.raises(ValueError, match="order"):
        E.RollConfig(CFG, order="random")
    with pytest.raises(ValueError, match="chunk"):
        E.RollConfig(CFG, chunk=0)
