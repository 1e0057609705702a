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
