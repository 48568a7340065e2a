"""Which slice of a dataset a suite evaluates (:class:`SuiteSpec`: dataset, questions, documents,
seed, the suite's own ragas metrics) and its ``NAME[:N[:MAX_DOCS[:SEED]]]`` form
(:func:`parse_suite_spec`). :mod:`rag_lab.eval.runner` re-exports both.

A range of questions is ``NAME@START-END[:MAX_DOCS[:SEED]]``: questions ``START`` to ``END - 1``
(0-based, end excluded, as a Python slice), e.g. ``hotpotqa_hipporag100@10-30`` is the 11th to the
30th question (20 questions). Its suite is named ``NAME@START-END``. ``@`` is used because ``:``
already separates the count, the documents and the seed, and ``NAME:10:30`` means 10 questions
over 30 documents."""

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
    #: the first question (0-based): ``NAME@START-END`` selects questions START .. START + n_queries - 1
    start: int = 0
    #: the loaded slice, memoised by :meth:`load` (``kb_name`` needs its documents)
    _loaded: Dataset | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.ragas_metrics is not None:
            self.ragas_metrics = [str(m) for m in self.ragas_metrics]
        for fname in ("n_queries", "max_docs"):
            v = getattr(self, fname)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ValueError(f"suite {self.dataset!r}: {fname} must be an integer >= 1, got {v!r}")
        if isinstance(self.start, bool) or not isinstance(self.start, int) or self.start < 0:
            raise ValueError(f"suite {self.dataset!r}: start must be an integer >= 0, got {self.start!r}")
        if not self.name:
            self.name = Path(self.dataset).name if ("/" in self.dataset or "\\" in self.dataset) else self.dataset
            if self.start:
                end = self.start + self.n_queries if self.n_queries is not None else ""
                self.name += f"@{self.start}-{end}"

    def load(self) -> Dataset:
        """The slice (loaded once per spec object)."""
        if self._loaded is None:
            from rag_lab.eval.datasets import load_dataset

            ds = load_dataset(self.dataset)
            if self.start:
                end = self.start + (self.n_queries if self.n_queries is not None else len(ds.queries))
                if end > len(ds.queries) or self.start >= len(ds.queries):
                    raise ValueError(
                        f"suite {self.name!r}: questions {self.start} to {end - 1} asked, "
                        f"but {ds.name} has {len(ds.queries)} questions (0 to {len(ds.queries) - 1})"
                    )
            if self.n_queries is not None or self.max_docs is not None or self.start:
                n = self.n_queries if self.n_queries is not None else len(ds.queries) - self.start
                ds = ds.subset(n, self.max_docs, self.seed, start=self.start)
            self._loaded = ds
        return self._loaded

    @property
    def kb_name(self) -> str:
        """The knowledge base the suite is ingested into, named after its exact document set
        (:func:`~rag_lab.eval.ingest.eval_kb_name`, e.g. ``eval-hotpotqa_hipporag100-32d-1a2b3c4d5e``),
        so it holds this slice's documents and nothing else."""
        base = self.name
        if self.start and self.n_queries is not None:  # a range shares its dataset's KB name for the same documents
            base = base.removesuffix(f"@{self.start}-{self.start + self.n_queries}")
        return eval_kb_name(base, self.load())

    def to_dict(self) -> dict[str, object]:
        d: dict[str, object] = {
            "dataset": self.dataset,
            "n_queries": self.n_queries,
            "max_docs": self.max_docs,
            "seed": self.seed,
            "name": self.name,
        }
        if self.ragas_metrics is not None:
            d["ragas_metrics"] = list(self.ragas_metrics)
        if self.start:
            d["start"] = self.start
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
            int(d.get("start") or 0),
        )


def _range(text: str, name: str) -> tuple[str, int | None, int]:
    """``NAME@START-END`` → ``(NAME, END - START, START)``; a name without ``@`` (or whose part
    after the last ``@`` is a path) is returned as it is."""
    head, at, tail = name.rpartition("@")
    if not at or "/" in tail or "\\" in tail:
        return name, None, 0
    lo, dash, hi = tail.partition("-")
    if not head or not dash or not lo.isdigit() or not hi.isdigit():
        raise ValueError(
            f"dataset spec {text!r}: a question range is NAME@START-END with 0-based integers, END excluded "
            f"(e.g. {head or 'hotpotqa_hipporag100'}@10-30), got {'@' + tail!r}"
        )
    start, end = int(lo), int(hi)
    if end <= start:
        raise ValueError(f"dataset spec {text!r}: END ({end}) must be greater than START ({start})")
    return head, end - start, start


def parse_suite_spec(text: str) -> SuiteSpec:
    """``NAME_OR_PATH[:N_QUERIES[:MAX_DOCS[:SEED]]]`` or ``NAME_OR_PATH@START-END[:MAX_DOCS[:SEED]]``
    (module doc); empty fields keep the default (all)."""
    if "@" in text:
        name_part, _, rest = text.partition(":") if "@" in text.split(":", 1)[0] else (text, "", "")
        name, n, start = _range(text, name_part)
        if start or n is not None:
            nums = rest.split(":") if rest else []
            if len(nums) > 2 or not all(x == "" or x.isdigit() for x in nums):
                raise ValueError(
                    f"dataset spec {text!r}: after NAME@START-END come only [:MAX_DOCS[:SEED]], got {':' + rest!r}"
                )
            vals = [int(x) if x else None for x in nums] + [None] * (2 - len(nums))
            return SuiteSpec(name, n, vals[0], vals[1] or 0, start=start)
    parts = text.split(":")
    i = len(parts)
    while i > 1 and len(parts) - i < 3 and (parts[i - 1] == "" or parts[i - 1].isdigit()):
        i -= 1
    name, nums = ":".join(parts[:i]), parts[i:]
    if not name:
        raise ValueError(f"dataset spec {text!r}: the dataset name or path is empty")
    vals = [int(x) if x else None for x in nums] + [None] * (3 - len(nums))
    return SuiteSpec(name, vals[0], vals[1], vals[2] if vals[2] is not None else 0)
