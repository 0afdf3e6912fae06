"""Families of methods picked by name (samplers, transfer methods), as MetaSchedule picks cost models."""

from __future__ import annotations

from typing import Callable, TypeVar

T = TypeVar("T", bound=type)


def registrar(table: dict[str, type], kind: str) -> Callable[[str], Callable[[T], T]]:
    """A class decorator factory: `@register("name")` adds the class to `table` and sets its `name`."""

    def register(name: str) -> Callable[[T], T]:
        def deco(cls: T) -> T:
            if name in table:
                raise ValueError(f"{kind} {name!r} is already registered ({table[name].__name__})")
            cls.name = name
            table[name] = cls
            return cls

        return deco

    return register
