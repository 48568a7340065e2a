"""Two-hop questions made offline, the two kinds HotpotQA's questions are built as; the gold is
both documents.

* ``bridge``: a first fact names an entity ("Who directed The Prestige?" → Christopher Nolan, or
  "X is the third studio album by M. Ward"), the KB holds a document titled with that entity, and a
  fact about it ("When was Christopher Edward Nolan born?") is asked through the first: "When was
  the director of The Prestige born?". The answer is the second fact's span. The question names
  the first document only, so retrieving the second takes the link a reader would follow. A
  first fact of place ("Where was Kerry Saxby-Junna born?" → Young, a document titled "Young, New
  South Wales") names its entity by the kind the second document gives it ("Young is a town in
  …"): "What is the population of the town where Kerry Saxby-Junna was born?";
* ``comparison``: two documents' dates of the same event ("When was X born?", "When was Y
  born?") → "Who was born first, X or Y?" ("Which was founded first, X or Y?"), answer the
  earlier one's name as its document writes it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from rag_lab.eval.testset.answerable import names_title
from rag_lab.eval.testset.en_subject import display_title
from rag_lab.eval.testset.generate import Candidate, SourceChunk
from rag_lab.eval.testset.mentions import cast_names, known_for, person_role

__all__ = [
    "PHRASES",
    "PLACE_KINDS",
    "ROLES",
    "Bridges",
    "Comparisons",
    "bridge_question",
    "comparison_question",
    "event_date",
    "first_hop_phrase",
    "linked_question",
    "names_doc",
    "place_kind",
    "title_key",
]

#: the participle of an ``agent`` question → the role it gives ("directed" → "the director of X")
ROLES: dict[str, str] = {
    "directed": "director",
    "written": "writer",
    "co-written": "co-writer",
    "produced": "producer",
    "created": "creator",
    "founded": "founder",
    "co-founded": "co-founder",
    "designed": "designer",
    "developed": "developer",
    "published": "publisher",
    "composed": "composer",
    "invented": "inventor",
    "discovered": "discoverer",
    "owned": "owner",
    "illustrated": "illustrator",
    "edited": "editor",
    "hosted": "host",
    "presented": "presenter",
    "narrated": "narrator",
    "painted": "painter",
    "coached": "coach",
    "managed": "manager",
    "operated": "operator",
    "headed": "head",
    "sculpted": "sculptor",
    "organized": "organizer",
    "organised": "organiser",
    "sponsored": "sponsor",
    "drawn": "illustrator",
    "sung": "singer",
    "built": "builder",
    "led": "leader",
    "performed": "performer",
    "formed": "founder",
    "translated": "translator",
    "authored": "author",
    "acquired": "buyer",
    "recorded": "artist",
}
#: first hops that are not "the <role> of X"
PHRASES: dict[str, str] = {"played for": "the team {subject} played for"}
#: the forms a second hop may have: a fact about its subject with a short answer
_SECOND = ("date", "place", "number", "agent")
#: nouns a place's definition names it by ("a town in …"); "place" when it names none
PLACE_KINDS = frozenset(
    "city town village hamlet state country region province county district suburb island municipality "
    "borough neighbourhood neighborhood capital commune parish prefecture university college".split()
)
_WHERE = re.compile(
    r"^Where (?P<aux>is|was|are|were) (?P<subj>.+) (?P<verb>born|located|situated|based|headquartered)\?$"
)
_WHERE_DID = re.compile(r"^Where did (?P<subj>.+) (?P<verb>grow up|live|settle|die)\?$")
_PAST = {"grow up": "grew up", "live": "lived", "settle": "settled", "die": "died"}


def title_key(title: str) -> str:
    """A title as bridges match it: parentheses dropped, lower-cased, spaces collapsed."""
    return " ".join(re.sub(r"\([^()]*\)", "", title).lower().split())


def place_kind(description: str) -> str:
    """The noun a place's definition names it by: the first of :data:`PLACE_KINDS` among its first
    six words ("a town in the South West Slopes region" → "town"), else "place"."""
    return next((w for w in description.lower().split()[:6] if w in PLACE_KINDS), "place")


def first_hop_phrase(first: Candidate, kind: str = "place") -> str:
    """What a two-hop question calls the entity ``first`` answers with: "the director of X" of an
    ``agent`` question, "the team X played for", or "the {kind} where X was born" of a ``place``
    question; "" when ``first`` cannot be a first hop."""
    if not first.subject:
        return ""
    if first.generator == "agent":
        role = ROLES.get(first.verb)
        return f"the {role} of {first.subject}" if role else PHRASES.get(first.verb, "").format(subject=first.subject)
    if first.generator != "place":
        return ""
    if (m := _WHERE.match(first.question)) and m["subj"] == first.subject:
        return f"the {kind} where {first.subject} {m['aux']} {m['verb']}"
    if (m := _WHERE_DID.match(first.question)) and m["subj"] == first.subject:
        return f"the {kind} where {first.subject} {_PAST[m['verb']]}"
    return ""


def names_doc(subject: str, title: str) -> bool:
    """``subject`` names the document titled ``title``: :func:`.answerable.names_title`, of the
    whole title or of its part before a comma ("Young" of "Young, New South Wales")."""
    return names_title(subject, title) or names_title(subject, title.split(",")[0])


_SINGULAR = {"are": "is", "were": "was", "do": "does"}


def _singular(question: str, subject: str) -> str:
    """``question`` with the verb before ``subject`` made singular, as the phrase that replaces a
    plural subject is ("Where are the Philadelphia Eagles based?" → "Where is … based?")."""
    return re.sub(rf"\b(are|were|do) (?={re.escape(subject)})", lambda m: f"{_SINGULAR[m[1]]} ", question, count=1)


def bridge_question(first: Candidate, second: Candidate, kind: str = "place") -> Candidate | None:
    """The two-hop question of ``first`` (an ``agent`` or ``place`` question whose answer names the
    document ``second`` comes from) and ``second`` (a fact about that document's subject), or None
    when the pair does not make one (an unknown role, several names, a second fact about something
    else). ``kind``: what a place first hop calls its answer (:func:`place_kind`)."""
    entity = first.answers[0] if first.answers else ""
    return linked_question(first_hop_phrase(first, kind), entity, first.source, second)


def linked_question(phrase: str, entity: str, via: SourceChunk, second: Candidate) -> Candidate | None:
    """``second`` (a fact about the document titled ``entity``) asked about ``phrase`` instead of
    its subject, the first hop in ``via``; None when ``second`` is not a short fact about that
    document's subject, the two are one document, or the entity is several names."""
    if not phrase or not entity or " and " in entity:
        return None
    if second.generator not in _SECOND or not second.subject or second.subject not in second.question:
        return None
    if not names_doc(second.subject, second.source.title) or second.source.doc_id == via.doc_id:
        return None
    question = _singular(second.question, second.subject).replace(second.subject, phrase, 1)
    return Candidate(question, "bridge", second.source, list(second.answers), phrase, via=via, entity=entity)


class Bridges:
    """The bridge questions of a KB's chunks: ``candidates`` gives a chunk's one-hop questions
    (cached by the caller); documents are found by their title (:func:`title_key`), or by its part
    before a comma ("Young" of "Young, New South Wales") when the first hop's chunk writes the
    whole title."""

    def __init__(self, sources: Sequence[SourceChunk], candidates: Callable[[SourceChunk], list[Candidate]]) -> None:
        self._candidates = candidates
        self._by_title: dict[str, list[SourceChunk]] = {}
        self._by_head: dict[str, list[SourceChunk]] = {}
        for s in sources:
            if s.kind == "text" and s.title.strip():
                key = title_key(s.title)
                self._by_title.setdefault(key, []).append(s)
                if "," in key:
                    self._by_head.setdefault(key.split(",")[0].strip(), []).append(s)

    def _targets(self, first: Candidate) -> list[SourceChunk]:
        key = title_key(first.answers[0])
        if key in self._by_title:
            return self._by_title[key]
        text = " ".join(first.source.text.lower().split())
        return [t for t in self._by_head.get(key, []) if title_key(t.title) in text]

    def _kind(self, target: SourceChunk) -> str:
        """What the target document's first definition calls it (:func:`place_kind`)."""
        for c in self._candidates(target):
            if c.generator == "definition" and c.answers:
                return place_kind(c.answers[0])
        return "place"

    def _role(self, target: SourceChunk) -> str:
        """Who the target document's first definition says its person is (:func:`.mentions.person_role`)."""
        for c in self._candidates(target):
            if c.generator == "definition" and c.answers:
                return person_role(c.answers[0]) if c.question.startswith("Who ") else ""
        return ""

    def _cast(self, src: SourceChunk) -> list[Candidate]:
        """Bridges through the people ``src`` lists in a cast who have a document: "the American
        actress in the cast of X", when no other such person of the list is called the same."""
        work = display_title(src.title)
        people = [n for n in cast_names(src.text) if title_key(n) in self._by_title]
        roles = [self._role(self._by_title[title_key(n)][0]) for n in people]
        out: list[Candidate] = []
        for name, role in zip(people, roles, strict=True):
            if role and roles.count(role) == 1:
                out += self._linked(f"the {role} in the cast of {work}", name, src, self._by_title[title_key(name)])
        return out

    def _linked(self, phrase: str, entity: str, via: SourceChunk, targets: list[SourceChunk]) -> list[Candidate]:
        """The :func:`linked_question` of every question of ``targets``' chunks, in order."""
        return [
            b
            for t in targets
            for second in self._candidates(t)
            if (b := linked_question(phrase, entity, via, second)) is not None
        ]

    def of(self, src: SourceChunk) -> list[Candidate]:
        """Every bridge question whose first hop is a question of ``src`` (in the order of its
        questions, then of the target document's chunks), then those through its cast."""
        out: list[Candidate] = []
        for first in self._candidates(src):
            if first.generator not in ("agent", "place") or not first.answers:
                continue
            targets = self._targets(first)
            kind = self._kind(targets[0]) if targets and first.generator == "place" else "place"
            out += [b for t in targets for second in self._candidates(t) if (b := bridge_question(first, second, kind))]
        return out + self._cast(src) + self._known_for(src)

    def _known_for(self, src: SourceChunk) -> list[Candidate]:
        """Bridges through the work ``src``'s person is best known for: "the television series
        Drew Fuller is best known for"."""
        out: list[Candidate] = []
        for k in known_for(src.text, src.title):
            phrase = f"the {k.kind} {k.subject} {k.aux} best known for"
            out += self._linked(phrase, k.work, src, self._by_title.get(title_key(k.work), []))
        return out


_WHEN = re.compile(
    r"^When (?:was|were) (?P<subj>.+) (?P<verb>born|founded|established|released|formed|built|opened|created|"
    r"launched|published|completed)\?$"
)
_MONTHS = "january february march april may june july august september october november december".split()


def event_date(text: str) -> tuple[int, int, int] | None:
    """``(year, month, day)`` of a date span ("3 May 1950", "May 3, 1950", "May 1950", "1950"),
    0 for a part it leaves out; None when it is not one of those forms."""
    m = re.fullmatch(r"(?:\w+day,?\s+)?(?:(\d{1,2})\s+)?(?:([A-Za-z]+)\s+)?(?:(\d{1,2}),\s*)?(\d{4})", text.strip())
    if m is None:
        return None
    month = _MONTHS.index(m.group(2).lower()) + 1 if m.group(2) and m.group(2).lower() in _MONTHS else 0
    if m.group(2) and not month:
        return None
    day = int(m.group(1) or m.group(3) or 0)
    return int(m.group(4)), month, day if month else 0


def _earlier(a: tuple[int, int, int], b: tuple[int, int, int]) -> int:
    """-1 when ``a`` is surely earlier, 1 when ``b`` is, 0 when the spans cannot tell (same year
    and one of them gives no month, or the same date)."""
    if a[0] != b[0]:
        return -1 if a[0] < b[0] else 1
    if not (a[1] and b[1]) or a == b:
        return 0
    if a[1] != b[1]:
        return -1 if a[1] < b[1] else 1
    return 0 if not (a[2] and b[2]) else (-1 if a[2] < b[2] else 1)


def _as_written(text: str, name: str) -> str:
    at = text.lower().find(name.lower())
    return text[at : at + len(name)] if at >= 0 else ""


def comparison_question(a: Candidate, b: Candidate) -> Candidate | None:
    """ "Who was born first, A or B?" of two ``date`` questions of the same event about two
    documents' subjects, or None when they differ in event, share a document, or their dates do
    not tell which came first."""
    ma, mb = _WHEN.match(a.question), _WHEN.match(b.question)
    if ma is None or mb is None or ma["verb"] != mb["verb"] or a.source.doc_id == b.source.doc_id:
        return None
    da, db = event_date(a.answers[0]), event_date(b.answers[0])
    order = _earlier(da, db) if da and db else 0
    if not order or a.subject.lower() == b.subject.lower():
        return None
    if not (names_doc(a.subject, a.source.title) and names_doc(b.subject, b.source.title)):
        return None  # "A 24-bit FLAC version" of "Atlanta (album)": not what the document is about
    first, other = (a, b) if order < 0 else (b, a)
    answer = _as_written(first.source.text, first.written or first.subject)
    if not answer:
        return None
    verb = ma["verb"]
    question = (
        f"Who was born first, {a.subject} or {b.subject}?"
        if verb == "born"
        else f"Which was {verb} first, {a.subject} or {b.subject}?"
    )
    return Candidate(question, "comparison", first.source, [answer], via=other.source)


class Comparisons:
    """Pairs ``date`` questions of chunks offered in turn: a chunk's question of an event is paired
    with the latest one of the same event from another document still waiting for a partner, else
    waits itself."""

    def __init__(self, candidates: Callable[[SourceChunk], list[Candidate]]) -> None:
        self._candidates = candidates
        self._waiting: dict[str, list[Candidate]] = {}

    def of(self, src: SourceChunk) -> list[Candidate]:
        """The comparison questions ``src``'s date questions make with those waiting."""
        out: list[Candidate] = []
        for c in self._candidates(src):
            m = _WHEN.match(c.question) if c.generator == "date" else None
            if m is None:
                continue
            waiting = self._waiting.setdefault(m["verb"], [])
            for other in reversed(waiting):
                if (q := comparison_question(other, c)) is not None:
                    out.append(q)
                    waiting.remove(other)  # each date question in one comparison at most
                    break
            else:
                waiting.append(c)
        return out
