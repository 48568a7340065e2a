from __future__ import annotations

import pytest

from rag_lab.types import ParamsError, PipelineParams


def test_spec_defaults():
    p = PipelineParams()
    assert (p.composite_model_weight, p.composite_base_weight, p.composite_source_weight) == (0.6, 0.3, 0.1)
    assert p.web_source_weight == 0.95 and p.mmr_lambda == 0.7 and p.rerank_fallback_min_score == 0.15
    assert (p.rerank_degrade_factor, p.rerank_degrade_floor) == (0.7, 0.3)
    assert p.wiki_boost_factor == 1.3 and p.memory_affinity_max_boost == 0.15 and p.rrf_k == 60
    assert (p.rrf_vector_weight, p.rrf_keyword_weight) == (0.7, 0.3)
    assert (p.expansion_min_len, p.expansion_max_len, p.overlap_threshold) == (350, 850, 0.85)
    assert (p.history_overlap_threshold, p.history_score_factor, p.history_max_refs) == (0.3, 0.6, 3)
    assert (p.query_expansion_keyword_factor, p.query_expansion_top_k_factor) == (0.8, 2)
    assert p.web_fetch_top_n == 3 and p.retrieval_pool_max == 500 and p.default_retrieval_top_k == 50


def test_error_names_source_field_and_value(tmp_path):
    f = tmp_path / "lab.yaml"
    f.write_text("params:\n  rerank_threshold: 12\n  mmr_lambda: -0.5\n")
    with pytest.raises(ParamsError) as e:
        PipelineParams.from_yaml(f)
    msg = str(e.value)
    assert str(f) in msg and "rerank_threshold" in msg and "12" in msg and "mmr_lambda" in msg and "-0.5" in msg


def test_unknown_field_and_bad_type(tmp_path):
    with pytest.raises(ParamsError, match="unknown field 'rerank_treshold'"):
        PipelineParams.from_mapping({"rerank_treshold": 0.5}, "cli")
    with pytest.raises(ParamsError, match="embedding_top_k"):
        PipelineParams.from_mapping({"embedding_top_k": "many"}, "cli")
    f = tmp_path / "x.yaml"
    f.write_text("params: [1, 2]")
    with pytest.raises(ParamsError, match="expected a mapping"):
        PipelineParams.from_yaml(f)
    with pytest.raises(ParamsError, match="file not found"):
        PipelineParams.from_yaml(tmp_path / "missing.yaml")


def test_yaml_round_trip_and_with_changes(tmp_path):
    p = PipelineParams().with_changes(rerank_threshold=0.4, mmr_lambda=0.5)
    f = tmp_path / "p.yaml"
    f.write_text(p.to_yaml())
    assert PipelineParams.from_yaml(f) == p
    with pytest.raises(ParamsError):
        p.with_changes(mmr_lambda=2)


def test_every_numeric_field_has_a_range():
    ranges = PipelineParams.field_ranges()
    for name, info in PipelineParams.model_fields.items():
        if info.annotation in (int, float):
            assert name in ranges, name
            lo, hi = ranges[name]
            default = getattr(PipelineParams(), name)
            assert (lo is None or default >= lo) and (hi is None or default <= hi)
