"""Every command the user-facing docs show still runs: each ``fairdesk-cli`` line of a fenced block in README.md
and docs/guide/*.md names a command that exists and only options that command has; the concrete ones (no
placeholders) parse as written, and the cheap ones run for real. The README's demo-table block runs on a real demo
table in ``tests/test_readme_demo.py``."""
from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs" / "guide").glob("*.md"))]
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
#: a synopsis, not a command: optional parts, alternatives, repetition, placeholders in capitals
SYNOPSIS = re.compile(r"\[|\||\.\.\.|…|(?<![\w./-])[A-Z][A-Z_]*(?![\w])")


def doc_commands() -> list[tuple[str, str]]:
    """(where, command line) for every fenced-block line that runs ``fairdesk-cli``: continuation lines joined,
    the trailing ``# comment`` dropped."""
    found = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for block in re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.M | re.S):
            for line in block.replace("\\\n", " ").splitlines():
                line = re.sub(r"\s+#\s.*$", "", line).strip()
                if re.match(r"^(\S*/)?fairdesk-cli(\s|$)", line):
                    found.append((f"{path.relative_to(ROOT)}: {line[:60]}", line))
    return found


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    out = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            out.update(action.choices)
    return out


def command_parser(argv: list[str]) -> tuple[argparse.ArgumentParser, list[str]]:
    """The (sub)parser ``argv`` reaches by its command words, and those words."""
    from fairdesk.cli import build_parser

    parser, words = build_parser(), []
    for token in argv:
        sub = _subparsers(parser)
        if token not in sub:
            break
        parser, words = sub[token], words + [token]
    return parser, words


COMMANDS = doc_commands()


def test_the_docs_show_commands():
    assert len(COMMANDS) >= 30
    assert any("audit groups" in c for _, c in COMMANDS) and any("monitor" in c for _, c in COMMANDS)


@pytest.mark.parametrize("line", [c for _, c in COMMANDS], ids=[w for w, _ in COMMANDS])
def test_every_documented_command_and_option_exists(line):
    argv = shlex.split(line)[1:]
    parser, words = command_parser(argv)
    assert words or argv[:1] == ["--version"], f"no fairdesk-cli command in {line!r}"
    known = set(parser._option_string_actions)
    unknown = sorted({o for o in OPTION.findall(line) if o not in known})
    assert not unknown, f"{' '.join(words)}: the docs name options it does not have: {unknown}"


@pytest.mark.parametrize("line", [c for _, c in COMMANDS if not SYNOPSIS.search(c)],
                         ids=[w for w, c in COMMANDS if not SYNOPSIS.search(c)])
def test_every_concrete_documented_command_parses(line):
    """A line without placeholders is what a user pastes: the parser takes it as written (argparse exits with 2 on
    an unknown option, a missing required one or a value of the wrong type)."""
    from fairdesk.cli import build_parser

    argv = shlex.split(line)[1:]
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:
        assert stop.code == 0 and argv == ["--version"], f"{line!r} does not parse (exit {stop.code})"
        return
    assert callable(getattr(args, "func", None))


def test_the_checks_catch_an_option_that_does_not_exist():
    parser, words = command_parser(["audit", "groups"])
    assert words == ["audit", "groups"] and "--threshold" in parser._option_string_actions
    assert "--no-such-option" not in parser._option_string_actions
    assert SYNOPSIS.search("fairdesk-cli demo --out DIR") and not SYNOPSIS.search("fairdesk-cli demo --out x/y.csv")


def _predictions(path: Path, n: int = 600, seed: int = 0) -> None:
    """A small predictions table with the columns the guide's group-gap command names."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    pd.DataFrame({"y": y, "p": np.clip(0.3 * y + rng.uniform(0, 0.7, n), 0, 1).round(4),
                  "task": rng.choice(["sepsis", "mortality"], n), "sex": rng.choice(["F", "M"], n),
                  "ethnicity": rng.choice(["A", "B", "C"], n), "pid": rng.integers(0, 400, n)}).to_csv(path, index=False)


def test_the_guide_group_gap_command_runs(tmp_path, monkeypatch):
    """docs/guide/group-gaps.md's command, run as written on a table with its columns (with a small bootstrap)."""
    from fairdesk.cli import main

    line = next(c for w, c in COMMANDS if w.startswith("docs/guide/group-gaps.md") and "audit groups" in c)
    argv = shlex.split(line)[1:]
    _predictions(tmp_path / argv[2])
    monkeypatch.chdir(tmp_path)
    assert main(argv + ["--n-boot", "100", "--quiet"]) == 0
    assert (tmp_path / argv[argv.index("--pdf") + 1]).read_bytes()[:5] == b"%PDF-"
    assert (tmp_path / argv[argv.index("--json") + 1]).stat().st_size > 1000


def test_the_make_targets_the_readme_names_exist():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([\w.-]+):", makefile, flags=re.M))
    named = set()
    for path in DOCS:
        for block in re.findall(r"^```[^\n]*\n(.*?)^```", path.read_text(encoding="utf-8"), flags=re.M | re.S):
            named |= set(re.findall(r"^make ([\w.-]+)", block, flags=re.M))
    assert named and named <= targets, sorted(named - targets)


#: options the docs show in running text that belong to another program, with the file that defines each
OTHER_PROGRAMS = {"--headless": "fairdesk/gui/app.py", "--variant": "packaging/wheelhouse.py",
                  "--python-version": "packaging/wheelhouse.py", "--platform": "packaging/wheelhouse.py"}


def test_every_option_in_the_running_text_exists():
    """An option written in the docs' running text (`--pdf OUT.pdf`) is an option of some fairdesk-cli command, or
    of the other program it belongs to."""
    from fairdesk.cli import build_parser

    options: set[str] = set()

    def walk(parser: argparse.ArgumentParser) -> None:
        options.update(parser._option_string_actions)
        for sub in _subparsers(parser).values():
            walk(sub)

    walk(build_parser())
    unknown = []
    for path in DOCS:
        prose = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.M | re.S)
        for span in re.findall(r"`([^`\n]+)`", prose):
            for option in OPTION.findall(span):
                other = OTHER_PROGRAMS.get(option)
                if option not in options and not (other and f'"{option}"' in (ROOT / other).read_text("utf-8")):
                    unknown.append(f"{path.relative_to(ROOT)}: {option}")
    assert not unknown, unknown
