"""rlvr_lab: a JAX toolkit to analyse RLVR algorithms (GRPO family and 2025 follow-ups).

An RLVR step is a pipeline of small pure functions — pick prompts, allocate rollouts, sample,
reward, advantage, loss, update. The core (``advantages``, ``losses``, ``metrics``, ``envs``,
``models``, ``train``) holds one version of each stage; each paper's additions live in
``rlvr_lab.papers.<paper>`` and register themselves when imported (below, via ``papers``).
``allocation`` and ``theory`` are thin namespaces over the paper packages.
"""
from rlvr_lab import allocator as _allocator

# before JAX's threads take their malloc arenas (RLVR_LAB_MALLOC=0 leaves malloc alone)
_allocator.tune_at_import()

from rlvr_lab import io as _io  # noqa: E402

_io.enable_compilation_cache()

from rlvr_lab import advantages, losses, metrics  # noqa: E402,F401  (core first: papers register into it)
from rlvr_lab import papers  # noqa: E402,F401
from rlvr_lab import allocation, theory  # noqa: E402,F401

__version__ = "0.1.0"
