"""Chinese question forms: a sentence of the chunk with the span asked for replaced by the
question word, as Chinese readers ask (the way CMRC 2018's questions are written), or a
definitional sentence asked back. Word boundaries come from jieba (precise mode), so a span never
starts or ends inside a word.

* ``definition``: "X是Y" (the sentence's subject, at most twelve characters) → "X是什么？"
  ("X是谁？" when Y ends in a word for a person), answer Y;
* ``date``: "1887年" / "1887年3月5日" → "哪一年" / "什么时候";
* ``number``: a number with its unit ("4分钟", "3,000米", "13个") → "多少分钟" / "多少米" / "多少个";
* ``agent``: "由Z开发" → "由谁开发";
* ``place``: "位于Z" → "位于哪里".

The question is the clause holding the span (parentheses dropped), with the clause before it
when it is short (under eight characters besides the span), opens with a pronoun (它、他、她、
其、该), or opens with a verb, preposition, adverb or connective (jieba's part-of-speech tags):
such a clause leans on the one before it (on the one after it when it is the first); a pronoun
opening the question is replaced by the document's title.
"""

from __future__ import annotations

import re

from rag_lab.eval.testset.forms_en import Form

__all__ = ["ZH_FORMS", "chinese_questions", "split_chinese"]

ZH_FORMS: tuple[str, ...] = ("definition", "date", "number", "agent", "place")

_SENT = re.compile(r"(?<=[。！？；!?;])|\n+")
_CLAUSE = re.compile(r"[，、：]|,(?!\d)|:(?!\d)")
_PRONOUN = re.compile(r"^(?:它们|他们|她们|它|他|她|其|该)")
#: a clause opening with a connective or preposition leans on the clause before it
_LEAD = re.compile(r"^(?:自|于|在|从|至|到|以|则|而|并|且|但|及|也|又|将|被|把|对|向|当|因|据|经|随|后|更|仍|亦|即|故)")
_PAREN = re.compile(r"（[^（）]*）|\([^()]*\)")
_DATE = re.compile(r"(?<!\d)(\d{4})年(?:(\d{1,2})月(?:(\d{1,2})日)?)?(?![代度])")
_UNITS = (
    "平方公里|平方千米|平方米|公里|千米|厘米|毫米|米|公斤|千克|吨|分钟|小时|秒|天|周|个月|岁|人|名|位|个|座|种|所|"
    "家|部|集|本|首|只|条|层|次|场|项|件|间|支|辆|架|艘|块|张|届|册|卷|章|队|国|省|市|县|村|期|倍|度|元|美元"
)
_NUMBER = re.compile(rf"(?<![\d.])(\d+(?:[.,]\d+)*)(多)?(万|亿)?({_UNITS})")
_AGENT = re.compile(
    r"由([^，。、；由]{2,12}?)(开发|执导|导演|主演|创立|创办|设计|编剧|作词|作曲|演唱|出版|发行|制作|建造|修建|"
    r"创作|撰写|编写|主持|领导|运营|经营|提出|发现|发明|成立|组建|建立)"
)
_PLACE = re.compile(r"位于([^，。；、]{2,24})")
_DEFINE = re.compile(r"^([^，。；（(]{2,12}?)(?:（[^）]*）|\([^)]*\))?是([^，。；]{3,30})(?=[，。；]|$)")
_PERSON_END = (
    "演员|歌手|作家|导演|运动员|政治家|画家|诗人|音乐家|科学家|人物|主持人|球员|教练|学者|艺术家|作曲家|"
    "企业家|军人|将领|皇帝|国王|皇后|公主|王子|官员|教授|投手|捕手|选手|领袖|总统|首相|议员|人"
)


def split_chinese(text: str) -> list[str]:
    """Sentences of ``text``: split after 。！？； (and their ASCII forms) and at line breaks."""
    return [s.strip() for s in _SENT.split(text) if s and s.strip()]


def _words(text: str) -> list[str]:
    import jieba

    return list(jieba.lcut(text))


def _on_boundaries(text: str, start: int, end: int) -> bool:
    """``text[start:end]`` begins and ends on jieba word boundaries."""
    cuts = {0}
    pos = 0
    for w in _words(text):
        pos += len(w)
        cuts.add(pos)
    return start in cuts and end in cuts


def _leans(clause: str) -> bool:
    """The clause opens with a verb, preposition, adverb or connective (jieba's part of speech, or
    a connective character): it leans on the clause before it for its subject."""
    import jieba.posseg

    if _LEAD.match(clause):
        return True
    words = jieba.posseg.lcut(clause[:12])
    return bool(words) and words[0].flag[:1] in ("v", "p", "d", "c")


def _clauses(sentence: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each clause of the sentence (split at ，、：), end punctuation left out."""
    body = sentence.rstrip("。！？；!?;")
    spans, pos = [], 0
    for m in _CLAUSE.finditer(body):
        spans.append((pos, m.start()))
        pos = m.end()
    spans.append((pos, len(body)))
    return [(a, b) for a, b in spans if b > a]


def _ask(sentence: str, start: int, end: int, word: str, title: str) -> str | None:
    """The sentence's clause holding ``[start, end)`` with the span replaced by ``word``, plus the
    clause before it when needed (module doc), as a question; None when the question would carry
    no context."""
    spans = _clauses(sentence)
    at = next((i for i, (a, b) in enumerate(spans) if a <= start and end <= b), None)
    if at is None:
        return None
    a, b = spans[at]
    if sentence[start - 1 : start] in ("（", "("):
        return None  # a gloss: "天正3年（1575年）"
    leans = (b - a) - (end - start) < 8 or _PRONOUN.match(sentence[a:b]) or _leans(sentence[a:start] or "x")
    if leans and at > 0:
        a = spans[at - 1][0]
    elif leans and at + 1 < len(spans):
        b = spans[at + 1][1]
    head, tail = _PAREN.sub("", sentence[a:start]), _PAREN.sub("", sentence[end:b])
    text = head + word + tail
    if _PRONOUN.match(text):
        if not title:
            return None
        text = _PRONOUN.sub(title, text, count=1)
    if len(text) - len(word) < 5 or not _balanced(text):
        return None
    return text.strip() + "？"


def _balanced(text: str) -> bool:
    """Brackets and quotes of ``text`` close as they open (a clause cut inside a bracket does not)."""
    pairs = (("（", "）"), ("(", ")"), ("《", "》"), ("「", "」"), ("“", "”"), ("【", "】"))
    return all(text.count(a) == text.count(b) for a, b in pairs) and text.count('"') % 2 == 0


def _title(title: str) -> str:
    return re.sub(r"（[^）]*）|\([^)]*\)", "", title).strip()


def chinese_questions(sentence: str, title: str, first: bool = False) -> list[Form]:
    """Every form's question for one Chinese ``sentence`` of a document titled ``title``, in
    :data:`ZH_FORMS` order (``first``: the sentence opens its chunk, where a definition's subject
    need not be the title)."""
    sent = sentence.strip()
    if len(sent) < 8:
        return []
    title = _title(title)
    out: list[Form] = []
    d = _DEFINE.match(sent)
    if d is not None:
        subj, desc = d.group(1).strip(), d.group(2).strip()
        if _PRONOUN.match(subj) and title:
            subj = _PRONOUN.sub(title, subj, count=1)
        about = bool(title) and (title in subj or subj in title)
        if (about or first) and not _PRONOUN.match(subj) and _on_boundaries(sent, 0, len(d.group(1))):
            wh = "谁" if re.search(rf"(?<!\d)(?:{_PERSON_END})$", desc) else "什么"
            out.append(Form(f"{subj}是{wh}？", desc, "definition"))
    for m in _DATE.finditer(sent):
        word = "哪一年" if m.group(2) is None else "什么时候"
        if (q := _ask(sent, m.start(), m.end(), word, title)) is not None:
            out.append(Form(q, m.group(), "date"))
            break
    for m in _NUMBER.finditer(sent):
        if _DATE.match(sent, m.start()):
            continue
        unit = (m.group(3) or "") + m.group(4)
        if (q := _ask(sent, m.start(), m.end(), f"多少{unit}", title)) is not None:
            out.append(Form(q, m.group(), "number"))
            break
    if (a := _AGENT.search(sent)) is not None:
        name_end = a.end(1) - (a.group(1).endswith("所"))  # "由伊恩·法兰明所创作"
        if _on_boundaries(sent, a.start(1), name_end):
            if (q := _ask(sent, a.start(1), name_end, "谁", title)) is not None:
                out.append(Form(q, sent[a.start(1) : name_end], "agent"))
    p = _PLACE.search(sent)
    if p is not None and not re.search(r"\d", p.group(1)) and any(p.end(1) == b for _, b in _clauses(sent)):
        if (q := _ask(sent, p.start(1), p.end(1), "哪里", title)) is not None:
            out.append(Form(q, p.group(1), "place"))
    return sorted(out, key=lambda f: ZH_FORMS.index(f.form))
