"""The ``llm`` tests run the pipeline and the ragas judge against a real llama-server (SmolLM2-135M)
started on a free loopback port; they are skipped when the server is not built
(``make judge`` / ``make test-llm`` build it) and deselected by ``make test``."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from rag_lab.eval.judge_server import LlamaServer, judge_available

REASON = judge_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/llm/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.llm)
            if REASON:
                item.add_marker(pytest.mark.skip(reason=f"llama-server judge not built: {REASON.splitlines()[0]}"))


@pytest.fixture(scope="session")
def llama() -> Iterator[LlamaServer]:
    t0 = time.perf_counter()
    with LlamaServer(ctx_size=4096, startup_timeout=180) as srv:
        srv.startup_s = time.perf_counter() - t0  # type: ignore[attr-defined]
        yield srv
