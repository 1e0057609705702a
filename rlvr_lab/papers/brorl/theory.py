r"""BroRL mass balance: how one policy-gradient step on softmax logits moves the correct mass.

Setting (the BroRL paper). One prompt, a softmax policy ``p = softmax(z)`` over a
vocabulary of V tokens (answers), a correct set C (reward ``R_c >= 0``) and its complement W
(reward ``R_w <= 0``). ``Q_pos = sum_{j in C} p_j`` is the correct mass, ``Q_neg = 1 - Q_pos``.

**Softmax calculus.** For any logit change ``dz``, ``dp_j = p_j (dz_j - p . dz)``, hence

    dQ_pos = sum_j p_j (c_j - Q_pos) dz_j            (c_j = 1 if j in C else 0)    (1)

**The paper's idealised update** (one step on the *distinct* sampled set S of N rollouts)::

    dz = (lr / N) sum_{i in S} R_i p_i (e_i - p)
    dz_j = (lr / N) p_j (R_j s_j - S_R),     S_R = sum_{i in S} R_i p_i = R_c P_pos + R_w P_neg

Inserting into (1) and splitting j into the four cells (C or W) x (sampled or not)::

    dQ_pos = (lr / N) [ (R_c - S_R) Q_neg A2              # sampled correct   (>= 0)
                      + (S_R - R_w) Q_pos B2              # sampled wrong     (>= 0)
                      + S_R (Q_pos U_neg2 - Q_neg U_pos2) ]  # unsampled     (either sign)

with ``A2 = sum_{C∩S} p^2``, ``B2 = sum_{W∩S} p^2``, ``U_pos2 = sum_{C\S} p^2``,
``U_neg2 = sum_{W\S} p^2``. Terms 1-2 are never negative because
``R_w <= R_w P_neg <= S_R <= R_c P_pos <= R_c``. This derivation reproduces the formula in
the paper exactly (checked in the BroRL tests against plain-Python loops and
against the exact finite-step change as ``lr -> 0``).

**The realistic sampled policy gradient** (REINFORCE on the N rollouts ``a_1..a_N``, counted
with multiplicity ``m_j``, empirical frequency ``f_j = m_j / N``)::

    dz = (lr / N) sum_n R(a_n) (e_{a_n} - p),     dz_j = lr (R_j f_j - p_j T_R),
    T_R = (1/N) sum_n R(a_n)                      (the empirical mean reward)

and the same split of (1) gives::

    dQ_pos = lr [ Q_neg sum_{C∩S} p_j (R_c f_j - p_j T_R)        # sampled correct
                + Q_pos sum_{W∩S} p_j (p_j T_R - R_w f_j)        # sampled wrong
                + T_R (Q_pos U_neg2 - Q_neg U_pos2) ]            # unsampled

The idealised update is this one with the empirical frequencies ``f_j`` replaced by their
expectation ``p_j`` on S (and an extra ``1/N`` scale, which changes no sign). In the realistic
update the two sampled terms are *not* sign-definite (a correct token drawn less often than
``p_j T_R / R_c`` of the time is pushed down), which is why the simulation tracks both.

Everything here is jittable and vmappable and keeps the dtype of ``logits`` (use float64 for
closed-form checks). ``exact`` sums ``p_j expm1(log p'_j - log p_j)`` over the smaller of the
two sets, with the normaliser change from ``log1p``, so it stays accurate even when the change
is far below the masses themselves (see :func:`exact_mass_change`).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

TERMS = ("sampled_correct", "sampled_wrong", "unsampled")
KEYS = TERMS + ("total", "exact")


def _is_concrete(*xs) -> bool:
    return not any(isinstance(x, jax.core.Tracer) for x in xs)


def _check_inputs(logits, masks: dict, r_correct, r_wrong, lr):
    if logits.ndim != 1:
        raise ValueError(f"logits must have shape [V]; got shape {tuple(logits.shape)}")
    for name, m in masks.items():
        if m.shape != logits.shape:
            raise ValueError(f"{name} must have the shape of logits {tuple(logits.shape)}; "
                             f"got {tuple(m.shape)}")
    if _is_concrete(r_correct, r_wrong, lr):
        if not float(r_correct) >= 0:
            raise ValueError(f"r_correct={r_correct!r} must be >= 0 (the mass balance assumes "
                             "R_c >= 0 >= R_w)")
        if not float(r_wrong) <= 0:
            raise ValueError(f"r_wrong={r_wrong!r} must be <= 0 (the mass balance assumes "
                             "R_c >= 0 >= R_w)")
        if not float(lr) >= 0:
            raise ValueError(f"lr={lr!r} must be >= 0")


def _float_dtype(logits):
    dtype = jnp.result_type(logits)
    return dtype if jnp.issubdtype(dtype, jnp.floating) else jnp.result_type(float)


def log_masses(logits: ArrayLike, correct: ArrayLike) -> tuple[jax.Array, jax.Array]:
    """``(log Q_pos, log Q_neg)`` of ``softmax(logits)``; ``-inf`` for an empty set."""
    z = jnp.asarray(logits)
    correct = jnp.asarray(correct, bool)
    lse = jax.nn.logsumexp(z)
    lse_c = jax.nn.logsumexp(jnp.where(correct, z, -jnp.inf))
    lse_w = jax.nn.logsumexp(jnp.where(correct, -jnp.inf, z))
    return lse_c - lse, lse_w - lse


def correct_mass(logits: ArrayLike, correct: ArrayLike) -> jax.Array:
    """``Q_pos = sum_{j in C} softmax(logits)_j`` (0 for an empty correct set)."""
    return jnp.exp(log_masses(logits, correct)[0])


def log_normaliser_change(logits: ArrayLike, delta: ArrayLike) -> jax.Array:
    """``lse(z + delta) - lse(z) = log sum_j p_j exp(delta_j)``, accurate for small steps.

    Evaluated as ``log1p(sum_j p_j expm1(delta_j))`` (relative precision in the small change
    itself) when ``max|delta| < 1``, else as the plain difference of log-sum-exps.
    """
    z = jnp.asarray(logits)
    p = jax.nn.softmax(z)
    small = jnp.max(jnp.abs(delta), initial=0.0) < 1.0
    # the small-step branch is evaluated on a clipped delta so it never overflows
    accurate = jnp.log1p(jnp.sum(p * jnp.expm1(jnp.clip(delta, -1.0, 1.0))))
    plain = jax.nn.logsumexp(z + delta) - jax.nn.logsumexp(z)
    return jnp.where(small, accurate, plain)


def exact_mass_change(logits: ArrayLike, correct: ArrayLike, delta: ArrayLike) -> jax.Array:
    """``Q_pos(softmax(logits + delta)) - Q_pos(softmax(logits))``, without cancellation.

    Each token's change is ``p'_j - p_j = p_j expm1(delta_j - dlse)`` with ``dlse`` from
    :func:`log_normaliser_change`; the sum runs over whichever of C and W holds less mass
    (``dQ_pos = -dQ_neg``). So the result is accurate to a few ulps of
    ``sum_j p_j |p'_j/p_j - 1|`` even when it is far below the masses themselves (a plain
    ``Q_after - Q_before`` loses all digits once the change is below ``eps * Q``).
    0 when the correct set or its complement is empty.
    """
    z = jnp.asarray(logits)
    correct = jnp.asarray(correct, bool)
    log_p = jax.nn.log_softmax(z)
    shift = delta - log_normaliser_change(z, delta)          # log p'_j - log p_j
    # p_j expm1(shift_j); for huge shifts (only possible on underflowed p_j) use p'_j - p_j
    change = jnp.where(shift < 30.0, jnp.exp(log_p) * jnp.expm1(jnp.minimum(shift, 30.0)),
                       jnp.exp(log_p + shift) - jnp.exp(log_p))
    p = jnp.exp(log_p)
    q_pos = jnp.sum(jnp.where(correct, p, 0.0))
    via_pos = jnp.sum(jnp.where(correct, change, 0.0))
    via_neg = -jnp.sum(jnp.where(correct, 0.0, change))
    has_both = jnp.any(correct) & jnp.any(~correct)
    return jnp.where(has_both, jnp.where(q_pos <= 0.5, via_pos, via_neg), 0.0)


def first_order_mass_change(logits: ArrayLike, correct: ArrayLike,
                            delta: ArrayLike) -> jax.Array:
    """Directional derivative of ``Q_pos`` along ``delta``: ``sum_j p_j (c_j - Q_pos) delta_j``."""
    p = jax.nn.softmax(jnp.asarray(logits))
    c = jnp.asarray(correct, p.dtype)
    return jnp.sum(p * (c - jnp.sum(p * c)) * delta)


def log_prob_change(logits: ArrayLike, delta: ArrayLike) -> jax.Array:
    """Exact per-token ``log p'_j - log p_j = delta_j - (lse(z + delta) - lse(z))``."""
    return delta - log_normaliser_change(logits, delta)


def fraction_correct_decreased(logits: ArrayLike, correct: ArrayLike,
                               delta: ArrayLike) -> jax.Array:
    """Fraction of correct tokens whose probability strictly decreases (exact step).

    0 for an empty correct set.
    """
    correct = jnp.asarray(correct, bool)
    down = (log_prob_change(logits, delta) < 0) & correct
    return jnp.sum(down) / jnp.maximum(jnp.sum(correct), 1)


# ----------------------------------------------------------------------------- idealised update
def idealised_update(logits: ArrayLike, correct: ArrayLike, sampled: ArrayLike, *,
                     r_correct: ArrayLike = 1.0, r_wrong: ArrayLike = -1.0, lr: ArrayLike = 1.0,
                     n: ArrayLike | None = None) -> jax.Array:
    """The paper's logit step ``(lr / n) sum_{i in S} R_i p_i (e_i - p)`` over the distinct set S.

    ``n`` is the number of rollouts N; ``None`` uses ``max(|S|, 1)`` (the fewest rollouts that
    can produce S). An empty S gives a zero step.
    """
    z = jnp.asarray(logits)
    dtype = _float_dtype(z)
    p = jax.nn.softmax(z.astype(dtype))
    correct = jnp.asarray(correct, bool)
    s = jnp.asarray(sampled, bool).astype(dtype)
    if n is None:
        n = jnp.maximum(jnp.sum(s), 1.0)
    reward = jnp.where(correct, jnp.asarray(r_correct, dtype), jnp.asarray(r_wrong, dtype))
    weight = reward * p * s                        # R_i p_i on S, 0 elsewhere
    return (lr / jnp.asarray(n, dtype)) * (weight - p * jnp.sum(weight))


def mass_balance(logits: ArrayLike, correct: ArrayLike, sampled: ArrayLike, *,
                 r_correct: ArrayLike = 1.0, r_wrong: ArrayLike = -1.0, lr: ArrayLike = 1.0,
                 n: ArrayLike | None = None) -> dict[str, jax.Array]:
    """Three-term first-order change of the correct mass under the idealised BroRL update.

    Args:
      logits: ``[V]`` logits z (finite). Use float64 for closed-form checks.
      correct: ``[V]`` bool, the correct set C.
      sampled: ``[V]`` bool, the distinct set S of tokens seen in the N rollouts.
      r_correct, r_wrong: rewards ``R_c >= 0 >= R_w``.
      lr: step size eta.
      n: the number of rollouts N (the update is divided by it); ``None`` -> ``max(|S|, 1)``.

    Returns dict with scalar entries:
      ``"sampled_correct"`` = (lr/N)(R_c - S_R) Q_neg A2 (>= 0),
      ``"sampled_wrong"`` = (lr/N)(S_R - R_w) Q_pos B2 (>= 0),
      ``"unsampled"`` = (lr/N) S_R (Q_pos U_neg2 - Q_neg U_pos2) (either sign),
      ``"total"`` = their sum (= the first-order change of Q_pos),
      ``"exact"`` = Q_pos after the logit update minus Q_pos before.
    Degenerate inputs are finite: empty S or C gives all zeros.
    """
    z = jnp.asarray(logits)
    correct = jnp.asarray(correct, bool)
    sampled = jnp.asarray(sampled, bool)
    _check_inputs(z, {"correct": correct, "sampled": sampled}, r_correct, r_wrong, lr)
    dtype = _float_dtype(z)
    z = z.astype(dtype)
    p = jax.nn.softmax(z)
    p2 = p * p
    q_pos = jnp.sum(jnp.where(correct, p, 0.0))
    q_neg = jnp.sum(jnp.where(correct, 0.0, p))
    rc, rw = jnp.asarray(r_correct, dtype), jnp.asarray(r_wrong, dtype)
    s_r = rc * jnp.sum(jnp.where(correct & sampled, p, 0.0)) \
        + rw * jnp.sum(jnp.where(~correct & sampled, p, 0.0))
    a2 = jnp.sum(jnp.where(correct & sampled, p2, 0.0))
    b2 = jnp.sum(jnp.where(~correct & sampled, p2, 0.0))
    u_pos2 = jnp.sum(jnp.where(correct & ~sampled, p2, 0.0))
    u_neg2 = jnp.sum(jnp.where(~correct & ~sampled, p2, 0.0))
    n_eff = jnp.maximum(jnp.sum(sampled), 1) if n is None else n
    scale = jnp.asarray(lr, dtype) / jnp.asarray(n_eff, dtype)
    terms = {
        "sampled_correct": scale * (rc - s_r) * q_neg * a2,
        "sampled_wrong": scale * (s_r - rw) * q_pos * b2,
        "unsampled": scale * s_r * (q_pos * u_neg2 - q_neg * u_pos2),
    }
    delta = idealised_update(z, correct, sampled, r_correct=r_correct, r_wrong=r_wrong,
                             lr=lr, n=n_eff)
    return {**terms, "total": sum(terms.values()),
            "exact": exact_mass_change(z, correct, delta)}


# ----------------------------------------------------------------------------- realistic update
def sampled_pg_update(logits: ArrayLike, correct: ArrayLike, counts: ArrayLike, *,
                      r_correct: ArrayLike = 1.0, r_wrong: ArrayLike = -1.0,
                      lr: ArrayLike = 1.0) -> jax.Array:
    """REINFORCE step on N rollouts with multiplicities: ``(lr/N) sum_n R(a_n)(e_{a_n} - p)``.

    ``counts[j]`` = how many of the N rollouts drew token j (N = ``sum(counts)``; N = 0 gives a
    zero step).
    """
    z = jnp.asarray(logits)
    dtype = _float_dtype(z)
    p = jax.nn.softmax(z.astype(dtype))
    counts = jnp.asarray(counts, dtype)
    n = jnp.sum(counts)
    freq = counts / jnp.maximum(n, 1.0)
    reward = jnp.where(jnp.asarray(correct, bool), jnp.asarray(r_correct, dtype),
                       jnp.asarray(r_wrong, dtype))
    mean_reward = jnp.sum(reward * freq)           # T_R (0 when N = 0)
    return lr * (reward * freq - p * mean_reward)


def sampled_pg_mass_balance(logits: ArrayLike, correct: ArrayLike, counts: ArrayLike, *,
                            r_correct: ArrayLike = 1.0, r_wrong: ArrayLike = -1.0,
                            lr: ArrayLike = 1.0) -> dict[str, jax.Array]:
    """The same three-term split for the realistic sampled policy gradient (module docstring).

    Args as :func:`mass_balance`, but ``counts`` is ``[V]`` (int or float) multiplicities of
    the N rollouts (S = ``counts > 0``). Keys as :func:`mass_balance`; here the two sampled
    terms can be negative.
    """
    z = jnp.asarray(logits)
    correct = jnp.asarray(correct, bool)
    counts = jnp.asarray(counts)
    _check_inputs(z, {"correct": correct, "counts": counts}, r_correct, r_wrong, lr)
    if _is_concrete(counts) and bool(jnp.any(counts < 0)):
        raise ValueError("counts must be >= 0 (multiplicities of the sampled tokens)")
    dtype = _float_dtype(z)
    z = z.astype(dtype)
    p = jax.nn.softmax(z)
    p2 = p * p
    counts = counts.astype(dtype)
    sampled = counts > 0
    freq = counts / jnp.maximum(jnp.sum(counts), 1.0)
    q_pos = jnp.sum(jnp.where(correct, p, 0.0))
    q_neg = jnp.sum(jnp.where(correct, 0.0, p))
    rc, rw = jnp.asarray(r_correct, dtype), jnp.asarray(r_wrong, dtype)
    t_r = jnp.sum(jnp.where(correct, rc, rw) * freq)
    u_pos2 = jnp.sum(jnp.where(correct & ~sampled, p2, 0.0))
    u_neg2 = jnp.sum(jnp.where(~correct & ~sampled, p2, 0.0))
    lr_ = jnp.asarray(lr, dtype)
    terms = {
        "sampled_correct": lr_ * q_neg * jnp.sum(
            jnp.where(correct & sampled, p * (rc * freq - p * t_r), 0.0)),
        "sampled_wrong": lr_ * q_pos * jnp.sum(
            jnp.where(~correct & sampled, p * (p * t_r - rw * freq), 0.0)),
        "unsampled": lr_ * t_r * (q_pos * u_neg2 - q_neg * u_pos2),
    }
    delta = sampled_pg_update(z, correct, counts, r_correct=r_correct, r_wrong=r_wrong, lr=lr)
    return {**terms, "total": sum(terms.values()),
            "exact": exact_mass_change(z, correct, delta)}


def sample_counts(key: jax.Array, logits: ArrayLike, n_max: int,
                  n: ArrayLike | None = None) -> jax.Array:
    """Multiplicities ``[V]`` of the first ``n`` of ``n_max`` i.i.d. draws from softmax(logits).

    Drawing ``n_max`` tokens once and keeping prefixes makes ``n`` a traced value (vmap over
    N) and couples the samples across N (common random numbers, smoother N-curves).
    """
    z = jnp.asarray(logits)
    draws = jax.random.choice(key, z.shape[0], (n_max,), p=jax.nn.softmax(z))
    keep = jnp.ones(n_max) if n is None else (jnp.arange(n_max) < n)
    return jnp.zeros(z.shape[0], _float_dtype(z)).at[draws].add(keep.astype(_float_dtype(z)))
