"""Typed lab diagnostics: one dataclass per stage, stored in ``ChatManage.state.diagnostics``.

Each class names its key in ``state.diagnostics`` (:attr:`StageDiagnostics.KEY`) and a format
:attr:`~StageDiagnostics.VERSION`. :meth:`~StageDiagnostics.to_dict` is the JSON form captures
store (``version`` plus the fields that are set); :meth:`~StageDiagnostics.from_dict` reads it back
and reads captures written before the types existed (no ``version``: version 1). A newer version
than this rag_lab reads raises :class:`DiagnosticsVersionError` naming the key and both versions;
keys this version does not know are kept in :attr:`~StageDiagnostics.extra`, never dropped.

Readers (frames, plots, diffs, tracing) use attributes. Stages fill them in with attributes or
``diag.update(...)``; ``diag["field"]`` / ``diag.get("field")`` also work, so code written against
the former plain dicts keeps running, and an unknown field name is an error naming the class.

A stage may set a bulky field that few runs ever read (the rerank stage's one row per candidate and
its MMR trace) to :class:`Deferred`: a function of data the stage captured, called on the field's
first read. Every reader goes through the attribute (``to_dict``, ``==``, ``repr``, frames,
``dataclasses.replace``), and copying or pickling a record (:meth:`StageDiagnostics.__getstate__`)
computes it first, so a deferred field reads exactly as the value it stands for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from rag_lab.types.deferred import Deferred
from rag_lab.types.deferred import deferrable as _deferrable

__all__ = [
    "DIAGNOSTICS_TYPES",
    "ChatDiagnostics",
    "DataAnalysisDiagnostics",
    "Deferred",
    "DiagnosticsVersionError",
    "EntityExtractionDiagnostics",
    "EntitySearchDiagnostics",
    "FilterTopKDiagnostics",
    "MemoryRecallDiagnostics",
    "MergeDiagnostics",
    "QueryExpansionDiagnostics",
    "QueryUnderstandDiagnostics",
    "RerankDiagnostics",
    "SearchDiagnostics",
    "StageDiagnostics",
    "WebFetchDiagnostics",
    "diagnostics_from_dict",
    "diagnostics_to_dict",
]


class DiagnosticsVersionError(ValueError):
    """A stored diagnostics record is newer than this rag_lab reads."""


@dataclass(eq=False)
class StageDiagnostics:
    """Base of the per-stage diagnostics (see the module docstring)."""

    KEY: ClassVar[str] = ""
    VERSION: ClassVar[int] = 1
    _field_names: ClassVar[frozenset[str] | None] = None

    #: fields of a stored record this version does not know (kept, never dropped)
    extra: dict[str, object] = field(default_factory=dict, repr=False)

    @classmethod
    def _names(cls) -> frozenset[str]:
        names = cls.__dict__.get("_field_names")
        if names is None:  # once per class (stages fill fields in on every question)
            names = frozenset(f.name for f in dataclasses.fields(cls) if f.name != "extra")
            cls._field_names = names
        return names

    # -- serialisation ------------------------------------------------------------------------
    def to_dict(self) -> dict[str, object]:
        """``{"version": N, field: value, ...}`` for the fields that are set (not ``None``)."""
        out: dict[str, object] = {"version": self.VERSION}
        for f in dataclasses.fields(self):
            if f.name == "extra":
                continue
            value = getattr(self, f.name)
            if value is not None:
                out[f.name] = value
        out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, data: object, where: str = "") -> Self:
        """Read :meth:`to_dict` output, or the plain dict an older capture holds."""
        label = where or f"diagnostics[{cls.KEY!r}]"
        if isinstance(data, cls):
            return data
        if not isinstance(data, Mapping):
            raise TypeError(f"{label}: expected an object, got {type(data).__name__}")
        body = dict(data)
        version = body.pop("version", 1)
        if not isinstance(version, int) or version < 1:
            raise ValueError(f"{label}: version {version!r} is not a positive integer")
        if version > cls.VERSION:
            raise DiagnosticsVersionError(
                f"{label}: {cls.__name__} version {version}; this rag_lab reads up to version {cls.VERSION}"
            )
        names = cls._names()
        known = {k: v for k, v in body.items() if k in names}
        obj = cls(**known)
        obj.extra = {k: v for k, v in body.items() if k not in names}
        return obj

    def materialize(self) -> Self:
        """Compute every :class:`Deferred` field now (reading a field does it too); returns self."""
        for f in dataclasses.fields(self):
            getattr(self, f.name)
        return self

    def __getstate__(self) -> dict[str, object]:
        # copy.copy, copy.deepcopy and pickle read the instance state here: deferred fields are
        # computed first, so a copy holds values, never a function of the original's captures
        self.materialize()
        return dict(self.__dict__)

    # -- mapping-style access (stages filling in, code written against plain dicts) ---------
    def _check(self, name: str) -> None:
        if name not in self._names():
            raise KeyError(f"{type(self).__name__} has no field {name!r} (fields: {', '.join(sorted(self._names()))})")

    def __getitem__(self, name: str) -> object:
        if name in self._names() and getattr(self, name) is not None:
            return getattr(self, name)
        if name in self.extra:
            return self.extra[name]
        raise KeyError(name)

    def get(self, name: str, default: object = None) -> object:
        try:
            return self[name]
        except KeyError:
            return default

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __setitem__(self, name: str, value: object) -> None:
        self._check(name)
        setattr(self, name, value)

    def update(self, other: Mapping[str, object] | None = None, **kwargs: object) -> None:
        for name, value in {**dict(other or {}), **kwargs}.items():
            self[name] = value

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StageDiagnostics):
            return type(other) is type(self) and other.to_dict() == self.to_dict()
        if isinstance(other, Mapping):
            mine = self.to_dict()
            mine.pop("version")
            return mine == dict(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable


@dataclass(eq=False)
class QueryUnderstandDiagnostics(StageDiagnostics):
    """QUERY_UNDERSTAND: which model and path, what the offline detector saw, the parse outcome."""

    KEY: ClassVar[str] = "query_understand"
    model: str | None = None
    images: bool | None = None
    #: "offline" when the model does not follow instructions (rule-based detector)
    path: str | None = None
    detected: str | None = None
    skipped: str | None = None
    error: str | None = None
    raw: str | None = None
    finish_reason: str | None = None
    truncated: bool | None = None
    #: the reply was cut and recovered partially
    partial: bool | None = None
    parsed: dict[str, object] | None = None
    #: why the model's rewrite was dropped for the original query (not about the user's message)
    rewrite_rejected: str | None = None


@dataclass(eq=False)
class EntityExtractionDiagnostics(StageDiagnostics):
    """Entity extraction (inner layer of QUERY_UNDERSTAND)."""

    KEY: ClassVar[str] = "extract_entity"
    entity_kb_ids: list[str] | None = None
    skipped: str | None = None
    error: str | None = None
    model_error: str | None = None
    extractor: str | None = None
    raw: str | None = None
    entity: list[str] | None = None


@dataclass(eq=False)
class QueryExpansionDiagnostics(StageDiagnostics):
    """CHUNK_SEARCH query expansion (§4.5): whether it ran, the variants, the results it added."""

    KEY: ClassVar[str] = "query_expansion"
    triggered: bool | None = None
    added: int | None = None
    ids: list[str] | None = None


@dataclass(eq=False)
class SearchDiagnostics(StageDiagnostics):
    """CHUNK_SEARCH: per hybrid-search call (``calls``, in call order) its ``match_count`` and its
    ``vector``, ``keyword`` and ``fused`` lists (fused before the match-count cut) in rank order,
    each hit ``[chunk id, document id, score]`` (may be :class:`Deferred`: built on first read);
    ``results``: the stage's output the same way; ``query``: the text searched."""

    KEY: ClassVar[str] = "search"
    calls: list[dict[str, Any]] | None = _deferrable()
    results: list[list[Any]] | None = None
    #: the query the search ran (the rewrite when query understanding gave one)
    query: str | None = None

    @classmethod
    def from_dict(cls, data: object, where: str = "") -> Self:
        if isinstance(data, list):  # lab captures before the type: a list of fusion records
            return cls(calls=list(data))
        return super().from_dict(data, where)


@dataclass(eq=False)
class EntitySearchDiagnostics(StageDiagnostics):
    """ENTITY_SEARCH: graph nodes and relations found, chunks loaded."""

    KEY: ClassVar[str] = "entity_search"
    entities: list[str] | None = None
    namespaces: list[object] | None = None
    nodes: list[object] | None = None
    candidates: list[str] | None = None
    kept: list[str] | None = None
    dropped: list[Any] | None = None
    errors: list[str] | None = None


@dataclass(eq=False)
class RerankDiagnostics(StageDiagnostics):
    """CHUNK_RERANK: the outcome of the threshold ladder, the composite weights, one row per
    candidate (base / model / composite / final scores, FAQ boost, kept-by, selected) and the MMR
    steps."""

    KEY: ClassVar[str] = "rerank"
    model_id: str | None = None
    candidates: int | None = None
    #: "kept", "top1_fallback", "threshold_degraded", "none_kept", "model_error", "no_candidates", …
    outcome: str | None = None
    error: str | None = None
    threshold: float | None = None
    threshold_used: float | None = None
    fallback_min: float | None = None
    mmr_lambda: float | None = None
    mmr_k: int | None = None
    #: ids of the candidates that passed the threshold, by composite score (may be deferred)
    ranked_ids: list[str] | None = _deferrable()
    images_scored: int | None = None
    images_kept: int | None = None
    weights: dict[str, float] | None = None
    #: one row per candidate (may be :class:`Deferred`: built on first read)
    rows: list[dict[str, Any]] | None = _deferrable()
    #: the MMR steps as dicts (may be :class:`Deferred`)
    mmr: list[dict[str, Any]] | None = _deferrable()


@dataclass(eq=False)
class WebFetchDiagnostics(StageDiagnostics):
    """WEB_FETCH: the top-N setting and one row per fetched page (url, outcome, bytes, error)."""

    KEY: ClassVar[str] = "web_fetch"
    top_n: int | None = None
    max_bytes: int | None = None
    pages: list[dict[str, object]] | None = None
    skipped: str | None = None


@dataclass(eq=False)
class MergeDiagnostics(StageDiagnostics):
    """CHUNK_MERGE: every decision in order (``{"step": "input" | "history" | "parent" | "merge" |
    "expand" | "overlap" | "image", ...}``)."""

    KEY: ClassVar[str] = "merge"
    steps: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: object, where: str = "") -> Self:
        if isinstance(data, list):  # captures written before the type: the bare step list
            return cls(steps=list(data))
        return super().from_dict(data, where)


@dataclass(eq=False)
class FilterTopKDiagnostics(StageDiagnostics):
    """FILTER_TOP_K: which list was cut, from how many to how many, and the results it cut
    (chunk ids and their document ids, aligned)."""

    KEY: ClassVar[str] = "filter_top_k"
    field: str | None = None  # noqa: A003 - the name stored in captures
    before: int | None = None
    after: int | None = None
    cut_ids: list[str] | None = None
    cut_doc_ids: list[str] | None = None


@dataclass(eq=False)
class DataAnalysisDiagnostics(StageDiagnostics):
    """DATA_ANALYSIS: status ("added" / "skipped" / "failed") with its reason, the file, table,
    schema, the model's SQL and the result id."""

    KEY: ClassVar[str] = "data_analysis"
    status: str | None = None
    reason: str | None = None
    data_files: list[str] | None = None
    removed_table_chunks: int | None = None
    knowledge_id: str | None = None
    file_name: str | None = None
    table: str | None = None
    schema: str | None = None
    raw: str | None = None
    sql: str | None = None
    model_knowledge_id: str | None = None
    result_id: str | None = None


@dataclass(eq=False)
class MemoryRecallDiagnostics(StageDiagnostics):
    """MEMORY_RECALL: memories recalled and the prompt size, or the error it continued past."""

    KEY: ClassVar[str] = "memory_recall"
    items: int | None = None
    prompt_chars: int | None = None
    error: str | None = None


@dataclass(eq=False)
class ChatDiagnostics(StageDiagnostics):
    """CHAT_COMPLETION_STREAM: the messages sent to the model (key ``chat_messages``; the token
    usage the endpoint reported stays a plain dict under ``usage``)."""

    KEY: ClassVar[str] = "chat_messages"
    messages: list[dict[str, object]] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: object, where: str = "") -> Self:
        if isinstance(data, list):  # the bare message list
            return cls(messages=list(data))
        return super().from_dict(data, where)


#: key in ``state.diagnostics`` → its type
DIAGNOSTICS_TYPES: dict[str, type[StageDiagnostics]] = {
    cls.KEY: cls
    for cls in (
        QueryUnderstandDiagnostics,
        EntityExtractionDiagnostics,
        QueryExpansionDiagnostics,
        SearchDiagnostics,
        EntitySearchDiagnostics,
        RerankDiagnostics,
        WebFetchDiagnostics,
        MergeDiagnostics,
        FilterTopKDiagnostics,
        DataAnalysisDiagnostics,
        MemoryRecallDiagnostics,
        ChatDiagnostics,
    )
}


def diagnostics_to_dict(diagnostics: Mapping[str, object]) -> dict[str, object]:
    """The JSON form of a whole ``state.diagnostics`` (typed entries through ``to_dict``)."""
    return {k: (v.to_dict() if isinstance(v, StageDiagnostics) else v) for k, v in diagnostics.items()}


def diagnostics_from_dict(data: Mapping[str, object], where: str = "state.diagnostics") -> dict[str, object]:
    """Typed entries for the known keys (old plain-dict captures included); other keys as stored."""
    out: dict[str, object] = {}
    for key, value in data.items():
        cls = DIAGNOSTICS_TYPES.get(key)
        out[key] = cls.from_dict(value, f"{where}[{key!r}]") if cls is not None else value
    return out
