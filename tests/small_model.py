"""The TINY small-model setting shared by the small-model tests (single-digit sums,
completions of 4-6 tokens, an SFT base that trains in seconds)."""
from rlvr_lab.train import sequence, sft

TINY = sft.SFTConfig(difficulties=(1,), d_model=32, n_layers=2, n_heads=2, steps=300,
                     batch_size=32, learning_rate=1e-2, warmup_steps=10, num_train=400,
                     num_heldout=32, gen_slack=1)
RL = sequence.SequenceRLConfig(base=TINY, steps=4, num_prompts=4, num_generations=4,
                               learning_rate=1e-3, warmup_steps=0, eval_every=2, eval_problems=8,
                               eval_samples=4, num_train_problems=64)
