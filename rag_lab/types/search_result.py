"""SearchResult, MatchType and ChunkType (spec §1.4–§1.6)."""

from __future__ import annotations

import copy
import operator
from dataclasses import dataclass, field, fields
from enum import Enum, IntEnum
from typing import Any


class MatchType(IntEnum):
    """How a result was found. The integer values are persisted and must not change."""

    EMBEDDING = 0
    KEYWORDS = 1
    NEARBY_CHUNK = 2
    HISTORY = 3
    PARENT_CHUNK = 4
    RELATION_CHUNK = 5
    GRAPH = 6
    WEB_SEARCH = 7
    DIRECT_LOAD = 8
    DATA_ANALYSIS = 9


class ChunkType(str, Enum):
    TEXT = "text"
    PARENT_TEXT = "parent_text"
    IMAGE_OCR = "image_ocr"
    IMAGE_CAPTION = "image_caption"
    SUMMARY = "summary"
    ENTITY = "entity"
    RELATIONSHIP = "relationship"
    FAQ = "faq"
    WEB_SEARCH = "web_search"
    TABLE_SUMMARY = "table_summary"
    TABLE_COLUMN = "table_column"
    WIKI_PAGE = "wiki_page"


#: Chunk types that retrieval may hydrate (spec §1.6).
SEARCHABLE_CHUNK_TYPES = frozenset(
    {"text", "summary", "table_column", "table_summary", "faq", "image_ocr", "image_caption"}
)
#: index statuses that exclude a chunk from retrieval (spec §1.6)
UNSEARCHABLE_STATUSES = ("processing", "failed")

# Fields serialised only when non-empty (``omitempty`` in the persisted format).
_OMIT_EMPTY = (
    "chunk_metadata",
    "matched_content",
    "knowledge_description",
    "knowledge_custom_metadata",
    "knowledge_base_id",
)
_INTERNAL = ("content_revision", "content_rewritten")


@dataclass(slots=True)
class SearchResult:
    """One retrieved chunk (or web page). JSON names are the persisted reference format."""

    id: str = ""
    content: str = ""
    knowledge_id: str = ""
    chunk_index: int = 0
    knowledge_title: str = ""
    start_at: int = 0
    end_at: int = 0
    seq: int = 0
    score: float = 0.0
    match_type: int = MatchType.EMBEDDING
    sub_chunk_id: list[str] = field(default_factory=list)
    metadata: dict[str, str] = field(default_factory=dict)
    chunk_type: str = ChunkType.TEXT.value
    parent_chunk_id: str = ""
    image_info: str = ""
    knowledge_filename: str = ""
    knowledge_source: str = ""
    knowledge_channel: str = ""
    chunk_metadata: dict[str, object] | None = None
    matched_content: str = ""
    knowledge_description: str = ""
    knowledge_custom_metadata: str = ""
    knowledge_base_id: str = ""
    # internal, never serialised
    content_revision: int = 0
    content_rewritten: bool = False

    def is_web(self) -> bool:
        return self.chunk_type.lower() == ChunkType.WEB_SEARCH.value or self.knowledge_source.lower() == "web_search"

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {}
        for name, value in zip(_SERIALISED, _SERIALISED_GETTER(self)):
            if name in _OMIT_EMPTY and not value:
                continue
            if name == "match_type":
                value = int(value)
            elif isinstance(value, (list, dict)):
                value = copy_value(value)
            out[name] = value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> SearchResult:
        if not isinstance(data, dict):
            raise TypeError(f"SearchResult.from_dict expects an object, got {type(data).__name__}")
        res = cls(**{k: copy_value(v) for k, v in data.items() if k in _SERIALISED_SET})
        res.sub_chunk_id = list(res.sub_chunk_id or [])
        res.metadata = dict(res.metadata or {})
        return res

    def copy(self) -> SearchResult:
        """An independent copy: lists, metadata and chunk metadata are not shared. Every other
        field is an immutable scalar, so this is a deep copy without ``copy.deepcopy``'s cost
        (the rerank and merge stages copy ~200 candidates per question)."""
        out = SearchResult(*_FIELD_GETTER(self))
        out.sub_chunk_id = list(self.sub_chunk_id)
        out.metadata = dict(self.metadata)
        if self.chunk_metadata is not None and not isinstance(self.chunk_metadata, (str, int, float, bool)):
            out.chunk_metadata = copy.deepcopy(self.chunk_metadata)
        return out


_FIELD_GETTER = operator.attrgetter(*(f.name for f in fields(SearchResult)))
#: the persisted fields, in declaration order (every field but the internal ones)
_SERIALISED = tuple(f.name for f in fields(SearchResult) if f.name not in _INTERNAL)
_SERIALISED_SET = frozenset(_SERIALISED)
_SERIALISED_GETTER = operator.attrgetter(*_SERIALISED)

_ATOMS = (str, int, float, bool, type(None))


def copy_value(value: object) -> Any:
    """An independent copy of a value, equal to ``copy.deepcopy(value)`` for what results, state
    and references hold: immutable scalars shared, results by :meth:`SearchResult.copy`, lists,
    tuples and dicts element by element, anything else by ``copy.deepcopy`` (an order of magnitude
    faster than ``copy.deepcopy`` on the JSON-like values of references and diagnostics)."""
    if isinstance(value, _ATOMS):
        return value
    if type(value) is list:
        return [copy_value(v) for v in value]
    if type(value) is dict:
        return {k: copy_value(v) for k, v in value.items()}
    if isinstance(value, SearchResult):
        return value.copy()
    if type(value) is tuple:
        return tuple(copy_value(v) for v in value)
    return copy.deepcopy(value)
