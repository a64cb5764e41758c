# The two commands of the README:
#   make demo   set up (.venv) and run FairDesk on the bundled demo (GUI with a display, headless PDF otherwise)
#   make test   set up (.venv) and run the whole test suite
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench setup clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/fairdesk --demo --out fairdesk-demo

test: $(STAMP)
	QT_QPA_PLATFORM=offscreen OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q

bench: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV)
