"""One package per paper: everything a paper adds to the core (theory, allocation rules,
rollout stages, estimators, simulator parts). Importing a paper package registers what it
adds (explicitly, in its ``__init__``); its experiments live in ``simulations/<paper>.py`` and
its notebook in ``notebooks/``.

The packages below register estimators or rollout stages, so they are imported with
``rlvr_lab`` and their names work in any trainer config. The others (``systems``,
``spec_rl``, ``fp8``, ...) register nothing and are imported when used.
"""
from rlvr_lab import discovery

# the packages that register, imported here (:func:`rlvr_lab.discovery.load`), by module name
# (the runner hashes their sources with every experiment whose stages or estimators may come
# from them)
REGISTERING = tuple(m.__name__ for m in discovery.load(
    __name__, ("brorl", "cures", "dars", "e3", "mc_grpo")).values())
