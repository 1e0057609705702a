"""Multi-digit arithmetic with a short worked format.

Prompt ``A47+85=``; reference completion ``231>132``: the result written least-significant
digit first (the order in which carries are produced, which a small causal model can compute
digit by digit), then ``>`` and the result in normal order. Difficulty ``d`` = number of
digits of both operands (``d=1``: 0-9). Subtraction (``ops`` containing ``"-"``) keeps
``a >= b``.

Verifier: the final answer is the text after the last ``>``; it must be the canonical decimal
of the result (no sign, no leading zeros). ``format_ok``: the completion is exactly
``digits>digits`` with the scratch equal to the reversed answer.
"""
from __future__ import annotations

import numpy as np

from rlvr_lab.envs.tasks import Problem, Verdict

NAME = "arithmetic"
MAX_DIGITS = 6


def _operand(rng, d):
    low = 0 if d == 1 else 10 ** (d - 1)
    return int(rng.integers(low, 10 ** d))


def make_problem(a: int, b: int, op: str = "+", difficulty: int | None = None) -> Problem:
    if op not in "+-" or len(op) != 1:
        raise ValueError(f"op={op!r} is not allowed; choose '+' or '-'")
    result = a + b if op == "+" else a - b
    if result < 0:
        raise ValueError(f"{a}-{b} is negative; subtraction problems need a >= b")
    text = str(result)
    return Problem(task=NAME, prompt=f"A{a}{op}{b}=", solution=f"{text[::-1]}>{text}",
                   target=result, numbers=(a, b),
                   difficulty=difficulty if difficulty is not None else len(str(max(a, b))))


def generate(rng: np.random.Generator, n: int, difficulties=(1, 2, 3), ops=("+",)) -> list[Problem]:
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


def widths(max_difficulty: int) -> tuple[int, int]:
    d = max_difficulty
    return 2 * d + 4, 2 * (d + 1) + 2


def _is_digits(s: str) -> bool:
    return 0 < len(s) <= 12 and all("0" <= c <= "9" for c in s)


def verify(problem: Problem, completion: str) -> Verdict:
    if not isinstance(completion, str):
        return Verdict(False, False)
    scratch, sep, answer = completion.rpartition(">")
    if not sep or not _is_digits(answer):
        return Verdict(False, False)
    correct = answer == str(problem.target)
    format_ok = _is_digits(scratch) and scratch == answer[::-1] and ">" not in scratch
    return Verdict(format_ok, correct)
