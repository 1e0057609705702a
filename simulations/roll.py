"""ROLL (arXiv:2506.06122): the rollout scheduler's abort, device mappings, and where
colocated or disaggregated GPUs win. The computation lives in ``rlvr_lab.papers.roll``
(``scheduler``, ``engine``, ``mapping``, ``distributed``, ``simulator``).

The small-model part nests seeds in SFT bases of the heavy-tailed search task
(``sft.PRESETS["search"]``; :data:`FULL_PLAN` 3 bases x 2 seeds, one more base while
undecided, up to 4; quick 2 x 2); every arm of a base uses the same key, so the responses are
identical up to the stop. The positive control ``roll_grpo_raises_pass1`` (GRPO trained on
ROLL's batches, quick: 2 steps, full: 20, raises held-out pass@1 over the SFT base, same
evaluation keys before and after) gates the study.

- Abort: DAPO dynamic sampling over ``r = 2`` x B launched groups. The finish-everything filter
  runs every response to its end and keeps B informative groups; ROLL's scheduler aborts the
  in-flight responses once B informative groups are complete. The tokens saved are summed over
  steps.
- Token accounting: for every response of every arm, seed and step, the tokens the decoder
  generated are checked against the scheduler's event model on the finish-everything lengths
  (:func:`rlvr_lab.papers.roll.scheduler.schedule`, with and without the reward scored during
  the next chunk); the batch handed to training against the finish-everything run's
  (completion order) and DAPO's slot-order filter wherever the same groups complete first;
  and the scheduler's invariants.
- Device mappings (4 fake CPU devices in a subprocess started first, so that it runs
  alongside): the colocated mapping and disaggregated ones (generation on some devices,
  scoring and update on the others, weights transferred every step) train the same steps from
  one key; sampled tokens, metrics (:data:`METRIC_TOL`) and parameters
  (:data:`PARAM_REL_TOL`, derivation at the constant) are compared. Quick: 1 step, colocated
  on 2 devices vs 2+2, a freshly initialised tiny transformer updated by a KL term towards
  another one (no SFT, rewards 0: every stage runs, the gradient is the KL's); full: 2 steps,
  2 seeds, colocated on 4 vs 2+2 vs 1+3, GRPO from the search base.
- Colocation crossover (simulator, :mod:`rlvr_lab.papers.roll.simulator`): step time of
  colocated vs disaggregated (one-step-asynchronous) mappings vs number of GPUs and model size.

The claims are declared once below (``CLAIMS``) with their paper values, locations, estimands
and rules; ``figures/claims.csv`` has their verdicts.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd

from rlvr_lab import claims, plotting
from rlvr_lab.experiments import experiment
from rlvr_lab.papers.roll import engine as E
from rlvr_lab.papers.roll import scheduler as S
from rlvr_lab.papers.roll import simulator as SIM
from rlvr_lab.train import bases, sequence, sft
from simulations import tiny_grpo

PAPER = "ROLL"
REF = "arXiv:2506.06122"
OVER_PROVISION = 2.0
ARMS = {  # name -> (RollConfig changes, abort)
    "finish": ({}, False),                           # DAPO, every response to its end
    "roll": ({}, True),                              # ROLL: completion order, abort
    "roll_overlap": ({"chunk": 2, "overlap": True}, True),   # reward scored during next chunk
    "slot_abort": ({"order": "slot"}, True),         # DAPO's slot order, abort once decided
}
METRIC_TOL = 1e-5  # largest |difference| of a training metric (unchanged from before)
# Parameters, relative to the update: ||theta_mapping - theta_first|| / ||theta_first -
# theta_0||. Derivation: a reduction split over devices changes float32 sums by ~1e-7
# relative, so a gradient coordinate of ordinary size changes its Adam step by ~1e-7 of lr;
# but Adam's early steps move each coordinate by about lr * sign(gradient), so a coordinate
# whose gradient is itself at the rounding level can move +-lr either way: a per-parameter
# bound of a fraction of lr is fragile. If a fraction f of the P coordinates flip, the
# difference norm is ~2 lr sqrt(f P) and the update norm ~lr sqrt(P): the ratio is
# ~2 sqrt(f). 0.1 tolerates up to f = 0.25% of coordinates at the rounding level, while one
# real algorithmic difference (another batch, another loss) moves most coordinates
# (ratio ~1). The tokens of every step after the first also test that these differences do
# not change the policy's behaviour.
PARAM_REL_TOL = 0.1
# Four arms over 20 steps per base, each base with its own trainer (and search-task SFT base):
# tiny_grpo's plan (4 x 2 seeds, +2 bases to 6) would cost ~3x the single-base run (177 s at
# 8 seeds); 3 bases x 2 seeds, one more base while undecided (at most 8 seeds) keeps it ~2x.
FULL_PLAN = claims.SeedPlan(bases=3, seeds_per_base=2, batch_bases=1, max_bases=4)
QUICK_PLAN = tiny_grpo.QUICK_PLAN


def rl_config(quick: bool) -> sequence.SequenceRLConfig:
    """``tiny_grpo``'s GRPO settings on the heavy-tailed search task (B=16 quick, 32 full)."""
    base = tiny_grpo.rl_config(quick, base=sft.PRESETS["search"])
    if quick:
        return dataclasses.replace(base, steps=2, num_prompts=16, eval_problems=32,
                                   eval_samples=2)
    return dataclasses.replace(base, steps=20)


def drivers(rl: sequence.SequenceRLConfig, trainer: sequence.Trainer) -> dict:
    return {name: (E.Driver(E.RollConfig(rl, over_provision=OVER_PROVISION, **changes),
                            trainer=trainer), abort)
            for name, (changes, abort) in ARMS.items()}


def step_rows(arms: dict, rounds: dict, step: int, batch_size: int) -> list[dict]:
    """Per (seed, arm): token counts and the batch comparisons against the finish run."""
    rows = []
    for s, full in enumerate(rounds["finish"]):
        lengths = full.mask.sum(-1)
        dapo = np.flatnonzero(S.informative(full.scheduler.rewards))[:batch_size]
        for name, rs in rounds.items():
            r = rs[s]
            cfg = arms[name][0].config
            model = S.schedule(lengths, full.scheduler.rewards, batch_size, order=cfg.order,
                               abort=arms[name][1], granularity=cfg.chunk, lag=cfg.lag)
            same_groups = sorted(r.batch.tolist()) == dapo.tolist()
            used = r.counts["samples_used"]
            rows.append(dict(
                step=step, seed=s, arm=name, **r.counts, t_stop=r.t_stop,
                decided_at=-1 if r.scheduler.decided_at is None else r.scheduler.decided_at,
                same_as_finish=E.same_batch(r, full) if cfg.order == "completion" else None,
                same_groups_as_dapo=same_groups,
                identical_to_dapo=same_groups and E.same_batch(r, full._replace(batch=dapo)),
                shared_with_dapo=len(set(r.batch.tolist()) & set(dapo.tolist())) / batch_size,
                used_length=r.counts["tokens_used"] / used if used else np.nan,
                tokens_exact=bool(np.array_equal(model.scheduler.tokens, r.mask.sum(-1))),
                tokens_error=int(np.max(np.abs(np.asarray(model.scheduler.tokens, np.int64)
                                               - np.asarray(r.mask.sum(-1), np.int64)))),
                invariants_ok=not S.check(r.scheduler, batch_size, lengths),
                max_length=int(lengths.max())))
    return rows


def run_rollouts(rl, trainer, key, num_seeds: int, *, train: bool, progress=lambda x, d: x,
                 heldout: dict | None = None):
    """Every arm's rollouts from one key per step (training on ROLL's batch when ``train``);
    returns the per-(step, seed, arm) table and the last step's rounds. ``heldout``: a dict
    that receives held-out pass@1 ``[S]`` before (``"base"``) and after (``"final"``)
    training, with the same evaluation keys."""
    arms = drivers(rl, trainer)
    roll = arms["roll"][0]
    state = trainer.init_state(num_seeds)
    if heldout is not None:
        heldout["base"] = trainer.evaluate(key, state, rl.steps)[:, 0]
    rows, rounds = [], None
    for step in progress(range(rl.steps), "rollouts"):
        keys = roll.rollout_keys(key, step, num_seeds)
        rounds = {name: d.rollout(keys, state.policy, abort=abort)
                  for name, (d, abort) in arms.items()}
        new = step_rows(arms, rounds, step, rl.num_prompts)
        if train:
            state, metrics = roll.learn(key, state, step, rounds["roll"])
            for row in new:
                if row["arm"] == "roll":
                    row.update(train_pass1=float(metrics["pass1"][row["seed"]]),
                               loss=float(metrics["loss"][row["seed"]]))
        rows += new
    if heldout is not None:
        heldout["final"] = trainer.evaluate(key, state, rl.steps)[:, 0]
    return pd.DataFrame(rows), rounds


def savings(table: pd.DataFrame, arm: str) -> np.ndarray:
    """Per seed: 1 - generated(arm) / generated(finish), summed over steps."""
    gen = table.groupby(["arm", "seed"])["tokens_generated"].sum()
    return (1 - gen.loc[arm] / gen.loc["finish"]).to_numpy()


# ----------------------------------------------------------------------------- device mapping
def start_mapping_check(quick: bool):
    """The 4-fake-device comparison in a subprocess (started early; it runs alongside)."""
    flags = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
    env = dict(os.environ, XLA_FLAGS=flags.strip(), JAX_PLATFORMS="cpu")
    args = ["1", "1", "random", "quick"] if quick else ["2", "2", "search", "full"]
    return subprocess.Popen([sys.executable, "-m", "rlvr_lab.papers.roll.mapping", *args],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish_mapping_check(proc, timeout: float = 900) -> dict:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return {"error": f"timed out after {timeout:.0f} s"}
    if proc.returncode != 0:
        return {"error": err.strip().splitlines()[-1] if err.strip() else f"exit {proc.returncode}"}
    return json.loads(out.strip().splitlines()[-1])


def mapping_errors(result: dict) -> np.ndarray:
    """Per mapping after the first: differing sampled tokens, the largest metric difference
    and the relative parameter difference, each in units of its tolerance (NaN: the subprocess
    failed or compared fewer than two mappings)."""
    maps = list(result.get("mappings", {}).values())[1:]
    if "error" in result or not maps:
        return np.array([np.nan])
    return np.array([[m["token_diffs"], m["max_metric_diff"] / METRIC_TOL,
                      m["param_rel_diff"] / PARAM_REL_TOL] for m in maps]).ravel()


def accounting_errors(table: pd.DataFrame) -> np.ndarray:
    """Token-count errors of every round, and one per mismatched batch or violated invariant
    (0 where all is exact)."""
    roll = table[table.arm == "roll"]
    same_groups = roll["same_groups_as_dapo"].astype(bool)
    return np.concatenate([
        table["tokens_error"].to_numpy(float),
        (~roll["same_as_finish"].astype(bool)).to_numpy(float),
        (~roll["identical_to_dapo"].astype(bool)[same_groups]).to_numpy(float),
        (~table["invariants_ok"].astype(bool)).to_numpy(float)])


# ----------------------------------------------------------------------------- figures
def figure(table: pd.DataFrame, rounds: dict, sim: pd.DataFrame, batch_size: int):
    fig, axes = plotting.subplots(1, 3, figsize=(15, 4.2))
    ax = axes[0]
    parts = ["tokens_used", "tokens_filtered", "tokens_surplus", "tokens_aborted"]
    mean = table.groupby("arm")[parts].mean().loc[list(ARMS)]
    bottom = np.zeros(len(mean))
    labels = {"finish": "finish\neverything", "roll": "ROLL\nabort", "roll_overlap":
              "ROLL abort,\nreward overlap", "slot_abort": "slot-order\nabort"}
    for part in parts:
        ax.bar([labels[a] for a in mean.index], mean[part], bottom=bottom,
               label=part.replace("tokens_", ""))
        bottom += mean[part].to_numpy()
    ax.set(ylabel="tokens per seed and step", title=f"where the generated tokens go "
                                                    f"(B={batch_size}, r={OVER_PROVISION:g})")
    ax.legend()
    ax = axes[1]
    full, roll = rounds["finish"][0], rounds["roll"][0]
    done = full.scheduler.t_complete
    informative = S.informative(full.scheduler.rewards)
    ax.hist([done[informative], done[~informative]], bins=np.arange(done.max() + 2) + 0.5,
            stacked=True, label=["informative group", "all-equal group"])
    if roll.scheduler.decided_at is not None:
        ax.axvline(roll.scheduler.decided_at, color="k", ls="--",
                   label=f"B-th informative group: abort (step {roll.scheduler.decided_at})")
    ax.set(xlabel="decode step at which the group is complete (rewarded)", ylabel="groups",
           title="seed 0, last step: group completion times")
    ax.legend()
    ax = axes[2]
    for i, (model, g) in enumerate(sim.groupby("model", sort=False)):
        g = g.sort_values("devices")
        ax.plot(g["devices"], g["async_speedup"], "o-", color=f"C{i}", label=f"{model} async")
        ax.plot(g["devices"], g["sync_speedup"], "s:", color=f"C{i}", alpha=0.6,
                label=f"{model} sync")
    ax.axhline(1, color="0.4", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set(xlabel="GPUs", ylabel="colocated / disaggregated step time",
           title="disaggregated wins above 1 (simulator)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- claims
_MAPPING_VALUE = ("AutoDeviceMapping assigns each stage's cluster to device sets; the mapping "
                  "changes speed, not the algorithm")
CLAIMS = (
    claims.Declared(
        "roll_grpo_raises_pass1", control=True,
        statement="GRPO trained on ROLL's batches raises held-out pass@1 over the SFT base (the "
                  "study's positive control)",
        paper_value=tiny_grpo.RL_OVER_SFT_VALUE,
        paper_ref=tiny_grpo.RL_OVER_SFT_REF,
        estimand="held-out pass@1 after training minus the SFT base's (same evaluation keys), "
                 "per seed", unit="pass@1", rule="superiority", threshold=0.0),
    claims.Declared(
        "roll_abort_saves_tokens",
        statement="aborting in-flight requests once enough informative groups are complete "
                  "saves generated tokens (the batch stays the one finish-everything would "
                  "hand to training: roll_token_accounting_exact)",
        paper_value="the scheduler stops generating for a batch once enough samples are "
                    "collected (no token figure in the abstract)",
        paper_ref=(f"{REF} Sec. 4.3 (Sample-level Rollout Lifecycle Control, Abort Request); "
                   "Sec. 4.1 (Rollout Scheduler); authors' code "
                   "roll/distributed/scheduler/generate_scheduler.py, DynamicSamplingScheduler"),
        estimand="1 - generated tokens (ROLL abort) / generated tokens (finish everything), "
                 "summed over steps, per seed", unit="share of tokens",
        rule="superiority", threshold=0.0,
        gated=False),
    claims.Declared(
        "roll_token_accounting_exact",
        statement="the generated, aborted and wasted tokens of every response are counted "
                  "exactly, and aborting hands training the batch finish-everything would",
        paper_value="per-sample lifecycle management (queued, running, finished, aborted)",
        paper_ref=(f"{REF} Sec. 4.3 (Sample-level Rollout Lifecycle Control, Abort Request); "
                   "Sec. 4.1 (Rollout Scheduler); authors' code "
                   "roll/distributed/scheduler/generate_scheduler.py, DynamicSamplingScheduler"),
        estimand="per round: |decoder tokens - scheduler event model| (largest over responses);"
                 " 1 per batch differing from finish-everything (or from DAPO's slot-order "
                 "filter where the same groups complete first) or violated invariant",
        unit="tokens or mismatches", rule="exact", direction="<", threshold=0.5,
        gated=False),
    claims.Declared(
        "roll_device_mappings_identical",
        statement="placing generation, scoring and update on different device sub-meshes "
                  "(colocated or disaggregated) trains identically for a fixed key",
        paper_value=_MAPPING_VALUE,
        paper_ref=(f"{REF} Sec. 4.1 (AutoDeviceMapping and Resource Pool); Sec. 4.3 "
                   "(User-defined Device Mapping)"),
        estimand="per disaggregated mapping vs the colocated one: differing sampled tokens; "
                 f"largest metric difference / {METRIC_TOL:g}; ||parameter difference|| / "
                 f"||update|| / {PARAM_REL_TOL:g}", unit="multiples of the tolerance",
        rule="exact", direction="<", threshold=1.0,
        note="float rounding of sums split over devices is the only expected difference",
        gated=False),
    claims.Declared(
        "roll_colocation_crossover", setting="simulator",
        statement="colocating all stages wins on few GPUs and disaggregating generation from "
                  "training wins on many, with a crossover inside the scanned range",
        paper_value="colocation and disaggregation are both supported; which is faster "
                    "depends on the cluster (no crossover figure in the abstract)",
        paper_ref=(f"{REF} Sec. 3.1 (colocation or disaggregation); Sec. 4.3 "
                   "(User-defined Device Mapping)"),
        estimand="per model size: 0 when colocated is faster at the smallest D where it fits "
                 "and disaggregated (one-step asynchronous, best split) is faster from some D "
                 "on within the scan, else 1", unit="model sizes without a crossover",
        rule="exact", direction="<", threshold=0.5,
        gated=False),
)


# ----------------------------------------------------------------------------- experiment
@experiment("roll", sft_bases=("search",), paper=PAPER, setting="small model", claims=CLAIMS,
            default_seeds=8, quick_seeds=4, plan=FULL_PLAN, quick_plan=QUICK_PLAN)
def run(ctx):
    """ROLL: dynamic sampling that aborts in-flight requests, device mappings on
    jax.sharding, and the colocated/disaggregated crossover."""
    rl = rl_config(ctx.quick)
    if not ctx.quick:
        sft.load_or_train(rl.base, verbose=False)    # the subprocess uses it (full mode)
    # quick: the subprocess needs no SFT base (random policy, KL update): it runs alongside
    mapping_proc = start_mapping_check(ctx.quick)
    key, per_base = ctx.stream("rl"), ctx.plan.seeds_per_base
    devices = (2, 4, 8, 16) if ctx.quick else (2, 4, 8, 16, 32, 64)
    tables, last, once = [], {}, {}

    def measure(base_ids, open_ids):
        numbers = []
        for b in base_ids:
            rl_b = bases.with_base(rl, b)
            heldout: dict = {}
            table, rounds = run_rollouts(rl_b, sequence.Trainer(rl_b), bases.base_key(key, b),
                                         per_base, train=True, progress=ctx.progress,
                                         heldout=heldout)
            last.setdefault("rounds", rounds)
            tables.append(table.assign(base=b, seed=table.seed + b * per_base))
            numbers.append({"roll_grpo_raises_pass1": heldout["final"] - heldout["base"],
                            "roll_abort_saves_tokens": savings(table, "roll")})
        labels = bases.labels(base_ids, per_base)
        out = claims.nested_by_base(numbers, labels, [
            c for c in ("roll_grpo_raises_pass1", "roll_abort_saves_tokens") if c in open_ids])
        if "roll_token_accounting_exact" in open_ids:
            out["roll_token_accounting_exact"] = claims.seeds(accounting_errors(
                pd.concat(tables, ignore_index=True)))
        if "roll_colocation_crossover" in open_ids:
            workload = SIM.default_workload(128 if ctx.quick else 512)
            models = ("1.5b", "4b", "8b") if ctx.quick else tuple(SIM.MODEL_PARAMS)
            once["sim"] = SIM.sweep(models, devices, workload,
                                    grid=SIM.SPLIT_GRID if ctx.quick else None)
            cross = SIM.crossover(once["sim"])
            out["roll_colocation_crossover"] = claims.seeds([
                0.0 if c["colocated_wins_smallest"] and c["from_devices"] is not None else 1.0
                for c in cross.values()])
        if "roll_device_mappings_identical" in open_ids:
            once["mapping"] = finish_mapping_check(mapping_proc)
            out["roll_device_mappings_identical"] = claims.seeds(mapping_errors(once["mapping"]))
        return out

    try:
        decided, _ = ctx.sequential(measure)
    finally:
        if mapping_proc.poll() is None:
            mapping_proc.kill()
    table, sim, mapping = pd.concat(tables, ignore_index=True), once["sim"], once["mapping"]
    ctx.save_table(table, "roll_rollouts")
    ctx.save_table(sim, "roll_simulator")
    if "mappings" in mapping:
        ctx.save_table(pd.DataFrame([dict(mapping=k, **{kk: vv for kk, vv in v.items()
                                                         if not isinstance(vv, (dict, list))})
                                     for k, v in mapping["mappings"].items()]), "roll_mappings")
    ctx.save_figure(figure(table, last["rounds"], sim, rl.num_prompts), "roll")
    region = ", ".join(f"{m}: from {c['from_devices']} GPUs" if c["from_devices"] else
                       f"{m}: never" for m, c in SIM.crossover(sim).items())
    return [dataclasses.replace(c, measured_text=region) if c.id == "roll_colocation_crossover"
            else c for c in decided]
