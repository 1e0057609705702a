"""Files and places: atomic writes, stable hashes, and where outputs and caches live.

Every writer in the toolkit goes through :func:`atomic_write_bytes` (temporary file in the
target folder + rename), so an interrupted run never leaves a half-written file; a write that
fails (full disk, read-only folder, a name too long) is one :class:`WriteError` line. The folders
come from environment variables, read here and nowhere else:

- ``RLVR_LAB_QUICK``: quick (small) settings in notebooks; ``1``/``true`` quick,
  ``0``/``false``/empty full; unset, each caller's default (notebooks call
  ``quick_mode(default=True)``: quick unless ``RLVR_LAB_QUICK=0``).
- ``RLVR_LAB_FIGURES``: where ``rlvr-lab reproduce`` writes figures and claims (default the
  checkout's tracked ``figures/``).
- ``RLVR_LAB_OUTPUT``: where notebooks and ``rlvr-lab run`` write (default
  ``~/.rlvr_lab/output``), so they never touch tracked files.
- ``RLVR_LAB_CACHE``: cached SFT bases and checkpoints (default ``.rlvr_cache/`` in the
  checkout).
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

_FALSE = {"", "0", "false", "no", "off"}
_TRUE = {"1", "true", "yes", "on"}


def repo_root() -> Path | None:
    """The checkout this package runs from (``pyproject.toml`` beside ``rlvr_lab/``), or None."""
    root = Path(__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").exists() else None


def quick_mode(default: bool = False) -> bool:
    """``$RLVR_LAB_QUICK`` parsed once for everybody: 1/true/yes/on -> True, 0/false/no/off/
    empty -> False, unset -> ``default``; anything else is a one-line ValueError."""
    raw = os.environ.get("RLVR_LAB_QUICK")
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"RLVR_LAB_QUICK={raw[:40]!r} is not allowed; use 1/true/yes/on for quick "
                     "or 0/false/no/off/empty for full")


def figures_dir() -> Path:
    """``$RLVR_LAB_FIGURES``, else the checkout's tracked ``figures/``, else ``./figures``."""
    env = os.environ.get("RLVR_LAB_FIGURES")
    if env:
        return Path(env)
    root = repo_root()
    if root is not None and (root / "figures").is_dir():
        return root / "figures"
    return Path.cwd() / "figures"


def claims_csv_argument(argv: list[str], command: str) -> Path | str:
    """The stored ``claims.csv`` a ``python -m`` command was given (``[claims.csv]``, default
    the tracked one), or the one-line error to print (exit 2) when the arguments are wrong."""
    if len(argv) > 1 or (argv and argv[0].startswith("-")):
        return f"error: unexpected arguments {argv!r}; usage: {command} [claims.csv]"
    csv = Path(argv[0]) if argv else figures_dir() / "claims.csv"
    if not csv.is_file():
        return f"error: {csv} is not a file; give a claims.csv"
    return csv


def output_dir() -> Path:
    """Where notebooks and ``rlvr-lab run`` write by default: ``$RLVR_LAB_OUTPUT``, else
    ``~/.rlvr_lab/output`` (never the tracked ``figures/``)."""
    env = os.environ.get("RLVR_LAB_OUTPUT")
    if env:
        return Path(env)
    return Path.home() / ".rlvr_lab" / "output"


def cache_dir() -> Path:
    """``$RLVR_LAB_CACHE``, else ``.rlvr_cache/`` at the checkout root, else ``./.rlvr_cache``."""
    env = os.environ.get("RLVR_LAB_CACHE")
    if env:
        return Path(env)
    root = repo_root()
    return (root if root is not None else Path.cwd()) / ".rlvr_cache"


def xla_cache_dir() -> Path | None:
    """Where compiled XLA programs persist across processes: ``$RLVR_LAB_XLA_CACHE`` (``0`` or
    ``off`` disables it), else ``<cache_dir()>/xla``."""
    env = os.environ.get("RLVR_LAB_XLA_CACHE")
    if env is not None and env.strip().lower() in _FALSE:
        return None
    return Path(env) if env else cache_dir() / "xla"


def append_xla_flag(flag: str) -> bool:
    """Append ``flag`` (``--name=value``) to ``XLA_FLAGS`` unless that name is set there
    already (a user's own setting wins). Takes effect only before the backend starts (XLA
    reads its flags then; child processes inherit them). Returns whether it was added."""
    name = flag.split("=", 1)[0].lstrip("-")
    flags = os.environ.get("XLA_FLAGS", "")
    if name in flags:
        return False
    os.environ["XLA_FLAGS"] = f"{flags} {flag}".strip()
    return True


def enable_compilation_cache() -> Path | None:
    """Turn on JAX's persistent compilation cache at :func:`xla_cache_dir` (programs that took
    over 0.5 s to compile), so experiments, notebooks and test processes that build the same
    program reuse it instead of recompiling. Numbers do not change: the stored executable is
    the one a compile would produce. Leaves a cache the user configured alone."""
    import jax

    path = xla_cache_dir()
    if path is None or jax.config.jax_compilation_cache_dir:
        return None
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    return path


class file_lock:
    """An exclusive ``flock`` on ``path`` held for a ``with`` block, so processes that would
    do the same work (train one SFT base, update one timings file) take turns; a no-op where
    ``fcntl`` does not exist."""

    def __init__(self, path):
        self.path, self.handle = Path(path), None

    def __enter__(self):
        try:
            import fcntl
        except ImportError:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.handle = open(self.path, "a")
        fcntl.flock(self.handle, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        if self.handle is not None:
            self.handle.close()         # closing releases the lock


def stable_hash(obj: Any) -> str:
    """Short SHA-256 of a JSON-able description (sorted keys; other objects via ``str``)."""
    text = json.dumps(obj, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def set_default_mode(path: str | Path) -> None:
    """Give a temporary file (created 0600 by mkstemp) the mode a plain ``open`` would."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)


class WriteError(OSError):
    """A file could not be written (full disk, read-only folder, a name too long, ...); the
    message is one line, ``cannot write <path>: <reason>``, and nothing half-written is left
    under the target's folder."""


def _write_error(path: Path, err: BaseException) -> WriteError:
    if isinstance(err, WriteError):
        return err
    reason = getattr(err, "strerror", None) or str(err) or type(err).__name__
    shown = str(path) if len(str(path)) <= 160 else str(path)[:157] + "..."
    out = WriteError(f"cannot write {shown}: {reason}")
    out.errno = getattr(err, "errno", None)
    return out


def _tmp_prefix(path: Path) -> str:
    # short enough that the temporary name fits wherever the final name does
    return f".{path.name[:32]}."


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` via a temporary file in the same folder and a rename.

    Any failure (no space, read-only folder, name too long) is a :class:`WriteError` with
    one line naming the path and the reason; the temporary file is removed (the previous
    file, if any, is left as it was)."""
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_tmp_prefix(path), suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        set_default_mode(tmp)
        os.replace(tmp, path)
    except BaseException as err:
        if tmp is not None:
            try:
                Path(tmp).unlink(missing_ok=True)
            except OSError:
                pass
        if isinstance(err, OSError):
            raise _write_error(path, err) from None
        raise
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    """:func:`atomic_write_bytes` for text (UTF-8)."""
    return atomic_write_bytes(path, text.encode())


def atomic_save(path: str | Path, write: Callable[[str], Any]) -> Path:
    """Atomically create ``path`` with ``write(tmp_path)`` (e.g. ``fig.savefig``).

    ``write`` renders into a private temporary folder (the system's), never into the target
    folder; the bytes are then put in place by :func:`atomic_write_bytes`. So a slow render
    leaves no temporary name in the output folder, and a folder that became read-only or a
    full disk meanwhile is one :class:`WriteError` with nothing left behind."""
    path = Path(path)
    with tempfile.TemporaryDirectory(prefix="rlvr_lab_") as stage:
        tmp = os.path.join(stage, "out" + path.suffix[:16])
        try:
            write(tmp)
            data = Path(tmp).read_bytes()
        except OSError as err:
            raise _write_error(path, err) from None
    return atomic_write_bytes(path, data)
