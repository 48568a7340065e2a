"""Rule-based memory extraction (no model call): explicit "remember ..." statements (spec §9.1)
and the topics of a user's questions, which become their long-term interests (§4.3.6)."""

from __future__ import annotations

import re

# "remember (that) X", "please remember: X", "don't forget (that) X", "keep in mind (that) X"
_EN_REMEMBER = re.compile(
    r"^\s*(?:(?:please|pls|kindly)[\s,]+)?(?:remember|don'?t\s+forget|do\s+not\s+forget|keep\s+in\s+mind)"
    r"(?:\s+that)?\s*[,:：-]?\s+(?P<fact>\S.*)$",
    re.IGNORECASE | re.DOTALL,
)
# 记住X / 请记住：X / 帮我记一下X / 记得X
_ZH_REMEMBER = re.compile(
    r"^\s*(?:请|麻烦|帮我|请你|你)?\s*(?:记住|记一下|记下|记得)\s*[，,：:、]?\s*(?P<fact>\S.*)$", re.DOTALL
)
_TRAILING = " \t\r\n.。!！"
MIN_FACT_CHARS = 2

#: question words and verbs that say nothing about a topic (the keyword stop list already drops
#: function words)
TOPIC_STOPWORDS = frozenset(
    """about also any anything been being can could did does doing done explain find get give how
    just know like list many more most much need please really say should show something tell
    thanks thing things think use used using want way well whats where which who why would""".split()
)
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
# one-character or function-like Chinese pieces that are never topics
_ZH_STOP = frozenset(
    "什么 怎么 如何 哪些 哪个 为什么 是否 可以 一下 请问 告诉 我们 你们 他们 这个 那个 有没有 是不是 多少".split()
)


def explicit_memory(query: str) -> str | None:
    """The fact of an explicit "remember ..." request (English or Chinese), or None."""
    for pattern in (_EN_REMEMBER, _ZH_REMEMBER):
        m = pattern.match(query)
        if m:
            fact = m.group("fact").strip().rstrip(_TRAILING).strip()
            return fact if len(fact) >= MIN_FACT_CHARS else None
    return None


def query_topics(query: str) -> list[str]:
    """Distinct topic terms of a question, in reading order: keyword tokens of at least 3 letters
    (2 for Chinese words), no digits-only tokens, no question words."""
    from rag_lab.retrieval.tokenization import tokenize

    out: list[str] = []
    for tok in tokenize(query):
        if tok in out or tok in TOPIC_STOPWORDS or tok in _ZH_STOP or tok.isdigit():
            continue
        if _HAN.search(tok):
            if len(tok) < 2:
                continue
        elif len(tok) < 3:
            continue
        out.append(tok)
    return out
