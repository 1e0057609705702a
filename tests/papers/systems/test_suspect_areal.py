"""Issue 48, suspect arm ``areal_small_decoupled_stable``: decoupled PPO with an uncapped
behaviour weight ends below synchronous PPO (and, in some runs, below its SFT base) on the
small model at S = 8. Verdict: a finding, not a bug.

1. The loss the arm optimises (``losses.decoupled_ppo`` aggregated token-mean, as
   ``stale.stale_update`` does) equals AReaL's objective (arXiv:2505.24298, decoupled PPO;
   ``ppo_actor_loss_fn`` in the authors' code): ``w * max(-A u, -A clip(u, 1 - eps, 1 + eps))``
   with ``u = pi_theta / pi_prox`` and ``w = pi_prox / pi_behav`` carrying no gradient; value
   and gradient against a float64 NumPy reference on a constructed batch.
2. The mechanism: at the start of an update (``theta = prox``, so ``u = 1``) no token is
   clipped, and every token's gradient is ``-w A / n``, however large ``w`` is. Naive PPO
   (the ratio ``pi_theta / pi_behav = w`` clipped at ``1 +- eps``) has the same gradient where
   its clip does not bind, but drops the positive-advantage tokens with ``w > 1 + eps`` (and
   the negative ones with ``w < 1 - eps``). So the uncapped decoupled loss is the *only* one of
   the two that puts an unbounded weight on tokens the current policy already prefers by a
   large factor over the stale one. On the small model at S = 8 the weight is heavy-tailed
   (``behav_ratio_max`` 20-70 per batch, per-token k3(prox || behav) 0.3-0.4 in the committed
   full run, against exactly 1 and 0 at S = 0): a few tokens carry most of each update, the
   batch's effective sample size collapses, and Adam's normalised steps follow them. AReaL's
   own configs cap the weight (``behav_imp_weight_cap``: the token is dropped above it).
3. The wiring of the arm (``stale.stale_update``): ``prox`` is the current policy's scores,
   ``behav`` the stored log-probs of the stale sampler, and at S = 0 decoupled = naive.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_lab import losses

EPS = 0.2


def _batch():
    """A constructed batch: 3 rows x 4 tokens, one padded token, mixed-sign advantages, a
    behaviour weight from 0.5 to 40 and a current policy moved off the proximal one so that
    some tokens are clipped."""
    rng = np.random.default_rng(0)
    prox = np.log(rng.uniform(0.05, 0.9, (3, 4)))
    w = np.array([[1.0, 40.0, 0.5, 1.1],
                  [3.0, 0.6, 1.0, 7.0],
                  [1.0, 0.7, 25.0, 1.0]])
    behav = prox - np.log(w)
    logp = prox + np.array([[0.0, 0.3, -0.3, 0.1],
                            [-0.4, 0.05, 0.25, 0.0],
                            [0.1, -0.1, 0.0, 0.5]])
    adv = np.array([1.0, -0.5, 0.8])[:, None]
    mask = np.array([[1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 1, 1]], bool)
    return logp, prox, behav, adv, mask


def _reference(logp, prox, behav, adv, mask, cap=None):
    """Float64 AReaL decoupled loss, token-mean, and its gradient w.r.t. ``logp``."""
    w = np.exp(prox - behav)
    if cap is not None:
        w = np.where(w > cap, 0.0, w)
    u = np.exp(logp - prox)
    a = np.broadcast_to(adv, u.shape)
    unclipped, clipped = -a * u, -a * np.clip(u, 1 - EPS, 1 + EPS)
    token = w * np.maximum(unclipped, clipped)
    n = mask.sum()
    loss = (token * mask).sum() / n
    # d/dlogp of -A u is -A u; the clipped branch is flat where it is the larger one
    active = unclipped >= clipped
    grad = np.where(mask & active, w * -a * u, 0.0) / n
    return loss, grad


def _ours(logp, prox, behav, adv, mask, cap=None):
    def loss(lp):
        return losses.aggregate(losses.decoupled_ppo(lp, prox, behav, adv, epsilon=EPS,
                                                     behav_cap=cap), mask, "token-mean")
    value, grad = jax.value_and_grad(loss)(jnp.asarray(logp))
    return float(value), np.asarray(grad)


def _naive(logp, behav, adv, mask):
    def loss(lp):
        return losses.aggregate(losses.ppo_clip(lp, behav, adv, epsilon=EPS), mask,
                                "token-mean")
    return np.asarray(jax.grad(loss)(jnp.asarray(logp)))


@pytest.mark.parametrize("cap", [None, 5.0])
def test_decoupled_loss_and_gradient_match_float64_reference(cap):
    logp, prox, behav, adv, mask = _batch()
    with jax.enable_x64():
        got, got_grad = _ours(logp, prox, behav, adv, mask, cap)
        # the reference's clip branches are exercised on this batch
        u = np.exp(logp - prox)
        assert ((u > 1 + EPS) | (u < 1 - EPS)).any()
    want, want_grad = _reference(logp, prox, behav, adv, mask, cap)
    assert got == pytest.approx(want, rel=1e-12)
    np.testing.assert_allclose(got_grad, want_grad, rtol=1e-12, atol=1e-15)
    # the weight is pi_prox / pi_behav, not its inverse: swapping them changes the loss
    with jax.enable_x64():
        swapped, _ = _ours(logp, behav, prox, adv, mask, cap)
    assert abs(swapped - want) > 1e-3


def test_at_the_update_start_only_the_decoupled_loss_keeps_every_stale_weight():
    """theta = prox: decoupled gradient = -w A / n on every token; naive PPO's equals it
    except that its clip drops A > 0 tokens with w > 1 + eps and A < 0 tokens with w < 1 -
    eps. The top token's share of the decoupled gradient is w_max / sum(w)."""
    _, prox, behav, adv, mask = _batch()
    logp = prox.copy()                                   # the first minibatch of an update
    w = np.exp(prox - behav)
    a = np.broadcast_to(adv, w.shape)
    n = mask.sum()
    with jax.enable_x64():
        _, dec = _ours(logp, prox, behav, adv, mask)
        naive = _naive(logp, behav, adv, mask)
        _, capped = _ours(logp, prox, behav, adv, mask, cap=5.0)
    np.testing.assert_allclose(dec, np.where(mask, -w * a / n, 0.0), rtol=1e-12)
    dropped = mask & (((a > 0) & (w > 1 + EPS)) | ((a < 0) & (w < 1 - EPS)))
    assert dropped.sum() == 3                            # w = 40, 25 (A > 0); 0.6 (A < 0)
    np.testing.assert_allclose(naive, np.where(mask & ~dropped, -w * a / n, 0.0), rtol=1e-12)
    # the w = 40 token with A > 0: naive PPO gives it no gradient, decoupled PPO 40 |A| / n
    assert naive[0, 1] == 0.0 and dec[0, 1] == pytest.approx(-40.0 / n)
    # one token out of 11 carries most of the decoupled update (|grad| share), none of naive's
    share = np.abs(dec).max() / np.abs(dec).sum()
    assert share > 0.45
    # effective sample size of the weights: 11 tokens count as fewer than 3
    wm = w[mask]
    assert wm.sum() ** 2 / (wm ** 2).sum() < 3.0
    # AReaL's cap (its configs use 5) drops exactly the tokens above it
    np.testing.assert_allclose(capped, np.where(mask & (w <= 5.0), -w * a / n, 0.0),
                               rtol=1e-12)


def test_stale_update_feeds_the_proximal_and_behaviour_log_probs_in_that_order(monkeypatch):
    """The arm's wiring (``stale.stale_update``): the decoupled loss gets ``prox`` = the
    current policy's log-probs at the update start and ``behav`` = the stored rollout
    log-probs of the stale policy that sampled the batch; and with no staleness the decoupled
    and naive updates coincide (S = 0)."""
    import dataclasses

    from small_model import RL, TINY

    from rlvr_lab.models import transformer as T
    from rlvr_lab.papers.systems import stale
    from rlvr_lab.train import sequence, sft

    rl = dataclasses.replace(RL, num_iterations=2)
    policy = T.init(jax.random.key(0), TINY.model_config())
    old = T.init(jax.random.key(1), TINY.model_config())        # a stale version
    prompts, valid = sft.encode(TINY, sft.problems(TINY, "train")[:rl.num_prompts])[:2]
    prompts, valid = jnp.asarray(prompts), jnp.asarray(valid)
    rewards = jnp.asarray(np.tile([1.0, 0.0, 0.0, 1.0], (rl.num_prompts, 1)))
    opt_state = sequence.make_optimizer(rl).init(policy)
    batch = sequence.rollout(jax.random.key(2), old, prompts, valid, rl)
    score = lambda pol: np.asarray(T.score(pol, batch.prompts, batch.prompt_valid,  # noqa: E731
                                           batch.tokens, temperature=rl.temperature))
    m = np.asarray(batch.mask)
    np.testing.assert_allclose(np.asarray(batch.behav_logp)[m], score(old)[m], atol=1e-4)

    seen = []
    real = losses.decoupled_ppo

    def spy(log_prob, prox, behav, adv, mask=None, **kw):
        jax.debug.callback(lambda p, b: seen.append((np.asarray(p), np.asarray(b))), prox, behav)
        return real(log_prob, prox, behav, adv, mask, **kw)

    monkeypatch.setattr(losses, "decoupled_ppo", spy)
    stale.stale_update(jax.random.key(3), policy, old, opt_state, batch, rewards, True, rl)
    jax.effects_barrier()
    assert seen
    prox, behav = seen[0]
    # minibatch rows come permuted: compare the multisets of values
    np.testing.assert_allclose(np.sort(prox[np.isfinite(prox)]),
                               np.sort(score(policy).ravel()), atol=1e-5)
    np.testing.assert_allclose(np.sort(behav.ravel()),
                               np.sort(np.asarray(batch.behav_logp).ravel()), atol=1e-6)
    monkeypatch.undo()

    # S = 0: a batch sampled by the current policy -> decoupled and naive updates agree
    fresh = sequence.rollout(jax.random.key(4), policy, prompts, valid, rl)
    new = [stale.stale_update(jax.random.key(5), policy, policy, opt_state, fresh, rewards,
                              dec, rl)[0] for dec in (True, False)]
    for a, b in zip(jax.tree.leaves(new[0]), jax.tree.leaves(new[1])):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-6)
