"""A 1-D image law with a known density, and its VAR-style scale pyramid.

The law (:class:`LawConfig`) is a finite mixture: a class ``c`` (uniform over three) and, given
the class, a uniform choice among a finite set of latent parameters, each drawing one image
``x`` of ``length`` pixels with ``levels`` intensity levels (integers ``0 .. levels - 1``):

* class 0, *box*: background ``b`` (0, or 0/1 from 8 levels up), one box of level ``a`` in
  the upper half of the levels, width 2 .. 8, anywhere on the line;
* class 1, *two boxes*: background ``b``, two boxes of one level ``a``, widths 2 or 3, at
  least one background pixel between them;
* class 2, *edge*: a step from level ``l`` to level ``r`` (``|l - r| >= 2``) at position
  2 .. length - 2.

Because the support is finite (a few thousand images, :func:`enumerate_law`) every quantity of
the law is exact: the probability of each image, the per-position marginal of every scale, the
mean and covariance of any feature, the conditional of a scale given its coarser scales
(:func:`conditional`) and the best loss a model that predicts the tokens of a scale
independently given the coarser scales can reach (:func:`optimal_scale_loss`).

The scale pyramid is the residual-free pyramid of FlexVAR, on which SAR is evaluated: the
token map of scale ``k`` (``scales[k]`` tokens) is the block mean of the image over blocks of
``length // scales[k]`` pixels, rounded half up to an integer level, so the finest scale is the
image itself and every coarser scale is a deterministic function of it. A next-scale model
predicts the tokens of scale ``k`` from the class and all coarser token maps; its input for
scale ``k`` is the token map of scale ``k - 1`` upsampled (nearest) to ``scales[k]`` positions.

Flat layout: a pyramid is one row of ``sum(scales)`` tokens, scale after scale
(:func:`flatten`, :func:`unflatten`); ``block_ids`` gives each position's scale index and
``parent_index`` the flat position of the coarser token that is its model input.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpy.typing as npt

from rlvr_lab._registry import positive_int

CLASSES = ("box", "two boxes", "edge")


@dataclass(frozen=True)
class LawConfig:
    """Static shape of the law: ``length`` pixels, ``levels`` intensity levels, ``scales`` the
    token-map sizes from coarse to fine (each divides ``length``, strictly increasing, the last
    equal to ``length``)."""

    length: int = 16
    levels: int = 4
    scales: tuple[int, ...] = (1, 2, 4, 8, 16)

    def __post_init__(self):
        positive_int("length", self.length)
        positive_int("levels", self.levels)
        if self.length < 8:
            raise ValueError(f"length={self.length} must be >= 8 (room for two boxes)")
        if self.levels < 3:
            raise ValueError(f"levels={self.levels} must be >= 3 (an edge needs two levels "
                             "at least 2 apart)")
        s = tuple(self.scales)
        if (not s or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in s)
                or any(b <= a for a, b in zip(s, s[1:])) or s[-1] != self.length
                or any(self.length % v for v in s)):
            raise ValueError(f"scales={self.scales!r} must be strictly increasing positive "
                             f"divisors of length={self.length} ending with {self.length}")

    @property
    def num_scales(self) -> int:
        return len(self.scales)

    @property
    def seq_len(self) -> int:
        return int(sum(self.scales))

    @property
    def num_classes(self) -> int:
        return len(CLASSES)

    def replace(self, **changes: Any) -> "LawConfig":
        return dataclasses.replace(self, **changes)


# ----------------------------------------------------------------------------- pyramid
def offsets(scales: Sequence[int]) -> np.ndarray:
    """Flat start of each scale's block (and the total length last)."""
    return np.concatenate([[0], np.cumsum(scales)]).astype(int)


def block_ids(scales: Sequence[int]) -> np.ndarray:
    """Scale index of every flat position, ``[sum(scales)]``."""
    return np.repeat(np.arange(len(scales)), scales)


def parent_index(scales: Sequence[int]) -> np.ndarray:
    """For each flat position of scales 1.., the flat position of the token of the next coarser
    scale whose value is its model input (nearest-neighbour upsampling), ``[sum(scales) -
    scales[0]]``. Scale 0 has no parent (its input is the class)."""
    off = offsets(scales)
    out = []
    for k in range(1, len(scales)):
        ratio = scales[k] // scales[k - 1] if scales[k] % scales[k - 1] == 0 else None
        pos = np.arange(scales[k])
        parent = pos // ratio if ratio else (pos * scales[k - 1]) // scales[k]
        out.append(off[k - 1] + parent)
    return np.concatenate(out).astype(np.int32)


def downsample(x: np.ndarray | jax.Array, size: int) -> np.ndarray | jax.Array:
    """Block mean of ``x`` ([..., L] integer levels) over ``L // size`` pixels, rounded half up
    (integer arithmetic, so it is exact): ``floor((2 * sum + n) / (2 * n))``."""
    n = x.shape[-1] // size
    sums = x.reshape(x.shape[:-1] + (size, n)).sum(-1)
    return (2 * sums + n) // (2 * n)


def upsample(tokens: np.ndarray | jax.Array, size: int) -> np.ndarray | jax.Array:
    """Nearest-neighbour upsampling of a token map to ``size`` positions."""
    xp = jnp if isinstance(tokens, jax.Array) else np
    return xp.repeat(tokens, size // tokens.shape[-1], axis=-1)


def pyramid(x: np.ndarray | jax.Array, scales: Iterable[int]) -> list:
    """The token maps of every scale of images ``x`` ([..., length]), coarse to fine."""
    return [downsample(x, s) for s in scales]


def flatten(maps: Sequence[np.ndarray | jax.Array]) -> "np.ndarray | jax.Array":
    """Concatenate token maps (coarse to fine) into the flat layout."""
    xp = jnp if isinstance(maps[0], jax.Array) else np
    return xp.concatenate(list(maps), axis=-1)


def unflatten(flat: np.ndarray | jax.Array, scales: Sequence[int]) -> list:
    """Split a flat row back into its token maps."""
    off = offsets(scales)
    return [flat[..., off[k]:off[k + 1]] for k in range(len(scales))]


def flat_pyramid(x: np.ndarray | jax.Array, scales: Iterable[int]) -> np.ndarray | jax.Array:
    """``flatten(pyramid(x, scales))``."""
    return flatten(pyramid(x, scales))


def consistent(flat: np.ndarray | jax.Array, scales: Sequence[int]) -> np.ndarray | jax.Array:
    """True where every coarser scale of a flat pyramid equals the downsampled finest scale
    (what every pyramid of the law satisfies and a sampler need not)."""
    xp = jnp if isinstance(flat, jax.Array) else np
    maps = unflatten(flat, scales)
    ok = [xp.all(m == downsample(maps[-1], s), axis=-1) for m, s in zip(maps[:-1], scales)]
    return xp.all(xp.stack(ok, 0), axis=0) if ok else xp.ones(flat.shape[:-1], bool)


# ----------------------------------------------------------------------------- the law
class Law(NamedTuple):
    """The whole support: ``images`` [M, length] int32, ``classes`` [M], ``probs`` [M] (sum 1,
    float64), ``flat`` [M, seq_len] the flat pyramids."""

    images: np.ndarray
    classes: np.ndarray
    probs: np.ndarray
    flat: np.ndarray


def box_levels(levels: int) -> range:
    """Levels a box may take: the upper half, ``levels // 2 .. levels - 1``."""
    return range(levels // 2, levels)


def background_levels(levels: int) -> range:
    """Levels the background may take: 0, and also 1 when ``levels >= 8``."""
    return range(2 if levels >= 8 else 1)


def _class_images(cls: int, L: int, K: int) -> np.ndarray:
    rows = []
    if cls == 0:
        for b in background_levels(K):
            for a in box_levels(K):
                for w in range(2, min(8, L // 2) + 1):
                    for s in range(0, L - w + 1):
                        x = np.full(L, b)
                        x[s:s + w] = a
                        rows.append(x)
    elif cls == 1:
        for b in background_levels(K):
            for a in box_levels(K):
                for w1 in (2, 3):
                    for w2 in (2, 3):
                        for s1 in range(L):
                            for s2 in range(s1 + w1 + 1, L - w2 + 1):
                                x = np.full(L, b)
                                x[s1:s1 + w1] = a
                                x[s2:s2 + w2] = a
                                rows.append(x)
    else:
        for left in range(K):
            for right in range(K):
                if abs(left - right) < 2:
                    continue
                for e in range(2, L - 1):
                    x = np.full(L, right)
                    x[:e] = left
                    rows.append(x)
    return np.asarray(rows, dtype=np.int32)


def enumerate_law(config: LawConfig = LawConfig()) -> Law:
    """Every (class, image) of the law with its exact probability: uniform class, then uniform
    latent parameters within the class (two latents of one class never give the same image;
    an image may belong to two classes, e.g. a box at the border and an edge)."""
    images, classes, probs = [], [], []
    C = config.num_classes
    for c in range(C):
        x = _class_images(c, config.length, config.levels)
        images.append(x)
        classes.append(np.full(len(x), c, np.int32))
        probs.append(np.full(len(x), 1.0 / (C * len(x))))
    images = np.concatenate(images)
    return Law(images=images, classes=np.concatenate(classes), probs=np.concatenate(probs),
               flat=flat_pyramid(images, config.scales).astype(np.int32))


def sample(key: jax.Array, law: Law, n: int) -> tuple[jax.Array, jax.Array]:
    """``n`` exact draws from the law: (classes [n], flat pyramids [n, seq_len])."""
    idx = jax.random.choice(key, law.probs.shape[0], (n,), p=jnp.asarray(law.probs))
    return jnp.asarray(law.classes)[idx], jnp.asarray(law.flat)[idx]


def scale_marginals(law: Law, config: LawConfig) -> list[np.ndarray]:
    """Exact per-position marginal of every scale: ``[scales[k], levels]`` each (float64)."""
    out = []
    for m in unflatten(law.flat, config.scales):
        onehot = np.eye(config.levels)[m]                        # [M, s, K]
        out.append(np.einsum("m,msk->sk", law.probs, onehot))
    return out


def conditional(law: Law, config: LawConfig, cls: int, prefix: Sequence[npt.ArrayLike]
                ) -> tuple[np.ndarray, np.ndarray]:
    """The exact law of the next scale given the class and the token maps of the coarser
    scales ``prefix`` (a list of ``len(prefix)`` maps): (distinct next maps [R, s], their
    probabilities [R]). Empty arrays when the prefix has probability 0 (it is off the law's
    support: no next scale is defined)."""
    k = len(prefix)
    maps = unflatten(law.flat, config.scales)
    keep = law.classes == cls
    for j, m in enumerate(prefix):
        keep &= np.all(maps[j] == np.asarray(m)[None], axis=-1)
    if not keep.any():
        return np.zeros((0, config.scales[k]), np.int32), np.zeros(0)
    nxt, inv = np.unique(maps[k][keep], axis=0, return_inverse=True)
    p = np.bincount(inv.ravel(), weights=law.probs[keep], minlength=len(nxt))
    return nxt.astype(np.int32), p / p.sum()


def optimal_scale_loss(law: Law, config: LawConfig) -> np.ndarray:
    """Per scale, the lowest mean per-token cross-entropy (nats) reachable by a model that
    predicts the tokens of a scale independently given the class and all coarser scales --
    the next-scale factorisation -- under teacher forcing: ``E[sum_i H(s_k,i | c, s_<k)] /
    scales[k]``. Exact (grouping the support by its prefixes)."""
    maps = unflatten(law.flat, config.scales)
    out = []
    for k, s in enumerate(config.scales):
        key = np.concatenate([law.classes[:, None]] + maps[:k], axis=1)
        _, group = np.unique(key, axis=0, return_inverse=True)
        group = group.ravel()
        G = group.max() + 1
        onehot = np.eye(config.levels)[maps[k]]                           # [M, s, K]
        mass = np.zeros((G, s, config.levels))
        np.add.at(mass, group, law.probs[:, None, None] * onehot)
        pg = mass.sum(-1, keepdims=True)                                  # [G, s, 1]
        cond = np.where(pg > 0, mass / np.where(pg > 0, pg, 1.0), 0.0)
        ent = -np.where(cond > 0, cond * np.log(np.where(cond > 0, cond, 1.0)), 0.0).sum(-1)
        out.append(float((pg[:, :, 0] * ent).sum() / s))
    return np.asarray(out)
