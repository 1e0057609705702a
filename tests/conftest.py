"""Shared test setup: make ``tests/reference.py`` and ``tests/small_model.py`` importable, and
the small-model fixtures (the TINY SFT base, trained once per test process, and a per-module
SFT cache folder that starts with that base's checkpoint)."""
import contextlib
import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from small_model import TINY  # noqa: E402

_BASE_CACHE: list[Path] = []   # the session folder holding the trained base, once it exists


@contextlib.contextmanager
def _cache_env(path):
    """``RLVR_LAB_CACHE`` pointed at ``path`` (restored afterwards)."""
    old = os.environ.get("RLVR_LAB_CACHE")
    os.environ["RLVR_LAB_CACHE"] = str(path)
    try:
        yield path
    finally:
        if old is None:
            os.environ.pop("RLVR_LAB_CACHE")
        else:
            os.environ["RLVR_LAB_CACHE"] = old


@pytest.fixture(scope="session")
def base(tmp_path_factory):
    """The TINY SFT base, trained once per test process (training it takes ~10 s; every module
    that needs it would otherwise train it again)."""
    from rlvr_lab.train import sft

    path = tmp_path_factory.mktemp("base_cache")
    with _cache_env(path):
        policy = sft.load_or_train(TINY, verbose=False)
    _BASE_CACHE.append(path)
    return policy


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """``RLVR_LAB_CACHE`` pointed at a fresh folder for the module, holding a copy of the base's
    checkpoint when a test of this process has trained it (so subprocesses and ``load_or_train``
    read it instead of training again); restored afterwards."""
    path = tmp_path_factory.mktemp("cache")
    for src in _BASE_CACHE:
        shutil.copytree(src, path, dirs_exist_ok=True)
    with _cache_env(path):
        yield path
