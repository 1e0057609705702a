"""BroRL on the prompt bank: N=16 until the accuracy flattens, then N=16 vs N=512 from the same
state (the ``brorl_training`` experiment; the ``rlvr_lab.train.bandit`` trainer).

The ``brorl_schedule`` rollout stage (:mod:`.stage`) switches the group size mid-run (groups
padded to ``num_generations`` with a validity mask before the switch), so both branches share
phase 1 exactly (same keys).
"""
from __future__ import annotations

from dataclasses import dataclass

import jax
import numpy as np
import pandas as pd

from rlvr_lab.envs import prompt_bank
from rlvr_lab.train import bandit

SCHEDULE_STAGE = "brorl_schedule"   # registered by rlvr_lab.papers.brorl


@dataclass(frozen=True)
class TrainingStudy:
    """ProRL-style phase 1 at ``n_small`` rollouts, then (a) ``n_small`` or (b) ``n_large``.

    Branch (a) runs ``n_large / n_small`` times longer than ``budget_steps`` steps of (b), so
    the two are also compared at equal numbers of phase-2 rollouts (those of ``budget_steps``
    steps at ``n_large``; ``None`` = all ``phase2_steps``). The bank is token-level: each
    prompt is a softmax over ``vocab_size`` answers with ``num_correct`` correct ones; initial
    correct masses are Beta(a, b) draws clipped to ``[min_p0, 1 - min_p0]`` (many very hard
    prompts).
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
        bank = prompt_bank.PromptBankConfig(
            num_prompts=self.num_prompts, vocab_size=self.vocab_size,
            num_correct=self.num_correct, difficulty_a=self.difficulty[0],
            difficulty_b=self.difficulty[1], min_p0=self.min_p0, logit_scale=self.logit_scale)
        base = bandit.BanditConfig(bank=bank, num_prompts=self.num_prompts,
                                   learning_rate=self.learning_rate, eval_ks=(1, 16))
        s1, s2 = self.phase1_steps, self.phase2_steps
        return {
            "phase1": base.replace(steps=s1, num_generations=self.n_small),
            "small": base.replace(steps=s1 + max(s2, self.ratio * self.budget),
                                  num_generations=self.n_small),
            "large": base.replace(steps=s1 + s2, num_generations=self.n_large,
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




def seed_numbers(df: pd.DataFrame, study: TrainingStudy) -> dict[str, np.ndarray]:
    """Per-seed numbers of the two branches (paired: the same phase 1 and keys).

    ``gain``: accuracy(N=n_large) - accuracy(N=n_small) after ``phase2_steps`` more steps;
    ``filtered``: the mean fraction of phase-2 groups with all-equal rewards, N=n_large minus
    N=n_small; plus the pieces a reader wants beside them (accuracy at the switch, the
    phase-1 progress over its last 20% of steps, both branches at equal phase-2 rollouts)."""
    s1, s2 = study.phase1_steps, study.phase2_steps
    acc = {b: g.pivot(index="seed", columns="step", values="accuracy").to_numpy()
           for b, g in df.groupby("branch")}
    small, large = acc[f"N={study.n_small}"], acc[f"N={study.n_large}"]
    end = s1 + s2 - 1
    filt = {b: g[(g.step >= s1) & (g.step <= end)].groupby("seed")["filtered"].mean()
            .to_numpy() for b, g in df.groupby("branch")}
    return {"gain": large[:, end] - small[:, end],
            "filtered": filt[f"N={study.n_large}"] - filt[f"N={study.n_small}"],
            "at_switch": small[:, s1 - 1],
            "phase1_late": small[:, s1 - 1] - small[:, int(0.8 * s1) - 1],
            "budget_small": small[:, s1 - 1 + study.ratio * study.budget],
            "budget_large": large[:, s1 + study.budget - 1]}
