"""A first turn gets a session title (§9.2) through the server, as a stored session_title event."""

from __future__ import annotations

import httpx

from rag_lab.lab import Lab
from rag_lab.stream.server import create_app
from tests.models.fake_openai import FakeOpenAIServer, Reply
from tests.stream.conftest import ServerThread, wait_until

CHAT = "/v1/chat/completions"


def test_first_turn_gets_a_title_event_and_the_session_keeps_it(tmp_path, docs_dir):
    with FakeOpenAIServer() as fake:
        lab = Lab.from_config(
            {
                "models": {
                    "chat": {
                        "type": "openai",
                        "model": "fake",
                        "base_url": fake.base_url,
                        "api_key": "k",
                        "max_retries": 0,
                    }
                },
                "params": {"enable_rewrite": False},
            },
            workspace=tmp_path,
        )
        lab.ingest(docs_dir, kb="demo", progress=False)

        def reply(req):  # the title call and the answer call arrive in either order
            text = str(req.json["messages"])
            return (
                Reply.chat("Lighthouse builder question")
                if "title" in text.lower() and "retrieval" not in text
                else Reply.chat("Mara Quill.")
            )

        fake.script(CHAT, reply, reply)
        with ServerThread(create_app(lab)) as srv, httpx.Client(timeout=30) as c:
            r = c.post(
                f"{srv.url}/knowledge-chat/s-title",
                json={"query": "Who built the lighthouse?", "kb": "demo"},
                headers={"X-User-ID": "alice"},
            )
            assert r.status_code == 200
            mid = r.headers["x-message-id"]
            assert wait_until(lambda: lab.sessions.get_session("s-title").title == "Lighthouse builder question")
            assert wait_until(
                lambda: "session_title" in [e.type for e in srv.service.manager.get_events("s-title", mid, 0)[0]]
            )
        assert lab.sessions.get_session("s-title").user_id == "lab"  # keyless: the one local user
