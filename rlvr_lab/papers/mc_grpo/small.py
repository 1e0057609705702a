"""MC-GRPO on the tiny transformer: a three-level reward and the G-sweep's arms.

The arithmetic verifier's own format + correctness reward (``reward_scheme="multi"``) is
nearly binary on the SFT base: 99% of its samples are well formed, so format never separates
rollouts. The MC-GRPO code's GSM8K reward has three levels -- 2 exact, 1.5 right value in a
different format, 0 otherwise -- and its sign flips need all three. :func:`partial_credit`
gives the tiny model the same levels from its own errors:

- 2: correct (the whole completion ``reversed(R)>R`` with ``R`` the sum);
- 1.5: well formed, and every digit is the right column sum modulo 10 but the carries are
  missing (``arithmetic.flawed_result``): the near miss of a solver that has the procedure
  and drops the carries -- the SFT base's systematic error;
- 0: anything else (malformed, or any other wrong answer).

A problem without a carry has no near miss (its carry-free sum is the answer), so its law has
two levels. On the base (temperature 1) the three levels have shares of about 0.1 / 0.4 / 0.5
over the training prompts (:func:`reward_law` measures them). A partial credit for the units
digit alone was tried first and rejected: 99% of the base's wrong answers have it, so that
reward was binary too. Correctness (pass@k, the held-out metric) is the verifier's, unchanged.

:class:`PartialCreditTrainer` is :class:`rlvr_lab.train.sequence.Trainer` with these rewards.
:func:`run_arms` trains several configs from one SFT base with the same key (paired seeds);
arms with the same rollout shape reuse the compiled sampler, and all reuse one compiled
evaluator (the compiled pieces only depend on the fields compared in :func:`_same_sampler`).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence

import jax
import numpy as np
import numpy.typing as npt

from rlvr_lab.envs import arithmetic, tasks, tokenizer
from rlvr_lab.train import sequence

LEVELS = (0.0, 1.5, 2.0)   # the MC-GRPO code's reward levels (GSM8K accuracy reward)


def partial_credit(problem: tasks.Problem, completion: str) -> tuple[float, bool]:
    """``(reward, correct)`` of one decoded completion: 2 correct, 1.5 the carry-free column
    sums (well formed), 0 otherwise (an arithmetic problem; never raises on the text)."""
    if problem.task != "arithmetic":
        raise ValueError(f"partial_credit needs an arithmetic problem; got task={problem.task!r}")
    answer = arithmetic.parse(completion)
    if answer is None:
        return LEVELS[0], False
    if answer == problem.target:
        return LEVELS[2], True
    near_miss = answer == arithmetic.flawed_result(problem)
    return (LEVELS[1] if near_miss else LEVELS[0]), False


def score(problems: Sequence[tasks.Problem], completion_ids: npt.ArrayLike, *,
          allow_truncated: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """:func:`rlvr_lab.envs.tasks.score_completions` with :func:`partial_credit`:
    ``completion_ids [..., M, N]`` -> ``(rewards float32, correct bool)`` of shape ``[..., M]``.
    A completion is read as the verifier reads it (``tokenizer.decode_completion``): one cut
    off before its EOS gets 0 and is not correct unless ``allow_truncated``."""
    def score_one(problem: tasks.Problem, row: np.ndarray) -> tuple[float, bool]:
        text = tokenizer.decode_completion(row, allow_truncated=allow_truncated)
        return (LEVELS[0], False) if text is None else partial_credit(problem, text)

    return tasks.score_rows(problems, completion_ids, score_one)


class PartialCreditTrainer(sequence.Trainer):
    """The sequence trainer with :func:`partial_credit` rewards (training rollouts only;
    held-out evaluation counts correctness as before)."""

    def verify(self, idx: jax.Array, tokens: jax.Array) -> tuple[np.ndarray, np.ndarray]:
        cfg = self.config
        s, b, g = idx.shape[0], cfg.num_prompts, cfg.num_generations
        tokens = np.asarray(tokens).reshape(s, b, g, -1)   # rows are ordered b*G + g
        rewards = np.zeros((s, b, g), np.float32)
        correct = np.zeros((s, b, g), bool)
        for i in range(s):
            probs = [self.pool[j] for j in np.asarray(idx[i])]
            r, c = score(probs, tokens[i].transpose(1, 0, 2),   # [G, B]
                         allow_truncated=cfg.allow_truncated_completions)
            rewards[i], correct[i] = r.T, c.T
        return rewards, correct

    def _verify_groups(self, pool_idx, tokens):
        probs = [self.pool[j] for j in np.asarray(pool_idx)]
        r, c = score(probs, np.asarray(tokens).transpose(1, 0, 2),
                     allow_truncated=self.config.allow_truncated_completions)
        return np.asarray(r, np.float32).T.copy(), np.asarray(c, bool).T.copy()


def reward_law(trainer: sequence.Trainer, key: jax.Array, num_prompts: int = 64,
               samples: int = 32) -> np.ndarray:
    """Empirical per-prompt laws of :func:`partial_credit` under the trainer's base policy:
    ``[num_prompts, len(LEVELS)]`` frequencies from ``samples`` rollouts of each of the first
    ``num_prompts`` training prompts."""
    import jax.numpy as jnp

    cfg = dataclasses.replace(trainer.config, num_generations=samples, num_minibatches=1)
    batch = sequence.rollout(key, trainer.base_policy, trainer.pool_prompts[:num_prompts],
                             trainer.pool_valid[:num_prompts], cfg)
    tokens = np.asarray(batch.tokens).reshape(num_prompts, samples, -1)
    r, _ = score(trainer.pool[:num_prompts], tokens.transpose(1, 0, 2),   # [samples, P]
                 allow_truncated=trainer.config.allow_truncated_completions)
    levels = jnp.asarray(LEVELS)
    return np.asarray((r.T[:, :, None] == np.asarray(levels)[None, None, :]).mean(1))


_SAMPLER_FIELDS = ("num_prompts", "num_generations", "temperature", "top_p", "base")
_EVAL_FIELDS = ("temperature", "top_p", "base")


def _same(a, b, fields) -> bool:
    return all(getattr(a, f) == getattr(b, f) for f in fields)


def make_trainers(configs: dict,
                  trainer_cls: type[sequence.Trainer] = PartialCreditTrainer) -> dict:
    """One trainer per config, built on one SFT base; a trainer reuses the compiled rollout of
    an earlier one with the same sampling fields and the compiled evaluators of the first with
    the same decoding (its ``_rollout``, ``_eval``, ``_eval_each`` attributes, when present)."""
    trainers: dict = {}
    base_policy = None
    for name, cfg in configs.items():
        tr = trainer_cls(cfg, base_policy=base_policy)
        base_policy = tr.base_policy
        for other in trainers.values():
            if _same(tr.config, other.config, _EVAL_FIELDS) and hasattr(other, "_eval"):
                tr._eval = other._eval
                tr._eval_each = getattr(other, "_eval_each", tr._eval_each)
            if _same(tr.config, other.config, _SAMPLER_FIELDS) and hasattr(other, "_rollout"):
                tr._rollout = other._rollout
        trainers[name] = tr
    return trainers


def run_arms(configs: dict, key: jax.Array, num_seeds: int, *,
             trainer_cls: type[sequence.Trainer] = PartialCreditTrainer,
             progress: Callable[[Iterable, str], Iterable] | None = None) -> dict:
    """``{name: sequence.Run}``: every config trained from the same SFT base with the same
    ``key`` (seed ``s`` of every arm draws its keys from the same stream: paired seeds).
    ``progress(iterable, desc)`` wraps the loop over arms (e.g. ``Context.progress``)."""
    trainers = make_trainers(configs, trainer_cls)
    items = list(configs.items())
    if progress is not None:
        items = progress(items, "arms")
    return {name: sequence.run(cfg, key, num_seeds, trainer=trainers[name])
            for name, cfg in items}
