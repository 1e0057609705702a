"""The papers this toolkit reproduces, and where in each paper every claim comes from.

``PAPERS`` maps the short name used in ``@experiment(paper=...)`` (and in each claim's
``paper`` column) to its full reference. Every arXiv id below was checked against the paper's
title on its arXiv abstract page or a mirror of it; an id that could not be confirmed is left
empty (``docs/papers.md`` says so) rather than guessed.

``CLAIM_SOURCES`` maps a claim id to ``(paper, location)``: the part of the paper the claim
restates (``"abstract"``, ``"Table 2"``, ``"authors' code"``), or ``("", "derived")`` for an
identity we derive ourselves. :func:`paper_ref` turns it into the ``paper_ref`` column of
``claims.csv``; :func:`rlvr_lab.experiments.claim` fills it when the caller gives none.
Locations are recorded only where confirmed; the others stay empty.

``python -m rlvr_lab.bibliography`` rewrites the generated part of ``docs/papers.md``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ARXIV_ID = re.compile(r"\d{4}\.\d{4,5}")


@dataclass(frozen=True)
class Paper:
    """One paper: ``key`` is its short name in experiments and claims."""

    key: str
    title: str
    authors: str
    year: int
    arxiv: str = ""  # "2402.03300"; empty when not confirmed
    code: str = ""  # the authors' code; empty when none was found
    page: str = ""  # a project page, when there is one and no code
    family: str = ""  # the experiments that use it, when it is not a `paper=` of its own
    note: str = ""

    def __post_init__(self):
        if not self.key or not self.title or not self.authors:
            raise ValueError(f"Paper {self.key!r}: key, title and authors must be non-empty")
        if self.arxiv and not ARXIV_ID.fullmatch(self.arxiv):
            raise ValueError(f"Paper {self.key!r}: arxiv={self.arxiv!r} is not an arXiv id "
                             "like '2402.03300' (or empty when not confirmed)")
        if not 2000 <= self.year <= 2100:
            raise ValueError(f"Paper {self.key!r}: year={self.year!r} is not a year")
        for name in ("code", "page"):
            url = getattr(self, name)
            if url and not url.startswith("https://"):
                raise ValueError(f"Paper {self.key!r}: {name}={url!r} must be an https URL")

    @property
    def url(self) -> str:
        """The arXiv abstract page (empty without an id)."""
        return f"https://arxiv.org/abs/{self.arxiv}" if self.arxiv else ""

    def reference(self) -> str:
        """``Authors (year). Title. arXiv:id.``"""
        tail = f" arXiv:{self.arxiv}." if self.arxiv else " (arXiv id not confirmed)."
        return f"{self.authors} ({self.year}). {self.title}.{tail}"


_PAPERS = (
    Paper("GRPO", "DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language "
          "Models", "Zhihong Shao, Peiyi Wang, Qihao Zhu, et al.", 2024, "2402.03300",
          note="introduces GRPO; the reference implementations we follow are verl and TRL"),
    Paper("Dr.GRPO", "Understanding R1-Zero-Like Training: A Critical Perspective",
          "Zichen Liu, Changyu Chen, Wenjun Li, et al.", 2025, "2503.20783",
          code="https://github.com/sail-sg/understand-r1-zero"),
    Paper("RLOO", "Back to Basics: Revisiting REINFORCE Style Optimization for Learning from "
          "Human Feedback in LLMs", "Arash Ahmadian, Chris Cremer, Matthias Gallé, et al.", 2024,
          "2402.14740", family="GRPO"),
    Paper("DAPO", "DAPO: An Open-Source LLM Reinforcement Learning System at Scale",
          "Qiying Yu, Zheng Zhang, Ruofei Zhu, et al.", 2025, "2503.14476", family="GRPO"),
    Paper("GSPO", "Group Sequence Policy Optimization", "Chujie Zheng, Shixuan Liu, et al.",
          2025, "2507.18071", family="GRPO"),
    Paper("CISPO", "MiniMax-M1: Scaling Test-Time Compute Efficiently with Lightning Attention",
          "MiniMax (Aili Chen, Aonian Li, Bangwei Gong, et al.)", 2025, "2506.13585",
          family="GRPO", note="CISPO is introduced in the MiniMax-M1 report"),
    Paper("MC-GRPO", "MC-GRPO: Median-Centered Group Relative Policy Optimization for "
          "Small-Rollout Reinforcement Learning", "Youngeun Kim", 2026, "2601.22582",
          code="https://github.com/lotusroot-kim/MC-GRPO"),
    Paper("DARS", "Depth-Breadth Synergy in RLVR: Unlocking LLM Reasoning Gains with Adaptive "
          "Exploration", "Zhicheng Yang, Zhijiang Guo, Yinya Huang, et al.", 2025, "2508.13755",
          code="https://github.com/yangzhch6/DARS"),
    Paper("BroRL", "BroRL: Scaling Reinforcement Learning via Broadened Exploration",
          "Jian Hu, Mingjie Liu, Ximing Lu, et al.", 2025, "2510.01180",
          note="no public code found"),
    Paper("CurES", "CurES: From Gradient Analysis to Efficient Curriculum Learning for "
          "Reasoning LLMs", "Yongcheng Zeng, Zexu Sun, Bokai Ji, et al.", 2025, "2510.01037",
          code="https://github.com/ZexuSun/CurES"),
    Paper("E3", "Enhancing Efficiency and Exploration in Reinforcement Learning for LLMs",
          "Mengqi Liao, Xiangyu Xi, Ruinian Chen, et al.", 2025, "2505.18573",
          code="https://github.com/LiaoMengqi/E3-RL4LLMs", note="EMNLP 2025"),
    Paper("APRIL", "APRIL: Active Partial Rollouts in Reinforcement Learning to Tame Long-tail "
          "Generation", "Yuzhen Zhou, Jiajun Li, Yusheng Su, et al.", 2025, "2509.18521",
          code="https://github.com/RLsys-Foundation/APRIL", note="integrated into slime"),
    Paper("AReaL", "AReaL: A Large-Scale Asynchronous Reinforcement Learning System for "
          "Language Reasoning", "Wei Fu, Jiaxuan Gao, Xujie Shen, et al.", 2025, "2505.24298",
          code="https://github.com/inclusionAI/AReaL",
          note="v1 reports up to 2.57x speedup, later versions 2.77x"),
    Paper("ECHO-2", "ECHO-2: A Large-Scale Distributed Rollout Framework for Cost-Efficient "
          "Reinforcement Learning", "Jie Xiao, Meng Chen, Qingnan Ren, et al.", 2026,
          "2602.02192", note="author order of v1 (later versions reorder); no public code found"),
    Paper("WebGym", "WebGym: Scaling Training Environments for Visual Web Agents with Realistic "
          "Tasks", "Hao Bai, Alexey Taymanov, Tong Zhang, Aviral Kumar, Spencer Whitehead", 2026,
          "2601.02439", page="https://webgym-website.github.io/webgym.github.io"),
    Paper("SPEC-RL", "SPEC-RL: Accelerating On-Policy Reinforcement Learning via Speculative "
          "Rollouts", "Bingshuai Liu, Ante Wang, Zijun Min, et al.", 2025, "2509.23232",
          code="https://github.com/ShopeeLLM/Spec-RL",
          note="title of v1; later versions say 'with Speculative Rollouts'"),
    Paper("FP8", "FP8-RL: A Practical and Stable Low-Precision Stack for LLM Reinforcement "
          "Learning", "Zhaopeng Qiu, Shuang Yu, Jingqi Zhang, et al.", 2026, "2601.18150",
          code="https://github.com/volcengine/verl", note="implemented in veRL"),
    Paper("DynaWeb", "DynaWeb: Model-Based Reinforcement Learning of Web Agents",
          "Hang Ding, Peidong Liu, Junqiao Wang, et al.", 2026, "2601.22149",
          note="code announced, not yet public"),
    Paper("SAR", "Rethinking Training Dynamics in Scale-wise Autoregressive Generation",
          "Gengze Zhou, Chongjian Ge, Hao Tan, Feng Liu, Yicong Hong", 2025, "2512.06421",
          page="https://gengzezhou.github.io/SAR",
          note="introduces Self-Autoregressive Refinement (SAR)"),
    Paper("ROLL", "Reinforcement Learning Optimization for Large-Scale Learning: An Efficient "
          "and User-Friendly Scaling Library", "Weixun Wang, Shaopan Xiong, Gengru Chen, et al.",
          2025, "2506.06122", code="https://github.com/alibaba/ROLL"),
)
PAPERS: dict[str, Paper] = {p.key: p for p in _PAPERS}

DERIVED = ("", "derived")
# claim id -> (paper, location in the paper). Only confirmed locations: "abstract" where the
# claim restates the abstract, "authors' code"/"authors' README" where it comes from there.
CLAIM_SOURCES: dict[str, tuple[str, str]] = {
    # GRPO family (grpo_family, tiny_grpo)
    "rloo_equals_scaled_dr_grpo": ("Dr.GRPO", "Appendix A (G/(G-1) A~ = A^RLOO)"),
    "rloo_gradient_unbiased": ("Dr.GRPO", "Appendix A, Eq. 5 (derived from it)"),
    "dr_grpo_gradient_shrink": ("Dr.GRPO", "Appendix A (derived from it)"),
    "all_methods_learn": (
        "Dr.GRPO", "Sec. 3.2, Figure 6; with DAPO arXiv:2503.14476 Sec. 4.2, Table 1"),
    "rl_raises_pass1": ("GRPO", "Sec. 4.2 (Table 5, RL vs SFT)"),
    "pass_at_large_k": ("GRPO", "Sec. 5.2.2 (Figure 7)"),
    # positive controls that restate DeepSeekMath's RL-over-SFT result
    "small_phase1_raises_pass1": ("GRPO", "Sec. 4.2 (Table 5, RL vs SFT)"),
    "small_grpo_raises_pass1": ("GRPO", "Sec. 4.2 (Table 5, RL vs SFT)"),
    "cures_small_grpo_beats_base": ("GRPO", "Sec. 4.2 (Table 5, RL vs SFT)"),
    "e3_small_grpo_beats_base": ("GRPO", "Sec. 4.2 (Table 5, RL vs SFT)"),
    "drgrpo_grpo_raises_pass1": ("GRPO", "Sec. 4.2 (Table 5, RL vs SFT)"),
    "fp32_raises_pass1": ("GRPO", "Sec. 4.2 (Table 5, RL vs SFT)"),
    "small_grpo_g8_raises_pass1": ("GRPO", "Sec. 4.2 (Table 5, RL vs SFT)"),
    "roll_grpo_raises_pass1": ("GRPO", "Sec. 4.2 (Table 5, RL vs SFT)"),
    "vanilla_raises_pass1": ("GRPO", "Sec. 4.2 (Table 5, RL vs SFT)"),
    "april_prefix_sync_learns": ("GRPO", "Sec. 4.2 (Table 5, RL vs SFT)"),
    "zoo_grpo_learns": ("GRPO", "Sec. 4.2 (Table 5, RL vs SFT)"),
    "zoo_small_grpo_learns": ("GRPO", "Sec. 4.2 (Table 5, RL vs SFT)"),
    "areal_small_sync_learns": ("AReaL", "Sec. 6.2, Table 1 (Sync.AReaL vs base model)"),
    # MC-GRPO
    "flip_reduction_g2": ("MC-GRPO", "abstract"),
    "median_lowers_flips_every_g": ("MC-GRPO", "Sec. 2, Fig. 2(b-d) (v1)"),
    "g2_matches_g8_within_1pct": ("MC-GRPO", "abstract; Sec. 1; Sec. 4.2, Table 1 (v1)"),
    "mc_grpo_improves_g2": ("MC-GRPO", "Sec. 4.2, Table 1 (v1)"),
    "mad_binary_one_over_eps": ("MC-GRPO", "authors' code"),
    # DARS
    "cumulative_advantage_peak": ("DARS", "abstract"),
    "naive_n32_early_not_final": ("DARS", "abstract"),
    "dars_raises_passk_et": ("DARS", "abstract"),
    "dars_raises_passk_et_equal_budget": ("DARS", "abstract"),
    "dars_raises_passk_hw": ("DARS", "abstract"),
    "dars_raises_passk_hw_equal_budget": ("DARS", "abstract"),
    "breadth_raises_pass1": ("DARS", "abstract"),
    "breadth_keeps_entropy_higher": ("DARS", "abstract"),
    "breadth_keeps_entropy_higher_equal_pass1": ("DARS", "abstract"),
    "dars_b_both": ("DARS", "abstract"),
    "dars_no_extra_cost_at_convergence": (
        "DARS", "abstract; mechanism: authors' code, ray_dars_trainer.py, schedule_ET/HW"),
    "small_dars_no_extra_cost_at_convergence": (
        "DARS", "abstract; mechanism: authors' code, ray_dars_trainer.py, schedule_ET/HW"),
    "dars_breadth_depth_orthogonal": ("DARS", "abstract; numbers: authors' README table"),
    # BroRL
    "mass_balance_first_order": ("BroRL", "Theorem 1 (Sec. 2; proof in Appendix C.1) (v1)"),
    "p_mass_decrease_vanishes": (
        "BroRL", "Sec. 2 (Theorem 1, implication (i); Lemma 2, Corollary 3) (v1)"),
    "p_mass_decrease_vanishes_sampled_pg": (
        "BroRL", "Sec. 2 (Theorem 1, implication (i); Lemma 2, Corollary 3) (v1)"),
    "all_correct_tokens_increase": ("BroRL", "Sec. 4.1 (token-level simulation, Fig. 3) (v1)"),
    "large_n_revives_saturated": ("BroRL", "Sec. 4.2.3 (Table 1, Fig. 1) (v1)"),
    "brorl_revival_equal_rollouts": ("BroRL", "Sec. 4.2.3 (Table 1, Fig. 1) (v1)"),
    "small_revival_equal_rollouts": ("BroRL", "Sec. 4.2.3 (Table 1, Fig. 1) (v1)"),
    # CurES, E3
    "allocation_lowers_gradient_variance": ("CurES", "abstract"),
    "sampling_sets_convergence_rate": ("CurES", "abstract"),
    "cures_fewer_rollouts_to_target": ("CurES", "abstract"),
    "e3_entropy_within_band": ("E3", "abstract"),
    # rollout systems
    "april_throughput_gain": ("APRIL", "abstract"),
    "april_off_policy_tokens": ("APRIL", "authors' README"),
    "april_prefix_off_policy_tokens": ("APRIL", "authors' README"),
    "april_prefix_accuracy_vs_sync": ("APRIL", "abstract"),
    "april_prefix_treatments_equal": ("APRIL", "authors' code"),
    "areal_speedup": ("AReaL", "abstract"),
    "areal_staleness_bound": ("AReaL", "abstract"),
    "areal_decoupled_stable": ("AReaL", "abstract"),
    "echo_capacity_model": ("ECHO-2", "abstract"),
    "echo_bound_model": DERIVED,
    "echo_cost_reduction": ("ECHO-2", "abstract"),
    "webgym_async_speedup": ("WebGym", "abstract"),
    # SPEC-RL, FP8
    "rollout_speedup_e05": ("SPEC-RL", "abstract"),
    "quality_e05_not_worse": ("SPEC-RL", "abstract"),
    "uncorrected_degrades": ("FP8", "abstract"),
    "tis_recovers": ("FP8", "abstract"),
    "mis_recovers": ("FP8", "abstract"),
    # DynaWeb
    "imagination_sample_efficiency": ("DynaWeb", "Sec. 4.2, Tables 1-2; Sec. 5.3 (v2)"),
    "expert_raises_final_success": ("DynaWeb", "Sec. 5.3, Fig. 3b; Sec. 4.1 (50% "
                                    "replacement) (v2)"),
    "expert_lowers_seed_variance": ("DynaWeb", "Sec. 3.3; Sec. 5.3 (real data as a "
                                    "stabilising regulariser) (v2)"),
    "dreaming_harmful_above_error_threshold": ("DynaWeb", "Sec. 5.1, Fig. 3a; Sec. 5.3; "
                                               "Sec. 5.4 (untrained world model) (v2)"),
    # small-model and toy restatements of abstract claims
    "large_n_raises_throughput": ("BroRL", "Sec. 4.2.4, Table 2 (v1)"),
    "cures_small_final_accuracy": ("CurES", "abstract"),
    "cures_small_rollouts_to_target": ("CurES", "abstract"),
    "cures_small_posterior_finds_informative": ("CurES", "abstract"),
    "e3_small_pass1_vs_grpo": ("E3", "abstract"),
    "e3_small_passk_vs_base": ("E3", "abstract"),
    "e3_small_passk_vs_grpo": ("E3", "abstract"),
    "fixed_temperature_entropy_collapses": ("E3", "abstract"),
    "token_reduction_e05": ("SPEC-RL", "abstract"),
    "tokens_monotone_in_lenience": DERIVED,
    "areal_naive_degrades": ("AReaL", "abstract"),
    "areal_small_decoupled_stable": ("AReaL", "abstract"),
    "areal_small_naive_degrades": ("AReaL", "abstract"),
    # our positive controls: not a paper's claim
    "rl_never_below_base": DERIVED,
    # SAR
    "sar_lowers_fd_vs_tf": ("SAR", "abstract"),
    "sar_one_extra_forward_pass": ("SAR", "abstract"),
    "sar_shrinks_mismatch": ("SAR", "abstract"),
    "full_student_forcing_worse": ("SAR", "abstract"),
    "alternating_schedule_worse": ("SAR", "abstract"),
}


def get(key: str) -> Paper:
    """The paper with short name ``key``; a KeyError lists the known names."""
    try:
        return PAPERS[key]
    except KeyError:
        raise KeyError(f"no bibliography entry for paper {key!r}; known: "
                       f"{', '.join(PAPERS)}") from None


def paper_ref(claim_id: str) -> str:
    """``"arXiv:2508.13755 abstract"`` for a claim with a recorded source, ``"derived"`` for
    our own identities, ``""`` when the location is not confirmed."""
    key, where = CLAIM_SOURCES.get(claim_id, ("", ""))
    if not key:
        return where
    paper = get(key)
    return f"arXiv:{paper.arxiv} {where}" if paper.arxiv else f"{paper.key} {where}"


# ----------------------------------------------------------------------------- docs/papers.md
START = "<!-- bibliography:start (generated by `python -m rlvr_lab.bibliography`) -->"
END = "<!-- bibliography:end -->"


def _link(text: str, url: str) -> str:
    return f"[{text}]({url})" if url else text


def _where(paper: Paper) -> str:
    if paper.code:
        return _link(paper.code.removeprefix("https://github.com/"), paper.code)
    if paper.page:
        return _link("project page", paper.page)
    return "—"


def markdown() -> str:
    """The generated part of ``docs/papers.md``: references, then each claim's source."""
    lines = ["## References", "",
             "| paper | reference | arXiv | authors' code |", "|---|---|---|---|"]
    for p in _PAPERS:
        name = f"{p.key} (in {p.family})" if p.family else p.key
        note = f" {p.note[0].upper()}{p.note[1:]}." if p.note else ""
        ref = f"{p.authors} ({p.year}). *{p.title}*.{note}"
        arxiv = _link(p.arxiv, p.url) if p.arxiv else "not confirmed"
        lines.append(f"| {name} | {ref} | {arxiv} | {_where(p)} |")
    lines += ["", "## Where each claim comes from", "",
              "The `paper_ref` column of `claims.csv`. Claims not listed here have no "
              "confirmed location yet (most restate a table or figure of the paper; the "
              "claim's `paper_value` quotes it).", "",
              "| claim | paper | location |", "|---|---|---|"]
    for claim_id, (key, where) in sorted(CLAIM_SOURCES.items()):
        lines.append(f"| `{claim_id}` | {key or '—'} | {where} |")
    return "\n".join(lines)


def replace_block(text: str, block: str, start: str = START, end: str = END) -> str:
    """``text`` with the part between the ``start`` and ``end`` markers replaced by ``block``."""
    i, j = text.find(start), text.find(end)
    if i < 0 or j < i:
        raise ValueError(f"markers {start!r} ... {end!r} not found in order")
    return text[:i + len(start)] + "\n" + block.strip("\n") + "\n\n" + text[j:]


def docs_path() -> Path:
    return Path(__file__).resolve().parents[1] / "docs" / "papers.md"


def main() -> None:
    path = docs_path()
    path.write_text(replace_block(path.read_text(), markdown()))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
