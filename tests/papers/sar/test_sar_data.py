"""SAR toy law and scale pyramid: round trips, exact marginals/conditionals, block-causal mask,
and the metrics on pairs of distributions whose distance is known in closed form."""
from __future__ import annotations

import itertools

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs
from scipy import linalg

from rlvr_lab.papers.sar import data as D
from rlvr_lab.papers.sar import metrics as X
from rlvr_lab.papers.sar import model as M

CFG = D.LawConfig()
LAW = D.enumerate_law(CFG)


def loop_downsample(x, size):
    """Block mean rounded half up, one block at a time (float64 reference)."""
    n = len(x) // size
    return np.array([int(np.floor(np.mean(x[i * n:(i + 1) * n]) + 0.5)) for i in range(size)])


@settings(max_examples=60, deadline=None)
@given(hs.lists(hs.integers(0, 3), min_size=16, max_size=16))
def test_pyramid_matches_loop_and_round_trips(pixels):
    x = np.asarray(pixels)
    maps = D.pyramid(x, CFG.scales)
    for m, s in zip(maps, CFG.scales):
        np.testing.assert_array_equal(m, loop_downsample(x, s))
    np.testing.assert_array_equal(maps[-1], x)                      # finest scale = image
    flat = D.flatten(maps)
    assert flat.shape == (CFG.seq_len,)
    for a, b in zip(D.unflatten(flat, CFG.scales), maps):
        np.testing.assert_array_equal(a, b)
    assert bool(D.consistent(flat[None], CFG.scales)[0])


def test_inconsistent_pyramid_detected():
    flat = D.flat_pyramid(LAW.images[:1], CFG.scales).copy()
    flat[0, 0] = (flat[0, 0] + 1) % CFG.levels                      # break the coarsest scale
    assert not bool(D.consistent(flat, CFG.scales)[0])


def test_parent_index_is_the_upsampled_parent():
    flat = LAW.flat[:50]
    maps = D.unflatten(flat, CFG.scales)
    parents = flat[:, D.parent_index(CFG.scales)]
    want = np.concatenate([D.upsample(maps[k - 1], CFG.scales[k])
                           for k in range(1, CFG.num_scales)], axis=-1)
    np.testing.assert_array_equal(parents, want)


def test_law_is_a_distribution_over_valid_images():
    assert np.isclose(LAW.probs.sum(), 1.0) and (LAW.probs > 0).all()
    assert LAW.images.min() >= 0 and LAW.images.max() < CFG.levels
    for c in range(CFG.num_classes):
        assert np.isclose(LAW.probs[LAW.classes == c].sum(), 1 / CFG.num_classes)
    assert D.consistent(LAW.flat, CFG.scales).all()


def test_scale_marginals_against_a_loop():
    marg = D.scale_marginals(LAW, CFG)
    maps = D.unflatten(LAW.flat, CFG.scales)
    for k, m in enumerate(maps):
        ref = np.zeros((CFG.scales[k], CFG.levels))
        for p, row in zip(LAW.probs, m):
            for i, v in enumerate(row):
                ref[i, v] += p
        np.testing.assert_allclose(marg[k], ref, atol=1e-12)
        np.testing.assert_allclose(marg[k].sum(-1), 1.0)


def test_conditional_is_bayes_rule_and_off_support_is_empty():
    row = LAW.flat[7]
    maps = D.unflatten(row, CFG.scales)
    cls = int(LAW.classes[7])
    nxt, p = D.conditional(LAW, CFG, cls, maps[:2])
    assert np.isclose(p.sum(), 1.0)
    # brute force: mass of each next map among images with the same class and prefix
    all_maps = D.unflatten(LAW.flat, CFG.scales)
    same = ((LAW.classes == cls) & np.all(all_maps[0] == maps[0], -1)
            & np.all(all_maps[1] == maps[1], -1))
    for m, q in zip(nxt, p):
        hit = same & np.all(all_maps[2] == m, -1)
        assert np.isclose(q, LAW.probs[hit].sum() / LAW.probs[same].sum())
    # an inconsistent prefix (whole-image mean 0, both halves at level 3) is off the support
    nxt, p = D.conditional(LAW, CFG, cls, [np.array([0]), np.array([3, 3])])
    assert p.size == 0 and nxt.shape == (0, CFG.scales[2])


def test_optimal_scale_loss_is_finite_nonnegative_and_positive_at_the_top():
    opt = D.optimal_scale_loss(LAW, CFG)
    assert opt.shape == (CFG.num_scales,) and (opt >= -1e-12).all() and np.isfinite(opt).all()
    assert opt[0] > 0            # the coarsest scale given only the class is uncertain


def test_block_causal_mask():
    scales = (1, 2, 4)
    m = M.block_causal_mask(scales)
    blocks = D.block_ids(scales)
    for q, j in itertools.product(range(7), range(7)):
        assert m[q, j] == (blocks[j] <= blocks[q])
    assert m.diagonal().all()            # every position sees its own scale (parallel tokens)


def test_model_output_of_a_scale_ignores_finer_scales():
    mc = M.ModelConfig()
    graphdef, params = M.init(jax.random.key(0), mc, CFG)
    classes, flat = D.sample(jax.random.key(1), LAW, 4)
    logits = np.asarray(M.forward(graphdef, params, classes, flat))
    changed = np.asarray(flat).copy()
    off = D.offsets(CFG.scales)
    changed[:, off[3]:] = (changed[:, off[3]:] + 1) % CFG.levels  # alter scales 3 and 4
    other = np.asarray(M.forward(graphdef, params, classes, changed))
    # scales 0..3 are predicted from inputs of scales < 3 only (their parents): unchanged
    np.testing.assert_allclose(other[:, :off[4]], logits[:, :off[4]], atol=1e-5)
    assert not np.allclose(other[:, off[4]:], logits[:, off[4]:])


# ----------------------------------------------------------------------------- metrics
def test_frechet_distance_closed_form_pairs():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(5, 5))
    c1 = a @ a.T + np.eye(5)
    mu = rng.normal(size=5)
    assert X.frechet_distance(mu, c1, mu, c1) == pytest.approx(0.0, abs=1e-8)
    # shifted means, equal covariance: |d|^2
    d = rng.normal(size=5)
    assert X.frechet_distance(mu, c1, mu + d, c1) == pytest.approx(d @ d, rel=1e-8)
    # commuting (diagonal) covariances: sum (sqrt(s1) - sqrt(s2))^2
    s1, s2 = rng.uniform(0.1, 2, 5), rng.uniform(0.1, 2, 5)
    want = ((np.sqrt(s1) - np.sqrt(s2)) ** 2).sum()
    assert X.frechet_distance(mu, np.diag(s1), mu, np.diag(s2)) == pytest.approx(want, rel=1e-8)
    # general: the textbook formula with scipy's sqrtm of the product
    b = rng.normal(size=(5, 5))
    c2 = b @ b.T + 0.5 * np.eye(5)
    ref = d @ d + np.trace(c1 + c2 - 2 * np.real(linalg.sqrtm(c1 @ c2)))
    assert X.frechet_distance(mu, c1, mu + d, c2) == pytest.approx(ref, rel=1e-6)


def test_frechet_distance_degenerate_inputs_are_finite():
    z = np.zeros((3, 3))
    assert X.frechet_distance(np.zeros(3), z, np.ones(3), z) == pytest.approx(3.0)
    mu, cov = X.sample_moments(np.ones((1, 3)))                     # one sample: zero cov
    assert np.isfinite(mu).all() and (cov == 0).all()


def test_fd_of_exact_law_samples_shrinks_with_n():
    mu, cov = X.law_feature_moments(LAW, CFG.levels)
    rng = np.random.default_rng(1)
    fds = []
    for n in (200, 20_000):
        idx = rng.choice(len(LAW.probs), n, p=LAW.probs)
        fds.append(X.fd_to_law(LAW.images[idx], mu, cov, CFG.levels))
    assert fds[1] < fds[0] and fds[1] < 0.02


def test_marginal_tv_and_support_rate_exact():
    # the whole support, each image repeated in proportion to its probability, has marginal TV
    # equal to the discrepancy of the weights only: use a uniform-class copy of one class
    tv = X.marginal_tv(LAW.flat, D.scale_marginals(
        LAW._replace(probs=np.full(len(LAW.probs), 1 / len(LAW.probs))), CFG), CFG)
    assert np.allclose(tv, 0.0, atol=1e-12)
    assert X.support_rate(LAW.classes, LAW.images, LAW) == 1.0
    bad = np.full_like(LAW.images[:4], CFG.levels - 1)
    bad[:, ::2] = 0                                                 # alternating: off support
    assert X.support_rate(np.zeros(4, int), bad, LAW) == 0.0
    assert X.support_rate(np.zeros(0, int), bad[:0], LAW) == 0.0


def test_law_config_errors_name_the_value():
    with pytest.raises(ValueError, match="scales=.*divisors"):
        D.LawConfig(scales=(1, 3, 16))
    with pytest.raises(ValueError, match="levels=2"):
        D.LawConfig(levels=2)
