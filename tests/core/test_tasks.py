"""Tokenizer and verifiable tasks: reference solutions accepted, near misses rejected,
arbitrary text never raises, the countdown parser agrees with an independent evaluator."""
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_lab.envs import arithmetic, countdown, search, tasks, tokenizer

ALPHABET = tokenizer.CHARS + " x.é\n"


def test_tokenizer_roundtrip_and_padding():
    ids, valid = tokenizer.encode_prompts(["A1+2=", "A10+20="])
    assert ids.shape == (2, 8) and ids[0, :2].tolist() == [0, 0] and ids[0, 2] == tokenizer.BOS
    assert tokenizer.decode(ids[1]) == "A10+20="
    comp, mask = tokenizer.encode_completions(["3>3", "03>30"], width=7)
    assert mask.sum(1).tolist() == [4, 6] and tokenizer.decode(comp[0]) == "3>3"
    with pytest.raises(ValueError, match="vocabulary"):
        tokenizer.encode("A1 + 2")


@given(st.lists(st.integers(-5, 100), max_size=30))
def test_decode_never_raises(ids):
    assert isinstance(tokenizer.decode(ids), str)


@pytest.mark.parametrize("name,diffs", [("arithmetic", (1, 2, 3, 4)), ("countdown", (2, 3, 4)),
                                        ("search", (1, 3, 5))])
def test_reference_solutions_verify_and_fit(name, diffs):
    probs = tasks.generate(name, np.random.default_rng(0), 300, diffs)
    assert all(tasks.verify(p, p.solution) == (True, True) for p in probs)
    batch = tasks.encode(probs, *tasks.widths(name, diffs))  # widths large enough
    assert tokenizer.decode(batch.solutions[0]) == probs[0].solution
    again = tasks.generate(name, np.random.default_rng(0), 300, diffs)
    assert again == probs  # deterministic for a seed
    assert {p.difficulty for p in probs} == set(diffs)


def test_arithmetic_values_and_near_misses():
    p = arithmetic.make_problem(47, 85)
    assert p.prompt == "A47+85=" and p.solution == "231>132" and p.target == 132
    assert arithmetic.verify(p, "231>132") == (True, True)
    assert arithmetic.verify(p, "000>132") == (False, False)     # right answer, bad scratch
    for wrong in ("231>133", "231>0132", "231>", ">", "132", "231>132>", "231>13 2",
                  "231>-132", "", "231>132x", "231>1320"):
        assert not arithmetic.verify(p, wrong).correct, wrong
    q = arithmetic.make_problem(91, 27, "-")
    assert q.target == 64 and arithmetic.verify(q, "46>64") == (True, True)
    with pytest.raises(ValueError, match="negative"):
        arithmetic.make_problem(3, 5, "-")
    with pytest.raises(ValueError, match="difficulty"):
        arithmetic.generate(np.random.default_rng(0), 3, (0,))


@pytest.mark.parametrize("hack", ["garbage>153", "351>153>153", "153", "153>153", "351>153 ",
                                  "351>0153", "3510>153", ">153", "351>", "351>>153",
                                  "351>153351>153"])
def test_arithmetic_reward_needs_the_whole_format(hack):
    """Known reward hacks: text before the answer, a repeated answer, the answer alone."""
    p = arithmetic.make_problem(47, 106)
    assert arithmetic.verify(p, "351>153") == (True, True)
    assert arithmetic.verify(p, hack) == (False, False)
    assert tasks.reward(tasks.verify(p, hack), "binary") == 0.0
    assert tasks.reward(tasks.verify(p, hack), "multi") == 0.0


def test_arithmetic_flawed_solution_drops_every_carry():
    p = arithmetic.make_problem(58, 67)                     # 125; carry-free: 15
    assert arithmetic.flawed_solution(p) == "51>15"
    assert arithmetic.verify(p, arithmetic.flawed_solution(p)) == (True, False)
    q = arithmetic.make_problem(12, 34)                     # no carry: the flaw is invisible
    assert arithmetic.flawed_solution(q) == q.solution
    r = arithmetic.make_problem(91, 27, "-")                # 64; borrow ignored: 74
    assert arithmetic.flawed_result(r) == 74


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 9999), st.integers(0, 9999))
def test_arithmetic_flawed_result_matches_digitwise_sum(a, b):
    p = arithmetic.make_problem(a, b)
    expect = sum(((a // 10**i + b // 10**i) % 10) * 10**i for i in range(5))
    assert arithmetic.flawed_result(p) == expect
    assert (arithmetic.flawed_result(p) == a + b) == all(
        (a // 10**i) % 10 + (b // 10**i) % 10 < 10 for i in range(5))


def test_search_format_hacks_and_flaw():
    p = search.make_problem(7, [3, 9, 4, 7, 1, 7])
    assert p.prompt == "S7:394717=" and p.solution == "3947>4" and p.target == 4
    assert search.verify(p, "3947>4") == (True, True)
    assert search.verify(p, search.flawed_solution(p)) == (True, False)   # "39471>5"
    assert search.verify(p, "3941>4") == (True, False)          # consistent scan, wrong digits
    for hack in ("4", ">4", "3947>4>4", "xx3947>4", "3947>04", "3947>5", "3947>", "3947"):
        assert search.verify(p, hack) == (False, False), hack
    with pytest.raises(ValueError, match="occur"):
        search.make_problem(2, [3, 9, 2])


def test_search_lengths_are_heavy_tailed():
    probs = search.generate(np.random.default_rng(0), 4000, (4,))
    k = np.array([p.target for p in probs])
    assert k.min() == 1 and k.max() == 16
    assert np.median(k) <= 3 and np.mean(k) > np.median(k) + 1   # long right tail
    # P(k) ~ 1/k: k = 1 about twice as frequent as k = 2, eight times as k = 8
    assert 1.6 < (k == 1).mean() / (k == 2).mean() < 2.5
    assert 5 < (k == 1).mean() / max((k == 8).mean(), 1e-9) < 12


def test_countdown_near_misses():
    p = tasks.Problem("countdown", "C3,5,7:22=", "3*5+7", 22, (3, 5, 7), 3)
    assert countdown.verify(p, "3*5+7") == (True, True)
    assert countdown.verify(p, "7+5*3") == (True, True)
    assert countdown.verify(p, "(3*5)+7") == (True, True)
    assert countdown.verify(p, "3*5-7") == (True, False)         # valid expression, wrong value
    for wrong in ("3*5+7+0", "3*5+5", "3*7+5*", "(3*5+7", "3*5)+7", "15+7", "3*5+7=22",
                  "22", "3**5+7", "", "7/(5-5)+3", "3 *5+7", "3*5+7,3*5+7", "03*5+7",
                  "3*5+7>22", "x3*5+7"):
        assert countdown.verify(p, wrong) in ((False, False), (True, False)), wrong
        assert tasks.reward(countdown.verify(p, wrong), "binary") == 0.0
    flawed = countdown.flawed_solution(p)
    assert countdown.verify(p, flawed) == (True, False)
    q = tasks.Problem("countdown", "C8,4,2:1=", "8/4/2", 1, (8, 4, 2), 3)
    assert countdown.verify(q, "8/4/2").correct and not countdown.verify(q, "8/(4/2)").correct
    assert countdown.verify(q, "(8-4)/(2+2)") == (False, False)  # 2 used twice
    assert countdown.verify(p, "(" * 200 + "3" + ")" * 200) == (False, False)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(alphabet=ALPHABET, max_size=40), st.text(max_size=80)))
def test_random_strings_never_raise(text):
    rng = np.random.default_rng(len(text))
    for name, diffs in (("arithmetic", (1, 2, 3)), ("countdown", (2, 3, 4)), ("search", (2, 4))):
        p = tasks.generate(name, rng, 1, diffs)[0]
        # the task's own verifier (tasks.verify would also swallow a verifier bug)
        verdict = tasks.task_module(name).verify(p, text)
        assert isinstance(verdict.correct, bool) and isinstance(verdict.format_ok, bool)
        assert not verdict.correct or verdict.format_ok   # correct implies the full format
        r = tasks.reward(verdict, "multi")
        assert r in (0.0, 0.5, 1.5, 2.0)


# -- independent reference for the countdown parser: build a random tree, evaluate it
#    directly on the tree (not through text), render it fully parenthesised
def _trees(depth):
    leaf = st.integers(1, 99).map(lambda n: ("n", n))
    if depth == 0:
        return leaf
    sub = _trees(depth - 1)
    return st.one_of(leaf, st.tuples(st.sampled_from("+-*/"), sub, sub))


def _value(tree):
    if tree[0] == "n":
        return Fraction(tree[1])
    op, a, b = tree
    va, vb = _value(a), _value(b)
    if va is None or vb is None or (op == "/" and vb == 0):
        return None
    return {"+": va + vb, "-": va - vb, "*": va * vb, "/": va / vb if vb else None}[op]


def _text(tree):
    if tree[0] == "n":
        return str(tree[1])
    op, a, b = tree
    return f"({_text(a)}{op}{_text(b)})"


def _leaves(tree):
    return [tree[1]] if tree[0] == "n" else _leaves(tree[1]) + _leaves(tree[2])


@settings(max_examples=200, deadline=None)
@given(_trees(3))
def test_countdown_parser_matches_tree_evaluation(tree):
    value, used = countdown.parse(_text(tree))
    assert value == _value(tree)
    assert sorted(used) == sorted(_leaves(tree))


def test_reward_schemes():
    v = tasks.Verdict
    assert tasks.reward(v(True, True)) == 1.0 and tasks.reward(v(True, False)) == 0.0
    assert [tasks.reward(x, "multi") for x in (v(False, False), v(True, False), v(False, True),
                                                v(True, True))] == [0.0, 0.5, 1.5, 2.0]
    with pytest.raises(ValueError, match="scheme"):
        tasks.reward(v(True, True), "dense")
    with pytest.raises(ValueError, match="task"):
        tasks.generate("sudoku", np.random.default_rng(0), 1, (1,))


def test_score_completions_repeats_problems_in_order():
    probs = [arithmetic.make_problem(1, 2), arithmetic.make_problem(5, 5)]
    ids, _ = tokenizer.encode_completions(["3>3", "01>10", "3>4", "01>10"], width=6)
    rewards, correct = tasks.score_completions(probs, ids.reshape(2, 2, 6))
    assert correct.tolist() == [[True, True], [False, True]]
    assert rewards.dtype == np.float32
