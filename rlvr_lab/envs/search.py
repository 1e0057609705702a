"""Linear search with a worked scan: a task whose response length is heavy-tailed.

Prompt ``S7:3947125=``: find the first ``7`` in the digit list ``3947125``. Reference completion
``3947>4``: the scanned digits up to and including the first occurrence of the target (the
worked search), then ``>`` and its 1-based position. The position ``k`` is drawn with
``P(k) ~ 1/k`` on ``1..2^d`` (difficulty ``d`` = 1..5), so most searches end after a few digits
and a few run to the end of a long list: the response length (``k + 2`` or ``k + 3`` tokens)
is heavy-tailed -- the median at ``d = 4`` is 3 digits, the longest 16 -- which is what partial
rollouts (APRIL) and other length-dependent effects need. After the target the list goes on for
1-3 more digits (the target may repeat there), so the list length does not give the answer away.

Verifier (what the reward accepts): the WHOLE completion is parsed as ``S>R`` with ``S`` a
non-empty digit string and ``R`` a canonical decimal (no leading zeros). ``format_ok``: the parse
succeeds and ``R`` is the length of ``S`` (a consistent worked scan); ``correct``: additionally
``S`` is exactly the list up to and including the first occurrence of the target. Text before
the scan, a repeated answer (``3947>4>4``), the answer alone (``4``) or a scan that does not
match the list are not correct.

Imperfect demonstrations (:func:`flawed_solution`): the scan overshoots by one digit (an
off-by-one stopping rule; well-formed, always wrong).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from rlvr_lab.envs.tasks import Problem, Verdict

NAME = "search"
MAX_DIFFICULTY = 5


def make_problem(target: int, digits: Iterable[int], difficulty: int | None = None) -> Problem:
    """The problem of finding ``target`` (0-9) in ``digits`` (it must occur, not last)."""
    digits = [int(x) for x in digits]
    if not 0 <= target <= 9 or any(not 0 <= x <= 9 for x in digits):
        raise ValueError(f"target={target!r} and digits must be single digits")
    if target not in digits[:-1]:
        raise ValueError(f"target {target} must occur in {digits} before the last digit")
    k = digits.index(target) + 1
    text = "".join(map(str, digits))
    return Problem(task=NAME, prompt=f"S{target}:{text}=", solution=f"{text[:k]}>{k}",
                   target=k, numbers=(target, *digits),
                   difficulty=difficulty if difficulty is not None else
                   max(1, int(np.ceil(np.log2(k)))))


def _position(rng, d: int) -> int:
    ks = np.arange(1, 2 ** d + 1)
    return int(rng.choice(ks, p=(1 / ks) / (1 / ks).sum()))


def generate(rng: np.random.Generator, n: int,
             difficulties: Sequence[int] = (3, 4)) -> list[Problem]:
    for d in difficulties:
        if not 1 <= d <= MAX_DIFFICULTY:
            raise ValueError(f"difficulty={d!r} is not allowed; search uses 1..{MAX_DIFFICULTY}")
    out = []
    for _ in range(n):
        d = int(rng.choice(difficulties))
        k = _position(rng, d)
        target = int(rng.integers(0, 10))
        others = [x for x in range(10) if x != target]
        head = [int(x) for x in rng.choice(others, size=k - 1)]
        tail = [int(x) for x in rng.integers(0, 10, size=int(rng.integers(1, 4)))]
        out.append(make_problem(target, head + [target] + tail, d))
    return out


def widths(max_difficulty: int) -> tuple[int, int]:
    longest = 2 ** max_difficulty
    # BOS S t : list(longest + 3) = ; scan > position + EOS, for the reference and for the
    # one-digit-longer flawed demonstration
    return longest + 8, longest + len(str(longest + 1)) + 3


def flawed_solution(problem: Problem) -> str:
    """The scan stops one digit too late: ``digits[:k+1]`` and position ``k + 1``."""
    k = problem.target
    text = "".join(map(str, problem.numbers[1:]))
    return f"{text[:k + 1]}>{k + 1}"


def _is_canonical(s: str) -> bool:
    return (0 < len(s) <= 3 and all("0" <= c <= "9" for c in s)
            and (s == "0" or s[0] != "0"))


def verify(problem: Problem, completion: str) -> Verdict:
    if not isinstance(completion, str) or completion.count(">") != 1:
        return Verdict(False, False)
    scan, _, answer = completion.partition(">")
    if not (scan and all("0" <= c <= "9" for c in scan) and _is_canonical(answer)):
        return Verdict(False, False)
    if int(answer) != len(scan):
        return Verdict(False, False)
    return Verdict(True, scan == problem.solution.partition(">")[0])
