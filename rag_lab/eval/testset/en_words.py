"""The words and patterns the English question forms (:mod:`.forms_en`) read sentences with."""

from __future__ import annotations

__all__ = [
    "ABOUT",
    "AGENT",
    "AREA_UNITS",
    "DATE",
    "FUNCTION_WORDS",
    "HAVE",
    "LENGTH_UNITS",
    "MEASURE_CUES",
    "NAME",
    "NUM",
    "PERSON",
    "RANKED",
    "WHEN_ACTIVE",
    "WHEN_PART",
    "WORDNUM",
]

NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_MONTH = r"(?:January|February|March|April|May|June|July|August|September|October|November|December)"
_YEAR = r"(?:1\d{3}|20\d{2})"
#: "3 May 1950", "May 3, 1950", "May 1950", "1950"
_WEEKDAY = r"(?:(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday),?\s+)?"
DATE = (
    rf"{_WEEKDAY}(?:\d{{1,2}}\s+{_MONTH}\s+{_YEAR}|{_MONTH}\s+\d{{1,2}},\s*{_YEAR}|{_MONTH}\s+{_YEAR}|{_YEAR})(?![\d,])"
)
_NAME_WORD = r"[A-Z][\w'.-]*"
#: a capitalised name of up to six words ("Mara Vell", "Glasgow and West of Scotland")
NAME = rf"{_NAME_WORD}(?:\s+(?:(?:de|da|van|von|der|del|la|le|of|the|and)\s+)?{_NAME_WORD}){{0,5}}(?:\s\d+\b)?"
WORDNUM = "two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen twenty".split()
ABOUT = r"(?:(?:about|around|over|nearly|approximately|almost|some|more than|roughly)\s+)?"
LENGTH_UNITS = r"metres|meters|m|km|kilometres|kilometers|miles|mi|feet|ft|foot|yards"
AREA_UNITS = r"square (?:kilometres|kilometers|miles|metres|meters|feet)|km2|km²|sq mi|acres|hectares"
#: (adjective of "How … is X?", a cue near the measure that asks for it)
MEASURE_CUES: tuple[tuple[str, str], ...] = (
    ("tall", r"\b(?:tall|height)\b"),
    ("high", r"\b(?:high|elevation|altitude|above sea level)\b"),
    ("long", r"\b(?:long|length)\b"),
    ("deep", r"\b(?:deep|depth)\b"),
    ("wide", r"\b(?:wide|width)\b"),
)
#: words that may follow a name without being part of it ("by Mara Vell in 1904")
FUNCTION_WORDS = frozenset(
    "and in on at for from with of the a an as who which that during between to under after before while until "
    "since by or but is was are were has had have".split()
)
#: head nouns that make "Who is X?" rather than "What is X?"
PERSON = frozenset(
    "actor actress singer songwriter player politician writer author director producer musician artist poet "
    "novelist footballer composer rapper comedian journalist businessman businesswoman entrepreneur scientist "
    "philosopher painter architect engineer lawyer judge officer king queen prince princess emperor bishop priest "
    "monk saint coach manager boxer wrestler cricketer athlete model dancer presenter screenwriter guitarist "
    "drummer bassist vocalist historian economist physicist chemist mathematician biologist inventor explorer "
    "activist diplomat soldier pilot astronaut chef designer photographer filmmaker lyricist teacher professor "
    "nun cinematographer founder leader president minister man woman person pianist conductor sculptor illustrator "
    "cartoonist critic broadcaster commander governor senator mayor statesman theologian physician surgeon "
    "legislator lawmaker peer baron earl duke lord lady knight general admiral personality host entertainer "
    "performer official executive chairman ceo co-founder daughter son wife husband mother father".split()
)
#: second words of a "the …" description that make it name one thing ("the first", "the largest")
RANKED = frozenset(
    "first second third fourth fifth sixth seventh eighth ninth tenth last only largest smallest oldest "
    "youngest longest highest tallest biggest most least main principal earliest latest best".split()
)
#: a participle before "by" → (its active past tense, its base form)
AGENT: dict[str, tuple[str, str]] = {
    "written": ("wrote", "write"),
    "co-written": ("co-wrote", "co-write"),
    "drawn": ("drew", "draw"),
    "sung": ("sang", "sing"),
    "run": ("ran", "run"),
    "led": ("led", "lead"),
    "made": ("made", "make"),
    "built": ("built", "build"),
    **{
        past: (past, base)
        for past, base in (
            pair.split(":")
            for pair in (
                "directed:direct produced:produce created:create founded:found co-founded:co-found designed:design "
                "developed:develop published:publish composed:compose performed:perform recorded:record "
                "invented:invent discovered:discover established:establish owned:own illustrated:illustrate "
                "edited:edit hosted:host presented:present narrated:narrate voiced:voice painted:paint "
                "coached:coach managed:manage commissioned:commission played:play portrayed:portray "
                "authored:author translated:translate acquired:acquire operated:operate formed:form headed:head "
                "engineered:engineer sculpted:sculpt organized:organize organised:organise sponsored:sponsor"
            ).split()
        )
    },
}
#: participles that "X was … in DATE" asks "When was X …?" about
WHEN_PART = (
    "founded established released published built opened formed created launched completed discovered elected "
    "appointed inaugurated incorporated introduced signed married killed assassinated executed crowned ordained "
    "awarded renamed demolished destroyed closed abolished dissolved constructed erected consecrated premiered "
    "broadcast aired recorded written composed painted produced directed held fought ratified adopted enacted "
    "discontinued cancelled canceled acquired sold purchased drafted inducted named"
).split()
#: an active past verb before "in/on DATE" → (its base form, whether it needs an object)
WHEN_ACTIVE: dict[str, tuple[str, bool]] = {
    past: (base, need == "obj")
    for past, base, need in (
        triple.split(":")
        for triple in (
            "died:die:- retired:retire:- debuted:debut:- graduated:graduate:- premiered:premiere:- "
            "emigrated:emigrate:- resigned:resign:- returned:return:- moved:move:obj joined:join:obj "
            "began:begin:obj started:start:obj ended:end:obj won:win:obj released:release:obj formed:form:obj "
            "founded:found:obj married:marry:obj opened:open:- closed:close:- left:leave:obj signed:sign:obj "
            "published:publish:obj wrote:write:obj became:become:obj received:receive:obj launched:launch:obj "
            "established:establish:obj built:build:obj created:create:obj acquired:acquire:obj "
            "completed:complete:obj discovered:discover:obj invented:invent:obj recorded:record:obj"
        ).split()
    )
}
#: a verb of having → the auxiliary of "How many … does X have?"
HAVE: dict[str, str] = {
    "has": "does",
    "have": "do",
    "had": "did",
    "contains": "does",
    "contained": "did",
    "includes": "does",
    "included": "did",
    "comprises": "does",
    "comprised": "did",
    "features": "does",
    "featured": "did",
}
