"""Multi-digit arithmetic with a short worked format.

Prompt ``A47+85=``; reference completion ``231>132``: the result written least-significant
digit first (the order in which carries are produced, which a small causal model can compute
digit by digit), then ``>`` and the result in normal order. Difficulty ``d`` = number of
digits of both operands (``d=1``: 0-9). Subtraction (``ops`` containing ``"-"``) keeps
``a >= b``.

Verifier (what the reward accepts): the WHOLE completion is parsed as ``S>R`` -- exactly one
``>``, ``R`` the canonical decimal of a number (digits only, no sign, no leading zeros, at most
12 digits) and ``S`` exactly ``R`` reversed. ``format_ok`` is that parse succeeding;
``correct`` additionally needs ``R`` to equal the result, so a correct verdict implies the full
format. Known hacks score as the format says: ``garbage>153``, ``351>153>153`` (repeated
answer), ``153`` (answer only), ``000>132`` (scratch not the reversed answer), ``351>0153``
(leading zero) are all neither well-formed nor correct.

Imperfect demonstrations (:func:`flawed_solution`): the same format, with the arithmetic of a
solver that drops every carry (or ignores every borrow); well-formed, and wrong exactly when some
column carries. :mod:`rlvr_lab.train.sft` mixes a share of them into the SFT data, so the base
learns the right procedure and a systematic error side by side and the verifier has something
to fix.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rlvr_lab.envs.tasks import Problem, Verdict

NAME = "arithmetic"
MAX_DIGITS = 6


def _operand(rng, d):
    low = 0 if d == 1 else 10 ** (d - 1)
    return int(rng.integers(low, 10 ** d))


def make_problem(a: int, b: int, op: str = "+", difficulty: int | None = None) -> Problem:
    """The problem ``a op b`` for whole numbers ``0 <= a, b < 10**MAX_DIGITS`` (the prompt
    has no sign, so a negative operand has no problem text); one-line ValueError otherwise."""
    for name, x in (("a", a), ("b", b)):
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)) \
                or not 0 <= x < 10 ** MAX_DIGITS:
            raise ValueError(f"{name}={x!r} is not allowed; operands are integers from 0 to "
                             f"{10 ** MAX_DIGITS - 1}")
    a, b = int(a), int(b)
    if difficulty is not None and (isinstance(difficulty, (bool, np.bool_)) or not isinstance(
            difficulty, (int, np.integer)) or difficulty < 1):
        raise ValueError(f"difficulty={difficulty!r} is not allowed; it must be an integer >= 1")
    if not isinstance(op, str) or op not in "+-" or len(op) != 1:
        raise ValueError(f"op={op!r} is not allowed; choose '+' or '-'")
    result = a + b if op == "+" else a - b
    if result < 0:
        raise ValueError(f"{a}-{b} is negative; subtraction problems need a >= b")
    text = str(result)
    return Problem(task=NAME, prompt=f"A{a}{op}{b}=", solution=f"{text[::-1]}>{text}",
                   target=result, numbers=(a, b),
                   difficulty=difficulty if difficulty is not None else len(str(max(a, b))))


def generate(rng: np.random.Generator, n: int, difficulties: Sequence[int] = (1, 2, 3),
             ops: Sequence[str] = ("+",)) -> list[Problem]:
    for d in difficulties:
        if not 1 <= d <= MAX_DIGITS:
            raise ValueError(f"difficulty={d!r} is not allowed; arithmetic uses 1..{MAX_DIGITS}")
    out = []
    for _ in range(n):
        d = int(rng.choice(difficulties))
        op = str(rng.choice(ops))
        a, b = _operand(rng, d), _operand(rng, d)
        if op == "-" and a < b:
            a, b = b, a
        out.append(make_problem(a, b, op, d))
    return out


def _digits_reversed(x: int) -> list[int]:
    return [int(c) for c in str(x)[::-1]]


def flawed_result(problem: Problem) -> int:
    """The result a solver gets when it drops every carry (``+``) or ignores every borrow
    (``-``): digit-wise ``(a_i +- b_i) mod 10``. Equal to the true result when no column
    carries or borrows."""
    a, b = problem.numbers
    op = "-" if "-" in problem.prompt else "+"
    da, db = _digits_reversed(a), _digits_reversed(b)
    width = max(len(da), len(db))
    da, db = da + [0] * (width - len(da)), db + [0] * (width - len(db))
    sign = 1 if op == "+" else -1
    digits = [(x + sign * y) % 10 for x, y in zip(da, db)]
    return int("".join(map(str, digits[::-1])))


def flawed_solution(problem: Problem) -> str:
    """A worked solution in the reference format whose arithmetic drops every carry/borrow
    (:func:`flawed_result`): the imperfect demonstration of :mod:`rlvr_lab.train.sft`."""
    text = str(flawed_result(problem))
    return f"{text[::-1]}>{text}"


def widths(max_difficulty: int) -> tuple[int, int]:
    d = max_difficulty
    return 2 * d + 4, 2 * (d + 1) + 2


def _is_canonical(s: str) -> bool:
    """Digits only, 1..12 of them, no leading zero (``0`` itself allowed)."""
    return (0 < len(s) <= 12 and all("0" <= c <= "9" for c in s)
            and (s == "0" or s[0] != "0"))


def parse(completion: str) -> int | None:
    """The answer of a well-formed completion ``reversed(R)>R``, else None (never raises)."""
    if not isinstance(completion, str) or completion.count(">") != 1:
        return None
    scratch, _, answer = completion.partition(">")
    if not _is_canonical(answer) or scratch != answer[::-1]:
        return None
    return int(answer)


def verify(problem: Problem, completion: str) -> Verdict:
    answer = parse(completion)
    return Verdict(answer is not None, answer is not None and answer == problem.target)
