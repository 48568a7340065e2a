from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.knowledge.chunking import ChunkingConfig, ChunkingError, chunk_text, split_spans

# text built from words, spaces, newlines, English and Chinese punctuation, Han characters
_pieces = st.sampled_from(
    [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "x",
        " ",
        " ",
        "  ",
        "\n",
        "\n\n",
        ". ",
        "! ",
        "? ",
        "。",
        "！",
        "；",
        "北京",
        "大学",
        "机器学习",
        "\t",
        "supercalifragilistic",
        "。 ",
    ]
)
texts = st.lists(_pieces, min_size=0, max_size=120).map("".join) | st.text(max_size=400)


def _check_chunks(text: str, chunks, size: int, overlap: int) -> None:
    texts_ = [c for c in chunks if c.chunk_type == "text"]
    for c in chunks:
        assert c.content == text[c.start_at : c.end_at]
        assert c.content.strip(), "blank chunk"
        assert 0 < c.end_at - c.start_at
    assert [c.chunk_index for c in texts_] == list(range(len(texts_)))
    for prev, nxt in zip(texts_, texts_[1:]):
        assert prev.next_chunk_id == nxt.id and nxt.pre_chunk_id == prev.id
    if texts_:
        assert texts_[0].pre_chunk_id == "" and texts_[-1].next_chunk_id == ""
    assert len({c.id for c in chunks}) == len(chunks)
    covered = set()
    for c in texts_:
        covered.update(range(c.start_at, c.end_at))
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())


@settings(max_examples=300)
@given(text=texts, size=st.integers(1, 80), overlap_frac=st.floats(0, 0.95))
def test_split_spans_invariants(text, size, overlap_frac):
    overlap = min(size - 1, int(size * overlap_frac))
    spans = split_spans(text, size, overlap)
    if not text.strip():
        assert spans == []
        return
    assert spans[0][0] <= min(i for i, ch in enumerate(text) if not ch.isspace())
    for s, e in spans:
        assert 0 <= s < e <= len(text)
        assert e - s <= size
        assert text[s:e].strip()
    for (s1, e1), (s2, e2) in zip(spans, spans[1:]):
        assert s2 > s1 and e2 > e1  # progress on both ends
        assert e1 - s2 <= overlap  # overlap bounded
        # anything between two chunks is whitespace only
        assert s2 <= e1 or not text[e1:s2].strip()
    last_non_ws = max(i for i, ch in enumerate(text) if not ch.isspace())
    assert spans[-1][1] > last_non_ws


@settings(max_examples=150)
@given(text=texts, size=st.integers(4, 60), overlap=st.integers(0, 3), parent_extra=st.integers(1, 100))
def test_chunk_text_invariants_plain_and_parent(text, size, overlap, parent_extra):
    plain = chunk_text(text, knowledge_id="doc", knowledge_base_id="kb", config=ChunkingConfig(size, overlap))
    _check_chunks(text, plain, size, overlap)
    assert all(c.chunk_type == "text" and c.parent_chunk_id == "" for c in plain)

    cfg = ChunkingConfig(size, overlap, parent_chunk_size=size + parent_extra)
    both = chunk_text(text, knowledge_id="doc", knowledge_base_id="kb", config=cfg)
    _check_chunks(text, both, size, overlap)
    parents = {c.id: c for c in both if c.chunk_type == "parent_text"}
    children = [c for c in both if c.chunk_type == "text"]
    assert [p.chunk_index for p in parents.values()] == list(range(len(parents)))
    for ch in children:
        p = parents[ch.parent_chunk_id]
        assert p.start_at <= ch.start_at and ch.end_at <= p.end_at
        assert len(ch.content) <= size
    for p in parents.values():
        assert len(p.content) <= size + parent_extra


def test_prefers_paragraph_then_sentence_then_whitespace():
    para = "First paragraph has words. More words here.\n\nSecond paragraph text."
    # window of 60 reaches into the second paragraph: the cut is after the blank line
    assert split_spans(para, 60) == [(0, 45), (45, len(para))]
    assert para[:45].endswith("\n\n")

    sent = "One two three four five six. Seven eight nine ten eleven twelve"
    s = split_spans(sent, 40)
    assert s[0] == (0, 29)  # after "six. ", not at the later whitespace
    assert sent[s[0][0] : s[0][1]] == "One two three four five six. "
    # a boundary that would leave the chunk shorter than half the window is not used
    early = "One two. Three four five six seven eight nine ten eleven twelve"
    assert split_spans(early, 40)[0] == (0, 35)  # "... seven ": last whitespace, not the sentence end at 9

    words = "alpha beta gamma delta epsilon zeta eta theta"
    w = split_spans(words, 20)
    assert w[0] == (0, 17)  # "alpha beta gamma " (last whitespace in the window)

    zh = "北京大学的课程很好。机器学习很有趣！第三句话在这里"
    z = split_spans(zh, 14)
    assert zh[z[0][0] : z[0][1]] == "北京大学的课程很好。"

    hard = "x" * 25
    assert split_spans(hard, 10) == [(0, 10), (10, 20), (20, 25)]


def test_overlap_starts_at_a_word():
    text = "aaaa bbbb cccc dddd eeee ffff gggg hhhh"
    spans = split_spans(text, 15, 6)
    assert spans[0] == (0, 15)  # "aaaa bbbb cccc "
    # 15 - 6 = 9 falls on the space before "cccc": the next chunk starts at "cccc"
    assert spans[1][0] == 10 and text[10:14] == "cccc"


def test_ids_and_links():
    chunks = chunk_text(
        "one. two. three. four.",
        knowledge_id="k1",
        knowledge_base_id="kb",
        config=ChunkingConfig(10, 0),
        id_prefix="kb:k1",
    )
    assert [c.id for c in chunks] == ["kb:k1#c0", "kb:k1#c1", "kb:k1#c2"]
    assert [c.content for c in chunks] == ["one. two. ", "three. ", "four."]
    assert chunks[1].pre_chunk_id == "kb:k1#c0" and chunks[1].next_chunk_id == "kb:k1#c2"
    assert all(c.knowledge_id == "k1" and c.knowledge_base_id == "kb" for c in chunks)


def test_parent_child_ids():
    text = "Para one sentence. Another one.\n\nPara two is here. And more."
    chunks = chunk_text(
        text, knowledge_id="d", knowledge_base_id="kb", config=ChunkingConfig(20, 0, parent_chunk_size=40)
    )
    parents = [c for c in chunks if c.chunk_type == "parent_text"]
    kids = [c for c in chunks if c.chunk_type == "text"]
    assert [p.id for p in parents] == ["d#p0", "d#p1"]
    assert parents[0].content == "Para one sentence. Another one.\n\n"
    assert [k.parent_chunk_id for k in kids] == ["d#p0", "d#p0", "d#p1", "d#p1"]
    assert [k.id for k in kids] == ["d#c0", "d#c1", "d#c2", "d#c3"]
    assert kids[1].next_chunk_id == "d#c2"  # children link across parents


@pytest.mark.parametrize(
    "cfg, field",
    [
        (ChunkingConfig(0, 0), "chunk_size"),
        (ChunkingConfig(10, 10), "chunk_overlap"),
        (ChunkingConfig(10, -1), "chunk_overlap"),
        (ChunkingConfig(10, 2, parent_chunk_size=5), "parent_chunk_size"),
        (ChunkingConfig(10, 2, parent_chunk_size=-3), "parent_chunk_size"),
    ],
)
def test_bad_config_names_field(cfg, field):
    with pytest.raises(ChunkingError, match=field):
        cfg.validate()


def test_blank_text_has_no_chunks():
    assert chunk_text("  \n\t ", knowledge_id="k", knowledge_base_id="kb") == []
    assert split_spans("", 10) == []
