"""Generation-quality metrics that are exact for the toy law.

* :func:`frechet_distance` between two Gaussians (the FID formula): ``|mu1 - mu2|^2 +
  tr(S1 + S2 - 2 (S1^1/2 S2 S1^1/2)^1/2)``. The true side is exact (moments of the
  enumerated law, :func:`law_feature_moments`); the model side is the sample mean and
  covariance of a fixed number of generated images, the same number for every arm, so the
  (positive) finite-sample bias is shared by the arms a claim compares.
* :func:`features`: fixed features of an image -- its intensity profile and the absolute
  differences of neighbouring pixels (an edge map), both scaled to [0, 1] -- playing the role
  of the Inception features of FID.
* :func:`marginal_tv`: per scale, the total-variation distance between the exact per-position
  marginal of the law and the empirical one of generated pyramids, averaged over positions
  (finite even where a model puts mass on levels the law never uses, unlike a KL).
* :func:`support_rate`: the fraction of generated images (finest scale, with their class) that
  the law can produce at all -- exact membership in the enumerated support.
"""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt
from scipy import linalg

from rlvr_lab.papers.sar import data


def features(images: npt.ArrayLike, levels: int) -> np.ndarray:
    """``[N, 2L - 1]`` float64: ``x / (levels - 1)`` and ``|x[i+1] - x[i]| / (levels - 1)``."""
    x = np.asarray(images, dtype=np.float64) / (levels - 1)
    return np.concatenate([x, np.abs(np.diff(x, axis=-1))], axis=-1)


def law_feature_moments(law: data.Law, levels: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact mean and covariance of :func:`features` under the law (probability-weighted)."""
    f = features(law.images, levels)
    mu = law.probs @ f
    centred = f - mu
    return mu, (law.probs[:, None] * centred).T @ centred


def sample_moments(feats: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Sample mean and (ddof=1) covariance of ``[N, d]`` features; ``N == 1`` gives a zero
    covariance (documented degenerate case, never NaN)."""
    f = np.asarray(feats, dtype=np.float64)
    mu = f.mean(0)
    if f.shape[0] < 2:
        return mu, np.zeros((f.shape[1], f.shape[1]))
    return mu, np.cov(f, rowvar=False, ddof=1).reshape(f.shape[1], f.shape[1])


def frechet_distance(mu1: npt.ArrayLike, cov1: npt.ArrayLike, mu2: npt.ArrayLike,
                     cov2: npt.ArrayLike) -> float:
    """Fréchet (2-Wasserstein) distance squared between N(mu1, cov1) and N(mu2, cov2).

    The cross term uses the symmetric form ``tr (S1^1/2 S2 S1^1/2)^1/2`` (``scipy.linalg.
    sqrtm`` of the PSD ``S1``, then the eigenvalues of a symmetric PSD matrix, clipped at 0),
    which stays real and finite for singular covariances. The result is clipped at 0 (rounding
    can give -1e-16 for identical inputs)."""
    mu1, mu2 = np.atleast_1d(np.asarray(mu1, np.float64)), np.atleast_1d(np.asarray(mu2,
                                                                                     np.float64))
    c1 = np.atleast_2d(np.asarray(cov1, np.float64))
    c2 = np.atleast_2d(np.asarray(cov2, np.float64))
    root1 = np.real(linalg.sqrtm((c1 + c1.T) / 2))
    inner = root1 @ ((c2 + c2.T) / 2) @ root1
    eig = np.linalg.eigvalsh((inner + inner.T) / 2)
    cross = np.sqrt(np.clip(eig, 0.0, None)).sum()
    fd = float(np.sum((mu1 - mu2) ** 2) + np.trace(c1) + np.trace(c2) - 2.0 * cross)
    return max(fd, 0.0)


def fd_to_law(images: npt.ArrayLike, mu_true: npt.ArrayLike, cov_true: npt.ArrayLike,
              levels: int) -> float:
    """Fréchet distance of generated images (finest scale) to the exact law moments."""
    mu, cov = sample_moments(features(images, levels))
    return frechet_distance(mu, cov, mu_true, cov_true)


def marginal_tv(flat: npt.ArrayLike, true_marginals: Iterable[np.ndarray],
                config: data.LawConfig) -> np.ndarray:
    """Per scale: mean over positions of TV(exact marginal, empirical marginal of ``flat``)."""
    out = []
    for m, p in zip(data.unflatten(np.asarray(flat), config.scales), true_marginals):
        q = np.eye(config.levels)[m].mean(0)                                  # [s, K]
        out.append(0.5 * np.abs(q - p).sum(-1).mean())
    return np.asarray(out)


def support_rate(classes: npt.ArrayLike, images: npt.ArrayLike, law: data.Law) -> float:
    """Fraction of (class, image) pairs that have positive probability under the law (0.0 for
    no images)."""
    known = {(int(c), row.tobytes()) for c, row in zip(law.classes, law.images.astype(np.int32))}
    imgs = np.asarray(images).astype(np.int32)
    hits = [(int(c), row.tobytes()) in known for c, row in zip(np.asarray(classes), imgs)]
    return float(np.mean(hits)) if hits else 0.0
