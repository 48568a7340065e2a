"""Sentences of retrieved text, as the extractive answerer reads them: hard line wraps joined
(:func:`join_wrapped_lines`) and the text split after ``. ! ?`` + whitespace, after the CJK
terminators ``。！？；`` and at the remaining newlines (:func:`split_sentences`), but not after an
abbreviation or an initial ("e.g.", "Dr.", "Florence M.") nor at a terminator followed by a
lower-case word.

>>> split_sentences('Florence M. Sterling founded it in 1874. It still runs!  "Run!" she said.')
['Florence M. Sterling founded it in 1874.', 'It still runs!', '"Run!" she said.']
"""

from __future__ import annotations

import re

__all__ = ["CJK_RANGES", "join_wrapped_lines", "split_sentences"]

#: the CJK character ranges (for regex classes)
CJK_RANGES = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
# A sentence ends after . ! ? (followed by whitespace or the end, optionally after closing quotes
# or brackets), after the CJK terminators 。！？； (no space needed), or at a newline.
_SENTENCE_END_RE = re.compile(r"(?<=[.!?])[\"'”’)\]]*(?=\s|$)|(?<=[。！？；])[”’」』）]*|\n")
# The word before a final "." (letters and inner dots: "e.g", "Dr", "M"), for the abbreviation check.
_LAST_WORD_RE = re.compile(r"(?<![^\s(\"'“‘\[])[A-Za-z][A-Za-z.]*\.?$")
# Abbreviations whose "." ends no sentence: single capital initials, dotted forms (e.g., i.e.,
# U.S., O.F.M.), common titles and "c." / "ca." (circa).
_ABBREVIATION_RE = re.compile(
    r"[A-Z]\.?|(?:[A-Za-z]\.)+[A-Za-z]\.?|(?:Dr|Mr|Mrs|Ms|Prof|Sr|Jr|St|Mt|Capt|Gen|Col|Lt|Rev|Hon|vs|cf|approx|fig|Fig|c|ca)\.?"
)
_HAS_WORD_RE = re.compile(r"[^\W_]", re.UNICODE)
_IMAGE_LINE_RE = re.compile(r"^!\[[^\]]*\]\([^)]*\)$")

_LINE_ENDS_SENTENCE_RE = re.compile(r"[.!?:;。！？；：…][\"'”’)\]」』）]*\s*$")
_STRUCTURAL_LINE_RE = re.compile(r"\s*(?:[#>|*+\-•]|\d+[.)]\s|!\[|$)")
_LOWER_START_RE = re.compile(r"\s*[a-z]")


def _cjk(ch: str) -> bool:
    return "\u2e80" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff" or "\u3000" <= ch <= "\u303f"


def join_wrapped_lines(text: str) -> str:
    """Undo hard line wraps: a single line break inside a sentence (the line does not end with
    sentence punctuation, neither line is blank, a heading, a list item, a table row or an image)
    becomes a space, or nothing between two CJK characters. Paragraph breaks stay, except where a
    sentence runs on across them (the line before ends without sentence punctuation and the next
    line starts with a lower-case letter: two chunks joined where the chunker cut mid-sentence)."""
    lines = text.split("\n")
    out = [lines[0]] if lines else []
    blanks = 0  # blank lines seen since the last line kept
    for line in lines[1:]:
        if not line.strip():
            blanks += 1
            continue
        prev = out[-1]
        runs_on = (
            prev.strip()
            and not _LINE_ENDS_SENTENCE_RE.search(prev)
            and not _STRUCTURAL_LINE_RE.match(prev)
            and not _STRUCTURAL_LINE_RE.match(line)
        )
        if runs_on and (not blanks or _LOWER_START_RE.match(line)):
            a, b = prev.rstrip(), line.lstrip()
            out[-1] = a + ("" if (a and b and _cjk(a[-1]) and _cjk(b[0])) else " ") + b
        else:
            out.extend([""] * blanks)
            out.append(line)
        blanks = 0
    out.extend([""] * blanks)
    return "\n".join(out)


def _ends_sentence(text: str, m: re.Match[str]) -> bool:
    """Whether the terminator matched by ``m`` ends a sentence: not a newline-free ``.`` after an
    abbreviation or an initial ("e.g.", "Dr.", "Florence M."), and not a terminator followed by a
    lower-case word (``"Run!" she said``, ``e.g. the``)."""
    if m.group(0) == "\n":
        return True
    i = m.end()
    while i < len(text) and text[i] in " \t":
        i += 1
    if i < len(text) and text[i].islower():
        return False
    end = m.start()  # just after the terminator
    if text[end - 1] != ".":
        return True
    word = _LAST_WORD_RE.search(text, max(0, end - 24), end)
    return word is None or not _ABBREVIATION_RE.fullmatch(word.group(0))


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``: hard line wraps joined first (:func:`join_wrapped_lines`), then split
    after ``. ! ?`` + whitespace, after ``。！？；`` and at the remaining newlines; stripped; pieces
    without any letter or digit, and Markdown image lines, are dropped. A ``.`` after an
    abbreviation or a capital initial, and a terminator followed by a lower-case word, end no
    sentence."""
    text = join_wrapped_lines(text)
    out: list[str] = []
    start = 0
    for m in _SENTENCE_END_RE.finditer(text):
        if not _ends_sentence(text, m):
            continue
        out.append(text[start : m.end()])
        start = m.end()
    out.append(text[start:])
    sentences = []
    for s in out:
        s = s.strip()
        if s and _HAS_WORD_RE.search(s) and not _IMAGE_LINE_RE.match(s):
            sentences.append(s)
    return sentences
