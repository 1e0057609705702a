"""SAR post-training arms: each loss against an independent float64 reconstruction from the
model's logits (teacher-forced, staggered own-prediction and free-running contexts), counted
forward passes, pairing/determinism of the compiled chunk, config errors, and the claim
logic of ``simulations/sar.py`` on constructed tables."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

from rlvr_lab import claims

from rlvr_lab.papers.sar import data as D
from rlvr_lab.papers.sar import model as M
from rlvr_lab.papers.sar import train as T
from rlvr_lab.papers.sar.study import Study, StudyConfig, seed_ids

LAW_CFG = D.LawConfig()
LAW = D.enumerate_law(LAW_CFG)
MODEL = M.ModelConfig()
GRAPHDEF, PARAMS = M.init(jax.random.key(0), MODEL, LAW_CFG)
CLASSES, FLAT = D.sample(jax.random.key(1), LAW, 6)
BLOCKS = D.block_ids(LAW_CFG.scales)
LOSS = jax.jit(T.make_loss(GRAPHDEF, LAW_CFG))


def logits_of(flat) -> np.ndarray:
    return np.asarray(M.forward(GRAPHDEF, PARAMS, CLASSES, jnp.asarray(flat)), np.float64)


def ce64(logits, targets) -> np.ndarray:
    """Per-token cross-entropy in float64, ``[B, T]``."""
    z = logits - logits.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return -np.take_along_axis(logp, np.asarray(targets)[..., None], -1)[..., 0]


def arm_loss(name: str, t: int = 0) -> float:
    u = jax.random.uniform(jax.random.key(2), (LAW_CFG.num_scales,) + FLAT.shape
                           + (LAW_CFG.levels,))
    arm = T.arms(temperature=0.0)[name]
    return float(LOSS(PARAMS, u, CLASSES, FLAT, jnp.int32(t), T.knobs(arm, LAW_CFG.scales))[0])


def test_teacher_forcing_is_the_mean_token_ce():
    assert arm_loss("tf") == pytest.approx(ce64(logits_of(FLAT), FLAT).mean(), rel=1e-5)


def test_sar_uses_own_one_step_predictions_as_staggered_contexts():
    tf_logits = logits_of(FLAT)
    own = tf_logits.argmax(-1)                       # temperature 0: the argmax rollout
    # every scale's input is its parent token: in ``own`` that is the model's own prediction
    # of the parent scale made from ground-truth contexts (one step, staggered)
    sf = ce64(logits_of(own), FLAT)
    later = BLOCKS > 0
    want = ce64(tf_logits, FLAT).mean() + sf[:, later].sum(-1).mean() / later.sum()
    assert arm_loss("sar") == pytest.approx(want, rel=1e-5)


def test_own_contexts_differ_from_teacher_forced_ones():
    own = logits_of(FLAT).argmax(-1)
    par = D.parent_index(LAW_CFG.scales)
    assert (np.asarray(FLAT)[:, par] != own[:, par]).any()   # an untrained model errs


def test_alternating_splits_scales_between_teacher_and_student():
    tf_logits = logits_of(FLAT)
    sf = ce64(logits_of(tf_logits.argmax(-1)), FLAT)
    tf = ce64(tf_logits, FLAT)
    even = BLOCKS % 2 == 0
    want = (np.where(even, tf, sf)).sum(-1).mean() / BLOCKS.size
    assert arm_loss("alternating") == pytest.approx(want, rel=1e-5)


def test_full_student_forcing_uses_a_free_running_generation():
    ctx = np.asarray(M.sample(jax.random.key(9), GRAPHDEF, PARAMS, CLASSES, LAW_CFG,
                              temperature=0.0, upto=LAW_CFG.num_scales - 1))
    want = ce64(logits_of(ctx), FLAT).mean()
    assert arm_loss("student") == pytest.approx(want, rel=1e-5)


def test_distill_ablation_targets_the_teacher_forced_distribution():
    tf_logits = logits_of(FLAT)
    sf_logits = logits_of(tf_logits.argmax(-1))
    p = np.exp(tf_logits - tf_logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    z = sf_logits - sf_logits.max(-1, keepdims=True)
    logq = z - np.log(np.exp(z).sum(-1, keepdims=True))
    soft = -(p * logq).sum(-1)
    later = BLOCKS > 0
    want = ce64(tf_logits, FLAT).mean() + soft[:, later].sum(-1).mean() / later.sum()
    assert arm_loss("sar_distill") == pytest.approx(want, rel=1e-5)


def test_forward_passes_are_counted_as_executed():
    arms = list(T.arms().values())
    passes = T.forward_passes(GRAPHDEF, PARAMS, LAW_CFG, LAW, arms)
    assert passes["tf"] == 1 and passes["sar"] == 2 and passes["alternating"] == 2
    assert passes["student"] == 1 + (LAW_CFG.num_scales - 1) + 1


def test_chunk_is_deterministic_and_arms_share_batches():
    tc = T.TrainConfig(batch_size=8, pretrain_steps=2, post_steps=2)
    graphdef, init = T.make_init(MODEL, LAW_CFG, tc)
    state = init(jax.random.split(jax.random.key(3), 2))
    keys = jax.random.split(jax.random.key(4), 2)
    chunk = T.make_chunk(graphdef, LAW_CFG, LAW, tc, 2)
    tf = T.knobs(T.arms()["tf"], LAW_CFG.scales)
    a, ia = chunk(state, keys, 0, tf, 1e-3)
    b, ib = chunk(state, keys, 0, tf, 1e-3)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    # sar's teacher-forced CE of the first step is tf's: same params, same batch
    _, isar = chunk(state, keys, 0, T.knobs(T.arms()["sar"], LAW_CFG.scales), 1e-3)
    np.testing.assert_allclose(np.asarray(isar.ce_tf)[:, 0], np.asarray(ia.ce_tf)[:, 0],
                               rtol=1e-6)
    assert np.isfinite(np.asarray(ia.loss)).all()


@pytest.mark.parametrize("kwargs, match", [
    (dict(rollout="beam"), "rollout"),
    (dict(rollout="none", sf_weight=(1.0, 1.0)), "needs a rollout"),
    (dict(rollout="full", alternate_scales=True), "alternate_scales"),
    (dict(rollout="ssr", rollout_temperature=-1.0), "rollout_temperature"),
    (dict(csfl_target="soft"), "csfl_target"),
])
def test_arm_errors_name_the_value(kwargs, match):
    with pytest.raises(ValueError, match=match):
        T.Arm("x", **kwargs)


def test_study_config_errors():
    with pytest.raises(ValueError, match="arms="):
        StudyConfig(arms=("sar",))
    with pytest.raises(ValueError, match="pretrain_steps"):
        StudyConfig(train=T.TrainConfig(pretrain_steps=150, post_steps=100), chunk=100)


# ----------------------------------------------------------------------------- claims
def fake_study(fd: dict, mismatch: dict, bases: int = 3, per_base: int = 2) -> Study:
    """Constructed tables: ``bases`` pre-trained bases with ``per_base`` seeds each, base
    ``b``'s seeds labelled as :func:`study.seed_ids` labels them."""
    rng = np.random.default_rng(0)
    rows, scales = [], []
    for s in seed_ids(range(bases), per_base):
        b = int(s) // per_base
        rows += [{"arm": "pretrain", "base": b, "seed": s, "step": -400, "fd": 5.0 + 0.1 * b,
                  "support": 0.0},
                 {"arm": "pretrain", "base": b, "seed": s, "step": -200, "fd": 1.0,
                  "support": 0.1},
                 {"arm": "pretrain", "base": b, "seed": s, "step": 0, "fd": 0.6,
                  "support": 0.2}]
        for arm, v in fd.items():
            rows += [{"arm": arm, "base": b, "seed": s, "step": 0, "fd": 0.6, "support": 0.2},
                     {"arm": arm, "base": b, "seed": s, "step": 100,
                      "fd": v + 0.01 * rng.normal(), "support": 0.2}]
        scales += [{"arm": arm, "base": b, "seed": s, "scale": k,
                    "mismatch": (v + 0.01 * rng.normal()) * (k > 0)}
                   for arm, v in mismatch.items() for k in range(5)]
    passes = pd.DataFrame({"arm": ["tf", "sar", "student", "alternating"],
                           "forward_passes": [1.0, 2.0, 6.0, 2.0]})
    timing = pd.DataFrame({"arm": ["tf", "sar"], "chunk": [0, 0], "steps": [100, 100],
                           "seconds": [1.0, 1.8]})
    train = pd.DataFrame({"arm": ["tf", "sar", "student"], "base": 0, "seed": 0, "step": 1,
                          "loss": 1.0, "grad_norm": [0.5, 1.0, 3.0]})
    return Study(pd.DataFrame(rows), pd.DataFrame(scales), timing, passes, train)


def decide(study: Study) -> dict:
    from simulations import sar as sim

    return {d.spec.id: d for d in claims.decide_all(sim.CLAIMS, sim.samples(study))}


def test_seed_ids_are_unique_across_batches_of_bases():
    first, second = seed_ids([0, 1, 2], 3), seed_ids([3, 4], 3)
    assert first.tolist() == list(range(9)) and second.tolist() == list(range(9, 15))


def test_samples_nest_seeds_in_their_bases():
    from simulations import sar as sim

    got = sim.samples(fake_study({"tf": 0.6, "sar": 0.5, "student": 0.9, "alternating": 0.55},
                                 {"base": 1.0, "tf": 1.0, "sar": 0.4}))
    fd = got["sar_lowers_fd_vs_tf"]
    assert fd.n_seeds == 6 and fd.n_bases == 3
    assert fd.bases.tolist() == [0, 0, 1, 1, 2, 2]
    assert got["sar_one_extra_forward_pass"].deterministic
    assert got["sar_one_extra_forward_pass"].values.tolist() == [0.0]   # 2 - 1 - 1


def test_claims_follow_the_measured_effects():
    got = decide(fake_study({"tf": 0.6, "sar": 0.5, "student": 0.9, "alternating": 0.55},
                            {"base": 1.0, "tf": 1.0, "sar": 0.4}))
    assert got["pretraining_lowers_fd"].verdict == "pass"
    assert got["sar_lowers_fd_vs_tf"].verdict == "pass"
    assert got["sar_lowers_fd_vs_tf"].interval.estimate == pytest.approx(-1 / 6, abs=0.02)
    assert got["sar_shrinks_mismatch"].verdict == "pass"
    assert got["full_student_forcing_worse"].verdict == "pass"
    assert got["alternating_schedule_worse"].verdict == "pass"
    assert got["sar_one_extra_forward_pass"].verdict == "pass"

    got = decide(fake_study({"tf": 0.5, "sar": 0.8, "student": 0.6, "alternating": 0.8},
                            {"base": 1.0, "tf": 0.4, "sar": 1.0}))
    assert got["sar_lowers_fd_vs_tf"].verdict == "fail"
    assert got["sar_shrinks_mismatch"].verdict == "fail"
    assert got["full_student_forcing_worse"].verdict == "fail"
    assert got["alternating_schedule_worse"].verdict == "inconclusive"


def test_three_extra_passes_fail_the_overhead_claim():
    study = fake_study({"tf": 0.6, "sar": 0.5, "student": 0.9, "alternating": 0.55},
                       {"base": 1.0, "tf": 1.0, "sar": 0.4})
    study = study._replace(passes=pd.DataFrame({"arm": ["tf", "sar"],
                                                "forward_passes": [1.0, 4.0]}))
    assert decide(study)["sar_one_extra_forward_pass"].verdict == "fail"


def test_failed_control_makes_comparisons_inconclusive():
    study = fake_study({"tf": 0.6, "sar": 0.5, "student": 0.9, "alternating": 0.7},
                       {"base": 1.0, "tf": 1.0, "sar": 0.4})
    curves = study.curves.copy()
    curves.loc[(curves.arm == "pretrain") & (curves.step == -400), "fd"] = 0.6   # no learning
    got = decide(study._replace(curves=curves))
    assert got["pretraining_lowers_fd"].verdict == "fail"
    assert got["sar_lowers_fd_vs_tf"].verdict == "inconclusive"
    assert "positive control" in got["sar_lowers_fd_vs_tf"].reason
    # the pass count does not depend on learning: declared gated=False, still decided
    assert got["sar_one_extra_forward_pass"].verdict == "pass"
