#!/usr/bin/env bash
# Build the one-folder desktop bundle into dist/FairDesk (time and size printed) and run the frozen smoke tests.
set -euo pipefail
cd "$(dirname "$0")/.."
make setup
.venv/bin/pip install --quiet 'pyinstaller>=6.5'
start=$(date +%s)
.venv/bin/pyinstaller --noconfirm --clean --distpath dist --workpath build/pyinstaller packaging/fairdesk.spec
echo "build: $(( $(date +%s) - start )) s, size: $(du -sh dist/FairDesk | cut -f1)"
FAIRDESK_PACKAGED=dist/FairDesk .venv/bin/python -m pytest -q tests/test_packaging.py
