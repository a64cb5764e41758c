# The two commands of the README:
#   make demo   set up (.venv) and run FairDesk on the bundled demo (GUI with a display, headless PDF otherwise)
#   make test   set up (.venv) and run the test suite (`make test-full` adds the full-size regression guards)
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-full bench setup clean wheelhouse lock

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -c requirements/test.txt -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/fairdesk --demo --out fairdesk-demo

test: $(STAMP)
	QT_QPA_PLATFORM=offscreen OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n 2 -m "not full"

# the full-size regression guards too (fresh age cohorts, the full demo-cohort age test, the confounded SCM); not timed on an idle machine this round
test-full: $(STAMP)
	QT_QPA_PLATFORM=offscreen OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n 2

bench: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python -m benchmarks

# The air-gapped install kit (README, "Install on an air-gapped workstation"): wheels, constraints, SBOM, SHA256SUMS.
# WHEELHOUSE_VARIANT=cpu-distributed adds Dask.distributed (--executor dask) to the kit.
WHEELHOUSE_VARIANT ?= cpu
# cyclonedx-bom lives in a tools venv of its own: in .venv its dependencies (rfc3987-syntax builds a grammar when
# jsonschema imports it: 1.9 s) slowed every schema check and would be frozen into the bundle.
TOOLS := .venv-tools
wheelhouse: $(STAMP)
	test -x $(TOOLS)/bin/python || $(PY) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install --quiet 'cyclonedx-bom>=7'
	$(BIN)/python packaging/wheelhouse.py --out wheelhouse --variant $(WHEELHOUSE_VARIANT) --sbom-python $(TOOLS)/bin/python

# Re-lock after changing pyproject.toml's dependencies (tests/test_install_kit.py fails until the locks agree).
lock: $(STAMP)
	$(BIN)/pip install --quiet 'pip-tools>=7.4'
	$(BIN)/pip-compile --quiet --allow-unsafe --strip-extras --no-emit-find-links --no-emit-index-url \
	    -o requirements/cpu.txt pyproject.toml requirements/cpu.in
	$(BIN)/pip-compile --quiet --allow-unsafe --strip-extras --no-emit-find-links --no-emit-index-url --extra test \
	    -o requirements/test.txt pyproject.toml requirements/test.in
	$(BIN)/pip-compile --quiet --allow-unsafe --strip-extras --no-emit-find-links --no-emit-index-url --extra distributed \
	    -o requirements/cpu-distributed.txt pyproject.toml requirements/cpu-distributed.in
	env -u PIP_FIND_LINKS PIP_CONFIG_FILE=/dev/null $(BIN)/pip-compile --quiet --allow-unsafe --strip-extras --no-emit-find-links \
	    --no-emit-index-url -o requirements/gpu.txt pyproject.toml requirements/gpu.in

clean:
	rm -rf $(VENV)
