"""English question forms: a question a person would type, made from one sentence by a fixed
template, with the span it asks for as the answer. No model, no parser: each form is a regular
pattern over the sentence, and a question is made only when the pattern holds.

* ``definition``: "X is a Y" → "What is X?" (``Who`` when Y names a person), answer Y;
* ``date``: "X (born 3 May 1950)" / "X (1868–1941)" → "When was X born?" / "When did X die?";
  "X was founded in 1887" → "When was X founded?"; "X joined the band in 1995" → "When did X
  join the band?";
* ``number``: "a population of 12,400" → "What is the population of X?"; "310 metres long" →
  "How long is X?"; "X has 13 stations" → "How many stations does X have?"; an area → "What is
  the area of X?";
* ``agent``: "X is a film directed by Z" / "X was designed by Z" → "Who directed X?", answer Z;
* ``place``: "X is located in Z" → "Where is X located?"; "X was born in Z" → "Where was X born?".

The subject X is the words before the verb, without parentheses and appositives; a pronoun or a
generic subject ("It", "The bridge") stands for the document's title; a subject that is neither
a name nor such a stand-in ("Construction began in 1906") gives no question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rag_lab.eval.testset.en_subject import proper_names, split_sentences, subject_of
from rag_lab.eval.testset.en_words import (
    ABOUT,
    AGENT,
    AREA_UNITS,
    DATE,
    FUNCTION_WORDS,
    HAVE,
    LENGTH_UNITS,
    MEASURE_CUES,
    NAME,
    NUM,
    PERSON,
    RANKED,
    WHEN_ACTIVE,
    WHEN_PART,
    WORDNUM,
)

__all__ = ["EN_FORMS", "Form", "english_questions", "split_sentences", "subject_of"]

EN_FORMS: tuple[str, ...] = ("definition", "identity", "date", "number", "agent", "place")


@dataclass(frozen=True, slots=True)
class Form:
    """A question made by a template, the span of the source it asks for, the form's name, and,
    where the question names a subject, that subject as the question writes it (``verb``: the
    participle of an ``agent`` question, "directed")."""

    question: str
    answer: str
    form: str
    subject: str = ""
    verb: str = ""


_COPULA = re.compile(r"\s(is|was|are|were)\s")
_BOUNDARY = re.compile(
    r",|;|:|\(|\s[–—-]\s|\s(?:which|that|who|whose|where|when|while)\s"
    r"|\sand\s(?:is|was|has|had|stands|remains|became|becomes|won|served|played|received|appeared)\s"
)
_HEAD_END = (FUNCTION_WORDS - {"and", "or"}) | frozenset(AGENT) | {"known", "based", "located", "situated", "best"}


_PAST_AUX = {"is": "was", "are": "were"}
_OF_PLACE = r"(?:the\s+(?:[a-z-]+\s+){1,3}of\s+)?"  # "in the mill town of Harlow Cross"
_GREW = {"grew up": "grow up", "lived": "live", "settled": "settle", "died": "die", "was raised": "was raised"}


def _active_place(sent: str, title: str, names: frozenset[str]) -> list[Form]:
    m = re.match(rf"(.{{2,80}}?)\s({'|'.join(_GREW)})\s+in\s+{_OF_PLACE}", sent)
    if m is None or _COPULA.search(m.group(1) + " ") or (subj := subject_of(m.group(1), title, names)) is None:
        return []
    where = _name_at(sent, m.end())
    if where is None:
        return []
    verb = _GREW[m.group(2)]
    q = f"Where was {subj} raised?" if verb == "was raised" else f"Where did {subj} {verb}?"
    return [Form(q, where, "place", subj)]


def _description(rest: str) -> str | None:
    """The noun phrase a copular sentence gives (``a collectible dice game created by Z``), cut at
    the first clause boundary; None unless it is 3–20 words, opens with an article or "one of" and
    does not end on a bare number after fewer than four words ("a 501")."""
    cut = _BOUNDARY.search(rest)
    desc = (rest[: cut.start()] if cut else rest).strip().rstrip(".")
    words = desc.split()
    if not 3 <= len(words) <= 20 or words[0].lower() not in ("a", "an", "the", "one"):
        return None
    if words[0].lower() == "one" and words[1] != "of":
        return None
    return None if len(words) < 4 and not re.search(r"[^\W\d_]", words[-1]) else desc


def _head(desc: str) -> list[str]:
    """The words of a description up to its head noun ("a 1988 Telugu comedy film" of "a 1988
    Telugu comedy film produced by Jandhyala"), article included."""
    words = desc.split()
    end = next((i for i, w in enumerate(words[1:], 1) if w.lower() in _HEAD_END), len(words))
    return words[:end]


def _is_person(desc: str) -> bool:
    words = re.findall(r"[\w'-]+", " ".join(_head(desc)[1:]))
    return any(w.lower() in PERSON or (w.endswith(("ist", "ian")) and len(w) > 5 and w[:1].islower()) for w in words)


def _name_at(text: str, at: int) -> str | None:
    """The name that opens ``text[at:]``, trailing full stop dropped; None when the capitalised
    words are an adjective of a following noun ("British band")."""
    m = re.match(NAME, text[at:])
    if m is None:
        return None
    after = re.match(r"\s+([a-z][\w-]*)", text[at + m.end() :])
    if after and after.group(1) not in FUNCTION_WORDS and after.group(1) not in AGENT:  # "Z recorded …" is fine
        return None
    name = m.group()
    return name if re.search(r"\b[A-Z]\.$", name) else name.rstrip(".")


def _copular(sent: str, title: str, names: frozenset[str], first: bool) -> list[Form]:
    m = _COPULA.search(sent)
    if m is None or (subj := subject_of(sent[: m.start()], title, names, kind=True)) is None:
        return []
    aux, rest = m.group(1), sent[m.end() :]
    kind = subj[:2] in ("a ", "an") and subject_of(sent[: m.start()], title, names) is None
    literal = subj.lower() in sent[: m.start()].lower()  # named in the sentence, not a stand-in
    out: list[Form] = []
    desc = _description(rest)
    ranked = desc is not None and len(desc.split()) >= 5 and _ranked(desc.split()[1])
    if desc is not None and (desc.split()[0].lower() in ("a", "an", "one") or (first and not ranked)):
        life = re.search(r"\((?:[^()]*\s)?(?:born\s|\d{4}\s*[–—-])", sent) is not None
        who = life or _is_person(desc)
        out.append(Form(f"{'Who' if who else 'What'} {aux} {subj}?", desc, "definition", subj))
    elif desc is not None and literal and ranked:
        wh = "Who" if _is_person(desc) else "What"
        out.append(Form(f"{wh} {aux} {_whose(desc) or desc}?", _span(sent, subj), "identity"))
    if kind:  # "a sourdough starter": only asked what it is
        return out
    lead = r"(?:(?:first|originally|officially|later|also|formally)\s+)?"
    when = rf"(?:|.*?\band\s+|(?P<after>[^;()]*?,\s+)){lead}(?P<part>{'|'.join(WHEN_PART)})"
    if w := re.match(rf"{when}(?P<obj>(?:\s+[a-z][\w-]*){{0,4}}?)\s+(?:in|on)\s+(?P<date>{DATE})", rest):
        past = _PAST_AUX.get(aux, aux) if w["after"] else aux  # "X is a band, formed in 1981": "When was X formed?"
        out.append(Form(f"When {past} {subj} {w['part']}{w['obj']}?", w["date"], "date", subj))
    # "X is a franchise based in Philadelphia": the place may follow a description
    place = re.match(rf"(?:[^,;()]*?\s)?{lead}(located|situated|based|headquartered)\s+in\s+{_OF_PLACE}", rest)
    born = re.match(rf"born\s+in\s+{_OF_PLACE}", rest)
    if (hit := place or born) and (where := _name_at(rest, hit.end())) is not None:
        verb = place.group(1) if place else "born"
        out.append(Form(f"Where {aux} {subj} {verb}?", where, "place", subj))
    return out


def _whose(desc: str) -> str | None:
    """ "the third studio album by Canadian singer-songwriter Avril Lavigne" as a person asks it:
    "Avril Lavigne's third studio album" (the maker's descriptor dropped: the capitalised words
    after the last lower-case one are the name); None unless the maker is one name and the thing
    made is at most four words."""
    thing, by, maker = desc.partition(" by ")
    words = thing.split()
    if not by or " and " in f" {maker} " or words[0] != "the" or not 2 <= len(words) - 1 <= 4 or "of" in words:
        return None
    tail = maker.split()
    lower = [i for i, w in enumerate(tail) if w[:1].islower()]
    name = " ".join(tail[lower[-1] + 1 :] if lower else tail)
    if not name or not re.fullmatch(NAME, name):
        return None
    suffix = "'" if name.endswith("s") else "'s"
    return f"{name}{suffix} {' '.join(words[1:])}"


def _ranked(word: str) -> bool:
    """A word that makes "the … " name one thing: an ordinal or a superlative."""
    w = word.lower()
    return w in RANKED or (w.endswith("est") and len(w) > 5)


def _span(sent: str, subj: str) -> str:
    """``subj`` as the sentence writes it (the question may have lower-cased its article)."""
    at = sent.lower().find(subj.lower())
    return sent[at : at + len(subj)] if at >= 0 else subj


def _agent(sent: str, title: str, names: frozenset[str]) -> list[Form]:
    m = _COPULA.search(sent)
    by = re.search(rf"\b({'|'.join(AGENT)})\s+by\s+(?:(?:the|a|an)\s+(?:[a-z-]+\s+){{1,2}})?", sent)
    if by is None or m is None or m.start() > by.start():
        return []
    subj = subject_of(sent[: m.start()], title, names)
    name = _name_at(sent, by.end())
    if subj is None or name is None:
        return []
    past, base = AGENT[by.group(1)]
    out = [Form(f"Who {past} {subj}?", name, "agent", subj, by.group(1))]
    desc = _description(sent[m.end() :] + ",")
    head = _head(desc) if desc else []
    between = sent[m.end() + len(" ".join(head)) : by.start()].split() if head else ["?"]
    if (
        len(head) >= 3
        and head[0].lower() in ("a", "an")
        and all(w in AGENT or w == "and" for w in between)
        and not _is_person(desc or "")
        and subj.lower() in sent[: m.start()].lower()
    ):
        out.append(Form(f"Which {' '.join(head[1:])} did {name} {base}?", _span(sent, subj), "identity"))
    return out


#: a work's head noun → the participle its maker is asked with ("an album by Z" → "Who recorded X?")
_WORKS = {
    **dict.fromkeys(("album", "EP", "single", "song", "duet", "record", "track", "mixtape"), "recorded"),
    **dict.fromkeys(
        ("book", "novel", "poem", "story", "collection", "memoir", "biography", "essay", "play"), "written"
    ),
    **dict.fromkeys(("opera", "symphony", "concerto", "sonata", "musical"), "composed"),
    "painting": "painted",
    "game": "developed",
}


def _work_by(sent: str, title: str, names: frozenset[str]) -> list[Form]:
    """'X is the third studio album by singer-songwriter M. Ward' → 'Who recorded X?'."""
    m = _COPULA.search(sent)
    if m is None or (subj := subject_of(sent[: m.start()], title, names)) is None:
        return []
    desc = _description(sent[m.end() :] + ",")
    head = _head(desc) if desc else []
    verb = _WORKS.get(head[-1]) if head else None
    at = m.end() + len(" ".join(head))  # then "by Z", or "of English cuisine by the celebrity cook Z"
    by = re.match(r"(?:\s+(?:of|from)\s+[^,;()]{0,40}?)?\s+by\s+(?:(?:the\s+)?[a-z][\w-]*\s+){0,3}", sent[at:])
    if verb is None or by is None:
        return []
    name = _name_at(sent, at + by.end())
    return [] if name is None or " and " in name else [Form(f"Who {AGENT[verb][0]} {subj}?", name, "agent", subj, verb)]


def _played_for(sent: str, title: str, names: frozenset[str]) -> list[Form]:
    """'He played for the Philadelphia Eagles' → 'Which team did X play for?'."""
    m = re.match(r"(.{2,80}?)\s(?:played|plays|has played)\s(?:[a-z]+\s){0,2}?for\s(?:the\s)?", sent)
    if m is None or _COPULA.search(m.group(1) + " ") or (subj := subject_of(m.group(1), title, names)) is None:
        return []
    name = _name_at(sent, m.end())
    return [] if name is None else [Form(f"Which team did {subj} play for?", name, "agent", subj, "played for")]


def _life(sent: str, title: str, names: frozenset[str]) -> list[Form]:
    m = re.match(r"([^()]{2,80}?)\s*\(([^()]*)\)", sent)
    if m is None or (subj := subject_of(m.group(1), title, names)) is None:
        return []
    inner = m.group(2)
    if b := re.search(rf"\bborn\s+({DATE})", inner):
        return [Form(f"When was {subj} born?", b.group(1), "date", subj)]
    if r := re.search(rf"({DATE})\s*[–—-]\s*({DATE})", inner):
        return [
            Form(f"When was {subj} born?", r.group(1), "date", subj),
            Form(f"When did {subj} die?", r.group(2), "date", subj),
        ]
    return []


def _active_date(sent: str, title: str, names: frozenset[str]) -> list[Form]:
    verbs = "|".join(WHEN_ACTIVE)
    m = re.match(rf"(.{{2,80}}?)\s({verbs})((?:\s+[a-z][\w'-]*){{0,5}}?)\s+(?:in|on)\s+({DATE})", sent)
    if m is None or _COPULA.search(m.group(1) + " ") or (subj := subject_of(m.group(1), title, names)) is None:
        return []
    base, needs_object = WHEN_ACTIVE[m.group(2)]
    if needs_object and not m.group(3):
        return []
    return [Form(f"When did {subj} {base}{m.group(3)}?", m.group(4), "date", subj)]


def _main_subject(sent: str, title: str, names: frozenset[str]) -> str | None:
    m = re.search(r"\s(?:is|was|are|were|has|have|had)\s", sent)
    return subject_of(sent[: m.start()], title, names) if m else None


def _numbers(sent: str, title: str, names: frozenset[str]) -> list[Form]:
    subj = _main_subject(sent, title, names)
    if subj is None:
        return []
    out: list[Form] = []
    if p := re.search(rf"\bpopulation of {ABOUT}({NUM}(?:\s(?:million|billion))?)", sent):
        out.append(Form(f"What is the population of {subj}?", p.group(1), "number", subj))
    if c := re.search(rf"\bcapacity of {ABOUT}({NUM})", sent):
        out.append(Form(f"What is the capacity of {subj}?", c.group(1), "number", subj))
    if a := re.search(rf"\b({NUM})\s*(?:{AREA_UNITS})\b", sent):
        out.append(Form(f"What is the area of {subj}?", a.group(), "number", subj))
    elif u := re.search(rf"\b({NUM})(?:\s|-)?(?:{LENGTH_UNITS})\b", sent):
        window = sent[max(0, u.start() - 40) : u.end() + 25]
        adj = next((a for a, cue in MEASURE_CUES if re.search(cue, window)), None)
        aux = "was" if re.search(r"\swas\s", sent) else "is"
        if adj is not None:
            out.append(Form(f"How {adj} {aux} {subj}?", u.group(), "number", subj))
    have = "|".join(sorted(HAVE, key=len, reverse=True))
    num = rf"{NUM}|{'|'.join(WORDNUM)}"
    if h := re.search(rf"\s({have})\s(?:of\s)?{ABOUT}({num})\s([a-z][a-z-]+s)\b", sent):
        out.append(Form(f"How many {h.group(3)} {HAVE[h.group(1)]} {subj} have?", h.group(2), "number", subj))
    return out


def english_questions(sentence: str, title: str, context: str = "") -> list[Form]:
    """Every form's question for one English ``sentence`` of a document titled ``title``
    (``context``: the sentence's chunk, whose capitalised words tell names from sentence-initial
    common nouns), in :data:`EN_FORMS` order."""
    sent = " ".join(sentence.split())
    if len(sent.split()) < 4:
        return []
    names = proper_names(context or sent)
    first = not context or " ".join(context.split()).startswith(sent)
    found = _life(sent, title, names) + _copular(sent, title, names, first)
    found += _agent(sent, title, names) or _work_by(sent, title, names)
    found += _played_for(sent, title, names)
    found += _active_date(sent, title, names) + _active_place(sent, title, names) + _numbers(sent, title, names)
    return sorted(found, key=lambda f: EN_FORMS.index(f.form))
