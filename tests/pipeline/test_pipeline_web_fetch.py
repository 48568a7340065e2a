"""WEB_FETCH (spec §4.7) against pages served by a loopback HTTP server, and a question that goes
web search → rerank → web fetch → merge → answer citing the page."""

from __future__ import annotations

import asyncio

import pytest

from rag_lab.pipeline.container import Services
from rag_lab.pipeline.plugin import EventManager
from rag_lab.pipeline.plugins.web_fetch import PluginWebFetch, select_web_results
from rag_lab.types.chat_manage import ChatManage, PipelineRequest
from rag_lab.types.events import EventType
from rag_lab.types.params import PipelineParams
from rag_lab.types.search_result import SearchResult
from rag_lab.web import HttpJsonSearchProvider, PageFetcher
from tests.web.loopback_site import HUGE_TEXT, serve

MARKER = "\n...(truncated)"


@pytest.fixture(scope="module")
def site():
    with serve() as s:
        yield s


def web(url: str, content: str = "snippet", source: str = "web_search") -> SearchResult:
    return SearchResult(
        id=url,
        knowledge_id=url,
        content=content,
        knowledge_source=source,
        chunk_type="web_search",
        metadata={"url": url},
        score=0.6,
    )


def kb(i: int) -> SearchResult:
    return SearchResult(id=f"chunk{i}", knowledge_id=f"doc{i}", content=f"kb text {i}", knowledge_source="")


def make_chat(results: list[SearchResult], params: PipelineParams | None = None, **req) -> ChatManage:
    p = params or PipelineParams()
    fields = {"web_search_enabled": True, "web_fetch_enabled": True, **req}
    chat = ChatManage(request=PipelineRequest.from_params(p, query="q", **fields))
    chat.state.rerank_result = list(results)
    chat.state.search_result = list(results)
    return chat


def run_stage(chat: ChatManage, fetcher=None) -> tuple[object, bool]:
    manager = EventManager()
    manager.register(PluginWebFetch(Services(web_fetcher=fetcher)))
    reached = []

    class Tail:
        def activation_events(self):
            return [EventType.WEB_FETCH]

        async def on_event(self, event, c, next):
            reached.append(True)
            return await next()

    manager.register(Tail())
    err = asyncio.run(manager.trigger(EventType.WEB_FETCH, chat))
    return err, bool(reached)


def fetcher(**kw) -> PageFetcher:
    kw.setdefault("allow_addresses", ["127.0.0.1/32"])  # the loopback test site; refused by default
    return PageFetcher(**kw)


# -- selection and gating ----------------------------------------------------------------------
def test_select_first_top_n_web_results_case_insensitively():
    results = [kb(0), web("u1", source="WEB_SEARCH"), kb(1), web("u2", source="Web_Search"), web("u3"), web("u4")]
    assert select_web_results(results, 3) == [1, 3, 4]
    assert select_web_results(results, 10) == [1, 3, 4, 5]
    assert select_web_results([kb(0)], 3) == [] and select_web_results(results, 0) == []


@pytest.mark.parametrize(("search_on", "fetch_on"), [(False, True), (True, False), (False, False)])
def test_skipped_unless_fetch_and_search_are_both_on(site, search_on, fetch_on):
    chat = make_chat([web(site.base + "/article.html")], web_search_enabled=search_on, web_fetch_enabled=fetch_on)
    n_requests = len(site.requests)
    err, reached = run_stage(chat, fetcher())
    assert err is None and reached
    assert chat.state.rerank_result[0].content == "snippet" and "web_fetch" not in chat.state.diagnostics
    assert len(site.requests) == n_requests


def test_no_rerank_result_is_a_no_op(site):
    """After a rerank error, rerank_result is empty: nothing is fetched (search_result untouched)."""
    chat = make_chat([])
    chat.state.search_result = [web(site.base + "/article.html")]
    err, reached = run_stage(chat, fetcher())
    assert err is None and reached
    assert chat.state.search_result[0].content == "snippet"
    assert chat.state.diagnostics["web_fetch"]["pages"] == []


# -- fetching ----------------------------------------------------------------------------------
def test_top_three_web_results_are_fetched_and_replaced(site):
    urls = [site.base + p for p in ("/article.html", "/comments.html", "/huge.txt", "/latin1.html")]
    chat = make_chat([kb(0), web(urls[0]), web(urls[1]), kb(1), web(urls[2]), web(urls[3])])
    err, reached = run_stage(chat, fetcher())
    assert err is None and reached
    rr = chat.state.rerank_result
    assert "07:40" in rr[1].content and "Log in" not in rr[1].content
    assert rr[2].content == "The lighthouse museum opens at ten on Sundays."
    # huge page: first 8000 bytes, the 3-byte 汉 cut after two bytes → U+FFFD, then the marker
    assert rr[4].content == "a" * 7998 + "\ufffd" + MARKER
    assert len(rr[4].content.encode("utf-8")) == 7998 + 3 + len(MARKER)
    assert rr[5].content == "snippet"  # fourth web result: beyond top_n = 3
    assert rr[0].content == "kb text 0" and rr[3].content == "kb text 1"
    assert not any(r.endswith("/latin1.html") for r in site.requests)
    # replaced items are copies: the search result keeps its snippet
    assert chat.state.search_result[1].content == "snippet" and chat.state.search_result[1] is not rr[1]
    diag = chat.state.diagnostics["web_fetch"]
    assert (diag["top_n"], diag["max_bytes"]) == (3, 8000)
    rows = {row["url"]: row for row in diag["pages"]}
    assert list(rows) == urls[:3]
    assert rows[urls[0]]["outcome"] == "replaced" and rows[urls[0]]["extractor"] == "trafilatura"
    assert rows[urls[1]]["extractor"] == "html.parser" and not rows[urls[1]]["truncated"]
    assert rows[urls[2]] | {"ms": 0} == {
        "url": urls[2],
        "rank": 4,
        "outcome": "replaced",
        "extractor": "plain",
        "bytes": len(HUGE_TEXT.encode("utf-8")),
        "truncated": True,
        "ms": 0,
    }


def test_top_n_and_byte_cap_come_from_the_request_and_params(site):
    urls = [site.base + "/huge.txt", site.base + "/article.html"]
    chat = make_chat([web(u) for u in urls], PipelineParams(web_fetch_max_bytes=100), web_fetch_top_n=1)
    run_stage(chat, fetcher())
    assert chat.state.rerank_result[0].content == "a" * 100 + MARKER
    assert chat.state.rerank_result[1].content == "snippet"
    # a request top-N <= 0 falls back to the params' value (3)
    chat = make_chat([web(site.base + f"/article.html?n={i}") for i in range(5)], web_fetch_top_n=0)
    run_stage(chat, fetcher())
    assert [r.content != "snippet" for r in chat.state.rerank_result] == [True, True, True, False, False]


def test_failures_are_logged_and_never_fail_the_stage(site, caplog):
    # the slow page answers long after the timeout, the others at once: a loaded machine can
    # neither make the slow page arrive in time nor the quick ones miss it
    urls = [site.base + p for p in ("/error500", "/slow?s=8", "/doc.pdf", "/empty.html")]
    chat = make_chat([web(u) for u in urls], web_fetch_top_n=4)
    with caplog.at_level("WARNING", logger="rag_lab.pipeline.plugins.web_fetch"):
        err, reached = run_stage(chat, fetcher(timeout_s=2))
    assert err is None and reached
    assert [r.content for r in chat.state.rerank_result] == ["snippet"] * 4
    rows = chat.state.diagnostics["web_fetch"]["pages"]
    assert [r["outcome"] for r in rows] == ["error", "error", "error", "empty"]
    # the slow page is abandoned at the fetcher's timeout
    assert "HTTP 500" in rows[0]["error"] and "timed out after 2s" in rows[1]["error"]
    assert "unsupported content type 'application/pdf'" in rows[2]["error"]
    assert sum("web_fetch:" in m for m in caplog.messages) == 3


def test_pages_are_fetched_concurrently(site):
    """Each page answers once all three requests are in flight together: fetched one after the
    other, the first would wait its full 3 s alone and the server would never see three at once."""
    site.max_in_flight = 0
    chat = make_chat([web(site.base + f"/pause?s=3&together=3&n={i}") for i in range(3)])
    run_stage(chat, fetcher(timeout_s=10))
    assert all("07:40" in r.content for r in chat.state.rerank_result)
    assert site.max_in_flight >= 3, f"at most {site.max_in_flight} page requests in flight: not fetched in parallel"


def test_other_fetchers_missing_fetcher_and_missing_url(site):
    class Plain:
        """A fetcher with only ``fetch`` (the Services contract)."""

        def __init__(self) -> None:
            self.calls: list[str] = []

        async def fetch(self, url: str) -> str:
            self.calls.append(url)
            if "bad" in url:
                raise RuntimeError("connection reset")
            return f"full text of {url}"

    placeholder = web("web_search_1")
    placeholder.metadata["url"] = ""  # a result without URL gets a placeholder id (§4.4.2)
    dup = "https://x.example/a"
    chat = make_chat([web(dup), placeholder, web("https://x.example/bad"), web(dup)], web_fetch_top_n=4)
    f = Plain()
    err, _ = run_stage(chat, f)
    assert err is None
    assert [r.content for r in chat.state.rerank_result] == [
        f"full text of {dup}",
        "snippet",
        "snippet",
        f"full text of {dup}",
    ]
    assert f.calls.count(dup) == 1  # one fetch per distinct URL
    rows = chat.state.diagnostics["web_fetch"]["pages"]
    assert [r["outcome"] for r in rows] == ["replaced", "skipped", "error", "replaced"]
    assert rows[0]["extractor"] is None and rows[2]["error"] == "RuntimeError: connection reset"

    chat = make_chat([web(site.base + "/article.html")])
    err, reached = run_stage(chat, None)
    assert err is None and reached and chat.state.rerank_result[0].content == "snippet"
    assert chat.state.diagnostics["web_fetch"]["skipped"] == "no web fetcher configured"


# -- end to end --------------------------------------------------------------------------------
def _with_web_fetch(services):
    from rag_lab.pipeline.container import build_event_manager, default_plugins

    plugins = default_plugins(services)
    plugins.insert(2, PluginWebFetch(services))  # 3rd in the container order
    return build_event_manager(services, plugins)


def test_question_answered_from_a_fetched_web_page(lab, site, monkeypatch):
    """Web search finds the ferry page (snippet without the time), rerank keeps it, WEB_FETCH
    brings the article text, and the extractive answer quotes it with a <web url=…/> citation."""
    monkeypatch.setattr("rag_lab.lab.lab.build_event_manager", _with_web_fetch)
    monkeypatch.setattr(lab.services, "web_search", HttpJsonSearchProvider(site.base, trust_env=False))
    monkeypatch.setattr(lab.services, "web_fetcher", fetcher())
    question = "At what time does the Skerry ferry leave the north pier?"
    article = site.base + "/article.html"

    run = lab.ask(question, kb="demo", params={"web_search_enabled": True, "web_fetch_enabled": True})
    assert run.error == "" and not run.is_fallback
    assert "web_fetch" in run.stages
    assert any(r.id == article for r in run.state("chunk_rerank").state.rerank_result)
    fetched = {row["url"]: row for row in run.state("web_fetch").state.diagnostics["web_fetch"]["pages"]}
    assert fetched[article]["outcome"] == "replaced"
    ref = next(r for r in run.references if r.id == article)
    assert "07:40" in ref.content
    assert "07:40" in run.answer
    assert f'<web url="{article}" title="The Skerry ferry" />' in run.answer

    # without WEB_FETCH the model only has the search snippet, which lacks the time
    run = lab.ask(question, kb="demo", params={"web_search_enabled": True, "web_fetch_enabled": False})
    assert "web_fetch" not in run.state("web_fetch").state.diagnostics
    assert all("07:40" not in r.content for r in run.references) and "07:40" not in run.answer
