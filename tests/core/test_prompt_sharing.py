"""Sharing each prompt's pass over its group of completions (``score(..., group=G)``,
``SequenceRLConfig.share_prompt_prefix``): the per-row pass's numbers up to float rounding,
its gradients, where the trainer uses it, and what it refuses."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_lab.models import transformer as T
from rlvr_lab.train import sequence
from small_model import RL

CFG = T.TransformerConfig(vocab_size=13, max_len=24, d_model=32, n_layers=2, n_heads=4)
score = jax.jit(T.score, static_argnames=("with_entropy", "group"))   # eager is slow


@pytest.fixture(scope="module")
def policy():
    return T.init(jax.random.key(0), CFG)


def _batch(seed: int, b: int, g: int, p: int, n: int):
    """``b`` left-padded prompts (lengths 1..p) repeated ``g`` times, rows ``b*g + g'``, and
    random completions (PAD and EOS included: scoring does not care)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, p + 1, size=b)
    valid = np.arange(p)[None, :] >= (p - lengths)[:, None]
    prompts = np.where(valid, rng.integers(1, CFG.vocab_size, size=(b, p)), T.PAD_ID)
    completions = rng.integers(0, CFG.vocab_size, size=(b * g, n))
    return (jnp.asarray(np.repeat(prompts, g, 0), jnp.int32), jnp.asarray(np.repeat(valid, g, 0)),
            jnp.asarray(completions, jnp.int32))


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**16), b=st.integers(1, 3), g=st.integers(1, 4),
       p=st.integers(1, 8), n=st.integers(1, 8))
def test_grouped_scores_equal_the_per_row_pass(policy, seed, b, g, p, n):
    prompts, valid, comp = _batch(seed, b, g, p, n)
    plain = score(policy, prompts, valid, comp, with_entropy=True)
    shared = score(policy, prompts, valid, comp, with_entropy=True, group=g)
    for a, s in zip(plain, shared):
        assert s.shape == a.shape and np.all(np.isfinite(s))
        np.testing.assert_allclose(s, a, rtol=1e-5, atol=2e-6)


def test_grouped_gradients_equal_the_per_row_pass(policy):
    """The prompt's activations get the gradient of all of its group's rows."""
    prompts, valid, comp = _batch(7, 3, 4, 6, 7)
    weights = jnp.asarray(np.random.default_rng(1).normal(size=comp.shape), jnp.float32)

    def loss(params, group):
        return (T.score(T.Policy(CFG, params), prompts, valid, comp, group=group)
                * weights).sum()

    grad = jax.jit(jax.grad(loss), static_argnums=1)
    plain, shared = grad(policy.params, None), grad(policy.params, 4)
    for a, s in zip(jax.tree.leaves(plain), jax.tree.leaves(shared)):
        # float32 sums over other row counts: agreement relative to the leaf's scale
        np.testing.assert_allclose(s, a, rtol=0, atol=1e-5 * float(np.abs(a).max()))


def test_grouped_pass_reads_only_each_groups_first_prompt(policy):
    """The layout is the caller's promise: the other rows' prompts are not read."""
    prompts, valid, comp = _batch(3, 2, 3, 5, 4)
    scrambled = prompts.at[1].set(jnp.flip(prompts[1])).at[4].set(1)
    np.testing.assert_array_equal(T.score(policy, prompts, valid, comp, group=3),
                                  T.score(policy, scrambled, valid, comp, group=3))


@pytest.mark.parametrize("group, match", [(0, "group=0 must be a positive integer"),
                                          (True, "group=True must be a positive integer"),
                                          (4, "group=4 must divide the 6 rows")])
def test_bad_group_is_rejected(policy, group, match):
    prompts, valid, comp = _batch(0, 2, 3, 4, 3)
    with pytest.raises(ValueError, match=match):
        T.score(policy, prompts, valid, comp, group=group)


def test_the_update_shares_only_where_rows_keep_one_prompt_per_group():
    hook = dataclasses.replace(CFG, act_hook=lambda site, x: x)
    assert sequence.prompt_group(RL, CFG, 4) == 4
    assert sequence.prompt_group(RL, CFG, 1) is None             # nothing to share
    assert sequence.prompt_group(RL, hook, 4) is None            # a hook sees whole tensors
    for change in (dict(share_prompt_prefix=False), dict(num_minibatches=2),
                   dict(rollout="dynamic_sampling"), dict(data_parallel=True)):
        assert sequence.prompt_group(dataclasses.replace(RL, **change), CFG, 4) is None, change


def test_a_training_step_with_and_without_sharing_agrees():
    """One trainer step (same key) moves the parameters to the same place up to float
    rounding, and reports the same metrics."""
    results = []
    for share in (False, True):
        trainer = sequence.Trainer(dataclasses.replace(RL, share_prompt_prefix=share))
        state, metrics = trainer.train_step(jax.random.key(1), trainer.init_state(2), 0)
        results.append((state.policy.params, metrics))
    (p0, m0), (p1, m1) = results
    moved = [np.abs(b - a).max() for a, b in zip(jax.tree.leaves(trainer.base_policy.params),
                                                  jax.tree.leaves(p1))]
    assert max(moved) > 1e-5                                      # the step did move them
    # Adam's first step moves a parameter by about the learning rate times g / |g|, so where
    # a gradient is near zero float rounding can move its step a lot: almost every parameter
    # agrees to 1% of a step, and every one to half a step
    diff = np.concatenate([np.abs(np.asarray(b) - np.asarray(a)).ravel()
                           for a, b in zip(jax.tree.leaves(p0), jax.tree.leaves(p1))])
    assert np.mean(diff < 1e-2 * RL.learning_rate) > 0.999
    assert diff.max() < 0.5 * RL.learning_rate
    assert set(m0) == set(m1)
    for name in m0:
        np.testing.assert_allclose(m1[name], m0[name], rtol=1e-4, atol=1e-5, err_msg=name)
