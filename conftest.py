"""Test-session defaults: small settings everywhere, notebooks included (they inherit the env).

XLA:CPU compiles at backend optimisation level 1 here, as ``rlvr-lab reproduce --quick`` does:
the suite is dominated by compilation (each test and notebook builds its own small programs),
which that level cuts by about 40%; numbers differ from the default level at float rounding
only. A ``XLA_FLAGS`` that already sets the level (e.g. CI's second pass) wins."""
import os

os.environ.setdefault("RLVR_LAB_QUICK", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

from rlvr_lab.cli import QUICK_XLA_FLAG  # noqa: E402  (no backend starts on import)
from rlvr_lab.io import append_xla_flag  # noqa: E402

append_xla_flag(QUICK_XLA_FLAG)
