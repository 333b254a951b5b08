# Two commands on a fresh machine: `make run` (main job) and `make test` (whole suite).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip
# Every install honours constraints.txt: a fresh clone gets the versions the suite was last run green on.
PIPC   := $(PIP) install -q -c constraints.txt
TORCH  ?= torch==2.13.0
ARGS   ?=
# `make test` runs the suite on this many pytest-xdist workers, each test file on one worker (its module fixtures
# made once); 2 = the CI machine's cores. WORKERS=0 runs it in one process.
WORKERS ?= 2

.PHONY: run test fuzz install install-dev bench clean lock

# A GPU box already has its CUDA torch: reuse it through system site-packages instead of pulling a
# multi-GB wheel. Elsewhere install the pinned CPU-friendly torch before anything else can ask for one.
$(BIN)/python:
	@if $(PYTHON) -c "import torch" 2>/dev/null; then \
		$(PYTHON) -m venv --system-site-packages $(VENV); \
	else \
		$(PYTHON) -m venv $(VENV); \
	fi

$(VENV)/.installed: $(BIN)/python pyproject.toml constraints.txt
	@$(BIN)/python -c "import torch" 2>/dev/null || $(PIP) install -q "$(TORCH)"
	$(PIPC) -e .
	@touch $@

$(VENV)/.installed-dev: $(VENV)/.installed requirements-reference.txt
	$(PIPC) -e ".[dev]"
	$(PIPC) -r requirements-reference.txt
	$(PIP) install -q --no-deps toto-ts==0.2.0 kronos-finance==0.1.5 gluonts==0.17.0
	$(PIP) install -q --no-deps --ignore-requires-python toto-2==2.0.0 dd-unit-scaling==0.1.0 unit-scaling==0.3.5
	@# the adapters' extras (chronos, timesfm, tirex) come with .[dev]: fail here, not in the tests, if one did not
	$(BIN)/python -c "import chronos.chronos2, timesfm, tirex"
	@touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

run: install
	$(BIN)/marketcast backtest $(ARGS)

# The layers contract first (pyproject.toml [tool.importlinter]); pytest exits 5 when it collects nothing: that is
# a broken suite, not a pass.
test: install-dev
	$(BIN)/lint-imports --no-cache
	@$(BIN)/python -m pytest -n $(WORKERS) --dist loadfile $(ARGS); rc=$$?; \
	if [ $$rc = 5 ]; then echo "pytest collected no tests"; exit 1; fi; exit $$rc

# The fuzz suite's long profile (MARKETCAST_FUZZ=long: >= 4,000 examples of damaged bars, specs, configs,
# run stores, special outputs, deep TOML, endless queries, options past their limits and full disks; `make test`
# runs its bounded CI profile). MARKETCAST_FUZZ_LOG=FILE appends each failing example.
fuzz: install-dev
	@MARKETCAST_FUZZ=long $(BIN)/python -m pytest tests/fuzz -p no:cacheprovider --hypothesis-show-statistics $(ARGS); \
	rc=$$?; if [ $$rc = 5 ]; then echo "pytest collected no tests"; exit 1; fi; exit $$rc

bench: install-dev
	$(PIPC) -e ".[bench]"
	$(PIP) install -q --no-deps vectorbt==1.2.0
	$(BIN)/python benchmarks/startup_bench.py
	$(BIN)/python benchmarks/backtest_bench.py
	$(BIN)/python benchmarks/vectorbt_compare.py

# Refresh constraints.txt from a venv the whole suite just passed in.
lock:
	@{ sed -n 1,3p constraints.txt; $(PIP) freeze | grep -viE "^(#|-e |torch==|gluonts==|toto-ts==|kronos-finance==|toto-2==|dd-unit-scaling==|unit-scaling==|vectorbt==|ruff==)"; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

clean:
	rm -rf $(VENV) out .pytest_cache
