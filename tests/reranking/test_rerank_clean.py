"""reranking.clean_passage: §4.6.4 rules plus the seed's fence handling."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.reranking.clean import clean_passage, split_top_level_fences
from rag_lab.searchutil.text import go_trim

# --- §4.6.4 worked examples -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[![logo](https://x.com/a.png)](https://x.com)", ""),
        ("see [docs](https://a.com/b_(c)) now", "see docs now"),
        ("1) not list\n10. ten", "1) not list\nten"),
        ("a * b * c", "a  b  c"),
    ],
)
def test_spec_worked_examples(text: str, expected: str) -> None:
    assert clean_passage(text) == expected


# --- one rule at a time ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain text stays", "plain text stays"),
        ("中文内容不变", "中文内容不变"),
        ("before ![pic](img/a.png) after", "before  after"),
        ("read [the guide](https://ex.com/g) first", "read the guide first"),
        ("go to https://ex.com/p?q=1&x=2 now", "go to  now"),
        ("(see http://a.b/c) and <http://d.e>", "(see ) and"),
        ("energy $$E = mc^2$$ here", "energy E = mc^2 here"),
        ("$$\n\\int_0^1 x\\,dx\n$$", "\\int_0^1 x\\,dx"),
        ('x<br/>y<span class="k">z</span>', "xyz"),
        ("a < b > c", "a < b > c"),  # "< b" is not a tag (no letter right after "<")
        ("| h1 | h2 |\n|:---|---:|\n| v1 |  |", "h1, h2\n\nv1"),
        ("| only | row |", "only, row"),
        ("| --- | --- |", ""),
        ("# Title\n## Sub title\n####### seven", "Title\nSub title\n####### seven"),
        ("#\nnext", "next"),  # the \s+ of the heading rule eats the newline
        ("> quoted\n>also\n> > nested", "quoted\nalso\n> nested"),
        ("***all*** **bold** *it* and ****", "all bold it and **"),  # "****" -> "*" + "*" by pass 3
        ("- one\n* two\n+ three\n  12. twelve\n-no", "one\ntwo\nthree\ntwelve\n-no"),
        ("a\n\n\n\n\nb", "a\n\nb"),
        ("   \n\n   ", ""),
        ("", ""),
    ],
)
def test_rules(text: str, expected: str) -> None:
    assert clean_passage(text) == expected


def test_rule_order_linked_image_then_links() -> None:
    text = "x [![a](i.png)](https://l) [b](u) ![c](d) y"
    assert clean_passage(text) == "x  b  y"


def test_go_whitespace_class_excludes_vertical_tab() -> None:
    # RE2's \s has no \v: "#\vtitle" is not a heading marker, "#\ttitle" is.
    assert clean_passage("#\ttitle") == "title"
    assert clean_passage("x\n#\vtitle") == "x\n#\vtitle"


# --- seed refinements: top-level fences ---------------------------------------------------------------


def test_fence_body_is_kept_verbatim() -> None:
    text = 'Intro\n```xml\n<tag a="1">https://api.x.com/v1 **a** # b</tag>\n```\nAfter **bold**'
    assert clean_passage(text) == 'Intro\n<tag a="1">https://api.x.com/v1 **a** # b</tag>\nAfter bold'


def test_code_only_and_math_only_candidates_survive() -> None:
    assert clean_passage("```go\nfunc answer() int { return 42 }\n```") == "func answer() int { return 42 }"
    assert clean_passage("$$\nE = mc^2\n$$") == "E = mc^2"


def test_tilde_fence_and_info_string() -> None:
    assert clean_passage("~~~ python title\n- item [x](y)\n~~~") == "- item [x](y)"


def test_unclosed_fence_runs_to_the_end() -> None:
    assert clean_passage("text\n```py\nx = [a](b)\n\n\n\ny") == "text\nx = [a](b)\n\n\n\ny"
    assert clean_passage("```\ncode```") == "code```"  # a closing fence must be on its own line
    assert clean_passage("a\n```py") == "a"


def test_closing_fence_needs_same_char_and_length() -> None:
    assert clean_passage("````\na\n```\nb\n~~~~\n````\nc") == "a\n```\nb\n~~~~\nc"
    assert clean_passage("```\na\n   ```  \nb") == "a\nb"  # up to 3 spaces, trailing blanks ok


def test_non_top_level_fences_are_not_fences() -> None:
    assert clean_passage("use ```x``` here") == "use ```x``` here"  # inline
    assert clean_passage("para\n    ```\n    <b>x</b>\n    ```") == "para\n    ```\n    x\n    ```"  # indented
    assert clean_passage("> ```\n> <b>code</b>\n> ```") == "```\ncode\n```"  # blockquote
    assert clean_passage("- step\n  ```\n  <i>run</i>\n  ```") == "step\n  ```\n  run\n  ```"  # list


def test_fence_after_a_list_at_top_level() -> None:
    assert clean_passage("- step\n\n```\n<i>run</i>\n```") == "step\n\n<i>run</i>"


def test_latex_and_newlines_only_outside_fences() -> None:
    assert clean_passage("$$x^2$$\n```\n$$y$$\n```") == "x^2\n$$y$$"
    assert clean_passage("a\n\n\n\nb\n```\nc\n\n\n\nd\n```") == "a\n\nb\nc\n\n\n\nd"


def test_constructs_do_not_span_a_fence() -> None:
    # The image "![x" ... ")" would swallow the fence body if the body were plain text.
    text = "![x\n```\nkeep (this)\n```\n](u)"
    assert "keep (this)" in clean_passage(text)


def test_crlf_fences() -> None:
    assert clean_passage("a\r\n```go\r\nx := 1\r\n```\r\nb") == "a\r\nx := 1\r\nb"


def test_empty_fence_body() -> None:
    assert clean_passage("a\n```\n```\nb") == "a\n\nb"
    assert split_top_level_fences("a\n```\n```\nb") == (["a\n\nb"], [])


def test_split_top_level_fences() -> None:
    outside, bodies = split_top_level_fences("p\n```js\nx\ny\n```\nq\n~~~\nz")
    assert outside == ["p\n", "\nq\n", ""]
    assert bodies == ["x\ny", "z"]


# --- properties ----------------------------------------------------------------------------------------

_markdownish = st.lists(
    st.sampled_from(list("ab中 \n\t\r|#>*-+1.()[]!$`~<>/:h") + ["http://", "```", "\n```"]), max_size=60
).map("".join)


@settings(max_examples=300)
@given(_markdownish)
def test_never_raises_and_is_trimmed(text: str) -> None:
    out = clean_passage(text)
    assert out == go_trim(out)
    if "`" not in text and "~" not in text:
        assert "\n\n\n" not in out


_plain = st.text(alphabet=st.sampled_from(list("abcXYZ中文 \n")), max_size=60)


@given(_plain)
def test_plain_text_is_a_fixed_point(text: str) -> None:
    expected = go_trim(re.sub(r"\n{3,}", "\n\n", text))
    assert clean_passage(text) == expected
    assert clean_passage(expected) == expected


_body_line = st.lists(st.sampled_from(list("ab #*>|-[]()!$<>/:\t") + ["http://x.y"]), max_size=20).map("".join)


@given(st.lists(_body_line, min_size=1, max_size=5), st.sampled_from(["", "py", "json x"]))
def test_fence_body_preserved(lines: list[str], info: str) -> None:
    body = "\n".join(lines)
    assert clean_passage("```" + info + "\n" + body + "\n```") == go_trim(body)
    assert clean_passage("~~~\n" + body) == go_trim(body)  # unclosed
