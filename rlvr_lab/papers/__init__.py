"""One package per paper: everything a paper adds to the core (theory, allocation rules,
rollout stages, estimators, simulator parts). Importing a paper package registers what it
adds; its experiments live in ``simulations/<paper>.py`` and its notebook in ``notebooks/``."""
