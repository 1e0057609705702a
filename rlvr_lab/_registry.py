"""A tiny named registry shared by estimators, losses, KL estimators and experiments."""
from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps names to objects; an unknown name raises a ValueError listing the valid ones."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str, obj: T | None = None):
        if obj is None:
            def deco(o: T) -> T:
                self.register(name, o)
                return o
            return deco
        if name in self._items and self._items[name] is not obj:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._items[name] = obj
        return obj

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except (KeyError, TypeError):
            raise ValueError(
                f"unknown {self.kind} {name!r}; valid: {', '.join(sorted(self._items))}"
            ) from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items


def check_choice(what: str, value, allowed) -> None:
    """One-line ValueError naming the bad value and the allowed ones."""
    if value not in allowed:
        raise ValueError(f"{what}={value!r} is not allowed; choose one of "
                         f"{', '.join(map(repr, allowed))}")


def positive_int(name: str, value) -> None:
    """One-line ValueError unless ``value`` is a positive integer (bools are not)."""
    import numpy as np

    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name}={value!r} must be a positive integer")
