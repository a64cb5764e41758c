#!/usr/bin/env bash
# Build the one-folder desktop bundle into dist/FairDesk and smoke-test its CLI on the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
make setup
.venv/bin/pip install --quiet 'pyinstaller>=6.5'
.venv/bin/pyinstaller --noconfirm --clean --distpath dist --workpath build/pyinstaller packaging/fairdesk.spec
FAIRDESK_PACKAGED=dist/FairDesk .venv/bin/python -m pytest -q tests/test_packaging.py
