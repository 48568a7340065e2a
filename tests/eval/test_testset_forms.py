"""The offline question forms, sentence by sentence: the question each template makes of a
sentence worked out by hand, the span it asks for, and the sentences that must give none."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_lab.eval.testset.en_subject import common_name
from rag_lab.eval.testset.forms_en import Form, english_questions, split_sentences
from rag_lab.eval.testset.forms_zh import chinese_questions
from rag_lab.eval.testset.generate import SourceChunk, generate_candidates
from rag_lab.eval.testset.table_forms import markdown_rows, table_questions


def _qa(forms: list[Form]) -> list[tuple[str, str, str]]:
    return [(f.form, f.question, f.answer) for f in forms]


@pytest.mark.parametrize(
    ("sentence", "title", "expected"),
    [
        (
            "The Orrin Bridge is a suspension bridge that carries the coast road.",
            "The Orrin Bridge",
            [("definition", "What is The Orrin Bridge?", "a suspension bridge")],
        ),
        (
            "Mara Vell (1868–1941) was a civil engineer known for long-span bridges.",
            "Mara Vell",
            [
                ("definition", "Who was Mara Vell?", "a civil engineer known for long-span bridges"),
                ("date", "When was Mara Vell born?", "1868"),
                ("date", "When did Mara Vell die?", "1941"),
            ],
        ),
        (
            "Strange Mercy is the third studio album by musician St. Vincent.",
            "Strange Mercy",
            [
                ("identity", "What is St. Vincent's third studio album?", "Strange Mercy"),
                ("agent", "Who recorded Strange Mercy?", "St. Vincent"),
            ],
        ),
        # the maker's descriptor is dropped, capitalised words before it included
        (
            "The Best Damn Thing is the third studio album by Canadian singer-songwriter Avril Lavigne.",
            "The Best Damn Thing",
            [("identity", "What is Avril Lavigne's third studio album?", "The Best Damn Thing")],
        ),
        # two makers: asked as the sentence has it
        (
            "Hello is the first single by Simon and Garfunkel.",
            "Hello (song)",
            [("identity", "What is the first single by Simon and Garfunkel?", "Hello")],
        ),
        # a comma of the title itself does not cut the subject
        (
            "Never, Neverland is the second album by heavy metal band Annihilator.",
            "Never, Neverland",
            [
                ("identity", "What is Annihilator's second album?", "Never, Neverland"),
                ("agent", "Who recorded Never, Neverland?", "Annihilator"),
            ],
        ),
        (
            "Kisaan is a 2009 Bollywood film directed by Puneet Sira.",
            "Kisaan",
            [
                ("definition", "What is Kisaan?", "a 2009 Bollywood film directed by Puneet Sira"),
                ("identity", "Which 2009 Bollywood film did Puneet Sira direct?", "Kisaan"),
                ("agent", "Who directed Kisaan?", "Puneet Sira"),
            ],
        ),
        (
            "How to Eat is a 1998 book of English cuisine by the celebrity cook Nigella Lawson.",
            "How to Eat",
            [
                (
                    "definition",
                    "What is How to Eat?",
                    "a 1998 book of English cuisine by the celebrity cook Nigella Lawson",
                ),
                ("agent", "Who wrote How to Eat?", "Nigella Lawson"),
            ],
        ),
        (
            "He played for the Philadelphia Eagles (1941, 1945–1949).",
            "Dick Humbert",
            [("agent", "Which team did Dick Humbert play for?", "Philadelphia Eagles")],
        ),
        # a generic subject stands for the title; the participle's object is kept
        (
            "The club was founded in 1887 by local miners.",
            "Ashby Town F.C.",
            [("date", "When was Ashby Town F.C. founded?", "1887")],
        ),
        (
            "He joined the band in 1995.",
            "Mark King (musician)",
            [("date", "When did Mark King join the band?", "1995")],
        ),
        (
            "She grew up in the mill town of Harlow Cross, where her father kept the waterworks.",
            "Mara Vell",
            [("place", "Where did Mara Vell grow up?", "Harlow Cross")],
        ),
        (
            "Dunkin' Brands is headquartered in Canton, Massachusetts.",
            "Dunkin' Brands",
            [("place", "Where is Dunkin' Brands headquartered?", "Canton")],
        ),
        (
            "Funchal has a population of 111,892.",
            "Funchal",
            [("number", "What is the population of Funchal?", "111,892")],
        ),
        (
            "The Orrin Bridge is 310 metres long.",
            "The Orrin Bridge",
            [("number", "How long is The Orrin Bridge?", "310 metres")],
        ),
        (
            "The line has 13 stations.",
            "Kestle Railway",
            [("number", "How many stations does Kestle Railway have?", "13")],
        ),
        (
            "A sourdough starter is a culture of wild yeast and lactic acid bacteria.",
            "Sourdough starter",
            [("definition", "What is a sourdough starter?", "a culture of wild yeast and lactic acid bacteria")],
        ),
        # a date after the description, set off by a comma: asked in the past ("was", not "is")
        (
            "Mercyful Fate is a Danish heavy metal band from Copenhagen, formed in 1981 by vocalist King Diamond.",
            "Mercyful Fate",
            [
                ("definition", "What is Mercyful Fate?", "a Danish heavy metal band from Copenhagen"),
                ("date", "When was Mercyful Fate formed?", "1981"),
            ],
        ),
        # a clause after the comma with its own subject gives no date
        (
            "Toad Hall is a residential hall in Australian National University, it was opened in 1974.",
            "Toad Hall (ANU)",
            [("definition", "What is Toad Hall?", "a residential hall in Australian National University")],
        ),
        # the place may follow the description ...
        (
            "The Philadelphia Eagles are a professional American football franchise based in Philadelphia, Pennsylvania.",
            "Philadelphia Eagles",
            [
                (
                    "definition",
                    "What are the Philadelphia Eagles?",
                    "a professional American football franchise based in Philadelphia",
                ),
                ("place", "Where are the Philadelphia Eagles based?", "Philadelphia"),
            ],
        ),
        # ... but not past a comma, where it is about something else
        (
            "The Orrin Bridge is a suspension bridge near Harlow, which is based in Kent.",
            "The Orrin Bridge",
            [("definition", "What is The Orrin Bridge?", "a suspension bridge near Harlow")],
        ),
        # an opening phrase of time or place is not part of the subject
        (
            "At the 2011 census, Young had a population of 6,960.",
            "Young, New South Wales",
            [("number", "What is the population of Young?", "6,960")],
        ),
        # ... but a rank after the comma is left out, as an appositive is
        (
            "John Talbot, 3rd Earl of Shrewsbury (12 December 1448 – 28 June 1473) was an English peer.",
            "John Talbot, 3rd Earl of Shrewsbury",
            [
                ("definition", "Who was John Talbot?", "an English peer"),
                ("date", "When was John Talbot born?", "12 December 1448"),
                ("date", "When did John Talbot die?", "28 June 1473"),
            ],
        ),
        # the name after "by" is an adjective of a noun: no agent, no identity question
        (
            "XM is a live album recorded by British band Porcupine Tree.",
            "XM (album)",
            [("definition", "What is XM?", "a live album recorded by British band Porcupine Tree")],
        ),
    ],
)
def test_english_forms(sentence, title, expected):
    assert _qa(english_questions(sentence, title)) == expected


@pytest.mark.parametrize(
    ("sentence", "title"),
    [
        ("Construction began in 1906.", "The Orrin Bridge"),  # a common noun, capitalised only at the start
        ("In 1990 the club moved to a new ground.", "Ashby Town F.C."),  # opens with a preposition
        ("Her best-known works are the Orrin Bridge at Kestle and the Tarn viaduct.", "Mara Vell"),  # possessive
        ("It is big.", "Anything"),  # too short
        ("North Carolina chose the Plott Hound as it was the only dog breed indigenous to the state.", "State dogs"),
        ("The first vehicle across was the Kestle mail coach.", "Orrin Bridge opened"),  # a description, not a name
        ("Zambia has a population of 17 million.", "List of countries"),  # a topic title stands for nothing
        ("In 1990, Smith and Jones had a population of 6,960.", "Smith"),  # two names after the opening phrase
    ],
)
def test_english_sentences_that_give_no_question(sentence, title):
    assert english_questions(sentence, title) == []


def test_no_bag_of_words_and_no_blanks():
    """Every English question is a sentence opening with a question word and ending with "?"."""
    text = (
        "The Tarn viaduct is a stone railway viaduct of twenty-one arches on the moorland line to Caddon. "
        "It was designed by Mara Vell and completed in 1919."
    )
    forms = [f for s in split_sentences(text) for f in english_questions(s, "The Tarn viaduct", text)]
    assert _qa(forms) == [
        (
            "definition",
            "What is The Tarn viaduct?",
            "a stone railway viaduct of twenty-one arches on the moorland line to Caddon",
        ),
        ("date", "When was The Tarn viaduct completed?", "1919"),
        ("agent", "Who designed The Tarn viaduct?", "Mara Vell"),
    ]
    assert all(
        re.match(r"(What|Who|When|Where|Which|How) .+\?$", f.question) and "____" not in f.question for f in forms
    )


def test_split_sentences():
    assert split_sentences("Dr. Smith met J. R. R. Tolkien in 1950. They talked.\nThe end") == [
        "Dr. Smith met J. R. R. Tolkien in 1950.",
        "They talked.",
        "The end",
    ]
    assert split_sentences('He said "Go." Then he left. It was 3.5 km away!  Was it? Yes') == [
        'He said "Go."',
        "Then he left.",
        "It was 3.5 km away!",
        "Was it?",
        "Yes",
    ]


@given(st.lists(st.text(alphabet="ab .!?\nDrJ", max_size=12), max_size=6))
def test_split_sentences_keeps_every_character(parts):
    text = "".join(parts)
    got = split_sentences(text)
    assert "".join(got).replace(" ", "") == re.sub(r"\s", "", text)
    assert all(s == s.strip() and s for s in got)


@pytest.mark.parametrize(
    ("sentence", "title", "first", "expected"),
    [
        (
            "尤金袋鼠（Macropus eugenii）是袋鼠科中细小的成员，通常都是研究对象。",
            "尤金袋鼠",
            True,
            [("definition", "尤金袋鼠是什么？", "袋鼠科中细小的成员")],
        ),
        (
            "海梅·雷耶斯是DC漫画公司的一个虚拟人物。",
            "海梅·雷耶斯",
            True,
            [("definition", "海梅·雷耶斯是谁？", "DC漫画公司的一个虚拟人物")],
        ),
        (
            "若游戏中离，则4分钟内不得进行配对。",
            "泡泡战士",
            False,
            [("number", "若游戏中离，则多少分钟内不得进行配对？", "4分钟")],
        ),
        ("黑龙江省博物馆始建于1904年。", "黑龙江省博物馆", False, [("date", "黑龙江省博物馆始建于哪一年？", "1904年")]),
        (
            "《英雄》是一部由张艺谋执导的武侠电影。",
            "英雄",
            True,
            [
                ("definition", "《英雄》是什么？", "一部由张艺谋执导的武侠电影"),
                ("agent", "《英雄》是一部由谁执导的武侠电影？", "张艺谋"),
            ],
        ),
        ("芙蓉洞位于重庆武隆县江口镇。", "芙蓉洞", True, [("place", "芙蓉洞位于哪里？", "重庆武隆县江口镇")]),
        # a pronoun opening the question is the title
        ("它于2005年迁入新馆。", "黑龙江省博物馆", False, [("date", "黑龙江省博物馆于哪一年迁入新馆？", "2005年")]),
        # refused: a year glossing another calendar, a decade, a definition of a subject that is not the title
        ("渡川之战发生于天正3年（1575年），是土佐的战役。", "渡川之战", True, []),
        ("丙烯颜料发明于1950年代。", "丙烯颜料", False, []),
        ("选择服装类型的口号是「裸体到你所敢做的范围」。", "裸体自行车游行", False, []),
    ],
)
def test_chinese_forms(sentence, title, first, expected):
    assert _qa(chinese_questions(sentence, title, first)) == expected


SUMMARY = """Table file cities.csv: 3 rows, 3 columns.
Columns:
- city (VARCHAR): 3 values, 0 empty, 3 distinct
First rows:
| id | city | population |
| --- | --- | --- |
| 1 | Lyon | 516092 |
| 2 | Nice \\| Côte | NULL |"""


def test_table_rows_become_cell_questions():
    assert markdown_rows(SUMMARY) == (
        ["id", "city", "population"],
        [["1", "Lyon", "516092"], ["2", "Nice | Côte", "NULL"]],
    )
    # the key is the first column of distinct non-numbers (city, not id); an empty cell asks nothing
    assert _qa(table_questions("table_summary", SUMMARY, "cities")) == [
        ("table", "What is the id of Lyon?", "1"),
        ("table", "What is the population of Lyon?", "516092"),
        ("table", "What is the id of Nice | Côte?", "2"),
    ]
    column = (
        "Column population (BIGINT) of table file cities.csv, column 3 of 3.\n2 values, 1 empty, range 516092 to 542000"
    )
    assert _qa(table_questions("table_column", column, "cities")) == [
        ("table", "What is the highest population in cities?", "542000"),
        ("table", "What is the lowest population in cities?", "516092"),
    ]
    text_column = "Column city (VARCHAR) of table file cities.csv, column 2 of 3.\n3 values; examples: Lyon"
    assert table_questions("table_column", text_column, "cities") == []
    assert table_questions("text", SUMMARY, "cities") == []
    zh = "| 城市 | 人口 |\n| --- | --- |\n| 里昂 | 516092 |"
    assert _qa(table_questions("table_summary", zh, "城市")) == [("table", "里昂的人口是多少？", "516092")]


_CELL = st.text(alphabet="ab|\\xy1", min_size=1, max_size=8).filter(lambda s: s.strip() == s)


@given(st.lists(_CELL, min_size=1, max_size=4, unique=True), st.data())
def test_markdown_rows_read_what_the_ingest_writes(head, data):
    from rag_lab.tools.data_analysis import render_markdown_table

    rows = data.draw(st.lists(st.lists(_CELL, min_size=len(head), max_size=len(head)), max_size=4))
    assert markdown_rows(render_markdown_table(head, [tuple(r) for r in rows])) == (head, rows)


@pytest.mark.parametrize(
    ("subject", "title", "expected"),
    [
        ("Nicholas Lofton Hexum", "Nick Hexum", "Nick Hexum"),  # "ni" opens both given names
        ("Andrew Alan Fuller", "Drew Fuller", "Drew Fuller"),  # "drew" inside "andrew"
        ("Christopher Edward Nolan", "Christopher Nolan", "Christopher Nolan"),
        ("Roderick A. Maude-Roxby", "Roddy Maude-Roxby", "Roddy Maude-Roxby"),
        ("Ward", "M. Ward", "M. Ward"),  # the last name alone
        ("Mark King", "Mark King (musician)", "Mark King"),
        ("Hank Williams", "Audrey Williams", "Hank Williams"),  # another person of the same family
        ("Michael Edwards", "Eddie &quot;The Eagle&quot; Edwards", "Michael Edwards"),  # no given name shared
        ("Edward Stafford", "Edward Stafford, 4th Baron Stafford", "Edward Stafford"),  # a title with a comma
        ("the Australian National University", "Australian National University", "the Australian National University"),
    ],
)
def test_common_name(subject, title, expected):
    assert common_name(subject, title) == expected


_NAME_WORDS = st.sampled_from(["Nick", "Nicholas", "Drew", "Andrew", "M.", "Ward", "Hexum", "the", "Young"])


@given(st.lists(_NAME_WORDS, min_size=1, max_size=4), st.lists(_NAME_WORDS, min_size=1, max_size=5))
def test_common_name_is_the_subject_or_the_title_with_the_same_last_word(subject, title):
    s, t = " ".join(subject), " ".join(title)
    got = common_name(s, t)
    assert got == s or (got == t and subject[-1] == title[-1] and len(title) <= 4)


def test_a_question_names_its_subject_as_a_person_types_it():
    src = SourceChunk(
        "h#0", "h", "Nick Hexum", "Nicholas Lofton Hexum (born April 15, 1970) is an American singer and songwriter."
    )
    got = [(c.generator, c.question, c.answers, c.subject, c.written) for c in generate_candidates(src)]
    assert got == [
        (
            "definition",
            "Who is Nick Hexum?",
            ["an American singer and songwriter"],
            "Nick Hexum",
            "Nicholas Lofton Hexum",
        ),
        ("date", "When was Nick Hexum born?", ["April 15, 1970"], "Nick Hexum", "Nicholas Lofton Hexum"),
    ]
