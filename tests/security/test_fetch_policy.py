"""Finding 4 (SSRF): the page fetcher follows URLs found in data. Each case below runs against a
real loopback web server that the default policy must refuse to reach (its request log proves
nothing arrived), and an explicit test-only allowance proves the allowed path still works."""

from __future__ import annotations

import asyncio
import ipaddress
from urllib.parse import quote

import pytest

from rag_lab.web import web_services_from_config
from rag_lab.web.fetch import FetchError, PageFetcher
from rag_lab.web.policy import FetchPolicy, PolicyError, address_class
from tests.web.loopback_site import serve

LOOPBACK_ONLY = ["127.0.0.1/32"]


@pytest.fixture(scope="module")
def site():
    with serve() as s:
        yield s


def fetch(url: str, **kw):
    return asyncio.run(PageFetcher(**kw).fetch_page(url))


def refused(url: str, site, match: str, **kw) -> None:
    before = list(site.requests)
    with pytest.raises(FetchError, match=match):
        fetch(url, **kw)
    assert site.requests == before, "a refused URL must not reach the server"


def test_loopback_in_every_spelling_is_refused_before_any_request(site):
    port = site.base.rsplit(":", 1)[1]
    for host in (
        "127.0.0.1",
        "localhost",
        "2130706433",  # decimal
        "0x7f000001",  # hex
        "127.1",  # short form
        "[::ffff:127.0.0.1]",  # IPv4-mapped
        "[::ffff:7f00:1]",
        "[::1]",
    ):
        refused(f"http://{host}:{port}/article.html", site, r"loopback.*only public addresses are fetched")
    refused(f"http://0177.0.0.1:{port}/article.html", site, r"invalid URL: Invalid IPv4 address")  # octal


@pytest.mark.parametrize(
    "host, why",
    [
        ("169.254.169.254", "link-local"),  # cloud metadata
        ("10.0.0.5", "private"),
        ("192.168.1.1", "private"),
        ("172.16.0.1", "private"),
        ("100.64.0.1", "not globally routable"),  # carrier-grade NAT
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("0.0.0.0", "unspecified"),
        ("[fd00::1]", "private"),
        ("[fe80::1]", "link-local"),
        ("[::ffff:169.254.169.254]", "link-local"),
        ("[64:ff9b::a00:5]", "private"),  # NAT64 of 10.0.0.5
        ("[2002:a00:5::]", "private"),  # 6to4 of 10.0.0.5
    ],
)
def test_non_public_ranges_are_refused(host, why):
    with pytest.raises(FetchError, match=f"is {why}"):
        fetch(f"http://{host}/latest/meta-data/")


def test_redirects_are_checked_hop_by_hop(site):
    port = site.base.rsplit(":", 1)[1]
    # the first hop is allowed (the test's own server), the redirect target is not
    for target in (f"http://127.0.0.2:{port}/article.html", "http://169.254.169.254/", f"http://0x7f000002:{port}/"):
        with pytest.raises(FetchError, match=r"redirect to .* only public addresses"):
            fetch(f"{site.base}/goto?to={quote(target, safe='')}", allow_addresses=LOOPBACK_ONLY)
    with pytest.raises(FetchError, match=r"redirect to 'file://[^']*/etc/passwd': scheme 'file' is not allowed"):
        fetch(f"{site.base}/goto?to={quote('file:///etc/passwd', safe='')}", allow_addresses=LOOPBACK_ONLY)
    page = fetch(f"{site.base}/redirect", allow_addresses=LOOPBACK_ONLY)  # an allowed redirect still works
    assert "07:40" in page.text and page.final_url.endswith("/article.html")


def test_the_connected_address_is_checked_not_only_the_name(site, monkeypatch):
    """DNS rebinding: the name is public when checked, loopback when the client connects."""
    import rag_lab.web.policy as policy

    calls: list[str] = []

    async def rebinding(host, port):
        calls.append(host)
        if len(calls) == 1:
            return [ipaddress.ip_address("93.184.216.34")]
        return [ipaddress.ip_address("127.0.0.1")]

    monkeypatch.setattr(policy, "resolve_host", rebinding)
    port = site.base.rsplit(":", 1)[1]
    refused(f"http://rebind.example:{port}/article.html", site, r"rebind.example → 127.0.0.1 is loopback")
    assert calls == ["rebind.example", "rebind.example"]  # checked again at connect


def test_the_allowance_lets_named_networks_through_and_connects_to_the_checked_address(site, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # ignored: connections are direct
    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")
    fetcher = PageFetcher(allow_addresses=LOOPBACK_ONLY)
    port = site.base.rsplit(":", 1)[1]
    page = asyncio.run(fetcher.fetch_page(f"http://localhost:{port}/article.html"))
    assert "07:40" in page.text
    assert fetcher.backend.connected == [("localhost", "127.0.0.1")]
    refused(f"http://127.0.0.3:{port}/article.html", site, "loopback", allow_addresses=LOOPBACK_ONLY)


def test_file_urls_only_under_the_configured_root(tmp_path):
    root = tmp_path / "pages"
    root.mkdir()
    (root / "ok.html").write_text("<html><body><article><p>Gannets nest on cliffs.</p></article></body></html>")
    secret = tmp_path / "secret.txt"
    secret.write_text("root password: hunter2")
    (root / "link.txt").symlink_to(secret)
    assert "Gannets" in fetch((root / "ok.html").as_uri(), file_root=root).text
    for url in (secret.as_uri(), (root / "link.txt").as_uri(), f"file://{root}/../secret.txt", "file:///etc/passwd"):
        with pytest.raises(FetchError, match="is outside the allowed folder"):
            fetch(url, file_root=root)
    with pytest.raises(FetchError, match="file:// URLs are not allowed"):
        fetch((root / "ok.html").as_uri())
    with pytest.raises(ValueError, match="allow_file=True needs file_root"):
        PageFetcher(allow_file=True)


def test_config_confines_file_urls_to_the_local_search_folder(tmp_path):
    pages = tmp_path / "web_pages"
    pages.mkdir()
    (pages / "a.md").write_text("# Puffins\n\nPuffins dive for sand eels.")
    (tmp_path / "private.txt").write_text("salary table")
    _, fetcher = web_services_from_config(
        {"search": {"type": "local_folder", "folder": str(pages)}, "fetch": {"allow_file": True}}
    )
    assert fetcher.policy.file_root == pages.resolve()
    assert "sand eels" in asyncio.run(fetcher.fetch((pages / "a.md").as_uri()))
    with pytest.raises(FetchError, match="outside the allowed folder"):
        asyncio.run(fetcher.fetch((tmp_path / "private.txt").as_uri()))
    with pytest.raises(ValueError, match="not an IP network"):
        web_services_from_config({"fetch": {"allow_addresses": ["not-a-net"]}})


def test_size_and_time_caps_hold_under_the_policy(site):
    page = fetch(f"{site.base}/huge.txt", allow_addresses=LOOPBACK_ONLY, max_download_bytes=1000)
    assert page.bytes_read == 1000 and page.download_truncated
    with pytest.raises(FetchError, match="timed out after 0.5s"):
        fetch(f"{site.base}/trickle", allow_addresses=LOOPBACK_ONLY, timeout_s=0.5)
    with pytest.raises(FetchError, match="more than 2 redirects"):
        loop = (
            f"{site.base}/goto?to={quote(site.base + '/goto?to=' + quote(site.base + '/redirect', safe=''), safe='')}"
        )
        fetch(loop, allow_addresses=LOOPBACK_ONLY, max_redirects=2)


def test_address_classes():
    assert address_class(ipaddress.ip_address("93.184.216.34")) is None
    assert address_class(ipaddress.ip_address("2606:4700::1111")) is None
    assert address_class(ipaddress.ip_address("::ffff:8.8.8.8")) is None
    assert address_class(ipaddress.ip_address("127.0.0.1")) == "loopback"
    with pytest.raises(PolicyError, match="only public addresses"):
        FetchPolicy().check_address(ipaddress.ip_address("10.1.1.1"))
    FetchPolicy.build(["10.0.0.0/8"]).check_address(ipaddress.ip_address("10.1.1.1"))
