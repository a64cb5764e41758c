"""The demo writes its predictions table, and the README's command-line examples run on it."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
MARK = "<!-- demo-table commands"


def readme_demo_commands() -> list[list[str]]:
    """The commands of the README block after the demo-table marker, one argv each (continuation lines joined)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(re.escape(MARK) + r".*?```bash\n(.*?)```", text, flags=re.S).group(1)
    return [shlex.split(line) for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def test_readme_block_audits_the_demo_table():
    commands = readme_demo_commands()
    assert [c[:3] for c in commands] == [["fairdesk-cli", "audit", "groups"], ["fairdesk-cli", "audit", "slices"]]
    assert all(c[3] == "fairdesk-demo/demo-predictions.csv" for c in commands)


def test_demo_writes_the_table_the_readme_commands_run_on(tmp_path, monkeypatch):
    from fairdesk.jobs import demo

    # the imaging half of the demo is not what this checks (and costs most of its time)
    monkeypatch.setattr(demo, "imaging_demo", lambda *a, **k: {"pdf": None, "audit_id": None, "images_id": None})
    out = demo.run_demo(tmp_path / "fairdesk-demo", n_boot=100, n_stays=1200)
    table = pd.read_csv(out["predictions"])
    assert out["predictions"] == tmp_path / "fairdesk-demo" / "demo-predictions.csv"
    assert {"label", "score", "task", "split", "patient_id", "sex", "ethnicity", "age"} <= set(table.columns)
    assert len(table) > 1200 and set(table["split"]) >= {"train", "test", "val"}
    for argv in readme_demo_commands():
        argv = [sys.executable, "-m", "fairdesk", *argv[1:], "--n-boot", "100", "--quiet"]
        run = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=600,
                             env=dict(os.environ, PYTHONPATH=str(ROOT)))  # this checkout's fairdesk
        assert run.returncode == 0, (argv, run.stderr)
        assert (tmp_path / argv[argv.index("--pdf") + 1]).read_bytes()[:5] == b"%PDF-"
