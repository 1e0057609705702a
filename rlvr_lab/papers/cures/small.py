"""CurES and E3 on the tiny transformer: one driver, the arms as data.

Every arm is ``simulations.tiny_grpo``'s GRPO (PPO-clip 0.2 over two minibatches, token-mean,
no KL, Adam with warm-up) from the same SFT base on the same prompt pool. Arms differ in four
stages only, switched by the numbers of an :class:`Arm`, so all arms and seeds run in ONE
compiled step mapped over them (a compilation per arm would cost more than the training itself):

- which prompts: ``B`` distinct pool prompts, uniformly, or from CurES' softmax of
  ``sqrt(p_hat (1 - p_hat)) / t`` with ``p_hat`` the Beta-posterior mean of the rollouts seen so
  far (:mod:`.posterior`; flat prior, so no stage-0 rollouts are spent on estimating
  difficulty);
- how many rollouts each: ``G`` each; CurES' Neyman allocation ``n_i ∝ sqrt(p_hat (1 - p_hat))``
  (at least ``min_per_prompt``, at most ``g_max``); or E3's rank allocation with its
  per-epoch widening range (:mod:`rlvr_lab.papers.e3.allocation`). Always ``B G`` rollouts
  per step (equal rollouts), padded to ``g_max`` (padding is masked and not charged);
- the sampling temperature: fixed 1, or E3's entropy-targeting rule (target = the first
  step's entropy, cosine-annealed over the last 40%); the training log-probs are those of
  ``softmax(logits / T)`` (verl's, which E3 builds on);
- the reward: E3's length penalty on correct answers to easy prompts
  (:func:`rlvr_lab.papers.e3.allocation.apply_length_penalty`), ``length_coeff = 0`` = off.

Seeds are paired: seed ``s`` of every arm uses the same keys. Held-out evaluation samples
every arm at ONE fixed temperature (the config's, 1.0), whatever it trained at.

The trainer's pieces are reused (:class:`rlvr_lab.train.sequence.Trainer` for the base, pool
and verifier, :class:`~rlvr_lab.train.sequence.SequenceSampler`, the update pieces and the
seed-mapped wrapper of :mod:`rlvr_lab.train.transformer_update`); :func:`update` assembles
them here because the sequence trainer's temperature is static and E3's changes every step.
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
import numpy.typing as npt
import optax
import pandas as pd
from jax.typing import ArrayLike

from rlvr_lab import losses, metrics
from rlvr_lab.envs import tasks, tokenizer
from rlvr_lab.models import transformer
from rlvr_lab.papers.cures import posterior as post
from rlvr_lab.papers.cures.allocation import cures_allocation
from rlvr_lab.papers.cures.stage import GroupCounters
from rlvr_lab.papers.e3 import allocation as e3_alloc
from rlvr_lab.train import core, sequence, sft, transformer_update
from rlvr_lab.train import rollout as rollout_stages
from rlvr_lab.train.seed_threads import threaded_seed_map


class Arm(NamedTuple):
    """One arm's switches (numbers, so arms can be stacked and vmapped)."""

    sampling_t: float = 0.0         # > 0: CurES prompt sampling at this temperature; 0: uniform
    neyman: bool = False            # CurES' Neyman allocation
    e3_alloc: bool = False          # E3's rank allocation
    e3_temperature: bool = False    # E3's entropy-targeting temperature
    length_coeff: float = 0.0       # E3's length penalty mu (0: off)
    length_threshold: float = 0.1   # ... on prompts of rank <= this


def stack(arms: Sequence[Arm]) -> Arm:
    """``[A]`` arrays per field from a list of arms."""
    return Arm(*(jnp.asarray([getattr(a, f) for a in arms]) for f in Arm._fields))


@dataclasses.dataclass(frozen=True)
class DriverConfig:
    """Static settings: the RL recipe and the stages' ranges.

    ``rl``: the GRPO recipe (its ``num_prompts`` B, ``num_generations`` G, pool size, temperature
    for evaluation). ``g_max``: rollouts a prompt may get (groups are padded to it).
    ``steps_per_epoch``: E3's ranks are recomputed and its range widened once per epoch
    (None: pool size // B). ``eval_samples``: samples per held-out problem per evaluation
    call (pass@k for larger k repeats the call).
    """

    rl: sequence.SequenceRLConfig
    g_max: int = 16
    min_per_prompt: int = 2
    n_low: int = 4
    n_high: int = 12
    n_update: int = 2
    steps_per_epoch: int | None = None
    annealing_ratio: float = 0.4
    annealing_factor: float = 0.9
    eval_samples: int = 4

    def __post_init__(self):
        g = self.rl.num_generations
        if not (1 <= self.min_per_prompt <= g <= self.g_max):
            raise ValueError(f"min_per_prompt={self.min_per_prompt} <= num_generations={g} <= "
                             f"g_max={self.g_max} is required")
        if not (1 <= self.n_low <= g <= self.n_high <= self.g_max):
            raise ValueError(f"n_low={self.n_low} <= num_generations={g} <= n_high="
                             f"{self.n_high} <= g_max={self.g_max} is required")
        if (self.rl.num_prompts * self.g_max) % self.rl.num_minibatches:
            raise ValueError(f"num_minibatches={self.rl.num_minibatches} must divide "
                             f"num_prompts*g_max={self.rl.num_prompts * self.g_max}")
        if self.steps_per_epoch is not None and self.steps_per_epoch < 1:
            raise ValueError(f"steps_per_epoch={self.steps_per_epoch!r} must be >= 1 or None")
        if self.eval_samples < 1:
            raise ValueError(f"eval_samples={self.eval_samples!r} must be >= 1")


class ArmState(NamedTuple):
    policy: Any
    opt_state: Any
    posterior: post.BetaPosterior   # CurES: counts per pool prompt
    reward_sum: jnp.ndarray         # E3: per pool prompt
    reward_count: jnp.ndarray
    rank: jnp.ndarray               # E3 rank (recomputed once per epoch)
    ranked: jnp.ndarray             # bool: the prompt had statistics at the last ranking
    step: jnp.ndarray
    temperature: jnp.ndarray
    target: jnp.ndarray             # E3: the first step's entropy
    counters: GroupCounters


@functools.lru_cache(maxsize=4)
def trainer_for(rl: sequence.SequenceRLConfig) -> sequence.Trainer:
    """The sequence trainer holding base, pool and verifier (one per recipe and process)."""
    return sequence.Trainer(rl)


def _rollout_at(temperature):
    """A ``SequenceSampler.sample_fn`` drawing at a (traced) temperature."""
    def sample_fn(key, policy, prompts, valid, cfg, mesh):
        g = cfg.num_generations
        prompts, valid = jnp.repeat(prompts, g, axis=0), jnp.repeat(valid, g, axis=0)
        out = transformer.sample(key, policy, prompts, valid,
                                 max_new_tokens=cfg.base.max_new_tokens,
                                 temperature=temperature, top_p=cfg.top_p)
        return sequence.RolloutBatch(prompts, valid, out.tokens, out.mask, out.logp,
                                     out.entropy)
    return sample_fn


def update(key: jax.Array, policy: transformer.Policy, opt_state: optax.OptState,
           batch: sequence.RolloutBatch, rewards: ArrayLike, group_mask: jax.Array,
           temperature: ArrayLike, rl: sequence.SequenceRLConfig
           ) -> tuple[transformer.Policy, optax.OptState, dict[str, jax.Array]]:
    """One GRPO update (``rl``'s estimator, loss, aggregation, epochs x minibatches) with the
    log-probs of ``softmax(logits / temperature)``; no KL, no rollout correction."""
    loss_fn = core.policy_loss(rl.policy_loss, rl.loss_options())
    adv, flat_adv, token_mask = transformer_update.row_advantages(rl, rewards, batch.mask,
                                                                  group_mask, float32=True)
    old = jax.lax.stop_gradient(transformer_update.score(policy, batch, temperature))

    def objective(pol, minibatch):
        logp = transformer_update.score(pol, minibatch["batch"], temperature)
        return core.objective(loss_fn, logp, minibatch["old"], minibatch["adv"][:, None],
                              minibatch["mask"], agg_mode=rl.loss_agg_mode,
                              options=rl.loss_options())

    data = {"batch": batch, "old": old, "adv": flat_adv, "mask": token_mask}
    policy, opt_state, out = transformer_update.optimize(key, policy, opt_state, data, objective,
                                                         rl)
    zero = (jnp.all(jnp.where(group_mask, adv.adv == 0, True), -1) & group_mask.any(-1))
    out["zero_adv_frac"] = zero.sum() / jnp.maximum(group_mask.any(-1).sum(), 1)
    return policy, opt_state, out


class Driver:
    """Runs stacked arms x seeds (see the module docstring)."""

    def __init__(self, config: DriverConfig, trainer: sequence.Trainer | None = None):
        self.config = config
        self.trainer = trainer or trainer_for(config.rl)
        tr, rl = self.trainer, config.rl
        self.num_pool = tr.pool_prompts.shape[0]
        self.spe = (max(self.num_pool // rl.num_prompts, 1) if config.steps_per_epoch is None
                    else config.steps_per_epoch)
        ev = sft.encode(rl.base, tr.eval_problems)
        n = config.eval_samples
        self.eval_prompts = jnp.tile(jnp.asarray(ev.prompts), (n, 1))
        self.eval_valid = jnp.tile(jnp.asarray(ev.prompt_valid), (n, 1))
        self._steps: dict[int, Any] = {}   # total steps (static: E3's annealing) -> jitted
        self._sample_eval = threaded_seed_map(self._eval_one, (0, 0, None, None), {})
        self._init_opt = jax.jit(jax.vmap(transformer_update.make_optimizer(rl).init))

    def step_fn(self, total_steps: int) -> Callable[..., tuple[ArmState, dict[str, jax.Array]]]:
        """The jitted step of all stacked runs for a run of ``total_steps`` steps."""
        if total_steps not in self._steps:
            one = functools.partial(self._step_one, total_steps=total_steps)
            self._steps[total_steps] = transformer_update.seed_mapped(one, (0, 0, 0, None, None))
        return self._steps[total_steps]

    # -- one arm, one seed
    def _step_one(self, key, state: ArmState, arm: Arm, pool_prompts, pool_valid, *,
                  total_steps: int):
        cfg, rl = self.config, self.config.rl
        B, G, gm = rl.num_prompts, rl.num_generations, cfg.g_max
        k_prompt, k_sample, k_update = jax.random.split(key, 3)
        p_hat = post.posterior_mean(state.posterior)
        t = jnp.where(arm.sampling_t > 0, arm.sampling_t, 1.0)
        q = jnp.where(arm.sampling_t > 0, post.cures_prompt_probs(p_hat, t), 1.0 / self.num_pool)
        prompts = post.sample_prompts(k_prompt, q, B)
        epoch = state.step // self.spe
        n_min = jnp.maximum(G - epoch * cfg.n_update, cfg.n_low)
        n_max = jnp.minimum(G + epoch * cfg.n_update, cfg.n_high)
        counts = jnp.where(
            arm.neyman, cures_allocation(p_hat[prompts], B * G, min_per_prompt=cfg.min_per_prompt,
                                         max_per_prompt=gm),
            jnp.where(arm.e3_alloc, e3_alloc.e3_counts(state.rank[prompts], B * G, n_min, n_max,
                                                       cap_at_max=True),
                      jnp.full((B,), G, jnp.int32)))
        sampler = sequence.SequenceSampler(state.policy, pool_prompts, pool_valid, rl,
                                           _rollout_at(state.temperature),
                                           self.trainer._verify_groups)
        groups = rollout_stages.padded_groups(k_sample, sampler, prompts, counts, gm)
        mask = groups.mask
        correct = groups.correct & mask
        lengths = groups.answers["mask"].sum(-1)
        rank = jnp.where(state.ranked, state.rank, e3_alloc.UNSEEN)[prompts]
        shaped = e3_alloc.apply_length_penalty(groups.rewards, lengths, rank, arm.length_coeff,
                                               arm.length_threshold)
        batch = sequence.rows_of(groups)
        policy, opt_state, out = update(k_update, state.policy, state.opt_state, batch, shaped,
                                        mask, state.temperature, rl)
        # E3's statistics (raw rewards) and ranks, once per epoch
        m = mask.astype(jnp.float32)
        reward_sum = state.reward_sum.at[prompts].add((groups.rewards * m).sum(-1))
        reward_count = state.reward_count.at[prompts].add(m.sum(-1))
        end = (state.step + 1) % self.spe == 0
        seen = reward_count > 0
        new_rank = e3_alloc.e3_ranks(reward_sum / jnp.maximum(reward_count, 1), seen)
        # E3's temperature rule on the mean token entropy of the sampled batch
        tok = batch.mask & mask.reshape(-1)[:, None]
        h = losses.masked_mean(batch.entropy, tok)
        target = jnp.where(state.step == 0, h, state.target)
        goal = e3_alloc.e3_target_entropy(state.step, target, total_steps,
                                          annealing_ratio=cfg.annealing_ratio,
                                          annealing_factor=cfg.annealing_factor)
        new_t = e3_alloc.e3_temperature_update(state.temperature, h, goal, tokenizer.VOCAB_SIZE)
        temperature = jnp.where(arm.e3_temperature & (state.step > 0), new_t, state.temperature)
        easy = (rank != e3_alloc.UNSEEN) & (rank <= arm.length_threshold)
        easy_correct = correct & easy[:, None]
        # the penalty's effect in this very batch: advantages with and without it
        penalised = (shaped != groups.rewards) & mask
        raw_adv = core.estimator(rl)(groups.rewards, mask).adv
        shaped_adv = core.estimator(rl)(shaped, mask).adv
        changed = (jnp.abs(shaped_adv - raw_adv) > 1e-4) & mask
        out.update(
            pass1=correct.sum() / jnp.maximum(mask.sum(), 1),
            entropy=h, temperature=state.temperature, target_entropy=goal,
            rollouts=groups.spent.astype(jnp.float32),
            all_incorrect=rollout_stages.group_outcomes(correct.astype(jnp.float32), mask)[1]
            .mean(),
            max_count=counts.max().astype(jnp.float32),
            length_correct=(lengths * correct).sum() / jnp.maximum(correct.sum(), 1),
            easy_correct_frac=easy_correct.sum() / jnp.maximum(correct.sum(), 1),
            length_easy_correct=(lengths * easy_correct).sum()
            / jnp.maximum(easy_correct.sum(), 1),
            # share of easy groups whose correct answers differ in length: the only groups
            # where the penalty changes a group-normalised advantage
            length_spread_frac=_spread(lengths, easy_correct).sum()
            / jnp.maximum(easy_correct.any(-1).sum(), 1),
            penalised_groups=penalised.any(-1).sum().astype(jnp.float32),
            penalty_changed_groups=(penalised.any(-1) & changed.any(-1)).sum()
            .astype(jnp.float32),
            mean_p_hat=p_hat[prompts].mean())
        new = ArmState(policy, opt_state,
                       post.update_posterior(state.posterior, prompts, correct, mask),
                       reward_sum, reward_count, jnp.where(end, new_rank, state.rank),
                       jnp.where(end, seen, state.ranked), state.step + 1, temperature, target,
                       state.counters.add(correct, mask, groups.spent))
        return new, out

    def _eval_one(self, key, policy, prompts, valid):
        rl = self.config.rl
        return transformer.sample(key, policy, prompts, valid,
                                  max_new_tokens=rl.base.max_new_tokens,
                                  temperature=rl.temperature, top_p=rl.top_p)

    # -- host side
    def init(self, num_arms: int, num_seeds: int) -> ArmState:
        """States for ``num_arms * num_seeds`` (arm-major) runs from the SFT base."""
        n = num_arms * num_seeds
        rep = lambda x: jnp.broadcast_to(x, (n,) + jnp.shape(x))  # noqa: E731
        policy = jax.tree.map(rep, self.trainer.base_policy)
        zeros = jnp.zeros((n, self.num_pool), jnp.float32)
        return ArmState(policy, self._init_opt(policy), post.BetaPosterior(zeros, zeros), zeros,
                        zeros, zeros, jnp.zeros((n, self.num_pool), bool),
                        jnp.zeros((n,), jnp.int32),
                        jnp.full((n,), self.config.rl.temperature, jnp.float32),
                        jnp.zeros((n,), jnp.float32),
                        jax.tree.map(rep, GroupCounters.zeros()))

    def evaluate(self, key: jax.Array, policy: transformer.Policy, num_arms: int, num_seeds: int,
                 calls: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """Held-out correctness ``[A, S, M, calls * eval_samples]`` at the fixed temperature;
        seed ``s`` of every arm draws with the same keys. Also the completion lengths."""
        n, m = self.config.eval_samples, len(self.trainer.eval_problems)
        correct, length = [], []
        paired = jnp.tile(jnp.arange(num_seeds), num_arms)   # run i = arm * S + seed
        for c in range(calls):
            keys = _seed_keys(jax.random.fold_in(key, c), paired)
            out = self._sample_eval(keys, policy, self.eval_prompts, self.eval_valid)
            tokens = np.asarray(out.tokens).reshape(num_arms * num_seeds, n, m, -1)
            _, ok = tasks.score_completions(
                self.trainer.eval_problems, tokens,
                allow_truncated=self.trainer.config.allow_truncated_completions)
            correct.append(ok.transpose(0, 2, 1))                          # [AS, M, n]
            length.append(np.asarray(out.mask).sum(-1).reshape(-1, n, m).transpose(0, 2, 1))
        shape = (num_arms, num_seeds, m, calls * n)
        return (np.concatenate(correct, -1).reshape(shape),
                np.concatenate(length, -1).reshape(shape))

    def run(self, key: jax.Array, arms: Sequence[Arm], num_seeds: int, steps: int, *,
            eval_every: int, final_calls: int = 1,
            progress: Callable[[range], Iterable[int]] | None = None) -> Result:
        """Train the ``arms`` for ``steps`` steps; :class:`Result`.

        Held-out evaluations (``eval_samples`` per problem) at step 0, every ``eval_every``
        steps and at the end; at step 0 and at the end ``final_calls`` calls (pass@k up to
        ``final_calls * eval_samples``).
        """
        start = time.perf_counter()
        a = len(arms)
        spec = jax.tree.map(lambda x: jnp.repeat(x, num_seeds), stack(arms))
        state = self.init(a, num_seeds)
        k_train, k_eval = jax.random.split(key)
        history: dict[str, list] = {}
        evals = {"step": [], "correct": [], "length": []}
        full = {}

        def evaluate(step, calls, keep=False):
            correct, length = self.evaluate(jax.random.fold_in(k_eval, step), state.policy, a,
                                            num_seeds, calls)
            evals["step"].append(step)
            evals["correct"].append(correct[..., :self.config.eval_samples])
            evals["length"].append(length[..., :self.config.eval_samples])
            if keep:
                full[step] = (correct, length)

        evaluate(0, final_calls, keep=True)
        steps_iter = range(steps) if progress is None else progress(range(steps))
        step_fn = self.step_fn(steps)
        paired = jnp.tile(jnp.arange(num_seeds), a)   # run i = arm * S + seed: paired seeds
        for t in steps_iter:
            keys = _seed_keys(jax.random.fold_in(k_train, t), paired)
            state, out = step_fn(keys, state, spec, self.trainer.pool_prompts,
                                 self.trainer.pool_valid)
            for name, v in out.items():
                history.setdefault(name, []).append(np.asarray(v).reshape(a, num_seeds))
            done = t + 1
            if done == steps:
                evaluate(done, final_calls, keep=True)
            elif done % eval_every == 0:
                evaluate(done, 1)
        return Result(state=state, arms=list(arms),
                      history={k: np.stack(v) for k, v in history.items()},
                      eval_steps=np.asarray(evals["step"]),
                      correct=np.stack(evals["correct"]), length=np.stack(evals["length"]),
                      base=full[0], final=full[steps], steps=steps,
                      seconds=time.perf_counter() - start)


class Result(NamedTuple):
    """``history[name]`` ``[T, A, S]``; ``correct``/``length`` ``[E, A, S, M, eval_samples]``
    at ``eval_steps``; ``base``/``final``: ``(correct, length)`` ``[A, S, M, n]`` with all the
    samples of the first and last evaluations (``n = final_calls * eval_samples``)."""

    state: ArmState
    arms: list
    history: dict
    eval_steps: np.ndarray
    correct: np.ndarray
    length: np.ndarray
    base: tuple
    final: tuple
    steps: int
    seconds: float

    def pass1(self) -> np.ndarray:
        """Held-out pass@1 ``[E, A, S]``."""
        return self.correct.mean(axis=(-1, -2))

    def pass_at(self, which: str = "final", ks: npt.ArrayLike | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
        """``(ks, pass@k [A, S, K])`` from all samples of the ``"base"`` or ``"final"``
        evaluation (unbiased estimator, mean over problems)."""
        correct = (self.base if which == "base" else self.final)[0]
        n = correct.shape[-1]
        ks = np.asarray([k for k in (1, 2, 4, 8, 16, 32, 64, 128) if k <= n] if ks is None
                        else ks)
        c = correct.sum(-1)                                               # [A, S, M]
        pa = np.asarray(metrics.pass_at_k(n, c[..., None], ks))          # [A, S, M, K]
        return ks, pa.mean(-2)

    def correct_length(self, which: str = "final") -> np.ndarray:
        """Mean length (tokens) of the correct held-out completions ``[A, S]``."""
        correct, length = self.base if which == "base" else self.final
        return (length * correct).sum(axis=(-1, -2)) / np.maximum(correct.sum(axis=(-1, -2)), 1)


def concat_results(results: Sequence[Result]) -> Result:
    """Several :class:`Result` (e.g. one per SFT base, same arms and steps) as one with all
    their seeds (seed axis in order), for figures and tables; ``state`` is left out (None)."""
    if not results:
        raise ValueError("concat_results needs at least one result")
    first = results[0]
    cat = lambda axis, xs: np.concatenate([np.asarray(x) for x in xs], axis)  # noqa: E731
    pair = lambda which: tuple(cat(1, [getattr(r, which)[i] for r in results])  # noqa: E731
                               for i in range(2))
    return Result(state=None, arms=first.arms,
                  history={k: cat(2, [r.history[k] for r in results]) for k in first.history},
                  eval_steps=first.eval_steps, correct=cat(2, [r.correct for r in results]),
                  length=cat(2, [r.length for r in results]), base=pair("base"),
                  final=pair("final"), steps=first.steps,
                  seconds=float(sum(r.seconds for r in results)))


def frames(res: Result, names: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-step metrics and held-out pass@1, long form (arm, seed, step, ...)."""
    a, s = len(names), res.history["pass1"].shape[2]
    hist = pd.concat([pd.DataFrame({"arm": names[i], "seed": j, "step": np.arange(res.steps),
                                    **{k: v[:, i, j] for k, v in res.history.items()}})
                      for i in range(a) for j in range(s)], ignore_index=True)
    p1 = res.pass1()
    ev = pd.concat([pd.DataFrame({"arm": names[i], "seed": j, "step": res.eval_steps,
                                  "heldout_pass1": p1[:, i, j]})
                    for i in range(a) for j in range(s)], ignore_index=True)
    return hist, ev


def _seed_keys(key, seeds):
    """``fold_in(key, seed)`` for each entry of ``seeds`` (equal seeds, equal keys)."""
    return jax.vmap(lambda s: jax.random.fold_in(key, s))(seeds)


def _spread(lengths, mask):
    """Bool ``[B]``: the masked lengths of a group are not all equal."""
    big = jnp.iinfo(jnp.int32).max
    lo = jnp.where(mask, lengths, big).min(-1)
    hi = jnp.where(mask, lengths, -1).max(-1)
    return mask.any(-1) & (hi > lo)


# ----------------------------------------------------------------------------- analysis helpers
def first_crossing(values: npt.ArrayLike, x: npt.ArrayLike, target: float) -> float:
    """``x`` where ``values`` first reaches ``target`` (linear interpolation between the
    points; 0 if already there; NaN if never)."""
    values, x = np.asarray(values, float), np.asarray(x, float)
    hit = np.flatnonzero(values >= target)
    if not hit.size:
        return float("nan")
    i = hit[0]
    if i == 0:
        return float(x[0])
    frac = (target - values[i - 1]) / (values[i] - values[i - 1])
    return float(x[i - 1] + frac * (x[i] - x[i - 1]))


def paired_ratio(base: npt.ArrayLike, arm: npt.ArrayLike, *, cap: float, reps: int = 4000,
                 level: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """``mean(base) / mean(arm)`` over paired seeds with a paired bootstrap interval (seeds
    resampled jointly). A seed that never reached the target (NaN) counts as ``cap`` (the
    run's whole budget: a bound in that arm's favour). Returns ``(ratio, low, high)``; with
    fewer than two seeds the interval is infinite."""
    base = np.nan_to_num(np.asarray(base, float), nan=cap)
    arm = np.nan_to_num(np.asarray(arm, float), nan=cap)
    ratio = float(base.mean() / max(arm.mean(), 1e-12))
    if base.size < 2:
        return ratio, -np.inf, np.inf
    idx = np.random.default_rng(seed).integers(0, base.size, (reps, base.size))
    boot = base[idx].mean(1) / np.maximum(arm[idx].mean(1), 1e-12)
    return (ratio, float(np.quantile(boot, (1 - level) / 2)),
            float(np.quantile(boot, (1 + level) / 2)))
