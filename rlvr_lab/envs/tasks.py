"""Shared interface of the synthetic verifiable tasks (arithmetic, countdown, search).

A task module provides ``generate(rng, n, difficulties) -> list[Problem]`` (a NumPy
``Generator``; deterministic for a seed) and ``verify(problem, completion) -> Verdict`` (never
raises, never evaluates model text as code). This module holds the common types, the task
registry, the reward schemes and the batch helpers that turn problems into token arrays.

Rewards (``scheme``):

- ``"binary"``: 1 if correct else 0;
- ``"multi"``: ``format_reward * format_ok + correct_reward * correct`` with defaults 0.5 and
  1.5, so rewards lie in {0, 0.5, 1.5, 2} -- a format + correctness reward as in the MC-GRPO
  code (their levels {0, 1.5, 2}); needed for sign-flip studies, where binary rewards cannot
  flip a mean-baseline advantage.

Completions are read from token rows by :func:`score_completions`: only the characters before
the first EOS count, a PAD/BOS token there is a malformed character (never skipped), and a row
**without EOS** -- cut off by the generation budget -- is not a finished answer: it scores
``Verdict(False, False)`` (reward 0 in both schemes), so a prefix that happens to read as the
answer (``153`` cut from ``1534``) is not correct. ``allow_truncated=True`` (the trainers'
``allow_truncated_completions``) scores the truncated text as written instead, as TRL's reward
functions do; TRL's ``mask_truncated_completions`` (also an option here) is a different thing:
it drops truncated completions from the loss and leaves their reward alone.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from types import ModuleType
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from rlvr_lab import discovery
from rlvr_lab._registry import check_choice
from rlvr_lab.envs import tokenizer

TASK_NAMES = ("arithmetic", "countdown", "search")
REWARD_SCHEMES = ("binary", "multi")


@dataclasses.dataclass(frozen=True)
class Problem:
    """One task instance: the prompt text, a reference solution, what the verifier needs."""

    task: str
    prompt: str
    solution: str
    target: int
    numbers: tuple[int, ...]
    difficulty: int


class Verdict(NamedTuple):
    format_ok: bool
    correct: bool


def task_module(name: str) -> ModuleType:
    """The module implementing task ``name`` (one of :data:`TASK_NAMES`)."""
    check_choice("task", name, TASK_NAMES)
    return discovery.load("rlvr_lab.envs", (name,))[name]


def generate(name: str, rng: np.random.Generator, n: int,
             difficulties: Iterable[int] | np.ndarray) -> list[Problem]:
    """``n`` problems of task ``name`` with difficulties drawn uniformly from ``difficulties``.

    ``n`` is an integer >= 0 and ``difficulties`` a non-empty sequence of integers (the task
    checks their range); anything else is a one-line ValueError.
    """
    module = task_module(name)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng={str(rng)[:60]!r} is not allowed; pass a numpy.random.Generator, "
                        "e.g. np.random.default_rng(0)")
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"n={n!r} is not allowed; it must be an integer >= 0")
    difficulties = tuple(np.atleast_1d(difficulties).tolist()) \
        if isinstance(difficulties, np.ndarray) else tuple(difficulties)
    if not difficulties or any(isinstance(d, bool) or not isinstance(d, (int, np.integer))
                               for d in difficulties):
        raise ValueError(f"difficulties={difficulties!r} is not allowed; it must be a non-empty "
                         "sequence of integers")
    return module.generate(rng, n, difficulties)


def flawed_solution(problem: Problem) -> str:
    """A worked solution in the task's format with a systematic error (the task's
    ``flawed_solution``): imperfect demonstrations for the SFT base."""
    return task_module(problem.task).flawed_solution(problem)


def verify(problem: Problem, completion: str) -> Verdict:
    """Verdict for ``completion`` (decoded text); malformed input gives (False, False)."""
    try:
        return task_module(problem.task).verify(problem, completion)
    except Exception:  # a verifier bug must not crash a training run; count it as wrong
        return Verdict(False, False)


def reward(verdict: Verdict, scheme: str = "binary", *, format_reward: float = 0.5,
           correct_reward: float = 1.5) -> float:
    check_choice("scheme", scheme, REWARD_SCHEMES)
    if scheme == "binary":
        return float(verdict.correct)
    return format_reward * verdict.format_ok + correct_reward * verdict.correct


class Batch(NamedTuple):
    """Token arrays of a list of problems (NumPy): prompts left-padded, solutions right-padded."""

    prompts: np.ndarray          # [M, P] int32
    prompt_valid: np.ndarray     # [M, P] bool
    solutions: np.ndarray        # [M, N] int32, solution + EOS
    solution_mask: np.ndarray    # [M, N] bool
    difficulty: np.ndarray       # [M] int


def encode(problems: Sequence[Problem], prompt_width: int, completion_width: int) -> Batch:
    prompts, valid = tokenizer.encode_prompts([p.prompt for p in problems], prompt_width)
    sols, mask = tokenizer.encode_completions([p.solution for p in problems], completion_width)
    return Batch(prompts, valid, sols, mask, np.array([p.difficulty for p in problems]))


def verify_tokens(problem: Problem, completion_ids: npt.ArrayLike, *,
                  allow_truncated: bool = False) -> Verdict:
    """Verdict for one completion row of token ids: the text before its first EOS
    (:func:`~rlvr_lab.envs.tokenizer.decode_completion`); a row without EOS is
    ``Verdict(False, False)`` unless ``allow_truncated``."""
    text = tokenizer.decode_completion(completion_ids, allow_truncated=allow_truncated)
    return Verdict(False, False) if text is None else verify(problem, text)


def score_completions(problems: Sequence[Problem], completion_ids: npt.ArrayLike,
                      scheme: str = "binary", *, allow_truncated: bool = False,
                      **reward_kw: float) -> tuple[np.ndarray, np.ndarray]:
    """Decode ``completion_ids`` ``[..., M, N]`` (leading axes = repeats of the M problems in
    order, e.g. seeds or groups flattened) and verify (:func:`verify_tokens`: a row without EOS
    is not correct unless ``allow_truncated``). Returns ``(rewards, correct)`` float32 and bool
    arrays of shape ``completion_ids.shape[:-1]``."""
    if not isinstance(allow_truncated, (bool, np.bool_)):
        raise TypeError(f"allow_truncated={allow_truncated!r} is not allowed; it must be a bool")
    if len(problems) == 0:
        raise ValueError("problems is empty; score_completions needs at least one problem")
    ids = np.asarray(completion_ids)
    if ids.ndim < 2 or ids.dtype.kind not in "iu":
        raise ValueError(f"completion_ids of shape {ids.shape} and dtype {ids.dtype} is not "
                         "allowed; it must be an integer array [..., M, N] of token ids")
    allow = bool(allow_truncated)

    def score_one(problem: Problem, row: np.ndarray) -> tuple[float, bool]:
        verdict = verify_tokens(problem, row, allow_truncated=allow)
        return reward(verdict, scheme, **reward_kw), verdict.correct

    return score_rows(problems, ids, score_one)


def score_rows(problems: Sequence[Problem], completion_ids: npt.ArrayLike,
               score_one: Callable[[Problem, np.ndarray], tuple[float, bool]]
               ) -> tuple[np.ndarray, np.ndarray]:
    """``(rewards float32, correct bool)`` of shape ``[..., M]`` for ``completion_ids``
    ``[..., M, N]`` (leading axes = repeats of the M problems in order), one
    ``score_one(problem, token_row) -> (reward, correct)`` per row; the loop of
    :func:`score_completions` and of other reward rules (MC-GRPO's partial credit)."""
    ids = np.asarray(completion_ids)
    flat = ids.reshape(-1, ids.shape[-1])
    m = len(problems)
    if flat.shape[0] % m:
        raise ValueError(f"{flat.shape[0]} completions are not a multiple of {m} problems")
    rewards = np.zeros(flat.shape[0], np.float32)
    correct = np.zeros(flat.shape[0], bool)
    for i, row in enumerate(flat):
        rewards[i], correct[i] = score_one(problems[i % m], row)
    return rewards.reshape(ids.shape[:-1]), correct.reshape(ids.shape[:-1])


def widths(name: str, difficulties: Iterable[int]) -> tuple[int, int]:
    """(prompt width incl. BOS, reference completion width incl. EOS) for the hardest level."""
    return task_module(name).widths(max(difficulties))
