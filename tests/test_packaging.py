"""Smoke test of a frozen build; runs only after packaging/build.sh (FAIRDESK_PACKAGED=dist/FairDesk)."""
import json
import os
import subprocess
from pathlib import Path

import pytest

BUNDLE = os.environ.get("FAIRDESK_PACKAGED")


@pytest.mark.skipif(not BUNDLE, reason="no frozen build to test (run packaging/build.sh)")
def test_frozen_cli_runs_the_demo(tmp_path):
    exe = Path(BUNDLE) / "fairdesk-cli"
    proc = subprocess.run([str(exe), "demo", "--out", str(tmp_path), "--n-boot", "200", "--quiet"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "demo-audit.pdf").read_bytes().startswith(b"%PDF")
    assert json.loads((tmp_path / "demo-audit.json").read_text())["records"]
    assert (tmp_path / "demo-cit.pdf").read_bytes().startswith(b"%PDF")  # the imaging part, frozen
