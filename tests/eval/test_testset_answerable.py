"""Answerability checked on the gold text (the plain BM25, the answer span, other passages with
the answer) and the two-hop questions, with values worked out by hand."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_lab.eval.testset.answerable import PlainBM25, answer_passages, contains_span, names_title, plain_terms
from rag_lab.eval.testset.bridge import (
    Bridges,
    _earlier,
    bridge_question,
    comparison_question,
    event_date,
    first_hop_phrase,
    place_kind,
)
from rag_lab.eval.testset.generate import Candidate, SourceChunk, generate_candidates
from rag_lab.eval.testset.mentions import cast_names, known_for, person_role


def test_plain_terms_are_words_and_han_bigrams():
    assert plain_terms("Orrin Bridge, 1911: 芙蓉洞") == ["orrin", "bridge", "1911", "芙蓉", "蓉洞"]
    assert plain_terms("洞") == ["洞"]


def test_bm25_scores_worked_by_hand():
    bm = PlainBM25(["a b", "a c c", "d"])  # N = 3, lengths 2 3 1, average 2
    idf_a = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))  # ln 1.6
    idf_c = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))  # ln 2.667
    s = bm.scores("a c")
    assert s[0] == pytest.approx(idf_a * 2.2 / (1 + 1.2 * 1.0))  # tf 1, length = average
    assert s[1] == pytest.approx(idf_a * 2.2 / (1 + 1.2 * 1.375) + idf_c * 2 * 2.2 / (2 + 1.2 * 1.375))
    assert s[2] == 0.0
    assert bm.scores("a a a") == bm.scores("a")  # a query term counts once
    assert (bm.rank("a c", 1), bm.rank("a c", 0), bm.rank("a c", 2)) == (1, 2, None)


def test_bm25_ties_count_against_the_document():
    bm = PlainBM25(["x", "x", "y z"])
    assert (bm.rank("x", 0), bm.rank("x", 1), bm.rank("x", 2)) == (2, 2, None)


@given(st.lists(st.text(alphabet="ab c", max_size=8), min_size=1, max_size=6), st.text(alphabet="abc ", max_size=6))
def test_bm25_rank_is_the_number_scoring_at_least_as_high(docs, query):
    bm = PlainBM25(docs)
    scores = bm.scores(query)
    for i, d in enumerate(docs):
        r = bm.rank(query, i)
        if scores[i] <= 0:
            assert r is None
            continue
        assert r == sum(1 for s in scores if s >= scores[i]) and 1 <= r <= len(docs)
        assert all(bm.rank(query, j) == r for j, e in enumerate(docs) if e == d)  # duplicates rank alike


def test_contains_span():
    assert contains_span("The Orrin Bridge opened in 1911.", "orrin   BRIDGE")
    assert not contains_span("The Orrin Bridge opened in 1911.", "191")  # inside a number
    assert not contains_span("The Orrin Bridge", "Orrin Bridges")
    assert contains_span("芙蓉洞位于重庆", "位于")
    assert not contains_span("anything", "  ")


def test_other_passages_with_the_answer_are_candidates():
    passages = [
        ("c1", "d1", "Mara Vell designed the Orrin Bridge."),
        ("c2", "d2", "The Orrin Bridge was designed by Mara Vell in 1904."),
        ("c3", "d3", "Mara Vell was born in 1868."),  # the answer, but nothing of the question
        ("c4", "d4", "The Orrin Bridge crosses the river."),  # the question's words, not the answer
    ]
    assert answer_passages("Mara Vell", "Who designed the Orrin Bridge?", passages, "c1") == [("c2", "d2")]
    assert answer_passages("Mara Vell", "Who designed the Orrin Bridge?", passages, "c2") == [("c1", "d1")]


def test_names_title():
    assert names_title("When was Mark King born?", "Mark King (musician)")
    assert names_title("Who designed the Orrin Bridge?", "The Orrin Bridge")
    assert not names_title("Which 2009 Bollywood film did Puneet Sira direct?", "Kisaan")
    assert not names_title("Anything?", "(musician)")


A = SourceChunk("a#0", "a", "The Prestige (film)", "The Prestige is a 2006 film directed by Christopher Nolan.")
B = SourceChunk("b#0", "b", "Christopher Nolan", "Christopher Edward Nolan (born 30 July 1970) is a film director.")
C = SourceChunk("c#0", "c", "Mark King (musician)", "Mark King (born 20 October 1958) is a musician.")


def _agent(src=A, verb="directed", name="Christopher Nolan"):
    return Candidate("Who directed The Prestige?", "agent", src, [name], "The Prestige", verb)


def _born(src, subject, date):
    return Candidate(f"When was {subject} born?", "date", src, [date], subject)


def test_bridge_question():
    q = bridge_question(_agent(), _born(B, "Christopher Edward Nolan", "30 July 1970"))
    assert q is not None
    assert (q.question, q.answers, q.gold_ids, q.entity, q.generator) == (
        "When was the director of The Prestige born?",
        ["30 July 1970"],
        ["a", "b"],
        "Christopher Nolan",
        "bridge",
    )
    humbert = SourceChunk("h#0", "h", "Dick Humbert", "He played for the Philadelphia Eagles.")
    eagles = SourceChunk("e#0", "e", "Philadelphia Eagles", "The Philadelphia Eagles were founded in 1933.")
    team = Candidate(
        "Which team did Dick Humbert play for?", "agent", humbert, ["Philadelphia Eagles"], "Dick Humbert", "played for"
    )
    founded = Candidate("When was Philadelphia Eagles founded?", "date", eagles, ["1933"], "Philadelphia Eagles")
    played = bridge_question(team, founded)
    assert played is not None
    assert (played.question, played.gold_ids) == ("When was the team Dick Humbert played for founded?", ["h", "e"])
    assert bridge_question(_agent(verb="played"), _born(B, "Christopher Edward Nolan", "30 July 1970")) is None
    assert bridge_question(_agent(name="Nolan and Joy"), _born(B, "Christopher Edward Nolan", "30 July 1970")) is None
    assert bridge_question(_agent(), _born(B, "Emma Thomas", "1971")) is None  # a fact about someone else
    assert bridge_question(_agent(src=B), _born(B, "Christopher Edward Nolan", "1970")) is None  # one document


KERRY = SourceChunk(
    "k#0", "k", "Kerry Saxby-Junna", "She was born in Young, New South Wales and grew up in Ballina, New South Wales."
)
YOUNG = SourceChunk(
    "y#0",
    "y",
    "Young, New South Wales",
    "Young is a town in the South West Slopes region of New South Wales. At the 2011 census, Young had a "
    "population of 6,960.",
)


def test_a_place_is_a_first_hop_named_by_its_kind():
    """Kerry's "Where was Kerry Saxby-Junna born?" → Young; the document titled "Young, New South
    Wales" (the whole title is in Kerry's chunk) calls it a town and gives its population."""
    (q,) = Bridges([KERRY, YOUNG], generate_candidates).of(KERRY)
    assert (q.question, q.answers, q.gold_ids, q.entity) == (
        "What is the population of the town where Kerry Saxby-Junna was born?",
        ["6,960"],
        ["k", "y"],
        "Young",
    )
    # "Young" alone might be any Young: without the whole title in the first chunk, no bridge
    short = SourceChunk("k#0", "k", "Kerry Saxby-Junna", "She was born in Young and grew up in Ballina.")
    assert Bridges([short, YOUNG], generate_candidates).of(short) == []
    # a target that does not say what it is: "the place"
    bare = SourceChunk("y#0", "y", "Young, New South Wales", "At the 2011 census, Young had a population of 6,960.")
    (q,) = Bridges([KERRY, bare], generate_candidates).of(KERRY)
    assert q.question == "What is the population of the place where Kerry Saxby-Junna was born?"


def test_place_kind_and_first_hop_phrase():
    assert place_kind("a town in the South West Slopes region") == "town"
    assert place_kind("a national research university located in Canberra") == "university"
    assert place_kind("a professional American football franchise") == "place"
    grew = Candidate("Where did Mara Vell grow up?", "place", A, ["Harlow Cross"], "Mara Vell")
    assert first_hop_phrase(grew, "village") == "the village where Mara Vell grew up"
    assert first_hop_phrase(Candidate("What is Mara Vell?", "definition", A, ["x"], "Mara Vell")) == ""


def test_a_plural_subject_replaced_by_a_phrase_takes_a_singular_verb():
    humbert = SourceChunk("h#0", "h", "Dick Humbert", "He played for the Philadelphia Eagles.")
    eagles = SourceChunk("e#0", "e", "Philadelphia Eagles", "The Philadelphia Eagles are based in Philadelphia.")
    team = Candidate(
        "Which team did Dick Humbert play for?", "agent", humbert, ["Philadelphia Eagles"], "Dick Humbert", "played for"
    )
    based = Candidate(
        "Where are the Philadelphia Eagles based?", "place", eagles, ["Philadelphia"], "the Philadelphia Eagles"
    )
    q = bridge_question(team, based)
    assert q is not None and q.question == "Where is the team Dick Humbert played for based?"


def test_comparison_question():
    q = comparison_question(
        _born(B, "Christopher Edward Nolan", "30 July 1970"), _born(C, "Mark King", "20 October 1958")
    )
    assert q is not None
    assert (q.question, q.answers, q.gold_ids) == (
        "Who was born first, Christopher Edward Nolan or Mark King?",
        ["Mark King"],
        ["b", "c"],
    )
    # the same year without a month cannot be told apart; one document twice is no comparison
    assert (
        comparison_question(_born(B, "Christopher Edward Nolan", "1958"), _born(C, "Mark King", "20 October 1958"))
        is None
    )
    assert (
        comparison_question(_born(B, "Christopher Edward Nolan", "1970"), _born(B, "Christopher Edward Nolan", "1958"))
        is None
    )


def test_event_date():
    assert event_date("30 July 1970") == (1970, 7, 30)
    assert event_date("July 30, 1970") == (1970, 7, 30)
    assert event_date("Monday 14 May 1911") == (1911, 5, 14)
    assert event_date("May 1911") == (1911, 5, 0)
    assert event_date("1911") == (1911, 0, 0)
    assert event_date("Maytime 1911") is None


_DATES = st.tuples(st.integers(1900, 1903), st.integers(0, 2), st.integers(0, 2)).map(
    lambda t: (t[0], t[1], t[2] if t[1] else 0)
)


@given(_DATES, _DATES)
def test_earlier_is_antisymmetric(a, b):
    assert _earlier(a, b) == -_earlier(b, a)
    if _earlier(a, b) == -1:
        assert a < b
    assert _earlier(a, a) == 0


def test_a_comparison_names_what_both_documents_are_about():
    atlanta = SourceChunk("a#1", "at", "Atlanta (album)", "A 24-bit FLAC version was released in 2010.")
    nascar = SourceChunk("n#1", "na", "NASCAR Revolution", "NASCAR Revolution was released in 1999.")
    flac = Candidate("When was A 24-bit FLAC version released?", "date", atlanta, ["2010"], "A 24-bit FLAC version")
    game = Candidate("When was NASCAR Revolution released?", "date", nascar, ["1999"], "NASCAR Revolution")
    assert comparison_question(flac, game) is None
    # a question naming a subject otherwise than its sentence answers with the sentence's words
    nolan = Candidate(
        "When was Christopher Nolan born?", "date", B, ["30 July 1970"], "Christopher Nolan",
        written="Christopher Edward Nolan",
    )  # fmt: skip
    q = comparison_question(nolan, _born(C, "Mark King", "20 October 1958"))
    assert q is not None and q.question == "Who was born first, Christopher Nolan or Mark King?"
    q = comparison_question(nolan, _born(C, "Mark King", "20 October 1978"))
    assert q is not None and q.answers == ["Christopher Edward Nolan"]


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("It stars Mehcad Brooks, Serinda Swan, and Sid Haig.", ["Mehcad Brooks", "Serinda Swan", "Sid Haig"]),
        ("The cast also features Helen Hunt and Dan Aykroyd.", ["Helen Hunt", "Dan Aykroyd"]),
        (
            "The film stars Palash Sen, Ira Dubey and Kymsleen Kholie in lead roles, with Yashpal Sharma.",
            ["Palash Sen", "Ira Dubey", "Kymsleen Kholie"],
        ),
        ("The film features the voices of Eva Gabor and Roddy Maude-Roxby.", ["Eva Gabor", "Roddy Maude-Roxby"]),
        (
            "It was the debut of Indian actors Ananth Nag and Shabana Azmi.",  # the descriptor is dropped
            ["Ananth Nag", "Shabana Azmi"],
        ),
        ("The game features a detailed story written by Dale Brown.", []),  # "features" without a cast
        ("It stars in the evening sky.", []),  # no name after the cue
    ],
)
def test_cast_names(text, names):
    assert cast_names(text) == names


def test_person_role():
    assert person_role("an American actress, director, and screenwriter") == "American actress"
    assert person_role("an English actor who has appeared in numerous films") == "English actor"
    assert person_role("an American actor and musician") == "American actor and musician"
    assert person_role("actor") == ""  # no article
    assert person_role("an actor") == ""  # one word says too little


JADE = SourceChunk(
    "j#0",
    "j",
    "The Curse of the Jade Scorpion",
    "The Curse of the Jade Scorpion is a 2001 crime comedy film. The cast also features Helen Hunt and Dan Aykroyd.",
)
HUNT = SourceChunk(
    "hh#0",
    "hh",
    "Helen Hunt",
    "Helen Elizabeth Hunt (born June 15, 1963) is an American actress, director, and writer.",
)


def test_a_bridge_through_a_cast_names_the_person_by_their_own_definition():
    (q,) = Bridges([JADE, HUNT], generate_candidates).of(JADE)
    assert (q.question, q.answers, q.gold_ids, q.entity) == (
        "When was the American actress in the cast of The Curse of the Jade Scorpion born?",
        ["June 15, 1963"],
        ["j", "hh"],
        "Helen Hunt",
    )
    # another person of the same cast with a document, called the same: the phrase would not say which
    aykroyd = SourceChunk(
        "da#0", "da", "Dan Aykroyd", "Daniel Edward Aykroyd (born July 1, 1952) is an American actress of old."
    )
    assert Bridges([JADE, HUNT, aykroyd], generate_candidates).of(JADE) == []
    # a cast member whose document is not about a person ("What is …?") gives no bridge
    thing = SourceChunk("t#0", "t", "Helen Hunt", "Helen Hunt is a sailing ship built in 1963.")
    assert Bridges([JADE, thing], generate_candidates).of(JADE) == []


def test_known_for():
    got = known_for(
        'He is best known for his portrayal of Chris Halliwell in the television series "Charmed" and for '
        "playing soldier Trevor LeBlanc.",
        "Drew Fuller",
    )
    assert [(k.subject, k.aux, k.kind, k.work) for k in got] == [("Drew Fuller", "is", "television series", "Charmed")]
    assert known_for("He is best known in the town.", "Drew Fuller") == []  # no work named
    assert known_for("He is best known for his portrayal of Chris Halliwell.", "Drew Fuller") == []


def test_a_bridge_through_the_work_a_person_is_best_known_for():
    fuller = SourceChunk(
        "df#0",
        "df",
        "Drew Fuller",
        "Drew Fuller is an American actor. He is best known for his portrayal of Chris Halliwell in the "
        'television series "Charmed".',
    )
    charmed = SourceChunk(
        "ch#0", "ch", "Charmed", "Charmed is an American television series created by Constance M. Burge."
    )
    got = [(q.question, q.answers, q.gold_ids) for q in Bridges([fuller, charmed], generate_candidates).of(fuller)]
    assert got == [
        ("Who created the television series Drew Fuller is best known for?", ["Constance M. Burge"], ["df", "ch"])
    ]
