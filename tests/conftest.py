"""Shared test setup: make ``tests/reference.py`` and ``tests/small_model.py`` importable, and
the small-model fixtures (a per-module SFT cache folder and the TINY SFT base)."""
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from small_model import TINY  # noqa: E402


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """``RLVR_LAB_CACHE`` pointed at a fresh folder for the module (restored afterwards)."""
    path = tmp_path_factory.mktemp("cache")
    old = os.environ.get("RLVR_LAB_CACHE")
    os.environ["RLVR_LAB_CACHE"] = str(path)
    yield path
    if old is None:
        os.environ.pop("RLVR_LAB_CACHE")
    else:
        os.environ["RLVR_LAB_CACHE"] = old


@pytest.fixture(scope="module")
def base(cache):
    """The TINY SFT base, trained once per module into that module's cache."""
    from rlvr_lab.train import sft

    return sft.load_or_train(TINY, verbose=False)
