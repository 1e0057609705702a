"""Blockwise fake quantisation against an independent NumPy float64 grid reference."""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rlvr_lab.papers.fp8 import quant
from rlvr_lab.models import transformer as T


# ----------------------------------------------------------------------------- reference
def _minifloat_grid(exp_bits, man_bits, bias, drop_top_mantissa):
    """All finite non-negative values of a sign/exponent/mantissa format, decoded from bit
    patterns (exponent 0 = subnormals), with an even-mantissa flag for ties-to-even."""
    vals, even = [], []
    for e, m in itertools.product(range(2 ** exp_bits), range(2 ** man_bits)):
        if drop_top_mantissa and e == 2 ** exp_bits - 1 and m == 2 ** man_bits - 1:
            continue  # E4M3fn: S.1111.111 is NaN, the only non-finite pattern
        frac = m / 2 ** man_bits
        vals.append(frac * 2.0 ** (1 - bias) if e == 0 else (1 + frac) * 2.0 ** (e - bias))
        even.append(m % 2 == 0)
    return np.array(vals), np.array(even)


def _grid(name):
    if name == "e4m3":
        pos, even = _minifloat_grid(4, 3, 7, True)
    elif name == "e2m1":
        pos, even = _minifloat_grid(2, 1, 1, False)
    else:  # symmetric integer grid
        qmax = {"int8": 127, "int4": 7}[name]
        pos = np.arange(qmax + 1, dtype=float)
        even = pos % 2 == 0
    return np.concatenate([-pos[1:], pos]), np.concatenate([even[1:], even])


def _round_to_grid(y, name):
    """Nearest grid value in float64, ties to the even mantissa (explicit enumeration)."""
    grid, even = _grid(name)
    d = np.abs(y.reshape(-1, 1) - grid[None, :])
    best = d == d.min(axis=1, keepdims=True)
    pick = np.where(best.sum(1) > 1, np.argmax(best & even[None, :], axis=1),
                    np.argmax(best, axis=1))
    return grid[pick].reshape(y.shape)


def reference_quantise(x, name, block):
    """Loop over (possibly partial) blocks of a 2-D array; float32 scale arithmetic as
    specified (scale = amax * float32(1 / fmax) over the finite entries, 1 when below the
    smallest normal float32), rounding in float64; +-inf saturate to +-fmax, NaN -> 0."""
    x = np.asarray(x, np.float32)
    fmax = np.float32(quant.get_format(name).fmax)
    b0, b1 = (d if b is None else b for b, d in zip(block, x.shape))
    out = np.zeros_like(x)
    for i in range(0, x.shape[0], b0):
        for j in range(0, x.shape[1], b1):
            blk = x[i:i + b0, j:j + b1]
            finite = np.isfinite(blk)
            amax = np.abs(blk[finite]).max() if finite.any() else np.float32(0)
            scale = np.float32(amax) * np.float32(1 / fmax)
            scale = scale if scale >= np.finfo(np.float32).tiny else np.float32(1)
            with np.errstate(invalid="ignore"):
                y = np.clip(blk / scale, -fmax, fmax).astype(np.float64)
            y[np.isnan(blk)] = 0.0
            out[i:i + b0, j:j + b1] = _round_to_grid(y, name).astype(np.float32) * scale
    return out


def test_reference_grids_are_the_known_formats():
    e4m3, _ = _grid("e4m3")
    assert e4m3.max() == 448 and len(e4m3) == 253  # 254 finite patterns, +-0 merged
    assert np.min(e4m3[e4m3 > 0]) == 2.0 ** -9
    e2m1, _ = _grid("e2m1")
    np.testing.assert_array_equal(e2m1[e2m1 >= 0], [0, 0.5, 1, 1.5, 2, 3, 4, 6])


# ----------------------------------------------------------------------------- against it
blocks_st = st.tuples(st.one_of(st.none(), st.integers(1, 6)),
                      st.one_of(st.none(), st.integers(1, 6)))
arrays_st = hnp.arrays(np.float32, hnp.array_shapes(min_dims=2, max_dims=2, max_side=11),
                       elements=st.floats(-1e3, 1e3, width=32))


@pytest.mark.parametrize("name", ["e4m3", "e2m1", "int8", "int4"])
@settings(max_examples=20, deadline=None)
@given(x=arrays_st, block=blocks_st)
def test_matches_reference_on_any_shape_and_block(name, x, block):
    got = np.asarray(quant.fake_quantise(jnp.asarray(x), name, block))
    np.testing.assert_array_equal(got, reference_quantise(x, name, block))


# (relative half-spacing of normal values, absolute half-spacing below the smallest normal in
# scaled units): m mantissa bits give 2^-(m+1); the subnormal (or integer) spacing s gives s/2
ERROR_BOUNDS = {"e4m3": (2.0 ** -4, 2.0 ** -10), "e2m1": (2.0 ** -2, 2.0 ** -2),
                "int8": (0.0, 0.5), "int4": (0.0, 0.5)}


def _block_scale(x, block, fmax):
    b0, b1 = (d if b is None else b for b, d in zip(block, x.shape))
    scale = np.zeros(x.shape)
    for i in range(0, x.shape[0], b0):
        for j in range(0, x.shape[1], b1):
            scale[i:i + b0, j:j + b1] = np.abs(x[i:i + b0, j:j + b1]).max() / fmax
    return scale


@pytest.mark.parametrize("name", sorted(ERROR_BOUNDS))
@settings(max_examples=20, deadline=None)
@given(x=arrays_st, block=blocks_st)
def test_round_trip_error_bound_relative_to_block_scale(name, x, block):
    # e4m3, 3 mantissa bits: |Q(x) - x| <= 2^-4 |x| for normal values; below the smallest
    # normal (2^-6 in scaled units) the subnormal spacing 2^-9 bounds it by 2^-10 * scale.
    # e2m1: 2^-2 |x| above 1 (scaled), spacing 0.5 below; integer grids: half a step.
    rel, absolute = ERROR_BOUNDS[name]
    got = np.asarray(quant.fake_quantise(jnp.asarray(x), name, block), np.float64)
    scale = _block_scale(x, block, quant.get_format(name).fmax)
    err = np.abs(got - x.astype(np.float64))
    # blocks with a subnormal scale (absmax < fmax * 2^-126) are documented to give zeros
    tiny = scale < np.finfo(np.float32).tiny
    np.testing.assert_array_equal(got[tiny], 0)
    scale[tiny] = 0.0
    bound = rel * np.abs(x) + absolute * scale + 1e-6 * np.abs(x)  # + float32 scale rounding
    bound[tiny] = np.abs(x[tiny])
    assert np.all(err <= bound), err.max()
    assert np.all(np.isfinite(got))


@pytest.mark.parametrize("name", ["e4m3", "e2m1", "int4"])
@settings(max_examples=20, deadline=None)
@given(x=arrays_st, block=blocks_st)
def test_idempotent_up_to_the_rounding_of_the_scale(name, x, block):
    # Q(x) is on the grid times the block's scale; quantising again recomputes the scale from
    # the new absmax (fmax * scale), which float32 rounds within a few ulp, so the second
    # pass returns the same grid points times that scale
    once = np.asarray(quant.fake_quantise(jnp.asarray(x), name, block))
    twice = np.asarray(quant.fake_quantise(jnp.asarray(once), name, block))
    np.testing.assert_allclose(twice, once, rtol=2.0 ** -20, atol=0)
    np.testing.assert_array_equal(np.sign(twice), np.sign(once))


nonfinite_st = hnp.arrays(np.float32, hnp.array_shapes(min_dims=2, max_dims=2, max_side=9),
                          elements=st.one_of(st.floats(-1e3, 1e3, width=32),
                                             st.sampled_from([np.inf, -np.inf, np.nan])))


@pytest.mark.parametrize("name", ["e4m3", "e2m1", "int4"])
@settings(max_examples=25, deadline=None)
@given(x=nonfinite_st, block=blocks_st)
def test_non_finite_inputs_give_finite_documented_outputs(name, x, block):
    got = np.asarray(quant.fake_quantise(jnp.asarray(x), name, block))
    assert np.all(np.isfinite(got))
    np.testing.assert_array_equal(got, reference_quantise(x, name, block))
    # NaN -> 0; finite entries as if the non-finite ones were zeros (they never set the scale)
    np.testing.assert_array_equal(got[np.isnan(x)], 0)
    finite = np.isfinite(x)
    zeroed = np.where(finite, x, np.float32(0))
    np.testing.assert_array_equal(got[finite],
                                  np.asarray(quant.fake_quantise(zeroed, name, block))[finite])
    # +-inf saturate to the block's largest representable magnitude (sign kept)
    fmax = quant.get_format(name).fmax
    scale = _block_scale(zeroed, block, fmax).astype(np.float32)
    scale[scale * fmax < np.finfo(np.float32).tiny * fmax] = 1
    inf = np.isinf(x)
    np.testing.assert_allclose(got[inf], np.sign(x[inf]) * fmax * scale[inf], rtol=1e-6)


def test_values_on_the_grid_are_exact():
    grid, _ = _grid("e4m3")
    rng = np.random.default_rng(0)
    x = rng.choice(grid, size=(8, 16)).astype(np.float32)
    x[:, 0] = 448.0  # each row block's absmax is 448 -> scale exactly 1
    np.testing.assert_array_equal(quant.fake_quantise(x, "e4m3", (1, 16)), x)
    # and after scaling by a power of two (scale = 2^-5 exactly)
    np.testing.assert_array_equal(quant.fake_quantise(x * 2.0 ** -5, "e4m3", (1, 16)),
                                  x * 2.0 ** -5)


@pytest.mark.parametrize("name", ["e4m3", "e2m1", "int4"])
def test_zero_blocks_give_zeros_without_nan(name):
    x = np.zeros((6, 8), np.float32)
    x[:3, :4] = np.linspace(-1, 1, 12).reshape(3, 4)
    out = np.asarray(quant.fake_quantise(x, name, (3, 4)))
    assert np.all(np.isfinite(out))
    np.testing.assert_array_equal(out[3:], 0)
    np.testing.assert_array_equal(out[:, 4:], 0)
    np.testing.assert_array_equal(quant.fake_quantise(np.zeros((2, 3)), name, (2, 2)), 0)
    tiny = np.full((2, 2), 1e-44, np.float32)  # subnormal absmax: documented zeros
    np.testing.assert_array_equal(quant.fake_quantise(tiny, name, (2, 2)), 0)
    edge = np.full((1, 2), np.finfo(np.float32).tiny, np.float32)  # smallest normal float32
    np.testing.assert_array_equal(quant.fake_quantise(edge, name, (1, 2)), 0)


# Magnitudes kept away from float32's subnormal range: a block scale absmax/448 below the
# smallest normal float flushes to zero on XLA:CPU, and the property is about normal numbers.
_normal_st = st.one_of(
    st.just(0.0), st.floats(2.0**-10, 128.0, width=32), st.floats(-128.0, -(2.0**-10), width=32)
)


@settings(max_examples=25, deadline=None)
@given(x=hnp.arrays(np.float32, (5, 7), elements=_normal_st),
       block=blocks_st, k=st.integers(-8, 8))
def test_scale_invariance_under_powers_of_two(x, block, k):
    a = np.asarray(quant.fake_quantise(x * np.float32(2.0 ** k), "e4m3", block))
    b = np.asarray(quant.fake_quantise(x, "e4m3", block)) * np.float32(2.0 ** k)
    np.testing.assert_array_equal(a, b)


def test_blocks_that_do_not_divide_are_partial_blocks():
    x = np.asarray(jax.random.normal(jax.random.key(0), (5, 7)), np.float32) * 10
    got = np.asarray(quant.fake_quantise(x, "int4", (2, 3)))
    np.testing.assert_array_equal(got, reference_quantise(x, "int4", (2, 3)))
    # the last (partial) block is quantised exactly as on its own
    np.testing.assert_array_equal(got[4:, 6:], quant.fake_quantise(x[4:, 6:], "int4", (2, 3)))
    # a block longer than its axis is the whole axis
    np.testing.assert_array_equal(quant.fake_quantise(x, "int4", (64, 64)),
                                  quant.fake_quantise(x, "int4", (None, None)))


def test_leading_axes_and_dtype():
    x = jax.random.normal(jax.random.key(1), (3, 4, 10)).astype(jnp.bfloat16)
    out = quant.fake_quantise(x, "e4m3", (1, 4))
    assert out.shape == x.shape and out.dtype == jnp.bfloat16
    for i in range(3):  # leading axes: blocks of one
        np.testing.assert_array_equal(out[i], quant.fake_quantise(x[i], "e4m3", (1, 4)))
    np.testing.assert_array_equal(quant.fake_quantise(x, "none", (1, 4)), x)


def test_deterministic_and_jit_equals_eager():
    x = jax.random.normal(jax.random.key(2), (33, 70))
    a = quant.fake_quantise(x, "e2m1", (16, 16))
    b = jax.jit(quant.fake_quantise, static_argnums=(1, 2))(x, "e2m1", (16, 16))
    np.testing.assert_array_equal(a, quant.fake_quantise(x, "e2m1", (16, 16)))
    np.testing.assert_array_equal(a, b)


def test_coarser_formats_have_larger_error():
    x = jax.random.normal(jax.random.key(3), (64, 64))
    err = {f: float(jnp.abs(quant.fake_quantise(x, f, (32, 32)) - x).mean())
           for f in ("int8", "e4m3", "e2m1")}
    assert 0 < err["int8"] < err["e4m3"] < err["e2m1"], err


# ----------------------------------------------------------------------------- config
@pytest.mark.parametrize("kwargs, match", [
    (dict(format="fp9"), "valid: e2m1, e4m3"),
    (dict(act_format="bf16"), "valid"),
    (dict(weight_block=(0, 4)), "weight_block"),
    (dict(weight_block=1.5), "weight_block"),
    (dict(weight_block=True), "weight_block"),
    (dict(weight_block=(4, 4, 4)), "two axes"),
    (dict(act_block=(1, -2)), "act_block"),
    (dict(quantise_kv="yes"), "quantise_kv"),
])
def test_bad_config_raises(kwargs, match):
    with pytest.raises(ValueError, match=match):
        quant.QuantConfig(**kwargs)


def test_bad_block_and_format_in_fake_quantise():
    with pytest.raises(ValueError, match="more axes"):
        quant.fake_quantise(jnp.ones(4), "e4m3", (2, 2))
    with pytest.raises(ValueError, match="unknown quantisation format 'fp7'"):
        quant.fake_quantise(jnp.ones(4), "fp7", 2)


def test_config_normalises_block_shorthands():
    cfg = quant.QuantConfig(weight_block=64, act_block=32)
    assert cfg.weight_block == (64, 64) and cfg.act_block == (1, 32)
    assert quant.QuantConfig(weight_block=None).weight_block == (None, None)
    assert cfg == quant.QuantConfig(weight_block=(64, 64), act_block=(1, 32))  # hashable key
    assert not quant.QuantConfig("none").hooked
    assert quant.QuantConfig(quantise_activations=False).act_quant() is None


# ----------------------------------------------------------------------------- the policy
CFG = T.TransformerConfig(vocab_size=13, max_len=24, d_model=32, n_layers=2, n_heads=4)


def test_only_linear_kernels_are_quantised():
    policy = T.init(jax.random.key(0), CFG)
    qp = quant.quantise_policy(policy, quant.QuantConfig("e2m1", weight_block=16))
    changed = {}
    for (path, a), (_, b) in zip(jax.tree_util.tree_leaves_with_path(policy.params),
                                 jax.tree_util.tree_leaves_with_path(qp.params)):
        changed[jax.tree_util.keystr(path)] = not np.array_equal(a, b)
    kernels = {k for k in changed if "'kernel'" in k}
    assert len(kernels) == 4 * CFG.n_layers and all(changed[k] for k in kernels)
    assert not any(v for k, v in changed.items() if k not in kernels)  # embeddings, norms, bias
    assert qp.config.act_hook == quant.ActQuant("e2m1", (1, 128), True, False)
    assert "act_hook" not in repr(qp.config)  # checkpoint structure strings are unchanged


def test_hook_sites_and_kv_quantisation():
    policy = T.init(jax.random.key(0), CFG)
    prompts = jnp.array([[0, 0, 1, 5, 6], [1, 4, 5, 6, 7]])
    seen = []

    class Spy:
        def __call__(self, site, x):
            seen.append(site)
            return x

        def __hash__(self):
            return 0

    spy = T.Policy(T.TransformerConfig(**{**CFG.__dict__, "act_hook": Spy()}), policy.params)
    np.testing.assert_array_equal(T.score(spy, prompts, prompts != 0, prompts),
                                  T.score(policy, prompts, prompts != 0, prompts))
    assert sorted(set(seen)) == sorted(quant.ACT_SITES + quant.KV_SITES)
    # KV-cache quantisation changes the log-probs; cached sampling (prefill + decode writes)
    # and full-pass scoring see the same quantised keys/values
    kv = quant.quantise_policy(policy, quant.QuantConfig(quantise_activations=False,
                                                         quantise_kv=True))
    out = T.sample(jax.random.key(1), kv, prompts, max_new_tokens=6, eos_id=-1)
    np.testing.assert_allclose(out.logp, T.score(kv, prompts, prompts != 0, out.tokens),
                               atol=1e-5)
    w_only = quant.quantise_policy(policy, quant.QuantConfig(quantise_activations=False))
    assert not np.allclose(T.score(w_only, prompts, prompts != 0, out.tokens), out.logp,
                           atol=1e-7)


# ----------------------------------------------------------------------------- outliers
OUT_CFG = T.TransformerConfig(vocab_size=13, max_len=24, d_model=16, n_layers=2, n_heads=2)


def _leaves(policy):
    return {jax.tree_util.keystr(p): np.asarray(v)
            for p, v in jax.tree_util.tree_leaves_with_path(policy.params)}


@pytest.mark.parametrize("factor", [2.0 ** 8, 2.0 ** -8])
def test_injected_outliers_keep_the_float32_function_exactly(factor):
    policy = T.init(jax.random.key(0), OUT_CFG)
    channels = jnp.array([3, 11])
    out = quant.inject_outliers(policy, channels, factor)
    tokens = jax.random.randint(jax.random.key(1), (4, 10), 1, OUT_CFG.vocab_size)
    valid = jnp.ones(tokens.shape, bool)
    # powers of two: every product is exact, so the logits are bit-identical
    np.testing.assert_array_equal(T.completion_logits(out, tokens[:, :4], valid[:, :4],
                                                      tokens[:, 4:]),
                                  T.completion_logits(policy, tokens[:, :4], valid[:, :4],
                                                      tokens[:, 4:]))
    a, b = _leaves(policy), _leaves(out)
    gain = np.ones(OUT_CFG.d_model)
    gain[[3, 11]] = factor
    for k in a:
        if ("'ln1'" in k or "'ln2'" in k):
            np.testing.assert_array_equal(b[k], a[k] * gain)
        elif ("'qkv'" in k or "'up'" in k) and "kernel" in k:
            np.testing.assert_array_equal(b[k], a[k] / gain[:, None])
        else:
            np.testing.assert_array_equal(b[k], a[k])


def test_weight_outliers_make_finer_blocks_more_accurate():
    policy = T.init(jax.random.key(0), CFG)
    kernel = lambda p: _leaves(p)["['blocks'][0]['qkv']['kernel'].value"]  # noqa: E731
    plain = kernel(policy)
    w = kernel(quant.inject_outliers(policy, jnp.array([5]), 2.0 ** -8))  # row 5 x 256
    normal = np.arange(plain.shape[0]) != 5
    err = {}
    for name, x in (("plain", plain), ("outliers", w)):
        for b in (8, None):
            q = np.asarray(quant.fake_quantise(x, "e2m1", (b, b)))
            err[name, b] = np.abs(q - x)[normal].mean() / np.abs(x[normal]).mean()
    # the outlier row sets the scale of every block it is in: per-tensor scaling rounds the
    # other rows of the tensor to (almost) zero, 8x8 blocks only the 7 rows beside it
    assert err["outliers", None] > 0.9
    assert err["outliers", 8] < 0.5 * err["outliers", None]
    assert err["plain", None] < 0.3 and err["plain", 8] < 0.3


@pytest.mark.parametrize("factor", [0.0, -2.0, float("inf"), float("nan"), True])
def test_bad_outlier_factor_raises(factor):
    with pytest.raises(ValueError, match="factor"):
        quant.inject_outliers(T.init(jax.random.key(0), OUT_CFG), jnp.array([1]), factor)
