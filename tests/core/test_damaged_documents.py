"""Stored documents are validated on load (issue 20, item 3): a document of the wrong shape never reaches a parser,
a report builder, the model card or a GUI page.

``tests/data/documents/<kind>.json`` holds one real document of every audit kind (written by the kind's case in
``tests/test_one_path.py``, long lists cut to their first rows). Hypothesis mutates them — a value anywhere replaced
by null, a string, a number, a list, an object or a boolean, or a key deleted — and stores each mutant in a project.
Whatever it draws: loading either returns a document or raises :class:`DamagedAudit` naming the audit and the
project; a document that loads builds its report tree, its findings and its model card without a traceback; the
project's other audits stay readable; and ``fairdesk-cli report`` and ``report model-card`` end with exit 0 or 2,
the message naming the audit.
"""
from __future__ import annotations

import copy
import importlib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairdesk.cli import main
from fairdesk.core.errors import FairDeskError
from fairdesk.core.kinds import AUDIT_KINDS, ReportSettings, check_document, parse_document
from fairdesk.core.model_card import model_card
from fairdesk.core.project import DamagedAudit, Project

DOCUMENTS = Path(__file__).resolve().parents[1] / "data" / "documents"
WRONG = [None, "text", "", 0, -1, 2.5, 1e308, True, [], [None], ["a", 1], {}, {"x": None}]


def real(kind: str) -> dict:
    return json.loads((DOCUMENTS / f"{kind}.json").read_text(encoding="utf-8"))


def test_every_kind_has_a_schema_and_a_real_document_that_validates():
    from jsonschema import Draft202012Validator

    from fairdesk.core.kinds import document_schema

    for kind in AUDIT_KINDS:
        assert AUDIT_KINDS[kind].schema == f"{kind}.schema.json", kind
        Draft202012Validator.check_schema(document_schema(kind))
        assert check_document(kind, real(kind)) == [], kind


def _paths(doc, prefix=()):
    """Every path into ``doc`` (dict keys and list positions), the root included."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:3]):
            yield from _paths(v, prefix + (i,))


@st.composite
def mutants(draw, kind: str):
    doc = real(kind)
    paths = list(_paths(doc))
    n = draw(st.integers(1, 3))
    for _ in range(n):
        path = draw(st.sampled_from(paths))
        node = doc
        try:
            for key in path[:-1]:
                node = node[key]
        except (KeyError, IndexError, TypeError):
            continue
        if not path:
            doc = draw(st.sampled_from(WRONG))
            break
        action = draw(st.sampled_from(["replace", "replace", "delete"]))
        if action == "delete" and isinstance(node, dict):
            node.pop(path[-1], None)
        elif isinstance(node, (dict, list)):
            try:
                node[path[-1]] = copy.deepcopy(draw(st.sampled_from(WRONG)))
            except (IndexError, TypeError):
                pass
    return doc


def _store(tmp_path: Path, kind: str, doc) -> tuple[Path, int, int]:
    """A project holding a good audit of ``kind`` and the mutant (its id second)."""
    project = tmp_path / "p.fairdesk"
    project.unlink(missing_ok=True)
    p = Project(project)
    good = p.add_audit("good", kind, json.dumps(real(kind)))
    bad = p.add_audit("mutant", kind, json.dumps(doc))
    return project, good, bad


def _everything_reads(project: Path, kind: str, audit_id: int) -> bool:
    """Load, parse, build the report tree and the model card; False when the document was refused as damaged."""
    p = Project(project, create=False)
    try:
        doc = p.audit_document(audit_id)
    except DamagedAudit as err:
        text = str(err)
        assert f"Audit {audit_id} ('mutant'" in text and "of project p " in text, text
        assert "other audits are unaffected" in text
        return False
    # past the schema, a builder may still refuse in words (parts that do not fit together, a card that fails its
    # own schema): a sentence is fine, a traceback is not
    module = importlib.import_module(AUDIT_KINDS[kind].report.partition(":")[0])
    for build in (lambda: parse_document(kind, doc), lambda: module.report_tree(doc, ReportSettings()),
                  lambda: model_card(p, audit_id, intended_use=None)):
        try:
            build()
        except FairDeskError:
            pass
    return True


@pytest.mark.parametrize("kind", list(AUDIT_KINDS))
def test_wrong_shaped_documents_never_end_in_a_traceback(kind, tmp_path):
    examples = 5 if kind == "groups" else 12  # the group report is the slow one

    @settings(max_examples=examples)
    @given(doc=mutants(kind))
    def check(doc):
        project, good, bad = _store(tmp_path, kind, doc)
        _everything_reads(project, kind, bad)
        assert Project(project, create=False).audit_document(good) == real(kind)  # the other audit is usable

    check()


@pytest.mark.parametrize("kind", list(AUDIT_KINDS))
def test_cli_report_of_a_damaged_document_exits_2_naming_the_audit(kind, tmp_path, capsys):
    for doc in ([], None, {"provenance": "x"}, {**real(kind), **{next(iter(real(kind))): 3.5}}):
        project, good, bad = _store(tmp_path, kind, doc)
        assert check_document(kind, doc) != []
        for argv in (["report", "--project", str(project), "--audit", str(bad), "--pdf", str(tmp_path / "r.pdf")],
                     ["report", "model-card", "--project", str(project), "--audit", str(bad),
                      "--out", str(tmp_path / "c.json")]):
            assert main(argv) == 2
            err = capsys.readouterr().err
            assert "Traceback" not in err and f"Audit {bad} ('mutant'" in err and "damaged" in err, err
            assert err.count("\n") == 1
        assert not (tmp_path / "r.pdf").exists() and not (tmp_path / "c.json").exists()


def test_damaged_records_beside_the_audits_are_set_aside(tmp_path):
    """Dataset roles, column lists and origins and model records are checked too: a damaged one is set aside with
    a sentence, and every other dataset and model stays usable."""
    import pandas as pd

    p = Project(tmp_path / "p.fairdesk")
    good = p.add_dataset("good", pd.DataFrame({"y": [0, 1]}), "0" * 64, roles={"label": "y", "attributes": ["s"]})
    bad = p.add_dataset("bad", pd.DataFrame({"y": [0, 1]}), "0" * 64, roles={"label": "y"})
    p.add_model("m1", "mlp", {"a": 1})
    m2 = p.add_model("m2", "mlp", {"a": 1})
    with p.transaction():
        p._local.con.execute("UPDATE datasets SET roles=?, origin=? WHERE id=?", ('{"label": 3}', "[1]", bad))
        p._local.con.execute("UPDATE models SET info=? WHERE id=?", ('"text"', m2))
    infos = {d.id: d for d in p.datasets()}
    assert infos[good].roles == {"label": "y", "attributes": ["s"]} and infos[good].damaged is None
    assert infos[bad].roles is None and infos[bad].origin is None
    assert f"Dataset {bad} of project p" in infos[bad].damaged and "roles" in infos[bad].damaged
    models = {m.name: m for m in p.models()}
    assert models["m1"].info == {"a": 1} and models["m2"].info == {} and "Model 2" in models["m2"].damaged
    assert len(p.load_dataset(bad)) == 2


def test_dataset_and_model_records_are_checked_once_not_on_every_listing(tmp_path, monkeypatch):
    """The pages list the datasets and models on every refresh (on the Qt thread): each stored roles, column list,
    origin and model record is checked against its schema once, not at every ``datasets()`` / ``models()`` — by any
    handle on the project — and a field changed afterwards (by a byte) is checked anew, a damaged one still set
    aside every time."""
    import uuid

    import pandas as pd

    from fairdesk.core import kinds

    calls: list = []
    real = kinds.schema_problems
    monkeypatch.setattr(kinds, "schema_problems", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    tag = uuid.uuid4().hex  # texts no earlier test stored
    p = Project(tmp_path / "p.fairdesk")
    ids = [p.add_dataset(f"d{i}", pd.DataFrame({f"y{tag}{i}": [0, 1]}), "0" * 64, roles={"label": f"y{tag}{i}"},
                         origin={"tag": tag, "i": i}) for i in range(3)]
    p.add_model("m", "mlp", {"tag": tag})
    first = p.datasets(), p.models()
    assert len(calls) == 3 * 3 + 1  # roles, column list and origin of each dataset, and the model's record
    calls.clear()
    for _ in range(3):
        assert (p.datasets(), p.models()) == first
    assert (Project(p.path, create=False).datasets(), Project(p.path, create=False).models()) == first
    assert calls == []
    assert p.datasets()[0].roles is not first[0][0].roles  # each caller gets its own values to change
    p.set_roles(ids[1], {"label": f"y{tag}1", "attributes": ["s"]})
    with p.transaction():
        p._local.con.execute("UPDATE datasets SET origin=? WHERE id=?", (f'["{tag}"]', ids[2]))  # a list, not an object
    for _ in range(2):
        infos = {d.id: d for d in p.datasets()}
        assert infos[ids[1]].roles == {"label": f"y{tag}1", "attributes": ["s"]} and infos[ids[1]].damaged is None
        assert infos[ids[2]].origin is None and "origin" in infos[ids[2]].damaged
    assert len(calls) == 2  # the changed roles and the changed origin, once each
