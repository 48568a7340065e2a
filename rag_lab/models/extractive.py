"""The offline answerer: picks the retrieved sentences that best answer the question and cites them.

``ExtractiveChatModel`` reads the retrieval XML the pipeline puts into the system / user
messages (spec §7.2), scores every sentence of every retrieved chunk or web snippet against the
question with an embedder, and answers with the best few, each followed by its citation
``<ref id="cN"/>`` (or ``wN``), so the citation decoder, the stream handler and the references
all see the same shapes as with a real LLM. It never invents text: every answer sentence is
copied from a retrieved passage, or the answer is exactly ``NO_ANSWER``.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from html import unescape as html_unescape

import numpy as np

from rag_lab.models.base import ChatMessage, ChatOptions, ChatResponse, Embedder, ModelError, StreamChunk
from rag_lab.models.embedding import row_dots
from rag_lab.models.sentences import CJK_RANGES, split_sentences
from rag_lab.models.timeouts import is_in_process

#: The whole answer when no retrieved passage is relevant enough (or there is no retrieval context).
NO_ANSWER = "None of the retrieved passages answers this question, so I cannot give a grounded answer."

_RETRIEVAL_RE = re.compile(r"<retrieval\b([^>]*)>(.*?)</retrieval>", re.S)
_CHUNK_RE = re.compile(r"<chunk\b([^>]*)>(.*?)</chunk>", re.S)
_PAGE_RE = re.compile(r"<page\b([^>]*)>(.*?)</page>", re.S)
_ATTR_RE = re.compile(r'\b([A-Za-z_][\w-]*)="([^"]*)"')
_TEXT_ENTITY_RE = re.compile(r"&(amp|lt|gt);")
_TEXT_ENTITIES = {"amp": "&", "lt": "<", "gt": ">"}

_CJK = CJK_RANGES
_WORD_RE = re.compile(rf"[{_CJK}]+|[^\W_]+", re.UNICODE)
_TOKEN_RE = re.compile(rf"[{_CJK}]|[^\s{_CJK}]+")
_HAS_CJK_RE = re.compile(rf"[{_CJK}]")
# A Markdown ATX heading line ("# Title", "## 2.1 Setup"): a title, not an answer sentence.
_HEADING_RE = re.compile(r"^#{1,6}(?:\s|$)")

_STOPWORDS = frozenset(
    """a an and are as at be by can do does did for from has have how i in is it its me my of on or
    our so that the their them there these they this to was were what when where which who whom
    why will with you your""".split()
)


def unescape_text(text: str) -> str:
    """Undo the text escape of §7.2 (``&amp;``, ``&lt;``, ``&gt;`` only), in one pass."""
    return _TEXT_ENTITY_RE.sub(lambda m: _TEXT_ENTITIES[m.group(1)], text)


def _attrs(raw: str) -> dict[str, str]:
    return {k: html_unescape(v) for k, v in _ATTR_RE.findall(raw)}


def _elements(body: str, tag: str) -> list[str]:
    return [unescape_text(m) for m in re.findall(rf"<{tag}\b[^>]*>(.*?)</{tag}>", body, re.S)]


@dataclass(frozen=True, slots=True)
class RetrievedPassage:
    """One citable unit of retrieval context: a knowledge chunk (``cN``) or a web page (``wN``)."""

    handle: str
    text: str
    kind: str  # "knowledge" | "web"
    title: str = ""


def parse_retrieval(text: str) -> list[RetrievedPassage]:
    """Every chunk and page of every ``<retrieval>`` block in ``text``, in order.

    Knowledge chunk text is its ``<content>`` (else its ``<match>``) followed by any FAQ
    ``<answer>`` elements; web page text is its ``<match>`` snippet. Element text is unescaped
    (``&amp; &lt; &gt;``), attributes are HTML-unescaped. Chunks without an ``id`` are skipped.
    """
    out: list[RetrievedPassage] = []
    for block in _RETRIEVAL_RE.finditer(text):
        kind = _attrs(block.group(1)).get("type", "knowledge")
        body = block.group(2)
        if kind == "web":
            for page in _PAGE_RE.finditer(body):
                attrs = _attrs(page.group(1))
                handle = attrs.get("id", "").strip()
                if handle:
                    snippet = "\n".join(_elements(page.group(2), "match"))
                    out.append(RetrievedPassage(handle, snippet, "web", attrs.get("title", "")))
        else:
            for chunk in _CHUNK_RE.finditer(body):
                attrs = _attrs(chunk.group(1))
                handle = attrs.get("id", "").strip()
                if not handle:
                    continue
                inner = chunk.group(2)
                main = _elements(inner, "content") or _elements(inner, "match")
                parts = main + _elements(inner, "answer")
                out.append(RetrievedPassage(handle, "\n".join(parts), "knowledge"))
    return out


def find_retrieval(messages: Sequence[ChatMessage]) -> list[RetrievedPassage]:
    """Retrieval passages of all system and user messages, first occurrence of a handle wins."""
    seen: set[str] = set()
    out: list[RetrievedPassage] = []
    for msg in messages:
        if msg.role not in ("system", "user"):
            continue
        for passage in parse_retrieval(msg.content):
            if passage.handle not in seen:
                seen.add(passage.handle)
                out.append(passage)
    return out


def question_of(messages: Sequence[ChatMessage]) -> str:
    """The last non-empty paragraph (blank-line separated) of the last user message, after
    removing any ``<retrieval>`` blocks from it."""
    for msg in reversed(messages):
        if msg.role == "user":
            text = _RETRIEVAL_RE.sub("", msg.content)
            paragraphs = [p.strip() for p in re.split(r"\n[ \t\r]*\n", text)]
            paragraphs = [p for p in paragraphs if p]
            return paragraphs[-1] if paragraphs else ""
    return ""


def content_terms(text: str) -> set[str]:
    """Lexical terms for the overlap bonus: lower-cased words of two or more characters that are
    not English stop words, and character bigrams of CJK runs (a lone CJK character counts as
    itself)."""
    terms: set[str] = set()
    for word in _WORD_RE.findall(text.lower()):
        if re.match(rf"[{_CJK}]", word):
            if len(word) == 1:
                terms.add(word)
            terms.update(word[i : i + 2] for i in range(len(word) - 1))
        elif len(word) >= 2 and word not in _STOPWORDS:
            terms.add(word)
    return terms


def estimate_tokens(text: str) -> int:
    """Usage estimate (no tokenizer involved): one token per CJK character plus one per other
    run of non-whitespace characters. Rough by design; only for ``usage`` accounting."""
    if _HAS_CJK_RE.search(text) is None:  # ``\s`` and ``str.split`` share one definition of whitespace
        return len(text.split())
    return len(_TOKEN_RE.findall(text))


def _truncate_tokens(text: str, limit: int) -> str:
    """``text`` cut right after its ``limit``-th estimated token."""
    for i, m in enumerate(_TOKEN_RE.finditer(text), start=1):
        if i == limit:
            return text[: m.end()]
    return text


def stream_pieces(text: str, words_per_piece: int = 3, max_chars: int = 24) -> list[str]:
    """``text`` in small pieces whose concatenation is exactly ``text``: runs of
    ``words_per_piece`` whitespace-separated words (with their trailing spaces), any piece longer
    than ``max_chars`` (e.g. unspaced CJK text) cut into ``max_chars`` slices."""
    if words_per_piece < 1 or max_chars < 1:
        raise ValueError("words_per_piece and max_chars must be >= 1")
    words = re.findall(r"^\s+|\S+\s*", text)
    pieces: list[str] = []
    for i in range(0, len(words), words_per_piece):
        piece = "".join(words[i : i + words_per_piece])
        pieces.extend(piece[j : j + max_chars] for j in range(0, len(piece), max_chars))
    return pieces


@dataclass(frozen=True, slots=True)
class ScoredSentence:
    """A candidate answer sentence: its text, its passage handle and how it scored."""

    text: str
    handle: str
    score: float
    cosine: float
    overlap: float


class ExtractiveChatModel:
    """Answers from the retrieval context by sentence selection (no generation).

    Score of a sentence = ``cosine(question, sentence) + lexical_weight * overlap`` where
    ``overlap`` is the share of the question's content terms (``content_terms``) found in the
    sentence. The bonus is there because a small English bi-encoder is weak on exact tokens
    (names, codes, numbers, and Chinese text, which it sees character by character); 0.15 is
    enough to break ties among similar sentences without letting a keyword match outrank a
    clearly better paraphrase. Markdown heading lines (``# Title``) are not candidates. Sentences below ``min_score`` are dropped; the best
    ``max_sentences`` are taken greedily, skipping one whose cosine with an already chosen
    sentence exceeds ``redundancy``; the answer lists them by score, each followed by
    `` <ref id="HANDLE"/>``, separated by single spaces.

    ``max_tokens`` / ``max_completion_tokens`` cut the answer at that many estimated tokens
    (``estimate_tokens``) with finish reason ``"length"``; other options are ignored.
    """

    supports_vision = False
    #: it selects sentences; it cannot follow prompts (rewrite, SQL, entity extraction)
    follows_instructions = False

    def __init__(
        self,
        embedder: Embedder,
        max_sentences: int = 3,
        *,
        min_score: float = 0.25,
        redundancy: float = 0.9,
        lexical_weight: float = 0.15,
        max_candidates: int = 2000,
        words_per_piece: int = 3,
    ) -> None:
        if max_sentences < 1:
            raise ValueError(f"max_sentences must be >= 1, got {max_sentences}")
        if max_candidates < 1:
            raise ValueError(f"max_candidates must be >= 1, got {max_candidates}")
        if words_per_piece < 1:
            raise ValueError(f"words_per_piece must be >= 1, got {words_per_piece}")
        self.embedder = embedder
        self.max_sentences = max_sentences
        self.min_score = min_score
        self.redundancy = redundancy
        self.lexical_weight = lexical_weight
        self.max_candidates = max_candidates
        self.words_per_piece = words_per_piece
        self.model_id = "extractive:" + embedder.model_key

    @property
    def in_process(self) -> bool:
        """In process when its embedder is (the offline MiniLM): then no stage timeout applies."""
        return is_in_process(self.embedder)

    def __repr__(self) -> str:
        return f"ExtractiveChatModel({self.embedder!r}, max_sentences={self.max_sentences})"

    def select(self, question: str, passages: Sequence[RetrievedPassage]) -> list[ScoredSentence]:
        """The chosen sentences, best first (empty when nothing clears ``min_score``)."""
        if not question.strip():
            return []
        candidates: list[tuple[str, str]] = []
        seen: set[str] = set()
        for passage in passages:
            for sentence in split_sentences(passage.text):
                if _HEADING_RE.match(sentence):  # headings name the topic; they answer nothing
                    continue
                if sentence not in seen:
                    seen.add(sentence)
                    candidates.append((sentence, passage.handle))
        candidates = candidates[: self.max_candidates]
        if not candidates:
            return []
        vectors = np.asarray(self.embedder.embed([question] + [s for s, _ in candidates]), dtype=np.float32)
        if vectors.shape[0] != len(candidates) + 1:
            raise ModelError(f"{self.model_id}: embedder returned {vectors.shape[0]} vectors for {len(candidates) + 1}")
        sentence_vectors = vectors[1:]
        cosines = row_dots(sentence_vectors, vectors[0])  # a sentence's score never depends on the others
        q_terms = content_terms(question)
        scored: list[tuple[float, int, float, float]] = []
        for i, (sentence, _) in enumerate(candidates):
            overlap = len(q_terms & content_terms(sentence)) / len(q_terms) if q_terms else 0.0
            score = float(cosines[i]) + self.lexical_weight * overlap
            if score >= self.min_score:
                scored.append((score, i, float(cosines[i]), overlap))
        scored.sort(key=lambda t: (-t[0], t[1]))
        chosen: list[int] = []
        out: list[ScoredSentence] = []
        for score, i, cosine, overlap in scored:
            if len(chosen) >= self.max_sentences:
                break
            if chosen and float(np.max(row_dots(sentence_vectors[chosen], sentence_vectors[i]))) > self.redundancy:
                continue
            chosen.append(i)
            out.append(ScoredSentence(candidates[i][0], candidates[i][1], score, cosine, overlap))
        return out

    def answer(self, messages: Sequence[ChatMessage]) -> str:
        """The full answer text for ``messages`` (synchronous; embeds on the calling thread)."""
        chosen = self.select(question_of(messages), find_retrieval(messages))
        if not chosen:
            return NO_ANSWER
        return " ".join(f'{s.text} <ref id="{s.handle}"/>' for s in chosen)

    async def _respond(self, messages: Sequence[ChatMessage], options: ChatOptions | None) -> ChatResponse:
        text = await asyncio.to_thread(self.answer, list(messages))
        finish_reason = "stop"
        limit = None
        if options is not None:
            limit = options.max_completion_tokens or options.max_tokens
        if limit is not None and limit > 0 and estimate_tokens(text) > limit:
            text = _truncate_tokens(text, limit)
            finish_reason = "length"
        prompt_tokens = sum(estimate_tokens(m.content) for m in messages)
        completion_tokens = estimate_tokens(text)
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        return ChatResponse(content=text, finish_reason=finish_reason, usage=usage)

    async def chat(self, messages: Sequence[ChatMessage], options: ChatOptions | None = None) -> ChatResponse:
        return await self._respond(messages, options)

    async def chat_stream(
        self, messages: Sequence[ChatMessage], options: ChatOptions | None = None
    ) -> AsyncIterator[StreamChunk]:
        """The ``chat()`` text as ``answer`` chunks of a few words, then a ``done`` chunk."""
        resp = await self._respond(messages, options)
        for piece in stream_pieces(resp.content, self.words_per_piece):
            yield StreamChunk(response_type="answer", content=piece)
            await asyncio.sleep(0)
        yield StreamChunk(
            response_type="answer", content="", done=True, finish_reason=resp.finish_reason, usage=dict(resp.usage)
        )
