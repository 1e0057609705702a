"""BroRL (broadened exploration): mass balance, rollout-size sweep, and reviving a saturated run.

Three studies in two experiments: ``brorl_mass_balance`` (1, 2) and ``brorl_training`` (3).

1. **One-step N-sweep** (``one_step_sweep``). Token distributions of realistic shape over a
   vocabulary of V tokens (Gaussian logits at several temperatures, a Zipf law), a correct set
   of |C| random tokens whose logits are shifted so the initial correct mass is exactly
   ``Q0``; N i.i.d. rollouts; one step of (a) the paper's idealised update on the distinct set
   and (b) the realistic sampled policy gradient with multiplicities
   (``rlvr_lab.papers.brorl.theory``). Per trial and N: the three mass-balance terms, the exact
   change, and the fraction of correct tokens whose probability goes down. Vectorised: the
   N_max draws are made once per trial and N is a traced prefix length (vmap over N, common
   random numbers), trials go through ``lax.map`` in batches. float64 throughout.
2. **Relaxed multi-step** (``relaxed_sweep``): several steps with a larger step size,
   resampling N rollouts from the current policy at every step.
3. **Training** on the prompt bank (``training_study``, the ``rlvr_lab.train.bandit``
   trainer): N=16 until the accuracy flattens, then N=16 vs N=512 from the same state. The
   ``brorl_schedule`` rollout stage (``rlvr_lab.papers.brorl``) switches the group size
   mid-run (groups padded to ``num_generations`` with a validity mask before the switch).

Step sizes: the idealised update is run with ``lr = eta * N`` (so ``n = N`` cancels): it is
then the realistic update with the empirical frequencies ``m_j / N`` replaced by ``p_j`` on S,
and both take steps of the same size. The ``1/N`` only rescales, no sign depends on it.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from rlvr_lab import plotting, stats
from rlvr_lab.experiments import claim, experiment
from rlvr_lab.papers.brorl import small as brorl_small
from rlvr_lab.papers.brorl import theory as mb
from rlvr_lab.train import sequence
from simulations import tiny_grpo

PAPER = "BroRL"
REF = "arXiv:2510.01180"
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
    log_pos, log_neg = mb.log_masses(z, correct)
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
                res = mb.mass_balance(z, correct, sampled, lr=eta * nf, n=nf)
                d1 = mb.idealised_update(z, correct, sampled, lr=nf, n=nf)
            else:
                res = mb.sampled_pg_mass_balance(z, correct, counts, lr=eta)
                d1 = mb.sampled_pg_update(z, correct, counts, lr=1.0)
            for k, v in res.items():
                out[f"{k}_{upd}"] = v
            out[f"first_order_{upd}"] = mb.first_order_mass_change(z, correct, eta * d1)
            out[f"frac_down_{upd}"] = mb.fraction_correct_decreased(z, correct, eta * d1)
            if etas:
                e1, e2 = etas
                total1 = res["total"] / eta
                q = jnp.sum(jnp.where(correct, p, 0.0))
                scale = jnp.maximum(jnp.sum(p * jnp.abs(correct - q) * jnp.abs(d1)),
                                    jnp.finfo(z.dtype).tiny)
                r1 = mb.exact_mass_change(z, correct, e1 * d1) / e1
                r2 = mb.exact_mass_change(z, correct, e2 * d1) / e2
                rich = (e1 * r2 - e2 * r1) / (e1 - e2)
                out[f"err_{upd}"] = jnp.abs(r2 - total1) / scale
                out[f"rich_{upd}"] = jnp.abs(rich - total1) / scale
        out["unsampled_correct_mass"] = jnp.sum(jnp.where(correct & ~sampled, p, 0.0))
        out["distinct"] = jnp.sum(sampled).astype(z.dtype)
        return out

    return jax.vmap(per_n)(jnp.asarray(n_values))


def one_step_sweep(key, config: SweepConfig) -> pd.DataFrame:
    """Run the one-step sweep; long-form frame (setting columns, trial, N, metric columns)."""
    settings = config.settings()
    args = _setting_arrays(settings, config.trials)
    keys = jax.random.split(key, len(args[0]))

    @jax.jit
    def run(keys, *args):
        f = lambda xs: one_trial(xs[0], *xs[1:], vocab_size=config.vocab_size,
                                 n_values=config.n_values, eta=config.eta,
                                 etas=config.first_order_etas)
        return jax.lax.map(f, (keys, *args), batch_size=config.batch_size)

    with jax.enable_x64(True):
        out = jax.device_get(run(keys, *args))
    return _to_frame(out, settings, config.trials, config.n_values)


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
            for t in mb.KEYS:
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
            counts = mb.sample_counts(k, z, n_max, n)
            if upd == "idealised":
                d = mb.idealised_update(z, correct, counts > 0, lr=eta * nf, n=nf)
            else:
                d = mb.sampled_pg_update(z, correct, counts, lr=eta)
            return z + d, mb.exact_mass_change(z, correct, d) < 0

        z, went_down = jax.lax.scan(step, z0, jax.random.split(k_run, steps))
        dlogp = jax.nn.log_softmax(z) - jax.nn.log_softmax(z0)
        down = (dlogp < 0) & correct
        return {"frac_down": jnp.sum(down) / jnp.sum(correct),
                "all_up": ~jnp.any(down),
                "dq": mb.exact_mass_change(z0, correct, z - z0),
                "steps_down": jnp.mean(went_down)}

    return {f"{k}_{upd}": v for upd in UPDATES
            for k, v in jax.vmap(lambda n, upd=upd: run(n, upd))(jnp.asarray(n_values)).items()}


def relaxed_sweep(key, config: SweepConfig) -> pd.DataFrame:
    """Run the relaxed sweep; long-form frame like :func:`one_step_sweep`."""
    settings = config.settings()
    args = _setting_arrays(settings, config.trials)
    keys = jax.random.split(key, len(args[0]))

    @jax.jit
    def run(keys, *args):
        f = lambda xs: relaxed_trial(xs[0], *xs[1:], vocab_size=config.vocab_size,
                                     n_values=config.n_values, eta=config.eta,
                                     steps=config.steps)
        return jax.lax.map(f, (keys, *args), batch_size=config.batch_size)

    with jax.enable_x64(True):
        out = jax.device_get(run(keys, *args))
    return _to_frame(out, settings, config.trials, config.n_values)


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


# ----------------------------------------------------------------------------- figures
def _style(settings: pd.DataFrame):
    """Colour by |C|, line style by family, one panel per Q0."""
    colors = dict(zip(sorted(settings["num_correct"].unique()),
                      ["#1b6ca8", "#d1495b", "#3a8a3f", "#edae49"]))
    fams = list(dict.fromkeys(zip(settings["family"], settings["shape"])))
    styles = dict(zip(fams, ["-", "--", ":", "-."]))
    return colors, styles


def plot_vs_n(summary: pd.DataFrame, metric: str, ylabel: str, *, title: str, hline=None,
              logy=False):
    q0s = sorted(summary["q0"].unique())
    fig, axes = plotting.subplots(2, len(q0s), figsize=(3.3 * len(q0s), 5.6), sharex=True,
                                  sharey=True, squeeze=False)
    colors, styles = _style(summary)
    for i, upd in enumerate(UPDATES):
        for j, q0 in enumerate(q0s):
            ax = axes[i, j]
            sub = summary[(summary["update"] == upd) & (summary.q0 == q0)]
            for (fam, shape, c), g in sub.groupby(["family", "shape", "num_correct"],
                                                  sort=False):
                lab = (f"gauss T={1 / shape:.2g}" if fam == "gauss" else f"zipf s={shape:g}")
                ax.plot(g["N"], g[metric], color=colors[c], ls=styles[(fam, shape)],
                        marker=".", label=f"{lab}, |C|={c}")
            if hline is not None:
                ax.axhline(hline, color="k", lw=0.8, ls=":")
            ax.set_xscale("log", base=2)
            if logy:
                ax.set_yscale("symlog", linthresh=1e-3)
            ax.set_title(f"{UPDATE_LABEL[upd].split(' (')[0]}, Q0={q0:g}")
            if i == 1:
                ax.set_xlabel("rollouts N")
            if j == 0:
                ax.set_ylabel(ylabel)
    axes[0, -1].legend(loc="upper right", fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def plot_terms(summary: pd.DataFrame, settings: list[str]):
    fig, axes = plotting.subplots(2, len(settings), figsize=(3.4 * len(settings), 5.6),
                                  sharex=True, squeeze=False)
    names = {"sampled_correct": "sampled correct", "sampled_wrong": "sampled wrong",
             "unsampled": "unsampled", "total": "total (first order)"}
    for i, upd in enumerate(UPDATES):
        for j, s in enumerate(settings):
            ax = axes[i, j]
            g = summary[(summary["update"] == upd) & (summary.setting == s)]
            scale = g[[f"mean_{t}" for t in ("sampled_correct", "sampled_wrong")]].abs() \
                .to_numpy().max()
            for t, lab in names.items():
                ax.plot(g["N"], g[f"mean_{t}"] / scale, marker=".", label=lab,
                        ls="--" if t == "total" else "-", color="k" if t == "total" else None)
            ax.axhline(0, color="k", lw=0.6)
            ax.set_xscale("log", base=2)
            ax.set_title(f"{UPDATE_LABEL[upd].split(' (')[0]}\n{s}", fontsize=8)
            if i == 1:
                ax.set_xlabel("rollouts N")
            if j == 0:
                ax.set_ylabel("mean term / max sampled term")
    axes[0, 0].legend(fontsize=8)
    fig.suptitle("Mass-balance terms vs N (mean over trials, first order, step eta)",
                 fontsize=10)
    fig.tight_layout()
    return fig


def plot_relaxed(summary: pd.DataFrame):
    """Rows: update; columns: metric after the last step; colour: Q0; style: family, |C|."""
    q0s = sorted(summary["q0"].unique())
    qcol = dict(zip(q0s, ["#d1495b", "#edae49", "#1b6ca8", "#3a8a3f"]))
    combos = list(dict.fromkeys(zip(summary["family"], summary["shape"],
                                    summary["num_correct"])))
    styles = dict(zip(combos, ["-", "--", ":", "-.", (0, (5, 1)), (0, (1, 3))]))
    fig, axes = plotting.subplots(2, 3, figsize=(11, 6), sharex=True, squeeze=False)
    metrics = (("p_all_up", "P(all correct tokens up)"),
               ("frac_correct_down", "fraction of correct tokens down"),
               ("p_mass_down", "P(Q_pos after < before)"))
    for i, upd in enumerate(UPDATES):
        for (fam, shape, c, q0), g in summary[summary["update"] == upd].groupby(
                ["family", "shape", "num_correct", "q0"], sort=False):
            lab = (f"gauss T={1 / shape:.2g}" if fam == "gauss" else f"zipf s={shape:g}")
            for j, (m, _) in enumerate(metrics):
                axes[i, j].plot(g["N"], g[m], color=qcol[q0], ls=styles[(fam, shape, c)],
                                marker=".", label=f"{lab}, |C|={c}, Q0={q0:g}")
        for j, (_, lab) in enumerate(metrics):
            ax = axes[i, j]
            ax.set_xscale("log", base=2)
            ax.set_ylim(-0.03, 1.03)
            ax.set_title(f"{UPDATE_LABEL[upd].split(' (')[0]}: {lab}", fontsize=9)
            ax.set_ylabel("probability" if lab.startswith("P(") else "fraction")
            values = summary[summary["update"] == upd][metrics[j][0]]
            if (values == 0).all():  # say it, so a flat line at 0 is not read as missing data
                ax.text(0.5, 0.12, "0 at every N and setting", transform=ax.transAxes,
                        ha="center", va="center", color="0.4")
            if i == 1:
                ax.set_xlabel("rollouts N")
    axes[0, 2].legend(fontsize=8, loc="center right")   # that panel is mostly empty
    fig.suptitle("Relaxed conditions: several steps, resampling each step (state after the "
                 "last step vs the initial policy)", fontsize=10)
    fig.tight_layout()
    return fig


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
        counts = mb.sample_counts(k_sample, z, n)
        q = jnp.sum(jnp.where(correct, p, 0.0))
        out = {}
        for upd in UPDATES:
            if upd == "idealised":
                total1 = mb.mass_balance(z, correct, counts > 0, lr=n, n=n)["total"]
                d1 = mb.idealised_update(z, correct, counts > 0, lr=n, n=n)
            else:
                total1 = mb.sampled_pg_mass_balance(z, correct, counts, lr=1.0)["total"]
                d1 = mb.sampled_pg_update(z, correct, counts, lr=1.0)
            scale = jnp.maximum(jnp.sum(p * jnp.abs(correct - q) * jnp.abs(d1)),
                                jnp.finfo(z.dtype).tiny)
            exact = jax.vmap(lambda e, d1=d1: mb.exact_mass_change(z, correct, e * d1) / e)(
                jnp.asarray(etas, z.dtype))
            out[upd] = jnp.abs(exact - total1) / scale
        return out

    with jax.enable_x64(True):
        out = jax.device_get(jax.jit(jax.vmap(one))(keys, *args))
    return pd.DataFrame([{"update": u, "eta": e, "max_rel_error": float(np.max(out[u][:, i])),
                              "median_rel_error": float(np.median(out[u][:, i]))}
                         for u in UPDATES for i, e in enumerate(etas)])


def plot_first_order(curve: pd.DataFrame):
    fig, ax = plotting.subplots(figsize=(4.8, 3.4))
    for upd in UPDATES:
        g = curve[curve["update"] == upd]
        (line,) = ax.loglog(g["eta"], g["max_rel_error"], marker="o", label=UPDATE_LABEL[upd])
        ax.loglog(g["eta"], g["median_rel_error"], ls=":", color=line.get_color())
    ax.set_xlabel("step size eta")
    ax.set_ylabel("|exact/eta - three-term total| / scale")
    ax.set_title("Three-term formula vs exact step (float64)\nsolid: max, dotted: median",
                 fontsize=9)
    ax.legend()
    return fig


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


def first_order_claim(df: pd.DataFrame, config: SweepConfig):
    ident = max(float(np.max(np.abs(df[f"total_{u}"] - df[f"first_order_{u}"]) /
                             np.maximum(sum(np.abs(df[f"{t}_{u}"]) for t in mb.TERMS),
                                        1e-300))) for u in UPDATES)
    err = max(float(df[f"err_{u}"].max()) for u in UPDATES)
    rich = max(float(df[f"rich_{u}"].max()) for u in UPDATES)
    e1, e2 = config.first_order_etas
    return claim(
        "mass_balance_first_order",
        "The three-term mass-balance sum equals the first-order change of the correct mass",
        rich, passed=rich < 1e-6 and ident < 1e-10,
        criterion=("max over all trials, N and both updates (float64) of |D - total| / scale "
                   "< 1e-6, D = Richardson limit of exact(eta)/eta from eta="
                   f"{e1:g},{e2:g}, scale = sum_j p_j|c_j - Q||dz_j|; and total = "
                   "sum_j p_j (c_j - Q) dz_j to < 1e-10 relative"),
        setting="theory", paper_ref=REF,
        paper_value="exact first-order identity (derived)",
        reason=(f"plain error at eta={e2:g}: {err:.2g} (O(eta)); identity with the softmax "
                f"derivative: {ident:.2g}; {len(df)} trial-N pairs"))


def p_decrease_claim(summary: pd.DataFrame, update: str, n_max: int):
    """P(dQ<0) clearly positive at N=16 in the hardest setting, then < 1% by a measured N."""
    sub = summary[summary["update"] == update]
    q_min = sub["q0"].min()
    at16 = sub[(sub.q0 == q_min) & (sub.N == 16)].set_index(["vocab_size", "setting"])
    worst = at16["p_decrease"].idxmax()
    p16 = float(at16["p_decrease"].max())
    from scipy import stats
    trials = int(at16.loc[worst, "trials"])
    ci = stats.binomtest(round(p16 * trials), trials).proportion_ci(method="wilson")
    nb = first_n_below(sub, "p_decrease", 0.01).set_index(["vocab_size", "setting"])
    n_worst = float(nb.loc[worst, "n_below"])
    never = nb[~np.isfinite(nb["n_below"])]
    cid = "p_mass_decrease_vanishes" + ("" if update == "idealised" else "_sampled_pg")
    what = "the paper's idealised update" if update == "idealised" else \
        "the realistic sampled policy gradient"
    return claim(
        cid,
        f"P(dQ_pos < 0) after one step of {what} is clearly positive at N=16 for hard prompts "
        "and falls below 1% as N grows",
        n_worst, passed=bool(p16 >= 0.05 and n_worst <= n_max),
        criterion=(f"in the hard setting (Q0={q_min:g}) with the largest P(dQ<0) at N=16: "
                   f"P16 >= 0.05 and P < 0.01 for all N >= measured N, measured N <= {n_max}"),
        setting="toy", paper_ref=REF,
        paper_value="-> 0 as N grows (no numbers public)",
        reason=(f"hardest setting: V={worst[0]}, {worst[1]}, P16={p16:.3f} (95% Wilson CI "
                f"{ci.low:.3f}-{ci.high:.3f}, {trials} trials); P(dQ<0) max over "
                f"all settings at N=4: {sub[sub.N == sub.N.min()].p_decrease.max():.3f}, at "
                f"N=16: {sub[sub.N == 16].p_decrease.max():.3f}, at N={n_max}: "
                f"{sub[sub.N == n_max].p_decrease.max():.3f}; N from which P < 1%, max over "
                f"settings: {nb['n_below'].max():g}; settings never below 1% up to "
                f"N={n_max}: {len(never)}/{len(nb)}"
                + ("" if len(never) == 0 else f" (e.g. V={never.index[0][0]}, "
                   f"{never.index[0][1]})")))


def all_up_claim(relaxed: pd.DataFrame, config: SweepConfig):
    n_max = max(config.n_values)
    big = relaxed[(relaxed.N == n_max) & (relaxed["update"] == "idealised")]
    worst = big.loc[big.p_all_up.idxmin()]
    hard = big[big.q0 == big.q0.min()]
    pg = relaxed[(relaxed.N == n_max) & (relaxed["update"] == "sampled_pg")]
    return claim(
        "all_correct_tokens_increase",
        "With a sufficiently large N the probability of every correct token increases "
        f"(relaxed: {config.steps} steps, eta={config.eta:g}, resampling each step)",
        float(big.p_all_up.min()), passed=bool(big.p_all_up.min() >= 0.99),
        criterion=(f"at N={n_max}, in every relaxed setting (V={config.vocab_size}), the "
                   "fraction of trials where every correct token ends above its initial "
                   "probability >= 0.99 (idealised update)"),
        setting="toy", paper_ref=REF,
        paper_value="all correct tokens increase for large N",
        reason=(f"worst: {worst.setting} (P={worst.p_all_up:.2f}, fraction of correct tokens "
                f"down {worst.frac_correct_down:.2f}); hard prompts (Q0={hard.q0.min():g}) "
                f"min P={hard.p_all_up.min():.2f}; sampled PG min P={pg.p_all_up.min():.2f}. "
                "At full coverage a tiny correct token moves by -p.dz, which is negative when "
                "the correct set is more concentrated than the wrong one "
                "(sum_C p^2 / Q_pos > sum_W p^2 / Q_neg): a softmax effect N cannot remove"))


# ----------------------------------------------------------------------------- experiments
def mass_balance_study(ctx_key, configs: dict, save_figure=None, save_table=None):
    """Run the sweeps of ``configs`` (``FULL``/``QUICK``); returns the frames and claims.

    ``save_figure(fig, name)`` / ``save_table(df, name)``: where outputs go (the experiment
    context, or None in a notebook that just wants the frames).
    """
    one = configs["one_step"]
    df = one_step_sweep(ctx_key(1), one)
    frames = [df]
    summaries = [summarise_one_step(df)]
    if "large_vocab" in configs:
        df_big = one_step_sweep(ctx_key(3), configs["large_vocab"])
        frames.append(df_big)
        summaries.append(summarise_one_step(df_big))
    summary = pd.concat(summaries, ignore_index=True)
    relaxed_cfg = configs["relaxed"]
    relaxed = summarise_relaxed(relaxed_sweep(ctx_key(2), relaxed_cfg))
    curve = first_order_curve(ctx_key(4), one)
    figures = {}
    for v, cfg in [(c.vocab_size, c) for k, c in configs.items() if k != "relaxed"]:
        sub = summary[summary.vocab_size == v]
        tag = "" if v == one.vocab_size else f"_v{v}"
        figures[f"brorl_p_decrease_vs_n{tag}"] = plot_vs_n(
            sub, "p_decrease", "P(dQ_pos < 0)", hline=0.01,
            title="P(correct mass decreases after one step); " + cfg.describe())
        figures[f"brorl_correct_down_vs_n{tag}"] = plot_vs_n(
            sub, "frac_correct_down", "fraction of correct tokens down",
            title="Correct tokens whose probability decreases; " + cfg.describe())
    hard = summary[(summary.q0 == summary.q0.min()) & (summary.vocab_size == one.vocab_size)]
    show = list(hard[(hard.N == 16) & (hard["update"] == "sampled_pg")]
                .sort_values("p_decrease", ascending=False)["setting"].iloc[:2])
    show += [s for s in summary[(summary.q0 == summary.q0.max()) &
                                (summary.num_correct == summary.num_correct.max())]
             ["setting"].unique()[:1]]
    figures["brorl_terms_vs_n"] = plot_terms(summary[summary.vocab_size == one.vocab_size],
                                             show)
    figures["brorl_first_order"] = plot_first_order(curve)
    figures["brorl_relaxed"] = plot_relaxed(relaxed)
    n_max = max(one.n_values)
    claims = [first_order_claim(df, one),
              p_decrease_claim(summary, "idealised", n_max),
              p_decrease_claim(summary, "sampled_pg", n_max),
              all_up_claim(relaxed, relaxed_cfg)]
    if save_figure is not None:
        for name, fig in figures.items():
            save_figure(fig, name)
    if save_table is not None:
        save_table(summary, "brorl_one_step")
        save_table(relaxed, "brorl_relaxed")
        save_table(curve, "brorl_first_order")
    return {"frames": frames, "summary": summary, "relaxed": relaxed, "curve": curve,
                "figures": figures, "claims": claims}


@experiment("brorl_mass_balance", paper=PAPER,
            claims=("mass_balance_first_order", "p_mass_decrease_vanishes",
                    "p_mass_decrease_vanishes_sampled_pg", "all_correct_tokens_increase"),
            default_seeds=16, quick_seeds=4)
def run_mass_balance(ctx):
    """BroRL mass balance: one-step N-sweep (both updates) and relaxed multi-step sweep."""
    import matplotlib.pyplot as plt

    out = mass_balance_study(ctx.key, QUICK if ctx.quick else FULL,
                             save_figure=ctx.save_figure, save_table=ctx.save_table)
    for fig in out["figures"].values():
        plt.close(fig)
    return out["claims"]


# ----------------------------------------------------------------------------- training
SCHEDULE_STAGE = "brorl_schedule"   # registered by rlvr_lab.papers.brorl


@dataclass(frozen=True)
class TrainingStudy:
    """ProRL-style phase 1 at ``n_small`` rollouts, then (a) ``n_small`` or (b) ``n_large``.

    Branch (a) runs ``n_large / n_small`` times longer than ``budget_steps`` steps of (b), so
    the two are also compared at equal numbers of phase-2 rollouts (those of ``budget_steps``
    steps at ``n_large``; ``None`` = all ``phase2_steps``). The bank is token-level: each
    prompt is a softmax
    over ``vocab_size`` answers with ``num_correct`` correct ones; initial correct masses are
    Beta(a, b) draws clipped to ``[min_p0, 1 - min_p0]`` (many very hard prompts).
    """

    num_prompts: int = 64
    vocab_size: int = 256
    num_correct: int = 4
    difficulty: tuple = (0.2, 2.0)
    min_p0: float = 1e-5
    logit_scale: float = 2.0
    phase1_steps: int = 300
    phase2_steps: int = 40
    n_small: int = 16
    n_large: int = 512
    learning_rate: float = 0.2
    budget_steps: int | None = None

    def __post_init__(self):
        for name in ("num_prompts", "phase1_steps", "phase2_steps", "n_small", "n_large"):
            if not (isinstance(getattr(self, name), int) and getattr(self, name) >= 1):
                raise ValueError(f"{name}={getattr(self, name)!r} must be an integer >= 1")
        if self.n_large % self.n_small:
            raise ValueError(f"n_large={self.n_large} must be a multiple of "
                             f"n_small={self.n_small} (equal-budget comparison)")
        if self.budget_steps is not None and not 1 <= self.budget_steps <= self.phase2_steps:
            raise ValueError(f"budget_steps={self.budget_steps!r} must be in "
                             f"[1, phase2_steps={self.phase2_steps}] or None")

    @property
    def budget(self) -> int:
        """Steps of branch (b) whose rollouts branch (a) matches."""
        return self.phase2_steps if self.budget_steps is None else self.budget_steps

    @property
    def ratio(self) -> int:
        return self.n_large // self.n_small

    def configs(self):
        from rlvr_lab.envs.prompt_bank import PromptBankConfig
        from rlvr_lab.train import bandit

        bank = PromptBankConfig(num_prompts=self.num_prompts, vocab_size=self.vocab_size,
                                num_correct=self.num_correct, difficulty_a=self.difficulty[0],
                                difficulty_b=self.difficulty[1], min_p0=self.min_p0,
                                logit_scale=self.logit_scale)
        base = bandit.BanditConfig(bank=bank, batch_size=self.num_prompts,
                                   learning_rate=self.learning_rate, eval_ks=(1, 16))
        s1, s2 = self.phase1_steps, self.phase2_steps
        return {
            "phase1": base.replace(num_steps=s1, num_generations=self.n_small),
            "small": base.replace(num_steps=s1 + max(s2, self.ratio * self.budget),
                                  num_generations=self.n_small),
            "large": base.replace(num_steps=s1 + s2, num_generations=self.n_large,
                                  rollout=SCHEDULE_STAGE,
                                  rollout_options=(("n_small", self.n_small),
                                                   ("switch_step", s1))),
        }


TRAIN_FULL = TrainingStudy()
TRAIN_QUICK = TrainingStudy(phase1_steps=150, phase2_steps=20, budget_steps=5)
FILTER_NS = (4, 8, 16, 32, 64, 128, 256, 512, 1024)


def training_study(key, study: TrainingStudy, num_seeds: int) -> dict:
    """Run phase 1 and both continuations for ``num_seeds`` seeds (same keys: branch (a) and
    (b) share phase 1 exactly). Returns per-run metrics and the saturated policy's exact
    fraction of all-equal groups ``mean_k [p_k^N + (1 - p_k)^N]`` for ``FILTER_NS``."""
    from rlvr_lab.envs import prompt_bank
    from rlvr_lab.train import bandit

    cfgs = study.configs()
    out = {}
    for name in ("small", "large"):
        _, metrics = bandit.train_seeds(cfgs[name], key, num_seeds)
        out[name] = {k: np.asarray(v) for k, v in metrics.items()}
    state, _ = bandit.train_seeds(cfgs["phase1"], key, num_seeds)
    bank = prompt_bank.make_bank(cfgs["phase1"].bank)
    p = np.asarray(jax.vmap(lambda z: prompt_bank.success_probability(z, bank.correct))(
        state.logits), dtype=np.float64)                              # [seeds, K]
    ns = np.asarray(FILTER_NS, dtype=np.float64)
    out["filtered_exact"] = np.mean(p[..., None] ** ns + (1 - p[..., None]) ** ns, axis=1)
    out["saturated_p"] = p
    return out


def training_frame(res: dict, study: TrainingStudy) -> pd.DataFrame:
    """Long-form frame: branch, seed, step, accuracy, cumulative phase-2 rollouts, filtered."""
    frames = []
    for name, n in (("small", study.n_small), ("large", study.n_large)):
        m = res[name]
        seeds, steps = m["accuracy"].shape
        phase2 = np.arange(steps) >= study.phase1_steps
        spent = np.cumsum(np.where(phase2, m["rollouts"], 0), axis=1)
        frames.append(pd.DataFrame({
            "branch": f"N={n}", "seed": np.repeat(np.arange(seeds), steps),
            "step": np.tile(np.arange(steps), seeds), "accuracy": m["accuracy"].ravel(),
            "pass16": m["pass@16"].ravel(), "phase2_rollouts": spent.ravel(),
            "filtered": m["zero_adv_frac"].ravel()}))
    return pd.concat(frames, ignore_index=True)


def plot_training(df: pd.DataFrame, res: dict, study: TrainingStudy):
    fig, axes = plotting.subplots(1, 3, figsize=(12, 3.6))
    s1, s2 = study.phase1_steps, study.phase2_steps
    colors = dict(zip(df["branch"].unique(), ("#1b6ca8", "#d1495b")))
    for branch, g in df.groupby("branch", sort=False):
        acc = g.pivot(index="seed", columns="step", values="accuracy").to_numpy()
        steps = np.arange(acc.shape[1])
        keep = steps < s1 + s2
        plotting.band(axes[0], steps[keep], acc[:, keep], label=branch, color=colors[branch])
        tail = steps >= s1
        spent = g.pivot(index="seed", columns="step", values="phase2_rollouts").to_numpy()[0]
        plotting.band(axes[1], spent[tail] / 1e3, acc[:, tail], label=branch,
                      color=colors[branch])
    axes[0].axvline(s1, color="k", lw=0.8, ls=":")
    axes[0].set_xlabel("step")
    axes[0].set_ylabel("accuracy (mean success probability)")
    axes[0].set_title(f"equal steps: N={study.n_small} for {s1} steps, then split", fontsize=9)
    axes[1].set_xlabel("phase-2 rollouts (thousands)")
    axes[1].set_title("equal rollout budget (phase 2)", fontsize=9)
    filt = res["filtered_exact"]
    plotting.band(axes[2], np.asarray(FILTER_NS), filt, label="exact, saturated policy",
                  color="#555555")
    for branch, g in df[df.step >= s1].groupby("branch", sort=False):
        n = int(branch.split("=")[1])
        per_seed = g[g.step < s1 + s2].groupby("seed")["filtered"].mean().to_numpy()
        axes[2].errorbar([n], [per_seed.mean()], yerr=[per_seed.std()], fmt="s",
                         color=colors[branch], label=f"trainer, phase 2, {branch}")
    axes[2].set_xscale("log", base=2)
    axes[2].set_xlabel("rollouts per prompt N")
    axes[2].set_ylabel("fraction of groups with all-equal rewards")
    axes[2].set_title("groups dynamic sampling would filter", fontsize=9)
    for ax in axes:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def training_claims(df: pd.DataFrame, res: dict, study: TrainingStudy):
    s1, s2 = study.phase1_steps, study.phase2_steps
    acc = {b: g.pivot(index="seed", columns="step", values="accuracy").to_numpy()
           for b, g in df.groupby("branch")}
    small, large = acc[f"N={study.n_small}"], acc[f"N={study.n_large}"]
    end = s1 + s2 - 1
    gain = large[:, end] - small[:, end]                       # paired: same phase 1
    late = small[:, s1 - 1] - small[:, int(0.8 * s1) - 1]      # phase-1 progress, last 20%
    rev = large[:, end] - large[:, s1 - 1]
    b_end = s1 + study.budget - 1                              # same phase-2 rollouts:
    budget_small = small[:, s1 - 1 + study.ratio * study.budget]   # ratio x as many steps
    claims = [claim(
        "large_n_revives_saturated",
        f"After N={study.n_small} training saturates, continuing with N={study.n_large} "
        f"gains more accuracy than continuing with N={study.n_small} (same number of steps)",
        float(gain.mean()), passed=bool(gain.mean() >= 0.01 and np.all(gain > 0)),
        criterion=(f"accuracy(N={study.n_large}) - accuracy(N={study.n_small}) after {s2} "
                   "more steps, paired by seed: mean >= 0.01 and > 0 in every seed"),
        setting="bank", paper_ref=REF,
        paper_value="BroRL revives ProRL-1.5B saturated after 3K steps",
        reason=(f"phase-1 gain over its last 20% of steps: {late.mean():.3f}; accuracy at "
                f"switch {small[:, s1 - 1].mean():.3f}; N={study.n_large} gain in phase 2 "
                f"{rev.mean():.3f}. Equal rollout budget ({study.budget} steps of N="
                f"{study.n_large}): N={study.n_small} reaches {budget_small.mean():.3f} vs N="
                f"{study.n_large} {large[:, b_end].mean():.3f} "
                "(tabular bandit with Adam: progress per step is lr-bound, so more, smaller "
                "batches win per rollout; the paper's compute argument rests on GPU "
                "throughput)"))]
    filt = {b: g[(g.step >= s1) & (g.step <= end)].groupby("seed")["filtered"].mean()
            .to_numpy() for b, g in df.groupby("branch")}
    f_small, f_large = filt[f"N={study.n_small}"], filt[f"N={study.n_large}"]
    ex = res["filtered_exact"].mean(0)
    i16, i_large = FILTER_NS.index(study.n_small), FILTER_NS.index(study.n_large)
    claims.append(claim(
        "fewer_filtered_groups",
        "Large N leaves fewer groups with all-equal rewards (filtered by dynamic sampling)",
        float(f_large.mean()), passed=bool(np.all(f_large < f_small)),
        criterion=(f"fraction of phase-2 groups with all-equal rewards at N={study.n_large} "
                   f"below the N={study.n_small} fraction in every seed"),
        setting="bank", paper_ref=REF,
        paper_value="fewer filtered groups at large N",
        reason=(f"N={study.n_small}: {f_small.mean():.3f}, N={study.n_large}: "
                f"{f_large.mean():.3f} (trainer); exact at the saturated policy: "
                f"{ex[i16]:.3f} vs {ex[i_large]:.3f}")))
    return claims


@experiment("brorl_training", paper=PAPER,
            claims=("large_n_revives_saturated", "fewer_filtered_groups"),
            default_seeds=8, quick_seeds=3)
def run_training(ctx):
    """BroRL on the prompt bank: saturate at N=16, then continue at N=16 vs N=512."""
    import matplotlib.pyplot as plt

    study = TRAIN_QUICK if ctx.quick else TRAIN_FULL
    res = training_study(ctx.key(5), study, ctx.seeds)
    df = training_frame(res, study)
    ctx.save_table(df, "brorl_training")
    fig = plot_training(df, res, study)
    ctx.save_figure(fig, "brorl_training")
    plt.close(fig)
    return training_claims(df, res, study)


# ============================================================================ small model
N_SMALL_LM, N_LARGE_LM = 8, 64
PLATEAU_MARGIN = 0.03      # phase 1 has plateaued: last-segment change within +-0.03 (TOST)


def small_phase1(quick: bool):
    """``tiny_grpo``'s recipe at N=8 (quick: B=16, 24 steps; full: B=32, 100 steps)."""
    rl = tiny_grpo.rl_config(quick)
    if quick:
        return dataclasses.replace(rl, num_prompts=16, steps=24, eval_every=8, eval_problems=64,
                                   eval_samples=4)
    return dataclasses.replace(rl, steps=100, eval_every=10, eval_problems=128, eval_samples=8)


def small_phase2_steps(quick: bool) -> int:
    """Steps of the N=64 continuation (N=8 runs 8x as many: equal rollouts; a multiple of
    phase 1's ``eval_every``, so N=8 is evaluated there)."""
    return 2 if quick else 5


def run_small(key, quick: bool, num_seeds: int, progress=None) -> dict:
    """Phase 1 (N=8 from the SFT base, ``num_seeds`` seeds), then from seed 0's final policy
    (the checkpoint) N=8 and N=64 continuations on ``num_seeds`` paired seeds, plus the
    steady-state seconds per step of each arm (equal wall time) and the mass-balance sweep on
    the checkpoint's tens-digit decisions."""
    import time

    p1 = small_phase1(quick)
    s64 = small_phase2_steps(quick)
    trainer = sequence.Trainer(p1)
    phase1 = sequence.run(p1, jax.random.fold_in(key, 1), num_seeds, trainer=trainer)
    ckpt = brorl_small.seed_slice(phase1.state.policy, 0)
    # N=8 continues with phase 1's compiled functions: the same config (its static fields
    # key the update's compilation), stopped after 8 x s64 steps, a multiple of eval_every
    c8 = p1
    t8 = brorl_small.continue_from(trainer, ckpt)
    c64 = dataclasses.replace(p1, num_generations=N_LARGE_LM, steps=s64, eval_every=s64)
    t64 = sequence.Trainer(c64, base_policy=ckpt)
    arms = {}
    for name, (cfg, tr, stop) in {"N=8": (c8, t8, N_LARGE_LM // N_SMALL_LM * s64),
                                  "N=64": (c64, t64, s64)}.items():
        arms[name] = sequence.run(cfg, jax.random.fold_in(key, 2), num_seeds, trainer=tr,
                                  stop_after=stop)
    seconds = {}
    for name, tr in (("N=8", t8), ("N=64", t64)):   # both compiled: steady-state step time
        state = tr.init_state(num_seeds)
        start = time.perf_counter()
        for i in range(2):
            state, _ = tr.train_step(jax.random.fold_in(key, 3), state, i)
        seconds[name] = (time.perf_counter() - start) / 2
    logits, correct = brorl_small.decision_logits(ckpt, trainer.pool[:64 if quick else 256],
                                                  p1.base)
    sweep = brorl_small.mass_balance_sweep(jax.random.fold_in(key, 4), logits, correct,
                                           SMALL_N_VALUES, trials=16 if quick else 64)
    return dict(phase1=phase1, arms=arms, seconds=seconds, sweep=sweep, logits=logits,
                correct=correct, p1=p1, s64=s64)


SMALL_N_VALUES = (1, 2, 4, 8, 16, 32, 64, 256, 1024)


def small_mass_frame(sweep: dict) -> pd.DataFrame:
    rows = []
    for j, n in enumerate(SMALL_N_VALUES):
        row = {"N": n}
        for update in ("pg", "ideal"):
            exact = sweep[f"{update}_exact"][:, :, j]
            row[f"{update}_p_decrease"] = float((exact < 0).mean())
            for t in mb.TERMS + ("total", "exact"):
                row[f"{update}_{t}"] = float(sweep[f"{update}_{t}"][:, :, j].mean())
        rows.append(row)
    return pd.DataFrame(rows)


def small_figure(res: dict, mass: pd.DataFrame):
    with plotting.house_style():
        fig, axes = plotting.subplots(1, 3, figsize=(15, 4))
        ph = np.asarray(res["phase1"].evals["pass_at"])[:, :, 0]
        plotting.band(axes[0], np.asarray(res["phase1"].evals["step"]), ph.T, label="phase 1, N=8")
        b = res["p1"].num_prompts
        for name, n in (("N=8", N_SMALL_LM), ("N=64", N_LARGE_LM)):
            run = res["arms"][name]
            x = np.asarray(run.evals["step"]) * b * n
            plotting.band(axes[1], x, np.asarray(run.evals["pass_at"])[:, :, 0].T, label=name)
        axes[0].set(xlabel="step", ylabel="held-out pass@1", title="phase 1 (to the checkpoint)")
        axes[1].set(xlabel="phase-2 rollouts", ylabel="held-out pass@1",
                    title="continuing the checkpoint (seed 0 of phase 1)")
        axes[1].legend()
        ax = axes[2]
        ax.plot(mass.N, mass.pg_p_decrease, "o-", label="sampled PG: P(dQ < 0)")
        ax.plot(mass.N, mass.ideal_p_decrease, "s--", label="idealised: P(dQ < 0)")
        ax.set_xscale("log", base=2)
        ax.set(xlabel="N rollouts of the decision token", ylabel="probability",
               title="mass balance on the model's tens-digit distribution")
        ax.legend()
        fig.tight_layout()
    return fig


@experiment("brorl_small", sft_bases=("quick",), paper=PAPER,
            claims=("small_phase1_plateau", "small_large_n_improves_beyond_plateau",
                    "small_large_n_beats_n8_equal_rollouts",
                    "small_large_n_beats_n8_equal_wall_time",
                    "small_mass_decrease_vanishes_sampled_pg"),
            default_seeds=8, quick_seeds=4)
def run_small_experiment(ctx):
    """BroRL on the tiny transformer: N=8 vs N=64 from a plateaued GRPO checkpoint, and the
    mass balance on the model's own token distribution."""
    res = run_small(ctx.key(21), ctx.quick, ctx.seeds)
    mass = small_mass_frame(res["sweep"])
    ctx.save_table(mass, "brorl_small_mass_balance")
    ctx.save_table(pd.concat([r.eval_frame().assign(arm=n) for n, r in res["arms"].items()]),
                   "brorl_small_phase2")
    ctx.save_figure(small_figure(res, mass), "brorl_small")
    p1, s64 = res["p1"], res["s64"]
    ph = np.asarray(res["phase1"].evals["pass_at"])[:, :, 0]
    control = tiny_grpo.control(ph[0], ph[-1], name="phase-1 GRPO N=8 vs SFT base")
    plateau = stats.equivalence(ph[-1], ph[-2], PLATEAU_MARGIN)
    a8 = np.asarray(res["arms"]["N=8"].evals["pass_at"])[:, :, 0]    # evals every s64 steps
    a64 = np.asarray(res["arms"]["N=64"].evals["pass_at"])[:, :, 0]
    beyond = stats.paired_difference(a64[-1], a64[0])
    equal_r = stats.paired_difference(a64[-1], a8[-1])
    ratio = res["seconds"]["N=64"] / res["seconds"]["N=8"]
    # N=8 at the wall time of s64 N=64 steps: its evaluations are every eval_every steps;
    # interpolate
    # in steps, capped at the run's end (8 x s64 steps)
    x = np.asarray(res["arms"]["N=8"].evals["step"], float)
    wall_steps = min(ratio * s64, x[-1])
    a8_wall = np.array([np.interp(wall_steps, x, a8[:, s]) for s in range(a8.shape[1])])
    equal_w = stats.paired_difference(a64[-1], a8_wall)
    nmax = SMALL_N_VALUES[-1]
    p_first, p_last = mass.pg_p_decrease.iloc[0], mass.pg_p_decrease.iloc[-1]
    q0 = float(np.mean(np.sum(np.where(res["correct"], _softmax(res["logits"]), 0), -1)))
    common = dict(setting="small model", paper_ref=REF)
    setting = (f"{ctx.seeds} seeds; phase 1: B={p1.num_prompts}, N=8, {p1.steps} steps; phase "
               f"2 from seed 0's final policy: N=64 x {s64} steps vs N=8 x "
               f"{N_LARGE_LM // N_SMALL_LM * s64} steps; held-out {p1.eval_problems} x "
               f"{p1.eval_samples}; {control.reason}")
    claims = [
        claim("small_phase1_plateau",
              "phase-1 GRPO (N=8) has saturated: held-out pass@1 no longer moves",
              plateau.mean, plateau.equivalent,
              f"paired TOST of the last evaluation minus the one {p1.eval_every} steps before, "
              f"margin {PLATEAU_MARGIN}: equivalent at 5%",
              paper_value="ProRL saturates after ~3K steps", reason=f"{plateau}; {setting}",
              **common),
        claim("small_large_n_improves_beyond_plateau",
              "continuing the saturated checkpoint with N=64 raises held-out pass@1",
              beyond.mean, beyond.above(0),
              f"paired 95% t-interval of N=64's pass@1 after {s64} steps minus at the "
              "checkpoint lies above 0",
              paper_value="continuous improvement beyond the saturation point",
              reason=f"{beyond}; N=8 over {N_LARGE_LM // N_SMALL_LM * s64} steps: "
                     f"{stats.paired_difference(a8[-1], a8[0])}; {setting}", **common),
        claim("small_large_n_beats_n8_equal_rollouts",
              "from the checkpoint N=64 ends above N=8 at equal rollouts",
              equal_r.mean, equal_r.above(0),
              "paired 95% t-interval of pass@1 N=64 - N=8 after the same phase-2 rollouts "
              "lies above 0", paper_value="BroRL (N=512) revives; ProRL (N=16) does not",
              reason=f"{equal_r}; {setting}", **common),
        claim("small_large_n_beats_n8_equal_wall_time",
              "from the checkpoint N=64 ends above N=8 at equal wall time (this machine)",
              equal_w.mean, equal_w.above(0),
              f"paired 95% t-interval of pass@1 N=64 - N=8 at N=64's wall time lies above 0 "
              f"(N=8 read at {wall_steps:.1f} steps, interpolated between evaluations)",
              paper_value="large N nearly doubles generation throughput on GPUs",
              reason=f"{equal_w}; steady-state seconds per step N=8 "
                     f"{res['seconds']['N=8']:.3f}, N=64 {res['seconds']['N=64']:.3f} (ratio "
                     f"{ratio:.2f}; 8 = equal rollouts; on CPU decoding is compute-bound, so "
                     f"large N buys no throughput); {setting}", **common),
        claim("small_mass_decrease_vanishes_sampled_pg",
              "on the transformer's own tens-digit distribution, one sampled policy-gradient "
              "step lowers the correct mass less often as N grows, and almost never at large N",
              p_last, bool(p_last < p_first and p_last < 0.01),
              f"P(exact dQ_pos < 0) over prompts x trials: at N={nmax} below 1% and below N=1's",
              paper_value="-> 0 as N grows (no numbers public)",
              reason="P(dQ<0) sampled PG / idealised by N: " + ", ".join(
                  f"{n}: {a:.3f}/{b:.3f}" for n, a, b in zip(mass.N, mass.pg_p_decrease,
                                                               mass.ideal_p_decrease))
                     + f"; mean unsampled term at N=8 {mass.pg_unsampled.iloc[3]:+.2e} vs "
                       f"total {mass.pg_total.iloc[3]:+.2e}; {res['logits'].shape[0]} decisions "
                       f"of the checkpoint (vocabulary {res['logits'].shape[1]}), mean correct "
                       f"mass {q0:.3f}; exact change over the whole vocabulary, lr 0.01",
              **common),
    ]
    return [claims[0]] + stats.gate(claims[1:4], control) + [claims[4]]


def _softmax(z):
    z = np.asarray(z, np.float64)
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)
