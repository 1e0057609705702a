"""The rollout-system studies' sweeps on the simulator (``simulations/rollout_systems.py``).

Each function runs one paper's knob over the simulator (:mod:`~rlvr_lab.papers.systems.policies`,
:mod:`~rlvr_lab.papers.systems.echo`, :mod:`~rlvr_lab.papers.systems.agents`) and returns a
long-form table (one row per setting and seed); :func:`april_seed_numbers` and friends reduce a
table to the per-seed numbers the experiments' declared claims are decided on. The length
laws, prices and latencies here are our assumptions (documented defaults of the cost model),
not the papers' hardware.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from rlvr_lab.envs.prompt_bank import PromptBankConfig
from rlvr_lab.papers.systems import agents, echo, learning
from rlvr_lab.papers.systems.lengths import LogNormal
from rlvr_lab.papers.systems.policies import Workload, run_async, run_partial, run_sync
from rlvr_lab.train.bandit import BanditConfig

# ----------------------------------------------------------------------------- APRIL

TAILS = {   # one-parameter family: log-normal, median 1500 tokens, truncated at 8192
    "light (σ=0.3)": LogNormal(1500, 0.3, 8192),
    "medium (σ=0.6)": LogNormal(1500, 0.6, 8192),
    "heavy (σ=0.9, 3% at cap)": LogNormal(1500, 0.9, 8192),
}
HEAVY = ("medium (σ=0.6)", "heavy (σ=0.9, 3% at cap)")


def april_sweep(quick: bool, seeds: int, ratios=None) -> pd.DataFrame:
    """Throughput of sync / APRIL / drop for every tail law and over-provisioning ratio."""
    ratios = ratios or ((1.5, 2.0, 3.0) if quick else (1.25, 1.5, 2.0, 3.0, 4.0))
    # quick: 256 responses per step on 2 GPUs; full: 512 on 4 (same load per GPU)
    n_groups, workers, steps = (32, 2, 6) if quick else (64, 4, 12)
    rows = []
    for tail, law in TAILS.items():
        wl = Workload(n_groups=n_groups, group_size=8, prompt_len=512, lengths=law)
        for seed in range(seeds):
            base = run_sync(seed, wl, n_workers=workers, steps=steps).summary()
            rows.append(dict(law=tail, seed=seed, r=1.0, policy="sync", **_num(base)))
            for r in ratios:
                for mode in ("april", "drop"):
                    s = run_partial(seed, wl, n_workers=workers, steps=steps,
                                    over_provision=r, mode=mode).summary()
                    rows.append(dict(law=tail, seed=seed, r=r, policy=mode, **_num(s)))
    df = pd.DataFrame(rows)
    sync = df[df.policy == "sync"].set_index(["law", "seed"])
    for col in ("rollout_throughput", "effective_throughput"):
        base = [sync.loc[(t, s), col] for t, s in zip(df["law"], df["seed"])]
        df[col + "_gain"] = df[col].to_numpy() / np.asarray(base) - 1
    return df


def _num(summary: dict) -> dict:
    """The numeric entries of a run summary (drops lists, None and the policy name)."""
    return {k: v for k, v in summary.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)}



APRIL_R = 2.0   # the over-provisioning ratio of all the authors' scripts


def april_seed_numbers(df: pd.DataFrame, r: float = APRIL_R) -> pd.DataFrame:
    """Per seed (rows, seed order): APRIL's rollout-throughput gain over sync at ratio ``r``
    for each tail law (columns named as :data:`TAILS`), the mean over the two heavy laws
    (``heavy_mean``), the smaller of the two successive increases light -> medium -> heavy
    (``min_step``), and the off-policy token fraction of the medium tail (``off_policy``)."""
    at = df[(df.policy == "april") & (df.r == r)]
    gain = at.pivot(index="seed", columns="law", values="rollout_throughput_gain")[list(TAILS)]
    off = at.pivot(index="seed", columns="law", values="off_policy_token_fraction")
    ordered = gain.to_numpy()
    out = gain.copy()
    out["heavy_mean"] = gain[list(HEAVY)].mean(axis=1)
    out["min_step"] = np.diff(ordered, axis=1).min(axis=1)
    out["off_policy"] = off[HEAVY[0]]
    return out.sort_index()


# ----------------------------------------------------------------------------- AReaL
ETAS = (0, 1, 2, 4, 8, 16)


AREAL_PAPER = 2.57          # the paper's "up to 2.57x"
AREAL_WINDOW = 1.25         # pass: best speed-up within [2.57/1.25, 2.57*1.25]
AREAL_LAW = HEAVY[1]        # the stated default: reasoning responses, heavy tail


def areal_sweep(quick: bool, seeds: int, etas=ETAS, law: str = AREAL_LAW) -> pd.DataFrame:
    """Async (best generation/training GPU split) vs colocated sync at equal GPUs, per eta."""
    total = 4 if quick else 8
    n_groups, steps = (32, 10) if quick else (64, 20)
    splits = [(total // 2, total // 2), (3 * total // 4, total // 4)]
    wl = Workload(n_groups=n_groups, group_size=8, prompt_len=512, lengths=TAILS[law])
    rows = []
    for seed in range(seeds):
        sync = run_sync(seed, wl, n_workers=total, steps=steps // 2).summary()
        rows.append(dict(seed=seed, eta=-1, policy="sync", gen=total, train=total, **_num(sync)))
        for eta in etas:
            for gen, train in splits:
                run = run_async(seed, wl, n_workers=gen, train_gpus=train, steps=steps, eta=eta)
                s = run.summary()
                s.pop("eta")
                rows.append(dict(seed=seed, eta=eta, policy="async", gen=gen, train=train,
                                 over_eta=float(np.mean(np.concatenate(
                                     run.staleness[run._first():]) > eta)),
                                 **_num(s)))
    df = pd.DataFrame(rows)
    sync_t = df[df.policy == "sync"].set_index("seed")["time_per_step"]
    df["speedup"] = [sync_t[r.seed] / r.time_per_step for r in df.itertuples()]
    return df.assign(law=law)


def areal_sensitivity(quick: bool, seeds: int, done: pd.DataFrame | None = None) -> pd.DataFrame:
    """The simulator's sensitivity: best speed-up over eta <= 8 and the splits, per length law
    (the one assumption the speed-up depends on most: how long the tail of responses is).
    ``done``: an :func:`areal_sweep` already run for one law (reused, not rerun)."""
    rows = []
    for law in TAILS:
        sweep = (done if done is not None and law in set(done.law) else
                 areal_sweep(quick, seeds, etas=tuple(e for e in ETAS if e <= 8), law=law))
        best = areal_best(sweep[sweep.eta <= 8])
        top = best.loc[best.speedup.idxmax()]
        rows.append(dict(law=law, speedup=float(top.speedup), eta=int(top.eta),
                         gen=int(top.gen), train=int(top.train)))
    out = pd.DataFrame(rows)
    low, high = AREAL_PAPER / AREAL_WINDOW, AREAL_PAPER * AREAL_WINDOW
    return out.assign(in_window=(out.speedup >= low) & (out.speedup <= high))


def areal_best(df: pd.DataFrame) -> pd.DataFrame:
    """Per eta, the GPU split with the best mean speed-up."""
    a = df[df.policy == "async"].groupby(["eta", "gen", "train"]).mean(numeric_only=True)
    return a.loc[a.groupby(level="eta")["speedup"].idxmax()].reset_index()



def areal_seed_numbers(df: pd.DataFrame, max_eta: int = 8) -> tuple[pd.Series, pd.DataFrame]:
    """The configuration (eta <= ``max_eta``, GPU split) with the best mean speed-up, and per
    seed its speed-up; and, per eta at its best split, each seed's fraction of consumed
    samples with staleness above eta. Returns ``(best row, per-seed frame)`` where the frame
    has one row per (eta, seed) with ``speedup`` at the best configuration broadcast by seed."""
    best = areal_best(df[df.eta <= max_eta])
    top = best.loc[best.speedup.idxmax()]
    a = df[df.policy == "async"]
    at_top = a[(a.eta == top.eta) & (a.gen == top.gen) & (a.train == top.train)]
    splits = areal_best(df)[["eta", "gen", "train"]]
    over = a.merge(splits, on=["eta", "gen", "train"])[["eta", "seed", "over_eta"]]
    speed = at_top.set_index("seed")["speedup"]
    return top, over.assign(speedup=over.seed.map(speed))


# ----------------------------------------------------------------------------- ECHO-2
ECHO_WORKLOAD = Workload(n_groups=32, group_size=8, prompt_len=256,
                         lengths=LogNormal(600, 0.6, 4096))
ECHO_TRAINER = echo.TRAINER_4B          # ~4B model, as in the paper's smaller runs
LEARNER_GPUS = 2
POOL = {"h100": 8, "a100": 8, "l40s": 8, "rtx4090": 32}


def echo_measured(seed=0) -> dict:
    return {k: echo.measure_worker(seed, w, ECHO_WORKLOAD)
            for k, w in echo.WORKER_TYPES.items()}


# the (workers, S) grid of the capacity claims, and the learner steps simulated per cell
ECHO_WORKER_COUNTS = (2, 4, 8, 16)
ECHO_STALENESS_BOUNDS = (0, 1, 2, 4, 8)
ECHO_SIM_STEPS = 20


def echo_utilisation_sweep(quick: bool, seeds: int, measured: dict, counts=None,
                           bounds=None) -> pd.DataFrame:
    """Simulated vs predicted learner utilisation over worker counts and staleness bounds.

    The grid and the simulated length are the same in quick and full runs (``quick`` is
    kept for the call signature): the capacity claims take the largest error over the grid,
    so a smaller quick grid would test an easier claim (it passed in quick and failed in
    full, on the cells with 16 workers that the quick grid left out)."""
    del quick
    counts = counts or ECHO_WORKER_COUNTS
    bounds = bounds or ECHO_STALENESS_BOUNDS
    steps = ECHO_SIM_STEPS
    t_train = echo.learner_step_time(ECHO_WORKLOAD, ECHO_TRAINER, LEARNER_GPUS)
    b_tok = echo.batch_decode_tokens(ECHO_WORKLOAD)
    net = echo.Network()
    rows = []
    for n in counts:
        active = [echo.WORKER_TYPES["rtx4090"]] * n
        for S in bounds:
            refined, _, kept = echo.predict_for_refined(active, measured, ECHO_WORKLOAD,
                                                        t_train, net, ECHO_TRAINER, S)
            bound = echo.predict_for(active, measured, t_train, b_tok, net, ECHO_TRAINER, S)
            for seed in range(seeds):
                s = echo.simulate(seed, active, ECHO_WORKLOAD, trainer=ECHO_TRAINER,
                                  learner_gpus=LEARNER_GPUS, staleness_bound=S,
                                  steps=steps).summary()
                rows.append(dict(workers=n, S=S, seed=seed,
                                 simulated=1 - s["trainer_idle_fraction"],
                                 refined=refined, bound=bound, kept_pred=kept,
                                 dropped_groups=s["dropped_groups"],
                                 mean_staleness=s["mean_staleness"],
                                 time_per_step=s["time_per_step"]))
    return pd.DataFrame(rows)


# the rental price of the consumer GPU (RTX 4090) is the assumption the cost claim rests on:
# multiples of the assumed $0.34/h, and the plausible band of marketplace prices (x0.5-x2)
PRICE_MULTIPLIERS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
PRICE_BAND = (0.5, 2.0)
ECHO_MIN_REDUCTION, ECHO_MIN_UTIL = 0.2, 0.9


def echo_cost(seed: int, measured: dict, quick: bool, S: int = 6,
              consumer_price: float = 1.0) -> pd.DataFrame:
    """Cost per step of cost-aware vs throughput-first activation (same target utilisation);
    ``consumer_price`` multiplies the RTX 4090's assumed rental price."""
    types = dict(echo.WORKER_TYPES)
    types["rtx4090"] = dataclasses.replace(
        types["rtx4090"], price_per_hour=types["rtx4090"].price_per_hour * consumer_price)
    pool = [types[k] for k, n in POOL.items() for _ in range(n)]
    net = echo.Network()
    rows = []
    for order in ("cost", "throughput"):
        active, pred = echo.provision(pool, measured, ECHO_WORKLOAD, ECHO_TRAINER, LEARNER_GPUS,
                                      net, S, order=order, target=0.95)
        t_train = echo.learner_step_time(ECHO_WORKLOAD, ECHO_TRAINER, LEARNER_GPUS)
        refined = echo.predict_for_refined(active, measured, ECHO_WORKLOAD, t_train, net,
                                           ECHO_TRAINER, S)[0]
        s = echo.simulate(seed, active, ECHO_WORKLOAD, trainer=ECHO_TRAINER,
                          learner_gpus=LEARNER_GPUS, staleness_bound=S,
                          steps=10 if quick else 20).summary()
        mix = pd.Series([w.name for w in active]).value_counts().to_dict()
        rows.append(dict(order=order, consumer_price=consumer_price, workers=len(active),
                         mix=str(mix), predicted_bound=pred,
                         predicted_refined=refined, simulated=1 - s["trainer_idle_fraction"],
                         time_per_step=s["time_per_step"], price_per_hour=s["price_per_hour"],
                         cost_per_step=s["cost_per_step"]))
    return pd.DataFrame(rows)


def echo_cost_curve(seed: int, measured: dict, quick: bool, S: int = 6,
                    multipliers=PRICE_MULTIPLIERS) -> pd.DataFrame:
    """Per consumer-price multiple: cost reduction of cost-aware over throughput-first
    activation and the cost-aware set's simulated utilisation."""
    rows = []
    for m in multipliers:
        c = echo_cost(seed, measured, quick, S, consumer_price=m).set_index("order")
        rows.append(dict(consumer_price=m, consumer_price_per_hour=m * echo.WORKER_TYPES[
            "rtx4090"].price_per_hour, mix=c.loc["cost", "mix"],
            reduction=float(1 - c.loc["cost", "cost_per_step"]
                            / c.loc["throughput", "cost_per_step"]),
            simulated=float(c.loc["cost", "simulated"])))
    out = pd.DataFrame(rows)
    return out.assign(holds=(out.reduction >= ECHO_MIN_REDUCTION)
                      & (out.simulated >= ECHO_MIN_UTIL))


# ----------------------------------------------------------------------------- WebGym
STATED_LATENCY_S = 5.0   # median browser step (page load + screenshot), fixed before running
# the plausible range of that assumption (fast static pages .. slow dynamic sites), stated
# before running: the claim is decided over this band, not at one assumed value
LATENCY_BAND_S = (2.0, 10.0)
WEBGYM_RANGE = (4 * 0.8, 5 * 1.2)   # the paper's 4-5x, +-20%


def webgym_sweep(quick: bool, seeds: int, latencies=None, episodes=None) -> pd.DataFrame:
    """Async / naive episodes per second for each median environment latency."""
    latencies = latencies or ((0.3, 1.0, 2.0, 3.0, 5.0, 10.0, 30.0) if quick else
                              (0.1, 0.3, 1.0, 2.0, 3.0, 5.0, 7.0, 10.0, 20.0, 30.0, 60.0))
    episodes = episodes or (192 if quick else 512)
    rows = []
    for med in latencies:
        wl = agents.AgentWorkload(env=agents.Latency(med, 0.8, 20 * med))
        for seed in range(seeds):
            a = agents.run_agents(seed, wl, n_episodes=episodes, mode="async")
            b = agents.run_agents(seed, wl, n_episodes=episodes, mode="naive")
            rows.append(dict(latency=med, seed=seed, speedup=a["episodes_per_s"] /
                             b["episodes_per_s"], gpu_busy_async=a["gpu_busy_fraction"],
                             gpu_busy_naive=b["gpu_busy_fraction"]))
    return pd.DataFrame(rows)



def band_share(values: pd.Series, holds: pd.Series, band) -> tuple[float, str]:
    """A claim that is a curve over one assumption, read over the assumption's plausible
    ``band``: ``(share of the band's grid points where it holds, region text)``; NaN when no
    grid point lies in the band. The experiments decide the share with a declared rule
    (pass when it holds on the whole band, fail when nowhere in it)."""
    inside = (values >= band[0]) & (values <= band[1])
    share = float(holds[inside].mean()) if inside.any() else float("nan")
    where = [f"{v:g}" for v in values[holds]]
    return share, ("holds at " + ", ".join(where) if where else "holds nowhere")


# ----------------------------------------------------------------------------- learning
LEARN_ETAS = ETAS
ECHO_BOUNDS = (0, 2, 6, 11)
RING = 16


def simulated_staleness(quick: bool) -> tuple[np.ndarray, pd.DataFrame]:
    """Staleness distributions [D, RING+1]: AReaL at each η, then ECHO-2 at each S."""
    steps = 16 if quick else 32
    wl = Workload(n_groups=32, group_size=8, prompt_len=512, lengths=TAILS[HEAVY[1]])
    rows, dists = [], []
    for eta in LEARN_ETAS:   # generation-rich split (3 gen : 1 train): staleness reaches η
        run = run_async(0, wl, n_workers=3, train_gpus=1, steps=steps, eta=eta)
        dists.append(learning.staleness_distribution(run.staleness_counts(), RING))
        rows.append(dict(system="AReaL", bound=eta, **_num(run.summary())))
    for S in ECHO_BOUNDS:
        run = echo.simulate(0, [echo.WORKER_TYPES["rtx4090"]] * 9, ECHO_WORKLOAD,
                            trainer=ECHO_TRAINER, learner_gpus=LEARNER_GPUS,
                            staleness_bound=S, steps=steps)
        dists.append(learning.staleness_distribution(run.staleness_counts(), RING))
        rows.append(dict(system="ECHO-2", bound=S, **_num(run.summary())))
    return np.stack(dists), pd.DataFrame(rows)


def learning_config(quick: bool) -> learning.StaleConfig:
    bank = PromptBankConfig(num_prompts=64, vocab_size=16, difficulty_a=1.0, difficulty_b=3.0)
    base = BanditConfig(bank=bank, steps=100, num_prompts=32,
                        num_generations=8, num_iterations=1, num_minibatches=4,
                        learning_rate=0.05, eval_ks=(1,))
    return learning.StaleConfig(base, "decoupled", RING)

