"""Countdown: reach a target with the given numbers, each used exactly once, and + - * /.

Prompt ``C3,5,7:22=``; reference completion an expression such as ``3*5+7``. Difficulty =
how many numbers (2..5); numbers are 1..9 and targets 0..999 (generated from a random
expression tree over all the numbers, keeping only integer intermediate values).

Verifier: a small recursive-descent parser (``expr := term (('+'|'-') term)*``,
``term := factor (('*'|'/') factor)*``, ``factor := number | '(' expr ')'``) evaluated with
exact fractions -- model output is never passed to ``eval``. What the reward accepts: the
WHOLE completion must parse as one expression (digits without leading zeros, ``+-*/()``, no
spaces, ``=`` or separators, at most 64 characters); ``format_ok``: it parses and uses exactly
the given numbers, each once; ``correct``: additionally its value is the target (division by
zero: not correct). So the target alone (``22``), a repeated answer (``3*5+7,3*5+7``), an
appended result (``3*5+7=22``) or padded numbers (``03*5+7``) are neither well-formed nor
correct.

Fractions. The task is the Countdown of the RLVR papers (TinyZero, whose reward evaluates the
completion's equation as real arithmetic: each given number used exactly once, ``+ - * /`` and
parentheses, the final value compared with the target). Only the **final** value must equal the
target: intermediate values may be fractions (and negative), so ``7/2*4`` reaches 14 from
``7, 2, 4`` and is correct. This is deliberately not the TV game's rule (every intermediate a
positive integer). The generator keeps integer intermediates only so that every target has at
least one integer-only solution; the verifier does not demand one. Values are exact
``Fraction``s, so there is no float tolerance (``1/3*3`` is exactly 1), and a division by zero
anywhere makes the completion well-formed but not correct.

Imperfect demonstrations (:func:`flawed_solution`): a random expression over the same numbers
whose value misses the target -- well-formed and wrong.
"""
from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from rlvr_lab.envs.tasks import Problem, Verdict

NAME = "countdown"
MAX_NUMBERS = 5
MAX_TARGET = 999
MAX_CHARS = 64
_PREC = {"+": 1, "-": 1, "*": 2, "/": 2}


def _combine(rng, items):
    """Random expression tree over ``items`` [(value, text, prec)] with integer values."""
    while len(items) > 1:
        i, j = rng.choice(len(items), size=2, replace=False)
        (va, ta, pa), (vb, tb, pb) = items[i], items[j]
        op = str(rng.choice(["+", "-", "*", "/"]))
        if op == "-" and va < vb:
            (va, ta, pa), (vb, tb, pb) = (vb, tb, pb), (va, ta, pa)
        if op == "/" and (vb == 0 or va % vb):
            op = "+"
        value = {"+": va + vb, "-": va - vb, "*": va * vb, "/": va // max(vb, 1)}[op]
        prec = _PREC[op]
        left = f"({ta})" if pa < prec else ta
        right = f"({tb})" if pb < prec or (pb == prec and op in "-/") else tb
        rest = [it for k, it in enumerate(items) if k not in (i, j)]
        items = rest + [(value, left + op + right, prec)]
    return items[0]


def generate(rng: np.random.Generator, n: int,
             difficulties: Sequence[int] = (2, 3)) -> list[Problem]:
    for d in difficulties:
        if not 2 <= d <= MAX_NUMBERS:
            raise ValueError(f"difficulty={d!r} is not allowed; countdown uses "
                             f"2..{MAX_NUMBERS} numbers")
    out = []
    while len(out) < n:
        d = int(rng.choice(difficulties))
        numbers = [int(x) for x in rng.integers(1, 10, size=d)]
        value, text, _ = _combine(rng, [(x, str(x), 3) for x in numbers])
        if 0 <= value <= MAX_TARGET:
            prompt = "C" + ",".join(map(str, numbers)) + f":{value}="
            out.append(Problem(task=NAME, prompt=prompt, solution=text, target=int(value),
                               numbers=tuple(numbers), difficulty=d))
    return out


def flawed_solution(problem: Problem) -> str:
    """A well-formed expression over the problem's numbers with a value other than the target
    (deterministic per problem; the reference solution when 32 random trees all hit it)."""
    rng = np.random.default_rng([*problem.numbers, problem.target])
    for _ in range(32):
        value, text, _ = _combine(rng, [(x, str(x), 3) for x in problem.numbers])
        if value != problem.target:
            return text
    return problem.solution


def widths(max_difficulty: int) -> tuple[int, int]:
    d = max_difficulty
    # BOS C n,n,..:ttt= ; the expression: d numbers, d-1 operators, at most 2 parentheses per
    # operator below the root, + EOS
    return 2 * d + 6, d + (d - 1) + 2 * max(d - 2, 0) + 1


class _Malformed(Exception):
    pass


def _tokens(text: str):
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c.isdigit() and c.isascii():
            j = i
            while j < len(text) and text[j].isdigit() and text[j].isascii():
                j += 1
            if j - i > 4 or (j - i > 1 and c == "0"):   # no leading zeros
                raise _Malformed
            out.append(int(text[i:j]))
            i = j
        elif c in "+-*/()":
            out.append(c)
            i += 1
        else:
            raise _Malformed
    return out


def parse(text: str) -> tuple[Fraction | None, list[int]]:
    """``(value: Fraction | None, numbers used)``; raises ``_Malformed`` on bad syntax.

    ``value`` is None after a division by zero.
    """
    toks = _tokens(text)
    pos = 0
    used: list[int] = []

    def peek():
        return toks[pos] if pos < len(toks) else None

    def factor(depth):
        nonlocal pos
        if depth > 32:
            raise _Malformed
        t = peek()
        if isinstance(t, int):
            pos += 1
            used.append(t)
            return Fraction(t)
        if t == "(":
            pos += 1
            v = expr(depth + 1)
            if peek() != ")":
                raise _Malformed
            pos += 1
            return v
        raise _Malformed

    def term(depth):
        nonlocal pos
        v = factor(depth)
        while peek() in ("*", "/"):
            op = toks[pos]
            pos += 1
            w = factor(depth)
            if v is None or w is None or (op == "/" and w == 0):
                v = None
            else:
                v = v * w if op == "*" else v / w
        return v

    def expr(depth):
        nonlocal pos
        v = term(depth)
        while peek() in ("+", "-"):
            op = toks[pos]
            pos += 1
            w = term(depth)
            v = None if v is None or w is None else (v + w if op == "+" else v - w)
        return v

    value = expr(0)
    if pos != len(toks):
        raise _Malformed
    return value, used


def verify(problem: Problem, completion: str) -> Verdict:
    if not isinstance(completion, str) or not 0 < len(completion) <= MAX_CHARS:
        return Verdict(False, False)
    try:
        value, used = parse(completion)
    except (_Malformed, RecursionError, ValueError, ZeroDivisionError):
        return Verdict(False, False)
    format_ok = sorted(used) == sorted(problem.numbers)
    return Verdict(format_ok, format_ok and value is not None and value == problem.target)
