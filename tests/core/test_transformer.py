"""Tiny transformer: KV-cache sampling, scoring, padding, top-p, EOS handling."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_lab.models import transformer as T

CFG = T.TransformerConfig(vocab_size=13, max_len=24, d_model=32, n_layers=2, n_heads=4)


@pytest.fixture(scope="module")
def policy():
    return T.init(jax.random.key(0), CFG)


def _prompts():
    # left-padded prompts of different lengths (PAD = 0)
    return jnp.array([[0, 0, 0, 1, 5, 6], [1, 4, 5, 6, 7, 8], [0, 1, 9, 9, 3, 3]], jnp.int32)


def test_config_validation():
    with pytest.raises(ValueError, match="divisible"):
        T.TransformerConfig(vocab_size=10, d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="n_layers"):
        T.TransformerConfig(vocab_size=10, n_layers=0)


def test_cached_and_uncached_sampling_agree(policy):
    key = jax.random.key(3)
    a = T.sample(key, policy, _prompts(), max_new_tokens=12, use_cache=True, eos_id=-1)
    b = T.sample(key, policy, _prompts(), max_new_tokens=12, use_cache=False, eos_id=-1)
    np.testing.assert_array_equal(a.tokens, b.tokens)
    np.testing.assert_allclose(a.logp, b.logp, atol=1e-5)
    np.testing.assert_allclose(a.entropy, b.entropy, atol=1e-5)


def test_sampling_compiled_with_decode_options_matches_default_compile(policy):
    """``sample`` compiles with utils.DECODE_COMPILE (not the toolkit's FAST_COMPILE) at top
    level and with the caller's options inside another jit: same tokens, log-probs within
    float rounding of a plain ``jax.jit`` of the same function."""
    from rlvr_lab import utils

    key = jax.random.key(5)
    kw = dict(max_new_tokens=12, eos_id=-1)
    top = T.sample(key, policy, _prompts(), **kw)
    nested = jax.jit(lambda k, p: T.sample(k, p, _prompts(), **kw))(key, policy)
    plain = jax.jit(T.sample.__wrapped__, static_argnames=("max_new_tokens", "eos_id"))(
        key, policy, _prompts(), **kw)
    for got in (top, nested):
        np.testing.assert_array_equal(got.tokens, plain.tokens)
        np.testing.assert_allclose(got.logp, plain.logp, atol=1e-5)
    if jax.default_backend() == "cpu":
        # on a jaxlib without the option it is dropped, and sampling still runs
        assert set(utils.supported_cpu_options(utils.DECODE_COMPILE)) <= set(utils.DECODE_COMPILE)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_score_matches_sampling_logp(policy, temperature):
    out = T.sample(jax.random.key(1), policy, _prompts(), max_new_tokens=10,
                   temperature=temperature, eos_id=7)
    logp, ent = T.score(policy, _prompts(), None, out.tokens, temperature=temperature,
                        with_entropy=True)
    m = np.asarray(out.mask)
    np.testing.assert_allclose(np.asarray(logp)[m], np.asarray(out.logp)[m], atol=1e-5)
    np.testing.assert_allclose(np.asarray(ent)[m], np.asarray(out.entropy)[m], atol=1e-5)
    # independent reference: log-softmax of the full-pass logits at each generated position
    p = _prompts().shape[1]
    full = jnp.concatenate([_prompts(), out.tokens], 1)
    valid = full != 0
    valid = valid.at[:, p:].set(True)
    logits = T.module(policy)(full, T.positions_for(valid), valid)
    ref = np.zeros(m.shape)
    lg = np.asarray(logits, np.float64) / temperature
    for b in range(m.shape[0]):
        for t in range(m.shape[1]):
            row = lg[b, p + t - 1]
            top = row.max()
            ref[b, t] = row[int(out.tokens[b, t])] - top - np.log(np.exp(row - top).sum())
    np.testing.assert_allclose(np.asarray(out.logp)[m], ref[m], atol=1e-4)


def test_eos_masks_the_tail(policy):
    # make EOS likely by choosing the most likely first token as "EOS"
    first = T.sample(jax.random.key(2), policy, _prompts(), max_new_tokens=1, top_p=1e-6)
    eos = int(first.tokens[0, 0])
    out = T.sample(jax.random.key(2), policy, _prompts(), max_new_tokens=8, eos_id=eos,
                   top_p=1e-6)
    tokens, mask = np.asarray(out.tokens), np.asarray(out.mask)
    assert mask[0, 0] and not mask[0, 1:].any()  # stopped right after the EOS
    assert (tokens[0, 1:] == T.PAD_ID).all() and (np.asarray(out.logp)[0, 1:] == 0).all()
    for row_t, row_m in zip(tokens, mask):  # the mask is a prefix ending at the first EOS
        n = row_m.sum()
        assert row_m[:n].all() and not row_m[n:].any()
        hits = np.flatnonzero(row_t[:n] == eos)
        assert len(hits) == 0 and n == 8 or hits[0] == n - 1


def test_top_p_tiny_is_greedy(policy):
    out = T.sample(jax.random.key(5), policy, _prompts(), max_new_tokens=6, top_p=1e-6, eos_id=-1)
    # greedy: each token is the argmax of the full-pass logits given its prefix
    full = jnp.concatenate([_prompts(), out.tokens], 1)
    valid = (full != 0).at[:, 6:].set(True)
    logits = T.module(policy)(full, T.positions_for(valid), valid)
    np.testing.assert_array_equal(np.asarray(out.tokens), np.asarray(logits[:, 5:11].argmax(-1)))


def test_top_p_keeps_only_the_nucleus(policy):
    # with top_p = 0.5 no drawn token may lie outside the smallest set with mass >= 0.5
    prompts = jnp.tile(_prompts(), (50, 1))
    out = T.sample(jax.random.key(6), policy, prompts, max_new_tokens=1, top_p=0.5)
    logits = np.asarray(T.module(policy)(prompts[:3], T.positions_for(prompts[:3] != 0),
                                         prompts[:3] != 0)[:, -1], np.float64)
    for b in range(3):
        probs = np.exp(logits[b] - logits[b].max())
        probs /= probs.sum()
        order = np.argsort(-probs)
        before = np.cumsum(probs[order]) - probs[order]
        nucleus = set(order[before < 0.5].tolist())
        drawn = set(np.asarray(out.tokens)[b::3, 0].tolist())
        assert drawn <= nucleus


def test_left_padding_does_not_change_scores(policy):
    prompt = jnp.array([[1, 4, 5, 6]])
    padded = jnp.array([[0, 0, 0, 1, 4, 5, 6]])
    comp = jnp.array([[7, 8, 9, 3]])
    np.testing.assert_allclose(T.score(policy, prompt, None, comp),
                               T.score(policy, padded, None, comp), atol=1e-5)


def test_prompt_too_long_is_rejected(policy):
    with pytest.raises(ValueError, match="max_len"):
        T.sample(jax.random.key(0), policy, _prompts(), max_new_tokens=30)


@pytest.mark.parametrize("rows", [(0, 2), (1, 3), (0, 3)])
def test_sampling_a_row_range_gives_those_rows_of_the_whole_batch(policy, rows):
    """``rows=(lo, hi)`` draws the whole batch's noise and computes only its rows: the same
    tokens, log-probs and entropies up to float rounding (also for forced prefixes); the
    matrix kernels may round a row differently in calls of different row counts."""
    key = jax.random.key(4)
    prefix = jnp.array([[7, 8, 0], [0, 0, 0], [9, 0, 0]], jnp.int32)
    prefix_len = jnp.array([2, 0, 1])
    for extra in ({}, {"prefix": prefix, "prefix_len": prefix_len}):
        whole = T.sample(key, policy, _prompts(), max_new_tokens=10, **extra)
        part = T.sample(key, policy, _prompts(), max_new_tokens=10, rows=rows, **extra)
        for name in whole._fields:
            got = np.asarray(getattr(part, name))
            want = np.asarray(getattr(whole, name))[rows[0]:rows[1]]
            if got.dtype.kind == "f":
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=name)
            else:
                np.testing.assert_array_equal(got, want, err_msg=name)


@pytest.mark.parametrize("rows", [(0, 0), (2, 1), (-1, 2), (0, 4)])
def test_bad_row_range_is_rejected(policy, rows):
    with pytest.raises(ValueError, match=r"rows=.* is not allowed; it must be \(lo, hi\) with "
                                         r"0 <= lo < hi <= 3"):
        T.sample(jax.random.key(0), policy, _prompts(), max_new_tokens=4, rows=rows)


def test_linear_layers_differentiate_like_a_plain_matmul():
    """The linear layers' matmul (its weight gradient from a materialised ``x^T``) has the
    plain matmul's value, forward-mode and reverse-mode derivatives (float64 reference)."""
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(7, 5)), jnp.float32)
    w = jnp.asarray(rng.normal(size=(5, 3)), jnp.float32)
    g = rng.normal(size=(7, 3))
    xd, wd = np.asarray(x, np.float64), np.asarray(w, np.float64)
    y, vjp = jax.vjp(T._rows_matmul, x, w)
    np.testing.assert_allclose(y, xd @ wd, rtol=1e-5)
    dx, dw = vjp(jnp.asarray(g, jnp.float32))
    np.testing.assert_allclose(dx, g @ wd.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dw, xd.T @ g, rtol=1e-5, atol=1e-5)
    tx, tw = rng.normal(size=(7, 5)), rng.normal(size=(5, 3))
    _, tangent = jax.jvp(T._rows_matmul, (x, w), (jnp.asarray(tx, jnp.float32),
                                                  jnp.asarray(tw, jnp.float32)))
    np.testing.assert_allclose(tangent, tx @ wd + xd @ tw, rtol=1e-5, atol=1e-5)
    batched = jax.vmap(jax.grad(lambda x, w: T._rows_matmul(x, w).sum(), argnums=1))
    np.testing.assert_allclose(batched(jnp.stack([x, 2 * x]), jnp.stack([w, w]))[1],
                               2 * xd.T @ np.ones((7, 3)), rtol=1e-5)


def test_policy_gradient_matches_the_plain_matmul_model(policy, monkeypatch):
    """Swapping the linear layers' matmul for ``lax.dot_general`` changes the parameter
    gradient of a score only by float rounding."""
    prompts, comp = _prompts(), jnp.array([[3, 4, 5], [6, 7, 8], [9, 3, 4]], jnp.int32)
    loss = lambda p: T.score(p, prompts, None, comp).sum()  # noqa: E731
    fast = jax.grad(loss)(policy)
    assert "optimization_barrier" in str(jax.make_jaxpr(jax.grad(loss))(policy))
    monkeypatch.setattr(T, "_rows_matmul", lambda x, w: jax.lax.dot_general(
        x, w, (((1,), (0,)), ((), ()))))
    plain = jax.jit(jax.grad(loss))(policy)
    for a, b in zip(jax.tree.leaves(fast), jax.tree.leaves(plain)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_bfloat16_linear_layers_sample_and_score_close_to_float32(policy):
    """``dtype="bfloat16"``: same parameters, finite log-probs within bfloat16 rounding of the
    float32 model's, float32 outputs and gradients; float32 configs keep their repr."""
    import dataclasses
    bf = T.Policy(dataclasses.replace(CFG, dtype="bfloat16"), policy.params)
    assert repr(bf.config) == repr(CFG)
    comp = jnp.array([[3, 4, 5], [6, 7, 8], [9, 3, 4]], jnp.int32)
    lp32, lp16 = T.score(policy, _prompts(), None, comp), T.score(bf, _prompts(), None, comp)
    assert lp16.dtype == jnp.float32 and np.all(np.isfinite(lp16))
    np.testing.assert_allclose(lp16, lp32, atol=0.05)
    out = T.sample(jax.random.key(2), bf, _prompts(), max_new_tokens=6)
    assert out.logp.dtype == jnp.float32 and np.all(np.isfinite(out.logp))
    np.testing.assert_allclose(T.score(bf, _prompts(), None, out.tokens) * out.mask,
                               out.logp, atol=1e-2)
    grads = jax.grad(lambda p: T.score(T.Policy(bf.config, p), _prompts(), None, comp).sum())(
        bf.params)
    assert all(g.dtype == jnp.float32 and np.all(np.isfinite(g)) for g in jax.tree.leaves(grads))


def test_unknown_compute_dtype_is_rejected():
    with pytest.raises(ValueError, match="dtype='float16' is not allowed; use one of float32, "
                                         "bfloat16"):
        T.TransformerConfig(vocab_size=10, dtype="float16")


def test_bfloat16_matmul_and_its_gradients_match_a_float64_reference():
    """bfloat16 operands, float32 results: value and both gradients equal the float64 products
    of the bfloat16-rounded operands up to float32 accumulation; cotangents keep bfloat16."""
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.normal(size=(9, 6)), jnp.bfloat16)
    w = jnp.asarray(rng.normal(size=(6, 4)), jnp.bfloat16)
    g = jnp.asarray(rng.normal(size=(9, 4)), jnp.bfloat16)   # exactly representable in bf16
    xd, wd, gd = (np.asarray(a, np.float64) for a in (x, w, g))
    y, vjp = jax.vjp(T._rows_matmul_bf16, x, w)
    assert y.dtype == jnp.float32
    np.testing.assert_allclose(y, xd @ wd, rtol=1e-5, atol=1e-5)
    dx, dw = vjp(g.astype(jnp.float32))
    assert dx.dtype == dw.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(dx, np.float64), gd @ wd.T, rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(np.asarray(dw, np.float64), xd.T @ gd, rtol=1e-2, atol=1e-2)
