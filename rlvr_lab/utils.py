"""Small shared helpers, and the input checks of the numeric API.

Input checks (:func:`check_finite`, :func:`check_number`, :func:`check_unit_interval`) raise a
one-line ``ValueError`` naming the first bad entry and what is allowed. They need concrete
values, so their behaviour depends on how a function is called:

- **eager** (concrete arrays, Python numbers): every check runs;
- **under** ``jit`` / ``vmap`` / ``grad`` (traced values): the checks of *values* are no-ops,
  so a NaN reward propagates as in any JAX function (shape and option-name checks still run:
  they are static). This keeps the jitted trainers free of host synchronisation;
- **under** :func:`checked`: the same checks are staged with ``jax.experimental.checkify``
  and a failure raises the same kind of one-line ``ValueError`` after the jitted call.
"""
from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify
from jax.typing import ArrayLike

_R = TypeVar("_R")

# True while :func:`checked` traces a function: traced checks become checkify.check
_TRACED_CHECKS = contextvars.ContextVar("rlvr_lab_traced_checks", default=False)


def enable_x64() -> AbstractContextManager[Any]:
    """Context manager turning on float64 (``jax.enable_x64`` in new JAX, experimental before)."""
    if callable(getattr(jax, "enable_x64", None)):
        return jax.enable_x64(True)
    from jax.experimental import enable_x64 as legacy  # JAX < 0.7
    return legacy()


# XLA:CPU's backend optimisation level 0: about 40% less compile time, for programs whose
# compile time exceeds their run time (a bank's [K, V] tables, a few hundred steps of few
# seeds). Level-0 code runs 3-10x slower than level 1, so a loop with more work compiles at
# level 1 (:func:`loop_options`). Not for the transformer: its run time grows ~1.5x there.
FAST_COMPILE = {"xla_backend_optimization_level": 0}
LOOP_COMPILE = {"xla_backend_optimization_level": 1}
# Array cells a compiled loop touches (seeds x steps x cells per step) above which level 1
# wins. Measured on the bank trainer (quick experiments, 22 programs): level 1 costs 0.0-0.4 s
# more compile and saves 0.03-0.1 s of run at 2e4-1.6e5 cells, 1-4 s at 5e5-2e7 cells
# (brorl_training: run 3.1 -> 0.28 s, 5.2 -> 0.69 s; bench, 2e7 cells: 2.66 -> 0.32 s).
LOOP_LEVEL_1_CELLS = 5e5


def loop_options(cells: float) -> dict[str, int]:
    """XLA:CPU compile options for a compiled loop touching about ``cells`` array cells in
    all: :data:`FAST_COMPILE` below :data:`LOOP_LEVEL_1_CELLS`, :data:`LOOP_COMPILE` above."""
    return FAST_COMPILE if cells < LOOP_LEVEL_1_CELLS else LOOP_COMPILE


# XLA:CPU options of the small model's KV-cache decoding loop: the defaults (optimisation
# level 2, YNNPACK fusions on). Since one seed's rows are split over host threads
# (:mod:`rlvr_lab.train.seed_threads`), each thread decodes [32 x 128] by [128 x 512] matmuls,
# where YNNPACK beats XLA's own kernels. Measured with the ``rl_step_mfu`` bench shapes,
# YNNPACK off -> on, 4 interleaved processes each: rollout of 1 seed 20.2-20.9 -> 15.1-17.1
# ms, 4 seeds 78-80 -> 68-79 ms, 8 seeds 156-157 -> 131-156 ms; one unsplit 64-row call
# 26.6-27.1 -> 24.9-26.7 ms. (YNNPACK was off here before the row split: then it lost on
# 64-row matmuls, rollout 52 vs 63 ms.) Tokens equal, log-probs differ by float rounding.
DECODE_COMPILE: dict = {}


@functools.lru_cache(maxsize=None)
def _cpu_option_supported(name: str, value: Any) -> bool:
    try:
        jax.jit(lambda x: x + 1).lower(1.0).compile(compiler_options={name: value})
    except Exception:   # noqa: BLE001  (jaxlib raises its own error types for unknown options)
        return False
    return True


def supported_cpu_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` without the entries the installed XLA does not know (checked once each by
    compiling a one-op program), so a newer option degrades to the default on older jaxlib."""
    return {k: v for k, v in options.items() if _cpu_option_supported(k, v)}


def jit_cpu_options(fn: Callable[..., _R], options: dict | None = None,
                    **jit_kwargs: Any) -> Callable[..., _R]:
    """``jax.jit(fn, **jit_kwargs)`` compiled with ``options`` (default :data:`FAST_COMPILE`;
    see also :data:`LOOP_COMPILE`, :data:`DECODE_COMPILE`) on a CPU backend; other backends
    keep their default (the options are CPU trade-offs), and options the installed XLA does
    not know are dropped. The backend is read at the first call, not here: modules build these
    at import, before a program may call ``jax.distributed.initialize`` (which must precede any
    backend start)."""
    cpu_options = FAST_COMPILE if options is None else options
    jitted: dict[bool, Callable[..., _R]] = {}

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> _R:
        # inside another jit the outer program's options apply (JAX refuses nested ones)
        nested = is_traced(*jax.tree.leaves((args, kwargs)))
        if nested not in jitted:
            chosen = (supported_cpu_options(cpu_options) or None
                      if not nested and jax.default_backend() == "cpu" else None)
            jitted[nested] = jax.jit(fn, compiler_options=chosen, **jit_kwargs)
        return jitted[nested](*args, **kwargs)

    return call


def is_traced(*values: Any) -> bool:
    """Whether any of ``values`` is a JAX tracer (inside jit, vmap, grad, scan ...)."""
    return any(isinstance(v, jax.core.Tracer) for v in values)


def _first(v: np.ndarray, bad: np.ndarray) -> str:
    """``value`` or ``value at index (i, j)`` of the first bad entry."""
    i = int(np.flatnonzero(bad.ravel())[0])
    value = v.ravel()[i].item()
    if v.ndim == 0:
        return f"{value!r}"
    return f"{value!r} at index {tuple(int(j) for j in np.unravel_index(i, v.shape))}"


def _staged(ok, message: str, value) -> None:
    """``checkify.check(all(ok))`` while :func:`checked` traces; otherwise nothing."""
    if _TRACED_CHECKS.get():
        flat_ok = jnp.ravel(ok)
        first = jnp.ravel(jnp.broadcast_to(value, jnp.shape(ok)))[jnp.argmin(flat_ok)]
        checkify.check(jnp.all(flat_ok), message + " (first bad value {bad})", bad=first)


def check_finite(x: ArrayLike, what: str, where: ArrayLike | None = None) -> None:
    """One-line ValueError unless every entry of ``x`` (where ``where`` is True) is finite.

    ``where`` (broadcast against ``x``) exempts padding: masked entries may hold anything.
    Traced values are not checked (see the module docstring; :func:`checked` stages the check).
    """
    if is_traced(x, where):
        x = jnp.asarray(x)
        ok = jnp.isfinite(x)
        if where is not None:
            ok = ok | ~jnp.asarray(where, bool)
        _staged(ok, f"{what} must be finite (NaN and +-inf are not allowed)", x)
        return
    v = np.asarray(x)
    if v.dtype == object or not (jnp.issubdtype(v.dtype, jnp.number) or v.dtype == bool):
        raise ValueError(f"{what} must be numeric; got dtype {v.dtype}")
    if not jnp.issubdtype(v.dtype, jnp.inexact):
        return
    if not np.issubdtype(v.dtype, np.inexact):   # bfloat16, float8: NumPy sees no float
        v = v.astype(np.float32)
    bad = ~np.isfinite(v)
    if where is not None:
        bad = bad & np.broadcast_to(np.asarray(where, bool), v.shape)
    if bad.any():
        raise ValueError(f"{what}={_first(v, bad)} is not allowed; it must be finite (no NaN "
                         f"or +-inf{'' if where is None else '; masked entries are ignored'})")


def check_number(value: ArrayLike | None, what: str, allowed: str = "",
                 ok: Callable[[Any], ArrayLike] | None = None, *, integer: bool = False,
                 optional: bool = False) -> None:
    """One-line ValueError unless every entry of ``value`` is a finite real number (a whole
    number when ``integer``) with ``ok(entries)`` True; ``allowed`` describes ``ok``.

    Booleans are not numbers here (``eps=True`` is rejected). ``ok`` gets a float64 NumPy
    array. ``optional`` lets ``None`` pass. Traced values pass (see the module docstring).
    """
    if value is None and optional:
        return
    kind = "an integer" if integer else "a finite number"
    rule = f"{kind}{' ' + allowed if allowed else ''}"
    if is_traced(value):
        x = jnp.asarray(value)
        good = jnp.isfinite(x.astype(jnp.result_type(float)))
        if integer:
            good = good & (jnp.floor(x) == x)
        if ok is not None:
            good = good & ok(x)
        _staged(good, f"{what} must be {rule}", x)
        return
    v = np.asarray(value)
    if v.dtype == bool or isinstance(value, bool) or not jnp.issubdtype(v.dtype, jnp.number) \
            or jnp.issubdtype(v.dtype, jnp.complexfloating):
        raise ValueError(f"{what}={_short(value)} is not allowed; it must be {rule}")
    if v.size == 0:
        raise ValueError(f"{what} is empty; it must be {rule}")
    f = v.astype(np.float64)
    good = np.isfinite(f)
    if integer:
        good &= np.floor(np.where(good, f, 0)) == np.where(good, f, 0)
    if ok is not None:
        with np.errstate(invalid="ignore"):
            good &= np.asarray(ok(np.where(good, f, 0.0)), bool)
    if not good.all():
        raise ValueError(f"{what}={_first(v, ~good)} is not allowed; it must be {rule}")


def check_real(x: Any, what: str) -> None:
    """One-line error unless ``x`` is a (rectangular) array of real numbers: TypeError for
    complex (the imaginary part would be dropped silently), text or objects; ValueError for a
    ragged nest of lists. Booleans and integers are real. Traced values are checked by
    dtype."""
    if is_traced(x) or hasattr(x, "dtype"):
        dtype = x.dtype
    else:
        try:
            dtype = np.asarray(x).dtype
        except (ValueError, TypeError):
            raise ValueError(f"{what}={_short(x)} is not allowed; it must be a rectangular "
                             "array of real numbers") from None
    if jnp.issubdtype(dtype, jnp.complexfloating):
        raise TypeError(f"{what} of dtype {dtype} is not allowed; it must be real (complex "
                        "values would lose their imaginary part)")
    if not (jnp.issubdtype(dtype, jnp.number) or jnp.issubdtype(dtype, jnp.bool_)):
        raise TypeError(f"{what}={_short(x)} (dtype {dtype}) is not allowed; it must hold real "
                        "numbers")


def check_shapes(expected: tuple[int, ...], what: str, shape: tuple[int, ...], *,
                 broadcast: bool = False) -> None:
    """One-line ValueError unless ``shape`` equals ``expected`` (or, with ``broadcast``,
    broadcasts to it)."""
    shape, expected = tuple(shape), tuple(expected)
    if shape == expected:
        return
    if broadcast:
        try:
            if np.broadcast_shapes(shape, expected) == expected:
                return
        except ValueError:
            pass
    rule = "broadcast to" if broadcast else "equal"
    raise ValueError(f"{what} of shape {shape} is not allowed; it must {rule} shape {expected}")


def check_key(key: Any, what: str = "key") -> None:
    """One-line TypeError unless ``key`` is a typed PRNG key (``jax.random.key``) or a raw
    ``uint32[2]`` key (``jax.random.PRNGKey``)."""
    dtype = getattr(key, "dtype", None)
    if dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        return
    if dtype is not None and dtype == jnp.uint32 and tuple(getattr(key, "shape", ())) == (2,):
        return
    raise TypeError(f"{what}={_short(key)} is not allowed; pass a PRNG key, e.g. "
                    "jax.random.key(0)")


def _short(value, limit: int = 60) -> str:
    text = " ".join(repr(value).split())     # one line (NumPy reprs wrap rows)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def check_unit_interval(value: ArrayLike, what: str) -> None:
    """One-line ValueError naming the first entry of ``value`` outside [0, 1] (NaN included).

    Traced values cannot be checked and pass through (see the module docstring).
    """
    if is_traced(value):
        x = jnp.asarray(value)
        _staged((x >= 0) & (x <= 1), f"{what} must lie in [0, 1]", x)
        return
    v = np.asarray(value, dtype=float)
    bad = ~((v >= 0) & (v <= 1))
    if np.any(bad):
        raise ValueError(f"{what}={v.ravel()[np.flatnonzero(bad.ravel())[0]]} is not allowed; "
                         f"it must lie in [0, 1]")


def checked(fn: Callable[..., _R]) -> Callable[..., _R]:
    """``fn`` jitted with its input checks staged by ``jax.experimental.checkify``.

    ``checked(advantages.grpo)(rewards)`` runs ``grpo`` under ``jit`` and raises the one-line
    ``ValueError`` of the eager check when an input fails (e.g. a NaN reward), which plain
    ``jax.jit(advantages.grpo)`` would let through as NaN advantages. Positional arguments are
    arrays (traced); keyword arguments are static options (hashable, one compilation each).
    Only checks written with this module's helpers are staged; the cost is one reduction per
    checked input and a host read of the error after each call. ``fn`` must not already be
    wrapped in ``jax.jit`` (its cached trace would have no checks).
    """
    compiled: dict = {}

    def run(*args: Any, **options: Any) -> _R:
        key = tuple(sorted(options.items()))
        if key not in compiled:
            def traced(*a: Any) -> _R:
                token = _TRACED_CHECKS.set(True)
                try:
                    return fn(*a, **options)
                finally:
                    _TRACED_CHECKS.reset(token)
            compiled[key] = jax.jit(checkify.checkify(traced, errors=checkify.user_checks))
        err, out = compiled[key](*args)
        message = err.get()
        if message is not None:
            raise ValueError(message.splitlines()[0].replace(" (`check` failed)", ""))
        return out

    return functools.wraps(fn)(run)
