"""The verifier as the trainers call it, on token rows: a completion cut off before EOS is not
correct by default (``allow_truncated_completions`` restores scoring its text), PAD/BOS inside a
completion are malformed characters, Countdown's rule on fractions, and the adversarial
completions of earlier rounds."""
import numpy as np
import pytest

from rlvr_lab.envs import arithmetic, countdown, search, tasks, tokenizer
from rlvr_lab.train import bandit, sequence


def _row(text, eos=True, width=None):
    ids = tokenizer.encode(text) + ([tokenizer.EOS] if eos else [])
    width = len(ids) if width is None else width
    return np.array(ids + [tokenizer.PAD] * (width - len(ids)), np.int32)


def test_truncated_prefix_is_not_correct_by_default():
    """``153`` cut from ``1534``: the row is full, no EOS; the prefix reads as the answer."""
    p = arithmetic.make_problem(47, 106)                         # 153 -> "351>153"
    cut = np.array(tokenizer.encode("351>1534")[:7], np.int32)  # budget of 7 tokens
    assert tokenizer.decode(cut) == "351>153"                   # what the old verifier read
    assert tasks.verify_tokens(p, cut) == (False, False)
    assert tasks.verify_tokens(p, cut, allow_truncated=True) == (True, True)
    rewards, correct = tasks.score_completions([p], cut[None])
    assert rewards.tolist() == [0.0] and correct.tolist() == [False]
    rewards, correct = tasks.score_completions([p], cut[None], "multi")
    assert rewards.tolist() == [0.0]                            # not even well-formed
    rewards, correct = tasks.score_completions([p], cut[None], "multi", allow_truncated=True)
    assert rewards.tolist() == [2.0] and correct.tolist() == [True]
    # the same answer with its EOS is correct, padded or exactly filling the row
    for row in (_row("351>153"), _row("351>153", width=12)):
        assert tasks.verify_tokens(p, row) == (True, True)


def test_truncated_countdown_and_search():
    p = tasks.Problem("countdown", "C3,5,7:22=", "3*5+7", 22, (3, 5, 7), 3)
    assert tasks.verify_tokens(p, _row("(3*5)+7", eos=False)) == (False, False)
    assert tasks.verify_tokens(p, _row("(3*5)+7", eos=False), allow_truncated=True).correct
    q = search.make_problem(7, [3, 9, 4, 7, 1, 2, 5])
    assert tasks.verify_tokens(q, _row("3947>4")) == (True, True)
    assert tasks.verify_tokens(q, _row("3947>4", eos=False)) == (False, False)


def test_allow_truncated_must_be_a_bool():
    p = arithmetic.make_problem(1, 2)
    with pytest.raises(TypeError, match="allow_truncated='yes'"):
        tasks.score_completions([p], _row("3>3")[None], allow_truncated="yes")


@pytest.mark.parametrize("special", [tokenizer.PAD, tokenizer.BOS])
@pytest.mark.parametrize("where", [0, 1, 4, 7])
def test_pad_or_bos_inside_a_completion_is_malformed(special, where):
    """``1<PAD>53`` must not read as ``153``: a completion has no padding before its EOS."""
    p = arithmetic.make_problem(47, 106)
    ids = tokenizer.encode("351>153")
    row = np.array(ids[:where] + [special] + ids[where:] + [tokenizer.EOS], np.int32)
    text = tokenizer.decode_completion(row)
    assert text is not None and "?" in text and len(text) == 8
    assert tasks.verify_tokens(p, row) == (False, False)
    assert tasks.score_completions([p], row[None])[1].tolist() == [False]


def test_decode_skips_only_the_leading_padding_of_a_prompt():
    ids, _ = tokenizer.encode_prompts(["A1+2=", "A10+20="])
    assert tokenizer.decode(ids[0]) == "A1+2=" and tokenizer.decode(ids[1]) == "A10+20="
    inner = np.array(tokenizer.encode("15") + [tokenizer.PAD] + tokenizer.encode("3"))
    assert tokenizer.decode(inner) == "15?3"
    assert tokenizer.decode(np.array([tokenizer.BOS, 5, tokenizer.BOS, 6])) == "2?3"
    # the verifier's reading skips nothing, not even leading PAD/BOS
    lead = np.array([tokenizer.PAD] + tokenizer.encode("3>3") + [tokenizer.EOS])
    assert tokenizer.decode_completion(lead) == "?3>3"
    assert tokenizer.decode_completion(np.array([tokenizer.EOS, 5])) == ""
    assert tokenizer.decode_completion(np.array([5, 6])) is None
    assert tokenizer.decode_completion(np.array([5, 6]), allow_truncated=True) == "23"


def test_post_eos_tokens_are_ignored():
    """What the sampler emits after EOS (PAD, or anything) does not change the verdict."""
    p = arithmetic.make_problem(47, 106)
    row = np.array(tokenizer.encode("351>153") + [tokenizer.EOS] + tokenizer.encode("9>9"))
    assert tasks.verify_tokens(p, row) == (True, True)


def test_countdown_fractional_intermediates_follow_the_task_rule():
    """The RLVR Countdown (TinyZero): only the final value must equal the target; intermediate
    values may be fractions or negative. Exact arithmetic, no float tolerance."""
    p = tasks.Problem("countdown", "C7,2,4:14=", "7*4/2", 14, (7, 2, 4), 3)
    assert countdown.verify(p, "7/2*4") == (True, True)          # 7/2 = 3.5 on the way
    q = tasks.Problem("countdown", "C1,3,3:1=", "3/3*1", 1, (1, 3, 3), 3)
    assert countdown.verify(q, "1/3*3") == (True, True)          # exactly 1, not 0.999..
    r = tasks.Problem("countdown", "C2,9,4:5=", "9-4", 5, (2, 9, 4), 3)
    assert countdown.verify(r, "(2-9)+4*3") == (False, False)    # 3 is not given
    s = tasks.Problem("countdown", "C2,9,4:3=", "9-2-4", 3, (2, 9, 4), 3)
    assert countdown.verify(s, "(2-9)+4") == (True, False)       # -3: negative intermediate ok
    assert countdown.verify(s, "4-(2-9)") == (True, False)       # 11
    assert countdown.verify(s, "2/(9-9)+4") == (False, False)    # 9 used twice
    t = tasks.Problem("countdown", "C2,4,4:3=", "4-4/4", 3, (2, 4, 4), 3)
    assert countdown.verify(t, "2/(4-4)") == (True, False)       # division by zero: wrong
    # a fraction as the final value never equals an integer target
    u = tasks.Problem("countdown", "C7,2:3=", "7-2-2", 3, (7, 2), 2)
    assert countdown.verify(u, "7/2") == (True, False)
    assert countdown.verify(u, "(7-2)/2") == (False, False)     # 2 used twice


@pytest.mark.parametrize("hack", ["garbage>153", "351>153>153", "153", "153>153", "351>153 ",
                                  "351>0153", "3510>153", ">153", "351>", "351>>153",
                                  "351>153351>153", "351>153=", "+351>153", "351>+153"])
def test_arithmetic_hacks_through_tokens(hack):
    """Adversarial completions (kept from earlier rounds) as the trainer scores them."""
    p = arithmetic.make_problem(47, 106)
    ids = [tokenizer._ID.get(c, 99) for c in hack]
    row = np.array(ids + [tokenizer.EOS], np.int32)
    assert tasks.verify_tokens(p, row).correct is False
    assert tasks.score_completions([p], row[None], "multi")[0].tolist() == [0.0]


def test_trainer_configs_carry_the_option():
    assert sequence.SequenceRLConfig().allow_truncated_completions is False
    assert sequence.SequenceRLConfig(allow_truncated_completions=True).allow_truncated_completions
    assert bandit.BanditConfig().allow_truncated_completions is False
    with pytest.raises(ValueError, match="allow_truncated_completions"):
        sequence.SequenceRLConfig(allow_truncated_completions="no")
