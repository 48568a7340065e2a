"""`make lab` from a fresh clone: the launcher prepares the demo KB and JupyterLab serves the lab
page and the repository's notebooks on loopback (fetched over HTTP)."""

from __future__ import annotations

import json
import re

import pytest

from tests.lab.jlab_launch import ROOT, running_jupyterlab


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory):
    ws = tmp_path_factory.mktemp("make_lab_ws")
    with running_jupyterlab(ROOT / "notebooks", ws, tmp_path_factory.mktemp("make_lab_logs")) as srv:
        yield srv, ws


def test_the_lab_page_is_served(lab_server):
    srv, _ = lab_server
    page = srv.get("/lab")
    assert page.status_code == 200
    assert "<title>JupyterLab</title>" in page.text
    m = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', page.text, re.S)
    assert m, page.text[:2000]
    cfg = json.loads(m.group(1))
    assert cfg["baseUrl"] == "/" and cfg["appName"] == "JupyterLab"
    assert cfg["notebookStartsKernel"] is True


def test_the_notebook_list_is_the_repositorys(lab_server):
    srv, _ = lab_server
    listing = srv.get("/api/contents")
    assert listing.status_code == 200
    names = {item["name"] for item in listing.json()["content"] if item["type"] == "notebook"}
    expected = {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert names == expected and "00_quickstart.ipynb" in names and "08_workbench_tour.ipynb" in names
    nb = srv.get("/api/contents/03_rerank_composite_mmr.ipynb")
    assert nb.status_code == 200 and nb.json()["type"] == "notebook"


def test_the_demo_kb_is_ready_and_the_kernel_sees_it(lab_server):
    """The launcher ingested the demo KB and passes its workspace to the notebooks' kernels."""
    from rag_lab.knowledge.workspace import Workspace

    srv, ws = lab_server
    with Workspace(ws) as w:
        kbs = {kb.name: kb for kb in w.list_kbs()}
        assert "hotpotqa" in kbs and w.store.count_chunks(kbs["hotpotqa"].id) >= 60
    assert f"demo knowledge base 'hotpotqa' in {ws}" in srv.log.read_text()
    kernelspecs = srv.get("/api/kernelspecs").json()
    assert "python3" in kernelspecs["kernelspecs"]


def test_no_token_no_access(lab_server):
    import httpx

    srv, _ = lab_server
    assert httpx.get(srv.base_url + "/api/contents", timeout=10).status_code == 403


def test_no_news_toast_and_no_autosave(lab_server):
    """The launcher's setting overrides reach JupyterLab: they are the defaults its settings API
    serves (no news feed, no update check, no autosave), and they are written under the workspace."""
    from rag_lab.lab.launch import LAB_OVERRIDES

    srv, ws = lab_server
    assert (ws / "jupyterlab" / "overrides.json").is_file()
    for plugin, values in LAB_OVERRIDES.items():
        got = srv.get(f"/lab/api/settings/{plugin}")
        assert got.status_code == 200, plugin
        props = got.json()["schema"]["properties"]
        assert {k: props[k]["default"] for k in values} == values, plugin
