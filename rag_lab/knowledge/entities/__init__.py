"""Entity and relation extraction, and building a KB's knowledge graph from its chunks.

Two extractors share one protocol (``await extractor.aextract(text) -> GraphData``):

* :class:`OfflineEntityExtractor` really computes, without any model:

  - **Chinese** (sentences holding Han characters): ``jieba.posseg`` tags; adjacent proper-noun
    tokens (``nr*`` person, ``ns`` place, ``nt`` organisation, ``nz`` other proper noun) are joined
    into one name; common nouns (``n``) are kept on their own. A name needs at least
    :data:`MIN_HAN_RUNES` runes (so a lone surname such as 王 is dropped), at most
    :data:`MAX_NAME_RUNES`, and common nouns in :data:`CHINESE_STOP_NOUNS` (时候, 问题, …) are
    dropped.
  - **English** (any Latin text): runs of capitalised words, joined across lower-case name
    connectors (``Bank of England``, ``Leonardo da Vinci``), split at punctuation; a possessive
    ``'s`` at the end is cut. Leading stop words of a sentence are skipped (``The Brightwater
    lighthouse`` → ``Brightwater``; ``Who is Mara Quill`` → ``Mara Quill``). A *single* word at
    the start of a sentence is ambiguous (``Bakers feed the starter``): in documents it is kept
    only when it is an acronym / has an inner capital, or the same word also appears capitalised
    inside a sentence elsewhere in the text; in queries (``extract_query``) it is kept unless it
    is a stop word or appears in lower case elsewhere in the query. Acronyms (``NASA``) count.
  - **Relations**: every pair of distinct names in one sentence co-occurs; relation
    ``co_occurs_with``, endpoints ordered by normalised name (the relation is symmetric), strength
    = the number of sentences where the pair co-occurs. A node's description is the first
    sentence that mentions it (cut to :data:`DESCRIPTION_MAX_RUNES` runes).

* :class:`LLMGraphExtractor` asks a chat model with the ``graph_extraction`` template and parses
  the reply with :func:`parse_graph_reply` (§4.3.7 step 5).

:func:`build_graph` runs an extractor over a KB's chunks and stores the result per document
namespace, every node and relation carrying the ids of the chunks it came from.

The package is split by responsibility: :mod:`.offline` (the offline extractor), :mod:`.llm` (reply
parsing and the chat-model extractor), :mod:`.build` (building and storing a KB's graph).
"""

from __future__ import annotations

from rag_lab.knowledge.entities.build import GraphBuildReport, abuild_graph, build_graph
from rag_lab.knowledge.entities.llm import (
    GRAPH_EXTRACTION_TEMPLATE_ID,
    EntityExtractor,
    GraphParseError,
    LLMGraphExtractor,
    extract_json_block,
    first_balanced_json,
    parse_graph_reply,
)
from rag_lab.knowledge.entities.offline import (
    CHINESE_STOP_NOUNS,
    CO_OCCURS,
    DESCRIPTION_MAX_RUNES,
    ENGLISH_STOP_WORDS,
    MAX_NAME_RUNES,
    MAX_PAIRED_NAMES,
    MIN_HAN_RUNES,
    MIN_LATIN_RUNES,
    NAME_CONNECTORS,
    OfflineEntityExtractor,
    split_sentences,
)

__all__ = [
    "CHINESE_STOP_NOUNS",
    "DESCRIPTION_MAX_RUNES",
    "ENGLISH_STOP_WORDS",
    "GRAPH_EXTRACTION_TEMPLATE_ID",
    "MAX_NAME_RUNES",
    "MAX_PAIRED_NAMES",
    "MIN_HAN_RUNES",
    "MIN_LATIN_RUNES",
    "NAME_CONNECTORS",
    "CO_OCCURS",
    "EntityExtractor",
    "GraphBuildReport",
    "GraphParseError",
    "LLMGraphExtractor",
    "OfflineEntityExtractor",
    "abuild_graph",
    "build_graph",
    "extract_json_block",
    "first_balanced_json",
    "parse_graph_reply",
    "split_sentences",
]
