"""The sentences of an English text and the subject a question can name (:mod:`.forms_en`):
sentence splitting that knows titles and initials, and the words before a verb turned into a
subject — an opening phrase of time or place, parentheses and appositives dropped, a pronoun or
a generic subject replaced by the document's title, clauses and sentence-initial common nouns
refused."""

from __future__ import annotations

import html
import re

from rag_lab.eval.testset.en_words import FUNCTION_WORDS

__all__ = ["PRONOUNS", "common_name", "display_title", "proper_names", "split_sentences", "subject_of"]

_ABBREV = re.compile(
    r"(?:\b(?:Mr|Mrs|Ms|Dr|St|Mt|Jr|Sr|Prof|Gen|Col|Lt|Sgt|Capt|Rev|No|vs|etc|Inc|Ltd|Co|lit|c|ca)|\b[A-Z])$"
)
_SPLIT = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+(?=[\"'(\[]?[A-Z0-9])|\n+")


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``: split after ``.``, ``!`` or ``?`` followed by a space and a capital
    or a digit (not after a title such as ``Dr.`` or an initial), and at line breaks."""
    out: list[str] = []
    buf = ""
    pos = 0
    for m in _SPLIT.finditer(text):
        piece = text[pos : m.start()]
        pos = m.end()
        buf = f"{buf} {piece}" if buf else piece
        if "\n" not in m.group() and _ABBREV.search(buf.rstrip(".")):
            continue  # "Dr. Smith", "J. Smith": the same sentence goes on
        if buf.strip():
            out.append(buf.strip())
        buf = ""
    rest = f"{buf} {text[pos:]}" if buf else text[pos:]
    if rest.strip():
        out.append(rest.strip())
    return out


PRONOUNS = {"it", "he", "she", "they", "this"}
_GENERIC_HEAD = {"the", "this"}
_LEADING = set(
    "in on at after before during from by with since although though when while as if because however for to of "
    "and but there following despite unlike like according between under over about among through within around "
    "until upon once also then today currently originally later its his her their some many most several one two three four five six seven eight nine ten".split()
)
_PARENS = re.compile(r"\s*\([^()]*\)|\s*\[[^\]]*\]")


_META_TITLE = re.compile(
    r"^(?:list|lists|geography|history|timeline|outline|index|glossary) of\b|\b(?:discography|filmography|bibliography)$",
    re.IGNORECASE,
)


def _clean_title(title: str) -> str:
    """The title as a question names it: without parentheses; empty for a title about a topic
    rather than a thing ("List of …", "History of …")."""
    t = _PARENS.sub("", title).strip()
    return "" if _META_TITLE.match(t) else t


def _lower_article(subj: str, title: str) -> str:
    """``The`` inside a question is lower-cased unless the title itself opens with it."""
    if subj.startswith("The ") and not title.startswith("The "):
        return "the " + subj[4:]
    return subj


def subject_of(prefix: str, title: str, names: frozenset[str] = frozenset(), kind: bool = False) -> str | None:
    """The subject a question can name, from the words before a sentence's verb (``prefix``):
    parentheses, nicknames in quotes and an appositive (", originally published as Y,") dropped
    (not a comma of the title itself, "Never, Neverland");
    a pronoun or a generic subject ("The bridge") replaced by the document's ``title``; None when
    the subject is too long, opens with a preposition or conjunction, or is a common noun that is
    capitalised only because it opens the sentence (``names``: words seen capitalised elsewhere in
    the source). ``kind``: "A sourdough starter" (a kind of thing, lower-cased) is a subject too,
    for a definition."""
    s = _opening_phrase_dropped(_PARENS.sub("", prefix).strip())
    if re.fullmatch(r'"[^"]+"', s):  # a quoted title: "I'll Be Here Awhile"
        return s if len(s.split()) <= 10 else None
    s = re.sub(r'\s"[^"]*"', "", s)
    whole = display_title(title)
    # a title with a comma of its own ("Never, Neverland") is not cut at it like an appositive;
    # a rank after the comma is ("John Talbot, 3rd Earl of Shrewsbury")
    own = "," in whole and s.startswith(whole) and whole.split(",", 1)[1].strip()[:1].isupper()
    s = whole if own else s.split(",")[0].strip()
    if re.search(r"[()\[\]\":;?!]", s):
        return None
    words = s.split()
    if not words or len(words) > 8 or words[0].lower() in _LEADING - _GENERIC_HEAD or _is_clause(words):
        return None
    clean = _clean_title(title)
    if s.lower() in PRONOUNS or (words[0].lower() in _GENERIC_HEAD and len(words) == 2 and words[1][:1].islower()):
        return _lower_article(clean, clean) or None
    if not words[0][:1].isupper() and not words[0][:1].isdigit():
        return None
    if kind and words[0] in ("A", "An") and 1 < len(words) <= 3 and all(w[:1].islower() for w in words[1:]):
        return s[0].lower() + s[1:]  # a kind of thing: "A sourdough starter is …" → "What is a sourdough starter?"
    if len(words) == 1 or all(not w[:1].isupper() for w in words[1:]):
        # one capitalised word: a name only when it is capitalised elsewhere too or is in the title
        if words[0] not in names and words[0].lower() not in re.findall(r"\w+", title.lower()):
            return None
    if words[0] in ("The", "A", "An") and len(words) > 1 and not _named_after(words[1:]):
        return None  # "The first bridge": a description, not a name
    return _lower_article(s, clean)


_OPENING = re.compile(r"(?:In|On|At|After|Before|During|From|Since|Following|By|Until|Upon|As of)\s[^,]{1,50},\s+")


def _opening_phrase_dropped(prefix: str) -> str:
    """``prefix`` without an opening phrase of time or place set off by a comma ("At the 2011
    census, Young" → "Young"), when one name or pronoun follows it (no further comma, no "and")."""
    m = _OPENING.match(prefix)
    if m is None:
        return prefix
    rest = prefix[m.end() :]
    return rest if "," not in rest and " and " not in f" {rest} " else prefix


_PARTICLES = frozenset("ap bin ibn al el van von de da di du le la del der den ter y dos das vs v. or".split())


def _named_after(words: list[str]) -> bool:
    """Words after an article that make a name: a capitalised first one, or or one later
    ("The 1998 Eastern Tornado Outbreak", "The new Orrin Bridge"), not "The first bridge"."""
    return any(w[:1].isupper() for w in words)


def _is_clause(words: list[str]) -> bool:
    """Words that read as a clause, not a name: a pronoun with more words after it ("He directed
    the film"), a relative word, or a capitalised word after a lower-case word that is not a
    function word ("North Carolina chose the Plott Hound")."""
    if len(words) > 1 and words[0].lower() in PRONOUNS:
        return True
    lower_seen = False
    for w in words[2 if words[0] in ("The", "A", "An") else 1 :]:  # "The new Orrin Bridge"
        if w.lower() in ("which", "who", "that", "where", "whose"):
            return True
        if w[:1].isupper() and lower_seen:
            return True
        lower_seen = lower_seen or (w[:1].islower() and w not in FUNCTION_WORDS and w not in _PARTICLES)
    return False


def proper_names(text: str) -> frozenset[str]:
    """Words capitalised inside a sentence (not only at its start): the source's proper nouns."""
    return frozenset(m.group(1) for m in re.finditer(r"(?<=[a-z,;] )([A-Z][\w'-]+)", text))


def display_title(title: str) -> str:
    """A title as a question writes it: parentheses dropped, HTML entities decoded
    ("Eddie &quot;The Eagle&quot; Edwards" → 'Eddie "The Eagle" Edwards')."""
    return html.unescape(_PARENS.sub("", title)).strip()


def common_name(subject: str, title: str) -> str:
    """The name a person would type for ``subject``: the document's ``title`` (parentheses
    dropped) when the subject is the same one written out in full — no article, the same last
    word, and the one word alone or a given name that matches one of the title's ("Nicholas
    Lofton Hexum" of "Nick Hexum", "Andrew Alan Fuller" of "Drew Fuller", "Ward" of "M. Ward", not
    "Hank Williams" of "Audrey Williams") —, else ``subject`` itself. A title with a comma
    ("Edward Stafford, 4th Baron Stafford") or of more than four words is not a name typed whole."""
    name = display_title(title)
    words, have = name.split(), subject.split()
    if not have or not words or "," in name or len(words) > 4 or have[0].lower() in ("the", "a", "an"):
        return subject
    if have[-1] != words[-1] or name == subject:
        return subject
    given = any(_same_given(a.lower(), b.lower()) for a in have[:-1] for b in words[:-1])
    return name if len(have) == 1 or given else subject


def _same_given(a: str, b: str) -> bool:
    """Two forms of one given name: the same first two letters, or one inside the other ("drew",
    "andrew")."""
    return a[:2] == b[:2] or a in b or b in a
