# Two commands on a fresh machine: `make run` (main job) and `make test` (whole suite).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip
TORCH  ?= torch==2.13.0
ARGS   ?=

.PHONY: run test install install-dev bench clean

# A GPU box already has its CUDA torch: reuse it through system site-packages instead of pulling a
# multi-GB wheel. Elsewhere install the pinned CPU-friendly torch before anything else can ask for one.
$(BIN)/python:
	@if $(PYTHON) -c "import torch" 2>/dev/null; then \
		$(PYTHON) -m venv --system-site-packages $(VENV); \
	else \
		$(PYTHON) -m venv $(VENV); \
	fi

$(VENV)/.installed: $(BIN)/python pyproject.toml
	@$(BIN)/python -c "import torch" 2>/dev/null || $(PIP) install -q "$(TORCH)"
	$(PIP) install -q -e .
	@touch $@

$(VENV)/.installed-dev: $(VENV)/.installed requirements-reference.txt
	$(PIP) install -q -e ".[dev]"
	$(PIP) install -q -r requirements-reference.txt
	$(PIP) install -q --no-deps toto-ts==0.2.0 kronos-finance==0.1.5 gluonts==0.17.0
	@touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

run: install
	$(BIN)/marketcast backtest $(ARGS)

# pytest exits 5 when it collects nothing: that is a broken suite, not a pass.
test: install-dev
	@$(BIN)/python -m pytest $(ARGS); rc=$$?; \
	if [ $$rc = 5 ]; then echo "pytest collected no tests"; exit 1; fi; exit $$rc

bench: install-dev
	$(PIP) install -q -e ".[bench]"
	$(PIP) install -q --no-deps vectorbt==1.2.0
	$(BIN)/python benchmarks/startup_bench.py
	$(BIN)/python benchmarks/backtest_bench.py
	$(BIN)/python benchmarks/vectorbt_compare.py

clean:
	rm -rf $(VENV) out .pytest_cache
