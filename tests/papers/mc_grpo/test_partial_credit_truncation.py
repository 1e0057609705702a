"""MC-GRPO's partial-credit reward reads a completion as the verifier does: a row cut off
before its EOS scores 0 (not the 2 or 1.5 its text would earn) unless truncation is allowed."""
import numpy as np

from rlvr_lab.envs import arithmetic, tokenizer
from rlvr_lab.papers.mc_grpo import small


def _score(problem, answer: str, eos: bool, **kw):
    """Reward and correctness of one completion row that holds exactly the well-formed text
    ``reversed(answer)>answer`` (+ EOS)."""
    row = tokenizer.encode(f"{answer[::-1]}>{answer}") + ([tokenizer.EOS] if eos else [])
    r, ok = small.score([problem], np.asarray([row], np.int32), **kw)
    return float(r[0]), bool(ok[0])


def test_truncated_rows_score_zero_unless_allowed():
    p = arithmetic.make_problem(767, 767)                    # 1534; dropping carries gives 424
    near = str(arithmetic.flawed_result(p))
    assert near == "424"
    assert _score(p, "1534", eos=True) == (2.0, True)
    assert _score(p, near, eos=True) == (1.5, False)
    # the same texts cut off by the generation budget (no EOS): not an answer
    assert _score(p, "1534", eos=False) == (0.0, False)
    assert _score(p, near, eos=False) == (0.0, False)
    assert _score(p, "1534", eos=False, allow_truncated=True) == (2.0, True)
    assert _score(p, near, eos=False, allow_truncated=True) == (1.5, False)
