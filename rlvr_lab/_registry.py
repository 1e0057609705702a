"""The one registry of rlvr_lab: named, swappable pieces grouped by category.

Categories in use: ``estimator`` (advantage estimators), ``loss`` (policy losses), ``kl``
(KL estimators), ``stage`` (rollout stages), ``experiment``, ``benchmark``. A paper package
registers what it adds when it is imported (``rlvr_lab.papers`` imports them all);
:func:`category` and :func:`catalogue` read the whole table.
"""
from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_CATEGORIES: dict[str, "Registry"] = {}


class Registry(Generic[T]):
    """Maps names to objects; an unknown name raises a ValueError listing the valid ones.

    ``category`` keys the registry in the shared table; ``what`` names its items in errors
    (defaults to the category).
    """

    def __init__(self, category: str, what: str | None = None) -> None:
        self.category = category
        self.kind = what or category
        self._items: dict[str, T] = {}
        _CATEGORIES[category] = self

    def register(self, name: str, obj: T | None = None, *,
                 overwrite: bool = False) -> T | Callable[[T], T]:
        """Register ``obj`` under ``name`` (usable as a decorator when ``obj`` is omitted).

        A name taken by another object raises unless ``overwrite=True`` (re-running a
        notebook cell that registers a new version of a function).
        """
        if obj is None:
            def deco(o: T) -> T:
                self.register(name, o, overwrite=overwrite)
                return o
            return deco
        if not isinstance(name, str) or not name:
            raise ValueError(f"{self.kind} name {name!r} must be a non-empty string")
        if name in self._items and self._items[name] is not obj and not overwrite:
            raise ValueError(f"{self.kind} {name!r} is already registered; pass "
                             "overwrite=True to replace it")
        self._items[name] = obj
        return obj

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except (KeyError, TypeError):
            raise ValueError(
                f"unknown {self.kind} {name!r}; valid: {', '.join(sorted(self._items))}"
            ) from None

    def resolve(self, name_or_fn: str | Callable[..., Any]) -> T | Callable[..., Any]:
        """A registered object by name; a callable passes through unchanged."""
        return name_or_fn if callable(name_or_fn) else self.get(name_or_fn)

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items


def category(name: str) -> Registry[Any]:
    """The registry of one category (``estimator``, ``loss``, ``stage``, ...)."""
    try:
        return _CATEGORIES[name]
    except KeyError:
        raise ValueError(f"unknown registry category {name!r}; valid: "
                         f"{', '.join(sorted(_CATEGORIES))}") from None


def register(category_name: str, name: str, obj: Any = None, *,
             overwrite: bool = False) -> Any:
    """``register("stage", "mine", stage)``: register into one category of the table."""
    return category(category_name).register(name, obj, overwrite=overwrite)


def catalogue() -> dict[str, list[str]]:
    """Every category with its registered names."""
    return {c: r.names() for c, r in sorted(_CATEGORIES.items())}


def check_choice(what: str, value: object, allowed: Collection[Any]) -> None:
    """One-line ValueError naming the bad value and the allowed ones."""
    if value not in allowed:
        raise ValueError(f"{what}={value!r} is not allowed; choose one of "
                         f"{', '.join(map(repr, allowed))}")


def positive_int(name: str, value: object) -> None:
    """One-line ValueError unless ``value`` is a positive integer (bools are not)."""
    import numpy as np

    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name}={value!r} must be a positive integer")
