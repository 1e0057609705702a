"""Every bad input of the numeric API is a one-line ValueError; degenerate valid inputs stay finite.

Regression tests for issue 22's API probes (NaN/inf rewards and log-probs, out-of-range
options, booleans as numbers, empty batches, non-integer counts, invalid configs, unknown
advantage/rollout options), the documented behaviour under ``jit`` (value checks skipped,
``rlvr_lab.utils.checked`` stages them with checkify), and the degenerate inputs that must give
documented finite numbers (all-equal rewards, G = 1, fully masked groups, p = 0 or 1).
"""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_lab import advantages as A
from rlvr_lab import losses as L
from rlvr_lab import metrics as M
from rlvr_lab import utils
from rlvr_lab.envs import tasks
from rlvr_lab.envs.prompt_bank import PromptBankConfig
from rlvr_lab.envs.toy_web import SiteConfig
from rlvr_lab.train import config as C
from rlvr_lab.train.bandit import BanditConfig
from rlvr_lab.train.sequence import SequenceRLConfig
from rlvr_lab.train.sft import SFTConfig

NAN, INF = float("nan"), float("inf")
Z = np.zeros((1, 2), np.float32)          # log-probs of two tokens
ONE = np.ones((1, 1), np.float32)         # an outcome advantage


def _one_line_error(fn, match):
    with pytest.raises(ValueError, match=match) as info:
        fn()
    message = str(info.value)
    assert "\n" not in message and len(message) < 600, message
    return message


# ----------------------------------------------------------------------------- API probes
API_PROBES = {
    # non-finite rewards: one group (grpo, rloo), the whole batch (batch scale, REINFORCE++)
    "grpo nan reward": (lambda: A.grpo([[1.0, NAN, 0.0]]), r"rewards=nan at index \(0, 1\)"),
    "grpo inf reward": (lambda: A.grpo([[1.0, INF, 0.0]]), r"rewards=inf"),
    "grpo -inf reward": (lambda: A.grpo([[1.0, -INF, 0.0]]), r"rewards=-inf"),
    "rloo nan reward": (lambda: A.rloo([[1.0, NAN, 0.0]]), r"rewards=nan"),
    "dr_grpo nan reward": (lambda: A.dr_grpo([[NAN, 0.0]]), r"rewards=nan"),
    "grpo batch-scale nan": (lambda: A.grpo([[1.0, 0.0], [NAN, 1.0]], scale="batch"),
                             r"rewards=nan at index \(1, 0\)"),
    "reinforce_pp nan": (lambda: A.reinforce_pp_baseline([[1.0, 0.0], [0.0, NAN]]),
                         r"rewards=nan"),
    "mc_grpo inf": (lambda: A.mc_grpo([[1.0, INF, 0.0]]), r"rewards=inf"),
    "compute nan": (lambda: A.compute("grpo", [[NAN, 1.0]]), r"rewards=nan"),
    "grpo bfloat16 nan": (lambda: A.grpo(jnp.array([[1.0, NAN]], jnp.bfloat16)), r"rewards=nan"),
    "ppo bfloat16 inf": (lambda: L.ppo_clip(jnp.array([[INF, 0.0]], jnp.bfloat16), Z, ONE),
                         r"log_prob=inf"),
    # options of the estimators
    "grpo eps -1 array": (lambda: A.grpo([[1.0, 0.0]], eps=jnp.array(-1.0)), r"eps=-1.0.*>= 0"),
    "grpo eps -1": (lambda: A.grpo([[1.0, 0.0]], eps=-1), r"eps=-1 "),
    "grpo eps nan": (lambda: A.grpo([[1.0, 0.0]], eps=NAN), r"eps=nan"),
    "grpo eps inf": (lambda: A.grpo([[1.0, 0.0]], eps=INF), r"eps=inf"),
    "grpo eps True": (lambda: A.grpo([[1.0, 0.0]], eps=True), r"eps=True"),
    "grpo eps str": (lambda: A.grpo([[1.0, 0.0]], eps="0.1"), r"eps='0.1'"),
    "grpo scale": (lambda: A.grpo([[1.0, 0.0]], scale="mad"), r"scale='mad'.*'std'"),
    "mc_grpo eps -1": (lambda: A.mc_grpo([[1.0, 0.0, 1.0]], eps=-1.0), r"eps=-1.0"),
    "reinforce_pp eps -1": (lambda: A.reinforce_pp_baseline([[1.0, 0.0]], eps=-1.0), r"eps="),
    "compute unknown option": (lambda: A.compute("rloo", [[1.0, 0.0]], eps=0.1),
                               r"unknown option 'eps'.*rloo.*none"),
    "compute unknown estimator": (lambda: A.compute("nope", [[1.0, 0.0]]), r"unknown.*'nope'"),
    # shapes
    "grpo [2, 0]": (lambda: A.grpo(jnp.zeros((2, 0))), r"shape \(2, 0\) is empty"),
    "grpo [0, 3]": (lambda: A.grpo(jnp.zeros((0, 3))), r"shape \(0, 3\) is empty"),
    "grpo 1-D": (lambda: A.grpo(jnp.zeros(3)), r"shape \[B, G\]"),
    "grpo mask shape": (lambda: A.grpo(jnp.zeros((2, 3)), np.ones((2, 2), bool)), r"mask shape"),
    # losses: clip options
    "ppo epsilon -0.5": (lambda: L.ppo_clip(Z, Z, ONE, epsilon=-0.5), r"epsilon=-0.5.*\[0, 1\)"),
    "ppo epsilon 2": (lambda: L.ppo_clip(Z, Z, ONE, epsilon=2.0), r"epsilon=2.0"),
    "ppo epsilon 1": (lambda: L.ppo_clip(Z, Z, ONE, epsilon=1.0), r"epsilon=1.0"),
    "ppo epsilon True": (lambda: L.ppo_clip(Z, Z, ONE, epsilon=True), r"epsilon=True"),
    "ppo epsilon_high -1": (lambda: L.ppo_clip(Z, Z, ONE, epsilon_high=-1.0), r"epsilon_high="),
    "ppo clip_ratio_c 0.5": (lambda: L.ppo_clip(Z, Z, ONE, clip_ratio_c=0.5),
                             r"clip_ratio_c=0.5.*> 1"),
    "ppo dual_clip 1": (lambda: L.ppo_clip(Z, Z, ONE, dual_clip=1.0), r"clip_ratio_c=1.0"),
    "ppo both clips": (lambda: L.ppo_clip(Z, Z, ONE, clip_ratio_c=3.0, dual_clip=2.0),
                       r"both given"),
    "gspo epsilon -1": (lambda: L.gspo(Z, Z, ONE, epsilon=-1.0), r"epsilon=-1.0"),
    "cispo epsilon_high -1": (lambda: L.cispo(Z, Z, ONE, epsilon_high=-1.0), r"epsilon_high="),
    "cispo epsilon 1.5": (lambda: L.cispo(Z, Z, ONE, epsilon=1.5), r"epsilon=1.5.*\[0, 1\]"),
    "is_clipped epsilon nan": (lambda: L.is_clipped(Z, Z, ONE, epsilon=NAN), r"epsilon=nan"),
    "decoupled behav_cap 0.5": (lambda: L.decoupled_ppo(Z, Z, Z, ONE, behav_cap=0.5),
                                r"behav_cap=0.5.*>= 1"),
    # losses: corrections
    "tis cap -1": (lambda: L.tis_weights(Z, Z, cap=-1.0), r"cap=-1.0.*>= 1"),
    "tis cap inf": (lambda: L.tis_weights(Z, Z, cap=INF), r"cap=inf"),
    "mis cap 0": (lambda: L.mis_weights(Z, Z, cap=0), r"cap=0 .*>= 1"),
    "mis cap nan": (lambda: L.mis_weights(Z, Z, cap=NAN), r"cap=nan"),
    # losses: non-finite log-probs and advantages at valid tokens
    "ppo nan log_prob": (lambda: L.ppo_clip(np.array([[NAN, 0.0]]), Z, ONE),
                         r"log_prob=nan at index \(0, 0\)"),
    "ppo inf old_log_prob": (lambda: L.ppo_clip(Z, np.array([[0.0, -INF]]), ONE),
                             r"old_log_prob=-inf"),
    "ppo nan advantage": (lambda: L.ppo_clip(Z, Z, np.array([[NAN]])), r"advantages=nan"),
    "pg no advantages": (lambda: L.pg(Z), r"advantages is required"),
    "gspo nan log_prob": (lambda: L.gspo(np.array([[0.0, NAN]]), Z, ONE), r"log_prob=nan"),
    "cispo inf log_prob": (lambda: L.cispo(np.array([[INF, 0.0]]), Z, ONE), r"log_prob=inf"),
    "kl nan": (lambda: L.kl("k3", np.array([NAN]), np.zeros(1)), r"log_prob=nan"),
    "kl unknown": (lambda: L.kl("k9", Z, Z), r"unknown KL estimator 'k9'"),
    "tis nan": (lambda: L.tis_weights(np.array([[NAN, 0.0]]), Z), r"train_log_prob=nan"),
    "mismatch nan": (lambda: L.mismatch_metrics(Z, np.array([[0.0, NAN]])),
                     r"rollout_log_prob=nan"),
    # aggregation
    "aggregate [0, 3]": (lambda: L.aggregate(jnp.zeros((0, 3)), None), r"shape \(0, 3\) is empty"),
    "aggregate [2, 0]": (lambda: L.aggregate(jnp.zeros((2, 0)), None), r"shape \(2, 0\) is empty"),
    "aggregate nan": (lambda: L.aggregate(np.array([[NAN, 1.0]]), None), r"token_loss=nan"),
    "aggregate mode": (lambda: L.aggregate(jnp.zeros((2, 3)), None, "x"), r"loss_agg_mode='x'"),
    "masked_mean nan": (lambda: L.masked_mean(np.array([NAN, 0.0])), r"x=nan"),
    # metrics
    "pass_at_k n=4.5": (lambda: M.pass_at_k(4.5, 2, 2), r"n=4.5.*integer"),
    "pass_at_k k=1.5": (lambda: M.pass_at_k(4, 2, 1.5), r"k=1.5"),
    "pass_at_k c=True": (lambda: M.pass_at_k(4, True, 1), r"c=True"),
    "pass_at_k n=nan": (lambda: M.pass_at_k(NAN, 2, 1), r"n=nan"),
    "pass_at_k c>n": (lambda: M.pass_at_k(5, 6, 2), r"0 <= c <= n"),
    "pass_at_k k=0": (lambda: M.pass_at_k(5, 2, 0), r"1 <= k <= n"),
    "pass_at_k_exact p=2": (lambda: M.pass_at_k_exact(2.0, 3), r"p=2.0.*in \[0, 1\]"),
    "pass_at_k_exact p=nan": (lambda: M.pass_at_k_exact(NAN, 3), r"p=nan"),
    "pass_at_k_exact k=-1": (lambda: M.pass_at_k_exact(0.5, -1), r"k=-1"),
    "pass_at_k_exact k=1.5": (lambda: M.pass_at_k_exact(0.5, 1.5), r"k=1.5"),
    "entropy nan": (lambda: M.entropy(np.array([NAN, 0.0])), r"logits=nan"),
    "entropy +inf": (lambda: M.entropy(np.array([INF, 0.0])), r"logits=inf"),
    "entropy all -inf": (lambda: M.entropy(np.array([[0.0, 1.0], [-INF, -INF]])),
                         r"row \(1,\) is all -inf"),
    "correct_mass nan": (lambda: M.correct_mass(np.array([NAN, 0.0]), np.array([True, False])),
                         r"logits=nan"),
    # environments
    "tasks n=-1": (lambda: tasks.generate("arithmetic", np.random.default_rng(0), -1, (1,)),
                   r"n=-1"),
    "tasks n=2.5": (lambda: tasks.generate("arithmetic", np.random.default_rng(0), 2.5, (1,)),
                    r"n=2.5"),
    "tasks difficulties ()": (lambda: tasks.generate("arithmetic", np.random.default_rng(0), 2,
                                                     ()), r"difficulties=\(\)"),
    "tasks difficulty 1.5": (lambda: tasks.generate("arithmetic", np.random.default_rng(0), 2,
                                                    (1.5,)), r"difficulties=\(1.5,\)"),
}


@pytest.mark.parametrize("name", list(API_PROBES))
def test_api_probe_is_a_one_line_value_error(name):
    fn, match = API_PROBES[name]
    _one_line_error(fn, match)


def test_cumulative_advantage_probes():
    """The DARS closed form (rlvr_lab.papers.dars.theory): acc outside [0, 1] is rejected."""
    from rlvr_lab.papers.dars import theory
    _one_line_error(lambda: theory.cumulative_advantage(1.5, 2), r"acc=1.5")
    _one_line_error(lambda: theory.expected_cumulative_advantage(0.5, 0), r"n=0")


# ----------------------------------------------------------------------------- configs
CONFIG_PROBES = {
    "bandit learning_rate inf": (lambda: BanditConfig(learning_rate=INF), r"learning_rate=inf"),
    "bandit learning_rate True": (lambda: BanditConfig(learning_rate=True),
                                  r"learning_rate=True"),
    "bandit epsilon inf": (lambda: BanditConfig(epsilon=INF), r"epsilon=inf"),
    "bandit temperature inf": (lambda: BanditConfig(temperature=INF), r"temperature=inf"),
    "bandit beta inf": (lambda: BanditConfig(beta=INF), r"beta=inf"),
    "bandit unknown advantage": (lambda: BanditConfig(advantage="nope"), r"'nope'"),
    "bandit unknown advantage option": (
        lambda: BanditConfig(advantage_options=(("foo", 1),)), r"unknown option 'foo'.*scale"),
    "bandit bad advantage option value": (
        lambda: BanditConfig(advantage_options=(("eps", -1.0),)), r"eps=-1.0"),
    "bandit bad advantage scale": (
        lambda: BanditConfig(advantage="mc_grpo", advantage_options=(("scale", "x"),)),
        r"scale='x'"),
    "bandit unknown rollout": (lambda: BanditConfig(rollout="nope"), r"'nope'"),
    "bandit option for uniform": (lambda: BanditConfig(rollout_options=(("max_rounds", 2),)),
                                  r"'max_rounds'.*'uniform'.*takes no options"),
    "bandit unknown rollout option": (
        lambda: BanditConfig(rollout="dynamic_sampling", rollout_options=(("foo", 1),)),
        r"unknown rollout option 'foo'.*max_rounds"),
    "bandit unknown keyword": (lambda: BanditConfig(lr=0.1), r"unknown option 'lr'"),
    "sequence epsilon -0.1": (lambda: SequenceRLConfig(epsilon=-0.1), r"epsilon=-0.1"),
    "sequence epsilon nan": (lambda: SequenceRLConfig(epsilon=NAN), r"epsilon=nan"),
    "sequence epsilon_high -1": (lambda: SequenceRLConfig(epsilon_high=-1), r"epsilon_high=-1"),
    "sequence beta nan": (lambda: SequenceRLConfig(beta=NAN), r"beta=nan"),
    "sequence max_grad_norm 0": (lambda: SequenceRLConfig(max_grad_norm=0), r"max_grad_norm=0"),
    "sequence max_grad_norm -1": (lambda: SequenceRLConfig(max_grad_norm=-1.0),
                                  r"max_grad_norm=-1.0"),
    "sequence steps True": (lambda: SequenceRLConfig(steps=True), r"steps=True"),
    "sequence base str": (lambda: SequenceRLConfig(base="x"), r"base='x'"),
    "sequence correction_cap 1": (lambda: SequenceRLConfig(correction_cap=1.0),
                                  r"correction_cap=1.0"),
    "sequence unknown advantage option": (
        lambda: SequenceRLConfig(advantage_options=(("foo", 1),)), r"unknown option 'foo'"),
    "sequence unknown rollout option": (
        lambda: SequenceRLConfig(rollout_options=(("foo", 1),)), r"unknown rollout option"),
    "sft batch_size 2.5": (lambda: SFTConfig(batch_size=2.5), r"batch_size=2.5"),
    "sft weight_decay -1": (lambda: SFTConfig(weight_decay=-1), r"weight_decay=-1"),
    "sft weight_decay nan": (lambda: SFTConfig(weight_decay=NAN), r"weight_decay=nan"),
    "sft learning_rate inf": (lambda: SFTConfig(learning_rate=INF), r"learning_rate=inf"),
    "sft learning_rate True": (lambda: SFTConfig(learning_rate=True), r"learning_rate=True"),
    "sft steps True": (lambda: SFTConfig(steps=True), r"steps=True"),
    "sft seed -1": (lambda: SFTConfig(seed=-1), r"seed=-1"),
    "sft difficulty 1.5": (lambda: SFTConfig(difficulties=(1.5,)), r"difficulties entry=1.5"),
    "sft flawed_fraction nan": (lambda: SFTConfig(flawed_fraction=NAN), r"flawed_fraction=nan"),
    "sft task": (lambda: SFTConfig(task="chess"), r"task='chess'"),
    "bank difficulty_a inf": (lambda: PromptBankConfig(difficulty_a=INF), r"difficulty_a=inf"),
    "bank difficulty_a True": (lambda: PromptBankConfig(difficulty_a=True),
                               r"difficulty_a=True"),
    "bank logit_scale inf": (lambda: PromptBankConfig(logit_scale=INF), r"logit_scale=inf"),
    "bank correct_reward nan": (lambda: PromptBankConfig(correct_reward=NAN),
                                r"correct_reward=nan"),
    "bank wrong_levels nan": (lambda: PromptBankConfig(wrong_levels=(0.0, NAN)),
                              r"wrong_levels=nan at index \(1,\)"),
    "bank seed 1.5": (lambda: PromptBankConfig(seed=1.5), r"seed=1.5"),
    "bank format_fraction True": (lambda: PromptBankConfig(format_fraction=True),
                                  r"format_fraction=True"),
    "site flaky_frac str": (lambda: SiteConfig(flaky_frac="a"), r"flaky_frac='a'"),
    "site flaky_frac True": (lambda: SiteConfig(flaky_frac=True), r"flaky_frac=True"),
}


@pytest.mark.parametrize("name", list(CONFIG_PROBES))
def test_config_probe_is_a_one_line_value_error(name):
    fn, match = CONFIG_PROBES[name]
    _one_line_error(fn, match)


def test_valid_options_are_accepted():
    """The option checks do not reject what the trainers and stages declare."""
    BanditConfig(advantage="mc_grpo", num_generations=9, advantage_options=(("scale", "std"),))
    BanditConfig(rollout="dynamic_sampling", rollout_options=(("max_rounds", 2),))
    BanditConfig(advantage="grpo", advantage_options=(("eps", 0.0),))
    assert C.stage_options("uniform") == ()
    assert C.stage_options("dynamic_sampling") == ("max_rounds",)
    assert A.options("grpo") == ("scale", "eps") and A.options("rloo") == ()


# ----------------------------------------------------------------------------- degenerate inputs
ESTIMATORS = {
    "grpo": lambda r, m, eps: A.grpo(r, m, eps=eps),
    "grpo batch": lambda r, m, eps: A.grpo(r, m, scale="batch", eps=eps),
    "grpo none": lambda r, m, eps: A.grpo(r, m, scale="none", eps=eps),
    "rloo": lambda r, m, eps: A.rloo(r, m),
    "reinforce_pp": lambda r, m, eps: A.reinforce_pp_baseline(r, m, eps=eps),
    "mc_grpo mad": lambda r, m, eps: A.mc_grpo(r, m, eps=eps).adv,
    "mc_grpo std": lambda r, m, eps: A.mc_grpo(r, m, scale="std", eps=eps).adv,
}


@pytest.mark.parametrize("name", list(ESTIMATORS))
@pytest.mark.parametrize("eps", [0.0, 1e-6])
def test_degenerate_groups_give_zero_advantages(name, eps):
    """All-equal rewards, G = 1, one valid rollout, a fully masked group or batch: A = 0."""
    fn = ESTIMATORS[name]
    equal = np.full((2, 4), 0.7, np.float32)
    np.testing.assert_array_equal(fn(equal, None, eps), 0.0)
    np.testing.assert_array_equal(fn(np.array([[1.0], [0.0]], np.float32), None, eps), 0.0)
    rewards = np.array([[1.0, 0.0, 1.0], [3.0, 5.0, -2.0]], np.float32)
    lone = np.array([[True, False, False], [False, False, False]])
    np.testing.assert_array_equal(fn(rewards, lone, eps), 0.0)
    np.testing.assert_array_equal(fn(rewards, np.zeros_like(lone), eps), 0.0)


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_masked_padding_may_hold_nan(name):
    """Masked entries are ignored, NaN padding included (batch scale too)."""
    rewards = np.array([[1.0, 0.0, NAN], [0.0, 1.0, 1.0]], np.float32)
    mask = np.array([[True, True, False], [True, True, True]])
    clean = np.where(mask, rewards, 0.0)
    got = ESTIMATORS[name](rewards, mask, 1e-6)
    assert np.all(np.isfinite(got))
    np.testing.assert_array_equal(got, ESTIMATORS[name](clean, mask, 1e-6))


def test_losses_degenerate_inputs_are_finite():
    """Fully masked batches aggregate to 0; masked -inf/NaN log-probs are ignored by the check
    and by aggregate; a huge ratio stays finite (clipped) for every policy loss."""
    for mode in L.AGG_MODES:
        assert float(L.aggregate(np.ones((2, 3)), np.zeros((2, 3), bool), mode)) == 0.0
    lp = np.array([[0.0, -INF]], np.float32)
    mask = np.array([[True, False]])
    for name in ("ppo_clip", "gspo", "cispo"):
        tok = L.get(name)(lp, np.zeros_like(lp), ONE, mask)
        assert np.isfinite(float(L.aggregate(tok, mask)))
    tok = L.decoupled_ppo(lp, np.zeros_like(lp), np.zeros_like(lp), ONE, mask, behav_cap=2.0)
    assert np.isfinite(float(L.aggregate(tok, mask)))
    big = np.array([[30.0, 0.0]], np.float32)
    for name in ("ppo_clip", "gspo"):
        assert np.all(np.isfinite(L.get(name)(big, Z, ONE)))
    assert float(L.masked_mean(np.array([NAN, 1.0]), np.array([False, True]))) == 1.0


def test_metrics_degenerate_inputs_are_exact():
    assert float(M.pass_at_k_exact(0.0, 5)) == 0.0
    assert float(M.pass_at_k_exact(1.0, 5)) == 1.0
    assert float(M.pass_at_k_exact(0.3, 0)) == 0.0
    # a float32 sum of probabilities a few ulps above 1 is accepted and clipped
    assert float(M.pass_at_k_exact(np.float32(1) + np.float32(2e-7), 3)) == 1.0
    assert float(M.pass_at_k(5, 0, 2)) == 0.0
    assert float(M.pass_at_k(5, 4, 2)) == 1.0
    assert float(M.pass_at_k(4.0, 2.0, 1.0)) == pytest.approx(0.5)   # whole floats accepted
    one_hot = np.array([0.0, -INF, -INF])
    assert float(M.entropy(one_hot)) == 0.0
    logits = np.array([[0.0, 1.0], [-INF, -INF]])
    assert np.isfinite(float(M.mean_token_entropy(logits, np.array([True, False]))))


def test_dars_closed_form_degenerate_accuracies():
    from rlvr_lab.papers.dars import theory
    np.testing.assert_array_equal(theory.cumulative_advantage(np.array([0.0, 1.0]), 8), 0.0)
    np.testing.assert_array_equal(
        theory.expected_cumulative_advantage(np.array([0.0, 1.0]), 8, scale="std"), 0.0)


# ----------------------------------------------------------------------------- under jit
def test_under_jit_value_checks_are_skipped_and_nan_propagates():
    """Documented: traced values are not checked (no host sync in the jitted trainers); the NaN
    stays in its group for per-group estimators."""
    adv = jax.jit(A.grpo)(jnp.array([[1.0, NAN], [1.0, 0.0]]))
    assert np.all(np.isnan(adv[0])) and np.all(np.isfinite(adv[1]))
    assert np.isnan(jax.jit(L.ppo_clip)(jnp.array([[NAN, 0.0]]), Z, ONE)[0, 0])
    # a traced option is not checked either (swept under vmap); a static shape check still runs
    jax.jit(lambda e: A.grpo(jnp.array([[1.0, 0.0]]), eps=e))(-1.0)
    with pytest.raises(ValueError, match="is empty"):
        jax.jit(A.grpo)(jnp.zeros((2, 0)))


def test_checked_stages_the_checks_under_jit():
    grpo = utils.checked(A.grpo)
    np.testing.assert_allclose(grpo(jnp.array([[1.0, 0.0]])), A.grpo([[1.0, 0.0]]))
    _one_line_error(lambda: grpo(jnp.array([[1.0, NAN]])), r"rewards must be finite.*nan")
    # masked NaN passes; options are static keywords
    np.testing.assert_array_equal(
        grpo(jnp.array([[1.0, NAN]]), jnp.array([[True, False]]), scale="batch"), 0.0)
    traced_eps = utils.checked(lambda r, e: A.grpo(r, eps=e))
    _one_line_error(lambda: traced_eps(jnp.array([[1.0, 0.0]]), jnp.array(-1.0)),
                    r"eps must be a finite number >= 0.*-1")
    ppo = utils.checked(L.ppo_clip)
    _one_line_error(lambda: ppo(jnp.array([[NAN, 0.0]]), Z, ONE), r"log_prob must be finite")
    _one_line_error(lambda: utils.checked(M.pass_at_k_exact)(jnp.array(1.5), 2),
                    r"p must be a finite number in \[0, 1\]")


# ----------------------------------------------------------------------------- properties
finite_floats = st.floats(-1e3, 1e3, allow_nan=False, width=32)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(finite_floats, min_size=3, max_size=3), min_size=1, max_size=3),
       st.lists(st.booleans(), min_size=9, max_size=9), st.sampled_from(sorted(ESTIMATORS)),
       st.sampled_from([0.0, 1e-6]))
def test_finite_rewards_give_finite_advantages(rows, flat_mask, name, eps):
    rewards = np.array(rows, np.float32)
    mask = np.array(flat_mask[: rewards.size]).reshape(rewards.shape)
    out = np.asarray(ESTIMATORS[name](rewards, mask, eps))
    assert np.all(np.isfinite(out)) and np.all(out[~mask] == 0)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 3), st.integers(1, 4), st.data(),
       st.sampled_from([NAN, INF, -INF]), st.sampled_from(sorted(ESTIMATORS)))
def test_any_non_finite_valid_reward_is_named(b, g, data, bad, name):
    rewards = np.zeros((b, g), np.float32)
    i, j = data.draw(st.integers(0, b - 1)), data.draw(st.integers(0, g - 1))
    rewards[i, j] = bad
    with pytest.raises(ValueError, match=rf"rewards={bad!r} at index \({i}, {j}\)"):
        ESTIMATORS[name](rewards, None, 1e-6)


@settings(max_examples=40, deadline=None)
@given(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                 st.integers(-5, 5)))
def test_check_number_accepts_exactly_finite_non_negative_numbers(value):
    ok = (not isinstance(value, bool)) and math.isfinite(value) and value >= 0
    if ok:
        utils.check_number(value, "x", ">= 0", lambda v: v >= 0)
    else:
        _one_line_error(lambda: utils.check_number(value, "x", ">= 0", lambda v: v >= 0),
                        r"^x=")
