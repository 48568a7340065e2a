"""Which slice of a dataset a suite evaluates (:class:`SuiteSpec`: dataset, questions, documents,
seed, the suite's own ragas metrics) and its ``NAME[:N[:MAX_DOCS[:SEED]]]`` form
(:func:`parse_suite_spec`). :mod:`rag_lab.eval.runner` re-exports both."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_lab.eval.datasets import Dataset
from rag_lab.eval.ingest import eval_kb_name

__all__ = ["SuiteSpec", "parse_suite_spec"]


@dataclass
class SuiteSpec:
    """Which slice of a dataset to evaluate: ``Dataset.subset(n_queries, max_docs, seed)``."""

    dataset: str
    n_queries: int | None = None
    max_docs: int | None = None
    seed: int = 0
    name: str = ""
    #: ragas metrics of this suite (None: the run's list), e.g. the jieba variants for a Chinese slice
    ragas_metrics: list[str] | None = None
    #: the loaded slice, memoised by :meth:`load` (``kb_name`` needs its documents)
    _loaded: Dataset | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.ragas_metrics is not None:
            self.ragas_metrics = [str(m) for m in self.ragas_metrics]
        for fname in ("n_queries", "max_docs"):
            v = getattr(self, fname)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ValueError(f"suite {self.dataset!r}: {fname} must be an integer >= 1, got {v!r}")
        if not self.name:
            self.name = Path(self.dataset).name if ("/" in self.dataset or "\\" in self.dataset) else self.dataset

    def load(self) -> Dataset:
        """The slice (loaded once per spec object)."""
        if self._loaded is None:
            from rag_lab.eval.datasets import load_dataset

            ds = load_dataset(self.dataset)
            if self.n_queries is not None or self.max_docs is not None:
                n = self.n_queries if self.n_queries is not None else len(ds.queries)
                ds = ds.subset(n, self.max_docs, self.seed)
            self._loaded = ds
        return self._loaded

    @property
    def kb_name(self) -> str:
        """The knowledge base the suite is ingested into, named after its exact document set
        (:func:`~rag_lab.eval.ingest.eval_kb_name`, e.g. ``eval-hotpotqa_hipporag100-32d-1a2b3c4d5e``),
        so it holds this slice's documents and nothing else."""
        return eval_kb_name(self.name, self.load())

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "dataset": self.dataset,
            "n_queries": self.n_queries,
            "max_docs": self.max_docs,
            "seed": self.seed,
            "name": self.name,
        }
        if self.ragas_metrics is not None:
            d["ragas_metrics"] = list(self.ragas_metrics)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SuiteSpec:
        rm = d.get("ragas_metrics")
        return cls(
            str(d["dataset"]),
            d.get("n_queries"),
            d.get("max_docs"),
            int(d.get("seed") or 0),
            str(d.get("name") or ""),
            list(rm) if rm is not None else None,
        )


def parse_suite_spec(text: str) -> SuiteSpec:
    """``NAME_OR_PATH[:N_QUERIES[:MAX_DOCS[:SEED]]]``; empty fields keep the default (all)."""
    parts = text.split(":")
    i = len(parts)
    while i > 1 and len(parts) - i < 3 and (parts[i - 1] == "" or parts[i - 1].isdigit()):
        i -= 1
    name, nums = ":".join(parts[:i]), parts[i:]
    if not name:
        raise ValueError(f"dataset spec {text!r}: the dataset name or path is empty")
    vals = [int(x) if x else None for x in nums] + [None] * (3 - len(nums))
    return SuiteSpec(name, vals[0], vals[1], vals[2] if vals[2] is not None else 0)
