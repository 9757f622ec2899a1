# Two commands on a fresh machine (Python 3.11 and make, nothing else):
#   make demo   install, ingest the sample corpus end to end, show a search
#   make test   the test suite on real Postgres, Milvus Lite, SeaweedFS and the real model
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
export DAGSTER_DISABLE_TELEMETRY := 1

.PHONY: install browser demo lint test test-fast dev clean

$(BIN)/kb-assets: pyproject.toml constraints.txt
	@$(PYTHON) -c 'import venv, ensurepip' 2>/dev/null || { \
	  echo "$(PYTHON) with venv and ensurepip is required (Debian: apt-get install python3.11-venv)" >&2; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# CPU torch first: it lies on this machine's disk; any other torch downloads GBs
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e '.[dev]'
	touch $@

# the embedded vector engine: milvus-lite 2.5.1's binary, unpacked from its PyPI wheel under the venv
# (kb_assets/services/milvus_engine.py: the wheel itself cannot be installed beside pymilvus). Run by its path,
# as the engine's supervisor is: `-m` imports the package kb_assets.services first, which imports the module,
# and Python warns (RuntimeWarning: found in sys.modules) before running it
ENGINE := $(VENV)/milvus-lite-2.5.1/lib/milvus
$(ENGINE): $(BIN)/kb-assets
	$(BIN)/python kb_assets/services/milvus_engine.py install

install: $(BIN)/kb-assets $(ENGINE)

demo: install
	$(BIN)/kb-assets ingest examples/corpus --kb handbook
	$(BIN)/kb-assets search "How long are backups kept?" --kb handbook --limit 3

# the web page's tests drive Debian's headless chromium: installed here when root (waiting for another apt), else they skip
browser:
	@test -x /usr/bin/chromium -a -x /usr/bin/chromedriver || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get -o DPkg::Lock::Timeout=600 update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq chromium chromium-driver >/dev/null; \
	  else echo "web page tests skip: install Debian's chromium and chromium-driver to run them" >&2; fi; }

# lint, the layer contract (pyproject.toml [tool.importlinter]) and the type check: the same in make test and .ci/run
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache
	$(BIN)/mypy

test: install browser lint
	$(BIN)/python -m pytest -q

# pure functions of parsing, structure, chunking, scoring and planning: no service, seconds
test-fast: install
	$(BIN)/python -m pytest -q -m "not services and not slow"

# the Dagster UI on the instance `kb-assets ingest` writes ($KB_HOME/dagster, default ./.kb/dagster)
dev: install
	mkdir -p $${KB_HOME:-$(CURDIR)/.kb}/dagster
	DAGSTER_HOME=$${KB_HOME:-$(CURDIR)/.kb}/dagster $(BIN)/dagster dev -w workspace.yaml

clean:
	-$(BIN)/kb-assets services down
	rm -rf .kb
