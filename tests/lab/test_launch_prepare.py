"""`make lab`'s preparation: a first start ingests a quick slice, ``--demo-docs N``
works for any N >= 1 and refuses anything else in one line. No JupyterLab is started."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_lab import demo
from rag_lab.lab import launch


def test_demo_docs_argument() -> None:
    assert launch.demo_docs_arg("all") is None
    assert launch.demo_docs_arg("10") == 10
    assert launch.demo_docs_arg("1") == 1
    assert launch.QUICK == demo.QUICK_DOCS


@pytest.mark.parametrize("bad", ["0", "-3", "ten", "2.5"])
def test_demo_docs_refuses_in_one_line(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        launch.main(["--demo-docs", bad, "--no-browser"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(err)
    assert err[-1].endswith(f"argument --demo-docs: a whole number of documents >= 1 or 'all', got {bad!r}")


@pytest.mark.parametrize("n", [1, 2, 3, 10, 39, 41, 993])
def test_any_slice_size_gives_that_many_documents(n: int) -> None:
    docs = demo.demo_documents(n)  # used to raise ValueError under 40 (the first 20 queries' gold)
    assert len(docs) == n
    assert len({d["id"] for d in docs}) == n


def test_prepare_ingests_small_slices_and_then_finds_them_ready(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    first = launch.prepare_demo(ws, 1)
    assert f"demo knowledge base 'hotpotqa' in {ws}: ingested" in first
    assert "holds 1 of the corpus's 994 documents" in first and "--demo-docs all" in first
    more = launch.prepare_demo(ws, 10)  # adds the 9 it lacks, not the 10 again
    assert "ingested" in more and "holds 10 of the corpus's 994" in more
    assert ": 9 added, 0 updated, 0 unchanged" in more
    again = launch.prepare_demo(ws, 5)  # holds more than asked: left alone
    assert f"in {ws}: ready; it holds 10 of" in again


def test_the_demo_kb_holds_the_chunk_vectors_only(tmp_path: Path) -> None:
    """The first start embeds the chunks; the re-scorer's and answerer's texts wait for a question."""
    line = launch.prepare_demo(tmp_path / "ws", 2)
    assert "ingested" in line and " vectors" in line
    assert "rerank/answer texts cached" not in line


def test_without_jupyterlab_the_launcher_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = launch.importlib.util.find_spec
    monkeypatch.setattr(
        launch.importlib.util, "find_spec", lambda name, *a: None if name == "jupyterlab" else real(name, *a)
    )
    assert launch.main(["--no-browser", "--workspace", str(tmp_path / "ws")]) == 2
    assert "JupyterLab is not installed" in capsys.readouterr().out
    assert not (tmp_path / "ws").exists()  # nothing ingested before the check


@pytest.mark.parametrize("argv", [["--token="], ["--token", "  "], ["--no-auth", "--token", "secret"]])
def test_an_empty_token_or_no_auth_with_a_token_is_refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        launch.main([*argv, "--no-browser"])  # refused before anything is prepared or started
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "argument --token: an empty token would switch JupyterLab's authentication off" in err or (
        "argument --no-auth: not allowed with --token" in err
    )


def test_no_auth_is_explicit_and_warned(capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    ap = argparse.ArgumentParser()
    args = argparse.Namespace(no_auth=True, token=None, port=8899)
    assert launch.server_token(ap, args) == ""
    assert capsys.readouterr().err.strip() == launch.NO_AUTH_WARNING.format(port=8899)
    assert "--IdentityProvider.token=" in launch.jupyter_command(8899, Path("."), False, "")
    plain = argparse.Namespace(no_auth=False, token=None, port=8899)
    assert launch.server_token(ap, plain) is None and capsys.readouterr().err == ""
    assert not any("IdentityProvider" in a for a in launch.jupyter_command(8899, Path("."), False, None))


def test_lab_overrides_are_valid_settings_of_the_installed_jupyterlab() -> None:
    """Each override names a plugin whose schema the installed JupyterLab ships, a property of
    that schema, and a value the schema allows (a string from its choices, or its type)."""
    import json
    import sys

    schemas = Path(sys.prefix) / "share" / "jupyter" / "lab" / "schemas"
    for plugin, values in launch.LAB_OVERRIDES.items():
        package, name = plugin.split(":")
        schema = json.loads((schemas / package / f"{name}.json").read_text(encoding="utf-8"))
        for key, value in values.items():
            prop = schema["properties"][key]
            if "oneOf" in prop:
                assert value in [c["const"] for c in prop["oneOf"]], (plugin, key, value)
            else:
                assert prop["type"] == {bool: "boolean", str: "string", int: "number"}[type(value)], (plugin, key)
    assert launch.LAB_OVERRIDES["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"
    assert launch.LAB_OVERRIDES["@jupyterlab/docmanager-extension:plugin"]["autosave"] is False


def test_lab_settings_are_written_over_the_installed_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json
    import sys

    prefix = tmp_path / "prefix"
    installed = prefix / "share" / "jupyter" / "lab" / "settings"
    installed.mkdir(parents=True)
    (installed / "overrides.json").write_text(
        json.dumps(
            {
                "@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Dark"},
                "@jupyterlab/docmanager-extension:plugin": {"autosave": True, "autosaveInterval": 30},
            }
        )
    )
    monkeypatch.setattr(sys, "prefix", str(prefix))
    folder = launch.write_lab_settings(tmp_path / "ws" / "jupyterlab")
    written = json.loads((folder / "overrides.json").read_text())
    assert written["@jupyterlab/apputils-extension:themes"] == {"theme": "JupyterLab Dark"}  # kept
    assert written["@jupyterlab/docmanager-extension:plugin"] == {"autosave": False, "autosaveInterval": 30}
    assert written["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"
    cmd = launch.jupyter_command(8899, Path("."), False, None, ["--x"], folder)
    assert f"--LabApp.app_settings_dir={folder}" in cmd and cmd[-1] == "--x"  # extra arguments come last
