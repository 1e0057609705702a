"""The computation of the two-process test, run by each process and by the test itself."""
import dataclasses

import jax
import numpy as np
from small_model import RL, TINY

from rlvr_lab.envs.prompt_bank import PromptBankConfig
from rlvr_lab.papers.roll import distributed as D
from rlvr_lab.train import bandit, sft


def case() -> dict:
    cfg = bandit.BanditConfig(bank=PromptBankConfig(num_prompts=8, vocab_size=6), num_steps=3,
                              batch_size=4, num_generations=4)
    _, m = D.bank_train_seeds(cfg, jax.random.key(0), 3)
    rl = dataclasses.replace(RL, steps=1, eval_every=1)
    run = D.sequence_run(rl, jax.random.key(5), 3, base_policy=sft.load_or_train(TINY,
                                                                               verbose=False))
    return {"acc": np.asarray(m["accuracy"]).tolist(), "loss": run.history["loss"].tolist(),
            "pass1": run.history["pass1"].tolist(),
            "evals": np.asarray(run.evals["pass_at"]).tolist()}
