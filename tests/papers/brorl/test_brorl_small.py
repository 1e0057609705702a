"""BroRL small-model pieces: the mass-balance sweep on given logits against plain float64
NumPy loops, the decision logits' correct set, and continuing a checkpoint."""
from __future__ import annotations

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_lab.papers.brorl import small


def _ref_pg_exact(z, correct, counts, lr):
    """Loops: one sampled-PG logit step, then the exact change of the correct mass."""
    z = np.asarray(z, float)
    p = np.exp(z - z.max())
    p /= p.sum()
    n = counts.sum()
    f = counts / max(n, 1)
    r = np.where(correct, 1.0, -1.0)
    t = float((r * f).sum())
    dz = lr * (r * f - p * t)
    z2 = z + dz
    p2 = np.exp(z2 - z2.max())
    p2 /= p2.sum()
    return float(p2[correct].sum() - p[correct].sum())


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 1000))
def test_sweep_exact_change_matches_loops(seed):
    rng = np.random.default_rng(seed)
    v = 7
    logits = rng.normal(size=(2, v)) * 2
    correct = np.zeros((2, v), bool)
    correct[0, 1] = correct[1, [2, 5]] = True
    n_values = (1, 4, 16)
    out = small.mass_balance_sweep(jax.random.key(seed), logits, correct, n_values,
                                   trials=3, lr=0.05)
    assert out["pg_exact"].shape == (2, 3, 3)
    # the three terms sum to the first-order total; for small lr the exact change is close
    np.testing.assert_allclose(out["pg_sampled_correct"] + out["pg_sampled_wrong"]
                               + out["pg_unsampled"], out["pg_total"], rtol=1e-10, atol=1e-14)
    # the idealised sampled terms are never negative (the paper's sign result)
    assert (out["ideal_sampled_correct"] >= -1e-15).all()
    assert (out["ideal_sampled_wrong"] >= -1e-15).all()
    # the exact change agrees with the first-order total up to second order in lr (the
    # exact change itself is checked against loops on fixed counts below)
    assert np.abs(out["pg_exact"] - out["pg_total"]).max() <= 0.05 ** 2 * 4


def test_pg_exact_against_loops_on_fixed_counts():
    """The sweep's per-draw quantity is theory.sampled_pg_mass_balance; check it on fixed
    counts against the loop reference (float64)."""
    from rlvr_lab.papers.brorl import theory as mb
    rng = np.random.default_rng(0)
    z = rng.normal(size=9)
    correct = np.zeros(9, bool)
    correct[[0, 4]] = True
    counts = np.array([3, 0, 1, 0, 0, 2, 0, 0, 2], float)
    with jax.enable_x64(True):
        got = float(mb.sampled_pg_mass_balance(z, correct, counts, lr=0.3)["exact"])
    assert got == pytest.approx(_ref_pg_exact(z, correct, counts, 0.3), rel=1e-10, abs=1e-14)


def test_sweep_rejects_bad_arguments():
    with pytest.raises(ValueError, match="n_values"):
        small.mass_balance_sweep(None, np.zeros((1, 3)), np.ones((1, 3), bool), (0, 2))
    with pytest.raises(ValueError, match="trials"):
        small.mass_balance_sweep(None, np.zeros((1, 3)), np.ones((1, 3), bool), (2,), trials=0)


def test_decision_logits_correct_set_and_continue_from():
    """On an untrained tiny policy: one correct token per problem (the reference tens digit),
    one-digit answers skipped; continue_from swaps only the start policy."""
    import dataclasses

    from rlvr_lab.envs import arithmetic, tokenizer
    from rlvr_lab.models import transformer
    from rlvr_lab.train import sft
    cfg = dataclasses.replace(sft.PRESETS["quick"], d_model=16, n_layers=1, n_heads=2)
    policy = transformer.init(jax.random.key(0), cfg.model_config())
    probs = [arithmetic.make_problem(47, 85), arithmetic.make_problem(2, 3),
             arithmetic.make_problem(12, 34)]
    logits, correct = small.decision_logits(policy, probs, cfg)
    assert logits.shape == (2, tokenizer.VOCAB_SIZE) and correct.sum(1).tolist() == [1, 1]
    assert np.flatnonzero(correct[0])[0] == tokenizer.encode("3")[0]   # 132 -> "231>132"
    assert np.flatnonzero(correct[1])[0] == tokenizer.encode("4")[0]   # 46 -> "64>46"
    with pytest.raises(ValueError, match="two-digit"):
        small.decision_logits(policy, probs[1:2], cfg)

    class T:
        config = "c"
        base_policy = "old"
    t2 = small.continue_from(T(), "new")
    assert t2.base_policy == "new" and t2.config == "c"


# ----------------------------------------------------------------------------- the study
def _fake_run(pass1_by_eval, steps=None):
    """A stand-in for ``sequence.Run``: only ``evals`` (pass@1 ``[E, S]``)."""
    from types import SimpleNamespace
    pa = np.asarray(pass1_by_eval, float)[:, :, None]
    steps = list(range(len(pa))) if steps is None else steps
    return SimpleNamespace(evals={"step": steps, "pass_at": pa})


def test_seed_numbers_are_the_paired_differences():
    res = {"phase1": _fake_run([[0.2, 0.3], [0.6, 0.7], [0.62, 0.69]]),
           "arms": {"N=8": _fake_run([[0.6, 0.7], [0.61, 0.7], [0.65, 0.72]], steps=[0, 8, 16]),
                    "N=64": _fake_run([[0.6, 0.7], [0.7, 0.75]], steps=[0, 2])},
           "seconds": {"N=8": 1.0, "N=64": 4.0}, "s64": 2,
           "sweep": {"pg_exact": np.array([[[1.0, -1.0], [1.0, 1.0]],
                                           [[-1.0, 1.0], [1.0, -1.0]]])}}
    got = small.seed_numbers(res)
    np.testing.assert_allclose(got["control"], [0.42, 0.39])
    np.testing.assert_allclose(got["plateau"], [0.02, -0.01])
    np.testing.assert_allclose(got["beyond"], [0.1, 0.05])
    np.testing.assert_allclose(got["equal_rollouts"], [0.05, 0.03])
    # N=64 takes 4x the seconds of N=8 per step: 2 steps = 8 steps of N=8 (its 2nd evaluation)
    np.testing.assert_allclose(got["equal_wall_time"], [0.09, 0.05])
    # N=1024 is the last column: two of the four (decision, trial) pairs went down there
    # (one in the first column)
    np.testing.assert_allclose(got["mass_p_decrease"], [0.5])


def test_phase2_starts_from_each_bases_own_checkpoint(monkeypatch):
    """Every phase-2 trainer of base b gets base b's phase-1 seed-0 policy (not base 0's)."""
    from types import SimpleNamespace

    from rlvr_lab.train import sequence, sft
    made = []

    class FakeTrainer:
        def __init__(self, config, base_policy=None):
            self.config, self.pool = config, ["p"] * 4
            self.base_policy = ("sft", config.base.seed) if base_policy is None else base_policy
            made.append(self)

    def fake_run(config, key, num_seeds, *, trainer, stop_after=None):
        # a seed-stacked "policy" that names the SFT base it trained from and the seed
        policy = {"base": np.array([config.base.seed] * num_seeds),
                  "seed": np.arange(num_seeds)}
        return SimpleNamespace(state=SimpleNamespace(policy=policy), trainer=trainer)

    monkeypatch.setattr(small.sequence, "Trainer", FakeTrainer)
    monkeypatch.setattr(small.sequence, "run", fake_run)
    monkeypatch.setattr(small, "step_seconds", lambda *a, **k: 1.0)
    monkeypatch.setattr(small, "decision_logits", lambda policy, problems, config: (policy, None))
    monkeypatch.setattr(small, "mass_balance_sweep", lambda key, logits, *a, **k: logits)
    cfg = sequence.SequenceRLConfig(base=sft.PRESETS["quick"], steps=4, eval_every=2)
    keys = {k: jax.random.key(i) for i, k in enumerate(("phase1", "phase2", "timing", "mass"))}
    for b in (0, 2):
        res = small.run_base(cfg, b, keys, 2, 1)
        want = cfg.base.seed + b
        assert res["p1"].base.seed == want
        ckpt = res["sweep"]               # the checkpoint the mass balance was computed on
        assert int(ckpt["base"]) == want and int(ckpt["seed"]) == 0
        for arm in ("N=8", "N=64"):
            start = res["arms"][arm].trainer.base_policy
            assert int(start["base"]) == want and int(start["seed"]) == 0, (b, arm)
        assert res["arms"]["N=64"].trainer.config.num_generations == small.N_LARGE_LM


def test_phase2_arms_spend_equal_rollouts(monkeypatch):
    """N=8 runs N_LARGE_LM // N_SMALL_LM times N=64's steps from the same checkpoint, so both
    arms generate the same number of phase-2 rollouts (the revival claim's matching)."""
    from types import SimpleNamespace

    from rlvr_lab.train import sequence, sft
    spent = {}

    class FakeTrainer:
        def __init__(self, config, base_policy=None):
            self.config, self.pool, self.base_policy = config, ["p"] * 4, base_policy

    def fake_run(config, key, num_seeds, *, trainer, stop_after=None):
        steps = config.steps if stop_after is None else min(config.steps, stop_after)
        if trainer.base_policy is not None:      # a phase-2 arm
            spent[trainer.config.num_generations] = (
                steps * trainer.config.num_prompts * trainer.config.num_generations)
        return SimpleNamespace(state=SimpleNamespace(policy={"w": np.zeros(num_seeds)}))

    monkeypatch.setattr(small.sequence, "Trainer", FakeTrainer)
    monkeypatch.setattr(small.sequence, "run", fake_run)
    monkeypatch.setattr(small, "continue_from",
                        lambda trainer, ckpt: FakeTrainer(trainer.config, base_policy=ckpt))
    monkeypatch.setattr(small, "step_seconds", lambda *a, **k: 1.0)
    monkeypatch.setattr(small, "decision_logits", lambda policy, problems, config: (policy, None))
    monkeypatch.setattr(small, "mass_balance_sweep", lambda key, logits, *a, **k: logits)
    cfg = sequence.SequenceRLConfig(base=sft.PRESETS["quick"], steps=40, eval_every=2,
                                    num_generations=small.N_SMALL_LM)
    keys = {k: jax.random.key(i) for i, k in enumerate(("phase1", "phase2", "timing", "mass"))}
    for s64 in (1, 2, 5):
        spent.clear()
        small.run_base(cfg, 0, keys, 2, s64)
        assert set(spent) == {small.N_SMALL_LM, small.N_LARGE_LM}
        assert spent[small.N_SMALL_LM] == spent[small.N_LARGE_LM] == (
            s64 * cfg.num_prompts * small.N_LARGE_LM)


def test_mass_frame_pools_checkpoints():
    n = len(small.SMALL_N_VALUES)
    keys = [f"{u}_{t}" for u in ("pg", "ideal")
            for t in ("sampled_correct", "sampled_wrong", "unsampled", "total", "exact")]
    a = {k: np.ones((2, 3, n)) for k in keys}
    b = {k: -np.ones((1, 3, n)) for k in keys}
    frame = small.mass_frame([a, b])
    np.testing.assert_allclose(frame.pg_p_decrease, 1 / 3)
    assert frame.N.tolist() == list(small.SMALL_N_VALUES)


def test_brorl_claims_are_declared_for_the_engine():
    """Every claim id of the BroRL experiments is declared once; the GPU-throughput claims are
    not applicable on a CPU; the small study has a positive control and bases >= 3 in full."""
    from rlvr_lab import experiments
    from simulations import brorl, brorl_throughput  # noqa: F401 (registers)
    got = {n: experiments.get(n) for n in ("brorl_small", "brorl_mass_balance",
                                           "brorl_training", "brorl_throughput")}
    assert set(got["brorl_small"].claims) >= {
        "small_phase1_plateau", "small_large_n_improves_beyond_plateau",
        "small_revival_equal_rollouts", "small_large_n_beats_n8_equal_wall_time",
        "small_mass_decrease_vanishes_sampled_pg"}
    na = {d.id for e in got.values() for d in e.declared if d.not_applicable}
    assert na == {"small_large_n_beats_n8_equal_wall_time", "large_n_raises_throughput"}
    assert [d.id for d in got["brorl_small"].declared if d.control] == [
        "small_phase1_raises_pass1"]
    assert got["brorl_small"].plan.bases >= 3 and got["brorl_small"].quick_plan.bases >= 2
    # one claim per estimand: revival at equal rollouts is declared once (renamed, not copied)
    assert "small_large_n_beats_n8_equal_rollouts" not in got["brorl_small"].claims
    # the equal-rollout revival: decided on the bank, its small-model twin beside it
    revival = {d.id: d for d in got["brorl_training"].declared}["brorl_revival_equal_rollouts"]
    twin = {d.id: d for d in got["brorl_small"].declared}["small_revival_equal_rollouts"]
    for claim in (revival, twin):
        assert (claim.rule, claim.direction, claim.threshold, claim.fail_threshold) == (
            "superiority", ">", 0.0, 0.0)
    assert "brorl_revival_equal_rollouts" not in got["brorl_small"].claims
    assert brorl.SMALL_NUMBERS["small_revival_equal_rollouts"] == "equal_rollouts"
    # N=8 continues with phase 1's config, stopped after 8x N=64's steps: phase 1 must be at
    # least that long, or N=8 would stop early and spend fewer rollouts
    for quick in (True, False):
        assert brorl.small_phase1(quick).steps >= (
            small.N_LARGE_LM // small.N_SMALL_LM * brorl.small_phase2_steps(quick))
