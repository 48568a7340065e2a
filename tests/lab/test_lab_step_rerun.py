from __future__ import annotations

import asyncio

import pytest

from rag_lab.lab.stepper import StageView

Q = "Who built the Brightwater lighthouse?"


def test_step_pauses_after_every_stage_and_finishes_like_ask(lab):
    st = lab.step(Q, kb="demo")
    first = st.next()
    assert isinstance(first, StageView) and first.event == "load_history"
    view = st.run_to("chunk_rerank")
    assert view.state.state.rerank_result and not view.state.state.merge_result
    assert st.state is view.state
    run = st.finish()
    assert st.done and run.answer and [v.event for v in st.stages] == run.stages
    with pytest.raises(StopIteration):
        st.next()


async def test_step_from_async_code(lab):
    st = lab.step(Q, kb="demo")
    v = await st.anext()
    assert v.event == "load_history"
    run = await asyncio.to_thread(st.finish)
    assert "Mara Quill" in run.answer


def test_rerun_with_unchanged_params_reproduces_the_run(lab):
    run = lab.ask(Q, kb="demo")
    again = lab.rerun(run, "chunk_rerank")
    assert again.answer == run.answer
    assert [r.id for r in again.references] == [r.id for r in run.references]
    assert [r.score for r in again.references] == [r.score for r in run.references]
    assert again.stages == run.stages[run.stages.index("chunk_rerank") :]
    assert again.state("chunk_search_parallel") is run.state("chunk_search_parallel")  # reused upstream


def test_rerun_with_changed_params_changes_only_downstream(lab):
    run = lab.ask(Q, kb="demo")
    tight = lab.rerun(run, "chunk_rerank", params={"rerank_top_k": 1})
    assert len(tight.references) == 1 and tight.references[0].id == run.references[0].id
    assert tight.state("chunk_rerank").request.rerank_top_k == 1
    assert tight.params.rerank_top_k == 1 and run.params.rerank_top_k != 1
    with pytest.raises(ValueError, match="web_fetch"):
        lab.rerun(run, "web_fetch")
    with pytest.raises(ValueError, match="first stage"):
        lab.rerun(run, "load_history")


def test_an_abandoned_stepper_does_not_hold_up_interpreter_exit(tmp_path) -> None:
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        f"""
        from rag_lab.lab import Lab
        lab = Lab.from_config(workspace={str(tmp_path / "ws")!r})
        lab.ingest_documents([{{"id": "bw", "text": "Mara Quill built the lighthouse in 1874."}}], kb="d", progress=False)
        st = lab.step("Who built the lighthouse?", kb="d")
        print(st.next().event, flush=True)  # paused after the first stage, never resumed
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("load_history")
