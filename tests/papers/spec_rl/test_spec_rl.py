"""SPEC-RL speculative rollouts: acceptance rule vs a NumPy loop, reuse extremes, splicing,
token accounting, determinism, validation, and a two-epoch training sweep (TINY base)."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from small_model import RL, TINY

from rlvr_lab.models import transformer as T
from rlvr_lab.papers.spec_rl import speculative as spec_rl
from rlvr_lab.train import sft


@pytest.fixture(scope="module")
def drafts(base):
    """16 rows (8 prompts x 2) sampled from the base; cached log-probs = the base's scores."""
    enc = sft.encode(TINY, sft.problems(TINY, "train")[:8])
    prompts = jnp.repeat(jnp.asarray(enc.prompts), 2, axis=0)
    valid = jnp.repeat(jnp.asarray(enc.prompt_valid), 2, axis=0)
    out = T.sample(jax.random.key(0), base, prompts, valid, max_new_tokens=TINY.max_new_tokens)
    logp = T.score(base, prompts, valid, out.tokens)
    cached = spec_rl.CachedResponses(out.tokens, out.mask, jnp.where(out.mask, logp, 0.0),
                                     jnp.ones(prompts.shape[0], bool))
    return prompts, valid, cached


def perturbed(policy, scale=0.3, seed=1):
    leaves, tree = jax.tree.flatten(policy)
    keys = jax.random.split(jax.random.key(seed), len(leaves))
    return jax.tree.unflatten(tree, [x + scale * jnp.std(x) * jax.random.normal(k, x.shape)
                                     for x, k in zip(leaves, keys)])


# ----------------------------------------------------------------------------- acceptance
def numpy_cut(u, new_logp, old_logp, mask, lenience):
    """Plain loop: accept token t iff u < min(1, l * p_new / p_old); cut at first rejection."""
    cuts = []
    for b in range(u.shape[0]):
        cut = int(mask[b].sum())
        for t in range(cut):
            ratio = np.exp(np.float64(new_logp[b, t]) - np.float64(old_logp[b, t]))
            prob = 1.0 if math.isinf(lenience) else min(1.0, lenience * ratio)
            if not u[b, t] < prob:
                cut = t
                break
        cuts.append(cut)
    return np.array(cuts)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1),
       lenience=st.sampled_from([1e-9, 0.3, 1.0, math.exp(0.5), math.exp(2.0), math.inf]))
def test_first_rejection_matches_numpy_loop(seed, lenience):
    rng = np.random.default_rng(seed)
    b, n = 7, 9
    lengths = rng.integers(0, n + 1, b)
    lengths[0], lengths[1] = 0, n  # an empty and a budget-filling response
    mask = np.arange(n)[None] < lengths[:, None]
    old = np.log(rng.uniform(0.05, 1.0, (b, n))).astype(np.float32)
    new = np.log(rng.uniform(0.05, 1.0, (b, n))).astype(np.float32)
    u = rng.uniform(0, 1, (b, n)).astype(np.float32)
    u[2, 0] = 0.0  # the boundary draw: accepted for any l > 0
    got = spec_rl.first_rejection(jnp.asarray(u), jnp.asarray(new), jnp.asarray(old),
                                  jnp.asarray(mask), math.log(lenience))
    np.testing.assert_array_equal(np.asarray(got), numpy_cut(u, new, old, mask, lenience))


def test_first_rejection_hand_made():
    # ratios: 1, 0.5, 2, 0.25; uniforms pick the outcome; vanilla (log l = -inf) rejects token 0
    new = jnp.log(jnp.array([[0.4, 0.2, 0.8, 0.1]]))
    old = jnp.log(jnp.array([[0.4, 0.4, 0.4, 0.4]]))
    mask = jnp.ones((1, 4), bool)
    u = jnp.array([[0.99, 0.49, 0.9, 0.3]])
    cut = lambda log_l: int(spec_rl.first_rejection(u, new, old, mask, log_l)[0])  # noqa: E731
    assert cut(0.0) == 3                # 0.3 >= 0.25 rejects the last token
    assert cut(math.log(2.0)) == 4      # l * 0.25 = 0.5 > 0.3
    assert cut(math.log(0.9)) == 0      # 0.99 >= 0.9
    assert cut(-math.inf) == 0 and cut(math.inf) == 4


def test_random_cut_matches_floor():
    lengths = np.array([0, 1, 5, 9, 9])
    mask = np.arange(9)[None] < lengths[:, None]
    u = np.array([0.7, 0.99, 0.5, 0.0, 0.999999], np.float32)
    got = np.asarray(spec_rl.random_cut_positions(jnp.asarray(u), jnp.asarray(mask)))
    np.testing.assert_array_equal(got, [0, 0, 2, 0, 8])  # floor(u * length), < length


# ----------------------------------------------------------------------------- rollouts
def test_infinite_lenience_reuses_everything(base, drafts):
    prompts, valid, cached = drafts
    out = spec_rl.speculative_rollout(jax.random.key(1), perturbed(base), prompts, valid, cached,
                                      math.inf)
    assert int(out.generated.sum()) == 0
    np.testing.assert_array_equal(out.reused, cached.mask.sum(-1))
    np.testing.assert_array_equal(out.batch.tokens, cached.tokens)
    np.testing.assert_array_equal(out.batch.stale, cached.mask)
    np.testing.assert_allclose(out.batch.behav_logp, cached.logp)
    assert bool(out.full.all())


def test_vanishing_lenience_reuses_nothing(base, drafts):
    prompts, valid, cached = drafts
    out = spec_rl.speculative_rollout(jax.random.key(1), base, prompts, valid, cached, 1e-9)
    assert int(out.reused.sum()) == 0 and not bool(out.batch.stale.any())
    np.testing.assert_array_equal(out.generated, out.batch.mask.sum(-1))
    np.testing.assert_array_equal(out.cut, 0)


def test_lenience_one_accepts_everything_when_policy_unchanged(base, drafts):
    prompts, valid, cached = drafts
    out = spec_rl.speculative_rollout(jax.random.key(2), base, prompts, valid, cached, 1.0)
    assert bool(out.full.all()) and int(out.generated.sum()) == 0


def test_partial_reuse_splices_and_counts(base, drafts):
    prompts, valid, cached = drafts
    policy = perturbed(base)
    out = spec_rl.speculative_rollout(jax.random.key(3), policy, prompts, valid, cached, 1.0)
    cut, full = np.asarray(out.cut), np.asarray(out.full)
    assert 0 < (~full).sum() < len(full), "the test needs both reused and regenerated rows"
    mask, tokens = np.asarray(out.batch.mask), np.asarray(out.batch.tokens)
    lengths = mask.sum(-1)
    np.testing.assert_array_equal(np.asarray(out.generated) + np.asarray(out.reused), lengths)
    n = tokens.shape[1]
    kept = ((np.arange(n)[None] < cut[:, None]) | full[:, None]) & mask
    np.testing.assert_array_equal(np.asarray(out.batch.stale), kept)
    np.testing.assert_array_equal(np.where(kept, tokens, 0),
                                  np.where(kept, np.asarray(cached.tokens), 0))
    np.testing.assert_allclose(np.where(kept, out.batch.behav_logp, 0),
                               np.where(kept, cached.logp, 0))
    # mask: a prefix of True ending at EOS (or the budget)
    for row, length in zip(tokens, lengths):
        assert (length == n) or row[length - 1] == T.EOS_ID
    # the new tokens really come from the current policy in the right positions: the sampler's
    # log-probs, and the cache's log-probs everywhere, equal an independent full forward pass
    ref = np.asarray(T.score(policy, prompts, valid, out.batch.tokens))
    np.testing.assert_allclose(np.where(mask & ~kept, out.batch.behav_logp, 0),
                               np.where(mask & ~kept, ref, 0), atol=2e-4)
    np.testing.assert_allclose(np.where(mask, out.cache_logp, 0), np.where(mask, ref, 0),
                               atol=2e-4)


def test_random_cut_regenerates_every_row(base, drafts):
    prompts, valid, cached = drafts
    out = spec_rl.speculative_rollout(jax.random.key(7), base, prompts, valid, cached,
                                      "random_cut")
    lengths = np.asarray(cached.mask.sum(-1))
    assert not bool(out.full.any()) and (np.asarray(out.generated) >= 1).all()
    assert ((np.asarray(out.cut) >= 0) & (np.asarray(out.cut) < lengths)).all()
    np.testing.assert_array_equal(out.reused, out.cut)


def test_unfilled_rows_are_generated_in_full(base, drafts):
    prompts, valid, cached = drafts
    empty = cached._replace(filled=jnp.zeros_like(cached.filled))
    out = spec_rl.speculative_rollout(jax.random.key(4), base, prompts, valid, empty, math.inf)
    assert int(out.reused.sum()) == 0
    np.testing.assert_array_equal(out.generated, out.batch.mask.sum(-1))


def test_same_key_same_rollout(base, drafts):
    prompts, valid, cached = drafts
    policy = perturbed(base)
    a, b, c = (spec_rl.speculative_rollout(jax.random.key(k), policy, prompts, valid, cached,
                                           math.exp(0.5)) for k in (5, 5, 6))
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a.batch.tokens, c.batch.tokens)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), "foo", "Vanilla", True, None])
def test_bad_lenience_raises(bad):
    with pytest.raises(ValueError, match="lenience="):
        spec_rl.check_lenience(bad)
    with pytest.raises(ValueError, match="lenience="):
        spec_rl.SpecRLConfig(rl=RL, lenience=bad, num_train_prompts=8)


def test_config_validation():
    with pytest.raises(ValueError, match="num_train_prompts=6"):
        spec_rl.SpecRLConfig(rl=RL, num_train_prompts=6)
    with pytest.raises(ValueError, match="epochs=0"):
        spec_rl.SpecRLConfig(rl=RL, num_train_prompts=8, epochs=0)
    assert spec_rl.rows_bucket(0, 128) == 0 and spec_rl.rows_bucket(3, 128) == 32
    assert spec_rl.rows_bucket(32, 128) == 32 and spec_rl.rows_bucket(33, 128) == 128
    assert spec_rl.rows_bucket(1, 10) == 3 and spec_rl.rows_bucket(4, 10) == 10


# ----------------------------------------------------------------------------- training
def test_sweep_two_epochs(base):
    config = spec_rl.SpecRLConfig(rl=RL, num_train_prompts=8, epochs=2)
    df = spec_rl.run_sweep(config, jax.random.key(0), ("vanilla", math.inf), num_seeds=2)
    assert len(df) == 2 * 2 * config.steps
    np.testing.assert_array_equal(df.generated + df.reused, df.response_tokens)
    assert (df[df.lenience == "vanilla"].reused == 0).all()
    assert (df[(df.lenience == "inf") & (df.epoch == 1)].generated == 0).all()
    # epoch 1 has no cache: identical across leniences (same keys, same base)
    first = df[df.epoch == 0]
    np.testing.assert_array_equal(first[first.lenience == "inf"].generated.values,
                                  first[first.lenience == "vanilla"].generated.values)
    summary = spec_rl.summarize(df)
    assert summary.heldout_pass1.between(0, 1).all()
    assert np.isfinite(summary.token_reduction).all()
    inf = summary[summary.lenience == "inf"]
    np.testing.assert_allclose(inf.revisit_token_reduction, inf.generated_revisits.clip(lower=1)
                               .rdiv(summary[summary.lenience == "vanilla"]
                                     .generated_revisits.values))
    import matplotlib.pyplot as plt
    plt.close(spec_rl.figure(df))
