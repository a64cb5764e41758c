"""A stored audit document is checked against its kind's schema once, when it is stored (issue 24, item 1: the
GUI's view thread spent most of its time in jsonschema re-checking unchanged documents on every read, and a Python
thread busy that long starves the Qt thread of the interpreter lock).

``Project.add_audit`` records the SHA-256 of the document's bytes and of the schema it passed; ``audit_document``
skips the check while both match. Over the real document of every kind and generated edits of its stored bytes (one
byte anywhere, or one value replaced by a value of another type): an unchanged document is never checked again; a
changed one is always checked, and gives exactly the document or the error a full check gives; a schema that
changed, a project from before the digests, and a copied audit behave the same way.
"""
from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairdesk.core import kinds
from fairdesk.core.kinds import AUDIT_KINDS
from fairdesk.core.project import DamagedAudit, Project, document_digest

DOCUMENTS = Path(__file__).resolve().parents[1] / "data" / "documents"
KINDS = list(AUDIT_KINDS)
#: a JSON value after a key: where a replaced value keeps the text JSON (its schema may refuse it)
VALUE = re.compile(r':\s*("(?:[^"\\]|\\.)*"|-?\d[\d.eE+-]*|true|false|null)')
SNIPPETS = ["null", '"text"', '""', "0", "-1", "2.5", "true", "[]", "{}", '{"x": 1}', '["a", 1]']
BYTES = list('0123456789aeEnlu"{}[],:.- xZ')


def stored_text(kind: str) -> str:
    return json.dumps(json.loads((DOCUMENTS / f"{kind}.json").read_text(encoding="utf-8")))


@pytest.fixture
def checks(monkeypatch):
    """Every call of the schema check (``kinds.check_document``), in order."""
    calls: list[str] = []
    real = kinds.check_document

    def counting(name, doc):
        calls.append(name)
        return real(name, doc)

    monkeypatch.setattr(kinds, "check_document", counting)
    return calls


def full_check(kind: str, text: str):
    """What reading ``text`` gives when every read checks it: the document, or the error's reason."""
    try:
        doc = json.loads(text)
    except ValueError:
        return "it is not JSON"
    problems = kinds.check_document(kind, doc)
    return "; ".join(problems) if problems else doc


def overwrite(path: Path, audit_id: int, text: str) -> None:
    """Edit a stored document outside FairDesk (by hand, another tool, a damaged copy)."""
    with sqlite3.connect(path) as con:
        con.execute("UPDATE audits SET result=? WHERE id=?", (text, audit_id))


@st.composite
def edits(draw, text: str) -> str:
    """``text`` with one byte replaced, or one value (after a key) replaced by a value of another type."""
    if draw(st.booleans()):
        i = draw(st.integers(0, len(text) - 1))
        return text[:i] + draw(st.sampled_from(BYTES)) + text[i + 1:]
    spans = [m.span(1) for m in VALUE.finditer(text)]
    i, j = draw(st.sampled_from(spans))
    return text[:i] + draw(st.sampled_from(SNIPPETS)) + text[j:]


def test_a_stored_document_is_checked_when_written_and_not_again_when_read(tmp_path, checks):
    project = Project(tmp_path / "p.fairdesk")
    for kind in KINDS:
        text = stored_text(kind)
        checks.clear()
        audit_id = project.add_audit(kind, kind, text)
        assert checks == [kind]  # once, when stored
        for _ in range(3):
            assert project.audit_document(audit_id) == json.loads(text)
            assert Project(project.path, create=False).audit_document(audit_id) == json.loads(text)
        assert checks == [kind], f"{kind}: an unchanged document was checked again on read"


@pytest.mark.parametrize("kind", KINDS)
def test_a_changed_byte_is_always_checked_and_gives_what_a_full_check_gives(kind, tmp_path, checks):
    text = stored_text(kind)
    path = tmp_path / "p.fairdesk"
    project = Project(path)
    good = project.add_audit("good", kind, text)
    edited_id = project.add_audit("edited", kind, text)
    outcomes = set()

    @settings(max_examples=8 if kind in ("groups", "cit_images") else 15)
    @given(edited=edits(text))
    def check(edited):
        overwrite(path, edited_id, edited)
        expected = full_check(kind, edited)
        checks.clear()
        try:
            got = Project(path, create=False).audit_document(edited_id)
        except DamagedAudit as err:
            assert isinstance(expected, str), f"a document its schema accepts was refused: {err}"
            assert expected in str(err) and f"Audit {edited_id} ('edited'" in str(err)
            outcomes.add("refused")
        else:
            assert got == expected
            outcomes.add("read")
        if edited == text:
            assert checks == []
        elif expected != "it is not JSON":
            assert checks == [kind], "a changed document was read without being checked"
        assert Project(path, create=False).audit_document(good) == json.loads(text)  # the others as before

    check()
    overwrite(path, edited_id, text)  # the original bytes again: their digest matches, no check
    checks.clear()
    assert Project(path, create=False).audit_document(edited_id) == json.loads(text)
    assert checks == []
    assert outcomes, "no edit was tried"


def test_edits_cover_documents_that_read_and_documents_that_are_refused():
    """The strategy above is not vacuous: its edits give both outcomes (checked without a project, fast)."""
    text = stored_text("slices")
    seen = set()

    @settings(max_examples=40)
    @given(edited=edits(text))
    def check(edited):
        expected = full_check("slices", edited)
        seen.add("not JSON" if expected == "it is not JSON" else "refused" if isinstance(expected, str) else "read")

    check()
    assert seen == {"not JSON", "refused", "read"}, seen


def test_a_changed_schema_checks_every_document_again(tmp_path, checks, monkeypatch):
    project = Project(tmp_path / "p.fairdesk")
    audit_id = project.add_audit("a", "slices", stored_text("slices"))
    checks.clear()
    project.audit_document(audit_id)
    assert checks == []
    monkeypatch.setattr(kinds, "schema_digest", lambda name: "another schema")
    project.audit_document(audit_id)
    assert checks == ["slices"]


def test_a_document_its_schema_refuses_is_stored_without_a_digest_and_refused_on_every_read(tmp_path, checks):
    project = Project(tmp_path / "p.fairdesk")
    audit_id = project.add_audit("bad", "slices", json.dumps({"provenance": "x"}))
    for _ in range(2):
        with pytest.raises(DamagedAudit, match="is damaged and cannot be shown"):
            project.audit_document(audit_id)
    assert checks == ["slices"] * 3  # when stored, and on each read


def test_a_project_from_before_the_digests_is_read_without_a_write_and_checked(tmp_path, checks):
    path = tmp_path / "old.fairdesk"
    audit_id = Project(path).add_audit("a", "slices", stored_text("slices"))
    with sqlite3.connect(path) as con:
        con.execute("DROP TABLE audit_checks")
    before = path.read_bytes()
    checks.clear()
    assert Project(path, create=False).audit_document(audit_id) == json.loads(stored_text("slices"))
    assert checks == ["slices"]
    assert path.read_bytes() == before  # opened and read without a write (a read-only copy stays readable)
    project = Project(path)
    new = project.add_audit("b", "slices", stored_text("slices"))  # its next audit brings the table
    checks.clear()
    project.audit_document(new)
    assert checks == []


def test_a_copied_audit_keeps_its_digest(tmp_path, checks):
    source = Project(tmp_path / "scratch.fairdesk")
    audit_id = source.add_audit("a", "groups", stored_text("groups"))
    target = Project(tmp_path / "p.fairdesk")
    checks.clear()
    copied = target.copy_audit(source, audit_id)
    assert checks == []  # the same bytes, already checked
    assert target.audit_document(copied) == json.loads(stored_text("groups"))
    assert checks == []


def test_a_document_given_as_its_values_is_checked_without_parsing_its_text(tmp_path, checks, monkeypatch):
    """``add_audit(name, kind, values)``: the project writes the text from the values itself and checks the values
    as they are (the text just written is not parsed again: for the demo's group audit a 3 MB decode in the job's
    thread), with the same verdict and digest as the same text given as text; the group audit job stores its
    result that way."""
    from fairdesk.core import project as project_module

    parsed: list[int] = []
    real = project_module.loads_in_pieces
    monkeypatch.setattr(project_module, "loads_in_pieces", lambda text, *a: parsed.append(1) or real(text, *a))
    project = Project(tmp_path / "p.fairdesk")
    for kind in KINDS:
        values = json.loads(stored_text(kind))
        checks.clear()
        parsed.clear()
        by_values = project.add_audit(kind, kind, values)
        assert checks == [kind] and not parsed  # checked once, from the values
        assert project.audit_json(by_values) == json.dumps(values, indent=1, allow_nan=False)
        by_text = project.add_audit(kind, kind, project.audit_json(by_values))
        assert parsed == [1]
        assert digests(project, by_values) == digests(project, by_text) and len(digests(project, by_values)) == 1
        assert project.audit_document(by_values) == values
        assert checks == [kind, kind]  # neither is checked again on read
    broken = json.loads(stored_text("groups"))
    broken["records"] = "not a table"
    refused = project.add_audit("x", "groups", broken)
    assert digests(project, refused) == []
    with pytest.raises(DamagedAudit):
        project.audit_document(refused)


def digests(project: Project, audit_id: int) -> list[tuple[str, str]]:
    with sqlite3.connect(project.path) as con:
        return con.execute("SELECT sha256, schema_sha256 FROM audit_checks WHERE audit_id=?", (audit_id,)).fetchall()


def leaves(value, path=()):
    """The paths to every number, string and true/false in a JSON value."""
    if isinstance(value, dict):
        for key, member in value.items():
            yield from leaves(member, (*path, key))
    elif isinstance(value, list):
        for i, member in enumerate(value):
            yield from leaves(member, (*path, i))
    elif value is not None:
        yield path


def replace(value, path, new):
    if not path:
        return new
    out = list(value) if isinstance(value, (list, tuple)) else dict(value)
    out[path[0]] = replace(value[path[0]], path[1:], new)
    return type(value)(out) if isinstance(value, tuple) else out


LIKE = {bool: st.booleans(), int: st.integers(-10**6, 10**6), str: st.text(max_size=8),
        float: st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)}


@st.composite
def documents(draw, kinds=("slices", "groups", "age_independence")):
    """``(kind, values)``: the real document of a kind with a few of its numbers, strings and true/false replaced
    by others of the same type (most still pass the schema: a range, pattern or set of words may refuse one), and
    sometimes one value replaced by one of another type (most are refused), one of its lists given as a tuple or
    one of its objects given a key that is not a ``str``: values that are not plain JSON, whose text reads back
    otherwise."""
    kind = draw(st.sampled_from(kinds))
    doc = json.loads(stored_text(kind))
    paths = list(leaves(doc))
    for path in draw(st.lists(st.sampled_from(paths), max_size=4)):
        old = doc
        for step in path:
            old = old[step]
        doc = replace(doc, path, draw(LIKE[type(old)]))
    change = draw(st.sampled_from(["none", "none", "type", "tuple", "key"]))
    if change == "type":  # one value of another type: the schema refuses most
        path = draw(st.sampled_from(paths))
        old = doc
        for step in path:
            old = old[step]
        doc = replace(doc, path, draw(st.one_of(st.none(), *(LIKE[t] for t in LIKE if t is not type(old)))))
    elif change == "tuple":
        lists = [p[:-1] for p in paths if p and isinstance(p[-1], int)]
        if lists:
            path = draw(st.sampled_from(lists))
            inner = doc
            for step in path:
                inner = inner[step]
            doc = replace(doc, path, tuple(inner))
    elif change == "key":
        doc = {**doc, draw(st.sampled_from([1, 2.5, True, None])): "x"}
    return kind, doc


@settings(max_examples=20, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stored=documents())
def test_what_is_stored_its_digest_and_what_is_read_back_agree(tmp_path_factory, stored):
    """Over generated values of a document: the text stored is their JSON text (it reads back as they do); a
    digest is recorded exactly when that text passes the schema, and it is the digest of the stored bytes; reading
    gives the values back (or refuses them, as a full check of the text does)."""
    kind, values = stored
    project = Project(tmp_path_factory.mktemp("p") / "p.fairdesk")
    audit_id = project.add_audit("a", kind, values)
    text = project.audit_json(audit_id)
    assert text == json.dumps(values, indent=1, allow_nan=False)
    expected = full_check(kind, text)
    recorded = digests(project, audit_id)
    if isinstance(expected, str):  # the text is refused by its schema
        assert recorded == []
        with pytest.raises(DamagedAudit):
            project.audit_document(audit_id)
    else:
        assert recorded == [(document_digest(text), kinds.schema_digest(kind))]
        assert project.audit_document(audit_id) == expected == json.loads(json.dumps(values))


def test_generated_documents_are_stored_with_and_without_a_digest():
    """The strategy above is not vacuous: its documents include ones their schema accepts and refuses, and values
    that are not plain JSON."""
    seen = set()

    @settings(max_examples=40, derandomize=True)
    @given(stored=documents())
    def check(stored):
        kind, values = stored
        seen.add("refused" if isinstance(full_check(kind, json.dumps(values)), str) else "accepted")
        seen.add("plain" if json.loads(json.dumps(values)) == values else "not plain")

    check()
    assert seen == {"refused", "accepted", "plain", "not plain"}, seen


@settings(max_examples=10, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edited=edits(stored_text("slices")))
def test_a_text_and_other_values_cannot_be_stored_together(tmp_path_factory, edited):
    """A text and values that differ (the values pass the schema, the text is any edit of it) cannot be handed to
    ``add_audit`` together: before, the values were checked and the digest recorded for the text, so a later read
    skipped the schema check on bytes nobody checked."""
    project = Project(tmp_path_factory.mktemp("p") / "p.fairdesk")
    values = json.loads(stored_text("slices"))
    try:
        audit_id = project.add_audit("a", "slices", edited, document=values)
    except TypeError:
        assert project.audits() == []
        return
    if digests(project, audit_id):
        assert not isinstance(full_check("slices", edited), str), "a digest was recorded for an unchecked text"
