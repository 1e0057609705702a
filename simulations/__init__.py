"""One module per paper; importing a module registers its experiments (see rlvr_lab.experiments)."""
