"""Fields computed on first read (:class:`Deferred`), for the stage diagnostics of
:mod:`rag_lab.types.diagnostics`: a stage may set a bulky field that few runs read to a function of
data it captured; the descriptor computes it once, on the first read."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["Deferred", "deferrable"]

T = TypeVar("T")


class Deferred(Generic[T]):
    """A field value computed on first read: ``compute()`` must depend only on data the caller
    captured (never on objects a later stage may change), so that reading it later gives what
    reading it at once would have given."""

    __slots__ = ("compute",)

    def __init__(self, compute: Callable[[], T]) -> None:
        self.compute = compute


class _DeferrableField(Generic[T]):
    """Descriptor of a dataclass field that may hold a :class:`Deferred`: the instance stores the
    value (or the :class:`Deferred`) under ``_deferrable_<name>``; reading computes a deferred
    value once and stores the result in its place. The field's default is ``None``."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = f"_deferrable_{name}"

    def __get__(self, obj: object | None, owner: type | None = None) -> T | None:
        if obj is None:
            return None  # the dataclass default
        store = obj.__dict__
        value = store.get(self.slot)
        if type(value) is Deferred:
            value = value.compute()
            store[self.slot] = value
        return value

    def __set__(self, obj: object, value: T | Deferred[T] | None) -> None:
        obj.__dict__[self.slot] = value


def deferrable() -> Any:
    """A field that accepts a :class:`Deferred` (see :class:`_DeferrableField`); default ``None``."""
    return _DeferrableField()
