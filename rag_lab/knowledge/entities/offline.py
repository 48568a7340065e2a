"""The offline entity extractor (jieba POS tags for Chinese, capitalised runs for English) and its
co-occurrence relations; see :mod:`rag_lab.knowledge.entities` for the rules."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from rag_lab.knowledge.graph import (
    GraphData,
    GraphNode,
    GraphRelation,
    normalize_entity_name,
)

if TYPE_CHECKING:  # pragma: no cover
    pass


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
_posseg: ModuleType | None = None


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
