"""The claims engine: rules and boundaries on constructed samples, the nested interval against
a float64 reference and by its coverage, and the sequential rule's error rate by simulation."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from rlvr_lab import claims
from rlvr_lab.claims import Declared


def sup(threshold=0.0, fail=None, direction=">", **kw):
    return Declared("c", "s", "superiority", threshold, direction=direction,
                    fail_threshold=fail, **kw)


# ----------------------------------------------------------------------------- declarations
@pytest.mark.parametrize("kwargs, match", [
    (dict(rule="better"), "rule='better'"),
    (dict(direction=">="), "direction='>='"),
    (dict(threshold=math.nan), "threshold=nan"),
    (dict(threshold=True), "threshold=True"),
    (dict(fail_threshold=0.5), "fail_threshold=0.5 is above"),
    (dict(level=1.0), "level=1.0"),
    (dict(id="Bad Id"), "id='Bad Id'"),
])
def test_bad_declarations_name_the_value(kwargs, match):
    base = dict(id="c", statement="s", rule="superiority", threshold=0.0)
    with pytest.raises(ValueError, match=match):
        Declared(**{**base, **kwargs})


def test_equivalence_and_exact_need_a_positive_margin_and_direction_below():
    with pytest.raises(ValueError, match="direction '<'"):
        Declared("c", "s", "equivalence", 0.1)
    with pytest.raises(ValueError, match="margin must be > 0"):
        Declared("c", "s", "exact", 0.0, direction="<")
    with pytest.raises(ValueError, match="-margin"):
        Declared("c", "s", "non_inferiority", 0.1)
    assert Declared("c", "s", "equivalence", 0.1, direction="<").fail_threshold == 0.1


def test_criterion_is_generated_from_the_declaration():
    text = sup(0.1, 0.0, unit="pass@1").criterion
    assert "above +0.1 pass@1 passes" in text and "below +0 pass@1 fails" in text


# ----------------------------------------------------------------------------- the decision
@pytest.mark.parametrize("direction, lo, hi, t, f, want", [
    (">", 0.01, 0.2, 0.0, 0.0, "pass"),
    (">", 0.0, 0.2, 0.0, 0.0, "inconclusive"),      # touching is not wholly above
    (">", -0.3, -0.01, 0.0, 0.0, "fail"),
    (">", -0.3, 0.0, 0.0, 0.0, "inconclusive"),
    (">", 0.02, 0.05, 0.1, 0.0, "inconclusive"),     # between fail and pass boundaries
    (">", -0.2, -0.1, 0.1, -0.05, "fail"),
    ("<", -0.2, -0.01, 0.0, 0.0, "pass"),
    ("<", 0.01, 0.2, 0.0, 0.0, "fail"),
    ("<", -0.1, 0.1, 0.0, 0.0, "inconclusive"),
])
def test_verdict_from_columns(direction, lo, hi, t, f, want):
    est = (lo + hi) / 2
    assert claims.verdict_from("superiority", direction, est, lo, hi, t, f) == want


@pytest.mark.parametrize("lo, hi, want", [
    (-0.04, 0.04, "pass"), (-0.06, 0.04, "inconclusive"), (0.06, 0.2, "fail"),
    (-0.3, -0.06, "fail"), (-0.05, 0.01, "inconclusive")])
def test_equivalence_margin(lo, hi, want):
    assert claims.verdict_from("equivalence", "<", (lo + hi) / 2, lo, hi, 0.05, 0.05) == want


def test_exact_rule_uses_the_largest_error():
    spec = Declared("c", "s", "exact", 1e-9, direction="<")
    assert claims.decide(spec, [1e-12, -2e-12]).verdict == "pass"
    d = claims.decide(spec, [1e-12, -2e-6])
    assert d.verdict == "fail" and d.interval.estimate == pytest.approx(2e-6)
    assert claims.decide(spec, [math.nan]).verdict == "inconclusive"


def test_too_few_seeds_or_nan_is_inconclusive():
    assert claims.decide(sup(), claims.seeds([5.0])).verdict == "inconclusive"
    assert claims.decide(sup(), claims.seeds([])).verdict == "inconclusive"
    d = claims.decide(sup(), claims.seeds([1.0, 2.0, math.nan]))
    assert d.verdict == "inconclusive" and "too few seeds or a non-finite" in d.reason
    # two bases of one seed each still form an interval; one base of many seeds is t over seeds
    assert claims.decide(sup(), claims.nested([1.0, 1.1], [0, 1])).interval.n_bases == 2


def test_zero_spread_collapses_to_the_mean_and_decides():
    d = claims.decide(sup(0.1), claims.seeds([0.3, 0.3, 0.3]))
    assert d.verdict == "pass" and d.interval.low == d.interval.high == pytest.approx(0.3)


def test_deterministic_value_is_its_own_interval():
    d = claims.decide(Declared("c", "s", "threshold", 2.0), claims.value(2.5))
    assert d.verdict == "pass" and d.interval.method == "deterministic"
    assert claims.decide(Declared("c", "s", "threshold", 2.0), 1.5).verdict == "fail"


def test_not_applicable_keeps_the_measurement_and_the_rule_verdict_in_the_reason():
    d = claims.decide(sup(not_applicable="GPU memory-bound decoding"),
                      claims.seeds([-0.2, -0.3, -0.25]))
    assert d.verdict == claims.NOT_APPLICABLE
    assert "GPU memory-bound" in d.reason and "would give fail" in d.reason
    assert d.interval.estimate == pytest.approx(-0.25)


def test_inconclusive_reason_predicts_seeds_that_decide():
    rng = np.random.default_rng(0)
    x = 0.1 + rng.normal(0, 1.0, 6)
    d = claims.decide(sup(), claims.seeds(x))
    assert d.verdict == "inconclusive"
    need = claims.units_to_decide(d.spec, d.interval)
    assert need is not None and need > 6 and f"about {need} seeds" in d.reason
    # at that many units with the same mean and spread the interval clears the boundary
    z = (x - x.mean()) / x.std(ddof=1) * d.interval.spread + d.interval.estimate
    bigger = np.resize(z, need)
    bigger = (bigger - bigger.mean()) / bigger.std(ddof=1) * d.interval.spread + x.mean()
    assert claims.decide(sup(), claims.seeds(bigger)).verdict != "inconclusive"


def test_gate_turns_comparisons_inconclusive_when_the_control_does_not_pass():
    control = Declared("ctrl", "s", "superiority", 0.0, control=True)
    other = Declared("cmp", "s", "superiority", 0.0)
    samples = {"ctrl": claims.seeds([-0.1, 0.1, 0.0]), "cmp": claims.seeds([1.0, 1.1, 1.2])}
    out = {d.spec.id: d for d in claims.decide_all([control, other], samples)}
    assert out["ctrl"].verdict == "inconclusive"
    assert out["cmp"].verdict == "inconclusive" and "would give pass" in out["cmp"].reason
    samples["ctrl"] = claims.seeds([0.5, 0.6, 0.55])
    out = {d.spec.id: d for d in claims.decide_all([control, other], samples)}
    assert out["cmp"].verdict == "pass"


def test_gated_rows_carry_the_control_and_their_verdict_follows_from_the_row():
    control = Declared("ctrl", "s", "superiority", 0.0, control=True)
    cmp_ = Declared("cmp", "s", "superiority", 0.0)
    cost = Declared("cost", "s", "threshold", 0.0, gated=False)
    good = {"cmp": claims.seeds([1.0, 1.1, 1.2]), "cost": claims.seeds([1.0, 1.1, 1.2])}
    for ctrl, want_ctrl in (([-0.1, 0.1, 0.0], "inconclusive"), ([-0.5, -0.6, -0.55], "fail"),
                            ([0.5, 0.6, 0.55], "pass")):
        out = {d.spec.id: d for d in
               claims.decide_all([control, cmp_, cost], {"ctrl": claims.seeds(ctrl), **good})}
        row = out["cmp"].row_fields()
        assert (row["control"], row["control_verdict"]) == ("ctrl", want_ctrl)
        # the row alone gives the verdict: interval columns plus the control's verdict
        assert claims.verdict_from(row["rule"], row["direction"], row["estimate"],
                                   row["ci_low"], row["ci_high"], row["threshold"],
                                   row["fail_threshold"], row["control_verdict"]) \
            == out["cmp"].verdict == ("pass" if want_ctrl == "pass" else "inconclusive")
        # neither the control nor an ungated claim depends on a control
        for cid in ("ctrl", "cost"):
            assert out[cid].row_fields()["control"] == ""
        assert out["cost"].verdict == "pass"


@pytest.mark.parametrize("control_verdict, want", [("", "pass"), ("pass", "pass"),
                                                   ("fail", "inconclusive"),
                                                   ("inconclusive", "inconclusive")])
def test_verdict_from_reads_the_control_verdict(control_verdict, want):
    assert claims.verdict_from("superiority", ">", 1.0, 0.5, 1.5, 0.0, 0.0,
                               control_verdict) == want
    # a fail is gated the same way
    fail = "fail" if want == "pass" else "inconclusive"
    assert claims.verdict_from("superiority", ">", -1.0, -1.5, -0.5, 0.0, 0.0,
                               control_verdict) == fail


def test_decide_all_rejects_missing_or_undeclared_samples():
    with pytest.raises(ValueError, match=r"without a sample \['c'\]"):
        claims.decide_all([sup()], {})
    with pytest.raises(ValueError, match=r"without a declaration \['x'\]"):
        claims.decide_all([sup()], {"c": 1.0, "x": 2.0})


# ----------------------------------------------------------------------------- the interval
def test_single_base_interval_matches_a_float64_t_interval():
    rng = np.random.default_rng(1)
    x = rng.normal(0.3, 0.2, 7)
    iv = claims.interval(claims.seeds(x), 0.9)
    n = len(x)
    mean = sum(x) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in x) / (n - 1))
    half = sps.t.ppf(0.95, n - 1) * sd / math.sqrt(n)
    assert (iv.estimate, iv.low, iv.high) == pytest.approx((mean, mean - half, mean + half))


def test_nested_interval_is_over_base_means():
    values = [1.0, 1.2, 2.0, 2.4, 0.5, 0.7]
    labels = [0, 0, 1, 1, 2, 2]
    iv = claims.interval(claims.nested(values, labels), 0.95)
    means = [1.1, 2.2, 0.6]
    m = sum(means) / 3
    sd = math.sqrt(sum((v - m) ** 2 for v in means) / 2)
    half = sps.t.ppf(0.975, 2) * sd / math.sqrt(3)
    assert (iv.low, iv.high) == pytest.approx((m - half, m + half))
    assert iv.n_seeds == 6 and iv.n_bases == 3


def test_spread_of_base_means_is_floored_at_the_seed_noise():
    # base means equal (0.5 each) while seeds within bases vary: without the floor the interval
    # would collapse to a point; with it, sd of a base mean = sqrt(MSW * mean(1/m_i))
    values = [0.4, 0.6, 0.3, 0.7, 0.5, 0.5, 0.45, 0.55, 0.5]
    labels = [0, 0, 1, 1, 2, 2, 3, 3, 3]
    groups = [[0.4, 0.6], [0.3, 0.7], [0.5, 0.5], [0.45, 0.55, 0.5]]
    ss = sum(sum((x - sum(g) / len(g)) ** 2 for x in g) for g in groups)
    msw = ss / sum(len(g) - 1 for g in groups)
    floor = math.sqrt(msw * sum(1 / len(g) for g in groups) / len(groups))
    iv = claims.interval(claims.nested(values, labels), 0.95)
    half = sps.t.ppf(0.975, 3) * floor / math.sqrt(4)
    assert iv.estimate == pytest.approx(0.5)
    assert (iv.low, iv.high) == pytest.approx((0.5 - half, 0.5 + half))
    assert iv.spread == pytest.approx(floor)
    assert iv.method == "t over 4 base means, spread floored at the seed noise"


def test_floor_does_not_bind_when_bases_spread_more_than_their_seeds():
    iv = claims.interval(claims.nested([1.0, 1.2, 2.0, 2.4, 0.5, 0.7], [0, 0, 1, 1, 2, 2]))
    assert iv.method == "t over 3 base means"
    # one seed per base: no within-base noise to floor with
    assert claims.seed_noise_floor([np.array([1.0]), np.array([2.0])]) == 0.0
    assert claims.seed_noise_floor([np.array([1.0, np.nan]), np.array([2.0, 3.0])]) == 0.0


@settings(deadline=None, max_examples=60)
@given(st.lists(st.lists(st.floats(-3, 3), min_size=1, max_size=4), min_size=2, max_size=6))
def test_floor_only_widens_the_interval(groups):
    values = [x for g in groups for x in g]
    labels = [i for i, g in enumerate(groups) for _ in g]
    iv = claims.interval(claims.nested(values, labels), 0.9)
    means = np.array([np.mean(g) for g in groups])
    plain = float(means.std(ddof=1))
    assert iv.spread >= plain - 1e-12
    assert iv.spread == pytest.approx(max(plain, claims.seed_noise_floor(
        [np.asarray(g, float) for g in groups])), abs=1e-12)


def _coverage(method_nested: bool, reps: int, sigma_base: float, seed: int) -> float:
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(3), 3)
    hits = 0
    for _ in range(reps):
        x = rng.normal(0, sigma_base, 3)[labels] + rng.normal(0, 1.0, 9)
        sample = claims.nested(x, labels) if method_nested else claims.seeds(x)
        iv = claims.interval(sample, 0.95)
        hits += iv.low < 0.0 < iv.high
    return hits / reps


@pytest.mark.parametrize("sigma_base", [0.0, 2.0])
def test_nested_interval_covers_at_its_level(sigma_base):
    reps = 3000
    cov = _coverage(True, reps, sigma_base, seed=2)
    mcse = math.sqrt(0.95 * 0.05 / reps)
    assert cov >= 0.95 - 3 * mcse


def test_seed_interval_ignoring_bases_undercovers():
    """Why the engine nests: with base-to-base variation, an interval over seeds that ignores
    the bases covers far below its level."""
    assert _coverage(False, 2000, 2.0, seed=3) < 0.85


# ----------------------------------------------------------------------------- sequential
def test_seed_plan_looks_and_batches():
    plan = claims.SeedPlan(bases=4, seeds_per_base=2, batch_bases=2, max_bases=7)
    assert plan.batches() == [[0, 1, 2, 3], [4, 5], [6]] and plan.looks == 3
    assert plan.max_seeds == 14
    with pytest.raises(ValueError, match="max_bases=2 is below bases=3"):
        claims.SeedPlan(bases=3, max_bases=2)
    with pytest.raises(ValueError, match="seeds_per_base=0"):
        claims.SeedPlan(seeds_per_base=0)


def _measure(rng, mean, sigma_base, spb, calls):
    def measure(bases, open_ids):
        calls.append(list(bases))
        labels = np.repeat(bases, spb)
        x = mean + rng.normal(0, sigma_base, len(bases))[np.searchsorted(bases, labels)] \
            + rng.normal(0, 1.0, labels.size)
        return {cid: claims.nested(x, labels) for cid in open_ids}
    return measure


def test_sequential_rule_keeps_the_error_rate_under_optional_stopping():
    """At the null boundary (true effect = threshold), the chance of a wrong pass over all
    looks is at most alpha / 2 per side (Bonferroni spending), within Monte Carlo error."""
    plan = claims.SeedPlan(bases=3, seeds_per_base=2, batch_bases=1, max_bases=6)
    spec = sup(0.0)
    rng = np.random.default_rng(4)
    reps, wrong_pass, wrong_fail = 1500, 0, 0
    for _ in range(reps):
        res = claims.decide_sequentially([spec], _measure(rng, 0.0, 0.5, 2, []), plan)
        v = res.decisions[0].verdict
        wrong_pass += v == "pass"
        wrong_fail += v == "fail"
    bound = 0.025 + 3 * math.sqrt(0.025 * 0.975 / reps)
    assert wrong_pass / reps <= bound and wrong_fail / reps <= bound


def test_naive_repeated_looks_at_full_alpha_would_inflate_the_error():
    """The same looks at the full level each time: the error rate the spending prevents.
    (Bases vary more than their seeds here, so the seed-noise floor rarely binds; where it
    binds the interval is wider and the naive rule's excess smaller.)"""
    plan = claims.SeedPlan(bases=3, seeds_per_base=2, batch_bases=1, max_bases=6)
    rng = np.random.default_rng(5)
    reps, wrong = 1500, 0
    for _ in range(reps):
        measure = _measure(rng, 0.0, 2.0, 2, [])
        sample = None
        for batch in plan.batches():
            new = measure(batch, frozenset({"c"}))["c"]
            sample = new if sample is None else sample + new
            if claims.decide(sup(0.0), sample).verdict == "pass":
                wrong += 1
                break
    assert wrong / reps > 0.025 + 3 * math.sqrt(0.025 * 0.975 / reps)


def test_sequential_adds_bases_only_while_undecided_and_keeps_early_verdicts():
    plan = claims.SeedPlan(bases=3, seeds_per_base=2, batch_bases=1, max_bases=5)
    rng = np.random.default_rng(6)
    calls = []
    big = sup(0.0)
    res = claims.decide_sequentially([big], _measure(rng, 5.0, 0.1, 2, calls), plan)
    assert calls == [[0, 1, 2]] and res.decisions[0].verdict == "pass"
    assert res.decisions[0].look == 1 and res.decisions[0].looks == 3
    assert res.decisions[0].interval.level == pytest.approx(1 - 0.05 / 3)
    calls.clear()
    res = claims.decide_sequentially([big], _measure(rng, 0.0, 0.0, 2, calls), plan)
    assert calls == [[0, 1, 2], [3], [4]] and res.bases_used == [0, 1, 2, 3, 4]
    assert res.decisions[0].interval.n_bases == 5


def test_look_shares_split_alpha_and_are_checked():
    plan = claims.SeedPlan(bases=3, seeds_per_base=2, batch_bases=4, max_bases=7,
                           look_shares=(0.5, 0.25))
    assert plan.looks == 2 and plan.batches() == [[0, 1, 2], [3, 4, 5, 6]]
    assert (plan.share(1), plan.share(2)) == (0.5, 0.25)
    assert claims.SeedPlan(bases=3, batch_bases=1, max_bases=5).share(2) == pytest.approx(1 / 3)
    assert claims.look_level(0.95, 2, 0.25) == pytest.approx(1 - 0.05 / 4)
    for bad in [(0.5,), (0.6, 0.5), (0.5, 0.0), [0.5, 0.25], (0.5, True)]:
        with pytest.raises(ValueError, match="look_shares="):
            claims.SeedPlan(bases=3, batch_bases=4, max_bases=7, look_shares=bad)
    with pytest.raises(ValueError, match="share=1.5"):
        claims.look_level(0.95, 2, 1.5)


def test_an_extended_plan_keeps_the_first_look_and_uses_its_share_at_the_new_look():
    """3 + 1 bases extended to 3 + 4 with shares (1/2, 1/4): the first look is decided at the
    old plan's level (its verdicts stand), the new last look at 1 - alpha / 4."""
    old = claims.SeedPlan(bases=3, seeds_per_base=2, batch_bases=1, max_bases=4)
    new = claims.SeedPlan(bases=3, seeds_per_base=2, batch_bases=4, max_bases=7,
                          look_shares=(0.5, 0.25))
    assert new.share(1) == old.share(1)
    rng = np.random.default_rng(8)
    res = claims.decide_sequentially([sup(0.0)], _measure(rng, 0.0, 0.0, 2, []), new)
    d = res.decisions[0]
    assert d.look == 2 and d.interval.n_bases == 7
    assert d.interval.level == pytest.approx(1 - 0.05 / 4)


@settings(max_examples=100, deadline=None)
@given(level=st.floats(0.5, 0.999), looks=st.integers(1, 6), a=st.floats(1e-3, 1.0),
       b=st.floats(1e-3, 1.0))
def test_look_level_is_monotone_in_the_share_and_equal_shares_are_the_default(level, looks, a,
                                                                             b):
    """A smaller share of alpha never gives a narrower interval (a higher level), and the
    equal split is the Bonferroni level of the planned looks."""
    lo, hi = sorted((a, b))
    assert claims.look_level(level, looks, lo) >= claims.look_level(level, looks, hi)
    assert claims.look_level(level, looks, 1.0 / looks) == pytest.approx(
        claims.look_level(level, looks))
    assert level <= claims.look_level(level, looks, hi) < 1.0


def test_equal_look_shares_decide_as_the_default_plan():
    plan = claims.SeedPlan(bases=3, seeds_per_base=2, batch_bases=1, max_bases=5)
    same = claims.SeedPlan(bases=3, seeds_per_base=2, batch_bases=1, max_bases=5,
                           look_shares=(1 / 3, 1 / 3, 1 / 3))
    for seed in range(5):
        got = [claims.decide_sequentially(
            [sup(0.0)], _measure(np.random.default_rng(seed), 0.3, 0.5, 2, []), p).decisions[0]
            for p in (plan, same)]
        assert got[0].verdict == got[1].verdict and got[0].look == got[1].look
        assert got[0].interval.level == pytest.approx(got[1].interval.level)
        assert got[0].interval.low == pytest.approx(got[1].interval.low)


def test_extending_a_finished_plan_keeps_the_error_rate():
    """At the null boundary: run the 3 + 1 plan; where it leaves the claim open, extend it to
    3 + 4 bases (same bases, shares 1/2 and 1/4). The union bound allows 1.25 alpha; the looks
    are nested, and a wrong pass over the whole procedure stays within alpha / 2 per side
    (bases varying twice as much as seeds, so the seed-noise floor rarely widens the
    interval)."""
    old = claims.SeedPlan(bases=3, seeds_per_base=2, batch_bases=1, max_bases=4)
    new = claims.SeedPlan(bases=3, seeds_per_base=2, batch_bases=4, max_bases=7,
                          look_shares=(0.5, 0.25))
    spec = sup(0.0)
    rng = np.random.default_rng(9)
    reps, wrong = 2000, 0
    for _ in range(reps):
        measure = _measure(rng, 0.0, 2.0, 2, [])
        bases = {b: measure([b], frozenset({"c"}))["c"] for b in range(7)}

        def replay(batch, open_ids, bases=bases):
            out = bases[batch[0]]
            for b in batch[1:]:
                out = out + bases[b]
            return {"c": out}

        v = claims.decide_sequentially([spec], replay, old).decisions[0].verdict
        if v == "inconclusive":
            v = claims.decide_sequentially([spec], replay, new).decisions[0].verdict
        wrong += v == "pass"
    assert wrong / reps <= 0.025 + 3 * math.sqrt(0.025 * 0.975 / reps)


def test_sequential_requires_a_sample_for_every_open_claim():
    plan = claims.SeedPlan(bases=2, seeds_per_base=1, batch_bases=1, max_bases=2)
    with pytest.raises(ValueError, match="no sample for open claim 'c'"):
        claims.decide_sequentially([sup()], lambda b, o: {}, plan)


# ----------------------------------------------------------------------------- properties
finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@given(values=st.lists(finite, min_size=0, max_size=12),
       nbases=st.integers(1, 4), t=st.floats(-5, 5), gap=st.floats(0, 5),
       direction=st.sampled_from([">", "<"]))
def test_every_verdict_follows_from_its_columns(values, nbases, t, gap, direction):
    fail = t - gap if direction == ">" else t + gap
    spec = Declared("c", "s", "superiority", t, direction=direction, fail_threshold=fail)
    labels = np.arange(len(values)) % nbases
    d = claims.decide(spec, claims.nested(values, labels))
    row = d.row_fields()
    lo, hi = row["ci_low"], row["ci_high"]
    if direction == ">":
        want = "pass" if lo > t else "fail" if hi < fail else "inconclusive"
    else:
        want = "pass" if hi < t else "fail" if lo > fail else "inconclusive"
    if not (math.isfinite(lo) and math.isfinite(hi)):
        want = "inconclusive"
    assert d.verdict == want
    assert row["n_seeds"] == len(values)


def test_proportion_uses_an_exact_binomial_interval():
    d = claims.decide(Declared("c", "s", "threshold", 0.01, direction="<"),
                      claims.proportion(np.zeros(48)))
    # 48 agreeing trials do not show a rate below 1%: the exact upper bound is ~7.4%
    assert d.interval.low == 0.0 and d.interval.high == pytest.approx(0.0740, abs=1e-3)
    assert d.verdict == "inconclusive"
    ci = sps.binomtest(3, 40).proportion_ci(0.95, method="exact")
    iv = claims.interval(claims.proportion([1] * 3 + [0] * 37))
    assert (iv.low, iv.high) == pytest.approx((ci.low, ci.high))
    assert claims.decide(Declared("c", "s", "threshold", 0.5, direction="<"),
                         claims.proportion(np.zeros(48))).verdict == "pass"
    with pytest.raises(ValueError, match="0/1 outcomes"):
        claims.proportion([0.5, 1.0])
