# rag_lab — `make demo` and `make test` each build .venv when it is missing.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export RAGAS_DO_NOT_TRACK := true
export TOKENIZERS_PARALLELISM := false

.PHONY: demo test test-fast notebooks venv clean lab

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev,plots,eval,notebook,milvus,distributed]"
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(PY) -m rag_lab.demo

test: $(STAMP)
	$(VENV)/bin/ruff check rag_lab tests scripts benchmarks notebooks/build_notebooks.py
	$(VENV)/bin/ruff format --check rag_lab tests scripts benchmarks notebooks/build_notebooks.py
	$(PY) -m mypy rag_lab
	$(PY) -m pytest -q --nbval-lax tests notebooks
	$(PY) -m rag_lab.eval.cli gate --baseline reports/baseline.json --quiet --out reports

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow" tests

# JupyterLab on 127.0.0.1 over notebooks/, the demo KB ingested first (LAB_ARGS="--port 9999 --no-browser")
lab: $(STAMP)
	$(PY) -m rag_lab.lab.launch $(LAB_ARGS)

notebooks: $(STAMP)
	$(PY) notebooks/build_notebooks.py

clean:
	rm -rf $(VENV) .rag_lab .pytest_cache
