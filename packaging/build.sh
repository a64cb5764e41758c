#!/usr/bin/env bash
# Build the one-folder desktop bundle into dist/FairDesk (time and size printed) and run the frozen smoke tests.
# PyInstaller runs from the project's own .venv: it keeps a library's folder (torch/lib, pyarrow/) only for libraries
# under the build interpreter's site-packages; run from another environment that merely sees these packages, it
# copied every torch and pyarrow library a second time into the top level (+561 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
make setup
.venv/bin/pip install --quiet 'pyinstaller>=6.5'
start=$(date +%s)
.venv/bin/pyinstaller --noconfirm --clean --distpath dist --workpath build/pyinstaller packaging/fairdesk.spec
echo "build: $(( $(date +%s) - start )) s, size: $(du -sb dist/FairDesk | cut -f1) bytes ($(du -sh dist/FairDesk | cut -f1))"
FAIRDESK_PACKAGED=dist/FairDesk .venv/bin/python -m pytest -q tests/test_packaging.py
