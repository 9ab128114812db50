# Two commands: `make serve` (set up, train champions from the data at hand, serve) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: serve test clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -e '.[dev,ray]'
	@# torch must be the CPU build: no CUDA wheel may ever land here
	@if $(BIN)/pip freeze | grep -i '^nvidia-' | grep -iv '^nvidia-ml-py'; then echo "CUDA wheels were installed" >&2; exit 1; fi
	touch $(STAMP)

# the shared public datasets, when they sit beside the checkout
PREFLIGHT_DATASETS ?= $(wildcard ../shared/datasets)
ifneq ($(PREFLIGHT_DATASETS),)
export PREFLIGHT_DATASETS
endif

serve: $(STAMP)
	$(BIN)/preflight serve

test: $(STAMP)
	$(BIN)/ruff format --check data features models service bench tests
	$(BIN)/ruff check data features models service bench tests
	@# mypy checks the installed layout (preflight.data, ...): a folder of links lets it follow imports across packages
	mkdir -p .typecheck/preflight && for d in data features models service; do ln -sfn ../../$$d .typecheck/preflight/$$d; done
	ln -sfn ../../service/library/__init__.py .typecheck/preflight/__init__.py
	cd .typecheck && ../$(BIN)/mypy --config-file ../pyproject.toml -p preflight
	@# two processes, as CI has two cores; tests/conftest.py says which tests share one; the 15 slowest listed
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=15

clean:
	rm -rf $(VENV) .preflight .typecheck
