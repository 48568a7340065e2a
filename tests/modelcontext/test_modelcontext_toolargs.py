from __future__ import annotations

import json

from rag_lab.modelcontext import Registry, decode_tool_call_arguments


def _reg():
    r = Registry(citations_enabled=True)
    assert r.register_chunk("chunk-AAA", "doc-1", "kb-1", "Title") == "c1"
    assert r.register_document("doc-0") == "d1"
    assert r.register_document("doc-2") == "d2"
    assert r.register_kb("kb-9") == "b1"
    return r


def test_known_handles_under_allowed_keys_are_resolved():
    got = decode_tool_call_arguments(
        json.dumps({"chunk_id": "c1", "knowledge_ids": ["d2", "d1"], "kb_id": "b3", "note": "c1"}),
        _reg(),
        allowed_keys=["chunk_id", "knowledge_ids", "kb_id"],
    )
    args = json.loads(got.arguments)
    assert args["chunk_id"] == "chunk-AAA" and args["note"] == "c1"  # "note" is not a source key
    assert args["knowledge_ids"] == ["doc-2", "doc-0"] and args["kb_id"] == "b3"
    assert got.status == "partially_resolved" and got.unresolved == ["b3"]
    assert got.resolved == {"c1": "chunk-AAA", "d2": "doc-2", "d1": "doc-0"}


def test_keys_not_allowed_by_the_policy_are_left_alone_and_wrong_spaces_unresolved():
    got = decode_tool_call_arguments(json.dumps({"chunk_id": "c1"}), _reg(), allowed_keys=[])
    assert got.status == "unchanged" and json.loads(got.arguments) == {"chunk_id": "c1"}
    got = decode_tool_call_arguments(json.dumps({"chunk_id": "d2"}), _reg(), allowed_keys=["chunk_id"])
    assert got.status == "unresolved" and got.unresolved == ["d2"]


def test_sql_decodes_only_quoted_handles():
    sql = "SELECT * FROM t WHERE doc = 'd2' AND c1 > 3"
    got = decode_tool_call_arguments(json.dumps({"sql": sql}), _reg(), sql_keys=["sql"])
    assert json.loads(got.arguments)["sql"] == "SELECT * FROM t WHERE doc = 'doc-2' AND c1 > 3"
    assert got.status == "resolved"


def test_invalid_json_is_returned_unchanged():
    got = decode_tool_call_arguments("{not json", _reg(), allowed_keys=["chunk_id"])
    assert got.arguments == "{not json" and got.status == "unchanged"
