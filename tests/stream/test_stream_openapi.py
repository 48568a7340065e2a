"""The OpenAPI schema describes POST /knowledge-chat as it is: a JSON body with a required,
non-blank ``query`` and an SSE response (fetched over loopback from the running server)."""

from __future__ import annotations

import httpx


def test_knowledge_chat_schema_has_the_body_and_the_event_stream(serve):
    srv = serve()
    with httpx.Client(timeout=30) as c:
        spec = c.get(f"{srv.url}/openapi.json").json()
        op = spec["paths"]["/knowledge-chat/{session_id}"]["post"]
        body = op["requestBody"]["content"]["application/json"]
        assert op["requestBody"]["required"] is True
        assert body["schema"]["required"] == ["query"]
        assert body["schema"]["properties"]["query"] == {
            "type": "string",
            "minLength": 1,
            "description": "the question (not blank)",
        }
        assert "text/event-stream" in op["responses"]["200"]["content"]
        # the example in the schema is a body the server accepts; a blank query is the 400 it documents
        r = c.post(f"{srv.url}/knowledge-chat/s-openapi", json={"query": "  "})
        assert r.status_code == 400 and "query: must not be empty" in r.text
        # fields it does not take are refused, not ignored (per-request params used to vanish silently)
        assert body["schema"]["additionalProperties"] is False
        r = c.post(f"{srv.url}/knowledge-chat/s-openapi", json={"query": "Who?", "params": {"rerank_top_k": 1}})
        assert r.status_code == 400 and r.json()["field"] == "params"
        assert "per-request params are not accepted" in r.json()["error"]
