"""PageFetcher over a real loopback HTTP server, and the UTF-8 truncation rule of §4.7."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.web.fetch import (
    FetchError,
    PageFetcher,
    declared_charset,
    extract_main_text,
    media_type,
    stdlib_html_text,
    truncate_utf8,
)
from tests.web.loopback_site import HUGE_TEXT, serve


@pytest.fixture(scope="module")
def site():
    with serve() as s:
        yield s


def fetch(url: str, **kw):
    kw.setdefault("allow_addresses", ["127.0.0.1/32"])  # the loopback test site; refused by default
    return asyncio.run(PageFetcher(**kw).fetch_page(url))


# -- truncation (§4.7 step 5) ------------------------------------------------------------------
def test_truncate_cuts_utf8_bytes_and_marks_a_split_character():
    assert truncate_utf8("a" * 8000, 8000) == ("a" * 8000, False)  # exactly 8000 bytes: kept
    assert truncate_utf8("a" * 8001, 8000) == ("a" * 8000 + "\n...(truncated)", True)
    # byte 8000 falls inside 汉 (3 bytes): the two bytes kept decode to one U+FFFD
    assert truncate_utf8("a" * 7998 + "汉字", 8000) == ("a" * 7998 + "\ufffd\n...(truncated)", True)
    # a cut right after a whole character leaves no replacement character
    assert truncate_utf8("a" * 7997 + "汉字", 8000) == ("a" * 7997 + "汉\n...(truncated)", True)
    assert truncate_utf8("é" * 5, 3, marker="…") == ("é\ufffd…", True)
    with pytest.raises(ValueError, match="max_bytes=-1"):
        truncate_utf8("x", -1)


@settings(max_examples=200)
@given(text=st.text(max_size=200), max_bytes=st.integers(0, 300))
def test_truncate_properties(text, max_bytes):
    out, cut = truncate_utf8(text, max_bytes)
    raw = text.encode("utf-8")
    assert cut == (len(raw) > max_bytes)
    if not cut:
        assert out == text
        return
    body = out[: -len("\n...(truncated)")]
    assert out.endswith("\n...(truncated)")
    # the kept part is the byte prefix, with at most one trailing replacement character
    clean = body[:-1] if body.endswith("\ufffd") and not text.startswith(body) else body
    assert text.startswith(clean)
    assert len(clean.encode("utf-8")) <= max_bytes
    assert len(body.encode("utf-8")) <= max_bytes + 2


# -- helpers -----------------------------------------------------------------------------------
def test_media_type_and_charset_detection():
    assert media_type("Text/HTML; charset=UTF-8") == "text/html" and media_type(None) == ""
    assert declared_charset("text/html; charset=ISO-8859-1", b"") == "iso8859-1"
    assert declared_charset("text/html; charset=nonsense", b'<meta charset="windows-1252">') == "cp1252"
    assert declared_charset("text/html", b"\xef\xbb\xbf<p>") == "utf-8-sig"
    assert declared_charset("", b"<html>") == "utf-8"


def test_extractors_trafilatura_main_text_and_stdlib_fallback():
    from tests.web.loopback_site import ARTICLE, COMMENTS_ONLY

    text, used = extract_main_text(ARTICLE, "http://x/article.html")
    assert used == "trafilatura"
    assert "07:40" in text and "Aberlady" in text
    assert "Log in" not in text and "Cookie settings" not in text  # boilerplate removed
    # trafilatura finds nothing in a comments-only page: the stdlib parser does
    text, used = extract_main_text(COMMENTS_ONLY)
    assert used == "html.parser" and text == "The lighthouse museum opens at ten on Sundays."
    text, used = extract_main_text(ARTICLE, extractor="html.parser")
    assert used == "html.parser" and "Log in" in text  # the plain parser keeps navigation
    assert stdlib_html_text("<html><head><title>Only a title</title></head><body></body></html>") == "Only a title"
    with pytest.raises(ValueError, match="extractor='lxml'"):
        extract_main_text("<p>x</p>", extractor="lxml")


# -- over loopback -----------------------------------------------------------------------------
def test_fetches_an_article_and_reports_the_extractor(site):
    page = fetch(site.base + "/article.html")
    assert page.status == 200 and page.content_type == "text/html" and page.extractor == "trafilatura"
    assert "fifty-five minutes" in page.text and "Shop" not in page.text
    assert page.final_url == site.base + "/article.html" and not page.download_truncated
    assert any(r == "/article.html" for r in site.requests)


def test_fallback_extractor_plain_text_charset_and_redirect(site):
    page = fetch(site.base + "/comments.html")
    assert (page.extractor, page.text) == ("html.parser", "The lighthouse museum opens at ten on Sundays.")
    page = fetch(site.base + "/huge.txt")
    assert page.extractor == "plain" and page.text == HUGE_TEXT
    page = fetch(site.base + "/latin1.html")
    assert "Le café du port ouvre à sept heures." in page.text
    page = fetch(site.base + "/redirect")
    assert page.final_url == site.base + "/article.html" and "07:40" in page.text
    page = fetch(site.base + "/no-type")  # no Content-Type: sniffed as markup
    assert page.content_type == "" and "puffins" in page.text


def test_download_is_capped(site):
    page = fetch(site.base + "/huge.txt", max_download_bytes=1000)
    assert page.bytes_read == 1000 and page.download_truncated and page.text == "a" * 1000
    page = fetch(site.base + "/article.html", max_download_bytes=10_000_000)
    assert not page.download_truncated


@pytest.mark.parametrize(
    ("path", "kwargs", "message"),
    [
        ("/error500", {}, "HTTP 500 Internal Server Error"),
        ("/missing", {}, "HTTP 404 Not Found"),
        ("/doc.pdf", {}, "unsupported content type 'application/pdf'"),
        ("/redirect", {"max_redirects": 0}, "more than 0 redirects"),
    ],
)
def test_http_failures_name_the_url_and_the_cause(site, path, kwargs, message):
    with pytest.raises(FetchError, match=message) as info:
        fetch(site.base + path, **kwargs)
    assert info.value.url == site.base + path and site.base + path in str(info.value)


def test_timeouts_cover_slow_headers_and_a_trickling_body(site):
    # the message comes from the whole-download limit only: a trickle of quick reads is cut too
    for path in ("/slow", "/trickle"):
        with pytest.raises(FetchError, match=r"timed out after 0.4s"):
            fetch(site.base + path, timeout_s=0.4)


def test_schemes(tmp_path, site):
    page_file = tmp_path / "saved.html"
    page_file.write_text("<html><body><article><p>Saved page about gannets.</p></article></body></html>")
    with pytest.raises(FetchError, match=r"file:// URLs are not allowed \(PageFetcher\(file_root=FOLDER\)"):
        fetch(page_file.as_uri())
    assert "gannets" in fetch(page_file.as_uri(), file_root=tmp_path).text
    with pytest.raises(FetchError, match="unsupported file type '.pdf'"):
        fetch((tmp_path / "x.pdf").as_uri(), file_root=tmp_path)
    with pytest.raises(FetchError, match="cannot read"):
        fetch((tmp_path / "gone.html").as_uri(), file_root=tmp_path)
    with pytest.raises(FetchError, match=r"scheme 'ftp' is not allowed \(allowed: http, https\)"):
        fetch("ftp://example.org/a.html")
    with pytest.raises(FetchError, match="scheme '\\(none\\)'"):
        fetch("example.org/a.html")
    with pytest.raises(FetchError, match="empty URL"):
        fetch("")


def test_fetch_returns_the_text_and_settings_are_checked(site):
    assert "07:40" in asyncio.run(PageFetcher(allow_addresses=["127.0.0.1/32"]).fetch(site.base + "/article.html"))
    for bad, msg in (
        ({"timeout_s": 0}, "timeout_s=0"),
        ({"max_download_bytes": 0}, "max_download_bytes=0"),
        ({"extractor": "bs4"}, "extractor='bs4'"),
    ):
        with pytest.raises(ValueError, match=msg):
            PageFetcher(**bad)
