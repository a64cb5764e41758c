#!/usr/bin/env bash
# The README's air-gapped install, checked end to end: build the wheelhouse (network), then in a network namespace
# with no network at all verify the checksums, create a venv, install FairDesk from the wheelhouse only, ask its
# version, run the demo outside the checkout, and check that every installed distribution is pinned.
#   bash packaging/check_offline_install.sh WORKDIR        (WHEELHOUSE=DIR reuses a built one)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mkdir -p "${1:?usage: check_offline_install.sh WORKDIR}" && cd "$1" && pwd)"
PY="${PYTHON:-python3}"
if [ -z "${WHEELHOUSE:-}" ]; then
  "$ROOT/.venv/bin/python" "$ROOT/packaging/wheelhouse.py" --out "$WORK/wheelhouse"
  WHEELHOUSE="$WORK/wheelhouse"
fi
cp -r "$WHEELHOUSE" "$WORK/kit"   # "copy the folder" to the workstation
cat > "$WORK/offline.sh" <<INNER
set -euo pipefail
cd "$WORK/kit" && sha256sum -c --quiet SHA256SUMS && cd "$WORK"
"$PY" -c "import socket; s=socket.socket(); s.settimeout(3); s.connect(('1.1.1.1', 443))" 2>/dev/null \
  && { echo "the namespace has a network: not an offline check"; exit 1; } || true
"$PY" -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install --quiet --no-index --find-links "$WORK/kit" -c "$WORK/kit/constraints.txt" fairdesk
"$WORK/venv/bin/fairdesk-cli" --version
"$WORK/venv/bin/python" -m fairdesk --help > /dev/null
"$WORK/venv/bin/python" - "$WORK/kit/constraints.txt" <<'PYCHECK'
import re, sys
from importlib import metadata
pins = dict(re.match(r"([^=]+)==(.+)", l.strip()).groups() for l in open(sys.argv[1]) if "==" in l)
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
pins = {norm(k): v for k, v in pins.items()}
unpinned = sorted(f"{d.metadata['Name']} {d.version}" for d in metadata.distributions()
                  if norm(d.metadata["Name"]) not in pins and norm(d.metadata["Name"]) not in {"pip", "setuptools"})
assert not unpinned, f"installed but not pinned in constraints.txt: {unpinned}"
PYCHECK
cd "$WORK" && env -u DISPLAY -u WAYLAND_DISPLAY -u QT_QPA_PLATFORM FAIRDESK_HOME="$WORK/home" \
  "$WORK/venv/bin/fairdesk" --demo --headless --out "$WORK/demo"
test -s "$WORK/demo/demo-audit.pdf" && test -s "$WORK/demo/demo-cit.pdf"
echo "offline install: OK"
INNER
# no network at all: a fresh network namespace has only a loopback that is down; pip's own config (find-links,
# extra indexes on this build machine) is switched off so that only the kit can be used
env -u PIP_FIND_LINKS -u PIP_EXTRA_INDEX_URL -u PIP_INDEX_URL PIP_CONFIG_FILE=/dev/null unshare -n bash "$WORK/offline.sh"
