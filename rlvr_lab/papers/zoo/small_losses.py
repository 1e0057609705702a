"""The small zoo's policy-loss claims: what the loss papers state that a tiny transformer at
equal rollouts can express, the arms each claim reads, and its per-seed numbers.

Every loss arm (:data:`rlvr_lab.papers.zoo.small.LOSS_ARMS`) pairs GRPO's advantages with one
policy-loss family, so a paired difference against ``GRPO`` (GRPO + vanilla) isolates the loss.
Thresholds are fixed here before any run (threshold 0: the papers claim a direction, and every
effect they state is larger than 0; no margin is used). The claims need the eight loss arms,
so quick runs skip them (``full_only``) and train only the arms of the quick claims.
"""
from __future__ import annotations

import numpy as np

from rlvr_lab import claims
from rlvr_lab.papers.zoo import small

FULL_ONLY = ("needs the eight loss-family arms (15 arms in all; quick runs train only the 3 "
             "that the quick claims read)")
PASS1 = "final held-out pass@1"
LATE = "mean token entropy of the training rollouts over steps 7-12 (the second half)"
_MEAN_G = "mean over G = 2, 4, 8, per seed (paired)"

# claim id -> the arm labels it reads (small.ALL_ARMS); every claim also reads GRPO's control
NEEDS = {
    "zoo_small_grpo_learns": ("GRPO",),
    "zoo_small_gpg_beats_grpo": ("GRPO", "GPG"),
    "zoo_small_drgrpo_keeps_pass1": ("GRPO", "Dr.GRPO"),
    "zoo_small_gspo_clips_more": ("GRPO", "GSPO"),
    "zoo_small_gspo_beats_grpo": ("GRPO", "GSPO"),
    "zoo_small_cispo_beats_dapo": ("GRPO", "CISPO", "DAPO clip-higher"),
    "zoo_small_clip_higher_entropy": ("GRPO", "DAPO clip-higher"),
    "zoo_small_clip_cov_entropy": ("GRPO", "Clip-Cov"),
    "zoo_small_kl_cov_entropy": ("GRPO", "KL-Cov"),
    "zoo_small_gmpo_beats_grpo": ("GRPO", "GMPO"),
    "zoo_small_sapo_beats_grpo": ("GRPO", "SAPO"),
}


def arms_for(open_ids) -> list[small.Arm]:
    """Every arm when every claim is open (a full run's first look, so the ranking has them
    all); else only the arms the open claims read, in :data:`small.ALL_ARMS` order."""
    open_ids = set(open_ids)
    if open_ids >= set(NEEDS):
        return list(small.ALL_ARMS)
    need = {"GRPO"}.union(*(NEEDS[c] for c in open_ids))
    return [a for a in small.ALL_ARMS if a.label in need]


def _diff(arm: str, base: str = "GRPO", what: str = PASS1) -> str:
    return f"{what}, {arm} minus {base}, {_MEAN_G}"


CLAIMS = (
    claims.Declared(
        "zoo_small_gspo_clips_more", paper="GSPO",
        statement="GSPO's sequence-level clip removes the gradient of more tokens than GRPO's "
                  "token-level clip (tiny transformer, GRPO advantages, equal rollouts)",
        paper_value="two orders of magnitude more clipped tokens than GRPO, while training "
                    "more efficiently",
        paper_ref="arXiv:2507.18071 Sec. 5.2 'Curious Observation on Clipping Fractions' (Figure "
                  "2: average fractions of clipped tokens over RL training, GSPO vs GRPO; the "
                  "figure's values not read, only the text's 'two orders of magnitude')",
        estimand="share of valid tokens with a non-zero advantage whose loss has no gradient "
                 "in their own log-prob (the clipped tokens of either loss), mean over the 12 "
                 f"steps' minibatches, GSPO minus GRPO, {_MEAN_G}", unit="token share",
        rule="superiority", threshold=0.0, full_only=FULL_ONLY,
        note="GSPO's clip range is (3e-4, 4e-4) on the sequence ratio, GRPO's 0.2 per token; "
             "the first of the two minibatches is on policy for both"),
    claims.Declared(
        "zoo_small_gspo_beats_grpo", paper="GSPO",
        statement="GSPO (sequence-level ratio and clip, per-sequence mean) trains better than "
                  "GRPO at equal rollouts (tiny transformer)",
        paper_value="remarkably higher training efficiency than GRPO (training reward and "
                    "benchmark curves; no single margin)",
        paper_ref="arXiv:2507.18071 abstract; Sec. 5.1 'Empirical Results' (Figure 1: training "
                  "reward and AIME'24 / LiveCodeBench / CodeForces curves, cold-start model from "
                  "Qwen3-30B-A3B-Base; GRPO with Routing Replay and clip 0.2 / 0.27)",
        estimand=_diff("GSPO"), unit="pass@1", rule="superiority", threshold=0.0,
        full_only=FULL_ONLY),
    claims.Declared(
        "zoo_small_cispo_beats_dapo", paper="CISPO",
        statement="CISPO (clipped importance weight, every token keeps its gradient) trains "
                  "better than DAPO's clip-higher PPO loss at equal steps (tiny transformer, "
                  "both on GRPO advantages)",
        paper_value="outperforms DAPO and GRPO at the same number of training steps; DAPO's "
                    "accuracy with 50% of the steps (AIME 2024, Qwen2.5-32B)",
        paper_ref="arXiv:2506.13585 Sec. 3.1, 'Empirical Validation of CISPO' (Figure 2: GRPO, "
                  "DAPO and CISPO on AIME 2024, zero-RL from Qwen2.5-32B-base)",
        estimand=_diff("CISPO", "DAPO clip-higher"), unit="pass@1",
        rule="superiority", threshold=0.0, full_only=FULL_ONLY,
        note="only the loss differs (DAPO's dynamic sampling and overlong shaping are not in "
             "either arm)"),
    claims.Declared(
        "zoo_small_clip_higher_entropy", paper="DAPO",
        statement="DAPO's clip-higher (epsilon_high 0.28) keeps the policy's entropy above the "
                  "symmetric 0.2 clip's (tiny transformer)",
        paper_value="entropy collapses with the symmetric clip and stays higher with "
                    "Clip-Higher (curves; no single number)",
        paper_ref="arXiv:2503.14476 Sec. 3.1 (Figure 2)",
        estimand=_diff("clip-higher", "GRPO (vanilla clip)", LATE), unit="nats",
        rule="superiority", threshold=0.0, full_only=FULL_ONLY),
    claims.Declared(
        "zoo_small_clip_cov_entropy", paper="GRPO",
        statement="Clip-Cov (no gradient for a few high-covariance tokens) keeps the policy's "
                  "entropy above GRPO's (tiny transformer)",
        paper_value="entropy stays well above GRPO's, which collapses (curves); +2.0 / +6.4 pp "
                    "average accuracy at 7B / 32B",
        paper_ref=("Cui et al., arXiv:2505.22617 abstract; entropy curves and averages: "
                   "authors' README (PRIME-RL/Entropy-Mechanism-of-RL), Evaluation, "
                   "figures/performance_fig.jpg and performance_tab.jpg (the paper's figure "
                   "number not read)"),
        estimand=_diff("Clip-Cov", what=LATE), unit="nats",
        rule="superiority", threshold=0.0, full_only=FULL_ONLY,
        note="verl's ratio 2e-4 selects max(floor(2e-4 n), 1) tokens: one per minibatch here"),
    claims.Declared(
        "zoo_small_kl_cov_entropy", paper="GRPO",
        statement="KL-Cov (a KL penalty on the highest-covariance tokens) keeps the policy's "
                  "entropy above GRPO's (tiny transformer)",
        paper_value="entropy stays well above GRPO's, which collapses (curves)",
        paper_ref=("Cui et al., arXiv:2505.22617 abstract; entropy curves and averages: "
                   "authors' README (PRIME-RL/Entropy-Mechanism-of-RL), Evaluation, "
                   "figures/performance_fig.jpg and performance_tab.jpg (the paper's figure "
                   "number not read)"),
        estimand=_diff("KL-Cov", what=LATE), unit="nats",
        rule="superiority", threshold=0.0, full_only=FULL_ONLY,
        note="verl's ratio 2e-4 selects max(floor(2e-4 n), 1) tokens: one per minibatch here"),
    claims.Declared(
        "zoo_small_gmpo_beats_grpo", paper="GRPO",
        statement="GMPO (geometric mean of the token ratios, log-space clip 0.4) trains better "
                  "than GRPO at equal rollouts (tiny transformer)",
        paper_value="+4.1 pp average Pass@1 over GRPO on math benchmarks (7B)",
        paper_ref="GMPO, arXiv:2507.20673 abstract",
        estimand=_diff("GMPO"), unit="pass@1", rule="superiority", threshold=0.0,
        full_only=FULL_ONLY),
    claims.Declared(
        "zoo_small_sapo_beats_grpo", paper="GRPO",
        statement="SAPO (a soft sigmoid gate instead of the hard clip) trains better than GRPO "
                  "at equal rollouts (tiny transformer)",
        paper_value="SAPO stays stable and ends higher than GRPO-R2 (GRPO with routing replay) "
                    "and GSPO, which collapse early (Qwen3-30B-A3B; curves); Qwen3-VL-30B-A3B "
                    "aggregated validation ~0.758 vs ~0.749 at step 500 (read off the plot)",
        paper_ref=("SAPO, arXiv:2511.20347 abstract; Figure 4 and Figure 6 (captions and "
                   "curves, viewed as the paper's figure images kept in "
                   "star-736/paper-reading-wiki, wiki/assets/sapo/)"),
        estimand=_diff("SAPO"), unit="pass@1", rule="superiority", threshold=0.0,
        full_only=FULL_ONLY),
)


def numbers(res: small.Result) -> dict[str, np.ndarray]:
    """Per seed of one base: the numbers of :data:`CLAIMS` whose arms ran."""
    label = [a.label for a in res.arms]
    steps = res.history["entropy"].shape[0]
    per_arm = {
        "pass1": lambda a: res.final[label.index(a)],                          # [G, S]
        "entropy": lambda a: res.history["entropy"][steps // 2:, label.index(a)].mean(0),
        "clip": lambda a: res.history["clip_frac"][:, label.index(a)].mean(0),
    }
    pairs = {"zoo_small_gspo_clips_more": ("clip", "GSPO", "GRPO"),
             "zoo_small_gspo_beats_grpo": ("pass1", "GSPO", "GRPO"),
             "zoo_small_cispo_beats_dapo": ("pass1", "CISPO", "DAPO clip-higher"),
             "zoo_small_clip_higher_entropy": ("entropy", "DAPO clip-higher", "GRPO"),
             "zoo_small_clip_cov_entropy": ("entropy", "Clip-Cov", "GRPO"),
             "zoo_small_kl_cov_entropy": ("entropy", "KL-Cov", "GRPO"),
             "zoo_small_gmpo_beats_grpo": ("pass1", "GMPO", "GRPO"),
             "zoo_small_sapo_beats_grpo": ("pass1", "SAPO", "GRPO")}
    return {cid: (per_arm[kind](a) - per_arm[kind](b)).mean(0)
            for cid, (kind, a, b) in pairs.items() if a in label and b in label}
