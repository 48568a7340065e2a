"""Typed stage diagnostics: versioned JSON form, old plain-dict captures, newer versions refused
with a clear error, unknown fields kept, the stages write the types, captures keep them; deferred
fields read, compare, copy and pickle as the values they stand for."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_lab.types.diagnostics import (
    DIAGNOSTICS_TYPES,
    Deferred,
    DiagnosticsVersionError,
    MergeDiagnostics,
    RerankDiagnostics,
    WebFetchDiagnostics,
    diagnostics_from_dict,
    diagnostics_to_dict,
)

DATA = Path(__file__).resolve().parents[1] / "lab" / "data" / "lighthouse.capture.jsonl"


def test_to_dict_holds_the_version_and_the_set_fields_only() -> None:
    d = RerankDiagnostics(model_id="m", candidates=3, outcome="kept", rows=[{"id": "a"}])
    assert d.to_dict() == {"version": 1, "model_id": "m", "candidates": 3, "outcome": "kept", "rows": [{"id": "a"}]}
    back = RerankDiagnostics.from_dict(json.loads(json.dumps(d.to_dict())))
    assert back == d and back.outcome == "kept" and back.threshold is None


def test_plain_dicts_of_older_captures_load_as_version_1() -> None:
    old = {"model_id": "rerank", "candidates": 4, "outcome": "ok", "mmr_k": 4, "mmr_lambda": 0.7, "rows": []}
    d = RerankDiagnostics.from_dict(old)
    assert (d.mmr_k, d.mmr_lambda, d.extra) == (4, 0.7, {})
    merge = MergeDiagnostics.from_dict([{"step": "input", "ids": ["a"]}])  # was a bare list
    assert merge.steps == [{"step": "input", "ids": ["a"]}]


def test_a_newer_version_is_refused_naming_key_and_versions() -> None:
    with pytest.raises(DiagnosticsVersionError, match=r"state.diagnostics\['rerank'\]: RerankDiagnostics version 2; "):
        diagnostics_from_dict({"rerank": {"version": 2, "outcome": "kept"}})
    with pytest.raises(ValueError, match="version 0 is not a positive integer"):
        RerankDiagnostics.from_dict({"version": 0})


def test_unknown_fields_are_kept_and_written_back() -> None:
    d = WebFetchDiagnostics.from_dict({"top_n": 3, "pages": [], "proxy": "none"})
    assert d.extra == {"proxy": "none"} and d["proxy"] == "none"
    assert d.to_dict() == {"version": 1, "top_n": 3, "pages": [], "proxy": "none"}


def test_mapping_style_access_for_stages_and_older_callers() -> None:
    d = RerankDiagnostics(model_id="m")
    d.update(outcome="kept", threshold_used=0.3)
    d["mmr_k"] = 5
    assert (d.outcome, d.threshold_used, d["mmr_k"], d.get("rows", "absent")) == ("kept", 0.3, 5, "absent")
    assert "outcome" in d and "rows" not in d
    assert d == {"model_id": "m", "outcome": "kept", "threshold_used": 0.3, "mmr_k": 5}
    with pytest.raises(KeyError, match="RerankDiagnostics has no field 'outcomes'"):
        d["outcomes"] = "x"


@given(st.dictionaries(st.sampled_from(sorted(DIAGNOSTICS_TYPES)), st.just({"version": 1})))
def test_whole_diagnostics_round_trip(data: dict) -> None:
    typed = diagnostics_from_dict(data)
    assert all(isinstance(v, DIAGNOSTICS_TYPES[k]) for k, v in typed.items())
    assert diagnostics_from_dict(diagnostics_to_dict(typed)) == typed


def test_stages_write_the_types_and_captures_keep_them(lab, tmp_path: Path) -> None:
    from rag_lab.lab.capture import load_capture

    run = lab.ask("Who built the Brightwater lighthouse?", kb="demo")
    diag = run.state("chunk_rerank").state.diagnostics
    assert isinstance(diag["rerank"], RerankDiagnostics) and diag["rerank"].outcome
    assert isinstance(run.state("chunk_merge").state.diagnostics["merge"], MergeDiagnostics)
    cap = load_capture(run.save(tmp_path / "run.capture.jsonl"))
    again = cap.state("chunk_rerank").state.diagnostics["rerank"]
    assert isinstance(again, RerankDiagnostics) and again == diag["rerank"]


def test_the_bundled_old_capture_still_loads_with_typed_diagnostics() -> None:
    from rag_lab.lab.capture import load_capture
    from rag_lab.lab.frames import rerank_rows

    cap = load_capture(DATA)
    rr = cap.state("chunk_rerank").state.diagnostics["rerank"]
    assert isinstance(rr, RerankDiagnostics) and rr.mmr_k == 4 and rr.outcome == "ok"
    assert [r["id"] for r in rerank_rows(cap)][0].endswith("lighthouse.md#c0")


def test_a_capture_with_newer_diagnostics_fails_with_a_clear_error(tmp_path: Path) -> None:
    from rag_lab.lab.capture import CaptureError, load_capture

    lines = DATA.read_text(encoding="utf-8").splitlines()
    out = []
    for line in lines:
        rec = json.loads(line)
        if rec.get("kind") == "snapshot" and "rerank" in rec["chat"]["state"]["diagnostics"]:
            rec["chat"]["state"]["diagnostics"]["rerank"]["version"] = 9
        out.append(json.dumps(rec))
    path = tmp_path / "newer.capture.jsonl"
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    with pytest.raises(CaptureError, match="RerankDiagnostics version 9; this rag_lab reads up to version 1"):
        load_capture(path)


# --- deferred fields (the rerank stage's rows and MMR trace, built on first read) ----------------


def _rerank_pair(calls: list[int]) -> tuple[RerankDiagnostics, RerankDiagnostics]:
    rows = [{"id": "a", "selected": True}, {"id": "b", "selected": False}]
    steps = [{"step": 0, "index": 0, "mmr": 0.63}]

    def build_rows() -> list[dict]:
        calls.append(1)
        return [dict(r) for r in rows]

    lazy = RerankDiagnostics(model_id="m", candidates=2)
    lazy.update(
        outcome="ok", rows=Deferred(build_rows), mmr=Deferred(lambda: list(steps)), ranked_ids=Deferred(lambda: ["a"])
    )
    eager = RerankDiagnostics(model_id="m", candidates=2, outcome="ok", rows=rows, mmr=steps, ranked_ids=["a"])
    return lazy, eager


def test_a_deferred_field_reads_as_its_value_and_is_computed_once() -> None:
    calls: list[int] = []
    lazy, eager = _rerank_pair(calls)
    assert calls == []  # nothing built until someone reads
    assert lazy.rows == eager.rows and lazy.rows is lazy.rows
    assert calls == [1]
    assert lazy == eager and lazy.to_dict() == eager.to_dict()
    assert lazy["mmr"] == [{"step": 0, "index": 0, "mmr": 0.63}] and lazy.get("ranked_ids") == ["a"]
    assert repr(lazy) == repr(eager)
    assert calls == [1]


@pytest.mark.parametrize(
    "clone",
    [copy.copy, copy.deepcopy, lambda d: pickle.loads(pickle.dumps(d)), lambda d: dataclasses.replace(d)],
    ids=["copy", "deepcopy", "pickle", "replace"],
)
def test_copies_and_pickles_of_a_deferred_record_hold_the_values(clone) -> None:
    calls: list[int] = []
    lazy, eager = _rerank_pair(calls)
    other = clone(lazy)
    assert calls == [1]
    assert other == eager and other.to_dict() == eager.to_dict()
    assert not any(type(v) is Deferred for v in vars(other).values())  # values, not the original's functions
    assert RerankDiagnostics.from_dict(json.loads(json.dumps(other.to_dict()))) == eager


def test_deferred_fields_default_to_none_and_accept_plain_values() -> None:
    d = RerankDiagnostics()
    assert d.rows is None and d.to_dict() == {"version": RerankDiagnostics.VERSION}
    d.rows = [{"id": "x"}]
    assert d.to_dict()["rows"] == [{"id": "x"}]
    d["mmr"] = Deferred(lambda: [])
    assert d.mmr == [] and "mmr" in d.to_dict()
