"""The zoo on the tiny transformer: estimator x loss families at G = 2, 4, 8 and equal rollouts,
every (family, G) arm and seed in one compiled step.

Every arm is ``simulations.tiny_grpo``'s recipe (the ``quick`` SFT base, Adam with warm-up and
gradient clipping, temperature 1, binary verifier reward, one epoch of two minibatches, so the
second minibatch is off policy and the PPO clip can act) at ``rollouts`` rollouts per step:
``rollouts / G`` prompts of ``G`` completions each. Arms differ only in numbers -- the
estimator, the per-token loss and the aggregation (indices into :data:`ESTIMATORS`,
:data:`LOSSES`, :data:`AGGREGATIONS`, switched with ``lax.switch``) and ``G`` (traced) -- so
all arms, group sizes and seeds are one stack of runs mapped by
:func:`rlvr_lab.train.sequence.seed_map`: one compiled sampler, one compiled update.

Equal rollouts without padding the sampler: a step always samples ``rollouts`` rows; row ``i``
answers prompt ``i // G``. Only the rewards are scattered into a ``[rollouts / min G, max G]``
group buffer (unused slots masked, which every estimator treats as absent) for the estimator,
and the advantages are gathered back to rows. Per-token inputs the estimators may read: the
response lengths (OPO) and each token's realized energy ``1 - 2 pi_t + sum pi^2`` under the
policy that sampled it (:func:`rlvr_lab.advantages.realized_energy`, from the logits of the
update's first scoring pass), so the optimal token baseline runs at token level, as in verl.

Arms: the estimator arms (:data:`ARMS`: each estimator with the PPO clip, GPG with its own
loss, Dr.GRPO with its aggregation) and the loss arms (:data:`LOSS_ARMS`: GRPO's advantages
with each further policy-loss family of :data:`LOSS_FAMILIES` -- DAPO's clip-higher, the dual
clip, Clip-Cov, KL-Cov, GSPO, CISPO, GMPO, SAPO -- each with its paper's defaults, the
PPO-clip family with the recipe's lower clip). Not the full estimator x loss product: an
estimator arm isolates the estimator under one loss, a loss arm the loss under one estimator.
Every registered policy loss is here under one of its names (``pg``/``gpg``,
``ppo_clip``/``vanilla``, ``gspo``/``gspo-token``, ``gmpo``/``geo_mean``); AReaL's decoupled
PPO (:func:`rlvr_lab.losses.decoupled_ppo`, not registered) is not: it needs a proximal
policy apart from the behaviour policy, which this engine does not keep. Clip-Cov draws its tokens
in row-major order (``key=None``), not at random as verl does. A run compiles only the branches
its arms use (:func:`branches`), so a quick run of three arms compiles three estimators' and
two losses' code. Each run records ``clip_frac``: the share of valid tokens with a non-zero
advantage whose loss has no gradient in their own log-prob (:func:`_zero_gradient_fraction`),
the "clipped tokens" of any loss by one definition.

Seeds are paired: seed ``s`` of every arm and every G draws its keys from the same stream.
Held-out pass@1: ``eval_samples`` samples of each of ``eval_problems`` held-out problems of the
SFT base (once per seed: every run starts from it) and of every trained run, in one evaluation
at the end.
"""
from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rlvr_lab import advantages, losses
from rlvr_lab import random_streams as streams
from rlvr_lab.envs import tasks
from rlvr_lab.models import transformer
from rlvr_lab.train import core, sequence
from rlvr_lab.train.seed_threads import threaded_seed_map
from rlvr_lab.utils import DECODE_COMPILE

ESTIMATORS = ("grpo", "dr_grpo", "rloo", "reinforce_plus_plus_baseline", "gpg", "opo",
              "optimal_token_baseline")
# policy-loss families: arm key -> (registered loss of rlvr_lab.losses, its options). Each runs
# with its paper's defaults, except that the PPO-clip family (listed in _RECIPE_EPSILON) takes
# the recipe's lower clip ``epsilon`` as GRPO does.
LOSS_FAMILIES: dict[str, tuple[str, dict]] = {
    "vanilla": ("vanilla", {}),                             # PPO clip, verl's name
    "gpg": ("gpg", {}),                                     # plain -A log pi (GPG)
    "clip_higher": ("vanilla", {"epsilon_high": 0.28}),     # DAPO's clip-higher
    "dual_clip": ("vanilla", {"clip_ratio_c": 3.0}),        # dual clip, verl's c = 3
    "clip_cov": ("clip_cov", {}),                           # verl's ratio 2e-4, (1, 5)
    "kl_cov": ("kl_cov", {}),                               # verl's ratio 2e-4, coef 0.1
    "gspo": ("gspo", {}),                                   # the paper's (3e-4, 4e-4)
    "cispo": ("cispo", {}),                                 # MiniMax-M1: weight <= 5
    "geo_mean": ("geo_mean", {}),                           # GMPO's log clip 0.4
    "sapo": ("sapo", {}),                                   # verl's tau (1.0, 1.05)
}
LOSSES = tuple(LOSS_FAMILIES)
_RECIPE_EPSILON = ("vanilla", "clip_higher", "dual_clip", "clip_cov")
AGGREGATIONS = ("token-mean", "seq-mean-token-sum-norm", "seq-mean-token-mean")
GROUPS = (2, 4, 8)


class Arm(NamedTuple):
    """An estimator, a policy loss and an aggregation, by registered name."""

    estimator: str
    loss: str = "vanilla"
    agg: str = "token-mean"
    name: str = ""

    @property
    def label(self) -> str:
        return self.name or f"{self.estimator} + {self.loss}"


ARMS = (Arm("grpo", name="GRPO"),
        Arm("dr_grpo", agg="seq-mean-token-sum-norm", name="Dr.GRPO"),
        Arm("rloo", name="RLOO"),
        Arm("reinforce_plus_plus_baseline", name="REINFORCE++-baseline"),
        Arm("gpg", loss="gpg", name="GPG"),
        Arm("opo", name="OPO"),
        Arm("optimal_token_baseline", name="OTB"))
# each further policy-loss family on GRPO's advantages (not the full estimator x loss product:
# the estimator arms above isolate the estimator under one loss, these isolate the loss under
# one estimator); the sequence-level losses with the per-sequence mean their papers optimise
LOSS_ARMS = (Arm("grpo", "clip_higher", name="DAPO clip-higher"),
             Arm("grpo", "dual_clip", name="dual clip"),
             Arm("grpo", "clip_cov", name="Clip-Cov"),
             Arm("grpo", "kl_cov", name="KL-Cov"),
             Arm("grpo", "gspo", "seq-mean-token-mean", name="GSPO"),
             Arm("grpo", "cispo", name="CISPO"),
             Arm("grpo", "geo_mean", "seq-mean-token-mean", name="GMPO"),
             Arm("grpo", "sapo", "seq-mean-token-mean", name="SAPO"))
ALL_ARMS = ARMS + LOSS_ARMS


class Branches(NamedTuple):
    """The estimators, losses and aggregations a set of arms switches between (each in the
    order of :data:`ESTIMATORS`, :data:`LOSSES`, :data:`AGGREGATIONS`): a run compiles only
    these branches (under ``vmap`` a switch on a batched index computes every branch)."""

    estimators: tuple[str, ...] = ESTIMATORS
    losses: tuple[str, ...] = LOSSES
    aggs: tuple[str, ...] = AGGREGATIONS


def branches(arms: Sequence[Arm]) -> Branches:
    used = lambda names, field: tuple(n for n in names  # noqa: E731
                                      if any(getattr(a, field) == n for a in arms))
    return Branches(used(ESTIMATORS, "estimator"), used(LOSSES, "loss"),
                    used(AGGREGATIONS, "agg"))


class Spec(NamedTuple):
    """One run's switches as numbers (stacked over runs)."""

    estimator: Any
    loss: Any
    agg: Any
    group: Any


def specs(arms: Sequence[Arm], groups: Sequence[int], num_seeds: int,
          names: Branches = Branches()) -> Spec:
    """``[A * len(groups) * S]`` run switches (indices into ``names``), arm-major, then G, then
    seed."""
    rows = [(names.estimators.index(a.estimator), names.losses.index(a.loss),
             names.aggs.index(a.agg), g) for a in arms for g in groups for _ in range(num_seeds)]
    return Spec(*(jnp.asarray(c, jnp.int32) for c in zip(*rows)))


def _token_advantages(index, rewards, mask, lengths, energy, token_mask,
                      names: Sequence[str] = ESTIMATORS):
    """``[Bg, Gg, N]`` advantages of estimator ``names[index]`` (traced) on the group buffer."""
    def per_rollout(name, **kw):
        def fn(r, m, ln, e, tm):
            a = advantages.compute(name, r, m, **({"lengths": ln} if name == "opo" else kw)).adv
            return jnp.broadcast_to(a[..., None], e.shape)
        return fn

    def otb(r, m, ln, e, tm):
        return advantages.optimal_token_baseline(r, m, energy=e, token_mask=tm)

    fns = [otb if n == "optimal_token_baseline" else per_rollout(n) for n in names]
    return jax.lax.switch(index, fns, rewards, mask, lengths, energy, token_mask)


def loss_function(name: str, epsilon: float) -> Callable[..., jax.Array]:
    """``fn(log_prob, old, adv, mask) -> [B, T]`` of loss family ``name`` (:data:`LOSS_FAMILIES`;
    ``epsilon``: the recipe's lower clip, read by the PPO-clip family only)."""
    registered, options = LOSS_FAMILIES[name]
    kw = dict(options, **({"epsilon": epsilon} if name in _RECIPE_EPSILON else {}))
    fn = losses.get(registered)
    return lambda lp, o, a, m: fn(lp, o, a, m, **kw)


def _token_loss(index, log_prob, old, adv, mask, epsilon, names: Sequence[str] = LOSSES):
    fns = [loss_function(name, epsilon) for name in names]
    return jax.lax.switch(index, fns, log_prob, old, adv, mask)


def _zero_gradient_fraction(index, log_prob, old, adv, mask, epsilon,
                            names: Sequence[str] = LOSSES):
    """Share of valid tokens with a non-zero advantage whose loss has no gradient in their own
    log-prob (clipped by PPO's or GSPO's clip, GMPO's log clip, or dropped by Clip-Cov): the
    "clipped tokens" of each loss, one definition for all."""
    lp = jax.lax.stop_gradient(log_prob)
    grad = jax.grad(lambda x: jnp.where(mask, _token_loss(index, x, old, adv, mask, epsilon,
                                                          names), 0).sum())(lp)
    live = mask & (jnp.broadcast_to(adv, lp.shape) != 0)
    return (live & (grad == 0)).sum() / jnp.maximum(live.sum(), 1)


def _aggregate(index, token_loss, mask, names: Sequence[str] = AGGREGATIONS):
    values = jnp.stack([losses.aggregate(token_loss, mask, m) for m in names])
    return values[index]


class State(NamedTuple):
    policy: Any
    opt_state: Any


@dataclasses.dataclass(frozen=True)
class ZooConfig:
    """``rl``: the recipe (its ``base``, learning rate, warm-up, minibatches, ``epsilon``,
    ``temperature``, ``eval_problems``); ``rollouts`` per step for every G; ``eval_samples``
    held-out samples per problem at the start and at the end; ``pool``: prompts are drawn from
    the first ``pool`` training prompts (every base has more; one fixed shape, so every base
    runs the same compiled sampler)."""

    rl: sequence.SequenceRLConfig
    rollouts: int = 32
    steps: int = 20
    eval_samples: int = 2
    groups: tuple[int, ...] = GROUPS
    pool: int = 2048

    def __post_init__(self):
        for g in self.groups:
            if self.rollouts % g:
                raise ValueError(f"rollouts={self.rollouts} must be a multiple of G={g}")
        if self.rollouts % self.rl.num_minibatches:
            raise ValueError(f"num_minibatches={self.rl.num_minibatches} must divide "
                             f"rollouts={self.rollouts}")


class Result(NamedTuple):
    """``history[name]`` ``[T, A, G, S]``; ``base`` held-out pass@1 ``[S]`` (the SFT base,
    evaluated once: the same for every arm and G); ``final`` ``[A, G, S]``."""

    arms: list
    groups: tuple
    history: dict
    base: np.ndarray
    final: np.ndarray
    seconds: float


@functools.lru_cache(maxsize=4)
def trainer_for(rl: sequence.SequenceRLConfig) -> sequence.Trainer:
    """The sequence trainer holding base, pool, verifier and held-out problems."""
    return sequence.Trainer(rl)


class Driver:
    """All stacked (arm, G, seed) runs of one SFT base (module docstring)."""

    def __init__(self, config: ZooConfig, trainer: sequence.Trainer | None = None,
                 share: Driver | None = None):
        """``share``: a driver whose compiled rollout, update and evaluation this one reuses
        (its config may differ only in the SFT base's seed: another base of the preset)."""
        self.config = config
        self.trainer = trainer or trainer_for(config.rl)
        rl = config.rl
        self.b_max = config.rollouts // min(config.groups)
        self.g_max = max(config.groups)
        if share is not None:
            mine = dataclasses.replace(config, rl=config.rl.replace(base=share.config.rl.base))
            if mine != share.config:
                raise ValueError("share= needs a driver whose config differs only in the SFT "
                                 "base's seed")
            self._rollout, self._updates = share._rollout, share._updates
            self._eval, self._init_opt = share._eval, share._init_opt
            self.eval_prompts, self.eval_valid = self._eval_inputs(config)
            return
        self._rollout = threaded_seed_map(self._rollout_one, (0, 0, 0, None, None),
                                          DECODE_COMPILE)
        self._updates: dict[Branches, Callable] = {}   # one compiled update per branch set
        self.eval_prompts, self.eval_valid = self._eval_inputs(config)
        self._eval = threaded_seed_map(self._eval_one, (0, 0, None, None), DECODE_COMPILE)
        self._init_opt = jax.jit(jax.vmap(sequence.make_optimizer(rl).init))

    def update_for(self, names: Branches) -> Callable:
        """The compiled update that switches between ``names`` (built once, shared)."""
        if names not in self._updates:
            one = functools.partial(self._update_one, names=names)
            self._updates[names] = jax.jit(sequence.seed_map(one, in_axes=(0, 0, 0, 0, 0)))
        return self._updates[names]

    def _eval_inputs(self, config):
        m = len(self.trainer.eval_problems)
        tile = lambda x: jnp.tile(x[:m], (config.eval_samples, 1))  # noqa: E731
        return tile(self.trainer.eval_prompts), tile(self.trainer.eval_valid)

    # -- one run
    def _rows(self, group):
        row = jnp.arange(self.config.rollouts)
        return row // group, row % group

    def _rollout_one(self, key, policy, spec: Spec, pool_prompts, pool_valid):
        rl = self.config.rl
        prompts = jax.random.choice(streams.stream(key, streams.PROMPTS), pool_prompts.shape[0],
                                    (self.b_max,), replace=False)
        grp, _ = self._rows(spec.group)
        idx = prompts[grp]                                                  # [R]
        out = transformer.sample(streams.stream(key, streams.SAMPLES), policy,
                                 pool_prompts[idx], pool_valid[idx],
                                 max_new_tokens=rl.base.max_new_tokens,
                                 temperature=rl.temperature, top_p=rl.top_p)
        return idx, out.tokens, out.mask, out.entropy

    def _update_one(self, key, state: State, spec: Spec, batch, rewards, *,
                    names: Branches = Branches()):
        rl = self.config.rl
        prompts, valid, tokens, mask = batch
        grp, slot = self._rows(spec.group)
        logits = jax.lax.stop_gradient(transformer.completion_logits(
            state.policy, prompts, valid, tokens)) / rl.temperature
        old = jnp.take_along_axis(jax.nn.log_softmax(logits, -1), tokens[..., None], -1)[..., 0]
        energy = advantages.realized_energy(logits, tokens)                  # [R, N]
        shape = (self.b_max, self.g_max)
        buf = lambda x, fill=0: jnp.full(shape + x.shape[1:], fill, x.dtype).at[  # noqa: E731
            grp, slot].set(x)
        gmask = buf(jnp.ones_like(rewards, bool), False)
        adv_buf = _token_advantages(spec.estimator, buf(rewards), gmask,
                                    buf(mask.sum(-1).astype(jnp.float32)), buf(energy),
                                    buf(mask, False), names.estimators)
        adv = adv_buf[grp, slot].astype(jnp.float32)                         # [R, N]
        opt = sequence.make_optimizer(rl)
        eps = 0.2 if rl.epsilon is None else rl.epsilon

        def objective(policy, mb):
            logp = transformer.score(policy, mb["prompts"], mb["valid"], mb["tokens"],
                                     temperature=rl.temperature)
            tok = _token_loss(spec.loss, logp, mb["old"], mb["adv"], mb["mask"], eps,
                              names.losses)
            total = _aggregate(spec.agg, tok, mb["mask"], names.aggs)
            clip = _zero_gradient_fraction(spec.loss, logp, mb["old"], mb["adv"], mb["mask"],
                                           eps, names.losses)
            return total, {"loss": total, "clip_frac": clip}

        data = {"prompts": prompts, "valid": valid, "tokens": tokens, "old": old, "adv": adv,
                "mask": mask}
        permutation = jax.random.permutation if rl.num_minibatches > 1 else None
        policy, opt_state, out = core.update(key, state.policy, state.opt_state, data,
                                             objective, opt, num_epochs=rl.num_iterations,
                                             num_minibatches=rl.num_minibatches,
                                             permutation=permutation)
        r_buf = buf(rewards)
        used = gmask.any(-1)
        informative = used & (jnp.where(gmask, r_buf, -jnp.inf).max(-1)
                              > jnp.where(gmask, r_buf, jnp.inf).min(-1))
        out.update(reward=rewards.mean(),
                   zero_adv_frac=1 - informative.sum() / jnp.maximum(used.sum(), 1),
                   response_length=mask.sum(-1).mean())
        return State(policy, opt_state), out

    def _eval_one(self, key, policy, prompts, valid):
        rl = self.config.rl
        return transformer.sample(key, policy, prompts, valid,
                                  max_new_tokens=rl.base.max_new_tokens,
                                  temperature=rl.temperature, top_p=rl.top_p).tokens

    # -- host side
    def verify(self, idx, tokens) -> tuple[np.ndarray, np.ndarray]:
        """Rewards and correctness ``[runs, R]`` of sampled rows (host verifier)."""
        idx, tokens = np.asarray(idx), np.asarray(tokens)
        rewards = np.zeros(idx.shape, np.float32)
        correct = np.zeros(idx.shape, bool)
        for i in range(idx.shape[0]):
            probs = [self.trainer.pool[j] for j in idx[i]]
            rewards[i], correct[i] = tasks.score_completions(
                probs, tokens[i], self.config.rl.reward_scheme,
                allow_truncated=self.config.rl.allow_truncated_completions)
        return rewards, correct

    def heldout_pass1(self, key, policy, seeds) -> np.ndarray:
        """Held-out pass@1 per run (``seeds[i]``: the run's seed, for paired eval keys)."""
        keys = jax.vmap(lambda s: jax.random.fold_in(key, s))(jnp.asarray(seeds))
        tokens = np.asarray(self._eval(keys, policy, self.eval_prompts, self.eval_valid))
        m, n = len(self.trainer.eval_problems), self.config.eval_samples
        _, ok = tasks.score_completions(
            self.trainer.eval_problems, tokens.reshape(len(seeds), n, m, -1),
            allow_truncated=self.config.rl.allow_truncated_completions)
        return ok.mean(axis=(1, 2))

    def run(self, key: jax.Array, arms: Sequence[Arm], num_seeds: int, *,
            progress: Callable[[range], Iterable[int]] | None = None) -> Result:
        """Train every arm at every G of the config for ``config.steps`` steps."""
        cfg = self.config
        start = time.perf_counter()
        a, g = len(arms), len(cfg.groups)
        names = branches(arms)
        spec, update = specs(arms, cfg.groups, num_seeds, names), self.update_for(names)
        n = a * g * num_seeds
        seeds = jnp.tile(jnp.arange(num_seeds), a * g)          # paired keys across arms, G
        rep = lambda x: jnp.broadcast_to(x, (n,) + jnp.shape(x))  # noqa: E731
        policy = jax.tree.map(rep, self.trainer.base_policy)
        state = State(policy, self._init_opt(policy))
        k_train, k_eval = jax.random.split(key)
        if self.trainer.pool_prompts.shape[0] < cfg.pool:
            raise ValueError(f"pool={cfg.pool} exceeds the base's "
                             f"{self.trainer.pool_prompts.shape[0]} training prompts")
        pool_p = self.trainer.pool_prompts[:cfg.pool]
        pool_v = self.trainer.pool_valid[:cfg.pool]
        history: dict[str, list] = {}
        for t in (range(cfg.steps) if progress is None else progress(range(cfg.steps))):
            step_key = jax.random.fold_in(k_train, t)
            keys = jax.vmap(lambda s, k=step_key: jax.random.fold_in(k, s))(seeds)
            idx, tokens, mask, entropy = self._rollout(
                streams.each(keys, streams.ROLLOUT), state.policy, spec, pool_p, pool_v)
            rewards, correct = self.verify(idx, tokens)
            batch = (pool_p[idx], pool_v[idx], tokens, mask)
            state, out = update(streams.each(keys, streams.UPDATE), state, spec, batch,
                                jnp.asarray(rewards))
            out = {k: np.asarray(v) for k, v in out.items()}
            out["pass1"] = correct.mean(-1)
            out["entropy"] = np.asarray((entropy * mask).sum((1, 2)) / np.maximum(
                mask.sum((1, 2)), 1))
            for name, v in out.items():
                history.setdefault(name, []).append(np.asarray(v).reshape(a, g, num_seeds))
        # the SFT base (once per seed) and every trained run in one evaluation: one set of
        # compiled sampling programs instead of two (each seed's keys as before)
        both = jax.tree.map(lambda b, x: jnp.concatenate(
            [jnp.broadcast_to(b, (num_seeds,) + jnp.shape(b)), x]), self.trainer.base_policy,
            state.policy)
        scores = self.heldout_pass1(k_eval, both, np.concatenate([np.arange(num_seeds),
                                                                  np.asarray(seeds)]))
        base, final = scores[:num_seeds], scores[num_seeds:].reshape(a, g, num_seeds)
        return Result(list(arms), tuple(cfg.groups),
                      {k: np.stack(v) for k, v in history.items()}, base, final,
                      time.perf_counter() - start)


def concat_results(results: Sequence[Result]) -> Result:
    """Several bases' results (same arms, G, steps) as one with all their seeds."""
    first = results[0]
    return Result(first.arms, first.groups,
                  {k: np.concatenate([r.history[k] for r in results], -1)
                   for k in first.history},
                  np.concatenate([r.base for r in results]),
                  np.concatenate([r.final for r in results], -1),
                  float(sum(r.seconds for r in results)))
