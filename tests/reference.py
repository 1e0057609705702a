"""Independent float64 references for the core API, written as plain Python loops.

Each function here recomputes a quantity of ``rlvr_lab.advantages``, ``rlvr_lab.losses`` or
``rlvr_lab.metrics`` element by element (over groups, rows, tokens) from the formula in
verl and TRL (docs/papers.md), deliberately *not* with the library's vectorised tricks, so a
shared mistake is unlikely. Everything is NumPy float64 (or exact ``fractions``).
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np


def _as_mask(rewards, mask):
    rewards = np.asarray(rewards, dtype=np.float64)
    mask = np.ones(rewards.shape, bool) if mask is None else np.asarray(mask, bool)
    return rewards, mask


def _valid(row, mask_row):
    return [i for i in range(len(row)) if mask_row[i]]


def _mean(xs):
    """Correctly rounded mean (exact rational sum), so equal values give exactly that value."""
    return float(sum(Fraction(x) for x in xs) / len(xs))


def _sample_std(xs):
    """ddof=1 standard deviation from exact rational moments; 0 for fewer than two values."""
    if len(xs) < 2:
        return 0.0
    exact = [Fraction(x) for x in xs]
    mu = sum(exact) / len(exact)
    return math.sqrt(float(sum((x - mu) ** 2 for x in exact) / (len(exact) - 1)))


def lower_median(xs):
    """torch.median convention: the lower of the two middle values."""
    ordered = sorted(xs)
    return ordered[(len(ordered) - 1) // 2]


# ----------------------------------------------------------------------------- advantages
def grpo(rewards, mask=None, scale="std", eps=1e-6):
    rewards, mask = _as_mask(rewards, mask)
    out = np.zeros_like(rewards)
    batch_values = [rewards[b, i] for b in range(rewards.shape[0])
                    for i in _valid(rewards[b], mask[b])]
    batch_std = _sample_std(batch_values)
    for b in range(rewards.shape[0]):
        idx = _valid(rewards[b], mask[b])
        if len(idx) < 2:
            continue
        values = [rewards[b, i] for i in idx]
        mu = _mean(values)
        for i in idx:
            centred = rewards[b, i] - mu
            if scale == "std":
                out[b, i] = centred / (_sample_std(values) + eps)
            elif scale == "batch":
                out[b, i] = centred / (batch_std + eps)
            elif scale == "none":
                out[b, i] = centred
            else:
                raise ValueError(scale)
    return out


def rloo(rewards, mask=None):
    """r_i minus the mean of the *other* valid rollouts, by an explicit leave-one-out loop."""
    rewards, mask = _as_mask(rewards, mask)
    out = np.zeros_like(rewards)
    for b in range(rewards.shape[0]):
        idx = _valid(rewards[b], mask[b])
        if len(idx) < 2:
            continue
        for i in idx:
            others = [rewards[b, j] for j in idx if j != i]
            out[b, i] = rewards[b, i] - _mean(others)
    return out


def reinforce_pp_baseline(rewards, mask=None, eps=1e-8):
    """Group-mean centring, then batch whitening (unbiased variance) over valid rollouts of
    groups with at least two valid rollouts; everything else 0 (the documented choice)."""
    rewards, mask = _as_mask(rewards, mask)
    centred = {}
    for b in range(rewards.shape[0]):
        idx = _valid(rewards[b], mask[b])
        if len(idx) < 2:
            continue
        mu = _mean([rewards[b, i] for i in idx])
        for i in idx:
            centred[(b, i)] = rewards[b, i] - mu
    out = np.zeros_like(rewards)
    if not centred:
        return out
    values = list(centred.values())
    mu = _mean(values)
    var = math.fsum((v - mu) ** 2 for v in values) / max(len(values) - 1, 1)
    for (b, i), v in centred.items():
        out[b, i] = (v - mu) / math.sqrt(var + eps)
    return out


def optimal_token_baseline(rewards, mask=None, energy=None, token_mask=None, eps=0.0):
    """verl's optimal token baseline with outcome rewards (the return of every token is the
    reward): per group and position t, b_t = sum_j W_t^j r_j / sum_j W_t^j over the rollouts
    alive at t, W_t^j = w_1^j + ... + w_t^j; A_t = r - b_t. ``energy`` None: weight 1 per
    rollout; [B, G]: one weight per rollout; [B, G, T]: per-token w (output [B, G, T]).
    Groups (positions) with fewer than two valid rollouts: 0; a zero weight sum with eps = 0:
    equal weights."""
    rewards, mask = _as_mask(rewards, mask)
    b_n, g_n = rewards.shape
    if energy is None:
        energy = np.ones((b_n, g_n))
    energy = np.asarray(energy, np.float64)
    token = energy.ndim == 3
    if not token:
        energy = energy[..., None]
    t_n = energy.shape[2]
    tmask = (np.ones(energy.shape, bool) if token_mask is None or not token
             else np.asarray(token_mask, bool))
    out = np.zeros((b_n, g_n, t_n))
    for b in range(b_n):
        idx = _valid(rewards[b], mask[b])
        if len(idx) < 2:
            continue
        cum = {}
        for j in idx:
            total, cum[j] = 0.0, []
            for t in range(t_n):
                if tmask[b, j, t]:
                    total += energy[b, j, t]
                cum[j].append(total)
        for t in range(t_n):
            alive = [j for j in idx if tmask[b, j, t]]
            if len(alive) < 2:
                continue
            weights = [cum[j][t] for j in alive]
            if eps > 0:
                base = sum(w * rewards[b, j] for w, j in zip(weights, alive)) / (sum(weights)
                                                                                + eps)
            else:
                if sum(weights) <= 0:
                    weights = [1.0] * len(alive)
                base = sum(w * rewards[b, j] for w, j in zip(weights, alive)) / sum(weights)
            for j in alive:
                out[b, j, t] = rewards[b, j] - base
    return out if token else out[..., 0]


def mc_grpo(rewards, mask=None, scale="mad", eps=1e-3):
    """Median-centred advantages and keep mask (pivot = first valid index equal to the
    lower median)."""
    rewards, mask = _as_mask(rewards, mask)
    adv = np.zeros_like(rewards)
    keep = np.zeros(rewards.shape, bool)
    for b in range(rewards.shape[0]):
        idx = _valid(rewards[b], mask[b])
        if not idx:
            continue
        values = [rewards[b, i] for i in idx]
        med = lower_median(values)
        pivot = next(i for i in idx if rewards[b, i] == med)
        for i in idx:
            keep[b, i] = i != pivot
        if len(idx) < 2:
            continue
        mad = lower_median([abs(v - med) for v in values])
        for i in idx:
            centred = rewards[b, i] - med
            if scale == "mad":
                adv[b, i] = centred / (mad + eps)
            elif scale == "std":
                adv[b, i] = centred / (_sample_std(values) + eps)
            elif scale == "none":
                adv[b, i] = centred
            else:
                raise ValueError(scale)
    return adv, keep


# ----------------------------------------------------------------------------- aggregation
def aggregate(token_loss, mask, mode):
    loss = np.asarray(token_loss, np.float64)
    mask = np.asarray(mask, bool)
    n_rows, n_cols = loss.shape
    row_sums, row_counts = [], []
    for b in range(n_rows):
        row_sums.append(math.fsum(loss[b, t] for t in range(n_cols) if mask[b, t]))
        row_counts.append(sum(1 for t in range(n_cols) if mask[b, t]))
    if mode == "token-mean":
        total = sum(row_counts)
        return math.fsum(row_sums) / total if total else 0.0
    if mode == "seq-mean-token-mean":
        per_row = [s / c for s, c in zip(row_sums, row_counts) if c > 0]
        return math.fsum(per_row) / len(per_row) if per_row else 0.0
    if mode == "seq-mean-token-sum":
        return math.fsum(row_sums) / n_rows
    if mode == "seq-mean-token-sum-norm":
        return math.fsum(row_sums) / (n_rows * n_cols)
    if mode == "token-sum":
        return math.fsum(row_sums)
    raise ValueError(mode)


# ----------------------------------------------------------------------------- policy losses
def _clip(x, low, high):
    return min(max(x, low), high)


def ppo_clip_token(log_prob, old_log_prob, adv, epsilon=0.2, epsilon_high=None,
                   clip_ratio_c=None):
    """-min(rho*A, clip(rho)*A) for one token; dual clip caps the loss at -c*A when A < 0."""
    eps_high = epsilon if epsilon_high is None else epsilon_high
    rho = math.exp(log_prob - old_log_prob)
    loss = -min(rho * adv, _clip(rho, 1 - epsilon, 1 + eps_high) * adv)
    if clip_ratio_c is not None and adv < 0:
        loss = min(loss, -clip_ratio_c * adv)
    return loss


def ppo_clip(log_prob, old_log_prob, adv, **kw):
    log_prob, old_log_prob = np.asarray(log_prob, np.float64), np.asarray(old_log_prob, np.float64)
    adv = np.broadcast_to(np.asarray(adv, np.float64), log_prob.shape)
    out = np.zeros(log_prob.shape)
    for b, t in np.ndindex(*log_prob.shape):
        out[b, t] = ppo_clip_token(log_prob[b, t], old_log_prob[b, t], adv[b, t], **kw)
    return out


def is_clipped(log_prob, old_log_prob, adv, epsilon=0.2, epsilon_high=None):
    """Case analysis: A>0 clips when rho > 1+eps_high, A<0 when rho < 1-eps, A=0 never."""
    eps_high = epsilon if epsilon_high is None else epsilon_high
    log_prob, old_log_prob = np.asarray(log_prob, np.float64), np.asarray(old_log_prob, np.float64)
    adv = np.broadcast_to(np.asarray(adv, np.float64), log_prob.shape)
    out = np.zeros(log_prob.shape, bool)
    for b, t in np.ndindex(*log_prob.shape):
        rho = math.exp(log_prob[b, t] - old_log_prob[b, t])
        if adv[b, t] > 0:
            out[b, t] = rho > 1 + eps_high
        elif adv[b, t] < 0:
            out[b, t] = rho < 1 - epsilon
    return out


def gspo_sequence_loss(log_prob, old_log_prob, adv, mask, epsilon, epsilon_high):
    """Per-sequence clipped surrogate with s = exp(mean over valid tokens of log rho); the
    value every token of that sequence carries. ``adv`` is one number per sequence."""
    out = []
    for b in range(len(log_prob)):
        valid = [t for t in range(len(log_prob[b])) if mask[b][t]]
        mean_log_ratio = (math.fsum(log_prob[b][t] - old_log_prob[b][t] for t in valid)
                          / len(valid)) if valid else 0.0
        s = math.exp(mean_log_ratio)
        out.append(-min(s * adv[b], _clip(s, 1 - epsilon, 1 + epsilon_high) * adv[b]))
    return out


def kl_exact(p, q):
    """KL(p || q) of two categorical distributions, sum over the support of p."""
    return math.fsum(pi * math.log(pi / qi) for pi, qi in zip(p, q) if pi > 0)


# ----------------------------------------------------------------------------- metrics
def pass_at_k(n, c, k):
    """Exact 1 - C(n-c, k) / C(n, k) with integer binomials (rational arithmetic)."""
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


def entropy(logits):
    """-sum p log p of softmax(logits) for one row; -inf logits are zero-probability."""
    finite = [x for x in logits if x != -math.inf]
    top = max(finite)
    weights = [math.exp(x - top) if x != -math.inf else 0.0 for x in logits]
    total = math.fsum(weights)
    h = 0.0
    for w in weights:
        if w > 0:
            p = w / total
            h -= p * math.log(p)
    return h


def softmax(logits):
    top = max(logits)
    weights = [math.exp(x - top) for x in logits]
    total = math.fsum(weights)
    return [w / total for w in weights]


# ----------------------------------------------------------------------------- more losses
def pg(log_prob, adv):
    log_prob = np.asarray(log_prob, np.float64)
    adv = np.broadcast_to(np.asarray(adv, np.float64), log_prob.shape)
    out = np.zeros(log_prob.shape)
    for b, t in np.ndindex(*log_prob.shape):
        out[b, t] = -adv[b, t] * log_prob[b, t]
    return out


def ppo_clip_token_grad(log_prob, old_log_prob, adv, epsilon=0.2, epsilon_high=None,
                        clip_ratio_c=None):
    """d loss / d log_prob of one token: -A*rho where the unclipped branch is active, else 0
    (the clipped branch and the dual-clip cap are constant in log_prob)."""
    eps_high = epsilon if epsilon_high is None else epsilon_high
    rho = math.exp(log_prob - old_log_prob)
    unclipped = -rho * adv
    clipped = -_clip(rho, 1 - epsilon, 1 + eps_high) * adv
    if clipped > unclipped:
        return 0.0
    if clip_ratio_c is not None and adv < 0 and -clip_ratio_c * adv < unclipped:
        return 0.0
    return -adv * rho


def gspo_grad(log_prob, old_log_prob, adv, mask, epsilon, epsilon_high):
    """Hand-derived gradient of ``aggregate(gspo(...), mask, "seq-mean-token-mean")`` w.r.t.
    every token's log-prob. The sequence surrogate is L_b = max(-A s, -A clip(s)) with
    s = exp(mean_t log rho_t); dL_b/dlog pi_t = -A s / n_b on the unclipped branch (and 0
    where the clipped branch is strictly larger), and the loss is the mean of L_b over the
    rows that have a valid token."""
    n_rows, n_cols = len(log_prob), len(log_prob[0])
    grad = np.zeros((n_rows, n_cols))
    rows = [b for b in range(n_rows) if any(mask[b])]
    for b in rows:
        valid = [t for t in range(n_cols) if mask[b][t]]
        s = math.exp(math.fsum(log_prob[b][t] - old_log_prob[b][t] for t in valid) / len(valid))
        a = adv[b]
        unclipped, clipped = -s * a, -_clip(s, 1 - epsilon, 1 + epsilon_high) * a
        dl_ds_times_s = 0.0 if clipped > unclipped else -a * s
        for t in valid:
            grad[b, t] = dl_ds_times_s / len(valid) / len(rows)
    return grad


def cispo(log_prob, old_log_prob, adv, epsilon=None, epsilon_high=4.0):
    """Value and gradient w.r.t. log_prob of -sg(clip(rho)) * A * log pi, per token."""
    log_prob, old_log_prob = np.asarray(log_prob, np.float64), np.asarray(old_log_prob, np.float64)
    adv = np.broadcast_to(np.asarray(adv, np.float64), log_prob.shape)
    low = 0.0 if epsilon is None else 1 - epsilon
    value, grad = np.zeros(log_prob.shape), np.zeros(log_prob.shape)
    for b, t in np.ndindex(*log_prob.shape):
        weight = _clip(math.exp(log_prob[b, t] - old_log_prob[b, t]), low, 1 + epsilon_high)
        value[b, t] = -weight * adv[b, t] * log_prob[b, t]
        grad[b, t] = -weight * adv[b, t]
    return value, grad


def decoupled_ppo(log_prob, prox_log_prob, behav_log_prob, adv, epsilon=0.2, epsilon_high=None,
                  behav_cap=None):
    """w * PPO(theta vs prox) with w = pi_prox / pi_behav, zeroed where w > behav_cap."""
    log_prob = np.asarray(log_prob, np.float64)
    adv = np.broadcast_to(np.asarray(adv, np.float64), log_prob.shape)
    out = np.zeros(log_prob.shape)
    for b, t in np.ndindex(*log_prob.shape):
        w = math.exp(prox_log_prob[b][t] - behav_log_prob[b][t])
        if behav_cap is not None and w > behav_cap:
            w = 0.0
        out[b, t] = w * ppo_clip_token(log_prob[b, t], prox_log_prob[b][t], adv[b, t],
                                       epsilon=epsilon, epsilon_high=epsilon_high)
    return out


def kl_token(name, log_prob, ref_log_prob):
    x = log_prob - ref_log_prob
    if name == "k1":
        return x
    if name == "k2":
        return x * x / 2
    if name == "k3":
        return math.exp(-x) + x - 1
    raise ValueError(name)


def tis_weights(train_log_prob, rollout_log_prob, cap):
    train_log_prob = np.asarray(train_log_prob, np.float64)
    out = np.zeros(train_log_prob.shape)
    for idx in np.ndindex(*train_log_prob.shape):
        out[idx] = min(math.exp(train_log_prob[idx] - rollout_log_prob[idx]), cap)
    return out


def mis_weights(train_log_prob, rollout_log_prob, cap):
    train_log_prob = np.asarray(train_log_prob, np.float64)
    weights, accepted = np.zeros(train_log_prob.shape), np.zeros(train_log_prob.shape, bool)
    for idx in np.ndindex(*train_log_prob.shape):
        rho = math.exp(train_log_prob[idx] - rollout_log_prob[idx])
        if 1 / cap <= rho <= cap:
            weights[idx], accepted[idx] = rho, True
    return weights, accepted


def mismatch_metrics(train_log_prob, rollout_log_prob, mask):
    """Masked means over valid tokens of -log rho, rho - log rho - 1 and rho^2 (minus 1)."""
    k1, k3, second = [], [], []
    for idx in np.ndindex(*np.shape(train_log_prob)):
        if not mask[idx]:
            continue
        log_rho = train_log_prob[idx] - rollout_log_prob[idx]
        rho = math.exp(log_rho)
        k1.append(-log_rho)
        k3.append(rho - log_rho - 1)
        second.append(rho * rho)
    if not k1:
        return {"k1": 0.0, "k3": 0.0, "chi2": -1.0}
    n = len(k1)
    return {"k1": math.fsum(k1) / n, "k3": math.fsum(k3) / n, "chi2": math.fsum(second) / n - 1}


# ----------------------------------------------------------------------------- more metrics
def entropy_grad(logits):
    """dH/dz_i = -p_i (log p_i + H) for H = entropy(softmax(z)); 0 where p_i = 0."""
    p = softmax_inf(logits)
    h = entropy(logits)
    return [-pi * (math.log(pi) + h) if pi > 0 else 0.0 for pi in p]


def softmax_inf(logits):
    """softmax that gives exactly 0 to -inf logits."""
    top = max(x for x in logits if x != -math.inf)
    weights = [math.exp(x - top) if x != -math.inf else 0.0 for x in logits]
    total = math.fsum(weights)
    return [w / total for w in weights]


def correct_mass(logits, correct):
    p = softmax_inf(logits)
    return math.fsum(pi for pi, ok in zip(p, correct) if ok)


DEGENERATE_CASES = ("all_equal", "one_valid", "all_masked", "g1")


def degenerate_group(case: str):
    """``(rewards, mask)`` of a degenerate batch of 3 groups (float32 rewards all 0.1):
    ``all_equal`` (G=4, every rollout valid), ``one_valid`` (one valid rollout in the whole
    batch), ``all_masked`` (none valid), ``g1`` (one rollout per group)."""
    shape = (3, 1) if case == "g1" else (3, 4)
    rewards = np.full(shape, 0.1, np.float32)
    mask = np.ones(shape, bool)
    if case == "one_valid":
        mask[:] = False
        mask[1, 2] = True
    if case == "all_masked":
        mask[:] = False
    return rewards, mask
