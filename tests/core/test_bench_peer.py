"""`rlvr-lab bench --peer`: bad input, the shared workload's sizes, the TRL reward function, and
(where TRL is installed) one step of each side; the study seed-steps line's config."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

from rlvr_lab import benchmarks, cli
from rlvr_lab.benchmarks import peer, rl_step


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_unknown_peer_is_one_line_naming_the_allowed_ones(capsys):
    assert cli.main(["bench", "--peer", "nonsense"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "'nonsense'" in line and "allowed: trl" in line


def test_peer_not_installed_names_the_extra(monkeypatch, capsys):
    monkeypatch.setattr(peer, "missing_modules", lambda name: ["trl", "torch"])
    assert cli.main(["bench", "--peer", "trl"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "trl, torch" in line and "rlvr-lab[peer]" in line and "'peer' extra" in line


def test_peer_rejects_only_and_save_before_any_work(monkeypatch, capsys):
    monkeypatch.setattr(peer, "missing_modules", lambda name: [])
    monkeypatch.setattr(peer, "run", lambda *a, **k: pytest.fail("ran the peer bench"))
    for extra in (["--save"], ["--only", "rl_step_mfu"]):
        assert cli.main(["bench", "--peer", "trl", *extra]) == 2
        assert extra[0] in _one_error_line(capsys.readouterr().err)
    assert cli.main(["bench", "--peer", "trl", "--peer", "trl"]) == 2
    assert "given twice" in _one_error_line(capsys.readouterr().err)


def test_peer_json_is_one_record(monkeypatch, capsys):
    import json

    monkeypatch.setattr(peer, "missing_modules", lambda name: [])
    monkeypatch.setattr(peer, "run", lambda name, quick: benchmarks.Measure(
        "peer_trl", 3.0, f"{name} quick={quick}"))
    assert cli.main(["bench", "--peer", "trl", "--quick", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == [{"name": "peer_trl", "ratio": 3.0, "details": "trl quick=True",
                                "goal": None, "quick": True}]
    assert "peer_trl: 3 x (trl quick=True)" in err


def test_peer_errors_from_a_command_line_without_traceback():
    entry = "import sys; from rlvr_lab.cli import main; sys.exit(main())"
    env = {**os.environ, "RLVR_LAB_MALLOC_TUNING": "0"}
    bad = subprocess.run([sys.executable, "-c", entry, "bench", "--peer", "nonsense"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert "allowed: trl" in _one_error_line(bad.stderr)


def test_peer_workload_is_the_issue_size():
    work = peer.workload()
    mc = work.model_config
    assert (mc.d_model, mc.n_layers, mc.n_heads, mc.vocab_size) == (128, 4, 4, 26)
    assert (work.num_prompts, work.num_generations, work.completions) == (8, 8, 64)
    assert (work.prompt_width, work.max_new_tokens) == (8, 32)
    cfg = work.config
    assert cfg.beta == 0.0 and cfg.num_iterations == cfg.num_minibatches == 1
    assert 0.75e6 < work.num_params() < 0.85e6
    # the GPT-2 of the TRL side: same shape, plus attention biases (4 x d_model a layer)
    hf = work.hf_config()
    assert (hf["n_embd"], hf["n_layer"], hf["n_head"], hf["n_inner"]) == (128, 4, 4, 512)
    assert (hf["vocab_size"], hf["n_positions"]) == (26, 40) and hf["tie_word_embeddings"]
    assert work.hf_num_params() - work.num_params() == 4 * 4 * 128
    assert work.step_flops() == pytest.approx(rl_step.step_flops(cfg))


def test_verifier_reward_reads_completion_ids_like_our_trainer():
    from rlvr_lab.envs import tasks, tokenizer

    pool = tasks.generate("arithmetic", np.random.default_rng(0), 3, (1, 2))
    reward = peer.verifier_reward(pool, 32)
    right = tokenizer.encode(pool[0].solution) + [tokenizer.EOS]
    wrong = tokenizer.encode("0>0") + [tokenizer.EOS]
    cut = tokenizer.encode(pool[1].solution)            # no EOS: cut off, not correct
    out = reward(prompts=None, completions=None, completion_ids=[right, wrong, cut],
                 problem=[0, 0, 1], trainer_state=None)
    assert out == [1.0, 0.0, 0.0]


def test_study_seed_steps_line_is_registered_with_the_quick_arm():
    assert "small_study_seed_steps" in benchmarks.names()
    cfg = rl_step.study_config()
    mc = cfg.base.model_config()
    assert (mc.d_model, mc.n_layers) == (64, 2)
    assert (cfg.num_prompts, cfg.num_generations, cfg.num_minibatches) == (32, 8, 2)
    assert cfg.beta == 0.0 and rl_step.STUDY_SEEDS == 8


def test_study_bases_line_is_registered_with_the_full_plans_first_look():
    from simulations import tiny_grpo

    assert "small_study_bases" in benchmarks.names()
    plan = tiny_grpo.FULL_PLAN
    assert (rl_step.STUDY_BASES, rl_step.STUDY_SEEDS_PER_BASE) == (plan.bases,
                                                                  plan.seeds_per_base)


def test_bank_line_has_no_goal_and_says_what_bounds_it():
    from rlvr_lab.benchmarks import bandit

    assert "retired" in bandit.RETIRED_GOAL and "seed-minor" in bandit.RETIRED_GOAL


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("trl") is None, reason="TRL not installed "
                    "(pip install 'rlvr-lab[peer]')")
def test_one_step_of_each_side_with_trl(tmp_path):
    from rlvr_lab.envs import tasks

    work = peer.workload()
    pool = tasks.generate("arithmetic", np.random.default_rng(0), 16, (1, 2))
    trainer = peer.trl_trainer(work, pool, str(tmp_path), 1)
    assert sum(p.numel() for p in trainer.model.parameters()) == work.hf_num_params()
    assert trainer.args.per_device_train_batch_size == 64 and trainer.args.beta == 0.0
    assert not trainer.args.bf16 and not trainer.args.gradient_checkpointing
    measure = peer.compare(steps=1, warmup=0, phase_repeats=1)
    assert measure.name == "peer_trl" and measure.ratio > 0 and measure.goal is None
    assert "1 step each" in measure.details and "TRL generate" in measure.details
    assert "a GPT-2 of 0.80M" in measure.details
