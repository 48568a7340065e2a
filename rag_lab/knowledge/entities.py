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
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from rag_lab.knowledge.graph import (
    GraphData,
    GraphNode,
    GraphRelation,
    GraphStore,
    NameSpace,
    merge_nodes,
    merge_relations,
    normalize_entity_name,
    open_graph_store,
)

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.knowledge.models import KnowledgeBase
    from rag_lab.models.base import ChatModel
    from rag_lab.prompts.templates import PromptTemplates

log = logging.getLogger(__name__)

__all__ = [
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

CO_OCCURS = "co_occurs_with"
MIN_HAN_RUNES = 2
MIN_LATIN_RUNES = 2
MAX_NAME_RUNES = 40
DESCRIPTION_MAX_RUNES = 200
#: names per sentence paired for co-occurrence at most (pairs grow quadratically)
MAX_PAIRED_NAMES = 24

#: lower-case words that may sit inside an English name between capitalised words
NAME_CONNECTORS = frozenset(
    {"of", "de", "du", "des", "la", "le", "van", "von", "der", "den", "del", "da", "di", "the", "y"}
)

#: capitalised only because they start a sentence (or never names on their own)
ENGLISH_STOP_WORDS = frozenset(
    """a an the this that these those it its it's he she they we i you me him her them us his hers their theirs our
    ours my mine your yours who whom whose what which when where why how whatever whoever is are was were be been
    being am do does did done can could will would should shall may might must has have had having in on at by for
    from to with without about after before during since until into onto over under through between among against
    across along around behind beyond near of off out up down and or but nor so yet if then else also there here
    however although though while as because therefore thus hence moreover furthermore meanwhile otherwise indeed
    please tell show give list explain describe compare find name define summarize summarise let lets let's yes no
    not all any some each every many much more most less least few other others such both either neither one two
    three first second last next new only just even still again ever never always often sometimes perhaps maybe
    today tomorrow yesterday now hi hello hey thanks thank ok okay dear""".split()
)

#: frequent Chinese common nouns that name nothing
CHINESE_STOP_NOUNS = frozenset(
    "时候 问题 东西 方面 情况 时间 方法 部分 地方 事情 内容 原因 结果 方式 过程 作用 意思 样子 程度 关系 办法 "
    "左右 之间 其中 以上 以下 人们 大家 有人 什么 怎么 哪里 如何 多少".split()
)

_PROPER_FLAGS = ("nr", "ns", "nt", "nz")  # nr also covers nrt / nrfg
_KIND_BY_FLAG = {"nr": "Person", "ns": "Location", "nt": "Organization", "nz": "Concept", "n": "Concept"}
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_WORD = re.compile(r"[^\W_][\w'’\-]*")
_SENTENCE_BREAK = re.compile(r"[\n。！？；!?;]+|(?<=\.)\s+")
_SPACE_ONLY = re.compile(r"[ \t]+")

_jieba_lock = threading.Lock()
_posseg: Any = None


def _pseg_cut(text: str) -> list[tuple[str, str]]:
    """jieba POS tagging, imported and initialised once (lazily, thread-safe)."""
    global _posseg
    if _posseg is None:
        with _jieba_lock:
            if _posseg is None:
                import jieba
                import jieba.posseg as pseg

                jieba.setLogLevel(logging.WARNING)
                jieba.initialize()
                _posseg = pseg
    return [(w.word, w.flag) for w in _posseg.cut(text)]


def split_sentences(text: str) -> list[str]:
    """Sentences: split at line breaks, ``。！？；!?;`` and at whitespace after a period; trimmed,
    blanks dropped."""
    return [s.strip() for s in _SENTENCE_BREAK.split(text) if s and s.strip()]


def _is_cap(tok: str) -> bool:
    return tok[:1].isupper()


def _is_acronym_like(tok: str) -> bool:
    core = tok.replace("-", "")
    return (len(core) >= 2 and core.isupper()) or any(c.isupper() for c in tok[1:]) or any(c.isdigit() for c in tok)


def _strip_possessive(name: str) -> str:
    for suffix in ("'s", "’s"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    if name.endswith(("s'", "s’")):
        return name[:-1]
    return name


@dataclass(slots=True)
class _Mention:
    name: str
    kind: str
    pos: str = ""


class OfflineEntityExtractor:
    """Entities and co-occurrence relations without a model (rules in the module docstring)."""

    def __init__(self, max_paired_names: int = MAX_PAIRED_NAMES) -> None:
        if max_paired_names < 2:
            raise ValueError(f"max_paired_names={max_paired_names} must be >= 2")
        self.max_paired_names = max_paired_names

    def __repr__(self) -> str:
        return "OfflineEntityExtractor()"

    # -- English ----------------------------------------------------------------------------
    def _english_spans(self, sentence: str, query: bool, context: _Context) -> list[_Mention]:
        toks = [(m.group(0), m.start(), m.end()) for m in _WORD.finditer(sentence)]
        out: list[_Mention] = []
        i = 0
        while i < len(toks):
            tok = toks[i][0]
            if not _is_cap(tok):
                i += 1
                continue
            span = [i]
            j = i + 1
            while j < len(toks):
                gap = sentence[toks[j - 1][2] : toks[j][1]]
                if not _SPACE_ONLY.fullmatch(gap):
                    break
                if _is_cap(toks[j][0]):
                    span.append(j)
                    j += 1
                    continue
                # up to two lower-case connectors, only when a capitalised word follows
                k = j
                while k < len(toks) and k - j < 2 and toks[k][0] in NAME_CONNECTORS:
                    k += 1
                if (
                    k > j
                    and k < len(toks)
                    and _is_cap(toks[k][0])
                    and all(_SPACE_ONLY.fullmatch(sentence[toks[m - 1][2] : toks[m][1]]) for m in range(j, k + 1))
                ):
                    span.extend(range(j, k + 1))
                    j = k + 1
                    continue
                break
            words = [toks[m][0] for m in span]
            skipped = 0
            if span[0] == 0:
                while words and (words[0].lower() in ENGLISH_STOP_WORDS or words[0] in NAME_CONNECTORS):
                    words.pop(0)
                    skipped += 1
            # "The Brightwater ..." : after a skipped stop word the name no longer opens the sentence
            starts_sentence = span[0] == 0 and skipped == 0
            if words:
                words[-1] = _strip_possessive(words[-1])
                name = " ".join(words)
                if self._keep_english(name, words, starts_sentence, query, context):
                    out.append(_Mention(name, "Entity"))
            i = j
        return out

    def _keep_english(self, name: str, words: list[str], starts_sentence: bool, query: bool, ctx: _Context) -> bool:
        if len(name) < MIN_LATIN_RUNES or len(name) > MAX_NAME_RUNES:
            return False
        if len(words) > 1:
            return True
        w = words[0]
        if w.lower() in ENGLISH_STOP_WORDS:
            return False
        if not starts_sentence or _is_acronym_like(w):
            return True
        if query:
            return w.lower() not in ctx.lower_words
        return w in ctx.inner_capitalised

    # -- Chinese ----------------------------------------------------------------------------
    def _chinese_names(self, sentence: str) -> list[_Mention]:
        out: list[_Mention] = []
        run: list[tuple[str, str]] = []

        def flush() -> None:
            if run:
                name = "".join(w for w, _ in run)
                flag = run[0][1]
                cls = "nr" if flag.startswith("nr") else flag
                if MIN_HAN_RUNES <= len(name) <= MAX_NAME_RUNES and _HAN.search(name):
                    out.append(_Mention(name, _KIND_BY_FLAG.get(cls, "Concept"), "+".join(f for _, f in run)))
                run.clear()

        for word, flag in _pseg_cut(sentence):
            if flag.startswith(_PROPER_FLAGS):
                run.append((word, flag))
                continue
            flush()
            if (
                flag == "n"
                and MIN_HAN_RUNES <= len(word) <= MAX_NAME_RUNES
                and _HAN.search(word)
                and word not in CHINESE_STOP_NOUNS
            ):
                out.append(_Mention(word, "Concept", "n"))
        flush()
        return out

    # -- whole text -------------------------------------------------------------------------
    def extract(self, text: str, query: bool = False) -> GraphData:
        """Nodes (in order of first mention) and co-occurrence relations of ``text``."""
        if not isinstance(text, str):
            raise TypeError(f"extract: text must be a string, got {type(text).__name__}")
        sentences = split_sentences(text)
        ctx = _Context.of(sentences)
        nodes: dict[str, GraphNode] = {}
        pairs: dict[tuple[str, str], GraphRelation] = {}
        for sentence in sentences:
            mentions = self._english_spans(sentence, query, ctx)
            if _HAN.search(sentence):
                mentions.extend(self._chinese_names(sentence))
            in_sentence: list[str] = []
            for m in mentions:
                key = normalize_entity_name(m.name)
                if not key:
                    continue
                node = nodes.get(key)
                if node is None:
                    attrs: dict[str, Any] = {"mentions": 0}
                    if m.pos:
                        attrs["pos"] = m.pos
                    node = GraphNode(m.name, m.kind, sentence[:DESCRIPTION_MAX_RUNES], attributes=attrs)
                    nodes[key] = node
                node.attributes["mentions"] += 1
                if key not in in_sentence:
                    in_sentence.append(key)
            named = in_sentence[: self.max_paired_names]
            for a in range(len(named)):
                for b in range(a + 1, len(named)):
                    s, t = sorted((named[a], named[b]))
                    rel = pairs.get((s, t))
                    if rel is None:
                        pairs[(s, t)] = GraphRelation(nodes[s].name, nodes[t].name, CO_OCCURS, 0.0)
                        rel = pairs[(s, t)]
                    rel.strength += 1.0
        return GraphData(list(nodes.values()), list(pairs.values()))

    def extract_query(self, text: str) -> list[str]:
        """Entity names of a question (lenient about a single word opening the question)."""
        return [n.name for n in self.extract(text, query=True).nodes]

    async def aextract(self, text: str) -> GraphData:
        return self.extract(text)


@dataclass(slots=True)
class _Context:
    """Whole-text facts used to judge a capitalised word that opens a sentence."""

    inner_capitalised: frozenset[str]
    lower_words: frozenset[str]

    @classmethod
    def of(cls, sentences: Iterable[str]) -> _Context:
        inner: set[str] = set()
        lower: set[str] = set()
        for s in sentences:
            toks = _WORD.findall(s)
            for i, t in enumerate(toks):
                if _is_cap(t):
                    if i > 0:
                        inner.add(_strip_possessive(t))
                else:
                    lower.add(t.lower())
        return cls(frozenset(inner), frozenset(lower))


# -- reply parsing (§4.3.7 step 5) ------------------------------------------------------------
class GraphParseError(ValueError):
    """No JSON entity list could be read from a model reply."""


_FENCE = re.compile(r"```([^\n`]*)\n?(.*?)```", re.DOTALL)


def extract_json_block(text: str) -> str:
    """The part of a reply that should hold the JSON (§4.3.7 5.1): among the fenced blocks, the
    first tagged ``json`` or untagged; else the first fence of any tag; with no complete fence,
    what follows an unclosed opening fence; else the whole text."""
    fences = [(m.group(1).strip().lower(), m.group(2)) for m in _FENCE.finditer(text)]
    if fences:
        candidates = [body for tag, body in fences if tag in ("json", "")]
        return (candidates[0] if candidates else fences[0][1]).strip()
    start = text.find("```")
    if start != -1:
        rest = text[start + 3 :]
        nl = rest.find("\n")
        return (rest[nl + 1 :] if nl != -1 else "").strip()
    return text.strip()


def first_balanced_json(text: str) -> str | None:
    """The first ``{…}`` or ``[…]`` (whichever opens first) whose brackets balance, ignoring
    brackets inside JSON strings; when an opener never balances, the next opener is tried."""
    pos = 0
    while True:
        starts = [i for i in (text.find("{", pos), text.find("[", pos)) if i != -1]
        if not starts:
            return None
        start = min(starts)
        end = _balanced_end(text, start)
        if end is not None:
            return text[start : end + 1]
        pos = start + 1


def _balanced_end(text: str, start: int) -> int | None:
    closing = {"{": "}", "[": "]"}
    stack: list[str] = []
    in_str = esc = False
    for i in range(start, len(text)):
        c = text[i]
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
            continue
        if c == '"':
            in_str = True
        elif c in closing:
            stack.append(closing[c])
        elif c in "}]":
            if not stack or stack.pop() != c:
                return None
            if not stack:
                return i
    return None


def _decode(block: str) -> Any:
    try:
        return json.loads(block)
    except ValueError:
        pass
    pos = 0
    while True:
        found = first_balanced_json(block[pos:])
        if found is None:
            raise GraphParseError(f"no JSON list or object in the reply: {block[:200]!r}")
        try:
            return json.loads(found)
        except ValueError:
            pos += block[pos:].find(found) + 1


def _text(item: dict, keys: Sequence[str]) -> str:
    for k in keys:
        v = item.get(k)
        if isinstance(v, str) and v.strip():
            return v.strip()
    return ""


def parse_graph_reply(text: str) -> GraphData:
    """Nodes and relations from a model reply (§4.3.7 step 5).

    A dict counts as a list of one item. Items with ``entity1`` and ``entity2`` (or ``source``
    and ``target``) become relations (``relation``, numeric ``strength``, ``description``); items
    with ``entity`` (or ``name`` / ``title``) become nodes (``type``, ``description``,
    ``entity_attributes``); a bare string item is a node name. Duplicate names merge,
    self-relations are dropped and relation endpoints that are not nodes become nodes.
    Raises :class:`GraphParseError` when no JSON can be decoded."""
    if not isinstance(text, str) or not text.strip():
        raise GraphParseError("empty reply")
    data = _decode(extract_json_block(text))
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise GraphParseError(f"expected a JSON list of entities, got {type(data).__name__}")
    nodes: list[GraphNode] = []
    relations: list[GraphRelation] = []
    for item in data:
        if isinstance(item, str):
            if item.strip():
                nodes.append(GraphNode(item.strip()))
            continue
        if not isinstance(item, dict):
            continue
        a, b = _text(item, ("entity1", "source")), _text(item, ("entity2", "target"))
        if a and b:
            strength = item.get("strength", 1.0)
            if isinstance(strength, bool) or not isinstance(strength, (int, float)):
                strength = 1.0
            relations.append(
                GraphRelation(
                    a,
                    b,
                    _text(item, ("relation", "relationship", "type")) or "related_to",
                    float(strength),
                    description=_text(item, ("description",)),
                )
            )
            continue
        name = _text(item, ("entity", "name", "title"))
        if name:
            attrs = item.get("entity_attributes", item.get("attributes"))
            attributes: dict[str, Any] = {}
            if isinstance(attrs, list):
                attributes["entity_attributes"] = [str(x) for x in attrs if isinstance(x, (str, int, float))]
            elif isinstance(attrs, dict):
                attributes.update(attrs)
            nodes.append(
                GraphNode(
                    name,
                    _text(item, ("type", "entity_type", "kind")),
                    _text(item, ("description",)),
                    attributes=attributes,
                )
            )
    relations = merge_relations(relations)
    known = {normalize_entity_name(n.name) for n in nodes}
    for r in relations:
        for end in (r.source, r.target):
            if normalize_entity_name(end) not in known:
                known.add(normalize_entity_name(end))
                nodes.append(GraphNode(end))
    return GraphData(merge_nodes(nodes), relations)


# -- LLM extractor ----------------------------------------------------------------------------
#: the ``graph_extraction.yaml`` template used by :class:`LLMGraphExtractor`
GRAPH_EXTRACTION_TEMPLATE_ID = "default_extract_graph"


@runtime_checkable
class EntityExtractor(Protocol):
    async def aextract(self, text: str) -> GraphData: ...


class LLMGraphExtractor:
    """Entities and relations of a text through a chat model and the graph-extraction template
    (``{{language}}`` in the system text, ``{{text}}`` in the user text)."""

    def __init__(
        self,
        model: ChatModel,
        prompts: PromptTemplates | None = None,
        template_id: str = GRAPH_EXTRACTION_TEMPLATE_ID,
        language: str = "English",
        temperature: float = 0.3,
        max_tokens: int = 4096,
    ) -> None:
        from rag_lab.prompts.templates import PromptTemplates

        if not getattr(model, "follows_instructions", True):
            raise ValueError(
                f"{getattr(model, 'model_id', model)!r} cannot follow instructions; use OfflineEntityExtractor"
            )
        self.model = model
        tpl = (prompts or PromptTemplates()).get(template_id)
        self.system, self.user = tpl.content, tpl.user or "{{text}}"
        self.language = language
        self.temperature = temperature
        self.max_tokens = max_tokens

    def __repr__(self) -> str:
        return f"LLMGraphExtractor({getattr(self.model, 'model_id', self.model)!r})"

    async def aextract(self, text: str) -> GraphData:
        from rag_lab.models.base import ChatMessage, ChatOptions
        from rag_lab.prompts.templates import render_prompt_placeholders

        values = {"language": self.language, "text": text}
        messages = [
            ChatMessage("system", render_prompt_placeholders(self.system, values)),
            ChatMessage("user", render_prompt_placeholders(self.user, values)),
        ]
        options = ChatOptions(temperature=self.temperature, max_completion_tokens=self.max_tokens, thinking=False)
        resp = await self.model.chat(messages, options)
        return parse_graph_reply(resp.content)


# -- building a KB's graph --------------------------------------------------------------------
@dataclass(slots=True)
class GraphBuildReport:
    kb_id: str
    documents: int = 0
    chunks: int = 0
    nodes: int = 0
    relations: int = 0
    #: (chunk id, error) for chunks whose extraction failed (the rest of the document is kept)
    failed: list[tuple[str, str]] = field(default_factory=list)
    #: documents whose namespace was dropped because they no longer exist
    removed: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def __str__(self) -> str:
        return (
            f"GraphBuildReport(kb={self.kb_id}: {self.documents} documents, {self.chunks} chunks, "
            f"{self.nodes} nodes, {self.relations} relations, {len(self.failed)} failed, "
            f"{len(self.removed)} removed; {self.seconds:.2f}s)"
        )


def _graph_chunks(workspace: Any, kb_id: str, knowledge_id: str) -> list[Any]:
    from rag_lab.types.search_result import SEARCHABLE_CHUNK_TYPES

    return [
        c
        for c in workspace.store.list_chunks(kb_id, knowledge_id)
        if c.is_enabled and c.chunk_type in SEARCHABLE_CHUNK_TYPES and c.content.strip()
    ]


async def abuild_graph(
    workspace: Any,
    kb: KnowledgeBase | str,
    extractor: EntityExtractor,
    knowledge_ids: Sequence[str] | None = None,
    progress: bool = True,
    *,
    graph: GraphStore | None = None,
    concurrency: int = 4,
) -> GraphBuildReport:
    """Extract entities from the enabled, searchable chunks of a KB's documents (all of them, or
    ``knowledge_ids``) and replace each document's namespace with the result. A listed document
    that no longer exists has its namespace deleted. ``concurrency`` extractor calls at most."""
    from tqdm.auto import tqdm

    if concurrency < 1:
        raise ValueError(f"concurrency={concurrency} must be >= 1")
    if not hasattr(extractor, "aextract"):
        raise TypeError(f"extractor {extractor!r} has no 'aextract(text)' method")
    t0 = time.perf_counter()
    kb_obj = workspace.get_kb(kb)
    report = GraphBuildReport(kb_id=kb_obj.id)
    store = graph if graph is not None else open_graph_store(workspace)
    owned = graph is None and store is not getattr(workspace, "graph", None)
    try:
        if knowledge_ids is None:
            docs = [d.id for d in workspace.store.list_knowledge(kb_obj.id)]
        else:
            docs = list(dict.fromkeys(knowledge_ids))
        work: list[tuple[str, list[Any]]] = []
        for kid in docs:
            if workspace.store.get_document(kb_obj.id, kid) is None:
                store.delete_namespace(NameSpace(kb_obj.id, kid))
                report.removed.append(kid)
                continue
            work.append((kid, _graph_chunks(workspace, kb_obj.id, kid)))
        sem = asyncio.Semaphore(concurrency)
        bar = tqdm(total=sum(len(c) for _, c in work), desc=f"graph {kb_obj.name}", unit="chunk", disable=not progress)

        async def one(chunk: Any) -> GraphData | None:
            async with sem:
                try:
                    got = await extractor.aextract(chunk.content)
                except Exception as exc:  # one chunk's failure does not lose the document
                    log.warning("graph extraction failed for chunk %s: %s", chunk.id, exc)
                    report.failed.append((chunk.id, f"{type(exc).__name__}: {exc}"))
                    return None
                finally:
                    bar.update(1)
            for n in got.nodes:
                n.chunk_ids = [chunk.id]
            for r in got.relations:
                r.chunk_ids = [chunk.id]
            return got

        try:
            for kid, chunks in work:
                parts = await asyncio.gather(*(one(c) for c in chunks))
                nodes = [n for p in parts if p is not None for n in p.nodes]
                rels = [r for p in parts if p is not None for r in p.relations]
                store.replace_namespace(NameSpace(kb_obj.id, kid), nodes, rels)
                n_nodes, n_rels = store.count(NameSpace(kb_obj.id, kid))
                report.documents += 1
                report.chunks += len(chunks)
                report.nodes += n_nodes
                report.relations += n_rels
        finally:
            bar.close()
    finally:
        if owned:
            store.close()
    report.seconds = time.perf_counter() - t0
    return report


def build_graph(
    workspace: Any,
    kb: KnowledgeBase | str,
    extractor: EntityExtractor,
    knowledge_ids: Sequence[str] | None = None,
    progress: bool = True,
    *,
    graph: GraphStore | None = None,
    concurrency: int = 4,
) -> GraphBuildReport:
    """Synchronous :func:`abuild_graph` (also callable where an event loop is running, e.g.
    Jupyter: it then runs in a helper thread)."""

    def coro():
        return abuild_graph(workspace, kb, extractor, knowledge_ids, progress, graph=graph, concurrency=concurrency)

    from rag_lab.asyncutil import run_sync

    return run_sync(coro, thread_name="rag_lab-build-graph")
