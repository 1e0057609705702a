"""Training loops: ``make_train(config) -> train(key)`` for the bandit and sequence settings, SFT."""
