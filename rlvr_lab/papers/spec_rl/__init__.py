"""SPEC-RL: speculative rollouts — last epoch's responses reused as prefixes, verified by
the current policy, on the tiny transformer (:mod:`.speculative`). Registers nothing."""
