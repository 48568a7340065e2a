"""The progress bar evaluations and sweeps advance: what they call on a ``tqdm`` bar."""

from __future__ import annotations

from typing import Protocol

__all__ = ["ProgressBar"]


class ProgressBar(Protocol):
    """The ``tqdm`` methods :func:`rag_lab.eval.runner.evaluate_lab` and the sweeps use."""

    def update(self, n: float = 1) -> object: ...

    def close(self) -> None: ...

    def set_description_str(self, desc: str | None = None, refresh: bool = True) -> None: ...

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None: ...
