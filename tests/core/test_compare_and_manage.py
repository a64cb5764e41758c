"""Compare two stored group audits (core, job, CLI), and rename / delete / restore a stored audit."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fairdesk as fd
from fairdesk.cli import main
from fairdesk.core.compare import compare_audits, comparison_sentences
from fairdesk.core.errors import DataError, ProjectError
from fairdesk.core.project import Project
from fairdesk.jobs.compare import compare_stored, export_comparison


def _table(n=900, seed=2):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"y": rng.integers(0, 2, n), "sex": rng.choice(["F", "M"], n),
                       "eth": rng.choice(["a", "b", "c"], n)})
    df["p"] = np.clip(0.3 * df["y"] + rng.uniform(0, 0.7, n) - 0.15 * (df["eth"] == "c") * df["y"], 0, 1)
    return df


@pytest.fixture(scope="module")
def docs():
    df = _table()
    return [fd.audit_groups(df, label="y", score="p", attributes=["sex", "eth"], threshold=t, n_boot=200).document
            for t in (0.3, 0.55)]


@pytest.fixture
def project(tmp_path, docs):
    p = Project(tmp_path / "p.fairdesk")
    ids = [p.add_audit(f"at {t}", "groups", d) for t, d in zip((0.3, 0.55), docs)]
    return p, ids


def test_verdict_changes_are_the_tests_whose_verdicts_differ(docs):
    cmp = compare_audits(*docs)
    by_id = [{t["test_id"]: t["verdict"] for t in d["tests"]} for d in docs]
    expected = sum(v != by_id[1][k] for k, v in by_id[0].items() if k in by_id[1])
    assert cmp["counts"]["changed"] == expected
    assert cmp["counts"]["compared"] == len(set(by_id[0]) & set(by_id[1]))
    assert [d["what"] for d in cmp["differences"]] == ["threshold used ((all))", "threshold setting"]
    words = " ".join(comparison_sentences(cmp))
    assert "0.3 → 0.55" in words


def test_comparison_is_antisymmetric_and_an_audit_equals_itself(docs):
    ab, ba = compare_audits(*docs), compare_audits(*docs[::-1])
    assert ab["counts"]["changed"] == ba["counts"]["changed"]
    change = {tuple(r[k] for k in ("task", "attribute", "metric", "kind", "group", "comparison")): r["gap_change"]
              for r in ab["rows"]}
    for r in ba["rows"]:
        key = tuple(r[k] for k in ("task", "attribute", "metric", "kind", "group", "comparison"))
        if r["gap_change"] is not None:
            assert r["gap_change"] == pytest.approx(-change[key])
    same = compare_audits(docs[0], docs[0])
    assert same["counts"]["changed"] == 0 and same["differences"] == [] and same["same_data"]
    assert all(r["gap_change"] in (None, 0.0) for r in same["rows"])


def test_cli_report_compare_writes_the_pdf(project, tmp_path, capsys):
    p, (a, b) = project
    assert main(["report", "compare", "--project", str(p.path), "--audit", str(a), "--audit", str(b), "--pdf",
                 str(tmp_path / "cmp.pdf")]) == 0
    out = capsys.readouterr().out
    assert "changed verdict" in out and (tmp_path / "cmp.pdf").read_bytes()[:5] == b"%PDF-"
    assert main(["report", "compare", "--project", str(p.path), "--audit", str(a), "--pdf", "x.pdf"]) == 2
    assert "needs two audits" in capsys.readouterr().err
    assert main(["report", "--project", str(p.path), "--audit", str(a), "--audit", str(b), "--pdf", "x.pdf"]) == 2
    assert "Give one --audit" in capsys.readouterr().err


def test_compare_refuses_one_audit_twice_and_other_kinds(project, tmp_path):
    p, (a, _) = project
    with pytest.raises(DataError, match="two different audits"):
        compare_stored(p.path, a, a)
    with pytest.raises(ProjectError, match="Audit 99 is not in project"):
        export_comparison(p.path, a, 99, tmp_path / "x.pdf")
    assert not (tmp_path / "x.pdf").exists()


def test_delete_and_restore_lose_nothing(project, tmp_path):
    p, (a, b) = project
    ds = p.add_dataset("t", _table(50), "sha", kind="predictions")
    text_a, doc_b = p.audit_json(a), p.audit_document(b)
    gone = p.delete_audit(a)
    assert [x.id for x in p.audits()] == [b] and p.audit_document(b) == doc_b
    assert [d.id for d in p.datasets()] == [ds]
    with pytest.raises(ProjectError):
        p.audit_json(a)
    assert p.restore_audit(gone) == a
    assert p.audit_json(a) == text_a and p.audits()[0].name == "at 0.3"
    assert p.audit_document(a)["plan"]["threshold"] == 0.3
    # its id taken meanwhile: restored under a new one, nothing overwritten
    gone = p.delete_audit(b)
    c = p.add_audit("newer", "groups", doc_b)
    assert c == b
    restored = p.restore_audit(gone)
    assert restored not in (a, b) and p.audit_json(restored) == p.audit_json(b)


@given(name=st.text(min_size=0, max_size=40))
@settings(max_examples=25, deadline=None)
def test_rename_keeps_the_words_and_refuses_nothing_but_blank(tmp_path_factory, docs, name):
    p = Project(tmp_path_factory.mktemp("r") / "r.fairdesk")
    rid = p.add_audit("old", "groups", docs[0])
    text = p.audit_json(rid)
    words = " ".join(name.split())
    if not words:
        with pytest.raises(ProjectError, match="cannot be empty"):
            p.rename_audit(rid, name)
        assert p.audits()[0].name == "old"
    else:
        p.rename_audit(rid, name)
        assert p.audits()[0].name == words
    assert p.audit_json(rid) == text  # the document is untouched either way
