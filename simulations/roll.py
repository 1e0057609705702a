"""ROLL (arXiv:2506.06122): the rollout scheduler's abort, device mappings, and where
colocated or disaggregated GPUs win.

Three claims, each computed here (``rlvr_lab.papers.roll``):

- ``roll_abort_saves_tokens`` (small model, heavy-tailed search task, ``sft.PRESETS["search"]``):
  DAPO dynamic sampling over ``r = 2`` x B launched groups. The finish-everything filter runs
  every response to its end and keeps B informative groups; ROLL's scheduler aborts the
  in-flight responses as soon as B informative groups are complete. Same key for both, so the
  responses are identical up to the stop. measured = mean over seeds of the share of generated
  tokens saved. Passes when its 95% t-interval lies above 0 *and* the batch handed to training
  equals the finish-everything run's batch (same groups, identical tokens, log-probs and
  rewards) at every (seed, step) when both pick in completion order, *and* equals DAPO's
  slot-order filter at every (seed, step) where the same groups complete first. Quick mode
  measures rollouts of the SFT base at 3 steps (no update); full mode trains 20 GRPO steps on
  ROLL's batches and compares at every step.
- ``roll_token_accounting_exact``: the tokens the decoder actually generated per response
  (aborted ones included) equal the scheduler's event model on the finish-everything lengths
  (:func:`rlvr_lab.papers.roll.scheduler.schedule`), for every response of every round, with
  and without the reward scored during the next chunk (``overlap``).
- ``roll_device_mappings_identical`` (small model, 4 fake CPU devices in a subprocess started
  first, so that it runs alongside): the colocated mapping and disaggregated ones (generation
  on some devices, scoring and update on the others, weights transferred every step) train
  the same steps from one key; sampled tokens must be identical and every metric within 1e-5
  and every parameter within 5% of a learning-rate step of the first mapping's (float noise of
  sums split over devices). Quick: 1 step, colocated on 2 devices vs 2+2, a freshly
  initialised tiny transformer updated by a KL term towards another one (no SFT, rewards 0:
  every stage runs, the gradient is the KL's); full: 2 steps, 2 seeds, colocated on 4 vs 2+2
  vs 1+3, GRPO from the search base.
- ``roll_colocation_crossover`` (simulator): step time of colocated vs disaggregated mappings
  vs number of GPUs and model size (:mod:`rlvr_lab.papers.roll.simulator`). measured = the
  largest crossover device count over model sizes; passes when for every model colocated wins
  at the smallest feasible D and one-step-asynchronous disaggregation wins from some D on
  within the scan (a crossover inside the measured range).
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd

from rlvr_lab import plotting, stats
from rlvr_lab.experiments import claim, experiment
from rlvr_lab.papers.roll import engine as E
from rlvr_lab.papers.roll import scheduler as S
from rlvr_lab.papers.roll import simulator as SIM
from rlvr_lab.train import sequence, sft
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
METRIC_TOL = 1e-5
PARAM_TOL = 0.05   # x learning rate


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
                invariants_ok=not S.check(r.scheduler, batch_size, lengths),
                max_length=int(lengths.max())))
    return rows


def run_rollouts(rl, trainer, key, num_seeds: int, *, train: bool, progress=lambda x, d: x):
    """Every arm's rollouts from one key per step (training on ROLL's batch when ``train``);
    returns the per-(step, seed, arm) table and the last step's rounds."""
    arms = drivers(rl, trainer)
    roll = arms["roll"][0]
    state = trainer.init_state(num_seeds)
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


def mapping_claim(result: dict) -> object:
    statement = ("placing generation, scoring and update on different device sub-meshes "
                 "(colocated or disaggregated) leaves the numbers unchanged for a fixed key")
    criterion = (f"sampled tokens identical across mappings, every metric within "
                 f"{METRIC_TOL:g} and every parameter within {PARAM_TOL:g} x learning rate "
                 "of the colocated mapping's (float noise of sums split over devices)")
    common = dict(paper=PAPER, setting="small model", paper_ref=f"{REF} (AutoDeviceMapping)",
                  paper_value="AutoDeviceMapping assigns each stage's cluster to device sets; "
                              "the mapping changes speed, not the algorithm")
    if "error" in result:
        return claim("roll_device_mappings_identical", statement, None, None, criterion,
                     reason=f"4-device subprocess failed: {result['error']}", **common)
    what = ("a random tiny transformer, KL update (beta 0.1) towards another random one"
            if result.get("base") == "random" else f"GRPO from the {result.get('base')} base")
    maps = result["mappings"]
    lr = result["learning_rate"]
    metric = max(m["max_metric_diff"] for m in maps.values())
    param = max(m["max_param_diff"] for m in maps.values())
    tokens = all(m["tokens_equal"] for m in maps.values())
    passed = tokens and metric <= METRIC_TOL and param <= PARAM_TOL * lr and len(maps) >= 2
    desc = "; ".join(f"{name}: update on {m['update_devices']} devices, "
                     f"{m['transfer_bytes'] / 1e6:.2f} MB sent per step, max metric diff "
                     f"{m['max_metric_diff']:.1e}, max param diff {m['max_param_diff']:.1e}"
                     for name, m in maps.items())
    return claim("roll_device_mappings_identical", statement, metric, passed, criterion,
                 reason=f"{what}; {result['devices']} fake CPU devices, {result['steps']} step(s), "
                        f"{result['seeds']} seed(s), {result['rows']} rows per step, lr {lr}; "
                        f"tokens identical: {tokens}; {desc}", **common)


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


# ----------------------------------------------------------------------------- experiment
@experiment("roll", sft_bases=("search",), paper=PAPER,
            claims=("roll_abort_saves_tokens", "roll_token_accounting_exact",
                    "roll_device_mappings_identical", "roll_colocation_crossover"),
            default_seeds=8, quick_seeds=4)
def run(ctx):
    """ROLL: dynamic sampling that aborts in-flight requests, device mappings on
    jax.sharding, and the colocated/disaggregated crossover."""
    rl = rl_config(ctx.quick)
    if not ctx.quick:
        sft.load_or_train(rl.base, verbose=False)    # the subprocess uses it (full mode)
    # quick: the subprocess needs no SFT base (random policy, KL update): it runs alongside
    mapping_proc = start_mapping_check(ctx.quick)
    try:
        trainer = sequence.Trainer(rl)
        table, rounds = run_rollouts(rl, trainer, ctx.key(0), ctx.seeds, train=not ctx.quick,
                                     progress=ctx.progress)
        devices = (2, 4, 8, 16) if ctx.quick else (2, 4, 8, 16, 32, 64)
        workload = SIM.default_workload(128 if ctx.quick else 512)
        models = ("1.5b", "4b", "8b") if ctx.quick else tuple(SIM.MODEL_PARAMS)
        sim = SIM.sweep(models, devices, workload, grid=SIM.SPLIT_GRID if ctx.quick else None)
        mapping = finish_mapping_check(mapping_proc)
    finally:
        if mapping_proc.poll() is None:
            mapping_proc.kill()
    ctx.save_table(table, "roll_rollouts")
    ctx.save_table(sim, "roll_simulator")
    if "mappings" in mapping:
        ctx.save_table(pd.DataFrame([dict(mapping=k, **{kk: vv for kk, vv in v.items()
                                                         if not isinstance(vv, (dict, list))})
                                     for k, v in mapping["mappings"].items()]), "roll_mappings")
    ctx.save_figure(figure(table, rounds, sim, rl.num_prompts), "roll")

    B, G = rl.num_prompts, rl.num_generations
    save = stats.mean_interval(savings(table, "roll"))
    save_overlap = stats.mean_interval(savings(table, "roll_overlap"))
    save_slot = stats.mean_interval(savings(table, "slot_abort"))
    roll = table[table.arm == "roll"]
    same_finish = roll["same_as_finish"].astype(bool)
    same_groups = roll["same_groups_as_dapo"].astype(bool)
    identical_dapo = roll["identical_to_dapo"].astype(bool)
    invariants = bool(table["invariants_ok"].all())
    n = len(roll)
    setting = (f"{ctx.seeds} seeds x {rl.steps} steps, B={B} groups of G={G} from "
               f"{int(np.ceil(OVER_PROVISION * B))} launched, lock-step decode up to "
               f"{rl.base.max_new_tokens} tokens, search task (P(k) ~ 1/k); "
               + ("rollouts of the SFT base, no update (quick mode)" if ctx.quick else
                  "GRPO trained on ROLL's batches"))
    mean = table.groupby("arm").mean(numeric_only=True)
    abort_claim = claim(
        "roll_abort_saves_tokens",
        "aborting in-flight requests once enough informative groups are complete saves "
        "generated tokens without changing which groups are trained on beyond what completion "
        "order implies",
        save.mean,
        save.above(0.0) and bool(same_finish.all()) and bool(identical_dapo[same_groups].all())
        and invariants,
        "95% t-interval of the per-seed token saving (vs finish-everything, same key) above 0; "
        "batch identical to the finish-everything run's (completion order) at every (seed, "
        "step); identical to DAPO's slot-order filter wherever the same groups complete "
        "first; scheduler invariants hold",
        paper=PAPER, setting="small model", paper_ref=f"{REF} (rollout scheduler)",
        paper_value="the scheduler stops generating for a batch once enough samples are "
                    "collected (no token figure in the abstract)",
        reason=f"saving {save} of generated tokens; with the reward scored during the next "
               f"chunk (chunk 2) {save_overlap.mean:.1%}; aborting in DAPO's slot order "
               f"{save_slot.mean:.1%}; aborted tokens {mean.loc['roll', 'tokens_aborted']:.0f}"
               f" vs surplus tokens of the finish run {mean.loc['finish', 'tokens_surplus']:.0f}"
               f" per seed-step; same batch as finish-everything in {same_finish.sum()}/{n}; "
               f"same groups as DAPO's slot-order filter in {same_groups.sum()}/{n}, identical "
               f"arrays there in {identical_dapo.sum()}/{same_groups.sum()}; ROLL's batch shares "
               f"{roll['shared_with_dapo'].mean():.0%} of its groups with DAPO's slot-order "
               f"batch and its responses are shorter ({mean.loc['roll', 'used_length']:.2f} vs "
               f"{mean.loc['slot_abort', 'used_length']:.2f} tokens): completion order favours "
               f"groups whose longest response is short; invariants "
               f"{'hold' if invariants else 'VIOLATED'} ({setting})")
    exact = table["tokens_exact"].astype(bool)
    accounting = claim(
        "roll_token_accounting_exact",
        "the generated, aborted and wasted tokens of every response are counted exactly",
        float(exact.mean()), bool(exact.all()),
        "for every response of every arm, seed and step, the tokens the decoder generated "
        "equal the scheduler's event model on the finish-everything lengths (exact integers)",
        paper=PAPER, setting="small model", paper_ref=f"{REF} (rollout scheduler)",
        paper_value="per-sample lifecycle management (queued, running, finished, aborted)",
        reason=f"{exact.sum()}/{len(exact)} rounds exact; generated = used + aborted + "
               f"filtered + surplus in every round ({setting})")
    cross = SIM.crossover(sim)
    ok = all(c["colocated_wins_smallest"] and c["from_devices"] is not None
             for c in cross.values())
    starts = {m: c["from_devices"] for m, c in cross.items()}
    found = [d for d in starts.values() if d is not None]
    sync_wins = float((sim["disaggregated"] < sim["colocated"]).mean())
    region = ", ".join(f"{m}: from {d} GPUs" if d else f"{m}: never" for m, d in starts.items())
    crossover = claim(
        "roll_colocation_crossover",
        "colocating all stages wins on few GPUs and disaggregating generation from training "
        "wins on many, with a crossover inside the scanned range",
        max(found) if found else None, ok,
        f"for every model size, colocated is faster at the smallest D where it fits and "
        f"disaggregated (one-step asynchronous, best split) is faster from some D on, "
        f"D in {list(devices)} (measured = largest crossover D)",
        paper=PAPER, setting="simulator", paper_ref=f"{REF} (AutoDeviceMapping)",
        paper_value="colocation and disaggregation are both supported; which is faster "
                    "depends on the cluster (no crossover figure in the abstract)",
        reason=f"disaggregated-async beats colocated {region}; synchronous disaggregation "
               f"beats colocated in {sync_wins:.0%} of (model, D) cells; "
               f"{workload.n_groups} prompts x {workload.group_size} responses per step, "
               f"heavy-tailed lengths (cap {workload.lengths.l_max}), H100-class presets, "
               f"PCIe {SIM.DEFAULT_CLUSTER.offload_gb_s:g} GB/s offload, network "
               f"{SIM.DEFAULT_CLUSTER.network_gb_s:g} GB/s weight transfer; measured_text "
               "lists the region", )
    crossover = dataclasses.replace(crossover, measured_text=region)
    return [abort_claim, accounting, mapping_claim(mapping), crossover]
