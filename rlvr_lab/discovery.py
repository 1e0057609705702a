"""The one way rlvr_lab finds plug-in modules: paper packages, experiments, benchmarks, tasks.

:func:`load` imports named modules of a package, or every module of its folder, optionally
importing the package itself from a given folder first (the ``simulations`` experiments,
which sit next to ``rlvr_lab`` and must not be shadowed by another folder of that name).
Users: :mod:`rlvr_lab.papers` (the packages that register estimators and stages),
:func:`rlvr_lab.experiments.load_all` (``simulations/``), :func:`rlvr_lab.benchmarks.load_all`
and :func:`rlvr_lab.envs.tasks.task_module`.

Errors are one line: a module that fails to import raises ``ImportError("cannot import
<module>: <type>: <message>")`` (the original exception chained), or, with ``errors=`` a
dict, is recorded there as ``{name: "<type>: <message>"}`` and skipped so the other modules
still load.
"""
from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType


def _package_at(package: str, path: Path) -> ModuleType:
    """``package`` imported from the folder ``path`` (the one already imported when it is
    that folder's)."""
    path = Path(path).resolve()
    loaded = sys.modules.get(package)
    if loaded is not None:
        paths = [Path(p).resolve() for p in getattr(loaded, "__path__", [])]
        if path in paths:
            return loaded
        raise ImportError(f"a different package named {package!r} is already imported "
                          f"(from {', '.join(map(str, paths)) or loaded!r}); the one wanted "
                          f"is in {path}")
    init = path / "__init__.py"
    if not init.is_file():
        raise ImportError(f"no package {package!r}: {init} does not exist")
    spec = importlib.util.spec_from_file_location(package, init,
                                                  submodule_search_locations=[str(path)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[package] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[package]
        raise
    return module


def load(package: str, names: Iterable[str] | None = None, *, path: str | Path | None = None,
         errors: dict[str, str] | None = None) -> dict[str, ModuleType]:
    """Import modules of ``package`` and return them as ``{name: module}``, in order.

    ``names``: the modules to import, in that order; None: every module of the package's
    folder whose name does not start with ``_``, sorted by name. ``path``: the package's folder;
    the package is imported from there under its own name (so its modules' ``from package
    import ...`` work), and it is an ImportError if a package of that name is already imported
    from elsewhere or the folder has no ``__init__.py``. ``errors``: record failures there
    (``"__init__"`` for the package itself) instead of raising.
    """
    def failed(name: str, err: BaseException) -> None:
        if errors is None:
            where = package if name == "__init__" else f"{package}.{name}"
            raise ImportError(f"cannot import {where}: {type(err).__name__}: {err}") from err
        errors[name] = f"{type(err).__name__}: {err}"

    try:
        pkg = (_package_at(package, Path(path)) if path is not None
               else importlib.import_module(package))
    except Exception as err:  # noqa: BLE001 - reported or re-raised as one line
        failed("__init__", err)
        return {}
    if names is None:
        names = sorted(info.name for info in pkgutil.iter_modules(pkg.__path__)
                       if not info.name.startswith("_"))
    out: dict[str, ModuleType] = {}
    for name in names:
        try:
            out[name] = importlib.import_module(f"{package}.{name}")
        except Exception as err:  # noqa: BLE001 - reported or re-raised as one line
            failed(name, err)
    return out
