"""The workbench in a real JupyterLab, driven by a real browser.

Playwright for Python drives Debian's ``chromium`` (``executable_path``: no browser download).
JupyterLab is started by `make lab`'s launcher on a free loopback port over a folder holding one
notebook that opens :func:`~rag_lab.lab.widgets.workbench` on the stored capture. The test runs the
notebook, drags the λ slider of the MMR tab and the threshold slider of the composite tab with the
mouse, and checks that the rendered summary and the picture (an inline SVG) change. Each slider change's redraw
latency (from releasing the handle to the redrawn picture, and to the redrawn text) is written to
``widget-latency.json`` and must stay under :data:`MAX_REDRAW_S` (the 200 ms goal is the
benchmark's). The guided tour (notebook 01, with its committed outputs) is opened too and
screenshotted (every committed notebook is run by `tests/lab/test_notebooks_in_browser.py`). Screenshots are kept under ``reports/browser/`` (``RAG_LAB_ARTIFACTS`` to choose
another folder).

These tests never skip: without chromium or the playwright package they fail and say how to
install them (`.ci/run` installs chromium; `make test` installs playwright with the dev extra).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import nbformat
import pytest

from rag_lab.lab.notebook_workspace import ENV_ROOT
from tests.lab.data.make_capture import CAPTURE
from tests.lab.jlab_launch import ROOT, browser_context, running_jupyterlab

ARTIFACTS = Path(os.environ.get("RAG_LAB_ARTIFACTS") or ROOT / "reports" / "browser")
CELL = f"""from rag_lab.lab.capture import load_capture
from rag_lab.lab.widgets import workbench
cap = load_capture({str(CAPTURE)!r})
workbench(cap)"""
TOUR = ROOT / "notebooks" / "01_pipeline_event_by_event.ipynb"
#: the user's autosave interval in the test's JupyterLab (seconds): were autosave on, a run would be saved this soon
AUTOSAVE_S = 1
LABEL_CELL = """import tempfile
from rag_lab.lab.label_panel import LabelPanel
from rag_lab.lab import Lab
lab = Lab.from_config(workspace=tempfile.mkdtemp())
LabelPanel(lab, {folder!r}, who="browser")"""
TUNING_CELL = """import tempfile
from rag_lab.eval.datasets import load_dataset
from rag_lab.lab.tuning_widget import tuning_panel
from rag_lab.lab import Lab
ds = load_dataset("hotpotqa_hipporag100").subset(20, max_docs=60)
lab = Lab.from_config(workspace=tempfile.mkdtemp())
lab.ingest_documents([{"id": d.id, "title": d.title, "text": d.text} for d in ds.corpus], kb="hotpot", progress=False)
tuning_panel(lab, ds, "hotpot", n_questions=20)"""
#: the most a slider change may take to redraw its text and picture in the browser
MAX_REDRAW_S = 1.0
LATENCY: dict[str, dict[str, float]] = {}


@pytest.fixture(scope="module")
def jlab(tmp_path_factory):
    root = tmp_path_factory.mktemp("jlab_root")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells.append(nbformat.v4.new_code_cell(CELL))
    nbformat.write(nb, root / "workbench.ipynb")
    shutil.copy(TOUR, root / TOUR.name)  # with its committed outputs: opened, not run
    label_ds = _label_dataset(root / "label_ds")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells.append(nbformat.v4.new_code_cell(LABEL_CELL.format(folder=str(label_ds))))
    nbformat.write(nb, root / "labelling.ipynb")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells.append(nbformat.v4.new_code_cell(TUNING_CELL))
    nbformat.write(nb, root / "tuning.ipynb")
    ws = tmp_path_factory.mktemp("jlab_ws")
    logs = tmp_path_factory.mktemp("jlab_logs")
    # the user's own setting: autosave every AUTOSAVE_S seconds (the launcher's default turns autosave off)
    user = logs / "lab-settings" / "@jupyterlab" / "docmanager-extension" / "plugin.jupyterlab-settings"
    user.parent.mkdir(parents=True)
    user.write_text(json.dumps({"autosaveInterval": AUTOSAVE_S}))
    tmp = tmp_path_factory.mktemp("jlab_tmp")  # the kernels' temporary folder (TMPDIR)
    slots = tmp_path_factory.mktemp("jlab_notebook_workspaces")  # where the notebooks' workspaces go
    with running_jupyterlab(
        root,
        ws,
        logs,
        demo_docs=40,
        extra=["--LabApp.expose_app_in_browser=True"],
        extra_env={"TMPDIR": str(tmp), ENV_ROOT: str(slots)},
    ) as srv:
        srv.label_ds, srv.root, srv.tmp, srv.slots = label_ds, root, tmp, slots
        yield srv


def _label_dataset(folder: Path) -> Path:
    from rag_lab.eval.datasets import CorpusDoc, QueryItem, write_dataset

    gen = {"synthetic": True, "reviewed": False}
    write_dataset(
        [
            CorpusDoc(
                "light", "The Brightwater lighthouse was built in 1874 by the engineer Mara Quill.", "Lighthouse"
            ),
            CorpusDoc("bread", "Sourdough bread rises thanks to a starter of wild yeast.", "Bread"),
        ],
        [
            QueryItem("gen-1", "Who built the Brightwater lighthouse?", [], ["light"], metadata=dict(gen)),
            QueryItem("gen-2", "What makes sourdough rise?", [], ["bread"], metadata=dict(gen)),
        ],
        folder,
    )
    return folder


@pytest.fixture(scope="module")
def page(jlab):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with browser_context() as ctx:
        pg = ctx.new_page()
        pg.set_default_timeout(90_000)
        pg.goto(jlab.url("/lab/tree/workbench.ipynb"))
        pg.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell")
        pg.wait_for_selector(".jp-Notebook .jp-Cell")
        # wait for the kernel, then run the cell (the same command as Run ▸ Run All Cells)
        pg.wait_for_selector("text=Python 3 (ipykernel) | Idle", timeout=120_000)
        # not awaited: the command's promise settles with the execution, the widget wait follows
        pg.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        pg.wait_for_selector(".jupyter-widgets.widget-tab, .widget-tab", timeout=120_000)
        try:
            yield pg
        finally:
            pg.screenshot(path=str(ARTIFACTS / "jupyterlab-final.png"), full_page=True)


def _tab(page, title: str) -> None:
    page.locator(".widget-tab .lm-TabBar-tab", has_text=title).first.click()


def _visible_panel(page):
    return page.locator(".widget-tab-contents > .lm-Widget:not(.lm-mod-hidden)").first


def _drag_slider(page, panel, to_fraction: float) -> float:
    """Drag the panel's slider handle with the mouse to ``to_fraction`` of its track; returns the
    ``time.perf_counter()`` of the release (the slider sends its value on release)."""
    track = panel.locator(".widget-slider .noUi-target").first
    handle = panel.locator(".widget-slider .noUi-handle").first
    tb, hb = track.bounding_box(), handle.bounding_box()
    assert tb and hb, "slider not rendered"
    page.mouse.move(hb["x"] + hb["width"] / 2, hb["y"] + hb["height"] / 2)
    page.mouse.down()
    page.mouse.move(tb["x"] + tb["width"] * to_fraction, hb["y"] + hb["height"] / 2, steps=12)
    page.mouse.up()
    return time.perf_counter()


def _image_src(panel) -> str:
    """What the view's picture shows (its SVG root's ``data-state``: the threshold and survivors,
    or λ and the picks)."""
    return panel.locator("svg.rag-lab-view").first.get_attribute("data-state") or ""


def _wait_image_change(page, panel, old: str) -> float:
    """Wait until the picture shows another state than ``old``; returns when it did
    (``time.perf_counter()``)."""
    page.wait_for_function(
        "([panel, old]) => { const s = panel.querySelector('svg.rag-lab-view'); "
        "return s !== null && s.getAttribute('data-state') !== old; }",
        arg=[panel.element_handle(), old],
        polling="raf",
    )
    done = time.perf_counter()
    assert _image_src(panel) != old
    return done


def _record_latency(view: str, released: float, text_at: float, image_at: float) -> None:
    """Keep one view's redraw latency (seconds → ms) in ``widget-latency.json`` and check it."""
    LATENCY[view] = {
        "text_ms": round((text_at - released) * 1000, 1),
        "image_ms": round((image_at - released) * 1000, 1),
    }
    (ARTIFACTS / "widget-latency.json").write_text(
        json.dumps({"max_s": MAX_REDRAW_S, "views": LATENCY}, indent=2) + "\n"
    )
    print(f"{view}: text redrawn after {LATENCY[view]['text_ms']} ms, picture after {LATENCY[view]['image_ms']} ms")
    assert max(text_at, image_at) - released <= MAX_REDRAW_S, (
        f"{view}: a slider change took {max(text_at, image_at) - released:.2f} s to redraw (limit {MAX_REDRAW_S} s)"
    )


def test_the_workbench_opens_with_all_tabs(page):
    tabs = [t.strip() for t in page.locator(".widget-tab .lm-TabBar-tab").all_inner_texts()]
    assert tabs == ["Stream", "Composite score", "MMR", "Fusion", "Merge", "Timings"]
    # the stream player opened on the final state: the answer with its citation mark
    assert "Mara Quill" in page.locator(".widget-tab").first.inner_text()
    page.screenshot(path=str(ARTIFACTS / "jupyterlab-workbench.png"))


def test_moving_lambda_changes_the_picks_and_the_plot(page):
    _tab(page, "MMR")
    panel = _visible_panel(page)
    summary = panel.locator(".widget-html").first
    page.wait_for_function("(el) => el.innerText.includes('same picks as the run')", arg=summary.element_handle())
    before_text, before_img = summary.inner_text(), _image_src(panel)
    assert before_text.startswith("λ = 0.70")
    released = _drag_slider(page, panel, 0.0)  # λ = 0: diversity only
    page.wait_for_function("(el) => el.innerText.startsWith('λ = 0.00')", arg=summary.element_handle(), polling="raf")
    text_at = time.perf_counter()
    after = summary.inner_text()
    assert "2 pick(s) differ from the run's λ=0.7" in after
    # honest knobs: all four candidates are kept whatever λ is, and the view says so
    assert "no effect on this question: 4 candidate(s) passed" in after
    _record_latency("mmr_lambda", released, text_at, _wait_image_change(page, panel, before_img))
    page.screenshot(path=str(ARTIFACTS / "jupyterlab-mmr-lambda0.png"))


def test_moving_the_threshold_changes_the_survivors_and_the_plot(page):
    _tab(page, "Composite score")
    panel = _visible_panel(page)
    summary = panel.locator(".widget-html").first
    page.wait_for_function("(el) => el.innerText.includes('4 of 4')", arg=summary.element_handle())
    before_img = _image_src(panel)
    released = _drag_slider(page, panel, 1.0)  # threshold 1.0: nothing passes; the top-1 fallback keeps one
    page.wait_for_function("(el) => el.innerText.includes('1 of 4')", arg=summary.element_handle(), polling="raf")
    text_at = time.perf_counter()
    text = summary.inner_text()
    assert "threshold 1.00" in text and "fallback_top1" in text
    _record_latency("rerank_threshold", released, text_at, _wait_image_change(page, panel, before_img))
    page.screenshot(path=str(ARTIFACTS / "jupyterlab-threshold1.png"))


def test_the_tour_notebook_renders_its_stages(page, jlab):
    """Notebook 01 as committed (not run): its stage lines, the MMR pick lists and the funnel are
    on the page; screenshots of the question, the rerank stage and the funnel."""
    tour = page.context.new_page()
    try:
        tour.goto(jlab.url(f"/lab/tree/{TOUR.name}"))
        tour.wait_for_selector(".jp-Notebook .jp-Cell .jp-OutputArea-output")
        shots = {
            "question": "QUESTION:",
            "rerank": "THRESHOLD 0.5",
            "mmr": "MMR distinct pick lists",
            "funnel": "FUNNEL at λ = 1.0",
        }
        for name, text in shots.items():
            cell = tour.locator(".jp-Cell", has=tour.locator(".jp-OutputArea-output", has_text=text)).first
            cell.wait_for(state="attached")
            for _ in range(3):  # the windowed notebook measures the cells it passes: scroll until it settles
                cell.evaluate("el => el.scrollIntoView({block: 'start'})")
                tour.wait_for_timeout(400)
            cell.locator(".jp-OutputArea-output").first.wait_for(state="visible")
            tour.screenshot(path=str(ARTIFACTS / f"tour-01-{name}.png"))
        for stage in ("chunk_search_parallel", "chunk_rerank", "chunk_merge", "filter_top_k"):
            assert tour.locator(".jp-OutputArea-output", has_text=f"STAGE {stage}:").count() >= 1, stage
        assert tour.get_by_text("official Jupyter news").count() == 0  # the launcher turned the news toast off
    finally:
        tour.close()


def _open_and_run(jlab, page, notebook: str) -> None:
    """Open ``notebook`` of the JupyterLab root in ``page`` and run all its cells (not awaited)."""
    page.goto(jlab.url(f"/lab/tree/{notebook}"))
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell")
    page.wait_for_selector("text=Python 3 (ipykernel) | Idle", timeout=120_000)
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")


def test_a_question_is_labelled_in_the_browser(page, jlab):
    """The labelling panel in JupyterLab: grade the first passage with its toggle (the mouse),
    accept the question from the command box (the keyboard: type, Enter), and find both in
    queries.jsonl."""
    lab_page = page.context.new_page()
    try:
        _open_and_run(jlab, lab_page, "labelling.ipynb")
        panel = lab_page.locator(".rag-lab-label-panel")
        panel.wait_for(timeout=120_000)
        assert "Question 1 of 2" in panel.inner_text()
        status = panel.locator(".rag-lab-label-status")
        panel.locator(".widget-toggle-buttons").first.locator("button", has_text="relevant (2)").click()
        lab_page.wait_for_function("(el) => el.innerText.includes('1=2')", arg=status.element_handle())
        box = panel.locator(".rag-lab-label-command input")
        box.fill("a n")
        box.press("Enter")
        lab_page.wait_for_function("(el) => el.innerText.includes('Question 2 of 2')", arg=panel.element_handle())
        lab_page.screenshot(path=str(ARTIFACTS / "jupyterlab-labelling.png"))
    finally:
        lab_page.close()
    rows = [json.loads(line) for line in (jlab.label_ds / "queries.jsonl").read_text().splitlines()]
    meta = rows[0]["metadata"]
    assert meta["reviewed"] is True and meta["review"]["status"] == "accepted" and meta["review"]["by"] == "browser"
    assert rows[0]["relevance"] == {"light": 2} and meta["labels"][0]["grade"] == 2
    assert rows[1]["metadata"]["reviewed"] is False


def test_the_tuning_panel_redraws_its_table_and_curve(page, jlab):
    """Notebook 06's tuning panel on its 20-question slice: dragging the rerank-threshold slider to
    0.9 redraws the metric table and the SVG curve; the time from releasing the handle to the curve
    showing 0.9 is recorded with the other views' and must stay under the limit."""
    tune = page.context.new_page()
    try:
        _open_and_run(jlab, tune, "tuning.ipynb")
        slider = tune.locator(".widget-slider", has_text="rerank_threshold").first
        slider.wait_for(timeout=180_000)
        curve = tune.locator("svg.rag-lab-curve").first
        curve.wait_for()
        assert curve.get_attribute("data-state") == "rerank_threshold=0.3"
        table = tune.locator(".widget-html", has_text="metric").first
        before = table.inner_text()
        released = _drag_slider(tune, slider.locator("xpath=.."), 0.9)
        readout = slider.locator(".widget-readout").first
        # the curve (a new <svg> each redraw) shows the value the slider came to rest on (its readout)
        tune.wait_for_function(
            "(out) => { const v = parseFloat(out.innerText); const svg = document.querySelector('svg.rag-lab-curve'); "
            "return svg !== null && v > 0.5 && Math.abs(parseFloat(svg.getAttribute('data-state').split('=')[1]) - v) < 1e-9; }",
            arg=readout.element_handle(),
            polling="raf",
        )
        drawn = time.perf_counter()
        assert float(readout.inner_text()) > 0.5
        assert table.inner_text() != before  # the metric table moved with it
        tune.screenshot(path=str(ARTIFACTS / "jupyterlab-tuning.png"))
    finally:
        tune.close()
    _record_latency("tuning_panel", released, drawn, drawn)
