"""Test-session defaults: small settings everywhere, notebooks included (they inherit the env)."""
import os

os.environ.setdefault("RLVR_LAB_QUICK", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
