"""Reading the query-understanding reply (spec §4.3.5): tolerant JSON with key aliases and the OCR
merge, recovery of what a cut or malformed reply still tells (seed: partial recovery), and the
check that a rewrite still stands for the user's message."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping

from rag_lab.types.intent import QueryIntent

REWRITE_KEYS = ("rewrite_query", "rewritten_query", "query", "question")
DESC_KEYS = ("image_description", "image_desc", "image_text", "image_ocr_text", "description")
OCR_KEYS = ("ocr_text", "ocr", "full_ocr", "image_ocr", "ocr_content")
OCR_LABEL = "\n\n[OCR]\n"


_DATE_TIME_RE = re.compile(
    r"\d{4}[-/.年]\d{1,2}[-/.月]\d{1,2}日?(?:[ T]*\d{1,2}:\d{2}(?::\d{2})?)?|\b\d{1,2}:\d{2}(?::\d{2})?\b"
)
_WEEKDAY_RE = re.compile(
    r"\b(?:mon|tues|wednes|thurs|fri|satur|sun)day\b|星期[一二三四五六日天]|周[一二三四五六日]", re.IGNORECASE
)
_ECHO_NGRAM = 5


def _words_of(text: str) -> list[str]:
    return re.findall(r"\w+", unicodedata.normalize("NFKC", text or "").casefold())


def _ngrams(words: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def rewrite_rejection(rewrite: str, user_text: str, prompt_text: str = "") -> str:
    """Why ``rewrite`` cannot stand for the user's message, or "" when it can.

    ``user_text`` is what the user wrote (the question and the conversation), ``prompt_text`` the
    instructions around it. Rejected: an empty rewrite; one without a single letter; one that
    carries a date or time (or a weekday) the user never wrote — the prompt's runtime line copied
    over; one that is mostly that date/time; one repeating five or more consecutive words of the
    prompt that the user did not write (the prompt echoed); a bare intent label.
    """
    text = (rewrite or "").strip()
    if not text:
        return "empty rewrite"
    if not any(ch.isalpha() for ch in text):
        return f"no words in the rewrite ({text[:40]!r})"
    user = user_text or ""
    stamps = [m.group(0) for m in _DATE_TIME_RE.finditer(text)] + [m.group(0) for m in _WEEKDAY_RE.finditer(text)]
    foreign = [st for st in stamps if st.casefold() not in user.casefold()]
    if foreign:
        return f"the rewrite carries a date/time the user did not write ({foreign[0]!r}): the prompt's runtime line"
    if text.casefold() in {i.value for i in QueryIntent if i.value} and text.casefold() not in user.casefold():
        return f"the rewrite is an intent label ({text!r})"
    words = _words_of(text)
    if prompt_text and len(words) >= _ECHO_NGRAM:
        echoed = (_ngrams(words, _ECHO_NGRAM) & _ngrams(_words_of(prompt_text), _ECHO_NGRAM)) - _ngrams(
            _words_of(user), _ECHO_NGRAM
        )
        if echoed:
            return f"the rewrite repeats the prompt ({' '.join(sorted(echoed)[0])!r})"
    return ""


# -- output parsing ------------------------------------------------------------------------------
def _first_str(obj: Mapping[str, object], keys: tuple[str, ...]) -> str:
    for k in keys:
        v = obj.get(k)
        if isinstance(v, str):
            return v.strip()
    return ""


def merge_image_description(desc: str, ocr: str) -> str:
    """One of them when the other is empty; ``desc`` alone when it already holds the OCR text;
    otherwise ``desc + "\\n\\n[OCR]\\n" + ocr`` (spec §4.3.5)."""
    if desc and ocr and ocr not in desc:
        return f"{desc}{OCR_LABEL}{ocr}"
    return desc or ocr


def parse_query_understanding(text: str) -> dict[str, str] | None:
    """``{"rewrite_query", "intent", "image_description"}`` from a complete model reply, or None
    when no JSON object can be read (spec §4.3.5: the whole text, then first ``{`` to last ``}``)."""
    t = text.strip()
    if not t:
        return None
    obj: object = None
    try:
        obj = json.loads(t)
    except ValueError:
        a, b = t.find("{"), t.rfind("}")
        if a != -1 and b > a:
            try:
                obj = json.loads(t[a : b + 1])
            except ValueError:
                obj = None
    if not isinstance(obj, dict):
        return None
    intent = obj.get("intent")
    return {
        "rewrite_query": _first_str(obj, REWRITE_KEYS),
        "intent": intent.strip() if isinstance(intent, str) else "",
        "image_description": merge_image_description(_first_str(obj, DESC_KEYS), _first_str(obj, OCR_KEYS)),
    }


_ESCAPES = {'"': '"', "'": "'", "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_BARE_KEY = re.compile(r"[A-Za-z_][\w-]*")
_SCALAR = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null|True|False|None")
_NOT_STRING = object()


def _scan_string(s: str, i: int) -> tuple[str, int, bool]:
    """Decode the string literal opening at ``s[i]`` (``"`` or ``'``): ``(text, end, complete)``.

    A literal cut by the end of the text returns what was decoded so far (an escape sequence cut
    in the middle, or half of a surrogate pair, is dropped). Raw control characters are kept and
    unknown escapes yield the escaped character: models emit both.
    """
    quote, n = s[i], len(s)
    out: list[str] = []
    j = i + 1
    while j < n:
        c = s[j]
        if c == quote:
            return "".join(out), j + 1, True
        if c != "\\":
            out.append(c)
            j += 1
            continue
        if j + 1 >= n:
            break  # cut right after the backslash
        e = s[j + 1]
        if e != "u":
            out.append(_ESCAPES.get(e, e))
            j += 2
            continue
        hex4 = s[j + 2 : j + 6]
        if not _HEX4.fullmatch(hex4):
            if j + 6 > n and all(ch in "0123456789abcdefABCDEF" for ch in hex4):
                break  # cut inside \uXXXX
            out.append("u")
            j += 2
            continue
        code = int(hex4, 16)
        j += 6
        if 0xD800 <= code < 0xDC00:  # high surrogate: needs its low half
            low = s[j + 2 : j + 6] if s[j : j + 2] == "\\u" else ""
            if _HEX4.fullmatch(low) and 0xDC00 <= int(low, 16) < 0xE000:
                out.append(chr(0x10000 + ((code - 0xD800) << 10) + (int(low, 16) - 0xDC00)))
                j += 6
                continue
            rest = s[j:]
            if len(rest) < 6 and "\\u".startswith(rest[:2]) and all(ch in "0123456789abcdefABCDEF" for ch in rest[2:]):
                break  # the pair is cut by the end of the text
            out.append("\ufffd")
            continue
        out.append("\ufffd" if 0xDC00 <= code < 0xE000 else chr(code))
    return "".join(out), n, False


def _skip_ws(s: str, i: int, extra: str = "") -> int:
    n = len(s)
    while i < n and (s[i].isspace() or s[i] in extra):
        i += 1
    return i


def _skip_value(s: str, i: int) -> tuple[int, bool]:
    """Skip a non-string JSON value at ``s[i]``: ``(end, complete)``."""
    if s[i] in "{[":
        depth, j, n = 0, i, len(s)
        while j < n:
            c = s[j]
            if c in "\"'":
                _, j, ok = _scan_string(s, j)
                if not ok:
                    return n, False
                continue
            if c in "{[":
                depth += 1
            elif c in "}]":
                depth -= 1
                if depth == 0:
                    return j + 1, True
            j += 1
        return n, False
    m = _SCALAR.match(s, i)
    if m is None:
        return len(s), False
    end = m.end()
    # a number or literal touching the end of the text may itself be cut ("tru", "12" of "123")
    return end, end < len(s)


def scan_object_prefix(text: str) -> dict[str, tuple[object, bool]]:
    """The members of the first JSON object in ``text``, read as far as the text goes.

    Maps each key to ``(value, complete)``: the decoded string for string values (possibly cut),
    or a marker for any other value. Tolerates fences and prose around the object, trailing
    commas, single quotes and bare keys. Reading stops at the first member that cannot be read.
    """
    s = text
    start = s.find("{")
    if start == -1:
        return {}
    found: dict[str, tuple[object, bool]] = {}
    i, n = start + 1, len(s)
    while True:
        i = _skip_ws(s, i, ",")
        if i >= n or s[i] == "}":
            break
        if s[i] in "\"'":
            key, i, ok = _scan_string(s, i)
            if not ok:
                break
        else:
            m = _BARE_KEY.match(s, i)
            if m is None:
                break
            key, i = m.group(), m.end()
        i = _skip_ws(s, i)
        if i >= n or s[i] != ":":
            break
        i = _skip_ws(s, i + 1)
        if i >= n:
            break
        value: object
        if s[i] in "\"'":
            value, i, ok = _scan_string(s, i)
        else:
            i, ok = _skip_value(s, i)
            value = _NOT_STRING
        if ok or key not in found or not found[key][1]:
            found[key] = (value, ok)
        if not ok:
            break
    return found


def recover_truncated_understanding(text: str) -> dict[str, str] | None:
    """What a cut or malformed reply still tells (seed: partial recovery).

    ``rewrite_query`` (with its aliases) and ``intent`` count only when their string is complete;
    the image description (and OCR text) may be cut and is kept up to the cut. None when none of
    these keys could be read (then nothing changes).
    """
    found = scan_object_prefix(text)

    def complete_str(keys: tuple[str, ...]) -> str | None:
        for k in keys:
            if k in found:
                v, ok = found[k]
                if ok and isinstance(v, str):
                    return v.strip()
        return None

    def any_str(keys: tuple[str, ...]) -> str | None:
        for k in keys:
            if k in found and isinstance(found[k][0], str):
                return str(found[k][0]).strip()
        return None

    rewrite, intent = complete_str(REWRITE_KEYS), complete_str(("intent",))
    desc, ocr = any_str(DESC_KEYS), any_str(OCR_KEYS)
    if rewrite is None and intent is None and desc is None and ocr is None:
        return None
    return {
        "rewrite_query": rewrite or "",
        "intent": intent or "",
        "image_description": merge_image_description(desc or "", ocr or ""),
    }
