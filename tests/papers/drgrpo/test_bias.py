"""Dr.GRPO's closed forms against float64 brute force, and their properties."""
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_lab.papers.drgrpo import bias


def brute_std_weight(k, G, eps=1e-6):
    r = [1.0] * k + [0.0] * (G - k)
    mean = sum(r) / G
    std = math.sqrt(sum((x - mean) ** 2 for x in r) / (G - 1))
    return ((r[0] - mean) / (std + eps)) / (r[0] - mean)


@pytest.mark.parametrize("G", [2, 3, 5, 8, 16])
def test_std_weight_matches_a_float64_group(G):
    for k in range(1, G):
        assert bias.std_weight(k, G) == pytest.approx(brute_std_weight(k, G), rel=1e-12)
    assert np.isnan(bias.std_weight(0, G)) and np.isnan(bias.std_weight(G, G))


@settings(max_examples=50, deadline=None)
@given(G=st.integers(3, 64), data=st.data())
def test_std_weight_is_symmetric_and_smallest_when_balanced(G, data):
    k = data.draw(st.integers(1, G - 1))
    w = bias.std_weight(np.arange(1, G), G)
    assert bias.std_weight(k, G) == pytest.approx(bias.std_weight(G - k, G))
    assert w.min() == pytest.approx(bias.std_weight(G // 2, G))
    assert w[0] >= w.min()


def brute_expected_gradient(logits, lengths, correct, G, objective, eps=1e-6):
    """Sum over every ordered group of answers, with its probability (float64)."""
    pi = np.exp(logits - logits.max())
    pi /= pi.sum()
    A = len(pi)
    total = np.zeros(A)
    for group in itertools.product(range(A), repeat=G):
        prob = np.prod([pi[a] for a in group])
        r = np.array([1.0 if correct[a] else 0.0 for a in group])
        centred = r - r.mean()
        if objective == "grpo":
            std = r.std(ddof=1)
            adv = centred / (std + eps) if std > 0 else np.zeros(G)
            w = [1.0 / lengths[a] for a in group]
        else:
            adv = centred
            w = [1.0 / max(lengths)] * G
        g = sum(adv[i] * w[i] * (np.eye(A)[a] - pi) for i, a in enumerate(group)) / G
        total += prob * g
    return total


@pytest.mark.parametrize("objective", bias.OBJECTIVES)
@pytest.mark.parametrize("G", [2, 3, 4])
def test_expected_gradient_matches_enumeration(objective, G):
    logits = np.array([0.3, -0.2, 0.5, 0.0])
    lengths = np.array([4.0, 3.0, 6.0, 8.0])
    correct = np.array([True, False, False, True])
    want = brute_expected_gradient(logits, lengths, correct, G, objective)
    got = bias.expected_gradient(logits, lengths, correct, G, objective)
    np.testing.assert_allclose(got, want, atol=1e-12)


def test_equal_lengths_remove_the_length_effect():
    lengths = np.full(4, 5.0)
    correct = np.array([True, False, False, False])
    flow = bias.length_flow(np.array([0.0, 0.5, -0.5, 0.2]), lengths, correct, 4, 20, 1.0)
    np.testing.assert_allclose(flow["grpo"], 5.0)
    np.testing.assert_allclose(flow["dr_grpo"], 5.0)
    assert flow["grpo_p"][-1] > flow["grpo_p"][0]


@pytest.mark.parametrize("kwargs, match", [
    (dict(G=1), "G=1"), (dict(objective="ppo"), "objective='ppo'"),
    (dict(lengths=[0.0, 3.0]), "lengths="), (dict(correct=[True, True]), "at least one")])
def test_bad_inputs_name_the_value(kwargs, match):
    args = dict(logits=np.zeros(2), lengths=[3.0, 4.0], correct=[True, False], G=4,
                objective="grpo")
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        bias.expected_gradient(**args)
