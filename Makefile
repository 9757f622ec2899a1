# Two commands on a fresh machine: `make demo` (install, ingest the sample corpus, search) and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
export DAGSTER_DISABLE_TELEMETRY := 1

.PHONY: install demo test dev clean

$(BIN)/kb-assets: pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# CPU torch first: it lies on this machine's disk; any other torch downloads GBs
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e '.[dev]'
	touch $@

install: $(BIN)/kb-assets

demo: install
	$(BIN)/kb-assets ingest examples/corpus --kb handbook
	$(BIN)/kb-assets search "How long are backups kept?" --kb handbook --limit 3

test: install
	$(BIN)/python -m pytest -q

dev: install
	mkdir -p .kb/dagster
	DAGSTER_HOME=$(CURDIR)/.kb/dagster $(BIN)/dagster dev -w workspace.yaml

clean:
	-$(BIN)/kb-assets services down
	rm -rf .kb
