"""BroRL's mass balance on synthetic token distributions: the one-step N-sweep, the relaxed
multi-step sweep and the first-order check (the ``brorl_mass_balance`` experiment).

**One-step N-sweep** (:func:`one_step_sweep`). Token distributions of realistic shape over a
vocabulary of V tokens (Gaussian logits at several temperatures, a Zipf law), a correct set of
|C| random tokens whose logits are shifted so the initial correct mass is exactly ``Q0``; N
i.i.d. rollouts; one step of (a) the paper's idealised update on the distinct set and (b) the
realistic sampled policy gradient with multiplicities (:mod:`.theory`). Per trial and N: the
three mass-balance terms, the exact change, and the fraction of correct tokens whose
probability goes down. Vectorised: the N_max draws are made once per trial and N is a traced
prefix length (vmap over N, common random numbers), trials go through ``lax.map`` in batches.
float64 throughout.

**Relaxed multi-step** (:func:`relaxed_sweep`): several steps with a larger step size,
resampling N rollouts from the current policy at every step.

Step sizes: the idealised update is run with ``lr = eta * N`` (so ``n = N`` cancels): it is
then the realistic update with the empirical frequencies ``m_j / N`` replaced by ``p_j`` on S,
and both take steps of the same size. The ``1/N`` only rescales, no sign depends on it.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from rlvr_lab.papers.brorl import theory

UPDATES = ("idealised", "sampled_pg")
UPDATE_LABEL = {"idealised": "idealised (distinct set, paper)",
                "sampled_pg": "sampled PG (multiplicities)"}
FAMILIES = {"gauss": 0, "zipf": 1}


# ----------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class SweepConfig:
    """Settings of a one-step or a relaxed (multi-step) sweep.

    ``families``: ``("gauss", 1/T)`` i.i.d. standard normal logits times 1/T (T = sampling
    temperature), or ``("zipf", s)``: p ∝ rank^-s over a random order of the tokens. Every
    combination of family, |C| (``num_correct``) and initial correct mass ``q0`` is one setting;
    each gets ``trials`` independent draws (logits, correct set, rollouts). ``steps > 1`` makes
    it a relaxed sweep (resample N rollouts from the current policy at every step).
    """

    vocab_size: int = 8192
    families: tuple = (("gauss", 1.0), ("gauss", 3.0), ("zipf", 1.1), ("zipf", 1.5))
    num_correct: tuple = (1, 16, 512)
    q0: tuple = (0.01, 0.1, 0.5)
    n_values: tuple = (4, 8, 16, 32, 64, 128, 256, 512, 1024)
    trials: int = 96
    eta: float = 0.01
    steps: int = 1
    first_order_etas: tuple = (1e-3, 1e-4)
    batch_size: int = 8

    def __post_init__(self):
        if not (isinstance(self.vocab_size, int) and self.vocab_size >= 2):
            raise ValueError(f"vocab_size={self.vocab_size!r} must be an integer >= 2")
        for name, param in self.families:
            if name not in FAMILIES:
                raise ValueError(f"family {name!r} unknown; valid: {', '.join(FAMILIES)}")
            if not param > 0:
                raise ValueError(f"family parameter {param!r} must be > 0")
        for c in self.num_correct:
            if not 1 <= c < self.vocab_size:
                raise ValueError(f"num_correct={c!r} must be in [1, vocab_size)")
        for q in self.q0:
            if not 0 < q < 1:
                raise ValueError(f"q0={q!r} must be in (0, 1)")
        if min(self.n_values) < 1:
            raise ValueError(f"n_values={self.n_values!r} must all be >= 1")
        if not self.eta > 0:
            raise ValueError(f"eta={self.eta!r} must be > 0")
        if self.first_order_etas and not (len(self.first_order_etas) == 2 and
                                          self.first_order_etas[0] > self.first_order_etas[1] > 0):
            raise ValueError(f"first_order_etas={self.first_order_etas!r} must be () or two "
                             "decreasing positive step sizes")
        for name in ("trials", "steps", "batch_size"):
            if not (isinstance(getattr(self, name), int) and getattr(self, name) >= 1):
                raise ValueError(f"{name}={getattr(self, name)!r} must be an integer >= 1")

    def settings(self) -> pd.DataFrame:
        rows = [{"vocab_size": self.vocab_size, "family": f, "shape": s, "num_correct": c, "q0": q}
                for f, s in self.families for c in self.num_correct for q in self.q0]
        df = pd.DataFrame(rows)
        df["setting"] = [setting_label(r) for r in df.itertuples()]
        return df

    def describe(self) -> str:
        what = "one step" if self.steps == 1 else f"{self.steps} steps (resampling)"
        return (f"V={self.vocab_size}, eta={self.eta:g}, {what}, {self.trials} trials/point")


def setting_label(r) -> str:
    fam = f"gauss T={1 / r.shape:.2g}" if r.family == "gauss" else f"zipf s={r.shape:g}"
    return f"{fam}, |C|={r.num_correct}, Q0={r.q0:g}"


# One-step grid (V = 8192), the hard prompts again at V = 32768, and the relaxed multi-step
# sweep (larger step, resampling, V = 4096 to fit the time budget). Quick: small versions.
FULL = {
    "one_step": SweepConfig(),
    "large_vocab": SweepConfig(vocab_size=32768, q0=(0.01,), trials=48, first_order_etas=()),
    "relaxed": SweepConfig(vocab_size=4096, families=(("gauss", 3.0), ("zipf", 1.1)),
                           num_correct=(16, 512), trials=32, eta=1.0, steps=16,
                           first_order_etas=()),
}
QUICK = {
    "one_step": SweepConfig(vocab_size=2048, families=(("gauss", 3.0), ("zipf", 1.1)),
                            num_correct=(1, 16), q0=(0.01, 0.5), trials=48),
    "relaxed": SweepConfig(vocab_size=1024, families=(("zipf", 1.1),), num_correct=(16,),
                           q0=(0.01, 0.5), trials=16, eta=1.0, steps=8,
                           n_values=(4, 16, 64, 256, 1024), first_order_etas=()),
}


def make_logits(key, family, shape, num_correct, q0, vocab_size: int):
    """Logits ``[V]`` of one prompt and its correct set (the first ``num_correct`` tokens).

    The base logits are exchangeable (i.i.d. Gaussian, or a Zipf law over a random
    permutation), so "the first |C| tokens" is a uniformly random correct set. The correct
    logits are then shifted so that the correct mass is exactly ``q0`` (shape within C and
    within W unchanged). All arguments but ``vocab_size`` may be traced.
    """
    k_gauss, k_perm = jax.random.split(key)
    dtype = jnp.result_type(float)
    z_gauss = shape * jax.random.normal(k_gauss, (vocab_size,), dtype)
    rank = jax.random.permutation(k_perm, vocab_size) + 1
    z_zipf = -shape * jnp.log(rank.astype(dtype))
    z = jnp.where(family == FAMILIES["zipf"], z_zipf, z_gauss)
    correct = jnp.arange(vocab_size) < num_correct
    log_pos, log_neg = theory.log_masses(z, correct)
    shift = jnp.log(q0) - jnp.log1p(-q0) - (log_pos - log_neg)
    return z + jnp.where(correct, shift, 0.0), correct


def _setting_arrays(settings: pd.DataFrame, trials: int):
    """Per-trial setting arrays (each setting repeated ``trials`` times) for ``lax.map``."""
    rep = lambda col, dt: jnp.repeat(jnp.asarray(settings[col].to_numpy(), dt), trials)
    fam = np.array([FAMILIES[f] for f in settings["family"]])
    return (jnp.repeat(jnp.asarray(fam, jnp.int32), trials), rep("shape", float),
            rep("num_correct", jnp.int32), rep("q0", float))


# ----------------------------------------------------------------------------- one step
def one_trial(key, family, shape, num_correct, q0, *, vocab_size, n_values, eta, etas=()):
    """All per-N quantities of one trial (dict of ``[len(n_values)]`` arrays).

    ``etas`` (two small step sizes, larger first): check of the first-order claim. Both updates
    are linear in the step size, so ``total(eta) = eta * total(1)``; the exact change obeys
    ``exact(eta) / eta = D + c eta + O(eta^2)`` with D the true first-order change. We store
    ``err_<update>`` = |exact(eta_2)/eta_2 - total(1)| and ``rich_<update>`` = |D_R - total(1)|
    with the Richardson estimate ``D_R`` from both etas, each divided by the condition scale
    ``sum_j p_j |c_j - Q_pos| |dz_j|`` of the directional derivative.
    """
    k_logits, k_sample = jax.random.split(key)
    z, correct = make_logits(k_logits, family, shape, num_correct, q0, vocab_size)
    p = jax.nn.softmax(z)
    n_max = max(n_values)
    draws = jax.random.choice(k_sample, vocab_size, (n_max,), p=p)

    def per_n(n):
        counts = jnp.zeros(vocab_size, z.dtype).at[draws].add((jnp.arange(n_max) < n)
                                                             .astype(z.dtype))
        sampled = counts > 0
        nf = n.astype(z.dtype)
        out = {}
        for upd in UPDATES:
            if upd == "idealised":   # lr = eta * N: same step size as the sampled PG
                res = theory.mass_balance(z, correct, sampled, lr=eta * nf, n=nf)
                d1 = theory.idealised_update(z, correct, sampled, lr=nf, n=nf)
            else:
                res = theory.sampled_pg_mass_balance(z, correct, counts, lr=eta)
                d1 = theory.sampled_pg_update(z, correct, counts, lr=1.0)
            for k, v in res.items():
                out[f"{k}_{upd}"] = v
            out[f"first_order_{upd}"] = theory.first_order_mass_change(z, correct, eta * d1)
            out[f"frac_down_{upd}"] = theory.fraction_correct_decreased(z, correct, eta * d1)
            if etas:
                e1, e2 = etas
                total1 = res["total"] / eta
                q = jnp.sum(jnp.where(correct, p, 0.0))
                scale = jnp.maximum(jnp.sum(p * jnp.abs(correct - q) * jnp.abs(d1)),
                                    jnp.finfo(z.dtype).tiny)
                r1 = theory.exact_mass_change(z, correct, e1 * d1) / e1
                r2 = theory.exact_mass_change(z, correct, e2 * d1) / e2
                rich = (e1 * r2 - e2 * r1) / (e1 - e2)
                out[f"err_{upd}"] = jnp.abs(r2 - total1) / scale
                out[f"rich_{upd}"] = jnp.abs(rich - total1) / scale
        out["unsampled_correct_mass"] = jnp.sum(jnp.where(correct & ~sampled, p, 0.0))
        out["distinct"] = jnp.sum(sampled).astype(z.dtype)
        return out

    return jax.vmap(per_n)(jnp.asarray(n_values))


def _sweep(key, config: SweepConfig, trial: Callable[..., dict]) -> pd.DataFrame:
    """``trial(key, *setting arrays)`` for every setting x trial (``jax.lax.map`` in batches of
    ``config.batch_size``, in float64); long-form frame (setting columns, trial, N, metric
    columns)."""
    settings = config.settings()
    args = _setting_arrays(settings, config.trials)
    keys = jax.random.split(key, len(args[0]))

    @jax.jit
    def run(keys, *args):
        return jax.lax.map(lambda xs: trial(xs[0], *xs[1:]), (keys, *args),
                           batch_size=config.batch_size)

    with jax.enable_x64(True):
        out = jax.device_get(run(keys, *args))
    return _to_frame(out, settings, config.trials, config.n_values)


def one_step_sweep(key, config: SweepConfig) -> pd.DataFrame:
    """Run the one-step sweep; long-form frame (setting columns, trial, N, metric columns)."""
    return _sweep(key, config, functools.partial(
        one_trial, vocab_size=config.vocab_size, n_values=config.n_values, eta=config.eta,
        etas=config.first_order_etas))


def _to_frame(out: dict, settings: pd.DataFrame, trials: int, n_values) -> pd.DataFrame:
    n_set = len(settings)
    cols = {k: np.asarray(v).reshape(-1) for k, v in out.items()}
    idx = np.arange(n_set * trials * len(n_values))
    s_idx = idx // (trials * len(n_values))
    frame = settings.iloc[s_idx].reset_index(drop=True)
    frame["trial"] = (idx // len(n_values)) % trials
    frame["N"] = np.asarray(n_values)[idx % len(n_values)]
    return pd.concat([frame, pd.DataFrame(cols)], axis=1)


def summarise_one_step(df: pd.DataFrame) -> pd.DataFrame:
    """Per (setting, N, update): P(exact < 0), P(total < 0), mean terms, mean frac down."""
    rows = []
    keys = ["vocab_size", "setting", "family", "shape", "num_correct", "q0", "N"]
    for key, g in df.groupby(keys, sort=False):
        for upd in UPDATES:
            row = dict(zip(keys, key), update=upd, trials=len(g),
                       p_decrease=float(np.mean(g[f"exact_{upd}"] < 0)),
                       p_decrease_first_order=float(np.mean(g[f"total_{upd}"] < 0)),
                       frac_correct_down=float(np.mean(g[f"frac_down_{upd}"])),
                       p_any_correct_down=float(np.mean(g[f"frac_down_{upd}"] > 0)),
                       unsampled_correct_mass=float(np.mean(g["unsampled_correct_mass"])),
                       distinct=float(np.mean(g["distinct"])))
            for t in theory.KEYS:
                row[f"mean_{t}"] = float(np.mean(g[f"{t}_{upd}"]))
            rows.append(row)
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- relaxed
def relaxed_trial(key, family, shape, num_correct, q0, *, vocab_size, n_values, eta, steps):
    """Several steps with resampling; per N and update: final log p_j - log p0_j summaries."""
    k_logits, k_run = jax.random.split(key)
    z0, correct = make_logits(k_logits, family, shape, num_correct, q0, vocab_size)
    n_max = max(n_values)

    def run(n, upd):
        nf = jnp.asarray(n, z0.dtype)

        def step(z, k):
            counts = theory.sample_counts(k, z, n_max, n)
            if upd == "idealised":
                d = theory.idealised_update(z, correct, counts > 0, lr=eta * nf, n=nf)
            else:
                d = theory.sampled_pg_update(z, correct, counts, lr=eta)
            return z + d, theory.exact_mass_change(z, correct, d) < 0

        z, went_down = jax.lax.scan(step, z0, jax.random.split(k_run, steps))
        dlogp = jax.nn.log_softmax(z) - jax.nn.log_softmax(z0)
        down = (dlogp < 0) & correct
        return {"frac_down": jnp.sum(down) / jnp.sum(correct),
                "all_up": ~jnp.any(down),
                "dq": theory.exact_mass_change(z0, correct, z - z0),
                "steps_down": jnp.mean(went_down)}

    return {f"{k}_{upd}": v for upd in UPDATES
            for k, v in jax.vmap(lambda n, upd=upd: run(n, upd))(jnp.asarray(n_values)).items()}


def relaxed_sweep(key, config: SweepConfig) -> pd.DataFrame:
    """Run the relaxed sweep; long-form frame like :func:`one_step_sweep`."""
    return _sweep(key, config, functools.partial(
        relaxed_trial, vocab_size=config.vocab_size, n_values=config.n_values, eta=config.eta,
        steps=config.steps))


def summarise_relaxed(df: pd.DataFrame) -> pd.DataFrame:
    rows = []
    keys = ["vocab_size", "setting", "family", "shape", "num_correct", "q0", "N"]
    for key, g in df.groupby(keys, sort=False):
        for upd in UPDATES:
            rows.append(dict(zip(keys, key), update=upd, trials=len(g),
                             p_all_up=float(np.mean(g[f"all_up_{upd}"])),
                             frac_correct_down=float(np.mean(g[f"frac_down_{upd}"])),
                             p_mass_down=float(np.mean(g[f"dq_{upd}"] < 0)),
                             mean_dq=float(np.mean(g[f"dq_{upd}"])),
                             frac_steps_down=float(np.mean(g[f"steps_down_{upd}"]))))
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- first order
FIRST_ORDER_ETAS = tuple(10.0 ** -np.arange(0, 9))


def first_order_curve(key, config: SweepConfig, etas=FIRST_ORDER_ETAS, n: int = 16,
                      trials: int = 4) -> pd.DataFrame:
    """Max over trials/settings of |exact(eta)/eta - total(1)| / scale, per update and eta.

    Shows the error of the three-term formula against the exact step falling like eta (first
    order) down to the float64 rounding floor.
    """
    settings = config.settings()
    args = _setting_arrays(settings, trials)
    keys = jax.random.split(key, len(args[0]))

    def one(key, family, shape, num_correct, q0):
        k_logits, k_sample = jax.random.split(key)
        z, correct = make_logits(k_logits, family, shape, num_correct, q0, config.vocab_size)
        p = jax.nn.softmax(z)
        counts = theory.sample_counts(k_sample, z, n)
        q = jnp.sum(jnp.where(correct, p, 0.0))
        out = {}
        for upd in UPDATES:
            if upd == "idealised":
                total1 = theory.mass_balance(z, correct, counts > 0, lr=n, n=n)["total"]
                d1 = theory.idealised_update(z, correct, counts > 0, lr=n, n=n)
            else:
                total1 = theory.sampled_pg_mass_balance(z, correct, counts, lr=1.0)["total"]
                d1 = theory.sampled_pg_update(z, correct, counts, lr=1.0)
            scale = jnp.maximum(jnp.sum(p * jnp.abs(correct - q) * jnp.abs(d1)),
                                jnp.finfo(z.dtype).tiny)
            exact = jax.vmap(lambda e, d1=d1: theory.exact_mass_change(z, correct, e * d1) / e)(
                jnp.asarray(etas, z.dtype))
            out[upd] = jnp.abs(exact - total1) / scale
        return out

    with jax.enable_x64(True):
        out = jax.device_get(jax.jit(jax.vmap(one))(keys, *args))
    return pd.DataFrame([{"update": u, "eta": e, "max_rel_error": float(np.max(out[u][:, i])),
                              "median_rel_error": float(np.median(out[u][:, i]))}
                         for u in UPDATES for i, e in enumerate(etas)])


# ----------------------------------------------------------------------------- claims
def first_n_below(summary: pd.DataFrame, metric: str, threshold: float) -> pd.DataFrame:
    """Per setting and update: the smallest N from which ``metric`` stays < threshold (inf if
    it is not below at the largest N)."""
    rows = []
    for (v, s, upd), g in summary.groupby(["vocab_size", "setting", "update"], sort=False):
        g = g.sort_values("N")
        bad = np.flatnonzero(~(g[metric].to_numpy() < threshold))
        if len(bad) == 0:
            n_star = g["N"].iloc[0]
        elif bad[-1] + 1 < len(g):
            n_star = g["N"].iloc[bad[-1] + 1]
        else:
            n_star = np.inf
        rows.append({"vocab_size": v, "setting": s, "update": upd, "n_below": float(n_star)})
    return pd.DataFrame(rows)




# ----------------------------------------------------------------------------- the study
# The tolerances of the first-order check (float64): the Richardson limit of exact(eta)/eta
# against the three-term total, relative to the derivative's condition scale; and the three-term
# total against sum_j p_j (c_j - Q) dz_j, relative to the size of the terms.
FIRST_ORDER_TOL = 1e-6
IDENTITY_TOL = 1e-10


def run_sweeps(key_fn, configs: dict) -> dict:
    """Run the sweeps of ``configs`` (``FULL`` / ``QUICK``); ``key_fn(name)`` gives the key of
    each (``"one_step"``, ``"large_vocab"``, ``"relaxed"``, ``"first_order"``).

    Returns the per-trial frames (``one_step``: all vocabularies, ``relaxed``), their
    summaries and the first-order curve."""
    one = configs["one_step"]
    frames = [one_step_sweep(key_fn("one_step"), one)]
    if "large_vocab" in configs:
        frames.append(one_step_sweep(key_fn("large_vocab"), configs["large_vocab"]))
    trials = pd.concat(frames, ignore_index=True)
    summary = pd.concat([summarise_one_step(f) for f in frames], ignore_index=True)
    relaxed_trials = relaxed_sweep(key_fn("relaxed"), configs["relaxed"])
    return {"trials": trials, "frames": frames, "summary": summary,
            "relaxed_trials": relaxed_trials, "relaxed": summarise_relaxed(relaxed_trials),
            "curve": first_order_curve(key_fn("first_order"), one)}


def first_order_errors(df: pd.DataFrame) -> np.ndarray:
    """Per trial, N and update, each check's error divided by its tolerance (the claim passes
    when every one is below 1): the Richardson limit of exact(eta)/eta against the three-term
    total (``/ FIRST_ORDER_TOL``) and the total against ``sum_j p_j (c_j - Q) dz_j``
    (``/ IDENTITY_TOL``)."""
    out = []
    for u in UPDATES:
        size = np.maximum(sum(np.abs(df[f"{t}_{u}"]) for t in theory.TERMS), 1e-300)
        out.append(np.abs(df[f"total_{u}"] - df[f"first_order_{u}"]) / size / IDENTITY_TOL)
        out.append(np.asarray(df[f"rich_{u}"]) / FIRST_ORDER_TOL)
    return np.concatenate([np.asarray(o, np.float64).ravel() for o in out])


def hardest_setting(summary: pd.DataFrame, update: str, n: int = 16) -> tuple[int, str]:
    """``(vocab_size, setting)`` of the hard prompts (smallest Q0) whose P(dQ < 0) at N=``n``
    is largest under ``update``."""
    sub = summary[(summary["update"] == update) & (summary.q0 == summary.q0.min())
                  & (summary.N == n)]
    row = sub.loc[sub["p_decrease"].idxmax()]
    return int(row.vocab_size), str(row.setting)


def p_decrease_trials(trials: pd.DataFrame, summary: pd.DataFrame, update: str,
                      n: int) -> np.ndarray:
    """Per trial of the hardest setting (:func:`hardest_setting`): 1 if one step of ``update``
    with ``n`` rollouts lowered the correct mass (exact change < 0), else 0."""
    v, s = hardest_setting(summary, update)
    g = trials[(trials.vocab_size == v) & (trials.setting == s) & (trials.N == n)]
    return (np.asarray(g[f"exact_{update}"]) < 0).astype(np.float64)


def all_up_trials(relaxed_trials: pd.DataFrame, relaxed: pd.DataFrame, n: int,
                  update: str = "idealised") -> np.ndarray:
    """Per trial of the relaxed setting where it is rarest at N=``n``: 1 if every correct token
    ended above its initial probability, else 0."""
    sub = relaxed[(relaxed.N == n) & (relaxed["update"] == update)]
    s = sub.loc[sub["p_all_up"].idxmin(), "setting"]
    g = relaxed_trials[(relaxed_trials.setting == s) & (relaxed_trials.N == n)]
    return np.asarray(g[f"all_up_{update}"], np.float64)
