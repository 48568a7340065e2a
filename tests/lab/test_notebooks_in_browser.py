"""Every teaching notebook, as committed, run in a real JupyterLab by a real browser.

This is the notebooks lane of `make test` (marker ``notebook``; the tests lane leaves it out).
`make lab`'s launcher serves the repository's own ``notebooks/`` folder on a free loopback port
(the notebooks read files relative to it, e.g. ``../reports/baseline.json``) with the user's
autosave set to one second, as a user's settings might be: the launcher's overrides must keep the
committed files as they are. Playwright drives Debian's ``chromium``; for each notebook, in order,
the test opens it, runs every cell (the command behind Run ▸ Run All Cells) and then checks:

* every code cell ran and none shows an error (the failing cell's source and traceback are in the
  assertion message);
* the committed ``.ipynb`` is byte for byte what it was, several autosave intervals after the run;
* the notebook's workspace was a reused slot (:mod:`rag_lab.lab.notebook_workspace`), emptied once
  its kernel stops, and no folder is left in the kernel's temporary folder.

The kernels share the tests' vector cache (``RAG_LAB_VECTOR_CACHE``, as the gate does), so a
notebook embeds only texts no earlier run embedded. These tests never skip: without chromium or
playwright they fail and say how to install them.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
from pathlib import Path

import pytest

from rag_lab.lab.notebook_workspace import ENV_ROOT
from tests.lab.jlab_launch import ROOT, browser_context, running_jupyterlab
from tests.lab.test_lab_jupyterlab_browser import ARTIFACTS, AUTOSAVE_S

pytestmark = pytest.mark.notebook

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
#: the longest one notebook may take to run all its cells (a hung kernel fails, it does not hang the lane)
RUN_LIMIT_MS = 600_000
#: the errors of the open notebook's outputs, and its code cells that never ran
ERRORS_JS = """() => {
  const model = window.jupyterapp.shell.currentWidget.content.model;
  const out = [];
  for (let i = 0; i < model.cells.length; i++) {
    const cell = model.cells.get(i);
    if (cell.type !== 'code') continue;
    const source = cell.sharedModel.getSource();
    if (cell.executionCount === null && source.trim()) out.push({cell: i, source, error: 'never ran'});
    for (let j = 0; j < cell.outputs.length; j++) {
      const o = cell.outputs.get(j).toJSON();
      if (o.output_type === 'error') {
        out.push({cell: i, source, error: o.ename + ': ' + o.evalue, traceback: (o.traceback || []).join('\\n')});
      }
    }
  }
  return out;
}"""
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_the_lane_covers_every_notebook() -> None:
    assert [p.name[:2] for p in NOTEBOOKS] == [f"{i:02d}" for i in range(10)]


@pytest.fixture(scope="module")
def jlab(tmp_path_factory):
    ws = tmp_path_factory.mktemp("nb_ws")
    logs = tmp_path_factory.mktemp("nb_logs")
    user = logs / "lab-settings" / "@jupyterlab" / "docmanager-extension" / "plugin.jupyterlab-settings"
    user.parent.mkdir(parents=True)
    user.write_text(json.dumps({"autosaveInterval": AUTOSAVE_S}))  # the user's own: autosave every second
    tmp = tmp_path_factory.mktemp("nb_tmp")  # the kernels' TMPDIR
    slots = tmp_path_factory.mktemp("nb_slots")  # the notebooks' workspace slots
    cache = os.environ.get("RAG_LAB_VECTOR_CACHE") or str(ROOT / ".rag_lab" / "test-vectors.sqlite")
    Path(cache).parent.mkdir(parents=True, exist_ok=True)
    env = {"TMPDIR": str(tmp), ENV_ROOT: str(slots), "RAG_LAB_VECTOR_CACHE": cache}
    with running_jupyterlab(
        ROOT / "notebooks", ws, logs, demo_docs=40, extra=["--LabApp.expose_app_in_browser=True"], extra_env=env
    ) as srv:
        srv.tmp, srv.slots = tmp, slots
        yield srv


@pytest.fixture(scope="module")
def app(jlab):
    """One JupyterLab page for the module: each notebook is opened in it, not in a new page (a new
    page loads the whole application again)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with browser_context() as ctx:
        page = ctx.new_page()
        page.set_default_timeout(120_000)
        page.goto(jlab.url("/lab"))
        page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell && window.jupyterapp.started")
        yield page


def _held(lock: Path) -> bool:
    """Whether a process holds the slot's lock (probed without taking it for longer than the probe)."""
    with open(lock, "a") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        return False


def _describe(errors: list[dict[str, str]]) -> str:
    return "\n\n".join(
        f"cell {e['cell']}: {e['error']}\n--- source ---\n{e['source'][:600]}"
        + (f"\n--- traceback ---\n{ANSI.sub('', e.get('traceback', ''))[-3000:]}" if e.get("traceback") else "")
        for e in errors
    )


#: the open notebook's panel (``docmanager:open`` resolves to it; kept on ``window`` between calls)
PANEL = "window.__ragLabPanel"


@pytest.mark.parametrize("nb_file", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_the_notebook_runs_in_jupyterlab_and_leaves_nothing_behind(nb_file: Path, jlab, app) -> None:
    committed = nb_file.read_bytes()
    kernel = ""
    try:
        app.evaluate(
            f"async (path) => {{ {PANEL} = await window.jupyterapp.commands.execute('docmanager:open',"
            " {path, factory: 'Notebook'}); }",
            nb_file.name,
        )
        # the notebook's own kernel started and idle
        app.wait_for_function(
            f"() => {{ const s = {PANEL}.sessionContext; const k = s && s.session && s.session.kernel;"
            " return !!k && k.status === 'idle'; }",
            timeout=180_000,
        )
        kernel = app.evaluate(f"() => {PANEL}.sessionContext.session.kernel.id")
        app.evaluate(f"() => window.jupyterapp.shell.activateById({PANEL}.id)")
        # awaited: the command's promise settles when every cell has run (false when one failed)
        started = time.monotonic()
        ok = app.evaluate(
            "async (limit) => await Promise.race([window.jupyterapp.commands.execute('notebook:run-all-cells'),"
            " new Promise((resolve) => setTimeout(() => resolve('timeout'), limit))])",
            RUN_LIMIT_MS,
        )
        errors = app.evaluate(ERRORS_JS.replace("window.jupyterapp.shell.currentWidget", PANEL))
        app.screenshot(path=str(ARTIFACTS / f"notebook-{nb_file.stem}.png"))
        assert ok is True and not errors, f"{nb_file.name} in JupyterLab (run-all gave {ok!r}):\n{_describe(errors)}"
        assert app.evaluate(f"() => {PANEL}.context.model.dirty") is True  # the run changed the document
        assert _held(jlab.slots / "slot-0.lock"), f"{nb_file.name}'s workspace is not the first slot"
        # dirty since its first output: autosave, were it on, has had two intervals to write the file
        app.wait_for_timeout(max(0.0, 2 * AUTOSAVE_S - (time.monotonic() - started)) * 1000)
        assert nb_file.read_bytes() == committed, f"running {nb_file.name} rewrote the committed file"
        assert app.get_by_text("official Jupyter news").count() == 0
    finally:
        if kernel:
            assert jlab.delete(f"/api/kernels/{kernel}").status_code == 204
        app.evaluate(f"() => {{ if ({PANEL}) {{ {PANEL}.dispose(); }} {PANEL} = null; }}")  # closed unsaved
    deadline = time.monotonic() + 60
    slots = [s for s in jlab.slots.iterdir() if s.is_dir()]
    while any(any(s.iterdir()) for s in slots) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [str(p.relative_to(jlab.slots)) for s in slots for p in s.iterdir()]
    assert not left, f"{nb_file.name}: its workspace was not emptied when its kernel stopped: {left[:5]}"
    assert not _held(jlab.slots / "slot-0.lock")  # free again: the next kernel reuses it
    # a folder is what a workspace would leave (libraries' cache files, e.g. jieba's, are reused)
    made = sorted(p.name for p in jlab.tmp.iterdir() if p.is_dir())
    assert not made, f"{nb_file.name} left temporary folders in its kernel's TMPDIR: {made[:10]}"
    assert nb_file.read_bytes() == committed
