"""E3's entropy-targeting temperature rule vs a fixed temperature, on a token-level prompt bank.

E3's rank-based rollout allocation is compared with CurES in ``simulations/cures.py``
(``cures_study``), which shares this bank and group size.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from rlvr_lab import plotting
from rlvr_lab.experiments import claim, experiment
from rlvr_lab.utils import jit_cpu_options
from simulations.cures import GROUP, PAPER_E3, bank_config


# ----------------------------------------------------------------------------- E3 temperature
def temperature_runs(quick: bool, key, num_seeds: int):
    from rlvr_lab.papers.e3.stage import TemperatureConfig, make_temperature_train

    cfg = TemperatureConfig(bank=bank_config("hard", 64 if quick else 128),
                            num_steps=120 if quick else 300, batch_size=32,
                            num_generations=GROUP, learning_rate=0.05)
    out = []
    rules = ("fixed", "e3")
    # both rules in one compilation: the rule is a traced flag, seeds vmapped inside
    train = jit_cpu_options(jax.vmap(jax.vmap(make_temperature_train(cfg), in_axes=(0, None))))
    keys = jax.vmap(lambda j: jax.random.split(jax.random.fold_in(key, j), num_seeds))(
        jnp.arange(len(rules)))
    _, metrics = train(keys, jnp.asarray([r == "e3" for r in rules]))
    for j, rule in enumerate(rules):
        for name, v in metrics.items():
            v = np.asarray(v)[j]
            out.append(pd.DataFrame({"rule": rule, "metric": name,
                                     "seed": np.repeat(np.arange(num_seeds), v.shape[1]),
                                     "step": np.tile(np.arange(v.shape[1]), num_seeds),
                                     "value": v.ravel()}))
    return pd.concat(out, ignore_index=True), cfg


def temperature_figure(df):
    fig, axes = plotting.subplots(1, 3, figsize=(15, 4.0))
    for rule, label, color in (("fixed", "fixed T = 1", "#1b6ca8"),
                               ("e3", "E3 entropy targeting", "#d1495b")):
        for ax, metric in zip(axes, ("entropy", "temperature", "accuracy")):
            d = df[(df.rule == rule) & (df.metric == metric)]
            v = d.pivot(index="seed", columns="step", values="value").to_numpy()
            plotting.band(ax, np.arange(v.shape[1]), v, label=label, color=color)
        for metric, ls, text in (("pass@8", "--", "pass@8"),
                                 ("accuracy_at_1", ":", "accuracy at T = 1")):
            d = df[(df.rule == rule) & (df.metric == metric)]
            v = d.pivot(index="seed", columns="step", values="value").to_numpy()
            plotting.band(axes[2], np.arange(v.shape[1]), v, label=f"{label}: {text}", ls=ls,
                          color=color)
    t = df[(df.rule == "e3") & (df.metric == "target_entropy")].groupby("step").value.mean()
    axes[0].plot(t.index, t.to_numpy(), "k:", lw=1, label="target H* (cosine-annealed)")
    axes[0].set_ylabel("mean entropy of the sampling policy (nats)")
    axes[1].set_ylabel("sampling temperature T")
    axes[2].set_ylabel("exact accuracy / pass@8 (sampling T unless marked)")
    for ax in axes:
        ax.set_xlabel("step")
        ax.legend(fontsize=8)
    axes[0].set_title("entropy")
    axes[1].set_title("temperature")
    axes[2].set_title("accuracy")
    fig.tight_layout()
    return fig


@experiment("e3_temperature", paper=PAPER_E3, setting="bank",
            claims=("e3_entropy_within_band", "fixed_temperature_entropy_collapses"))
def run_e3_temperature(ctx):
    """E3's temperature rule keeps the sampling entropy near its target; fixed T collapses."""
    df, cfg = temperature_runs(ctx.quick, ctx.key(20), ctx.seeds)
    ctx.save_table(df.groupby(["rule", "metric", "step"], as_index=False).value.mean(),
                   "e3_temperature_curves")
    ctx.save_figure(temperature_figure(df), "e3_temperature")
    mean = df.groupby(["rule", "metric", "step"]).value.mean()
    h0 = float(mean["e3", "target_entropy"].iloc[0])
    warm = cfg.num_steps // 10
    e3_rel = mean["e3", "entropy"].to_numpy()[warm:] / h0
    dev = float(np.max(np.abs(e3_rel - 1.0)))
    fixed_end = float(mean["fixed", "entropy"].iloc[-1] / mean["fixed", "entropy"].iloc[0])
    p8 = {r: float(mean[r, "pass@8"].iloc[-1]) for r in ("fixed", "e3")}
    acc = {r: float(mean[r, "accuracy"].iloc[-1]) for r in ("fixed", "e3")}
    at1 = {r: (float(mean[r, "accuracy_at_1"].iloc[-1]), float(mean[r, "pass@8_at_1"].iloc[-1]))
           for r in ("fixed", "e3")}
    return [
        claim("e3_entropy_within_band",
              "E3's temperature rule keeps the policy entropy flat (near its initial value)",
              measured=dev, passed=bool(dev <= 0.2),
              criterion="max |H_t / H*_0 − 1| over steps after the first 10% (seed mean) "
                        "≤ 0.2 (the target itself anneals to 0.9 H*_0)",
              paper=PAPER_E3, paper_value="entropy stays flat instead of collapsing",
              reason=f"a feedback controller on the entropy: within the band by construction "
                     f"(what E3 buys is tested on the small model, e3_small). Final T = "
                     f"{float(mean['e3', 'temperature'].iloc[-1]):.2f}; at one common T = 1: "
                     f"accuracy E3 {at1['e3'][0]:.3f} vs fixed {at1['fixed'][0]:.3f}, pass@8 "
                     f"{at1['e3'][1]:.3f} vs {at1['fixed'][1]:.3f}; at each rule's own sampling "
                     f"T: accuracy {acc['e3']:.3f} vs {acc['fixed']:.3f}, pass@8 "
                     f"{p8['e3']:.3f} vs {p8['fixed']:.3f}"),
        claim("fixed_temperature_entropy_collapses",
              "With a fixed temperature the entropy collapses during training",
              measured=fixed_end, passed=bool(fixed_end < 0.5),
              criterion="final / initial entropy at fixed T = 1 (seed mean) < 0.5",
              paper=PAPER_E3, paper_value="entropy collapses without the rule"),
    ]


# ----------------------------------------------------------------------------- small model
LENGTH_COEFF = 0.05      # mu for responses of 5-12 tokens (mu l ~ 0.3-0.5, as 0.001 x 300-500
#                          tokens in the authors' setting)
LENGTH_THRESHOLD = 0.1   # the README's threshold: the easiest tenth of the prompts
E3_MARGIN = 0.05         # non-inferiority / "no gain this large" margin, absolute held-out pass@k
NMAX_BATCHES = (4, 8, 16, 32)
NMAX_MIN_BIND = 0.05     # the cap "binds" at a batch size when >= 5% of prompts get > 12
NMAX_MIN_POINTS = 1.0    # reduction (percentage points) asked for where it binds


def nmax_sweep(p, key, draws: int) -> pd.DataFrame:
    """Exact expected all-incorrect fractions at a fixed policy, E3 [4, 12] vs [4, 16] (and
    uniform 8), over :data:`NMAX_BATCHES` (batch sizes up to the number of prompts)."""
    from rlvr_lab.papers.e3 import allocation as e3_alloc

    sizes = [b for b in NMAX_BATCHES if b <= len(p)]
    frac, over = e3_alloc.expected_all_incorrect(key, p, sizes, [(8, 8), (4, 12), (4, 16)],
                                                 draws)
    rows = []
    for b, (u, f12, f16), o in zip(sizes, frac, over[:, 2]):
        rows.append(dict(batch_size=b, uniform=u, nmax12=f12, nmax16=f16,
                         reduction_points=100 * (f12 - f16), binding_share=o,
                         binds=o >= NMAX_MIN_BIND))
    return pd.DataFrame(rows)


def e3_small_figure(res, names, ks, passk):
    fig, axes = plotting.subplots(1, 3, figsize=(15, 4.0))
    t = np.arange(1, res.steps + 1)
    colors = {"uniform GRPO": "#1b6ca8", "E3": "#d1495b"}
    for i, name in enumerate(names):
        plotting.band(axes[0], t, res.history["temperature"][:, i].T, label=f"{name}: T",
                      color=colors.get(name))
        plotting.band(axes[0], t, res.history["entropy"][:, i].T, label=f"{name}: entropy",
                      color=colors.get(name), ls="--")
        plotting.band(axes[1], res.eval_steps, res.pass1()[:, i].T, label=name, marker="o",
                      ms=3, color=colors.get(name))
        plotting.band(axes[2], ks, passk["final"][i], label=f"{name} (final)", marker="o",
                      ms=3, color=colors.get(name))
    plotting.band(axes[2], ks, passk["base"][0], label="SFT base", color="0.4", marker="s", ms=3)
    axes[0].set(xlabel="step", ylabel="T / token entropy (nats)",
                title="sampling temperature and entropy")
    axes[1].set(xlabel="step", ylabel="held-out pass@1 at T = 1",
                title="held-out pass@1 (every arm at T = 1)")
    axes[2].set(xscale="log", xlabel="k", ylabel="held-out pass@k at T = 1",
                title="pass@k: base vs after training")
    axes[2].set_xscale("log", base=2)
    for ax in axes:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


@experiment("e3_small", sft_bases=("quick",), paper=PAPER_E3, setting="small model",
            default_seeds=8, quick_seeds=4,
            claims=("e3_small_pass1_vs_grpo", "e3_small_passk_vs_base", "e3_small_passk_vs_grpo",
                    "e3_small_length_penalty", "raising_nmax_fewer_all_incorrect"))
def run_e3_small(ctx):
    """E3 on the tiny transformer: rank allocation + entropy-targeting temperature + length
    penalty vs GRPO at equal rollouts, every arm evaluated at T = 1; pass@k vs base and GRPO;
    the n_max claim over batch sizes."""
    from rlvr_lab import stats
    from rlvr_lab.envs import prompt_bank as pbk
    from rlvr_lab.papers.cures import small
    from simulations import cures, tiny_grpo

    driver = cures.small_driver(ctx.quick)
    rl = driver.config.rl
    arms = {"uniform GRPO": small.Arm(),
            "E3": small.Arm(e3_alloc=True, e3_temperature=True, length_coeff=LENGTH_COEFF,
                            length_threshold=LENGTH_THRESHOLD)}
    names = list(arms)
    steps = cures.SMALL_STEPS[ctx.quick]
    calls = 2 if ctx.quick else 16        # pass@k up to 8 (quick) / 64 (full)
    res = driver.run(ctx.key(40), list(arms.values()), ctx.seeds, steps,
                     eval_every=cures.SMALL_EVAL_EVERY[ctx.quick], final_calls=calls,
                     progress=lambda it: ctx.progress(it, "steps"))
    hist, ev = cures.small_frames(res, names)
    ctx.save_table(hist, "e3_small_metrics")
    ctx.save_table(ev, "e3_small_heldout")
    ks, base_k = res.pass_at("base")
    _, final_k = res.pass_at("final")                 # [A, S, K]
    passk = {"base": base_k, "final": final_k}
    ctx.save_table(pd.DataFrame([dict(arm=names[i], seed=s, k=int(k), base=base_k[i, s, j],
                                      final=final_k[i, s, j])
                                 for i in range(len(names)) for s in range(ctx.seeds)
                                 for j, k in enumerate(ks)]), "e3_small_pass_at_k")
    ctx.save_figure(e3_small_figure(res, names, ks, passk), "e3_small")
    control = tiny_grpo.control(base_k[0, :, 0], final_k[0, :, 0],
                                name="uniform GRPO vs SFT base")
    kmax = int(ks[-1])
    p1 = stats.equivalence(final_k[1, :, 0], final_k[0, :, 0], E3_MARGIN)
    vs_base = stats.equivalence(final_k[1, :, -1], base_k[1, :, -1], E3_MARGIN)
    grpo_vs_base = stats.paired_difference(final_k[0, :, -1], base_k[0, :, -1])
    vs_grpo = stats.paired_difference(final_k[1, :, -1], final_k[0, :, -1])
    vs_grpo_tost = stats.equivalence(final_k[1, :, -1], final_k[0, :, -1], E3_MARGIN)
    lengths = res.correct_length("final")             # [A, S]
    rel = lengths[1] / lengths[0] - 1
    rel_iv = stats.mean_interval(rel)
    h = res.history
    penalised = h["penalised_groups"][:, 1].sum()
    changed = h["penalty_changed_groups"][:, 1].sum()
    spread = h["length_spread_frac"][:, 1].mean()
    temp = h["temperature"][-1, 1]
    setting = (f"{ctx.seeds} paired seeds, {steps} steps of B={rl.num_prompts} x "
               f"{rl.num_generations} rollouts (E3: rank allocation [8,8] -> [4,12], one epoch "
               f"= {driver.spe} steps; T rule from the first step's entropy; length penalty "
               f"mu={LENGTH_COEFF} on rank <= {LENGTH_THRESHOLD}); held-out "
               f"{len(driver.trainer.eval_problems)} problems x {res.final[0].shape[-1]} "
               f"samples, every arm at T={rl.temperature:g}; base pass@1 "
               f"{base_k[0, :, 0].mean():.3f}; final T of E3 {temp.mean():.2f} (seed mean); "
               f"{control.reason}")
    tost = f"TOST margin {E3_MARGIN}, 90% interval"
    gverdict = ("pass" if vs_grpo.above(0) else "fail" if vs_grpo.below(0)
                or vs_grpo_tost.equivalent else "inconclusive")

    # n_max over batch sizes: the SFT base's per-problem success (plug-in from its held-out
    # samples) and, for reference, the bimodal bank's exact p
    p_base = res.base[0][0].mean(axis=(0, 2))       # [M], seed-averaged
    draws = 200 if ctx.quick else 1000
    sweep = nmax_sweep(p_base, ctx.key(41), draws).assign(setting="small model (SFT base)")
    bank = None
    if not ctx.quick:   # the bank's exact p, for reference (full mode; notebook 05 shows it)
        bank_p = np.asarray(pbk.make_bank(bank_config("bimodal", 64)).p0)
        bank = nmax_sweep(bank_p, ctx.key(42), draws).assign(setting="bimodal bank")
    ctx.save_table(pd.concat([sweep, bank]), "e3_nmax_sweep")
    binding = sweep[sweep.binds]
    if binding.empty:
        nverdict, best = "inconclusive", float("nan")
    else:
        best = float(binding.reduction_points.max())
        nverdict = ("pass" if best >= NMAX_MIN_POINTS and (binding.reduction_points >= 0).all()
                    else "fail")
    describe = lambda d: "; ".join(  # noqa: E731
        f"B={r.batch_size}: {r.nmax12:.2%} -> {r.nmax16:.2%} ({r.reduction_points:+.2f} pp, "
        f"{r.binding_share:.1%} of prompts > 12)" for r in d.itertuples())

    compared = [
        claim("e3_small_pass1_vs_grpo",
              "E3 keeps the precision of RL: held-out pass@1 at the common temperature is not "
              "worse than GRPO's", p1.mean, p1.not_worse,
              f"paired non-inferiority test of final held-out pass@1 at T=1 (E3 - GRPO) "
              f"against -{E3_MARGIN} at 5%", paper=PAPER_E3,
              paper_value="improves response precision while preserving exploration [summary]",
              reason=f"difference {p1} ({tost}); E3 {final_k[1, :, 0].mean():.3f}, GRPO "
                     f"{final_k[0, :, 0].mean():.3f} ({setting})"),
        claim("e3_small_passk_vs_base",
              f"E3 preserves exploration: held-out pass@{kmax} after training is not below the "
              "SFT base's", vs_base.mean, vs_base.not_worse,
              f"paired non-inferiority test of pass@{kmax} at T=1 (E3 final - base) against "
              f"-{E3_MARGIN} at 5%", paper=PAPER_E3,
              paper_value="RL can cap pass@k below the base model; E3 preserves the "
                          "exploratory ability [summary]; pass@k on AIME24/AMC23 (README figure)",
              reason=f"difference {vs_base} ({tost}); GRPO final - base at pass@{kmax}: "
                     f"{grpo_vs_base}; pass@{kmax} base {base_k[0, :, -1].mean():.3f}, GRPO "
                     f"{final_k[0, :, -1].mean():.3f}, E3 {final_k[1, :, -1].mean():.3f}"),
        claim("e3_small_passk_vs_grpo",
              f"E3 ends with a higher held-out pass@{kmax} than GRPO at equal rollouts",
              vs_grpo.mean, None, verdict=gverdict,
              criterion=f"paired difference of pass@{kmax} at T=1 (E3 - GRPO): pass if its 95% "
                        f"t-interval is above 0; fail if below 0 or if TOST puts it within "
                        f"±{E3_MARGIN}; inconclusive otherwise", paper=PAPER_E3,
              paper_value="higher pass@k than GRPO at large k (README figure)",
              reason=f"difference {vs_grpo}; TOST [{vs_grpo_tost.low:+.3f}, "
                     f"{vs_grpo_tost.high:+.3f}]"),
        claim("e3_small_length_penalty",
              "E3's length penalty on easy prompts shortens the correct answers",
              rel_iv.mean, rel_iv.below(0),
              "relative change of the mean length of correct held-out answers at T=1, E3 vs "
              "GRPO per paired seed: its 95% t-interval lies below 0",
              paper=PAPER_E3, paper_value="threshold 0.1: ~40% shorter at comparable accuracy "
                                          "(README, not in the paper)",
              reason=f"relative change {rel_iv}; correct-answer length GRPO "
                     f"{lengths[0].mean():.2f}, E3 {lengths[1].mean():.2f} tokens. Mechanism: "
                     f"{penalised:.0f} penalised groups, of which {changed:.0f} had an "
                     f"advantage changed by the penalty; {spread:.1%} of easy groups had correct "
                     "answers of different lengths -- with GRPO's group-normalised advantage "
                     "the penalty only acts on such a spread, and on this task a correct answer "
                     "has one length per problem"),
    ]
    return stats.gate(compared, control) + [
        claim("raising_nmax_fewer_all_incorrect",
              "Raising E3's maximum rollouts per prompt by 4 leaves fewer all-incorrect groups",
              best, None, verdict=nverdict,
              criterion=f"exact expected all-incorrect fraction at a fixed policy (the SFT "
                        f"base, per-problem success estimated from its held-out samples), E3 "
                        f"[4, 12] minus [4, 16], over batch sizes {NMAX_BATCHES}: where the cap "
                        f"binds (>= {NMAX_MIN_BIND:.0%} of prompts given > 12 under n_max 16), "
                        f"the largest reduction >= {NMAX_MIN_POINTS:g} point and none negative "
                        "(inconclusive if the cap never binds); measured = that largest "
                        "reduction (points)", paper=PAPER_E3,
              paper_value="~2 points fewer all-incorrect groups (README)",
              reason=f"small model: {describe(sweep)}" + (
                  "" if bank is None else f" | bimodal bank (exact p): {describe(bank)}")),
    ]
