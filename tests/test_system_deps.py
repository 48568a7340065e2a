"""scripts/system_deps.sh: what `make test` and `.ci/run` run before any test. These runs never
install anything: the script sees a PATH of stubs, and a stub ``id`` makes it a user without
root or sudo, so a missing package ends in the message naming the command."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "system_deps.sh"
BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="bash is not installed")


def _stub_path(tmp_path: Path, present: list[str], uid: int = 1000) -> str:
    """A folder holding only ``bash``, ``id`` (printing ``uid``), ``apt-get`` (which fails if
    called) and a stub for each name of ``present``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "bash").symlink_to(BASH or "/bin/bash")
    stubs = {"id": f"echo {uid}", "apt-get": "echo apt-get was called >&2; exit 99"}
    stubs.update({name: "exit 0" for name in present})
    for name, body in stubs.items():
        p = bin_dir / name
        p.write_text(f"#!{BASH}\n{body}\n")
        p.chmod(0o755)
    return str(bin_dir)


def _run(tmp_path: Path, path: str, *groups: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": path, "HOME": str(tmp_path)}
    return subprocess.run(
        [BASH or "bash", str(SCRIPT), *groups], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_missing_package_without_root_names_the_command_and_fails(tmp_path: Path) -> None:
    res = _run(tmp_path, _stub_path(tmp_path, present=["cmake", "g++", "make"]), "judge", "test")
    assert res.returncode == 1, res
    assert "apt-get was called" not in res.stderr
    assert "redis-server" in res.stderr and "chromium" in res.stderr
    last = res.stderr.strip().splitlines()[-1].strip()
    assert last.startswith("sudo sh -c 'apt-get update && apt-get install -y --no-install-recommends ")
    assert "cmake" not in last  # present: not asked for


def test_judge_group_names_the_build_tools(tmp_path: Path) -> None:
    res = _run(tmp_path, _stub_path(tmp_path, present=["g++"]), "judge")
    assert res.returncode == 1
    assert res.stderr.strip().splitlines()[-1].strip() == (
        "sudo sh -c 'apt-get update && apt-get install -y --no-install-recommends cmake make'"
    )


def test_everything_present_checks_only(tmp_path: Path) -> None:
    res = _run(tmp_path, _stub_path(tmp_path, present=["cmake", "g++", "make"]), "judge")
    assert (res.returncode, res.stdout, res.stderr) == (0, "", "")


def test_unknown_group_is_refused(tmp_path: Path) -> None:
    res = _run(tmp_path, _stub_path(tmp_path, present=[]), "tests")
    assert res.returncode == 2
    assert "unknown group 'tests' (known: test, judge)" in res.stderr
