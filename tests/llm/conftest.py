"""The ``llm`` tests run the pipeline and the ragas judge against a real llama-server (SmolLM2-135M)
started on a free loopback port. They run only when asked for (``-m llm``, as ``make test-llm``
does: minutes of CPU) and skip when the server is not built (``make judge`` builds it); a plain
``pytest tests`` and ``make test`` leave them out."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from rag_lab.eval.judge_server import LlamaServer, judge_available

REASON = judge_available()


def _asked_for(config: pytest.Config) -> bool:
    expr = str(config.getoption("markexpr", "") or "")
    return "llm" in expr and "not llm" not in expr


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    asked = _asked_for(config)
    for item in items:
        if "tests/llm/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.llm)
            if not asked:
                item.add_marker(
                    pytest.mark.skip(reason="needs the llama-server judge: run with -m llm (make test-llm)")
                )
            elif REASON:
                item.add_marker(pytest.mark.skip(reason=f"llama-server judge not built: {REASON.splitlines()[0]}"))


@pytest.fixture(scope="session")
def llama() -> Iterator[LlamaServer]:
    t0 = time.perf_counter()
    with LlamaServer(startup_timeout=180) as srv:  # the default context: default params fit
        srv.startup_s = time.perf_counter() - t0  # type: ignore[attr-defined]
        yield srv
