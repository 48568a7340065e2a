"""Web search providers: the offline folder provider and the SearXNG-style HTTP provider (over a
loopback server), the snippet window, and the ``web:`` config section."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.searchutil.conversion import convert_web_search_results
from rag_lab.types.params import PipelineParams
from rag_lab.types.search_result import MatchType
from rag_lab.web import (
    HttpJsonSearchProvider,
    LocalFolderProvider,
    PageFetcher,
    WebConfigError,
    WebSearchError,
    WebSearchProvider,
    best_snippet,
    web_services_from_config,
)
from tests.web.loopback_site import serve

FILLER = " ".join(["The harbour wall was repaired with granite blocks brought from the mainland."] * 12)


@pytest.fixture
def pages(tmp_path):
    d = tmp_path / "pages"
    (d / "sub").mkdir(parents=True)
    (d / "ferry.md").write_text(
        "---\nurl: https://skerry.example/ferry\ntitle: Skerry ferry timetable\npublished: 2024-03-01\n---\n"
        f"# Ignored heading\n\n{FILLER} The ferry leaves the north pier at 07:40 and the crossing takes "
        f"fifty-five minutes. {FILLER}\n",
        encoding="utf-8",
    )
    (d / "sub" / "lighthouse.html").write_text(
        "<html><head><title>Brightwater lighthouse</title>"
        "<link rel='canonical' href='https://lights.example/brightwater?a=1&amp;b=2'></head>"
        "<body><p>The lighthouse lamp is visible from 22 nautical miles.</p><script>ferry()</script></body></html>",
        encoding="utf-8",
    )
    (d / "notes.txt").write_text("Puffins nest on the cliffs of Skerry from April to August.", encoding="utf-8")
    (d / "mapped.md").write_text("# Tide tables\n\nHigh tide at the pier reaches four metres.", encoding="utf-8")
    (d / "zh.md").write_text("# 渡轮\n\n渡轮每天早上七点四十分从北码头出发。", encoding="utf-8")
    (d / "blank.txt").write_text("   \n", encoding="utf-8")
    (d / "image.png").write_bytes(b"\x89PNG")
    (d / "urls.json").write_text(json.dumps({"mapped.md": "https://tides.example/skerry"}), encoding="utf-8")
    return d


def search(provider, query, n=10):
    return asyncio.run(provider.search(query, max_results=n))


# -- LocalFolderProvider ---------------------------------------------------------------------
def test_folder_pages_urls_titles_and_dates(pages):
    p = LocalFolderProvider(pages)
    assert isinstance(p, WebSearchProvider)
    by_path = {pg.path: pg for pg in p.pages}
    assert sorted(by_path) == ["ferry.md", "mapped.md", "notes.txt", "sub/lighthouse.html", "zh.md"]  # blank skipped
    assert (by_path["ferry.md"].url, by_path["ferry.md"].url_from) == ("https://skerry.example/ferry", "front matter")
    assert by_path["ferry.md"].title == "Skerry ferry timetable"
    assert by_path["ferry.md"].published_at == datetime(2024, 3, 1, tzinfo=UTC)
    assert "url:" not in by_path["ferry.md"].text  # the front matter is not page text
    lh = by_path["sub/lighthouse.html"]
    assert (lh.url, lh.url_from, lh.title) == (
        "https://lights.example/brightwater?a=1&b=2",
        "canonical",
        "Brightwater lighthouse",
    )
    assert "ferry()" not in lh.text
    assert (by_path["mapped.md"].url, by_path["mapped.md"].url_from) == ("https://tides.example/skerry", "urls.json")
    assert by_path["mapped.md"].title == "Tide tables"
    notes = by_path["notes.txt"]
    assert notes.url == (pages / "notes.txt").resolve().as_uri() and notes.url_from == "file" and notes.title == "notes"


def test_folder_search_ranks_by_bm25_with_snippets(pages):
    p = LocalFolderProvider(pages, snippet_chars=120)
    got = search(p, "when does the ferry leave the north pier")
    assert [r.url for r in got][0] == "https://skerry.example/ferry"
    top = got[0]
    assert top.title == "Skerry ferry timetable" and top.source == "local_folder" and top.content == ""
    # the snippet is the window around the matching terms, not the start of the page
    assert "07:40" in top.snippet and "north pier" in top.snippet
    assert top.snippet.startswith("…") and top.snippet.endswith("…") and len(top.snippet) <= 122
    assert {r.url for r in got} >= {"https://tides.example/skerry"}  # "pier" matches the tide page too
    assert "https://lights.example/brightwater?a=1&b=2" not in {r.url for r in got}
    assert search(p, "渡轮 码头")[0].title == "渡轮"  # jieba tokenisation for Chinese
    assert search(p, "zebra unicorn") == [] and search(p, "") == [] and search(p, "the of") == []
    assert len(search(p, "pier ferry", n=1)) == 1
    assert len(search(p, "pier ferry", n=0)) == 2  # <= 0: the provider default (10)


def test_folder_results_convert_to_web_search_results(pages):
    got = search(LocalFolderProvider(pages), "lighthouse lamp")
    (r,) = convert_web_search_results(got, PipelineParams())
    assert r.id == r.knowledge_id == "https://lights.example/brightwater?a=1&b=2"
    assert r.knowledge_source == "web_search" and r.chunk_type == "web_search" and r.match_type == MatchType.WEB_SEARCH
    assert r.score == 0.6 and r.content.startswith("Brightwater lighthouse\n\nThe lighthouse lamp")


def test_folder_refresh_sees_new_pages(pages):
    p = LocalFolderProvider(pages)
    assert search(p, "gannets") == []
    (pages / "gannets.txt").write_text("Gannets dive from thirty metres.", encoding="utf-8")
    assert search(p, "gannets") == []  # scanned once
    assert p.refresh() == 6
    assert search(p, "gannets")[0].title == "gannets"


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda d: (d / "urls.json").write_text('{"nope.md": "https://x.example"}'), r"'nope.md' is not a page of"),
        (lambda d: (d / "urls.json").write_text('["a"]'), r"urls.json: expected a JSON object"),
        (lambda d: (d / "urls.json").write_text('{"a.md": "mailto:x@y"}'), r"url='mailto:x@y' must be an http"),
        (lambda d: (d / "b.md").write_text("---\n- a\n- b\n---\nbody"), r"b.md: front matter must be a mapping"),
        (lambda d: (d / "b.md").write_text("---\nlink: x\n---\nbody"), r"b.md: unknown front matter key\(s\) link"),
        (lambda d: (d / "b.md").write_text("---\npublished: soon\n---\nbody"), r"published='soon' is not an ISO"),
        (lambda d: (d / "b.md").write_bytes(b"\xff\xfe bad"), r"b.md: not valid UTF-8"),
        (lambda d: (d / "b.md").write_text("---\nurl: https://x.example/a\n---\nother page"), r"have the same url"),
    ],
)
def test_folder_bad_input_names_the_file(tmp_path, setup, message):
    d = tmp_path / "site"
    d.mkdir()
    (d / "a.md").write_text("---\nurl: https://x.example/a\n---\nA page.", encoding="utf-8")
    setup(d)
    with pytest.raises(WebSearchError, match=message):
        LocalFolderProvider(d).refresh()


def test_folder_must_exist(tmp_path):
    with pytest.raises(WebSearchError, match="web page folder not found"):
        LocalFolderProvider(tmp_path / "nope")


# -- snippets --------------------------------------------------------------------------------
def test_snippet_window_examples():
    text = "alpha " * 50 + "the ferry leaves the north pier at dawn " + "omega " * 50
    s = best_snippet(text, ["ferry", "pier"], 60)
    assert s.startswith("…") and s.endswith("…") and "ferry leaves the north pier" in s
    assert best_snippet("short text", ["x"], 60) == "short text"
    assert best_snippet("a  b\n\nc", [], 60) == "a b c"
    head = best_snippet("word " * 100, ["absent"], 23)
    assert head == "word word word word…"
    # whole words only for Latin terms ("art" is not in "start"), anywhere for Han terms
    assert "art" in best_snippet("start " * 40 + "art " + "end " * 40, ["art"], 20).replace("start", "")
    assert "码头" in best_snippet("一" * 200 + "北码头" + "二" * 200, ["码头"], 30)
    with pytest.raises(ValueError, match="max_chars=0"):
        best_snippet("x", [], 0)


words = st.sampled_from(["ferry", "pier", "tide", "north", "dawn", "gull", "rock", "sea", "x", "quay"])


@settings(max_examples=150)
@given(
    text_words=st.lists(words, min_size=0, max_size=120),
    terms=st.lists(words, max_size=4),
    max_chars=st.integers(10, 120),
)
def test_snippet_properties(text_words, terms, max_chars):
    text = " ".join(text_words)
    s = best_snippet(text, terms, max_chars)
    core = s.removeprefix("…").removesuffix("…")
    assert len(core) <= max_chars
    assert core in text  # a contiguous piece of the (whitespace-collapsed) text
    if len(text) <= max_chars:
        assert s == text
    present = [t for t in terms if re.search(rf"\b{t}\b", text)]
    if present:
        assert any(re.search(rf"\b{t}\b", core) for t in present)


# -- HttpJsonSearchProvider ------------------------------------------------------------------
@pytest.fixture(scope="module")
def site():
    with serve() as s:
        yield s


def test_searxng_results_are_parsed(site):
    p = HttpJsonSearchProvider(site.base, params={"language": "en"}, trust_env=False)
    got = search(p, "skerry ferry")
    assert [r.title for r in got] == ["The Skerry ferry", "Tide tables", "No date format"]
    first = got[0]
    assert first.url == site.base + "/article.html" and first.snippet == "Timetable of the island ferry."
    assert first.published_at == datetime(2024, 3, 1, 8, 0) and first.source == "duckduckgo"
    assert got[1].published_at is None and got[2].published_at is None  # null and unparsable dates
    assert got[2].source == "bing, brave"
    assert len(search(p, "skerry ferry", n=2)) == 2
    req = site.requests[-1]
    assert req.startswith("/search?") and "q=skerry+ferry" in req and "format=json" in req and "language=en" in req
    (r, *_) = convert_web_search_results(got, PipelineParams())
    assert r.metadata["published_at"] == "2024-03-01T08:00:00" and r.metadata["source"] == "duckduckgo"


@pytest.mark.parametrize(
    ("query", "kwargs", "message"),
    [
        ("boom", {}, r"/search\?q=boom&format=json: HTTP 500 Internal Server Error$"),
        ("html please", {}, r"response is not JSON \(content-type text/html\)"),
        ("no results field", {}, r"field 'results' is missing or not a list"),
        ("slow", {"timeout_s": 0.3}, r"/search\?q=slow&format=json: timed out after 0.3s"),
    ],
)
def test_searxng_failures_name_the_url_and_status(site, query, kwargs, message):
    p = HttpJsonSearchProvider(site.base, trust_env=False, **kwargs)
    with pytest.raises(WebSearchError, match=message) as info:
        search(p, query)
    assert site.base in str(info.value)


def test_searxng_without_json_format_gets_a_hint(site):
    """SearXNG answers 403 when the json format is not enabled in its settings."""
    site.routes["/search-no-json"] = lambda h, q: site.send(h, 403, "text/html", b"Forbidden")
    p = HttpJsonSearchProvider(site.base, path="search-no-json", trust_env=False)
    with pytest.raises(WebSearchError, match=r"search-no-json\?q=x&format=json: HTTP 403 Forbidden \(for SearXNG"):
        search(p, "x")


def test_searxng_unreachable_and_bad_settings():
    p = HttpJsonSearchProvider("http://127.0.0.1:9", timeout_s=2, trust_env=False)
    with pytest.raises(WebSearchError, match=r"web search http://127.0.0.1:9/search\?q=a&format=json: ConnectError"):
        search(p, "a")
    with pytest.raises(WebSearchError, match="base_url='ftp://x' must be an http"):
        HttpJsonSearchProvider("ftp://x")
    with pytest.raises(WebSearchError, match="timeout_s=0"):
        HttpJsonSearchProvider("http://x", timeout_s=0)


# -- config ----------------------------------------------------------------------------------
def test_web_section_builds_provider_and_fetcher(pages, site):
    provider, fetcher = web_services_from_config(
        {
            "search": {"type": "local_folder", "folder": pages.name, "snippet_chars": 80},
            "fetch": {"timeout_s": 3, "allow_file": True, "extractor": "html.parser"},
        },
        base_dir=pages.parent,
    )
    assert isinstance(provider, LocalFolderProvider) and provider.snippet_chars == 80
    assert isinstance(fetcher, PageFetcher) and fetcher.allow_file and fetcher.extractor == "html.parser"
    provider, fetcher = web_services_from_config({"search": {"type": "searxng", "base_url": site.base}})
    assert isinstance(provider, HttpJsonSearchProvider) and fetcher is None
    assert web_services_from_config(None) == (None, None)
    _, fetcher = web_services_from_config({"fetch": None})
    assert isinstance(fetcher, PageFetcher) and fetcher.timeout_s == 10


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        ({"serch": {}}, r"web: unknown key\(s\) serch; allowed: fetch, search"),
        ({"search": {"type": "google"}}, r"web.search.type='google' must be one of local_folder, searxng, http_json"),
        ({"search": {"type": "searxng"}}, r"web.search.base_url is required"),
        ({"search": {"type": "local_folder"}}, r"web.search.folder is required"),
        ({"search": {"type": "local_folder", "folder": "/nonexistent/x"}}, r"web.search: /nonexistent/x: web page"),
        ({"search": {"type": "searxng", "base_url": "http://x", "engine": "a"}}, r"unknown key\(s\) engine"),
        ({"fetch": {"timeout": 3}}, r"web.fetch: unknown key\(s\) timeout"),
        ({"fetch": {"extractor": "bs4"}}, r"web.fetch: PageFetcher extractor='bs4'"),
        ({"fetch": []}, r"web.fetch: expected a mapping, got list"),
    ],
)
def test_web_section_errors_name_the_key(cfg, message):
    with pytest.raises(WebConfigError, match=message):
        web_services_from_config(cfg)
