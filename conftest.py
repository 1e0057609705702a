"""Test-session defaults: small settings everywhere, notebooks included (they inherit the env).

XLA:CPU compiles at backend optimisation level 1 here, as ``rlvr-lab reproduce --quick`` does:
the suite is dominated by compilation (each test and notebook builds its own small programs),
which that level cuts by about 40%; numbers differ from the default level at float rounding
only. A ``XLA_FLAGS`` that already sets the level (e.g. CI's second pass) wins."""
import os

os.environ.setdefault("RLVR_LAB_QUICK", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
_flags = os.environ.get("XLA_FLAGS", "")
if "xla_backend_optimization_level" not in _flags:
    os.environ["XLA_FLAGS"] = f"{_flags} --xla_backend_optimization_level=1".strip()
