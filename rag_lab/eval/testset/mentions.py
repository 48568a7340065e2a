"""Names a sentence mentions that can be the first hop of a bridge (:mod:`.bridge`), with what
the bridge calls them.

* :func:`cast_names`: the people a work lists in its cast — the names after "starring", "stars",
  "starred", "co-starring", "the voices of", "the debut of", or "the cast (also) features /
  includes", split at commas and "and", a descriptor before a name dropped ("Indian actors Ananth
  Nag" → "Ananth Nag"); an item that is no capitalised name is left out. The bridge calls such a
  person by their own document's definition (:func:`person_role`): "the American actress in the
  cast of The Curse of the Jade Scorpion";
* :func:`known_for`: "He is best known for his portrayal of Chris Halliwell in the television
  series "Charmed"" → the work and its kind: "the television series Drew Fuller is best known
  for".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rag_lab.eval.testset.en_subject import proper_names, split_sentences, subject_of
from rag_lab.eval.testset.en_words import NAME

__all__ = ["KnownFor", "cast_names", "known_for", "person_role"]

_CUE = re.compile(
    r"\b(?:starring|stars|starred|co-starring|co-stars|co-starred|the voices of|the debut of)\s+"
    r"|\bcast\b[^.;]{0,20}?\b(?:features|featured|includes|included)\s+"
)
_ITEM_END = re.compile(r"[.;:()]|\s(?:in|as|with|among|who|which|while)\s")
_ROLE_END = re.compile(r",|;|\(|\s(?:who|which|that|known|best|born|from|whose|with|in|of|for|on)\s")


def cast_names(text: str) -> list[str]:
    """The whole names a cast cue lists in ``text``'s sentences, in order, each once."""
    out: list[str] = []
    for sent in split_sentences(" ".join(text.split())):
        for m in _CUE.finditer(sent):
            tail = sent[m.end() :]
            cut = _ITEM_END.search(tail)
            for item in re.split(r",\s*(?:and\s+)?|\s+and\s+", tail[: cut.start()] if cut else tail):
                words = item.split()
                lower = [i for i, w in enumerate(words) if w[:1].islower()]
                name = " ".join(words[lower[-1] + 1 :] if lower else words)
                if name and re.fullmatch(NAME, name) and name not in out:
                    out.append(name)
    return out


def person_role(description: str) -> str:
    """The words of a person's definition before its first clause or comma, without the article
    ("an English actor who has appeared in …" → "English actor"); "" when that is not two to
    five words."""
    words = description.split()
    if not words or words[0].lower() not in ("a", "an"):
        return ""
    cut = _ROLE_END.search(f" {' '.join(words[1:])} ")
    role = (f" {' '.join(words[1:])} "[: cut.start()] if cut else " ".join(words[1:])).strip()
    return role if 2 <= len(role.split()) <= 5 else ""


@dataclass(frozen=True, slots=True)
class KnownFor:
    """A person (``subject``, as a question names them) best known for a work (``work``) of a
    ``kind`` ("television series"), ``aux`` the sentence's tense."""

    subject: str
    aux: str
    kind: str
    work: str


_KNOWN = re.compile(
    rf"(?P<pre>.{{2,80}}?) (?P<aux>is|was) best known for\b[^.;]*?\b(?:in|on|for|from|of) the "
    rf'(?P<kind>(?:[a-z-]+ ){{0,2}}[a-z-]+) "?(?P<work>{NAME})'
)


def known_for(text: str, title: str) -> list[KnownFor]:
    """Every "X is best known for … in the <kind> <Work>" of ``text`` (a document titled
    ``title``: a pronoun subject stands for it)."""
    names = proper_names(text)
    out: list[KnownFor] = []
    for sent in split_sentences(" ".join(text.split())):
        m = _KNOWN.match(sent)
        if m is None or (subj := subject_of(m["pre"], title, names)) is None:
            continue
        out.append(KnownFor(subj, m["aux"], m["kind"], m["work"].rstrip(".")))
    return out
