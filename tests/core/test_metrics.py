"""rlvr_lab.metrics against exact integer binomials (math.comb) and float64 loop references."""
import contextlib
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference as ref
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_lab import metrics
from rlvr_lab.utils import enable_x64

DTYPES = [jnp.float32, jnp.float64]


def _x64(dtype):
    return enable_x64() if dtype == jnp.float64 else contextlib.nullcontext()


@pytest.fixture(params=DTYPES, ids=["f32", "f64"])
def dtype(request):
    with _x64(request.param):
        yield request.param


# ----------------------------------------------------------------------------- pass@k
# value checks go through one jitted function (one compile per shape instead of one per
# eager op); the eager path is checked for its exact corner cases, errors and dtype
_pass_at_k_jit = jax.jit(metrics.pass_at_k)


def _grid(max_n):
    return np.array([(n, c, k) for n in range(1, max_n + 1) for c in range(n + 1)
                     for k in range(1, n + 1)]).T


def test_pass_at_k_exhaustive_small_grid_float64():
    """Every valid (n, c, k) with n <= 16, in one vectorised call, against exact rationals."""
    n, c, k = _grid(16)
    with enable_x64():
        out = np.asarray(metrics.pass_at_k(n, c, k))
    assert out.dtype == np.float64
    expected = np.array([ref.pass_at_k(*triple) for triple in zip(n, c, k)])
    np.testing.assert_allclose(out, expected, rtol=1e-13, atol=1e-15)
    # exact corner cases: c = 0 -> 0, n - c < k -> 1 (bit-exact, not just close)
    assert np.all(out[c == 0] == 0.0)
    assert np.all(out[n - c < k] == 1.0)
    assert np.all((out >= 0) & (out <= 1))
    # pass@1 is the accuracy c/n
    np.testing.assert_allclose(out[k == 1], (c / n)[k == 1], rtol=1e-14)
    # non-decreasing in c (fixed n, k) and in k (fixed n, c)
    table = {(a, b, d): v for a, b, d, v in zip(n, c, k, out)}
    for (nn, cc, kk), v in table.items():
        if cc < nn:
            assert table[nn, cc + 1, kk] >= v - 1e-15
        if kk < nn:
            assert table[nn, cc, kk + 1] >= v - 1e-15


LARGE = [  # (n, c, k) with n >= 1000: tiny, huge and middling binomials
    (1000, 1, 1), (1000, 1, 10), (1000, 3, 500), (1000, 500, 10), (1000, 999, 1),
    (1000, 0, 1000), (1000, 1000, 1), (1000, 995, 6), (1000, 995, 5), (1024, 1, 1024),
    (2000, 1000, 1000), (2048, 7, 100), (1500, 1499, 2), (4096, 3, 4000), (1200, 600, 599),
]


def test_pass_at_k_large_n_float64():
    n, c, k = np.array(LARGE).T
    with enable_x64():
        out = np.asarray(_pass_at_k_jit(n, c, k))
        scalars = [float(metrics.pass_at_k(*triple)) for triple in LARGE[:4]]
    expected = np.array([ref.pass_at_k(*triple) for triple in LARGE])
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(scalars, expected[:4], rtol=1e-12, atol=1e-14)
    assert out[0] == pytest.approx(1 / 1000, rel=1e-13)  # pass@1 = c/n


def test_pass_at_k_float32():
    n, c, k = _grid(10)
    out = _pass_at_k_jit(n, c, k)
    assert out.dtype == jnp.float32  # the default float dtype without x64
    expected = [ref.pass_at_k(*triple) for triple in zip(n, c, k)]
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    large = _pass_at_k_jit(*np.array(LARGE).T)
    np.testing.assert_allclose(large, [ref.pass_at_k(*t) for t in LARGE], rtol=1e-4, atol=1e-6)


def test_pass_at_k_broadcasting():
    n = 12
    c = np.arange(13)  # [13]
    k = np.arange(1, 13)[:, None]  # [12, 1]
    with enable_x64():
        out = np.asarray(_pass_at_k_jit(n, c, k))
    assert out.shape == (12, 13)
    for i, kk in enumerate(range(1, 13)):
        for cc in range(13):
            assert out[i, cc] == pytest.approx(ref.pass_at_k(n, cc, kk), rel=1e-13, abs=1e-15)
    # per-prompt counts with a shared n and k (the usual evaluation call)
    counts = np.array([0, 3, 8, 16])
    with enable_x64():
        np.testing.assert_allclose(_pass_at_k_jit(16, counts, 4),
                                   [ref.pass_at_k(16, cc, 4) for cc in counts], rtol=1e-13)


def test_pass_at_k_jit_and_vmap():
    n, c, k = _grid(9)
    with enable_x64():
        expected = np.array([ref.pass_at_k(*t) for t in zip(n, c, k)])
        jitted = jax.jit(metrics.pass_at_k)(n, c, k)
        np.testing.assert_allclose(jitted, expected, rtol=1e-13, atol=1e-15)
        mapped = jax.vmap(metrics.pass_at_k)(n, c, k)
        np.testing.assert_allclose(mapped, expected, rtol=1e-13, atol=1e-15)
        # vmap over c only, nested vmap over k, under jit
        table = jax.jit(jax.vmap(jax.vmap(metrics.pass_at_k, (None, 0, None)), (None, None, 0)))(
            20, jnp.arange(21), jnp.arange(1, 21))
        assert table.shape == (20, 21)
        for kk in [1, 7, 20]:
            for cc in [0, 1, 10, 19, 20]:
                assert float(table[kk - 1, cc]) == pytest.approx(ref.pass_at_k(20, cc, kk),
                                                                 rel=1e-13, abs=1e-15)
        # traced invalid input cannot raise: it gives NaN (documented)
        assert np.isnan(float(jax.jit(metrics.pass_at_k)(5, 6, 2)))


@pytest.mark.parametrize("n, c, k", [(5, 6, 2), (5, -1, 2), (5, 2, 0), (5, 2, 6), (0, 0, 1)])
def test_pass_at_k_invalid_raises_naming_values(n, c, k):
    with pytest.raises(ValueError) as info:
        metrics.pass_at_k(n, c, k)
    message = str(info.value)
    assert f"n={n}" in message and f"c={c}" in message and f"k={k}" in message
    assert "\n" not in message


def test_pass_at_k_invalid_entry_in_array_is_named():
    with pytest.raises(ValueError, match=r"n=10, c=11, k=3"):
        metrics.pass_at_k(10, np.array([0, 4, 11, 2]), 3)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3000).flatmap(lambda n: st.tuples(
    st.just(n), st.integers(0, n), st.integers(1, min(n, 400)))))
def test_property_pass_at_k_matches_comb(nck):
    n, c, k = nck
    with enable_x64():
        out = float(_pass_at_k_jit(n, c, k))
    assert out == pytest.approx(ref.pass_at_k(n, c, k), rel=1e-11, abs=1e-13)


@pytest.mark.parametrize("n", [8, 20])
def test_pass_at_k_is_unbiased(n):
    """E_{c ~ Binomial(n, p)}[pass_at_k(n, c, k)] = 1 - (1 - p)^k exactly (an exact sum)."""
    c = np.arange(n + 1)
    with enable_x64():
        for k in [1, 3, n]:
            estimates = np.asarray(_pass_at_k_jit(n, c, k))
            for p in [0.05, 0.5, 0.93]:
                pmf = np.array([math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in c])
                assert math.fsum(pmf * estimates) == pytest.approx(1 - (1 - p) ** k, rel=1e-12)
                assert float(metrics.pass_at_k_exact(p, k)) == pytest.approx(1 - (1 - p) ** k,
                                                                              rel=1e-13)


def test_pass_at_k_exact():
    with enable_x64():
        p = np.array([0.0, 1e-12, 0.01, 0.3, 0.5, 0.999, 1.0])
        for k in [1, 2, 16, 1000]:
            out = np.asarray(metrics.pass_at_k_exact(p, k))
            expected = [float(1 - (1 - __import__("fractions").Fraction(x)) ** k) for x in p]
            np.testing.assert_allclose(out, expected, rtol=1e-12, atol=0)
        # tiny p: 1 - (1 - p)^k ~ k p, where the naive formula loses every digit
        assert float(metrics.pass_at_k_exact(1e-12, 10)) == pytest.approx(1e-11, rel=1e-9)
        # broadcast p against k, under jit
        table = jax.jit(metrics.pass_at_k_exact)(p[:, None], np.array([1, 4, 64])[None, :])
        assert table.shape == (7, 3) and np.all(np.isfinite(table))
        np.testing.assert_array_equal(np.asarray(table)[0], 0.0)
        np.testing.assert_array_equal(np.asarray(table)[-1], 1.0)
    assert metrics.pass_at_k_exact(jnp.float32(0.3), 4).dtype == jnp.float32


# ----------------------------------------------------------------------------- entropy
def test_entropy_closed_forms(dtype):
    # uniform over the first v entries of a row, the rest -inf (masked vocabulary): log v;
    # a shift of all logits changes nothing
    sizes = np.array([1, 2, 7, 50])
    levels = np.array([0.0, -3.0, 100.0])
    logits = np.full((len(sizes), len(levels), 50), -np.inf)
    for i, v in enumerate(sizes):
        logits[i, :, :v] = levels[:, None]
    h = metrics.entropy(jnp.asarray(logits, dtype))
    assert h.dtype == dtype and h.shape == (4, 3)
    np.testing.assert_allclose(h, np.broadcast_to(np.log(sizes)[:, None], (4, 3)), rtol=1e-6,
                               atol=1e-6)
    assert np.all(np.asarray(h)[0] == 0.0)  # one-hot: exactly 0, not NaN
    # a peaked but finite row is finite and ~0
    peaked = float(metrics.entropy(jnp.asarray([1e4, 0.0, -1e4], dtype)))
    assert 0 <= peaked < 1e-6


def test_entropy_matches_reference_and_axis():
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 3, (4, 5, 9))
    logits[0, 0, :4] = -np.inf
    logits[1, 2, 1:] = -np.inf  # one-hot row
    with enable_x64():
        out = np.asarray(metrics.entropy(logits))
        along_0 = np.asarray(metrics.entropy(np.moveaxis(logits, -1, 0), axis=0))
    expected = np.array([[ref.entropy(list(row)) for row in block] for block in logits])
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(along_0, expected, rtol=1e-12, atol=1e-15)
    assert out[1, 2] == 0.0
    assert np.all(out <= np.log(9) + 1e-12) and np.all(out >= 0)


def test_entropy_gradient_finite_with_masked_logits():
    """dH/dz_i = -p_i (log p_i + H), 0 at -inf logits (an entropy bonus over a masked
    vocabulary must not turn every gradient into NaN)."""
    rows = [[0.3, -1.2, 2.0, 0.0], [0.5, -np.inf, 1.5, -np.inf], [1.0, 1.0, 1.0, 1.0],
            [-np.inf, 4.0, -np.inf, -np.inf]]
    with enable_x64():
        for row in rows:
            grad = np.asarray(jax.grad(metrics.entropy)(jnp.asarray(row)))
            assert np.all(np.isfinite(grad)), row
            np.testing.assert_allclose(grad, ref.entropy_grad(row), rtol=1e-12, atol=1e-15)


def test_mean_token_entropy_with_mask(dtype):
    rng = np.random.default_rng(1)
    logits = rng.normal(0, 2, (3, 5, 6))
    mask = np.array([[1, 1, 0, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]], bool)
    out = metrics.mean_token_entropy(jnp.asarray(logits, dtype), mask)
    assert out.shape == () and out.dtype == dtype
    per_token = [ref.entropy(list(logits[b, t])) for b in range(3) for t in range(5) if mask[b, t]]
    tol = 1e-12 if dtype == jnp.float64 else 1e-5
    assert float(out) == pytest.approx(math.fsum(per_token) / len(per_token), rel=tol)
    full = [ref.entropy(list(logits[b, t])) for b in range(3) for t in range(5)]
    assert float(metrics.mean_token_entropy(jnp.asarray(logits, dtype))) == pytest.approx(
        math.fsum(full) / len(full), rel=tol)
    # garbage logits at masked positions stay out; a fully masked batch gives 0
    poisoned = np.where(mask[..., None], logits, np.nan)
    assert float(metrics.mean_token_entropy(jnp.asarray(poisoned, dtype), mask)) == pytest.approx(
        float(out), rel=tol)
    assert float(metrics.mean_token_entropy(jnp.asarray(logits, dtype), np.zeros_like(mask))) == 0.0


# ----------------------------------------------------------------------------- correct mass
def test_correct_mass(dtype):
    rng = np.random.default_rng(2)
    logits = rng.normal(0, 2, (6, 8))
    logits[1, :3] = -np.inf
    correct = rng.uniform(size=(6, 8)) < 0.4
    correct[2] = True
    correct[3] = False
    out = metrics.correct_mass(jnp.asarray(logits, dtype), correct)
    assert out.shape == (6,) and out.dtype == dtype
    expected = [ref.correct_mass(list(logits[b]), list(correct[b])) for b in range(6)]
    tol = 1e-12 if dtype == jnp.float64 else 1e-6
    np.testing.assert_allclose(out, expected, rtol=tol, atol=tol)
    assert float(out[2]) == pytest.approx(1.0, rel=tol) and float(out[3]) == 0.0
    # one correct set shared by every row broadcasts
    shared = metrics.correct_mass(jnp.asarray(logits, dtype), correct[0])
    np.testing.assert_allclose(shared, [ref.correct_mass(list(row), list(correct[0]))
                                        for row in logits], rtol=tol, atol=tol)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.floats(-20, 20), st.just(-np.inf)), min_size=6, max_size=6)
       .filter(lambda xs: any(x != -np.inf for x in xs)),
       st.lists(st.booleans(), min_size=6, max_size=6))
def test_property_entropy_and_mass(logits, correct):
    with enable_x64():
        h, mass = _entropy_mass_jit(jnp.asarray(logits), jnp.asarray(correct))
    assert 0 <= float(h) <= math.log(6) + 1e-12
    assert float(h) == pytest.approx(ref.entropy(logits), rel=1e-10, abs=1e-13)
    assert float(mass) == pytest.approx(ref.correct_mass(logits, correct), rel=1e-10, abs=1e-13)


_entropy_mass_jit = jax.jit(lambda z, c: (metrics.entropy(z), metrics.correct_mass(z, c)))
