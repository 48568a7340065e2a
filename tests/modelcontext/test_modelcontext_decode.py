"""decode_output_text, cited_chunk_ids and the StreamDecoder (spec §7.4, §7.5)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.modelcontext import (
    Registry,
    StreamDecoder,
    cited_chunk_ids,
    cited_web_urls,
    compact_public_citations,
    decode_output_text,
    expand_text,
)

KB_C1 = '<kb doc="T" chunk_id="X" kb_id="K" />'
KB_C2 = '<kb doc="" chunk_id="Y" />'
WEB_W1 = '<web url="https://ex.com/a#b" title="Ex &amp; co" />'
PNG = "minio://b/x.png"


def _registry(enabled: bool = True) -> Registry:
    """c1=X (title T, KB K), c2=Y (no title/KB), w1, d1, b1, res://0001 and res://0002."""
    r = Registry(enabled)
    assert r.register_chunk("X", "doc-1", "K", "T", 1, "text") == "c1"
    assert r.register_chunk("Y") == "c2"
    assert r.register_web("https://ex.com/a#b", "Ex & co") == "w1"
    assert r.register_document("doc-1") == "d1"
    assert r.register_kb("K") == "b1"
    assert r.encode_resources(PNG + " resource://AAAAAAAAAAAAAAAAAAAAAA") == "res://0001 res://0002"
    return r


def _stream(r: Registry, chunks: list[str]) -> str:
    d = StreamDecoder(r)
    return "".join(d.feed(c) for c in chunks) + d.flush()


# ---------------------------------------------------------------- decode_output_text
def test_ref_expansion_chunk_and_web() -> None:
    r = _registry()
    assert decode_output_text('A <ref id="c1"/>.', r) == f"A {KB_C1}."
    assert decode_output_text('<ref id="c2"/>', r) == KB_C2  # doc always present, kb_id only when set
    assert decode_output_text('<ref id="w1"/>', r) == WEB_W1
    assert decode_output_text('<REF  ID = "C1" >', r) == KB_C1  # strict form: case-insensitive, '/' optional
    assert decode_output_text('<ref\nid="c1"\n/>', r) == KB_C1


def test_attribute_values_use_the_five_char_escape() -> None:
    r = Registry(True)
    r.register_chunk("a&b", kb_id="k'1", title='"T" <x>')
    assert decode_output_text('<ref id="c1"/>', r) == (
        '<kb doc="&#34;T&#34; &lt;x&gt;" chunk_id="a&amp;b" kb_id="k&#39;1" />'
    )


def test_fail_closed_refs() -> None:
    r = _registry()
    assert decode_output_text('a<ref id="c9"/>b', r) == "ab"  # unknown
    assert decode_output_text('a<ref id="d1"/><ref id="b1"/>b', r) == "ab"  # wrong space
    assert decode_output_text("a<ref id='c1'/>b", r) == "ab"  # single quotes
    assert decode_output_text('a<ref id=" c1"/>b', r) == "ab"  # handles are not trimmed
    assert decode_output_text('a<ref id="c1" title="x"/>b', r) == "ab"
    assert decode_output_text('a <ref id="c1"', r) == "a "  # unclosed: runs to the end
    assert decode_output_text('<ref junk <ref id="c1"/>', r) == KB_C1  # strict form searched in the candidate


def test_model_written_public_tags_are_removed() -> None:
    r = _registry()
    assert decode_output_text('x <kb doc="T" chunk_id="evil" /> y', r) == "x  y"
    assert decode_output_text('x <WEB url="https://evil" title="e"/> y', r) == "x  y"
    assert decode_output_text("x <kb\ndoc='q'", r) == "x "
    # only a tag name followed by whitespace or the end counts (spec regexes)
    assert decode_output_text("<kbd>k</kbd> <kb> <ref> <reference>", r) == "<kbd>k</kbd> <kb> <ref> <reference>"


def test_citations_disabled_removes_every_ref() -> None:
    r = _registry(enabled=False)
    assert decode_output_text('A <ref id="c1"/> B <ref id="zz"> C <kb doc="x" /> D <ref', r) == "A  B  C  D "


def test_resources_restored_and_orphans_stripped_before_citations() -> None:
    r = _registry()
    assert decode_output_text("![img](res://0001) res://0002", r) == f"![img]({PNG}) resource://AAAAAAAAAAAAAAAAAAAAAA"
    assert decode_output_text("x res://12 y res:// z", r) == "x  y res:// z"
    assert decode_output_text('<res://9ref id="c1"/>', r) == KB_C1  # orphan removal happens first
    assert decode_output_text("", r) == ""


def test_issue_handles_decoded() -> None:
    r = _registry()
    r.register_issue("ISSUE-42")
    assert decode_output_text("fix i1 and i2", r) == "fix ISSUE-42 and i2"


def test_expand_text_is_an_alias() -> None:
    assert expand_text is decode_output_text


def test_cited_chunk_ids_and_urls() -> None:
    text = (
        '<kb doc="a" chunk_id="X&amp;1" /> <kb chunk_id="Y" kb_id="k"/> <KB chunk_id="X&amp;1" /> '
        '<kb doc="no id" /> <web url="https://a/?x=1&amp;y=2" title="" /> <web url="https://a/?x=1&amp;y=2" />'
    )
    assert cited_chunk_ids(text) == ["X&1", "Y"]
    assert cited_web_urls(text) == ["https://a/?x=1&y=2"]
    assert cited_chunk_ids("") == []


_ID = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=12).filter(
    lambda s: s.strip() == s and s != "" and not (s[0] in "cdbwCDBW" and s[1:].isdigit())
)


@given(st.lists(st.tuples(_ID, st.text(max_size=10), _ID), min_size=1, max_size=5), st.data())
def test_expand_then_compact_round_trip(chunks: list[tuple[str, str, str]], data: st.DataObject) -> None:
    """Tags produced by decoding fold back to the same <ref/> handles (history replay, §7.3)."""
    r = Registry(True)
    handles = [r.register_chunk(cid, kb_id=kb, title=title) for cid, title, kb in chunks]
    cited = data.draw(st.lists(st.sampled_from(handles), max_size=6))
    text = " ".join(f'<ref id="{h}"/>' for h in cited)
    expanded = decode_output_text(text, r)
    assert cited_chunk_ids(expanded) == list(dict.fromkeys(r.chunk(h).chunk_id for h in cited))  # type: ignore[union-attr]
    assert compact_public_citations(expanded, r) == text


# ---------------------------------------------------------------- StreamDecoder
def test_stream_ref_split_across_chunks() -> None:
    r = _registry()
    d = StreamDecoder(r)
    assert d.feed("Hi <re") == "Hi "
    assert d.feed('f id="c1"/> ok') == f"{KB_C1} ok"
    assert d.flush() == ""
    text = 'Hi <ref id="c1"/>, see <ref id="w1"/>.'
    assert _stream(r, list(text)) == decode_output_text(text, r)


def test_stream_drops_model_tags_and_unknown_refs() -> None:
    r = _registry()
    assert _stream(r, ['a <kb doc="x" chu', 'nk_id="y" /> b <ref id="c9"/> c']) == "a  b  c"
    assert _stream(r, ["<b>bold</b> 1 < 2 > 0 <x"]) == "<b>bold</b> 1 < 2 > 0 <x"
    # unlike the batch regexes, the stream also treats '<kb>' and '<ref>' as tags
    assert _stream(r, ["a <kb> b <ref> c"]) == "a  b  c"


def test_stream_citations_disabled() -> None:
    assert _stream(_registry(enabled=False), ['A <ref id="c1"/> B <r', 'ef id="w1"/>']) == "A  B "


def test_stream_trailing_text_is_kept_and_broken_markup_dropped_at_flush() -> None:
    """B.14 (upstream drops every held tail): a bare tag-name prefix and ``res:`` are text."""
    r = _registry()
    for tail in ('<ref id="c1', "<web ", "<kb\n", "res://", "res://4"):  # a started tag or handle: dropped
        assert _stream(r, ["end " + tail]) == "end ", tail
    for tail in ("<", "<r", "<RE", "<ref", "<k", "<we", "res:", "res:/", "r", "re", "res", "<x", "<refx", "i"):
        assert _stream(r, ["end " + tail]) == "end " + tail, tail
    assert _stream(r, ["1 <", " 2 and 3 <"]) == "1 < 2 and 3 <"


def test_stream_resource_handles_held_and_restored() -> None:
    r = _registry()
    d = StreamDecoder(r)
    assert d.feed("![](res://00") == "![]("
    assert d.feed("01) and res://1") == f"{PNG}) and "
    assert d.feed("2 x res:") == " x "
    assert d.feed("/x") == "res:/x"
    assert d.flush() == ""


def test_stream_issue_stage_holds_a_possible_handle() -> None:
    r = _registry()
    r.register_issue("ISSUE-42")
    d = StreamDecoder(r)
    assert d.feed("fix i") == "fix "
    assert d.feed("1") == ""
    assert d.feed(" now i2") == "ISSUE-42 now "
    assert d.flush() == "i2"


# ---------------------------------------------------------------- properties
_ALPHABET = "<>/=\"' refkbwRKBWid:c12s09x\n\t"
_TOKENS = [
    '<ref id="c1"/>',
    '<ref id="w1"/>',
    '<REF id="C2" >',
    '<ref id="d1"/>',
    '<ref id="c9"/>',
    '<ref id="c1"',
    '<kb doc="x" chunk_id="y" />',
    '<web url="u" />',
    "<kb",
    "<web",
    "<ref",
    "<re",
    "<",
    "res://0001",
    "res://0002",
    "res://77",
    "res://",
    "res:/",
    "res:",
    "<b>",
    "</b>",
    "<kbd>",
    "i1",
    "res://000",
]


def _splits(data: st.DataObject, text: str) -> list[str]:
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(text)), max_size=8))))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


_ANY_TEXT = st.lists(st.one_of(st.text(alphabet=_ALPHABET, max_size=6), st.sampled_from(_TOKENS)), max_size=12).map(
    "".join
)


@settings(max_examples=300)
@given(_ANY_TEXT, st.booleans(), st.data())
def test_stream_output_is_independent_of_chunking(text: str, enabled: bool, data: st.DataObject) -> None:
    """For any text (and no registered issue handles), any chunking gives the one-chunk output."""
    r = _registry(enabled)
    assert _stream(r, _splits(data, text)) == _stream(r, [text])


# Texts on which the stream and batch decoders agree: tokens that never put '<' right before an
# orphan-stripped token and a tag name, no tag name directly followed by '>' (<ref>, <kb>, <web>),
# no form feed, no unclosed <ref …> (the batch removes <kb>/<web> tags before scanning refs), no
# registered issue handles, and ending with a plain word, so nothing is held at the end.
_PLAIN = st.text(alphabet="acdghijlmnopqstuvxyz .,!?\n", min_size=1, max_size=6)
_SAFE_TOKENS = [
    '<ref id="c1"/>',
    '<ref id="w1"/>',
    '<REF  id = "C2" >',
    '<ref id="d1"/>',
    '<ref id="b1"/>',
    '<ref id="c9"/>',
    "<ref id='c1'/>",
    '<ref id="c1" x="1"/>',
    '<ref junk <ref id="w1"/>',
    '<kb doc="x" chunk_id="y" />',
    '<WEB url="u" />',
    "<kbd>",
    "<refx>",
    "<webby>",
    "< ref",
    "<b>",
    "</b>",
    "<x",
    "<",
    "a > b",
    "res://0001",
    "res://0002",
    "res://00012",
    "res://77",
    "res:/x",
    "res",
]
_SAFE_TEXT = st.tuples(
    st.lists(
        st.tuples(st.one_of(_PLAIN, st.sampled_from(_SAFE_TOKENS)), st.sampled_from(["", " ", "\n"])), max_size=12
    ),
    _PLAIN,
).map(lambda t: "".join(a + b for a, b in t[0]) + " " + t[1].strip() + "end")


@settings(max_examples=300)
@given(_SAFE_TEXT, st.booleans(), st.data())
def test_stream_matches_decode_output_text(text: str, enabled: bool, data: st.DataObject) -> None:
    """Any chunking of such a text, then flush(), gives exactly decode_output_text(text)."""
    r = _registry(enabled)
    assert _stream(r, _splits(data, text)) == decode_output_text(text, r)
