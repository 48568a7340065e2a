from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_lab.types import ChatManage, PipelineRequest, needs_kb_retrieval, needs_retrieval, normalize_query_intent

CANONICAL = [
    "kb_search",
    "web_search",
    "greeting",
    "chitchat",
    "follow_up",
    "image_only",
    "doc_only",
    "summarize",
    "clarification",
]


@pytest.mark.parametrize(
    "intent,web,expected",
    [
        ("", False, True),
        ("", True, True),
        ("kb_search", False, True),
        ("clarification", True, True),
        ("summarize", False, True),  # summarize retrieves (its override is unreachable, App. B.2)
        ("web_search", True, True),
        ("web_search", False, False),
        ("greeting", True, False),
        ("chitchat", False, False),
        ("follow_up", True, False),
        ("image_only", False, False),
        ("doc_only", True, False),
        ("KB_SEARCH", False, False),
        ("foo", True, False),
    ],
)
def test_needs_retrieval_truth_table(intent, web, expected):
    chat = ChatManage(request=PipelineRequest(web_search_enabled=web))
    chat.state.intent = intent
    assert needs_retrieval(chat) is expected


def test_needs_kb_retrieval_only_four_values():
    assert {i for i in CANONICAL + [""] if needs_kb_retrieval(i)} == {"kb_search", "clarification", "summarize", ""}


@pytest.mark.parametrize(
    "raw,expected",
    [
        ("KB-Search", "kb_search"),
        ("kb search", "kb_search"),
        (" Greeting ", "greeting"),
        ('"chitchat"', "chitchat"),
        ("FOLLOW-UP", "follow_up"),
        ("web_search", "web_search"),
        ("unknown", ""),
        ("", ""),
        (None, ""),
        (3, ""),
    ],
)
def test_normalize_query_intent(raw, expected):
    assert normalize_query_intent(raw) == expected


@given(st.text())
def test_normalize_is_canonical_or_empty(s):
    assert normalize_query_intent(s) in set(CANONICAL) | {""}


@given(st.sampled_from(CANONICAL), st.sampled_from(["-", " ", "_"]))
def test_normalize_ignores_case_dash_and_space(intent, sep):
    assert normalize_query_intent(intent.upper().replace("_", sep)) == intent
