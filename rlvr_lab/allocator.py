"""glibc malloc settings that the compiled training step's speed depends on.

XLA:CPU allocates and frees large temporaries at every step; with glibc's defaults they come
from fresh ``mmap`` calls and are returned at once, so each step pays page faults again. The
command line (``rlvr-lab run/reproduce/bench``) restarts itself with these settings in
``GLIBC_TUNABLES`` (:func:`rlvr_lab.cli.malloc_tuned_env`).
"""
from __future__ import annotations

# GLIBC_TUNABLES names -> values
MALLOC_TUNABLES = {
    "glibc.malloc.hugetlb": "1",                    # transparent huge pages for malloc'd memory
    "glibc.malloc.arena_max": "1",                  # one arena: XLA's threads share the heap
    "glibc.malloc.mmap_max": "0",                   # large blocks from the heap, not mmap
    "glibc.malloc.trim_threshold": str(1 << 30),    # keep up to 1 GiB of freed heap for reuse
}

# mallopt(3) parameters (glibc's malloc.h) for the settings above that mallopt can change;
# transparent huge pages (glibc.malloc.hugetlb) exist only as a tunable read at start-up
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_MMAP_MAX, M_ARENA_MAX = -1, -3, -4, -8
MALLOPT_SETTINGS = (
    (M_ARENA_MAX, 1, "arena_max"),
    (M_MMAP_MAX, 0, "mmap_max"),
    (M_TRIM_THRESHOLD, 1 << 30, "trim_threshold"),
)
OPT_OUT = "RLVR_LAB_MALLOC"   # "0": leave malloc as the process started it
_state: dict[str, object] = {}


def tune_in_process(*, libc=None, environ=None, quiet: bool = False) -> str:
    """Apply the malloc settings to this process with ``mallopt`` (glibc), once.

    The command line restarts itself with ``GLIBC_TUNABLES``; a script or notebook cannot, so
    ``import rlvr_lab`` calls this (:func:`tune_at_import`) and the trainers call it again on
    first use (a no-op once done). Returns what happened, in one line: ``"tuned"``
    (every setting applied), ``"tuned except ..."``, ``"off (RLVR_LAB_MALLOC=0)"``,
    ``"already tuned by GLIBC_TUNABLES"`` or ``"not applied: <why>"`` (e.g. not glibc). The
    line is printed once when the settings cannot apply; ``quiet`` neither prints nor keeps
    that outcome, so the next call (a trainer's) says it. ``libc`` / ``environ``: for tests.
    """
    import os

    if "result" in _state and libc is None:
        return str(_state["result"])
    environ = os.environ if environ is None else environ
    setting = environ.get(OPT_OUT, "1")
    if setting not in ("0", "1"):
        raise ValueError(f"{OPT_OUT}={setting!r} is not allowed; use 1 (tune malloc in "
                         "process, the default) or 0 (leave it)")
    if setting == "0":
        result = f"off ({OPT_OUT}=0)"
    elif all(f"{k}={v}" in environ.get("GLIBC_TUNABLES", "")
             for k, v in MALLOC_TUNABLES.items()):
        result = "already tuned by GLIBC_TUNABLES"
    else:
        result = _mallopt_all(libc)
        if result.startswith("not applied"):
            if quiet:
                return result
            print(f"rlvr_lab: malloc settings {result}; set {OPT_OUT}=0 to silence this line")
    if libc is None:
        _state["result"] = result
    return result


def tune_at_import() -> None:
    """:func:`tune_in_process`, quietly, when the package is imported: before JAX starts the
    threads that run compiled programs. Each such thread takes a malloc arena on its first
    allocation and keeps it, so settings applied later (at a trainer's first use) reach only
    part of the heap: the peer workload's step took 150 ms with the settings applied at the
    trainer, 132 ms with them applied at import, 130 ms under the command line's
    ``GLIBC_TUNABLES`` (2-core Intel Xeon; the rest is transparent huge pages, which only the
    start-up tunable turns on). A bad ``RLVR_LAB_MALLOC`` is left to the trainer's call, which
    names it in a one-line error: importing the package never fails on it."""
    try:
        tune_in_process(quiet=True)
    except ValueError:
        pass


def _mallopt_all(libc) -> str:
    if libc is None:
        import ctypes
        import ctypes.util
        import platform

        if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
            return f"not applied: {platform.system()} without glibc has no mallopt to call"
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        except OSError as err:
            return f"not applied: libc could not be loaded ({err})"
    failed = [name for param, value, name in MALLOPT_SETTINGS if libc.mallopt(param, value) != 1]
    if len(failed) == len(MALLOPT_SETTINGS):
        return "not applied: mallopt refused every setting"
    return "tuned" if not failed else f"tuned except {', '.join(failed)}"
