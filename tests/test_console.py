"""Print anywhere: every terminal write of ``fairdesk-cli`` (and the desktop app's headless path) goes through
:func:`fairdesk.console.say`, which survives any console encoding, strips what could drive or deceive a terminal from
text that came from data, and never turns a stored result into a failed run.

* the AST scan: no ``print`` or ``sys.stdout/stderr.write`` in the CLI outside that module (code added later is
  caught too);
* the property over console encodings and data text: ``say`` never raises, and what reaches the console holds no
  escape sequence, control character (but newline and tab), bidi override or zero-width character;
* the reported case: ``audit slices`` with a non-Latin group name on a cp1252 console exits 0.
"""
from __future__ import annotations

import ast
import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from fairdesk.console import say

ROOT = Path(__file__).resolve().parents[1]
FRONT_ENDS = sorted((ROOT / "fairdesk" / "cli").glob("*.py")) + [ROOT / "fairdesk" / "gui" / "app.py",
                                                                   ROOT / "fairdesk" / "__main__.py",
                                                                   ROOT / "fairdesk" / "paths.py"]


def _terminal_writes(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id == "print":
            found.append(f"{path.name}:{node.lineno} print()")
        elif (isinstance(f, ast.Attribute) and f.attr in ("write", "writelines") and isinstance(f.value, ast.Attribute)
              and f.value.attr in ("stdout", "stderr", "__stdout__", "__stderr__")):
            found.append(f"{path.name}:{node.lineno} sys.{f.value.attr}.{f.attr}()")
    return found


def test_every_terminal_write_of_the_front_ends_goes_through_say():
    found = [w for path in FRONT_ENDS for w in _terminal_writes(path)]
    assert not found, f"write through fairdesk.console.say instead: {found}"


ENCODINGS = st.sampled_from(["cp1252", "ascii", "latin-1", "utf-8", "cp437", "cp850", "shift_jis", "gbk", "koi8-r",
                             "iso8859-7", "utf-16"])
HIDDEN = set(range(0x00, 0x20)) - {0x09, 0x0A} | set(range(0x7F, 0xA0)) | {
    0x061C, 0x180E, 0xFEFF, *range(0x200B, 0x2010), *range(0x202A, 0x202F), *range(0x2060, 0x2065),
    *range(0x2066, 0x206A)}
DATA_TEXT = st.lists(st.one_of(st.text(max_size=6), st.sampled_from(
    ["\x1b[31m", "\x1b]0;owned\x07", "\x1b]8;;http://x\x1b\\", "\x9b2J", "\u202e", "\u2066", "\u200b", "\ufeff",
     "\r", "Δ", "中文", "λ", "±", "\x00", "\x7f", "\x85"])), max_size=8).map("".join)


@settings(max_examples=60, deadline=None)
@given(encoding=ENCODINGS, text=DATA_TEXT, err=st.booleans())
def test_say_survives_any_console_and_shows_no_hidden_characters(encoding, text, err):
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding=encoding, errors="strict", newline="\n")
    say(f"group {text}:", 1.5, file=stream)
    stream.flush()
    shown = raw.getvalue().decode(encoding)
    assert shown.endswith("1.5\n")
    assert not {ord(c) for c in shown} & HIDDEN, repr(shown)
    if "owned" not in text.replace("\x1b]0;owned\x07", ""):
        assert "owned" not in shown  # the window title an OSC sequence would set is gone with it


def test_a_failed_print_is_dropped():
    class Broken(io.StringIO):
        def write(self, s):
            raise BrokenPipeError(32, "Broken pipe")

    say("result stored", file=Broken())  # no exception: the run's result is what counts


def test_audit_slices_with_a_non_latin_group_on_a_cp1252_console(tmp_path):
    rng = np.random.default_rng(0)
    n = 600
    g = rng.choice(["中文", "Δelta"], n)
    y = rng.integers(0, 2, n)
    p = np.clip(0.3 * y + 0.7 * rng.random(n) + (g == "中文") * 0.2, 0, 1)
    pd.DataFrame({"y": y, "p": p, "grp": g}).to_csv(tmp_path / "t.csv", index=False)
    env = {**os.environ, "PYTHONIOENCODING": "cp1252", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "fairdesk.cli", "audit", "slices", str(tmp_path / "t.csv"),
                           "--label", "y", "--score", "p", "--attribute", "grp", "--threshold", "0.5", "--n-boot",
                           "100", "--quiet", "--json", str(tmp_path / "o.json")], capture_output=True, env=env,
                          cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode("cp1252", "replace")
    assert (tmp_path / "o.json").is_file() and b"Traceback" not in proc.stderr


def _commands(parser, prefix=()):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, prefix + (name,))
            return
    yield prefix


def test_every_commands_help_on_an_ascii_and_a_cp1252_console(monkeypatch):
    import pytest

    from fairdesk.cli import build_parser, main

    for encoding in ("cp1252", "ascii"):
        for command in _commands(build_parser()):
            raw = io.BytesIO()
            monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding=encoding, errors="strict"))
            with pytest.raises(SystemExit) as done:
                main([*command, "--help"])
            sys.stdout.flush()
            assert done.value.code == 0 and b"usage:" in raw.getvalue(), (encoding, command)


@settings(max_examples=60, deadline=None)
@given(text=DATA_TEXT)
def test_markdown_text_from_data_holds_no_hidden_characters(text):
    from fairdesk.core.escape import markdown_text

    shown = markdown_text(text)
    assert not {ord(c) for c in shown} & HIDDEN, repr(shown)
    assert shown == "" if text == "" else shown.strip()  # never an empty list item or paragraph
