"""`make lab`: prepare the demo knowledge base and open JupyterLab on the notebooks.

    .venv/bin/python -m rag_lab.lab.launch [--port 8888] [--no-browser] [--workspace .rag_lab] [--demo-docs N|all]

A first start ingests a quick slice of the demo corpus (50 documents, seconds; the chunks' vectors
only, the re-scorer's and the answerer's texts are embedded when a question needs them) into the
knowledge base ``hotpotqa`` of the workspace; later runs find it ready. ``--demo-docs all`` adds the rest of
the corpus (994 documents, minutes), ``--demo-docs N`` asks for a slice of N >= 1. Then it starts JupyterLab bound to 127.0.0.1 only, with the ``notebooks/`` folder as
its root and ``RAG_LAB_WORKSPACE`` pointing the notebooks at the prepared workspace. Arguments
after ``--`` go to ``jupyter lab`` unchanged.

JupyterLab runs with the settings of :data:`LAB_OVERRIDES` as its defaults (written to
``<workspace>/jupyterlab/overrides.json``; your own settings still win): no news or update toast
(nothing is fetched from a website), and no autosave, so running a committed notebook does not
rewrite it — its outputs change on disk only when you save it (``git checkout notebooks/`` undoes
that). The notebooks' workspaces are not temporary folders: each kernel takes a reused slot
under ``.rag_lab/notebooks`` (:mod:`rag_lab.lab.notebook_workspace`).

JupyterLab asks for a token: its own (printed when it starts) unless ``--token TOKEN`` names one.
An empty token would switch authentication off, so ``--token=`` is refused; running without
authentication takes ``--no-auth``, which says so on stderr (any local user or process could
then run code as you).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import socket
import sys
from pathlib import Path
from typing import cast

from rag_lab.cliutil import flag, opt, plain_parser
from rag_lab.prompts.templates import REPO_ROOT

#: documents of the quick demo KB a first start ingests (see rag_lab.demo.QUICK_DOCS)
QUICK = 50

__all__ = [
    "LAB_OVERRIDES",
    "NO_AUTH_WARNING",
    "demo_docs_arg",
    "free_port",
    "jupyter_command",
    "main",
    "prepare_demo",
    "server_token",
    "write_lab_settings",
]

#: JupyterLab setting defaults the launcher sets (plugin id → settings; checked against the
#: installed JupyterLab's schemas by the tests): no news feed and no update check (the toast that
#: asks for them included), no autosave (a committed notebook is written only when you save it)
LAB_OVERRIDES: dict[str, dict[str, object]] = {
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/docmanager-extension:plugin": {"autosave": False},
}

#: what ``--no-auth`` prints (stderr) before JupyterLab starts
NO_AUTH_WARNING = (
    "warning: --no-auth: JupyterLab runs without authentication; any user or process on this machine "
    "can run code as you through http://127.0.0.1:{port}/"
)


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_lab_settings(folder: Path) -> Path:
    """Write ``folder/overrides.json``: :data:`LAB_OVERRIDES` over the overrides the installed
    JupyterLab already has (``<sys.prefix>/share/jupyter/lab/settings/overrides.json``, kept); the
    folder is JupyterLab's ``app_settings_dir``. Returns ``folder``."""
    merged: dict[str, object] = {}
    installed = Path(sys.prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    if installed.is_file():
        try:
            found = json.loads(installed.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            found = {}
        if isinstance(found, dict):
            merged.update(found)
    for plugin, values in LAB_OVERRIDES.items():
        current = merged.get(plugin)
        merged[plugin] = {**(current if isinstance(current, dict) else {}), **values}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "overrides.json").write_text(json.dumps(merged, indent=2) + "\n", encoding="utf-8")
    return folder


def jupyter_command(
    port: int,
    root: Path,
    open_browser: bool = True,
    token: str | None = None,
    extra: list[str] | None = None,
    settings_dir: Path | None = None,
) -> list[str]:
    """The ``jupyter lab`` command line: loopback only, ``root`` as the file browser's root,
    ``settings_dir`` (see :func:`write_lab_settings`) as its app settings folder."""
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.root_dir={root}",
        "--ServerApp.open_browser=" + ("True" if open_browser else "False"),
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",  # no PyPI queries from the extension manager
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # containers and CI run as root
        cmd.append("--allow-root")
    if settings_dir is not None:
        cmd.append(f"--LabApp.app_settings_dir={settings_dir}")
    if token is not None:
        cmd.append(f"--IdentityProvider.token={token}")
    return cmd + list(extra or [])


def demo_docs_arg(value: str) -> int | None:
    """``--demo-docs``: a whole number >= 1, or ``all`` (``None``: the whole corpus)."""
    if value.strip().lower() == "all":
        return None
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"a whole number of documents >= 1 or 'all', got {value!r}")
    return n


def prepare_demo(workspace: Path, demo_docs: int | None = QUICK) -> str:
    """Make the demo KB of ``workspace`` ready (``demo_docs``: a slice, ``None``: the whole corpus;
    a KB that already holds that many is left alone) and return the line to print."""
    from rag_lab.demo import KB, demo_documents, demo_kb_size, ensure_demo_kb
    from rag_lab.lab.lab import Lab

    # the chunks' vectors only: the re-scorer's and the answerer's texts are embedded (and cached)
    # when a question first needs them, not before JupyterLab can start
    lab = Lab.from_config({"ingest": {"prepare": "none"}}, workspace=workspace)
    try:
        report = ensure_demo_kb(lab, max_docs=demo_docs, progress=True)
        held = demo_kb_size(lab)
    finally:
        lab.workspace.close()
    total = len(demo_documents())
    line = f"demo knowledge base '{KB}' in {workspace}: " + ("ready" if report is None else f"ingested ({report})")
    line += f"; it holds {held} of the corpus's {total} documents"
    if held < total:
        line += (
            " (a quick slice): `make lab LAB_ARGS='--demo-docs all'` adds the rest (minutes), "
            "or `ensure_demo_kb(lab)` from rag_lab.demo in a notebook"
        )
    return line


def server_token(ap: argparse.ArgumentParser, args: argparse.Namespace) -> str | None:
    """The token JupyterLab gets: ``None`` (it makes one), the one given, or ``""`` with
    ``--no-auth`` (warned on stderr); an empty ``--token``, or both options, is a usage error."""
    if args.no_auth:
        if args.token:
            ap.error("argument --no-auth: not allowed with --token (a token turns authentication on)")
        print(NO_AUTH_WARNING.format(port=args.port), file=sys.stderr, flush=True)
        return ""
    if args.token is not None and not args.token.strip():
        ap.error(
            "argument --token: an empty token would switch JupyterLab's authentication off; leave --token out "
            "(JupyterLab makes one and prints it), give one, or pass --no-auth to run without authentication"
        )
    return cast("str | None", args.token)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    ap = plain_parser(
        "make lab",
        __doc__.split("\n\n")[0],
        opt("--port", type=int, default=int(os.environ.get("RAG_LAB_LAB_PORT", "8888"))),
        flag("--no-browser", "do not open a browser (headless, CI)"),
        opt("--workspace", "workspace holding the demo KB", default=str(REPO_ROOT / ".rag_lab")),
        opt("--notebooks", "JupyterLab's root folder", default=str(REPO_ROOT / "notebooks")),
        opt(
            "--demo-docs",
            f"demo KB size: a slice of N >= 1 documents (default {QUICK}, seconds) or 'all' (994, minutes)",
            type=demo_docs_arg,
            default=QUICK,
            metavar="N|all",
        ),
        opt("--token", "server token, not empty (default: JupyterLab makes one and prints it)"),
        flag("--no-auth", "run JupyterLab without authentication (loopback only; warned)"),
    )
    args = ap.parse_args(argv)
    token = server_token(ap, args)

    # looked up, not imported: importing jupyterlab takes seconds, and the server started below imports it again
    if importlib.util.find_spec("jupyterlab") is None:
        print("JupyterLab is not installed in this environment: run `make lab` (it installs the notebook extra)")
        return 2

    workspace = Path(args.workspace).resolve()
    print(prepare_demo(workspace, args.demo_docs), flush=True)
    env = dict(os.environ, RAG_LAB_WORKSPACE=str(workspace))
    settings = write_lab_settings(workspace / "jupyterlab")
    cmd = jupyter_command(args.port, Path(args.notebooks).resolve(), not args.no_browser, token, extra, settings)
    print(f"JupyterLab on http://127.0.0.1:{args.port}/lab (notebooks: {args.notebooks}); Ctrl-C stops it", flush=True)
    os.execve(sys.executable, cmd, env)
    return 0  # pragma: no cover - execve does not return


if __name__ == "__main__":
    raise SystemExit(main())
