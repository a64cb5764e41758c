"""The methods document the code cites is in the repository and has every section the code cites."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_methods_citation_has_a_written_section():
    doc = (ROOT / "docs" / "methods.md").read_text(encoding="utf-8")
    sections = dict(re.findall(r"^## §(\d+) [^\n]*\n(.*?)(?=^## |\Z)", doc, flags=re.M | re.S))
    cited = {m for p in (ROOT / "fairdesk").rglob("*.py")
             for m in re.findall(r"METHODS §(\d+)", p.read_text(encoding="utf-8"))}
    assert cited, "the code cites METHODS sections"
    missing = sorted(cited - set(sections))
    assert not missing, f"docs/methods.md lacks the sections cited by the code: {missing}"
    stubs = sorted(n for n in cited if len(sections[n].split()) < 80 or "Not implemented" in sections[n])
    assert not stubs, f"docs/methods.md sections cited by the code are still stubs: {stubs}"


def test_no_comment_or_docstring_cites_an_internal_work_item():
    """Comments say why, not which issue, round or branch: a maintainer cannot look those up."""
    pattern = re.compile(r"\b[Ii]ssue[ -]\d+|\b[Rr]ounds? \d+[a-z]?\b|\bwt-[a-z]+\d*\b|\bwork item\b")
    found = [f"{p.relative_to(ROOT)}:{i}" for p in sorted((ROOT / "fairdesk").rglob("*.py"))
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert not found, f"cites an internal work item: {found}"


def test_every_package_says_what_it_holds():
    """Each package's docstring names its modules or what they do; none describes a plan ("and later …")."""
    for init in sorted((ROOT / "fairdesk").rglob("__init__.py")):
        text = init.read_text(encoding="utf-8")
        doc = re.match(r'\s*(?:#[^\n]*\n\s*)*"""(.*?)"""', text, flags=re.S)
        assert doc and len(doc.group(1).split()) >= 5, f"{init.relative_to(ROOT)} has no docstring saying what it holds"
        assert "and later" not in doc.group(1), f"{init.relative_to(ROOT)} describes a plan, not what it holds"


#: phrases that tell how a method or a page came to be, not what it does: they belong in CHANGELOG.md or
#: docs/validation/, never in the reference or the user's pages
HISTORY = re.compile(r"\b[Rr]ounds? \d|\b[Pp]reviously\b|\b[Uu]sed to\b|\b[Ww]e (?:first )?tried\b|\bwas replaced\b"
                     r"|\b[Nn]o longer\b|\b[Uu]ntil now\b|\b[Ii]ssue[ -]\d|\bthe issue's\b|\bwt-[a-z]+\d*\b"
                     r"|\bbefore the fix\b|\b[Ww]ritten with issue\b"
                     r"|\b[Ff]ormer\b|\b[Pp]revious (?:default|rule|test|version|\"auto\")|\bbefore:"
                     r"|\bwas (?:chosen|adopted|changed|switched|replaced)\b|\bthe rule before\b"
                     r"|\bbefore this change\b|\bfailed before\b|\(chosen\)|\(before /|\bhistory of the\b"
                     r"|\bbranch stud|\bmerged-tree\b|\bwhile building\b|\b[Bb]efore it,")


def test_the_reference_and_the_users_pages_tell_no_history():
    """docs/methods.md says what each test does now; the README and docs/guide/ say how to use it. None of them says
    which round, issue or branch it came from, or what it replaced."""
    pages = [ROOT / "README.md", ROOT / "docs" / "methods.md", *sorted((ROOT / "docs" / "guide").glob("*.md"))]
    found = [f"{p.relative_to(ROOT)}:{i}: {m.group(0)!r}" for p in pages
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             for m in [HISTORY.search(line)] if m]
    assert not found, f"history in a reference or user page (move it to CHANGELOG.md or docs/validation/): {found}"


def test_the_history_check_sees_history():
    for text in ("until round 12", "Previously the strata were the labels", "K used to be 5", "we tried a kernel",
                 "the interval was replaced", "is no longer Agresti–Caffo", "before issue 21", "branch wt-clus3",
                 "169/400 for the former tree", "(the previous default)", "The previous \"auto\" kept logistic",
                 "patient × task (before: patient × task)", "how each default was chosen", "the rule before up to 0.089",
                 "| size (before / t alone) |", "| **Agresti–Caffo (chosen)** |", "failed before: every term differed",
                 "The history of the first fix follows", "Before it, the logit Wald test", "the branch studies",
                 "a check while building"):
        assert HISTORY.search(text), text
    for text in ("rounded to 5 decimals", "the test it uses now", "a group of 10–29 patients", "issue date column",
                 "a transformer on CPU", "what changed since the previous period", "the model's rows before any fit",
                 "λ chosen per learner", "a test before it is run", "the weight was fitted on folds 0…k−1"):
        assert not HISTORY.search(text), text


def test_every_benchmark_script_is_listed_with_its_promise():
    """benchmarks/README.md's table names every script in benchmarks/ next to the promise it measures: a script not
    listed there is a finished experiment (record its decision in docs/validation/ and remove it) or an unstated
    promise."""
    readme = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    rows = [line for line in readme.splitlines() if line.startswith("|") and "`bench_" in line]
    listed = {name for row in rows for name in re.findall(r"`(bench_\w+\.py)`", row.rsplit("|", 2)[-2])}
    scripts = {p.name for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith("__")}
    assert scripts, "benchmarks/ holds scripts"
    assert not scripts - listed, f"benchmarks/README.md does not list: {sorted(scripts - listed)}"
    assert not listed - scripts, f"benchmarks/README.md lists scripts that do not exist: {sorted(listed - scripts)}"
    for row in rows:
        promise = row.strip("|").rsplit("|", 1)[0].strip()
        assert len(promise.split()) >= 4, f"a benchmark row names no promise: {row}"
