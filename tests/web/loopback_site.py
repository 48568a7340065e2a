"""A small web site on 127.0.0.1 for the web tests: HTML pages, faults and a SearXNG-style
``/search`` JSON endpoint, served by the stdlib ``http.server`` in a daemon thread."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

ARTICLE = (
    "<html><head><title>The Skerry ferry</title></head><body>"
    "<nav><a href='/'>Home</a> <a href='/shop'>Shop</a> <a href='/login'>Log in</a></nav>"
    "<article><h1>The Skerry ferry</h1>"
    "<p>The Skerry ferry leaves the north pier at 07:40 every morning and reaches the island "
    "after a crossing of fifty-five minutes.</p>"
    "<p>In winter storms the crossing is cancelled and the harbour master posts a notice on the "
    "pier gate before six o'clock.</p>"
    "<p>The ferry was built in 1962 at the Aberlady yard and carries twelve cars.</p>"
    "</article><footer>Copyright Skerry Council. Cookie settings.</footer></body></html>"
)
# trafilatura drops comment sections (include_comments=False): only the stdlib parser sees this
COMMENTS_ONLY = (
    "<html><head><title>Visitor notes</title></head><body>"
    "<div id='comments'>The lighthouse museum opens at ten on Sundays.</div></body></html>"
)
#: plain-text page whose byte 8000 falls inside a 3-byte character (汉 = e6 b1 89)
HUGE_TEXT = "a" * 7998 + "汉字" * 2000
HUGE_HTML = (
    "<html><head><title>Tide tables</title></head><body><article><h1>Tide tables</h1>"
    + "".join(
        f"<p>Day {i}: the high tide at Skerry harbour reaches {i % 7 + 2}.{i % 10} metres, "
        f"the low tide falls to 0.{i % 9} metres; 潮汐表第{i}天。</p>"
        for i in range(400)
    )
    + "</article></body></html>"
)
LATIN1 = "<html><body><article><p>Le caf\u00e9 du port ouvre \u00e0 sept heures.</p></article></body></html>"

SEARCH_RESULTS = [
    {
        "title": "The Skerry ferry",
        "url": "{base}/article.html",
        "content": "Timetable of the island ferry.",
        "publishedDate": "2024-03-01T08:00:00",
        "engine": "duckduckgo",
    },
    {
        "title": "Tide tables",
        "url": "{base}/huge.html",
        "content": "High and low tides.",
        "publishedDate": None,
        "engine": "wikipedia",
    },
    {
        "title": "No date format",
        "url": "{base}/latin1.html",
        "content": "Caf\u00e9.",
        "publishedDate": "last week",
        "engines": ["bing", "brave"],
    },
]


class Site:
    """Routes and request log of the running server."""

    def __init__(self) -> None:
        self.base = ""
        self.requests: list[str] = []
        self.slow_s = 2.0
        #: ``/pause`` requests being answered now, and the most at once (parallelism tests)
        self.in_flight = 0
        self.max_in_flight = 0
        self._flight = threading.Condition()
        self.routes: dict[str, Callable[[BaseHTTPRequestHandler, dict[str, list[str]]], None]] = {
            "/article.html": lambda h, q: self.send(h, 200, "text/html; charset=utf-8", ARTICLE.encode()),
            "/comments.html": lambda h, q: self.send(h, 200, "text/html", COMMENTS_ONLY.encode()),
            "/huge.txt": lambda h, q: self.send(h, 200, "text/plain; charset=utf-8", HUGE_TEXT.encode()),
            "/huge.html": lambda h, q: self.send(h, 200, "text/html; charset=utf-8", HUGE_HTML.encode()),
            "/latin1.html": lambda h, q: self.send(h, 200, "text/html; charset=ISO-8859-1", LATIN1.encode("latin-1")),
            "/no-type": lambda h, q: self.send(h, 200, None, b"<p>Untyped markup page about puffins.</p>"),
            "/error500": lambda h, q: self.send(h, 500, "text/html", b"<h1>boom</h1>"),
            "/missing": lambda h, q: self.send(h, 404, "text/html", b"not here"),
            "/doc.pdf": lambda h, q: self.send(h, 200, "application/pdf", b"%PDF-1.4 ..."),
            "/redirect": self.redirect,
            "/goto": self.goto,
            "/empty.html": lambda h, q: self.send(h, 200, "text/html", b"<html><body>  </body></html>"),
            "/pause": self.pause,
            "/slow": self.slow,
            "/trickle": self.trickle,
            "/search": self.search,
        }

    @staticmethod
    def send(h: BaseHTTPRequestHandler, status: int, ctype: str | None, body: bytes) -> None:
        h.send_response(status)
        if ctype:
            h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        try:
            h.wfile.write(body)
        except OSError:  # the client gave up (timeout tests)
            pass

    def redirect(self, h: BaseHTTPRequestHandler, q: dict[str, list[str]]) -> None:
        h.send_response(302)
        h.send_header("Location", "/article.html")
        h.send_header("Content-Length", "0")
        h.end_headers()

    def goto(self, h: BaseHTTPRequestHandler, q: dict[str, list[str]]) -> None:
        """``/goto?to=URL``: a 302 to any URL (the SSRF tests redirect into refused addresses)."""
        h.send_response(302)
        h.send_header("Location", (q.get("to") or ["/article.html"])[0])
        h.send_header("Content-Length", "0")
        h.end_headers()

    def pause(self, h: BaseHTTPRequestHandler, q: dict[str, list[str]]) -> None:
        """``/pause?s=0.5&n=…``: answers the article after ``s`` seconds; with ``&together=K``,
        as soon as K ``/pause`` requests are in flight at once (``s``: the most it waits).
        :attr:`max_in_flight` records the most requests in flight together."""
        wait_s = float((q.get("s") or ["0"])[0])
        together = int((q.get("together") or ["0"])[0])
        with self._flight:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self._flight.notify_all()
            if together:
                self._flight.wait_for(lambda: self.in_flight >= together, timeout=wait_s)
        try:
            if not together:
                time.sleep(wait_s)
            self.send(h, 200, "text/html", ARTICLE.encode())
        finally:
            with self._flight:
                self.in_flight -= 1

    def slow(self, h: BaseHTTPRequestHandler, q: dict[str, list[str]]) -> None:
        """``/slow[?s=SECONDS]``: the article after ``s`` seconds (default :attr:`slow_s`)."""
        time.sleep(float((q.get("s") or [self.slow_s])[0]))
        self.send(h, 200, "text/html", ARTICLE.encode())

    def trickle(self, h: BaseHTTPRequestHandler, q: dict[str, list[str]]) -> None:
        """Headers at once, then one byte every 0.1 s: each read is quick, the whole is slow."""
        body = ARTICLE.encode()
        h.send_response(200)
        h.send_header("Content-Type", "text/html")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        try:
            for i in range(len(body)):
                h.wfile.write(body[i : i + 1])
                h.wfile.flush()
                time.sleep(0.1)
        except OSError:
            pass

    def search(self, h: BaseHTTPRequestHandler, q: dict[str, list[str]]) -> None:
        query = (q.get("q") or [""])[0]
        if (q.get("format") or [""])[0] != "json":
            self.send(h, 403, "text/html", b"format not allowed")
        elif query == "boom":
            self.send(h, 500, "text/html", b"internal error")
        elif query == "html please":
            self.send(h, 200, "text/html", b"<html>not json</html>")
        elif query == "no results field":
            self.send(h, 200, "application/json", json.dumps({"query": query}).encode())
        elif query == "slow":
            time.sleep(self.slow_s)
            self.send(h, 200, "application/json", b'{"results": []}')
        else:
            results = [
                {k: (v.format(base=self.base) if isinstance(v, str) else v) for k, v in r.items()}
                for r in SEARCH_RESULTS
            ]
            payload = {
                "query": query,
                "number_of_results": len(results),
                "results": results,
                "extra": (q.get("language") or [""])[0],
            }
            self.send(h, 200, "application/json", json.dumps(payload).encode())


@contextmanager
def serve() -> Iterator[Site]:
    site = Site()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (stdlib name)
            parts = urlsplit(self.path)
            site.requests.append(self.path)
            route = site.routes.get(parts.path)
            if route is None:
                site.send(self, 404, "text/plain", b"no such page")
            else:
                route(self, parse_qs(parts.query))

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    site.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="loopback-site", daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
