"""Closed forms of GRPO's std and length biases (Dr.GRPO, arXiv:2503.20783 Sec. 3.1).

Conventions: binary rewards; GRPO's advantage ``(r - mean) / (std + eps)`` with the sample std
(ddof=1, as verl and TRL; :func:`rlvr_lab.advantages.grpo`); Dr.GRPO's ``r - mean``.

**Std weight.** In a group of ``G`` with ``k`` correct (``0 < k < G``), every GRPO advantage is
the Dr.GRPO advantage times ``1 / (s_k + eps)``, ``s_k = sqrt(k (G - k) / (G (G - 1)))``: the
weight the std normalisation gives that group. It is smallest for a balanced group and grows
as ``k`` nears 0 or ``G`` (:func:`std_weight`). Groups with ``k`` in ``{0, G}`` have zero
advantage under both.

**Length bias, exact (the bank).** One prompt, a tabular softmax policy over answers ``a`` with
lengths ``L_a`` and correctness ``c_a``. A sampled answer's sequence log-probability is its
logit's log-softmax (its tokens' log-probs summed); GRPO's per-response ``1/|o|`` weights it by
``1 / L_a``, Dr.GRPO by the constant ``1 / L_max``. Conditioning on the number ``k`` of correct
answers in the group (``k ~ Binomial(G, p)``), the correct samples are distributed over the
correct answers as ``pi_a / p`` and the wrong ones over the wrong answers as
``pi_a / (1 - p)``, so the expected gradient of the group objective is

``(1/G) sum_k P(k) [k A+_k m_c + (G - k) A-_k m_w]``, with
``m_c = sum_{a correct} (pi_a / p) w_a (e_a - pi)`` (``m_w`` likewise),

exactly, with no sampling (:func:`expected_gradient`). :func:`length_flow` follows it for a
number of steps (plain gradient ascent on the logits) and reports the expected length of the
wrong answers under each objective.
"""
from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy import stats as _st

OBJECTIVES = ("grpo", "dr_grpo")


def _group_size(G) -> int:
    if isinstance(G, bool) or not isinstance(G, (int, np.integer)) or G < 2:
        raise ValueError(f"G={G!r} is not allowed; a group needs an integer size >= 2")
    return int(G)


def group_std(k: npt.ArrayLike, G: int) -> np.ndarray:
    """Sample std (ddof=1) of a binary group with ``k`` of ``G`` correct."""
    G = _group_size(G)
    k = np.asarray(k, dtype=np.float64)
    if np.any((k < 0) | (k > G)):
        raise ValueError(f"k={k!r} is not allowed; must be in [0, {G}]")
    return np.sqrt(k * (G - k) / (G * (G - 1.0)))


def std_weight(k: npt.ArrayLike, G: int, eps: float = 1e-6) -> np.ndarray:
    """GRPO's advantage over Dr.GRPO's for a group with ``k`` of ``G`` correct: ``1 / (s_k +
    eps)``; NaN where ``k`` is 0 or ``G`` (both advantages are 0 there)."""
    s = group_std(k, G)
    k = np.asarray(k, dtype=np.float64)
    return np.where((k > 0) & (k < G), 1.0 / (s + eps), np.nan)


def _check_answers(lengths, correct) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.asarray(lengths, dtype=np.float64)
    correct = np.asarray(correct, dtype=bool)
    if lengths.ndim != 1 or lengths.shape != correct.shape or lengths.size < 2:
        raise ValueError(f"lengths {lengths.shape} and correct {correct.shape} must be 1-D of "
                         "the same size >= 2")
    if not np.all(np.isfinite(lengths)) or np.any(lengths < 1):
        raise ValueError(f"lengths={lengths.tolist()!r} are not allowed; each must be >= 1")
    if correct.all() or not correct.any():
        raise ValueError("the answers need at least one correct and one wrong answer")
    return lengths, correct


def _softmax(logits: np.ndarray) -> np.ndarray:
    z = np.exp(logits - logits.max())
    return z / z.sum()


def expected_gradient(logits: npt.ArrayLike, lengths: npt.ArrayLike, correct: npt.ArrayLike,
                      G: int, objective: str, eps: float = 1e-6) -> np.ndarray:
    """The exact expected gradient (w.r.t. the logits) of one group's objective (float64)."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective={objective!r} is not allowed; choose one of "
                         f"{', '.join(map(repr, OBJECTIVES))}")
    G = _group_size(G)
    lengths, correct = _check_answers(lengths, correct)
    pi = _softmax(np.asarray(logits, dtype=np.float64))
    p = float(pi[correct].sum())
    w = 1.0 / lengths if objective == "grpo" else np.full_like(lengths, 1.0 / lengths.max())
    eye = np.eye(pi.size)

    def mean_score(mask, mass):
        share = np.where(mask, pi, 0.0) / mass
        return (share * w) @ (eye - pi)          # sum_a share_a w_a (e_a - pi)

    m_c, m_w = mean_score(correct, p), mean_score(~correct, 1.0 - p)
    k = np.arange(1, G)                            # k = 0 and k = G: zero advantage
    prob = _st.binom.pmf(k, G, p)
    scale = 1.0 / (group_std(k, G) + eps) if objective == "grpo" else np.ones(k.size)
    a_pos, a_neg = (1 - k / G) * scale, -(k / G) * scale
    coef_c = (prob * k * a_pos).sum() / G
    coef_w = (prob * (G - k) * a_neg).sum() / G
    return coef_c * m_c + coef_w * m_w


def wrong_length(logits: npt.ArrayLike, lengths: npt.ArrayLike,
                 correct: npt.ArrayLike) -> float:
    """Expected length of a wrong answer under the policy."""
    lengths, correct = _check_answers(lengths, correct)
    pi = _softmax(np.asarray(logits, dtype=np.float64))
    return float((pi * lengths)[~correct].sum() / pi[~correct].sum())


def length_flow(logits: npt.ArrayLike, lengths: npt.ArrayLike, correct: npt.ArrayLike, G: int,
                steps: int, learning_rate: float) -> dict[str, np.ndarray]:
    """Follow each objective's exact expected gradient from ``logits`` for ``steps`` steps;
    per objective, the expected wrong-answer length and the success probability after each
    step (``[steps + 1]``, step 0 first)."""
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"steps={steps!r} is not allowed; must be an integer >= 1")
    if not (np.isfinite(learning_rate) and learning_rate > 0):
        raise ValueError(f"learning_rate={learning_rate!r} is not allowed; must be > 0")
    lengths, correct = _check_answers(lengths, correct)
    out = {}
    for objective in OBJECTIVES:
        theta = np.asarray(logits, dtype=np.float64).copy()
        wl, ps = [wrong_length(theta, lengths, correct)], [_softmax(theta)[correct].sum()]
        for _ in range(int(steps)):
            theta = theta + learning_rate * expected_gradient(theta, lengths, correct, G,
                                                              objective)
            wl.append(wrong_length(theta, lengths, correct))
            ps.append(_softmax(theta)[correct].sum())
        out[objective] = np.asarray(wl)
        out[f"{objective}_p"] = np.asarray(ps)
    return out
