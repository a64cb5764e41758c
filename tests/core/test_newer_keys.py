"""Keys a newer FairDesk would add to a stored document, at any depth of any kind's document: this version keeps
them, reads what it knows, names the rest in one note (report and model card) when a newer version stored the
document, and never ends in a traceback.

``tests/data/documents/<kind>.json`` holds one real document of every registered audit kind. Hypothesis adds keys
with random JSON values to random objects of it (the top, a plan, a record inside a list, ...), marks it as stored by
this or by a newer version, and stores it; reading it, its report tree and its model card give a result or one
sentence. A key where an object's keys are names (a threshold per task, a count per group) is data, not a setting.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairdesk.core import kinds
from fairdesk.core.errors import FairDeskError
from fairdesk.core.kinds import AUDIT_KINDS, ReportSettings
from fairdesk.core.model_card import model_card
from fairdesk.core.project import DamagedAudit, Project

DOCUMENTS = Path(__file__).resolve().parents[1] / "data" / "documents"
VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                      | st.text(max_size=6), lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=6)
NEW_KEYS = st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=2, max_size=6).map(lambda k: "new_" + k)


def real(kind: str) -> dict:
    return json.loads((DOCUMENTS / f"{kind}.json").read_text(encoding="utf-8"))


def _objects(doc, path=()):
    """Every object in ``doc`` with its path (the first items of a list only)."""
    if isinstance(doc, dict):
        yield path, doc
        for k, v in doc.items():
            yield from _objects(v, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:2]):
            yield from _objects(v, path + (i,))


@st.composite
def newer(draw, kind: str):
    doc = real(kind)
    objects = [o for p, o in _objects(doc) if "provenance" not in p]
    added = []
    for _ in range(draw(st.integers(1, 4))):
        obj = draw(st.sampled_from(objects))
        key = draw(NEW_KEYS)
        obj[key] = draw(VALUES)
        added.append(key)
    if draw(st.booleans()):
        doc["provenance"]["versions"]["fairdesk"] = draw(st.sampled_from(["0.2.0", "1.0", "0.1.1rc1"]))
    return doc, added


def _one_sentence(err: Exception) -> None:
    text = str(err)
    assert text and "\n" not in text and "Traceback" not in text, text


@pytest.mark.parametrize("kind", list(AUDIT_KINDS))
def test_a_document_with_a_newer_versions_keys_is_read_reported_and_carded(kind, tmp_path):
    @settings(max_examples=4 if kind in ("groups", "note_classifiers") else 8)
    @given(drawn=newer(kind))
    def check(drawn):
        doc, added = drawn
        path = tmp_path / "p.fairdesk"
        path.unlink(missing_ok=True)
        project = Project(path)
        audit_id = project.add_audit("newer", kind, json.dumps(doc))
        try:
            read = Project(path, create=False).audit_document(audit_id)
        except DamagedAudit as err:  # a new entry of the wrong type in an object whose keys are names (groups)
            _one_sentence(err)
            assert any(f"/{k}:" in str(err) or f"/{k}/" in str(err) for k in added), err
            return
        assert read == doc  # kept as stored
        ignored = kinds.ignored_keys(kind, read)
        assert all(any(k in p for k in added) for p in ignored), (ignored, added)  # only what was added
        assert bool(ignored) == (kinds.newer_version(read) is not None and bool(kinds.unknown_keys(kind, read)))
        try:
            text = kinds.report_tree(kind, read, ReportSettings(5)).text()
        except FairDeskError as err:
            _one_sentence(err)
        else:
            assert ("Written by a newer FairDesk" in text) == bool(ignored)
            assert all(p in text for p in ignored[:6])
        try:
            card = model_card(path, audit_id, intended_use=None, suppress_k=5)
        except FairDeskError as err:
            _one_sentence(err)
        else:
            assert any("Written by a newer FairDesk" in t for t in card["limitations"]) == bool(ignored)

    check()


def test_the_real_documents_hold_no_unknown_key():
    """The schemas describe the real document of every kind: a newer version's document is told apart by what it
    adds, not by what this version wrote."""
    for kind in AUDIT_KINDS:
        assert kinds.unknown_keys(kind, real(kind)) == [], kind


def test_the_note_names_the_keys_at_their_depth():
    doc = real("slices")
    doc["plan"]["new_rule"] = {"a": 1}
    doc["slices"][0]["new_score"] = 0.5
    doc["new_top"] = []
    assert kinds.unknown_keys("slices", doc) == ["plan.new_rule", "slices[].new_score", "new_top"]
    assert kinds.ignored_keys("slices", doc) == []  # stored by this version: nothing a later version added
    doc["provenance"]["versions"]["fairdesk"] = "9.0"
    assert kinds.ignored_keys("slices", doc) == ["plan.new_rule", "slices[].new_score", "new_top"]
    note = kinds.newer_keys_note(kinds.ignored_keys("slices", doc), "The stored audit", kinds.newer_version(doc))
    assert note.startswith("Written by a newer FairDesk (FairDesk 9.0;") and "plan.new_rule" in note
    assert "\n" not in note


# ---- model-folder files: the same rule -------------------------------------------------------------------------

def _generator_config(d):
    from fairdesk.core.generation.images import GeneratorConfig

    return GeneratorConfig.from_dict(d)


def _text_cnn_config(d):
    from fairdesk.core.models.text_classifier import TextCNNConfig

    return TextCNNConfig.from_dict(d)


def _classifier_config(d, tmp_path):
    from fairdesk.core.models.image_classifier import _read_config

    (tmp_path / "config.json").write_text(json.dumps(d), encoding="utf-8")
    return _read_config(tmp_path / "config.json")


def _defaults(which: str) -> dict:
    from fairdesk.core.generation.images import GeneratorConfig
    from fairdesk.core.models.image_classifier import ClassifierConfig
    from fairdesk.core.models.text_classifier import TextCNNConfig

    from dataclasses import asdict

    cls = {"generator": GeneratorConfig, "text_cnn": TextCNNConfig, "classifier": ClassifierConfig}[which]
    return json.loads(json.dumps(asdict(cls())))


@settings(max_examples=30)
@given(which=st.sampled_from(["generator", "text_cnn", "classifier"]),
       extra=st.dictionaries(NEW_KEYS, VALUES, max_size=3), retype=st.none() | st.tuples(st.integers(0, 30), VALUES))
def test_a_model_folder_config_from_another_version_is_read_or_refused_in_one_sentence(which, extra, retype, tmp_path_factory):
    import warnings

    from fairdesk.core.jsonable import NewerKeysNote

    d = _defaults(which)
    if retype is not None:
        key = sorted(d)[retype[0] % len(d)]
        d[key] = retype[1]
    d.update(extra)
    read = {"generator": _generator_config, "text_cnn": _text_cnn_config,
            "classifier": lambda c: _classifier_config(c, tmp_path_factory.mktemp("c"))}[which]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            config = read(d)
        except (ValueError, FairDeskError) as err:  # a value of the wrong type: one sentence naming the key
            _one_sentence(err)
            assert retype is not None, err  # (the sentence names the key, or its option: 'image_size', --image-size)
            return
    notes = [str(w.message) for w in caught if issubclass(w.category, NewerKeysNote)]
    assert config is not None
    if extra:
        assert len(notes) == 1 and all(k in notes[0] for k in list(extra)[:6]), notes
        assert notes[0].startswith("Written by a newer FairDesk?")
    else:
        assert notes == []


def test_the_cli_prints_a_newer_keys_note_as_one_line(capsys):
    import warnings

    from fairdesk.cli import _note_or
    from fairdesk.core.jsonable import NewerKeysNote

    show = _note_or(warnings.showwarning)
    show(NewerKeysNote("Written by a newer FairDesk? x holds keys this version does not know, ignored: a."),
         NewerKeysNote, "f.py", 1)
    err = capsys.readouterr().err
    assert err == "fairdesk-cli: note: Written by a newer FairDesk? x holds keys this version does not know, ignored: a.\n"


def test_reading_a_newer_document_again_keeps_the_note():
    """The GUI reads a newer version's document once (``without_ignored_keys``) and its findings are built from that
    (``prepare_document`` reads it again): the keys stay named, the stored document keeps them."""
    doc = real("ctf")
    doc["settings"]["new_knob"] = 3
    doc["unknown_terms"]["new_split"] = 7
    doc["provenance"]["versions"]["fairdesk"] = "2.0"
    once, keys = kinds.without_ignored_keys("ctf", doc)
    assert keys == ["settings.new_knob", "unknown_terms.new_split"] and once["ignored_keys"] == keys
    assert "new_knob" not in once["settings"] and "new_knob" in doc["settings"]
    twice, again = kinds.without_ignored_keys("ctf", once)
    assert again == keys and twice["ignored_keys"] == keys
    text = kinds.report_tree("ctf", once, ReportSettings(5)).text()
    assert "settings.new_knob" in text and "Written by a newer FairDesk (FairDesk 2.0;" in text


#: the kinds whose report-test document runs a real audit of seconds (checked in the full suite)
SLOW_DOCUMENTS = ("ctf", "cit_images", "age_independence")


@pytest.mark.parametrize("slow", [False, pytest.param(True, marks=pytest.mark.full)])
def test_documents_this_version_writes_hold_no_unknown_key(slow):
    """The report tests' documents of every kind (built by this version's code, ``test_report_small_cells``) are
    described by their schemas: a newer version's document is never told to ignore a key this version reads."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    import test_report_small_cells as small

    from fairdesk.core.audits.groups import GroupAuditPlan, run_group_audit
    from fairdesk.core.data.schema import ColumnRoles

    roles = ColumnRoles(label="label", score="score", task="task", attributes=("site",),
                        continuous_attributes=("age",))
    plan = GroupAuditPlan(threshold=0.5, roles=roles, n_boot=100, n_permutations=100, min_group_size=5, bins=(3,))
    group_result = run_group_audit(small._group_table(), plan)
    for kind, build in small.DOCUMENTS.items():
        if (kind in SLOW_DOCUMENTS) == slow:
            assert kinds.unknown_keys(kind, build(group_result)) == [], kind
