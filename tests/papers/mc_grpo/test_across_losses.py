"""``mc_grpo_across_losses``: the per-loss arms select the loss they claim (through the trainer's
own loss path, against float64 NumPy references), the averaged-over-losses estimand, and the
declarations and gating of the claims."""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_lab import claims, experiments
from rlvr_lab.papers.mc_grpo import study
from rlvr_lab.train import core
from simulations import mc_grpo as M

LOSS_IDS = {"mc_grpo_across_losses", "mc_grpo_across_losses_grpo",
            "mc_grpo_across_losses_dapo", "mc_grpo_across_losses_gspo"}


@pytest.fixture(scope="module")
def configs():
    return study.loss_configs(M.small_base(True))


# ----------------------------------------------------------------------------- the arms
def test_arms_are_the_study_arms_with_only_the_loss_changed(configs):
    base = M.small_base(True)
    assert set(configs) == {study.loss_arm(b, loss) for b in ("median", "mean")
                            for loss in ("GRPO", "DAPO", "GSPO")}
    for loss in study.LOSSES:
        med, mean = configs[study.loss_arm("median", loss)], configs[study.loss_arm("mean", loss)]
        # the authors' advantage (median, MAD, (G+1)/#non-zero rescale) vs their --mc=False
        assert (med.advantage, dict(med.advantage_options)) == (
            "mc_grpo_rescaled", {"scale": "mad", "rescale": True})
        assert mean.advantage == "grpo_drop_min_abs"
        assert med.num_generations == mean.num_generations == 3   # G=2 in the loss, G+1 drawn
        for cfg in (med, mean):
            (study_arm,) = M.small_configs(base, [(study.LOSS_BASELINES[
                "median" if cfg is med else "mean"], 2)]).values()
            changed = {f.name for f in dataclasses.fields(cfg)
                       if getattr(cfg, f.name) != getattr(study_arm, f.name)}
            assert changed <= {"policy_loss", "epsilon", "epsilon_high", "loss_agg_mode",
                               "eval_every"}
            assert cfg.eval_every == cfg.steps and cfg.beta == 0.04 and cfg.max_grad_norm == 1.0


def test_each_loss_selects_what_it_claims(configs):
    dapo = configs[study.loss_arm("median", "DAPO")]
    assert (dapo.policy_loss, dapo.epsilon, dapo.epsilon_high, dapo.loss_agg_mode) == (
        "ppo_clip", 0.2, 0.28, "token-mean")   # clip-higher, token mean
    grpo = configs[study.loss_arm("median", "GRPO")]
    assert (grpo.policy_loss, grpo.epsilon, grpo.epsilon_high, grpo.loss_agg_mode) == (
        "ppo_clip", 0.2, None, "seq-mean-token-mean")
    gspo = configs[study.loss_arm("median", "GSPO")]
    assert (gspo.policy_loss, gspo.epsilon, gspo.epsilon_high, gspo.loss_agg_mode) == (
        "gspo", 3e-4, 4e-4, "seq-mean-token-mean")


def _batch():
    """Four rollouts of up to 5 tokens; token ratios that straddle every clip range within a
    sequence, so token-level and sequence-level ratios give different losses."""
    rng = np.random.default_rng(3)
    old = rng.normal(-1.5, 0.5, (4, 5))
    delta = np.array([[0.3, -0.25, 0.02, 0.5, 0.0],      # tokens inside and outside [0.8, 1.28]
                      [-0.4, 0.1, 0.2, -0.1, 0.05],
                      [1e-4, 2e-4, -5e-5, 3e-4, 1e-4],   # a sequence ratio inside GSPO's range
                      [0.05, -0.3, 0.0, 0.0, 0.0]])
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 0, 0, 0]], bool)
    adv = np.array([1.5, -2.0, 0.75, -0.5])
    return old + delta, old, adv, mask


def _reference(logp, old, adv, mask, loss: str) -> float:
    """Float64 loops: PPO clip per token (GRPO 0.2/0.2, DAPO 0.2/0.28) or GSPO's one ratio per
    sequence (the exp of the mean token log-ratio, 3e-4/4e-4); then the loss's aggregation."""
    lo, hi = {"GRPO": (0.2, 0.2), "DAPO": (0.2, 0.28), "GSPO": (3e-4, 4e-4)}[loss]
    per_seq, total, count = [], 0.0, 0
    for i in range(logp.shape[0]):
        valid = [t for t in range(logp.shape[1]) if mask[i, t]]
        if loss == "GSPO":
            s = np.exp(sum(logp[i, t] - old[i, t] for t in valid) / len(valid))
            tokens = [max(-adv[i] * s, -adv[i] * min(max(s, 1 - lo), 1 + hi))] * len(valid)
        else:
            tokens = []
            for t in valid:
                r = np.exp(logp[i, t] - old[i, t])
                tokens.append(max(-adv[i] * r, -adv[i] * min(max(r, 1 - lo), 1 + hi)))
        per_seq.append(sum(tokens) / len(tokens))
        total, count = total + sum(tokens), count + len(tokens)
    return total / count if loss == "DAPO" else sum(per_seq) / len(per_seq)


@pytest.mark.parametrize("loss", ["GRPO", "DAPO", "GSPO"])
def test_trainer_loss_path_matches_float64_reference(configs, loss):
    """The loss the trainer builds from the arm's config (``core.policy_loss`` with the
    config's clip options, ``core.objective`` with its aggregation) equals the reference."""
    cfg = configs[study.loss_arm("mean", loss)]
    logp, old, adv, mask = _batch()
    with jax.enable_x64(True):
        fn = core.policy_loss(cfg.policy_loss, cfg.loss_options())
        got, _ = core.objective(fn, jnp.asarray(logp), jnp.asarray(old),
                                jnp.asarray(adv)[:, None], jnp.asarray(mask),
                                agg_mode=cfg.loss_agg_mode, options=cfg.loss_options())
        got = float(got)
    assert got == pytest.approx(_reference(logp, old, adv, mask, loss), rel=1e-12, abs=1e-14)
    # the three losses differ on this batch (each reference is a different function)
    others = {o: _reference(logp, old, adv, mask, o) for o in study.LOSSES if o != loss}
    assert all(abs(got - v) > 1e-4 for v in others.values())


def test_gspo_gradient_is_sequence_level(configs):
    """GSPO's gradient in log pi(token): ``-A s / |y| / B`` for every token of a sequence whose
    ratio is inside the clip range (one weight per sequence, not per token), 0 when clipped."""
    cfg = configs[study.loss_arm("median", "GSPO")]
    logp, old, adv, mask = _batch()
    with jax.enable_x64(True):
        fn = core.policy_loss(cfg.policy_loss, cfg.loss_options())

        def total(lp):
            return core.objective(fn, lp, jnp.asarray(old), jnp.asarray(adv)[:, None],
                                  jnp.asarray(mask), agg_mode=cfg.loss_agg_mode,
                                  options=cfg.loss_options())[0]

        grad = np.asarray(jax.grad(total)(jnp.asarray(logp)))
    want = np.zeros_like(logp)
    for i in range(4):
        n = mask[i].sum()
        s = np.exp((logp[i] - old[i])[mask[i]].mean())
        # the unclipped term is the larger loss (always so inside the range)
        if -adv[i] * s >= -adv[i] * np.clip(s, 1 - 3e-4, 1 + 4e-4):
            want[i, mask[i]] = -adv[i] * s / n / 4
    np.testing.assert_allclose(grad, want, rtol=1e-10, atol=1e-15)
    assert np.count_nonzero(want) > 0 and np.count_nonzero(want) < mask.sum()


# ----------------------------------------------------------------------------- the estimand
def _final(rng, n, means):
    out = {}
    for loss, m in zip(study.LOSSES, means):
        mean = rng.uniform(0.2, 0.5, n)
        out[study.loss_arm("mean", loss)] = mean
        out[study.loss_arm("median", loss)] = mean + m + rng.normal(0, 0.05, n)
    return out


def test_min_over_losses_matches_loops():
    rng = np.random.default_rng(0)
    final = _final(rng, 7, (0.02, -0.01, 0.03))
    got = study.loss_gains(final)
    assert set(got) == LOSS_IDS
    for s in range(7):
        per = []
        for loss in ("GRPO", "DAPO", "GSPO"):
            g = float(final[study.loss_arm("median", loss)][s]) - float(
                final[study.loss_arm("mean", loss)][s])
            assert got[f"mc_grpo_across_losses_{loss.lower()}"][s] == pytest.approx(g, abs=0)
            per.append(g)
        assert got["mc_grpo_across_losses"][s] == pytest.approx(sum(per) / 3, abs=1e-15)
    # a loss whose arms did not run: its gain is missing and so is the average
    part = study.loss_gains({k: v for k, v in final.items() if "GSPO" not in k[0]})
    assert set(part) == {"mc_grpo_across_losses_grpo", "mc_grpo_across_losses_dapo"}
    # arms run on more bases (later looks): the average over the common first seeds
    longer = dict(final)
    for b in ("median", "mean"):
        longer[study.loss_arm(b, "DAPO")] = np.append(final[study.loss_arm(b, "DAPO")], 0.4)
    np.testing.assert_array_equal(study.loss_gains(longer)["mc_grpo_across_losses"],
                                  got["mc_grpo_across_losses"])


def test_the_average_is_unbiased_where_a_minimum_would_not_be():
    """Three losses that all help (mean gain 0.02) with noisy seeds: the per-seed average of the
    gains keeps the mean gain, while a per-seed minimum would sit below 0 on average (E[min] <=
    min E) -- why the conjunction is an average and each loss has its own claim."""
    rng = np.random.default_rng(1)
    g = study.loss_gains(_final(rng, 4000, (0.02, 0.02, 0.02)))
    per = [g[f"mc_grpo_across_losses_{n}"] for n in ("grpo", "dapo", "gspo")]
    assert all(x.mean() > 0.015 for x in per)
    assert g["mc_grpo_across_losses"].mean() == pytest.approx(0.02, abs=0.005)
    assert np.min(np.stack(per), axis=0).mean() < 0


def _decide(final, control=0.2):
    specs = [d for d in experiments.get("mc_grpo_small").declared
             if d.id in LOSS_IDS or d.control]
    n = next(iter(final.values())).size
    bases_ = np.repeat(np.arange(n // 2), 2)
    samples = {k: claims.nested(v, bases_) for k, v in study.loss_gains(final).items()}
    samples["small_grpo_g8_raises_pass1"] = claims.nested(
        control + np.linspace(-0.01, 0.01, n), bases_)
    return {d.spec.id: d.verdict for d in claims.decide_all(specs, samples)}


def test_engine_verdicts_and_the_control_gate():
    rng = np.random.default_rng(2)
    helps = _final(rng, 16, (0.3, 0.3, 0.3))
    assert set(_decide(helps).values()) == {"pass"}
    one_hurts = _final(rng, 16, (0.3, -0.3, 0.3))
    got = _decide(one_hurts)
    assert got["mc_grpo_across_losses_dapo"] == "fail"
    assert got["mc_grpo_across_losses"] == "pass"       # on average over the losses it helps
    assert got["mc_grpo_across_losses_grpo"] == got["mc_grpo_across_losses_gspo"] == "pass"
    worse = _decide(_final(rng, 16, (0.1, -0.6, 0.1)))
    assert worse["mc_grpo_across_losses"] == "fail"
    # the positive control does not pass: the comparisons are inconclusive
    gated = _decide(helps, control=0.0)
    assert {gated[i] for i in LOSS_IDS} == {"inconclusive"}


def test_declarations_and_the_arms_they_need():
    decl = {d.id: d for d in experiments.get("mc_grpo_small").declared}
    assert LOSS_IDS <= set(decl)
    for cid in LOSS_IDS:
        d = decl[cid]
        assert (d.rule, d.direction, d.threshold, d.fail_threshold) == (
            "superiority", ">", 0.0, 0.0)
        assert d.gated and not d.control and d.paper_ref and d.unit == "held-out pass@1"
    assert "mean over" in decl["mc_grpo_across_losses"].estimand
    # extra arms run while a claim that compares them is open, and only then
    arms = set(study.loss_configs(M.small_base(True)))
    assert M.NEEDS["mc_grpo_across_losses"] == arms
    for loss in study.LOSSES:
        assert M.NEEDS[study.loss_claim(loss)] == {study.loss_arm("median", loss),
                                                   study.loss_arm("mean", loss)}
    others = set().union(*(v for k, v in M.NEEDS.items() if k not in LOSS_IDS))
    assert not others & arms
