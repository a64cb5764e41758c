"""Rendering a PDF never runs code from the user's home folder: reportlab by itself imports ``~/.reportlab_mods``
and executes ``~/.reportlab_settings`` when they exist."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_pdf_does_not_run_the_home_folders_reportlab_files(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    marker = tmp_path / "ran"
    code = f"open({str(marker)!r}, 'a').write('x')\n"
    (home / ".reportlab_mods").write_text(code)
    (home / ".reportlab_settings").write_text(code)
    script = ("from fairdesk.core.reports.document import Report, Section, Paragraph\n"
              "from fairdesk.core.reports.pdf import write_pdf\n"
              f"write_pdf(Report('t', 's', '2026-01-01', 11, [Section('s', 'S', [Paragraph('p')])]), {str(tmp_path / 'r.pdf')!r})\n")
    env = dict(os.environ, HOME=str(home), PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "r.pdf").is_file()
    assert not marker.exists(), "reportlab ran a file from the home folder"
