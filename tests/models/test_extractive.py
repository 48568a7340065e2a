"""ExtractiveChatModel: §7.2 XML parsing, sentence selection with the real MiniLM, streaming."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_lab.models.base import ChatMessage, ChatModel, ChatOptions
from rag_lab.models.embedding import OnnxMiniLMEmbedder
from rag_lab.models.extractive import (
    NO_ANSWER,
    ExtractiveChatModel,
    RetrievedPassage,
    content_terms,
    estimate_tokens,
    find_retrieval,
    parse_retrieval,
    question_of,
    split_sentences,
    stream_pieces,
    unescape_text,
)

KNOWLEDGE_XML = """<retrieval type="knowledge" mode="semantic">
  <document id="d1" kb="b1" title="Museum &amp; &quot;Guide&quot;">
    <chunk id="c1" index="0" view="full">
      <content>The city museum was founded in 1902. Tickets cost 12 euros for adults.</content>
    </chunk>
    <chunk id="c2" index="1" view="full">
      <content>The museum opens at 9 am and closes at 5 pm. It is closed on Mondays.
Photography is allowed without flash.</content>
    </chunk>
  </document>
  <document id="d2" kb="b1" title="Library">
    <chunk id="c3" index="4" view="full" type="text">
      <content>The public library lends up to 10 books per card. Use &lt;b&gt; tags &amp; more; a &amp;lt; stays.</content>
    </chunk>
    <chunk id="c4" index="0" view="match" type="faq">
      <question>Is there parking?</question>
      <match>Parking &gt; 200 spaces.</match>
      <answer>Yes, the garage on Elm Street has 200 spaces.</answer>
      <answer>Parking is free after 6 pm.</answer>
    </chunk>
  </document>
</retrieval>"""

WEB_XML = """<retrieval type="web" mode="search">
  <page id="w1" title="Weather &lt;today&gt; &amp; &quot;tomorrow&quot;">
    <evidence type="search_summary" verified="false" />
    <match truncated="true">Rain is expected tomorrow afternoon in Lyon. Temperatures stay near 14 &amp; falling</match>
    <published>2024-05-01</published>
  </page>
  <page id="w2" title="Plain">
    <evidence type="search_summary" verified="false" />
    <match>Second snippet.</match>
  </page>
</retrieval>"""

SYSTEM = (
    "You are a helpful assistant. Answer from the sources below.\n\n"
    + KNOWLEDGE_XML
    + "\n"
    + WEB_XML
    + '\n\n## Source handling protocol (system-owned)\nCite with <ref id="cN"/>.'
)


def conversation(question: str) -> list[ChatMessage]:
    return [ChatMessage("system", SYSTEM), ChatMessage("user", question)]


# -- parsing ------------------------------------------------------------------------------


def test_unescape_text_is_the_inverse_of_the_text_escape() -> None:
    assert unescape_text("&lt;tag&gt; &amp; x") == "<tag> & x"
    assert unescape_text("a &amp;lt; b") == "a &lt; b"  # one pass: the escaped '&lt;' stays literal
    assert unescape_text("&quot;kept&quot; &#39;") == "&quot;kept&quot; &#39;"


def test_parse_knowledge_and_web_blocks() -> None:
    passages = parse_retrieval(KNOWLEDGE_XML + "\n" + WEB_XML)
    assert [(p.handle, p.kind) for p in passages] == [
        ("c1", "knowledge"),
        ("c2", "knowledge"),
        ("c3", "knowledge"),
        ("c4", "knowledge"),
        ("w1", "web"),
        ("w2", "web"),
    ]
    assert passages[0].text == "The city museum was founded in 1902. Tickets cost 12 euros for adults."
    assert passages[1].text == (
        "The museum opens at 9 am and closes at 5 pm. It is closed on Mondays.\nPhotography is allowed without flash."
    )
    assert passages[2].text == "The public library lends up to 10 books per card. Use <b> tags & more; a &lt; stays."
    # a match-view FAQ chunk: its match, then its answers (the question is not answer text)
    assert (
        passages[3].text
        == "Parking > 200 spaces.\nYes, the garage on Elm Street has 200 spaces.\nParking is free after 6 pm."
    )
    assert passages[4].title == 'Weather <today> & "tomorrow"'
    assert passages[4].text == "Rain is expected tomorrow afternoon in Lyon. Temperatures stay near 14 & falling"
    assert passages[5] == RetrievedPassage("w2", "Second snippet.", "web", "Plain")


def test_parse_ignores_text_outside_retrieval_and_chunks_without_id() -> None:
    text = (
        '<chunk id="c9"><content>outside</content></chunk>\n<retrieval type="knowledge" mode="semantic">\n'
        '  <chunk index="0" view="full"><content>no id</content></chunk>\n</retrieval>'
    )
    assert parse_retrieval(text) == []
    assert parse_retrieval("no xml at all") == []


def test_find_retrieval_reads_system_and_user_and_dedupes() -> None:
    user_xml = (
        '<retrieval type="knowledge" mode="semantic">\n  <chunk id="c2" index="1" view="full">\n'
        '    <content>duplicate handle</content>\n  </chunk>\n  <chunk id="c5" index="0" view="full">\n'
        "    <content>Only in the user message.</content>\n  </chunk>\n</retrieval>"
    )
    msgs = [
        ChatMessage("system", SYSTEM),
        ChatMessage("assistant", '<retrieval type="knowledge"><chunk id="c7"><content>x</content></chunk></retrieval>'),
        ChatMessage("user", user_xml + "\n\nWhen does it open?"),
    ]
    passages = find_retrieval(msgs)
    assert [p.handle for p in passages] == ["c1", "c2", "c3", "c4", "w1", "w2", "c5"]
    assert passages[1].text.startswith("The museum opens")


def test_question_is_the_last_paragraph_of_the_last_user_message() -> None:
    msgs = [
        ChatMessage("user", "old question"),
        ChatMessage("assistant", "old answer"),
        ChatMessage("user", KNOWLEDGE_XML + "\n\nContext above.\n\n  \n\nWhen does the museum open?\n\n   "),
    ]
    assert question_of(msgs) == "When does the museum open?"
    assert question_of([ChatMessage("user", "Line one\nline two")]) == "Line one\nline two"
    assert question_of([ChatMessage("system", "x")]) == ""


def test_split_sentences() -> None:
    assert split_sentences('He said "Stop." Then he left! Really? Pi is 3.14 exactly.\nNext line') == [
        'He said "Stop."',
        "Then he left!",
        "Really?",
        "Pi is 3.14 exactly.",
        "Next line",
    ]
    assert split_sentences("熊猫吃竹子。它们住在四川！真的吗？是的；好\n![img](http://x/y.png)\n...") == [
        "熊猫吃竹子。",
        "它们住在四川！",
        "真的吗？",
        "是的；",
        "好",
    ]


def test_content_terms_and_token_estimate() -> None:
    assert content_terms("What is the opening time of the Museum?") == {"opening", "time", "museum"}
    assert content_terms("熊猫吃什么") == {"熊猫", "猫吃", "吃什", "什么"}
    assert content_terms("猫 a") == {"猫"}
    assert estimate_tokens("Hello, world 你好!") == 5  # "Hello," "world" "你" "好" "!"
    assert estimate_tokens("ab cd") == 2
    assert estimate_tokens("你好") == 2
    assert estimate_tokens("") == 0


def test_stream_pieces_examples() -> None:
    assert stream_pieces('One two three four. <ref id="c2"/>', 3) == ["One two three ", 'four. <ref id="c2"/>']
    assert stream_pieces("abcdefghij", 3, max_chars=4) == ["abcd", "efgh", "ij"]
    assert stream_pieces("") == []


@given(st.text(alphabet=st.sampled_from(list('ab <>"/=\n\t熊。')), max_size=80), st.integers(1, 5), st.integers(1, 30))
def test_stream_pieces_concatenate_to_the_text(text: str, words: int, max_chars: int) -> None:
    pieces = stream_pieces(text, words, max_chars)
    assert "".join(pieces) == text
    assert all(0 < len(p) <= max_chars for p in pieces)


# -- answering with the real MiniLM ---------------------------------------------------------


@pytest.fixture
def extractive(minilm: OnnxMiniLMEmbedder) -> ExtractiveChatModel:
    return ExtractiveChatModel(minilm)


async def test_answer_cites_the_chunk_holding_the_answer(extractive: ExtractiveChatModel) -> None:
    assert isinstance(extractive, ChatModel)
    assert extractive.model_id == "extractive:all-MiniLM-L6-v2-int8|local"
    assert extractive.supports_vision is False
    resp = await extractive.chat(conversation("What time does the museum open?"), ChatOptions())
    assert resp.content.startswith('The museum opens at 9 am and closes at 5 pm. <ref id="c2"/>')
    assert resp.finish_reason == "stop"
    sentences = re.findall(r'(.+?) <ref id="(\w+)"/>\s*', resp.content)
    assert 1 <= len(sentences) <= 3
    assert len({s for s, _ in sentences}) == len(sentences)
    # every cited sentence is copied verbatim from the chunk it cites
    by_handle = {p.handle: p.text for p in parse_retrieval(SYSTEM)}
    for sentence, handle in sentences:
        assert sentence.strip() in by_handle[handle]


async def test_answer_cites_web_pages(extractive: ExtractiveChatModel) -> None:
    resp = await extractive.chat(conversation("Will it rain in Lyon tomorrow?"), ChatOptions())
    assert resp.content.startswith('Rain is expected tomorrow afternoon in Lyon. <ref id="w1"/>')


async def test_faq_answers_are_answerable(minilm: OnnxMiniLMEmbedder) -> None:
    model = ExtractiveChatModel(minilm, max_sentences=1)
    resp = await model.chat(conversation("Is parking free in the evening?"), ChatOptions())
    assert resp.content == 'Parking is free after 6 pm. <ref id="c4"/>'


async def test_no_context_or_unrelated_question_gives_no_answer(extractive: ExtractiveChatModel) -> None:
    plain = [ChatMessage("system", "You are helpful."), ChatMessage("user", "What time does the museum open?")]
    assert (await extractive.chat(plain, ChatOptions())).content == NO_ANSWER
    unrelated = await extractive.chat(conversation("How do quantum computers factor large integers?"), ChatOptions())
    assert unrelated.content == NO_ANSWER
    empty_question = await extractive.chat(conversation("   "), ChatOptions())
    assert empty_question.content == NO_ANSWER


async def test_redundant_sentences_are_skipped(minilm: OnnxMiniLMEmbedder) -> None:
    xml = """<retrieval type="knowledge" mode="semantic">
  <chunk id="c1" index="0" view="full">
    <content>The museum opens at 9 am.</content>
  </chunk>
  <chunk id="c2" index="1" view="full">
    <content>The museum opens at 9 am every day. Tickets cost 12 euros.</content>
  </chunk>
</retrieval>"""
    msgs = [ChatMessage("system", xml), ChatMessage("user", "What time does the museum open?")]
    chosen = ExtractiveChatModel(minilm).select(question_of(msgs), find_retrieval(msgs))
    texts = [c.text for c in chosen]
    assert texts[0] == "The museum opens at 9 am."
    assert "The museum opens at 9 am every day." not in texts  # cosine 0.92 with the first
    no_check = ExtractiveChatModel(minilm, redundancy=1.01).select(question_of(msgs), find_retrieval(msgs))
    assert [c.text for c in no_check][:2] == ["The museum opens at 9 am.", "The museum opens at 9 am every day."]
    assert all(a.score >= b.score for a, b in zip(chosen, chosen[1:]))


async def test_stream_pieces_concatenate_to_chat(extractive: ExtractiveChatModel) -> None:
    msgs = conversation("What time does the museum open?")
    full = await extractive.chat(msgs, ChatOptions())
    chunks = [c async for c in extractive.chat_stream(msgs, ChatOptions())]
    body, last = chunks[:-1], chunks[-1]
    assert all(c.response_type == "answer" and not c.done for c in body)
    assert len(body) >= 4
    assert "".join(c.content for c in body) == full.content
    assert any(c.content.endswith("<ref ") for c in body)  # a citation split across pieces
    assert (last.response_type, last.content, last.done, last.finish_reason) == ("answer", "", True, "stop")
    prompt = estimate_tokens(SYSTEM) + estimate_tokens("What time does the museum open?")
    completion = estimate_tokens(full.content)
    assert last.usage == {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    assert full.usage == last.usage


async def test_max_tokens_truncates_with_length(extractive: ExtractiveChatModel) -> None:
    msgs = conversation("What time does the museum open?")
    resp = await extractive.chat(msgs, ChatOptions(max_tokens=5))
    assert resp.content == "The museum opens at 9"
    assert resp.finish_reason == "length"
    assert resp.usage["completion_tokens"] == 5
    chunks = [c async for c in extractive.chat_stream(msgs, ChatOptions(max_completion_tokens=5))]
    assert "".join(c.content for c in chunks) == "The museum opens at 9"
    assert chunks[-1].finish_reason == "length"


def test_constructor_checks(minilm: OnnxMiniLMEmbedder) -> None:
    with pytest.raises(ValueError, match="max_sentences"):
        ExtractiveChatModel(minilm, max_sentences=0)


def test_hard_wrapped_sentences_are_joined_before_extraction() -> None:
    from rag_lab.models.sentences import join_wrapped_lines

    wrapped = "The lighthouse was built in 1874 by the\nengineer Mara Quill. Its lamp can be\nseen from 22 miles."
    assert split_sentences(wrapped) == [
        "The lighthouse was built in 1874 by the engineer Mara Quill.",
        "Its lamp can be seen from 22 miles.",
    ]
    # paragraph breaks, headings and list items are not wraps
    assert join_wrapped_lines("# Title\nFirst line\n\nNext para\n- item one\n- item two") == (
        "# Title\nFirst line\n\nNext para\n- item one\n- item two"
    )
    assert join_wrapped_lines("长城是中国古代的\n军事防御工程。") == "长城是中国古代的军事防御工程。"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # must not split: initials, dotted abbreviations, titles, a terminator inside a quote
        # followed by a lower-case word
        ("Florence M. Nightingale trained nurses.", ["Florence M. Nightingale trained nurses."]),
        ("Tools, e.g. hammers, help. Most do.", ["Tools, e.g. hammers, help.", "Most do."]),
        ("Dr. Vell came. Mr. Lisk left.", ["Dr. Vell came.", "Mr. Lisk left."]),
        ('He shouted "Run!" and left. Then?', ['He shouted "Run!" and left.', "Then?"]),
        ("Made in the U.S. by hand. It works.", ["Made in the U.S. by hand.", "It works."]),
        (
            "Haymo of Faversham, O.F.M. (c. 1180 – 1244) was a friar.",
            ["Haymo of Faversham, O.F.M. (c. 1180 – 1244) was a friar."],
        ),
        # must split: ordinary words before ".", "!" and "?" before a capital
        ("The tide turned. Boats left! Why? Nobody knew.", ["The tide turned.", "Boats left!", "Why?", "Nobody knew."]),
        ('She said "Go." Then she went.', ['She said "Go."', "Then she went."]),
        ("It is 3.14 exactly. Next.", ["It is 3.14 exactly.", "Next."]),
    ],
)
def test_sentence_splitting_respects_abbreviations_and_quotes(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


def test_a_sentence_cut_at_a_chunk_seam_is_joined_across_the_blank_lines() -> None:
    """Two chunks joined by a paragraph break where the chunker cut mid-sentence: the sentence
    runs on (the next line starts lower-case); a real paragraph break (capital start) stays."""
    text = "graduated in 1891, one of the first \n\nwomen to finish.\n\nAfter ten years she left."
    assert split_sentences(text) == [
        "graduated in 1891, one of the first women to finish.",
        "After ten years she left.",
    ]
    assert split_sentences("A heading without a stop\n\nThe next paragraph.") == [
        "A heading without a stop",
        "The next paragraph.",
    ]


_WORDS = st.lists(
    st.sampled_from(["bridge", "river", "tide", "ferry", "tower", "Kestle", "Orrin", "1911"]), min_size=1, max_size=6
)


@given(st.lists(_WORDS, min_size=1, max_size=5), st.sampled_from([".", "!", "?"]))
def test_sentences_of_capitalised_words_split_exactly_at_their_ends(sentences: list[list[str]], stop: str) -> None:
    """Sentences that start with a capital and end with a word of two or more letters plus a
    terminator split exactly there; an initial or "e.g." inside one never splits it."""
    built = [" ".join(["The", *words, "e.g. the", "M.", "Vell", "today"]) + stop for words in sentences]
    assert split_sentences(" ".join(built)) == built


@given(
    st.text(
        alphabet=st.one_of(
            st.sampled_from(" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2028\u2029\u202f\u3000\u200b\ufeff"),
            st.sampled_from("熊猫あア한國"),
            st.characters(codec="utf-8"),
        ),
        max_size=60,
    )
)
def test_token_estimate_fast_path_counts_like_the_pattern(text: str) -> None:
    """Text without CJK is counted with ``str.split``: the same count as the pattern (Unicode
    whitespace included, e.g. NBSP, U+1C..1F, U+3000; U+200B and U+FEFF are not whitespace)."""
    from rag_lab.models.extractive import _TOKEN_RE

    assert estimate_tokens(text) == len(_TOKEN_RE.findall(text))
    assert estimate_tokens("a\xa0b\u3000c\x1cd") == 4 and estimate_tokens("a\u200bb") == 1


async def test_markdown_headings_are_not_answer_sentences(minilm: OnnxMiniLMEmbedder) -> None:
    """Issue 26: "# The Bellrock Lighthouse [1]" was an answer sentence; headings name a topic."""
    xml = """<retrieval type="knowledge" mode="semantic">
  <chunk id="c1" index="0" view="full">
    <content># The Bellrock Lighthouse

The Bellrock Lighthouse stands on a reef off the coast of Angus.

## History of the Bellrock Lighthouse
The lighthouse was built between 1807 and 1810.</content>
  </chunk>
</retrieval>"""
    msgs = [ChatMessage("system", xml), ChatMessage("user", "Tell me about the Bellrock Lighthouse")]
    chosen = ExtractiveChatModel(minilm).select(question_of(msgs), find_retrieval(msgs))
    texts = [c.text for c in chosen]
    assert texts and not any(t.startswith("#") for t in texts), texts
    assert "The Bellrock Lighthouse stands on a reef off the coast of Angus." in texts
    # a '#' inside a sentence (or a hashtag without a space) is not a heading
    tag = ExtractiveChatModel(minilm).select(
        "Bellrock hashtag", [RetrievedPassage("c1", "#Bellrock is trending.", "knowledge")]
    )
    assert [c.text for c in tag] == ["#Bellrock is trending."]
