"""The people a work's text lists in its cast, and what a person's own document calls them: the
first hop of a bridge through a cast ("the American actress in the cast of The Curse of the Jade
Scorpion", :mod:`.bridge`).

* :func:`cast_names`: the names after "starring", "stars", "starred", "co-starring", "the voices
  of", or "the cast (also) features / includes", split at commas and "and"; an item that is not a
  whole capitalised name ("Kymsleen Kholie in lead roles") is left out;
* :func:`person_role`: a person's definition ("an American actress, director, and screenwriter")
  cut to the words that say who they are ("American actress").
"""

from __future__ import annotations

import re

from rag_lab.eval.testset.en_subject import split_sentences
from rag_lab.eval.testset.en_words import NAME

__all__ = ["cast_names", "person_role"]

_CUE = re.compile(
    r"\b(?:starring|stars|starred|co-starring|co-stars|co-starred|the voices of)\s+"
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
                name = item.strip()
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
