"""Advantage sign flips under mean and median group baselines (the MC-GRPO paper).

A rollout with reward ``r`` has the *true* advantage ``r - ref`` (``ref`` the population mean
by default) and the *estimated* advantage ``r - b`` with ``b`` a baseline computed from its
group. Per rollout we count

* a **flip**: ``r - b`` has the strict opposite sign of ``r - ref`` (the update pushes the
  rollout the wrong way);
* a **zeroing**: ``r - b == 0`` while ``r - ref != 0`` (the rollout is not used although it
  carries signal).

Baselines (the ``baseline`` argument):

* ``"mean"``: ``b`` = mean of the ``g`` rollouts of the group; averaged over those ``g``.
  With ``g = 1`` the only rollout is its own baseline: no flips, zeroing = P(r != ref).
* ``"median"``: ``g + 1`` rollouts, ``b`` = their lower median (``torch.median``); the pivot
  (first index whose reward equals ``b``) is excluded and the average is over the other ``g``
  rollouts. Rollouts tied with the median but not the pivot keep ``A = 0`` and count as
  zeroings when their true advantage is non-zero.
* ``"mean_drop_min"``: the compute-matched baseline of the MC-GRPO code: ``g + 1`` rollouts,
  ``b`` = their mean, and the rollout with the smallest ``|r|`` (the first in the group) is
  excluded; the average is over the other ``g``. When two levels tie in ``|r|`` (``-v`` and
  ``v``) the dropped rollout is from either with probability proportional to its count (the
  first position is exchangeable).

References (``reference=``): ``"mean"`` (population mean, default), ``"median"`` (population
lower median: the smallest value with CDF >= 1/2), ``"group_mean"`` (the mean of an
*independent* group of ``reference_g`` rollouts, i.e. the "large-G group mean" proxy used in
practice; it tends to the population mean as ``reference_g`` grows), or a number.

:func:`flip_statistics` is exact for a discrete law ``(values, probs)``: it enumerates the
multinomial *count vectors* of a group (``C(n + L - 1, L - 1)`` of them for ``L`` levels,
e.g. 171 for ``L = 3`` and ``g + 1 = 17``), not the ``L ** n`` sequences. Given the counts,
the per-rollout indicators only depend on each rollout's level, so the average over the
group is ``sum_l weight_l * indicator_l`` with ``weight_l = n_l / g`` for the mean and
``(n_l - [l is the median level]) / g`` for the median (the pivot removes one rollout of
the median's level). Computed in NumPy float64.

:func:`sign_flip_monte_carlo` estimates the same quantities for any sampler (continuous or
heavy-tailed laws) with ``jit(vmap)`` over groups, using the library's own estimators
(``advantages.grpo(scale="none")`` and ``advantages.mc_grpo(scale="none")``), and returns
normal-approximation confidence intervals over i.i.d. groups.
"""
from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpy.typing as npt
from scipy import special, stats

from rlvr_lab import advantages
from rlvr_lab._registry import check_choice
from rlvr_lab.papers.mc_grpo import estimators

BASELINES = ("mean", "median", "mean_drop_min")
REFERENCES = ("mean", "median", "group_mean")
MAX_COUNT_VECTORS = 2_000_000
_REL_TOL = 1e-12  # ties of a group mean with a level are decided up to float64 rounding


class FlipStats(NamedTuple):
    """Per-rollout probabilities: ``flip`` (wrong strict sign), ``zero`` (A=0, true A != 0)."""

    flip: float
    zero: float


# ----------------------------------------------------------------------------- validation
def _check_group_size(g) -> int:
    if isinstance(g, bool) or not isinstance(g, (int, np.integer)) or g < 1:
        raise ValueError(f"g={g!r} is not allowed; use an integer >= 1")
    return int(g)


def _check_law(values, probs) -> tuple[np.ndarray, np.ndarray]:
    """Validated law with equal values merged and zero-probability levels dropped, sorted."""
    values = np.asarray(values, dtype=np.float64).ravel()
    probs = np.asarray(probs, dtype=np.float64).ravel()
    if values.size == 0 or values.shape != probs.shape:
        raise ValueError(f"values and probs must be non-empty and of equal length; got "
                         f"{values.size} and {probs.size}")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"values={values.tolist()} must be finite")
    if np.any(~np.isfinite(probs)) or np.any(probs < 0) or abs(probs.sum() - 1) > 1e-9:
        raise ValueError(f"probs={probs.tolist()} must be >= 0 and sum to 1")
    uniq, inverse = np.unique(values, return_inverse=True)
    merged = np.bincount(inverse.ravel(), weights=probs, minlength=uniq.size)
    keep = merged > 0
    return uniq[keep], merged[keep] / merged[keep].sum()


def _check_reference(reference, reference_g):
    if isinstance(reference, str):
        check_choice("reference", reference, REFERENCES)
        if reference == "group_mean":
            _check_group_size(reference_g)
        return reference
    ref = float(reference)
    if not math.isfinite(ref):
        raise ValueError(f"reference={reference!r} is not allowed; use one of "
                         f"{', '.join(map(repr, REFERENCES))} or a finite number")
    return ref


# ----------------------------------------------------------------------------- enumeration
@functools.lru_cache(maxsize=256)
def count_vectors(n: int, levels: int) -> np.ndarray:
    """All ``[M, levels]`` non-negative integer vectors summing to ``n`` (stars and bars)."""
    m = math.comb(n + levels - 1, levels - 1)
    if m > MAX_COUNT_VECTORS:
        raise ValueError(f"{m} count vectors for a group of {n} over {levels} levels exceed "
                         f"{MAX_COUNT_VECTORS}; use sign_flip_monte_carlo")
    out = np.empty((m, levels), dtype=np.int64)
    for row, bars in enumerate(itertools.combinations(range(n + levels - 1), levels - 1)):
        edges = np.array((-1,) + bars + (n + levels - 1,))
        out[row] = np.diff(edges) - 1
    out.setflags(write=False)
    return out


def multinomial_pmf(counts: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """Multinomial probabilities of the rows of ``counts`` (float64, log-space)."""
    counts = np.asarray(counts)
    n = counts.sum(-1)
    logp = (special.gammaln(n + 1) - special.gammaln(counts + 1).sum(-1)
            + special.xlogy(counts, probs).sum(-1))
    return np.exp(logp)


def _signs(diff: np.ndarray, scale: float) -> np.ndarray:
    tol = _REL_TOL * max(1.0, scale)
    return np.where(diff > tol, 1, np.where(diff < -tol, -1, 0))


def population_median(values: npt.ArrayLike, probs: npt.ArrayLike) -> float:
    """Lower median of a discrete law: the smallest value with CDF >= 1/2."""
    values, probs = _check_law(values, probs)
    cdf = np.cumsum(probs)
    return float(values[np.argmax(cdf >= 0.5 - 1e-12)])


def _true_sign_probs(values, probs, reference, reference_g):
    """Per level: P(v_l > ref) and P(v_l < ref) (0/1 unless the reference is random)."""
    scale = float(np.abs(values).max())
    if reference == "group_mean":
        counts = count_vectors(reference_g, values.size)
        weights = multinomial_pmf(counts, probs)
        ref_means = counts @ values / reference_g
        sign = _signs(values[None, :] - ref_means[:, None], scale)
        return weights @ (sign > 0), weights @ (sign < 0)
    if reference == "mean":
        ref = float(probs @ values)
    elif reference == "median":
        ref = population_median(values, probs)
    else:
        ref = float(reference)
    sign = _signs(values - ref, max(scale, abs(ref)))
    return (sign > 0).astype(np.float64), (sign < 0).astype(np.float64)


def flip_statistics(values: npt.ArrayLike, probs: npt.ArrayLike, g: int, *,
                    baseline: str = "mean", reference: str | float = "mean",
                    reference_g: int = 64) -> FlipStats:
    """Exact per-rollout flip and zeroing probabilities for a discrete reward law.

    See the module docstring for the definitions. ``values``/``probs`` describe the law
    (equal values are merged, zero-probability levels dropped); ``g`` is the number of
    rollouts that carry an advantage (the median baseline samples ``g + 1``).
    """
    check_choice("baseline", baseline, BASELINES)
    g = _check_group_size(g)
    reference = _check_reference(reference, reference_g)
    values, probs = _check_law(values, probs)
    pos, neg = _true_sign_probs(values, probs, reference, reference_g)
    n = g if baseline == "mean" else g + 1
    counts = count_vectors(n, values.size)
    weights = multinomial_pmf(counts, probs)
    if baseline == "mean":
        b = counts @ values / n
        share = counts / g
    elif baseline == "mean_drop_min":
        b = counts @ values / n
        mag = np.abs(values)
        present = counts > 0
        smallest = np.where(present, mag[None, :], np.inf).min(-1, keepdims=True)
        tied = present & (mag[None, :] == smallest)
        tied_counts = np.where(tied, counts, 0)
        dropped = tied_counts / tied_counts.sum(-1, keepdims=True)   # expected removal
        share = (counts - dropped) / g
    else:
        k = (n - 1) // 2  # lower median = sorted position k (0-based)
        med = np.argmax(np.cumsum(counts, axis=-1) > k, axis=-1)
        b = values[med]
        share = (counts - np.eye(values.size, dtype=np.int64)[med]) / g  # pivot removed
    est = _signs(values[None, :] - b[:, None], float(np.abs(values).max()))
    flip_l = (est > 0) * neg[None, :] + (est < 0) * pos[None, :]
    zero_l = (est == 0) * (pos + neg)[None, :]
    flip = float(weights @ (share * flip_l).sum(-1))
    zero = float(weights @ (share * zero_l).sum(-1))
    return FlipStats(flip=flip, zero=zero)


def sign_flip_probability(values: npt.ArrayLike, probs: npt.ArrayLike, g: int, *,
                          baseline: str = "mean", reference: str | float = "mean",
                          reference_g: int = 64) -> float:
    """Exact probability that a rollout's estimated advantage has the wrong strict sign.

    ``"mean"``: b = mean of g rollouts, averaged over the g rollouts. ``"median"``: g+1
    rollouts, b = their lower median, pivot (first index equal to b) excluded, averaged over
    the other g. ``reference``: ``"mean"`` (default) | ``"median"`` | ``"group_mean"`` (an
    independent group of ``reference_g``) | a number. Enumerates multinomial counts (float64).
    """
    return flip_statistics(values, probs, g, baseline=baseline, reference=reference,
                           reference_g=reference_g).flip


def zeroing_probability(values: npt.ArrayLike, probs: npt.ArrayLike, g: int, *,
                        baseline: str = "mean", reference: str | float = "mean",
                        reference_g: int = 64) -> float:
    """Exact probability that a rollout gets A = 0 although its true advantage is non-zero."""
    return flip_statistics(values, probs, g, baseline=baseline, reference=reference,
                           reference_g=reference_g).zero


# ----------------------------------------------------------------------------- reward laws
@dataclass(frozen=True)
class RewardLaw:
    """A reward law: a JAX sampler ``sample(key, shape)`` plus its population mean/median.

    ``values``/``probs`` are set for discrete laws (then the exact functions apply).
    """

    name: str
    sample: Callable
    mean: float
    median: float
    values: tuple | None = None
    probs: tuple | None = None

    @property
    def discrete(self) -> bool:
        return self.values is not None


def discrete_law(name: str, values: npt.ArrayLike, probs: npt.ArrayLike) -> RewardLaw:
    """A finite law; sampling draws level indices with ``jax.random.choice``."""
    v, p = _check_law(values, probs)
    vj = np.asarray(v)
    pj = np.asarray(p)

    def sample(key, shape):
        idx = jax.random.choice(key, vj.size, shape=shape, p=jnp.asarray(pj))
        return jnp.asarray(vj)[idx]

    return RewardLaw(name, sample, float(p @ v), population_median(v, p),
                     tuple(v.tolist()), tuple(p.tolist()))


def _mixture_median(cdf, lo, hi) -> float:
    from scipy import optimize
    return float(optimize.brentq(lambda x: cdf(x) - 0.5, lo, hi, xtol=1e-13))


def noisy_binary_law(name: str, p: float, sigma: float) -> RewardLaw:
    """Correctness ``Bernoulli(p)`` plus Gaussian noise ``N(0, sigma^2)`` (a noisy verifier)."""
    def sample(key, shape):
        k1, k2 = jax.random.split(key)
        return (jax.random.bernoulli(k1, p, shape).astype(jnp.result_type(float))
                + sigma * jax.random.normal(k2, shape))

    def cdf(x):
        return (1 - p) * stats.norm.cdf(x / sigma) + p * stats.norm.cdf((x - 1) / sigma)

    return RewardLaw(name, sample, p, _mixture_median(cdf, -10 * sigma - 1, 10 * sigma + 2))


def lognormal_law(name: str, sigma: float) -> RewardLaw:
    """A right-skewed heavy-tailed law ``exp(N(0, sigma^2))``: mean ``e^{sigma^2/2}``, median 1."""
    def sample(key, shape):
        return jnp.exp(sigma * jax.random.normal(key, shape))

    return RewardLaw(name, sample, math.exp(sigma ** 2 / 2), 1.0)


def student_t_law(name: str, p: float, scale: float, df: float) -> RewardLaw:
    """Correctness ``Bernoulli(p)`` plus symmetric heavy-tailed noise ``scale * t_df``."""
    def sample(key, shape):
        k1, k2 = jax.random.split(key)
        return (jax.random.bernoulli(k1, p, shape).astype(jnp.result_type(float))
                + scale * jax.random.t(k2, df, shape))

    def cdf(x):
        return (1 - p) * stats.t.cdf(x / scale, df) + p * stats.t.cdf((x - 1) / scale, df)

    return RewardLaw(name, sample, p, _mixture_median(cdf, -1e4, 1e4))


# ----------------------------------------------------------------------------- Monte Carlo
class MonteCarloFlips(NamedTuple):
    """Monte Carlo estimates with the half-widths of their ``level`` confidence intervals."""

    flip: float
    flip_half_width: float
    zero: float
    zero_half_width: float
    num_groups: int


_MC_WIDTH = 17  # groups are padded to this width (masked), so g <= 16 shares one compile


@functools.lru_cache(maxsize=64)
def _mc_group_fn(sample, width: int, random_ref: bool, reference_g: int):
    """jit(vmap over groups) of one group's (flip share, zero share) for many (n, reference).

    One group of ``width`` rewards is drawn per key; for each group size ``n`` (traced) its
    first ``n`` entries are the group, so all sizes reuse one compiled function and share the
    draws (common random numbers across G; each cell's CI is still valid on its own). The
    baseline is a traced code too (0 mean, 1 median, 2 mean_drop_min), so one sampler costs
    one compilation.
    Returns ``[groups, len(ns), len(refs)]`` arrays.
    """

    def shares(r, ref, n, code):
        valid = jnp.arange(width)[None, :] < n
        # mean: grpo(scale="none") without its "lone rollout -> 0" rule, which agrees anyway
        # (a group of one is its own mean); median: the library's MC-GRPO estimator;
        # mean_drop_min: the same mean, the study's drop-the-smallest-|r| keep mask
        mean_adv = r - jnp.sum(jnp.where(valid, r, 0), -1, keepdims=True) / n
        med_adv, med_keep = advantages.mc_grpo(r, valid, scale="none")
        median = code == 1
        adv = jnp.where(median, med_adv, mean_adv)
        keep = jnp.where(median, med_keep,
                         jnp.where(code == 2, estimators.drop_min_abs_keep(r, valid), valid))
        g = jnp.where(code == 0, n, n - 1)

        def per_ref(rf):
            true = r - rf
            flip = keep & (jnp.sign(adv) * jnp.sign(true) < 0)
            zero = keep & (adv == 0) & (true != 0)
            return flip.sum() / g, zero.sum() / g

        return jax.vmap(per_ref)(ref)

    def one_group(key, refs, ns, code):
        k_group, k_ref = jax.random.split(key)
        r = sample(k_group, (1, width))
        if random_ref:
            refs = jnp.mean(sample(k_ref, (reference_g,)))[None]
        return jax.vmap(shares, in_axes=(None, None, 0, None))(r, refs, ns, code)

    return jax.jit(jax.vmap(one_group, in_axes=(0, None, None, None)))


def _check_mc_args(num_groups, level):
    if isinstance(num_groups, bool) or not isinstance(num_groups, (int, np.integer)) \
            or num_groups < 2:
        raise ValueError(f"num_groups={num_groups!r} is not allowed; use an integer >= 2")
    if not 0 < level < 1:
        raise ValueError(f"level={level!r} is not allowed; use a number in (0, 1)")


def _resolve_mc_reference(reference, law_mean, law_median):
    if reference in ("mean", "median"):
        given = law_mean if reference == "mean" else law_median
        if given is None:
            raise ValueError(f"reference={reference!r} needs law_{reference}= (the population "
                             f"value) for a sampler")
        return float(given)
    return reference


def monte_carlo_sweep(key: jax.Array, sample: Callable, gs: Iterable[int], *,
                      baseline: str = "mean", references: Sequence[str | float] = ("mean",),
                      reference_g: int = 64, law_mean: float | None = None,
                      law_median: float | None = None, num_groups: int = 65536,
                      level: float = 0.95) -> dict[str, np.ndarray]:
    """:func:`sign_flip_monte_carlo` for many group sizes and references in one compiled call.

    Returns ``{"flip", "flip_half_width", "zero", "zero_half_width"}`` arrays of shape
    ``[len(gs), len(references)]``. ``"group_mean"`` may not be mixed with other references.
    """
    check_choice("baseline", baseline, BASELINES)
    gs = [_check_group_size(g) for g in gs]
    _check_mc_args(num_groups, level)
    refs = [_resolve_mc_reference(_check_reference(r, reference_g), law_mean, law_median)
            for r in references]
    random_ref = "group_mean" in refs
    if random_ref and len(refs) > 1:
        raise ValueError(f"references={tuple(references)!r}: 'group_mean' must be the only one")
    ns = [g if baseline == "mean" else g + 1 for g in gs]
    fn = _mc_group_fn(sample, max(max(ns), _MC_WIDTH), random_ref, int(reference_g))
    keys = jax.random.split(key, int(num_groups))
    ref_arr = jnp.zeros(1) if random_ref else jnp.asarray(refs)
    flips, zeros = (np.asarray(x, np.float64) for x in fn(keys, ref_arr, jnp.asarray(ns),
                                                           jnp.asarray(BASELINES.index(baseline))))
    z = stats.norm.ppf(0.5 + level / 2) / math.sqrt(num_groups)
    return {"flip": flips.mean(0), "flip_half_width": z * flips.std(0, ddof=1),
            "zero": zeros.mean(0), "zero_half_width": z * zeros.std(0, ddof=1)}


def sign_flip_monte_carlo(key: jax.Array, sample: Callable, g: int, *, baseline: str = "mean",
                          reference: str | float = "mean", reference_g: int = 64,
                          law_mean: float | None = None, law_median: float | None = None,
                          num_groups: int = 65536, level: float = 0.95) -> MonteCarloFlips:
    """Monte Carlo flip and zeroing probabilities for any reward sampler.

    ``sample(key, shape)`` draws i.i.d. rewards (for example ``RewardLaw.sample``; pass the
    same function object across calls to reuse the compiled code). ``reference`` is a number,
    ``"group_mean"`` (an independent group of ``reference_g`` draws per group), or
    ``"mean"``/``"median"``, which need the population value in ``law_mean``/``law_median``.
    The estimate averages per-group shares over ``num_groups`` i.i.d. groups; the half-width
    is the normal-approximation CI at ``level`` (groups are i.i.d., so the CLT applies).
    """
    out = monte_carlo_sweep(key, sample, [g], baseline=baseline, references=(reference,),
                            reference_g=reference_g, law_mean=law_mean, law_median=law_median,
                            num_groups=num_groups, level=level)
    return MonteCarloFlips(*(float(out[k][0, 0]) for k in
                             ("flip", "flip_half_width", "zero", "zero_half_width")),
                           int(num_groups))


def law_flip_statistics(key: jax.Array, law: RewardLaw, g: int, *, baseline: str = "mean",
                        reference: str | float = "mean", reference_g: int = 64,
                        num_groups: int = 65536) -> MonteCarloFlips:
    """Flip/zeroing probabilities of a :class:`RewardLaw`: exact when it is discrete
    (half-widths 0, ``num_groups`` 0), Monte Carlo otherwise."""
    if law.discrete:
        s = flip_statistics(law.values, law.probs, g, baseline=baseline, reference=reference,
                            reference_g=reference_g)
        return MonteCarloFlips(s.flip, 0.0, s.zero, 0.0, 0)
    return sign_flip_monte_carlo(key, law.sample, g, baseline=baseline, reference=reference,
                                 reference_g=reference_g, law_mean=law.mean,
                                 law_median=law.median, num_groups=num_groups)


def law_flip_sweep(key: jax.Array, law: RewardLaw, gs: Sequence[int], *, baseline: str = "mean",
                   references: Sequence[str | float] = ("mean",),
                   num_groups: int = 65536) -> dict[str, np.ndarray]:
    """:func:`monte_carlo_sweep` for a :class:`RewardLaw`, exact (half-widths 0) if discrete."""
    if not law.discrete:
        return monte_carlo_sweep(key, law.sample, gs, baseline=baseline, references=references,
                                 law_mean=law.mean, law_median=law.median,
                                 num_groups=num_groups)
    stats_ = [[flip_statistics(law.values, law.probs, g, baseline=baseline, reference=r)
               for r in references] for g in gs]
    arr = np.array(stats_, dtype=np.float64).reshape(len(gs), len(references), 2)
    zeros = np.zeros(arr.shape[:2])
    return {"flip": arr[..., 0], "flip_half_width": zeros, "zero": arr[..., 1],
            "zero_half_width": zeros}
