from __future__ import annotations

from rag_lab.lab import Lab
from rag_lab.observability.tracing import NullTracer, build_tracer


def _spans(lab):
    return lab.tracer.exporter.get_finished_spans()


def test_one_span_per_stage_nested_under_the_request(tmp_path, docs_dir):
    lab = Lab.from_config(workspace=tmp_path, tracing={"exporter": "memory"})
    lab.ingest(docs_dir, kb="demo", progress=False)
    run = lab.ask("Who built the Brightwater lighthouse?", kb="demo")
    spans = _spans(lab)
    by_name = {s.name: s for s in spans}
    root = by_name["pipeline.request"]
    stage_spans = [s for s in spans if s.name.startswith("pipeline.") and s.name[9:] in run.stages]
    assert [s.name[9:] for s in sorted(stage_spans, key=lambda s: s.start_time)] == run.stages
    assert all(s.parent.span_id == root.context.span_id for s in stage_spans)
    rerank = by_name["pipeline.chunk_rerank"]
    assert rerank.attributes["rerank.threshold"] == lab.params.rerank_threshold
    assert rerank.attributes["results.in"] > 0 and rerank.attributes["results.out"] > 0
    assert rerank.attributes["rerank.model_id"] == "rerank"
    # the stage span ends when the handler returns; its child, the lifetime span, covers the stream
    stage, life = by_name["pipeline.chat_completion_stream"], by_name["pipeline.chat_completion_stream.lifetime"]
    assert stage.end_time < life.end_time <= root.end_time
    assert life.parent.span_id == stage.context.span_id
    assert life.attributes["answer.completed"] is True and life.attributes["usage.completion_tokens"] > 0


def test_a_failing_stage_records_the_error(tmp_path, docs_dir):
    lab = Lab.from_config(workspace=tmp_path, tracing={"exporter": "memory"})
    lab.ingest(docs_dir, kb="demo", progress=False)
    lab.services.rerank_models.clear()  # the request names a rerank model that no longer exists
    run = lab.ask("Who built the Brightwater lighthouse?", kb="demo")
    assert run.error
    span = {s.name: s for s in _spans(lab)}["pipeline.chunk_rerank"]
    assert span.attributes["error.kind"] == "get_rerank_model_failed"
    assert span.status.status_code.name == "ERROR"


def test_tracing_off_by_default():
    assert isinstance(build_tracer(None), NullTracer) and isinstance(build_tracer({"exporter": "none"}), NullTracer)
    try:
        build_tracer({"exporter": "zipkin"})
    except ValueError as exc:
        assert "zipkin" in str(exc) and "otlp" in str(exc)
    else:
        raise AssertionError("unknown exporter accepted")
