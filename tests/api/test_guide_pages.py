"""The user guide's code runs: every ```python block of the pages that promise so."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide"


@pytest.mark.parametrize("page", ["from-fairlearn.md", "notebook.md"])
def test_python_blocks_run(page, tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", (GUIDE / page).read_text(encoding="utf-8"), flags=re.S)
    assert blocks
    here = os.getcwd()
    os.chdir(tmp_path)  # the pages write their PDFs beside them
    try:
        scope: dict = {}
        for block in blocks:
            exec(compile(block, f"{page}", "exec"), scope)  # noqa: S102 - our own documentation
    finally:
        os.chdir(here)
    assert list(tmp_path.glob("*.pdf"))
