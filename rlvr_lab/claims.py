"""The claims engine: every paper claim is declared once and decided here, three ways.

A claim is a :class:`Declared` object written beside its experiment: the paper's statement and
value (with its unit and where the paper says it), the *estimand* (the number measured per seed,
with its unit), and a decision *rule* whose thresholds are fixed before the run. The
experiment only measures: it returns per-seed numbers (a :class:`Sample`), and
:func:`decide` turns a declaration and its sample into a :class:`~rlvr_lab.experiments.Claim`
row whose verdict follows from the row's own columns, with a reason written from the numbers.

Rules (``direction`` is the side the claim predicts):

``superiority``
    an effect (usually a paired difference of two arms) lies beyond ``threshold`` (``>``: above;
    ``<``: below). ``fail_threshold`` is the boundary of the fail side: the smallest effect
    the paper claims, or the threshold itself (the default).
``non_inferiority``
    an effect lies above ``threshold = -margin`` (``>``; mirrored for ``<``).
``equivalence``
    ``|effect| < margin``: ``threshold`` is the margin (> 0), ``direction`` is ``<``.
``threshold``
    a quantity (not a difference) lies above or below a stated value.
``exact``
    a closed form or identity: ``estimate`` is the largest absolute error, decided against the
    tolerance ``threshold`` without an interval.

The decision, from the columns alone (``lo, hi`` = the interval):

- ``>``: ``pass`` iff ``lo > threshold``; ``fail`` iff ``hi < fail_threshold``;
- ``<``: ``pass`` iff ``hi < threshold``; ``fail`` iff ``lo > fail_threshold``;
- ``equivalence``: ``pass`` iff ``-margin < lo`` and ``hi < margin``; ``fail`` iff the
  interval lies wholly outside ``(-fail_threshold, fail_threshold)``;
- ``exact``: ``pass`` iff ``estimate < threshold`` else ``fail`` (NaN: inconclusive);
- otherwise ``inconclusive``, with about how many seeds (or SFT bases) would decide it at the
  observed spread. Too few seeds, or a non-finite value, give an infinite interval:
  ``inconclusive``, never a silent pass or fail.

Intervals (:func:`interval`). Seeds of the small model are nested in SFT bases (several bases,
each trained from its own seed, each with several RL seeds). Seeds of one base share the base,
so they are not independent; the interval is the **Student-t interval of the base means with
``n_bases - 1`` degrees of freedom** (the classical interval for the grand mean of a balanced
one-way random-effects model: the variance of a base mean is ``sigma_base^2 + sigma_seed^2 /
m``, estimated without bias by the spread of the base means, so the coverage is exact under
normality whatever the share of base-to-base variance), **with the spread of the base means
floored at the seed noise** (:func:`seed_noise_floor`): a base mean can vary no less than its
seeds' noise divided by their number, and with 3-4 bases their spread can fall far below that by
chance. It did in the committed run of 2026-12-06: ``e3_small_passk_vs_grpo``'s first four base
means spread 55x less than their seeds implied (F = MSB/MSW = 0.018), the interval came out ~7x
too narrow, and the claim passed where a rerun under other rounding failed it. Taking ``max(MSB,
MSW)`` is the usual truncation that keeps the base variance component non-negative; it only
widens the interval (coverage at least the nominal level, kept at ``k - 1`` degrees of freedom),
and ``interval_method`` says when it binds. We use it rather than a cluster bootstrap because
with 2-7 bases a bootstrap over bases has far too few distinct resamples to reach its nominal
coverage, and rather than a REML random-effects interval because its degrees of freedom are
themselves estimated (Satterthwaite), which over-covers or under-covers with so few bases; the
price is a wide t quantile with few bases, which is the honest cost of base-to-base variation.
With one base (bank, toy and simulator seeds are independent draws), it is the plain t-interval
over seeds. ``tests/core/test_claims.py`` checks its coverage by simulation.

Sequential seeds (:func:`decide_sequentially`). A study measures an initial batch of bases;
every claim whose interval still straddles its thresholds gets more bases, in batches, up to a
stated cap. A claim is decided at the first look whose interval is wholly on one side and keeps
that verdict. The error rate stays honest under this optional stopping by **Bonferroni alpha
spending over the planned looks**: with ``K`` planned looks, each look uses ``alpha / K``
per side (interval level ``1 - 2 alpha / K`` for a two-sided ``level``), so by the union
bound the probability of a wrong pass (or a wrong fail) over all looks is at most ``alpha``
whatever the stopping rule. It is more conservative than an O'Brien-Fleming or Pocock
boundary, but needs no correlation model between looks, which the nested design would make
fragile. The ``level`` column is the level actually used at the deciding look.

A plan may split alpha unequally (``SeedPlan.look_shares``, shares summing to at most 1). This
is how a plan is **extended** after a finished run left claims open at its last look and the
engine says a few more bases would decide them. The looks already taken still count (they
could have decided), so the union bound over the old looks and the new one is
``alpha * (1 + share of the new look)``, not ``alpha``: an extension is paid for with a small
share for the new look. The looks are nested (each holds the bases of the one before), so the
true error rate is far below that bound; the test suite replays an extension (3 + 1 bases at
alpha/2 each, then 3 + 4 bases with ``look_shares=(1/2, 1/4)``) at the null boundary and finds
its wrong-pass rate within ``alpha / 2`` per side. The extended plan keeps the first look's
share, so every verdict of that look stands bitwise.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt
from scipy import stats as _st

RULES = ("superiority", "non_inferiority", "equivalence", "threshold", "exact")
DIRECTIONS = (">", "<")
NOT_APPLICABLE = "not applicable here"
_ID = re.compile(r"[a-z0-9_]+")


def _finite(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ValueError(f"{name}={value!r} is not allowed; must be a finite number")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name}={value!r} is not allowed; must be a finite number")
    return value


@dataclass(frozen=True)
class Declared:
    """One claim, declared once beside its experiment, before it runs.

    ``statement``: what the paper claims, in our words. ``paper_value``: the paper's number
    with its unit (``"+0.7 pp pass@1"``; ``""`` when it states none). ``paper_ref``: where
    the paper says it (section, table, figure, equation, or the authors' code file and
    function); our own derivation says ``"derived"``. ``estimand``: what is measured per
    seed, with ``unit``. ``rule``, ``threshold``, ``fail_threshold``, ``direction``:
    see the module docstring. ``level``: the two-sided confidence level before any
    sequential split. ``note``: an optional one-line mechanism note (never a verdict).
    ``not_applicable``: a non-empty reason makes the verdict ``not applicable here`` (a
    mechanism this hardware cannot express); the measurement is still reported.
    ``control``: the study's positive control; its failure makes the study's other claims
    inconclusive (:func:`decide_all`), except those declared ``gated=False`` (a count or a
    cost that does not depend on the learning the control checks). ``full_only``: a
    non-empty reason makes quick runs skip the claim and the arms only it needs (its verdict
    there is ``not evaluated``, with the reason); full runs decide it as declared. It keeps the
    quick reproduction inside its budget without shortening the arms of the claims it does
    decide, so a quick verdict never rests on a cheaper version of a full-run arm.
    """

    id: str
    statement: str
    rule: str
    threshold: float
    direction: str = ">"
    fail_threshold: float | None = None
    estimand: str = ""
    unit: str = ""
    paper_value: str = ""
    paper_ref: str = ""
    paper: str = ""
    setting: str = ""
    level: float = 0.95
    note: str = ""
    not_applicable: str = ""
    control: bool = False
    gated: bool = True  # False: a claim that does not depend on learning (e.g. a cost count)
    full_only: str = ""  # why quick runs skip it (its own arms cost too much for quick mode)

    def __post_init__(self):
        if not isinstance(self.id, str) or not _ID.fullmatch(self.id):
            raise ValueError(f"claim id={self.id!r} is not allowed; use lower-case letters, "
                             "digits and underscores")
        if self.rule not in RULES:
            raise ValueError(f"claim {self.id}: rule={self.rule!r} is not allowed; choose one "
                             f"of {', '.join(map(repr, RULES))}")
        if self.direction not in DIRECTIONS:
            raise ValueError(f"claim {self.id}: direction={self.direction!r} is not allowed; "
                             "choose '>' or '<'")
        threshold = _finite(f"claim {self.id}: threshold", self.threshold)
        fail = threshold if self.fail_threshold is None else _finite(
            f"claim {self.id}: fail_threshold", self.fail_threshold)
        object.__setattr__(self, "threshold", threshold)
        object.__setattr__(self, "fail_threshold", fail)
        if isinstance(self.level, bool) or not 0.5 <= float(self.level) < 1.0:
            raise ValueError(f"claim {self.id}: level={self.level!r} is not allowed; must be in "
                             "[0.5, 1)")
        if self.rule in ("equivalence", "exact"):
            if self.direction != "<":
                raise ValueError(f"claim {self.id}: a {self.rule} claim has direction '<' "
                                 f"(|effect| below the margin); got {self.direction!r}")
            if threshold <= 0 or fail < threshold:
                raise ValueError(f"claim {self.id}: a {self.rule} margin must be > 0 with "
                                 f"fail_threshold >= threshold; got {threshold!r}, {fail!r}")
        elif self.direction == ">" and fail > threshold:
            raise ValueError(f"claim {self.id}: fail_threshold={fail!r} is above "
                             f"threshold={threshold!r}; for '>' the fail side must not overlap "
                             "the pass side")
        elif self.direction == "<" and fail < threshold:
            raise ValueError(f"claim {self.id}: fail_threshold={fail!r} is below "
                             f"threshold={threshold!r}; for '<' the fail side must not overlap "
                             "the pass side")
        if self.full_only and self.control:
            raise ValueError(f"claim {self.id}: a positive control cannot be full_only (it "
                             "gates the study's other claims in quick runs too)")
        if self.rule == "non_inferiority" and (
                (self.direction == ">" and threshold > 0) or (self.direction == "<" and
                                                            threshold < 0)):
            raise ValueError(f"claim {self.id}: a non-inferiority threshold is -margin "
                             f"(<= 0 for '>'); got {threshold!r}")

    @property
    def criterion(self) -> str:
        """The decision rule in words, generated from the declaration."""
        unit = f" {self.unit}" if self.unit else ""
        t, f = f"{self.threshold:+.4g}", f"{self.fail_threshold:+.4g}"
        if self.rule == "exact":
            return (f"exact: largest |error| < {self.threshold:.3g}{unit} passes, otherwise "
                    "fails")
        if self.rule == "equivalence":
            fail = "" if f == t else f"; fail when wholly outside +-{self.fail_threshold:.4g}"
            return (f"equivalence: the {self.level:.0%} interval within +-{self.threshold:.4g}"
                    f"{unit} passes{fail}")
        side, other = ("above", "below") if self.direction == ">" else ("below", "above")
        return (f"{self.rule.replace('_', '-')}: the {self.level:.0%} interval wholly {side} "
                f"{t}{unit} passes; wholly {other} {f}{unit} fails; otherwise inconclusive")


@dataclass(frozen=True)
class Sample:
    """Per-seed values of one estimand, each with the SFT base (or other cluster) it came from.

    ``deterministic``: the value is not random given the inputs (a simulator or a closed form);
    its interval is the value itself.
    """

    values: np.ndarray
    bases: np.ndarray
    deterministic: bool = False
    proportion: bool = False  # 0/1 outcomes of independent trials: Clopper-Pearson interval

    def __post_init__(self):
        values = np.asarray(self.values, dtype=np.float64).reshape(-1)
        bases = np.asarray(self.bases).reshape(-1)
        if bases.shape != values.shape:
            raise ValueError(f"Sample: {values.size} values but {bases.size} base labels")
        if self.proportion and not np.all(np.isin(values[np.isfinite(values)], (0.0, 1.0))):
            raise ValueError("a proportion sample takes 0/1 outcomes; got other values")
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "bases", bases)

    @property
    def n_seeds(self) -> int:
        return int(self.values.size)

    @property
    def n_bases(self) -> int:
        return int(np.unique(self.bases).size) if self.values.size else 0

    def __add__(self, other: Sample) -> Sample:
        if self.deterministic or other.deterministic:
            raise ValueError("a deterministic sample cannot be extended with more seeds")
        if self.proportion != other.proportion:
            raise ValueError("a proportion sample can only be extended with 0/1 outcomes")
        return Sample(np.concatenate([self.values, other.values]),
                      np.concatenate([self.bases, other.bases]), proportion=self.proportion)


def seeds(values: npt.ArrayLike) -> Sample:
    """Independent seeds (one base, or a setting without one: the bank, a toy, a simulator)."""
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    return Sample(values, np.zeros(values.size, dtype=int))


def nested(values: npt.ArrayLike, bases: npt.ArrayLike) -> Sample:
    """Seeds nested in SFT bases: ``bases[i]`` names the base seed ``i`` started from."""
    return Sample(values, bases)


def nested_by_base(per_base: Sequence[Mapping[str, npt.ArrayLike]], labels: npt.ArrayLike,
                   ids: Iterable[str]) -> dict[str, Sample]:
    """``{id: nested(...)}`` for each of ``ids``: every base's per-seed numbers ``per_base[j][id]``
    concatenated in base order, labelled by ``labels`` (``rlvr_lab.train.bases.labels``) -- what
    a study's ``measure`` returns for the bases it just ran."""
    return {i: nested(np.concatenate([numbers[i] for numbers in per_base]), labels) for i in ids}


def proportion(outcomes: npt.ArrayLike) -> Sample:
    """0/1 outcomes of independent trials (e.g. "the mass decreased in this trial"). Their
    interval is the exact Clopper-Pearson interval: a t-interval would collapse to a point when
    every trial agrees (48 zeros are not evidence that the rate is exactly 0; the exact upper
    bound is about 7%)."""
    values = np.asarray(outcomes, dtype=np.float64).reshape(-1)
    return Sample(values, np.zeros(values.size, dtype=int), proportion=True)


def value(x: float) -> Sample:
    """One deterministic number (a closed form, a simulator with fixed inputs)."""
    return Sample(np.asarray([x], dtype=np.float64), np.zeros(1, dtype=int), deterministic=True)


@dataclass(frozen=True)
class Interval:
    """``estimate`` with its two-sided ``level`` interval ``[low, high]``."""

    estimate: float
    low: float
    high: float
    level: float
    n_seeds: int
    n_bases: int
    method: str
    spread: float = math.nan  # standard deviation of the units the interval is over
    units: int = 0            # how many units (bases, or seeds with one base)


def seed_noise_floor(groups: Sequence[np.ndarray]) -> float:
    """The smallest standard deviation of a base mean that the seeds within bases allow.

    A base mean of ``m_i`` seeds has variance ``sigma_base^2 + sigma_seed^2 / m_i``, never
    below ``sigma_seed^2 / m_i``. ``sigma_seed^2`` is estimated by the pooled within-base
    variance (``sum_i (m_i - 1)`` degrees of freedom, usually more than the ``k - 1`` of the
    base means); the floor is ``sqrt(MSW * mean_i(1 / m_i))``. 0 when no base has two seeds (or
    a value is not finite)."""
    dof = sum(g.size - 1 for g in groups if g.size >= 2)
    if dof == 0 or not all(np.all(np.isfinite(g)) for g in groups):
        return 0.0
    msw = sum(float(((g - g.mean()) ** 2).sum()) for g in groups if g.size >= 2) / dof
    return math.sqrt(msw * float(np.mean([1.0 / g.size for g in groups])))


def interval(sample: Sample, level: float = 0.95) -> Interval:
    """The interval of the sample's mean (see the module docstring for the method)."""
    v, b = sample.values, sample.bases
    n, k = sample.n_seeds, sample.n_bases
    if sample.deterministic:
        x = float(v[0]) if n else math.nan
        return Interval(x, x, x, level, n, k, "deterministic", 0.0, n)
    if n == 0:
        return Interval(math.nan, -math.inf, math.inf, level, 0, 0, "none")
    if sample.proportion:
        if not np.all(np.isfinite(v)):
            return Interval(math.nan, -math.inf, math.inf, level, n, k, "Clopper-Pearson")
        hits = int(v.sum())
        ci = _st.binomtest(hits, n).proportion_ci(confidence_level=level, method="exact")
        p = hits / n
        # the spread of one trial, for the seeds-to-decide estimate
        return Interval(p, float(ci.low), float(ci.high), level, n, k,
                        f"Clopper-Pearson over {n} trials", math.sqrt(max(p * (1 - p), 0.25 / n)),
                        n)
    floor = 0.0
    if k >= 2:
        groups = [v[b == lab] for lab in np.unique(b)]
        units = np.array([g.mean() for g in groups])
        method = f"t over {k} base means"
        floor = seed_noise_floor(groups)
    else:
        units, method = v, f"t over {n} seeds"
    estimate = float(units.mean())
    m = units.size
    if m < 2 or not np.all(np.isfinite(units)):
        return Interval(estimate, -math.inf, math.inf, level, n, k, method, math.nan, m)
    sd = float(units.std(ddof=1))
    if floor > sd:
        sd, method = floor, f"{method}, spread floored at the seed noise"
    half = sd / math.sqrt(m) * float(_st.t.ppf(0.5 + level / 2, m - 1))
    return Interval(estimate, estimate - half, estimate + half, level, n, k, method, sd, m)


def verdict_from(rule: str, direction: str, estimate: float, low: float, high: float,
                 threshold: float, fail_threshold: float, control_verdict: str = "") -> str:
    """``pass`` / ``fail`` / ``inconclusive`` from a row's columns (the one decision rule).

    ``control_verdict`` is the verdict of the study's positive control that gates this claim
    (empty when no control gates it). A pass or fail counts only when the control passed: a
    study whose learning signal did not show cannot decide the comparisons built on it."""
    verdict = _interval_verdict(rule, direction, estimate, low, high, threshold,
                                fail_threshold)
    if control_verdict not in ("", "pass") and verdict in ("pass", "fail"):
        return "inconclusive"
    return verdict


def _interval_verdict(rule: str, direction: str, estimate: float, low: float, high: float,
                      threshold: float, fail_threshold: float) -> str:
    if rule == "exact":
        if not math.isfinite(estimate):
            return "inconclusive"
        return "pass" if estimate < threshold else "fail"
    if not (math.isfinite(low) and math.isfinite(high)) or math.isnan(estimate):
        return "inconclusive"
    if rule == "equivalence":
        if -threshold < low and high < threshold:
            return "pass"
        if low > fail_threshold or high < -fail_threshold:
            return "fail"
        return "inconclusive"
    if direction == ">":
        if low > threshold:
            return "pass"
        if high < fail_threshold:
            return "fail"
        return "inconclusive"
    if high < threshold:
        return "pass"
    if low > fail_threshold:
        return "fail"
    return "inconclusive"


def _distance(spec: Declared, iv: Interval) -> float:
    """How far the estimate is from the nearest boundary it must clear (NaN: cannot say)."""
    e = iv.estimate
    if spec.rule == "equivalence":
        if abs(e) < spec.threshold:
            return spec.threshold - abs(e)
        return abs(e) - spec.fail_threshold if abs(e) > spec.fail_threshold else math.nan
    lo, hi = sorted((spec.threshold, spec.fail_threshold))
    if e > hi:
        return e - hi
    if e < lo:
        return lo - e
    return math.nan


def units_to_decide(spec: Declared, iv: Interval) -> int | None:
    """About how many units (bases, or seeds with one base) the observed spread needs for the
    interval to clear the nearest boundary; None when the estimate sits between the two
    thresholds or the spread is unknown."""
    d = _distance(spec, iv)
    if not (math.isfinite(d) and d > 0 and math.isfinite(iv.spread)):
        return None
    if iv.spread == 0:
        return max(iv.units, 2)
    # start from the normal approximation, then step up with the t quantile (a few steps)
    z = float(_st.norm.ppf(0.5 + iv.level / 2))
    m = max(2, math.ceil((z * iv.spread / d) ** 2))
    if m > MAX_UNITS:
        return None
    while m <= MAX_UNITS:
        if iv.spread / math.sqrt(m) * float(_st.t.ppf(0.5 + iv.level / 2, m - 1)) < d:
            return m
        m = max(m + 1, math.ceil(m * 1.02))
    return None


MAX_UNITS = 100_000  # beyond this, "no number of seeds is predicted to decide it"


def _fmt(x: float) -> str:
    return f"{x:+.4g}" if math.isfinite(x) else str(x)


def _reason(spec: Declared, iv: Interval, verdict: str, seeds_per_base: int) -> str:
    unit = f" {spec.unit}" if spec.unit else ""
    if spec.rule == "exact":
        return (f"largest |error| {iv.estimate:.3g}{unit} is "
                f"{'below' if verdict == 'pass' else 'not below'} the tolerance "
                f"{spec.threshold:.3g}" if math.isfinite(iv.estimate) else
                "the error is not finite")
    where = (f"{iv.estimate:+.4g}{unit} [{_fmt(iv.low)}, {_fmt(iv.high)}] "
             f"({iv.level:.1%}, {iv.method})")
    if verdict == "pass":
        return f"{where} is wholly on the pass side of {spec.threshold:+.4g}"
    if verdict == "fail":
        side = "outside the margin" if spec.rule == "equivalence" else "on the fail side of"
        return f"{where} is wholly {side} {spec.fail_threshold:+.4g}"
    if not math.isfinite(iv.low):
        return f"{where}: too few seeds or a non-finite value to form an interval"
    need = units_to_decide(spec, iv)
    if need is None:
        if math.isfinite(_distance(spec, iv)):
            return (f"{where} straddles the threshold with its estimate almost on it: more "
                    f"than {MAX_UNITS} seeds would be needed at the observed spread")
        return (f"{where} straddles the thresholds and its estimate lies between them: no "
                "number of seeds is predicted to decide it at this spread")
    if iv.n_bases >= 2:
        return (f"{where} straddles the threshold; about {need} bases x {seeds_per_base} "
                f"seeds (~{need * seeds_per_base} seeds) would decide it at the observed "
                "spread")
    return (f"{where} straddles the threshold; about {need} seeds would decide it at the "
            "observed spread")


def look_level(level: float, looks: int, share: float | None = None) -> float:
    """Two-sided level of one look when ``alpha = 1 - level`` is split over ``looks`` planned
    looks (Bonferroni alpha spending): ``alpha / looks`` each, or ``share * alpha``."""
    if looks < 1:
        raise ValueError(f"looks={looks!r} is not allowed; must be >= 1")
    if share is None:
        share = 1.0 / looks
    if not 0 < share <= 1:
        raise ValueError(f"share={share!r} is not allowed; must be in (0, 1]")
    return 1.0 - (1.0 - level) * share


@dataclass(frozen=True)
class Decision:
    """The engine's answer for one claim: the verdict and every number it follows from."""

    spec: Declared
    verdict: str
    interval: Interval
    reason: str
    look: int = 1
    looks: int = 1
    control: str = ""          # ids of the positive controls gating this claim ("" if none)
    control_verdict: str = ""  # their combined verdict: "pass" only when every one passed

    def row_fields(self) -> dict:
        iv, s = self.interval, self.spec
        exact = s.rule == "exact"
        return dict(rule=s.rule, estimate=iv.estimate,
                    ci_low=math.nan if exact else iv.low, ci_high=math.nan if exact else iv.high,
                    threshold=s.threshold, fail_threshold=s.fail_threshold,
                    direction=s.direction, level=math.nan if exact else iv.level,
                    n_seeds=iv.n_seeds, n_bases=iv.n_bases, unit=s.unit, estimand=s.estimand,
                    interval_method="" if exact else iv.method, control=self.control,
                    control_verdict=self.control_verdict)


def decide(spec: Declared, sample: Sample | float, *, looks: int = 1, look: int = 1,
           seeds_per_base: int = 1, share: float | None = None) -> Decision:
    """Decide one claim from its per-seed sample (``exact``: a number or the per-seed errors;
    the largest absolute value is the estimate). ``share``: this look's share of alpha
    (default ``1 / looks``)."""
    if not isinstance(sample, Sample):
        sample = value(sample) if np.ndim(sample) == 0 else seeds(sample)
    level = look_level(spec.level, looks, share)
    if spec.rule == "exact":
        vals = np.abs(sample.values)
        err = float(vals.max()) if vals.size and np.all(np.isfinite(vals)) else math.nan
        iv = Interval(err, err, err, level, sample.n_seeds, sample.n_bases, "exact")
    else:
        iv = interval(sample, level)
    verdict = verdict_from(spec.rule, spec.direction, iv.estimate, iv.low, iv.high,
                           spec.threshold, spec.fail_threshold)
    reason = _reason(spec, iv, verdict, seeds_per_base)
    if spec.not_applicable:
        reason = f"{spec.not_applicable} (the rule alone would give {verdict}: {reason})"
        verdict = NOT_APPLICABLE
    if spec.note:
        reason = f"{reason}. Mechanism: {spec.note}"
    return Decision(spec, verdict, iv, reason, look, looks)


def gate(decisions: Sequence[Decision]) -> list[Decision]:
    """A study's claims count only when its positive control passed.

    Every gated non-control claim of a study with a control records the control ids and
    their combined verdict (``control``, ``control_verdict``: rows of claims.csv carry both,
    so the verdict still follows from the row's own columns through :func:`verdict_from`).
    When a control did not pass, a pass or fail becomes inconclusive, with the control and
    the verdict the comparison alone would give in the reason."""
    controls = [d for d in decisions if d.spec.control]
    if not controls:
        return list(decisions)
    failed = [d for d in controls if d.verdict != "pass"]
    ids = ",".join(d.spec.id for d in controls)
    combined = "pass" if not failed else (
        "fail" if any(d.verdict == "fail" for d in failed) else failed[0].verdict)
    why = "; ".join(f"positive control {d.spec.id} is {d.verdict} ({d.reason})" for d in failed)
    out = []
    for d in decisions:
        if not d.spec.control and d.spec.gated:
            verdict, reason = d.verdict, d.reason
            if failed and d.verdict in ("pass", "fail"):
                verdict = "inconclusive"
                reason = f"{why}; the comparison alone would give {d.verdict}: {d.reason}"
            d = replace(d, verdict=verdict, reason=reason, control=ids,
                        control_verdict=combined)
        out.append(d)
    return out


def decide_all(specs: Iterable[Declared], samples: Mapping[str, Sample | float], *,
               looks: int = 1, seeds_per_base: int = 1) -> list[Decision]:
    """Decide every declared claim from ``samples`` (keyed by claim id), then gate on the
    positive control. A declared claim without a sample, or a sample without a declaration,
    is an error (claim ids are written once, in the declarations)."""
    specs = list(specs)
    ids = [s.id for s in specs]
    missing = [i for i in ids if i not in samples]
    extra = [i for i in samples if i not in ids]
    if missing or extra:
        raise ValueError(f"claims and samples differ: declared without a sample {missing}, "
                         f"sampled without a declaration {extra}")
    return gate([decide(s, samples[s.id], looks=looks, seeds_per_base=seeds_per_base)
                 for s in specs])


@dataclass(frozen=True)
class SeedPlan:
    """Seeds nested in SFT bases, with sequential batches of bases.

    ``bases`` bases of ``seeds_per_base`` seeds are measured first; while a claim is
    undecided, ``batch_bases`` more are added, up to ``max_bases`` (so at most
    ``max_bases * seeds_per_base`` seeds). The number of planned looks, which fixes each
    look's alpha, follows from these numbers before any data is seen.
    """

    bases: int = 3
    seeds_per_base: int = 3
    batch_bases: int = 2
    max_bases: int = 3
    # each look's share of alpha (default: 1 / looks each), e.g. a small share for the new
    # look of a plan extended after a finished run (see the module docstring)
    look_shares: tuple[float, ...] | None = None

    def __post_init__(self):
        for name in ("bases", "seeds_per_base", "batch_bases", "max_bases"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"SeedPlan: {name}={v!r} is not allowed; must be an "
                                 "integer >= 1")
        if self.max_bases < self.bases:
            raise ValueError(f"SeedPlan: max_bases={self.max_bases!r} is below "
                             f"bases={self.bases!r}")
        shares = self.look_shares
        if shares is not None and not (
                isinstance(shares, tuple) and len(shares) == self.looks
                and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                        and 0 < x <= 1 for x in shares)
                and sum(shares) <= 1 + 1e-12):
            raise ValueError(f"SeedPlan: look_shares={shares!r} is not allowed; must be a "
                             f"tuple of {self.looks} shares in (0, 1] (one per look) summing "
                             "to at most 1")

    def share(self, look: int) -> float:
        """Look ``look``'s (1-based) share of alpha."""
        return 1.0 / self.looks if self.look_shares is None else self.look_shares[look - 1]

    @property
    def looks(self) -> int:
        return 1 + math.ceil((self.max_bases - self.bases) / self.batch_bases)

    @property
    def max_seeds(self) -> int:
        return self.max_bases * self.seeds_per_base

    def batches(self) -> list[list[int]]:
        """The base ids of each look: ``[[0, 1, 2], [3, 4], ...]``."""
        out = [list(range(self.bases))]
        nxt = self.bases
        while nxt < self.max_bases:
            stop = min(nxt + self.batch_bases, self.max_bases)
            out.append(list(range(nxt, stop)))
            nxt = stop
        return out


Measure = Callable[[list[int], frozenset[str]], Mapping[str, Sample | float]]


@dataclass
class SequentialResult:
    decisions: list[Decision]
    bases_used: list[int] = field(default_factory=list)
    samples: dict[str, Sample] = field(default_factory=dict)


def decide_sequentially(specs: Iterable[Declared], measure: Measure,
                        plan: SeedPlan) -> SequentialResult:
    """Measure the plan's first batch of bases, decide, and add batches while any claim is
    undecided (see the module docstring for the alpha spending).

    ``measure(bases, open_ids)`` returns, for the claims in ``open_ids`` at least, the
    per-seed samples of the new ``bases`` only (it may skip arms that only closed claims
    need; the positive control is always open until decided). Deterministic samples and
    ``exact`` claims are decided at the first look. A claim decided at look ``j`` keeps that
    verdict; one still open after the last look is ``inconclusive`` at the last look.
    """
    specs = list(specs)
    by_id = {s.id: s for s in specs}
    looks = plan.looks
    samples: dict[str, Sample] = {}
    final: dict[str, Decision] = {}
    used: list[int] = []
    for j, batch in enumerate(plan.batches(), start=1):
        open_ids = frozenset(i for i in by_id if i not in final)
        if not open_ids:
            break
        got = measure(list(batch), open_ids)
        used.extend(batch)
        for cid in open_ids:
            if cid not in got:
                raise ValueError(f"measure() returned no sample for open claim {cid!r}")
            new = got[cid]
            if not isinstance(new, Sample):
                new = value(new) if np.ndim(new) == 0 else seeds(new)
            samples[cid] = new if cid not in samples else samples[cid] + new
        last = j == looks
        for cid in sorted(open_ids):
            d = decide(by_id[cid], samples[cid], looks=looks, look=j,
                       seeds_per_base=plan.seeds_per_base, share=plan.share(j))
            if (d.verdict != "inconclusive" or last or samples[cid].deterministic
                    or by_id[cid].rule == "exact"):
                final[cid] = d
    decisions = gate([final[s.id] for s in specs])
    return SequentialResult(decisions, used, samples)
