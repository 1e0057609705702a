"""Training: the update core, rollout stages, the bank and sequence trainers, SFT, checkpoints."""
