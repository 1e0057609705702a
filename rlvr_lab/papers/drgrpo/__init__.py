"""Dr.GRPO (Liu et al. 2025, arXiv:2503.20783): GRPO's two optimisation biases, in closed form.

GRPO divides each response's summed token loss by its length ``|o|`` and each advantage by its
group's reward std. Dr.GRPO removes both (a constant length normaliser, ``r - mean``). The paper
(Sec. 3.1, Eq. 2-3) names the effects: the ``1/|o|`` factor shrinks the penalty of a long wrong
answer (and the reward of a short right one), so wrong answers grow longer; the ``1/std``
factor gives groups with few or many correct answers (too hard or too easy questions) more
weight than balanced ones.

:mod:`~rlvr_lab.papers.drgrpo.bias` has the closed forms: the std weight of a binary group with
``k`` of ``G`` correct, and the exact expected-gradient flow of a tabular policy over answers of
different lengths under either objective (the bank counterpart of the length bias). The
small-model study is ``simulations/drgrpo.py``.
"""
from rlvr_lab.papers.drgrpo import bias

__all__ = ["bias"]
