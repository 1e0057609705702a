"""Rollout stages on the transformer: each runs by name from a SequenceRLConfig."""
import jax
import numpy as np
import pytest
from small_model import RL

from rlvr_lab.train import sequence

STAGES = {
    "dars": (("n_max", 6),),
    "cures": (("init_rollouts", 0), ("max_per_prompt", 8)),
    "e3": (("n_low", 2), ("n_high", 6)),
    "dynamic_sampling": (("max_rounds", 2),),
}


@pytest.mark.parametrize("name", sorted(STAGES))
def test_stage_runs_on_the_transformer(base, name):
    cfg = RL.replace(steps=1, rollout=name, rollout_options=STAGES[name], eval_every=1,
                     eval_problems=4, eval_samples=2)
    run = sequence.run(cfg, jax.random.key(0), num_seeds=2,
                       trainer=sequence.Trainer(cfg, base_policy=base))
    h = run.history
    assert run.steps_done == 1 and h["pass1"].shape == (1, 2)
    assert np.all(np.isfinite(h["loss"])) and np.all(h["rollouts"] > 0)
    assert np.all((h["valid_frac"] >= 0) & (h["valid_frac"] <= 1))
    if name == "cures":   # Neyman allocation keeps the budget B * G
        assert np.all(h["rollouts"] == RL.num_prompts * RL.num_generations)


def test_cures_initialisation_needs_exact_probabilities(base):
    cfg = RL.replace(rollout="cures")
    with pytest.raises(ValueError, match="init_rollouts=4"):
        sequence.Trainer(cfg, base_policy=base).init_state(1)


def test_uniform_stage_by_hand_matches_the_trainer(base):
    """The sampler's draw is the trainer's own uniform draw (same keys, same verifier)."""
    tr = sequence.Trainer(RL, base_policy=base)
    state = tr.init_state(1)
    key = jax.random.key(3)
    keys = tr.step_keys(key, 0, 1)
    idx, batch = tr.sample_batch(jax.vmap(lambda k: jax.random.fold_in(k, 0))(keys),
                                 state.policy)
    rewards, _ = tr.verify(idx, batch.tokens)
    sampler = sequence.SequenceSampler(jax.tree.map(lambda x: x[0], state.policy),
                                       tr.pool_prompts, tr.pool_valid, RL, sequence.rollout,
                                       tr._verify_groups)
    out = jax.jit(lambda k: sampler.draw(k, RL.num_prompts, RL.num_generations))(
        jax.random.fold_in(keys[0], 0))
    np.testing.assert_array_equal(np.asarray(out.prompts), np.asarray(idx[0]))
    np.testing.assert_array_equal(np.asarray(out.rewards), rewards[0])
