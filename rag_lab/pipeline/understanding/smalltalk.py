"""The offline small-talk detector: labels clear greetings and small talk (English and Chinese)
``greeting`` / ``chitchat`` by rules, for models that cannot follow instructions."""

from __future__ import annotations

import unicodedata

from rag_lab.types.intent import QueryIntent

_EN_GREETING = """hi|hello|hey|heya|hiya|howdy|greetings|yo|hallo|good morning|good afternoon|good evening|
good day|morning|evening|nice to meet you|pleased to meet you|long time no see"""
_EN_CHITCHAT = """thanks|thank you|thankyou|thx|ty|many thanks|thanks a lot|thanks so much|thank you very much|
thank you so much|much appreciated|appreciate it|cheers|bye|goodbye|good bye|bye bye|see you|see you later|
see ya|good night|take care|ok|okay|k|cool|great|nice|awesome|perfect|got it|sounds good|alright|all right|
sure|no problem|np|lol|haha|hahaha|how are you|how are you doing|how is it going|hows it going|how's it going|
what's up|whats up|sup|how do you do|who are you|what are you|what is your name|what's your name|whats your name|
are you a bot|are you there|you are welcome|you're welcome|welcome|well done|good job|i see"""
_EN_SUFFIX = (
    "there|all|everyone|everybody|folks|guys|team|friend|buddy|bot|assistant|again|mate|man|so much|a lot|very much"
)
_ZH_GREETING = "你好|您好|你们好|大家好|嗨|哈喽|哈啰|喂|早|早上好|早安|上午好|中午好|下午好|晚上好|在吗|在不在|很高兴认识你|初次见面"
_ZH_CHITCHAT = """谢谢|谢谢你|谢谢您|多谢|感谢|非常感谢|太感谢了|谢了|辛苦了|再见|拜拜|回头见|晚安|好的|好|嗯|嗯嗯|哦|明白了|
知道了|收到|没问题|哈哈|哈哈哈|你好吗|最近怎么样|你是谁|你叫什么名字|你是机器人吗|不客气|太棒了|厉害|棒"""
_ZH_PARTICLES = "啊呀哦呢吗哈啦嘛哟喔~～"
_SMALLTALK_MAX_CHARS = 80


def _phrases(spec: str) -> list[str]:
    return [p.strip() for p in spec.replace("\n", "").split("|") if p.strip()]


_LEXICON = sorted(
    [(p, QueryIntent.GREETING.value) for p in _phrases(_EN_GREETING) + _phrases(_ZH_GREETING)]
    + [(p, QueryIntent.CHITCHAT.value) for p in _phrases(_EN_CHITCHAT) + _phrases(_ZH_CHITCHAT)],
    key=lambda t: -len(t[0]),
)
_SUFFIXES = sorted(_phrases(_EN_SUFFIX), key=len, reverse=True)


def _is_separator(ch: str) -> bool:
    return ch.isspace() or unicodedata.category(ch)[0] in "PSZC"


def _word_end(text: str, end: int) -> bool:
    """True when ``end`` does not cut a Latin word (Chinese needs no boundary)."""
    return end >= len(text) or not (text[end].isascii() and text[end].isalnum()) or not text[end - 1].isascii()


def detect_smalltalk(text: str) -> str:
    """``"greeting"``, ``"chitchat"`` or ``""`` for a user message, by rules (no model).

    The whole message must be made of greeting / thanks / small-talk phrases (English or
    Chinese), with punctuation, emoji, an addressee ("hi there", "thanks bot") or Chinese
    sentence particles ("你好呀") around them; anything else, however short, is left to retrieval
    (``""``). A message with at least one greeting is a greeting; otherwise it is chitchat.
    """
    t = unicodedata.normalize("NFKC", text).lower().replace("’", "'").strip()
    if not t or len(t) > _SMALLTALK_MAX_CHARS:
        return ""
    i, n, labels = 0, len(t), []
    while True:
        while i < n and _is_separator(t[i]):
            i += 1
        if i >= n:
            break
        for phrase, label in _LEXICON:
            end = i + len(phrase)
            if t.startswith(phrase, i) and _word_end(t, end):
                labels.append(label)
                i = end
                break
        else:
            return ""
        # what may follow a phrase: an addressee ("hi there") or Chinese particles ("谢谢啦")
        j = i
        while j < n and t[j] == " ":
            j += 1
        for suffix in _SUFFIXES:
            if t.startswith(suffix, j) and _word_end(t, j + len(suffix)) and j > i:
                i = j + len(suffix)
                break
        while i < n and t[i] in _ZH_PARTICLES:
            i += 1
    if not labels:
        return ""
    return QueryIntent.GREETING.value if QueryIntent.GREETING.value in labels else QueryIntent.CHITCHAT.value
