"""The model-card export (issue 14, point 5): the fairness and equity part of an applied model card from a stored
audit of every kind, as JSON that validates against ``resources/model_card.schema.json`` and as Markdown.

The audit documents are the small-cell documents of ``test_report_small_cells`` (groups of 3, 7 and 10 rows, a
category with 3 templates, 7 images of one sex, ...), so a card that leaked a count below k would be seen. Each
kind's verdict counts are recomputed here from its document, independently of ``fairdesk.core.model_card``."""
from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from threadpoolctl import threadpool_limits

import test_report_small_cells as small
from fairdesk.cli import main
from fairdesk.core.errors import DataError
from fairdesk.core.kinds import AUDIT_KINDS, ReportSettings, releasable
from fairdesk.core.model_card import (VERDICTS, card_markdown, load_schema, model_card, schema_errors, schema_path,
                                      validate_card)
from fairdesk.core.project import Project

K = 11


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with threadpool_limits(limits=1):
        yield


@pytest.fixture(scope="module")
def documents(group_result):
    return {}


@pytest.fixture(scope="module")
def group_result():
    from fairdesk.core.audits.groups import GroupAuditPlan, run_group_audit
    from fairdesk.core.data.schema import ColumnRoles

    roles = ColumnRoles(label="label", score="score", task="task", attributes=("site",),
                        continuous_attributes=("age",))
    plan = GroupAuditPlan(threshold=0.5, roles=roles, n_boot=100, n_permutations=100, min_group_size=5, bins=(3,))
    return run_group_audit(small._group_table(), plan)


def _doc(name, documents, group_result) -> dict:
    if name not in small.DOCUMENTS:
        pytest.fail(f"Audit kind '{name}' has no small-cell document in test_report_small_cells.DOCUMENTS.")
    if name not in documents:
        documents[name] = small.DOCUMENTS[name](group_result)
    return documents[name]


def _store(project_path, name: str, doc: dict) -> int:
    return Project(project_path).add_audit(f"{name} audit", name, json.dumps(doc))


def kind_counts(name: str, doc: dict) -> dict[str, int]:
    """The verdict counts each kind's own code (or report) gives, recomputed from the document."""
    from fairdesk.core.audits.groups import GroupAuditResult, verdict_counts

    def tally(verdicts):
        out = {v: 0 for v in VERDICTS}
        for v in verdicts:
            v = {"dependent": "differs", "equivalent within margin": "equivalent"}.get(v, v)
            out[v] += 1
        out["total"] = sum(out.values())
        return out

    if name == "groups":
        c = verdict_counts(GroupAuditResult.from_dict(doc))
        return {v: c[v] for v in (*VERDICTS, "total")}
    if name == "note_classifiers":
        out = {v: 0 for v in (*VERDICTS, "total")}
        for audit in doc["audits"].values():
            c = verdict_counts(GroupAuditResult.from_dict(audit))
            out = {v: out[v] + c[v] for v in out}
        return out
    if name == "mlm_bias":
        return tally(r["verdict"] for d in [doc, *doc.get("compared", [])] for r in d["records"])
    if name == "cit_images":
        return tally(r["verdict"] for r in doc["table"])
    if name == "age_independence":
        return tally(c["verdict"] for e in doc["methods"].values() for c in (e.get("comparison") or {}).values())
    if name == "slices":
        return tally(r["verdict"] for r in doc["slices"])
    if name == "monitor":  # each comparison in the latest period: alarm, within ±margin, else inconclusive
        last = doc["periods"][-1]["period"]
        return tally("differs" if r["alarm"] else "equivalent" if r["within_margin"] else "inconclusive"
                     for r in doc["monitor"] if r["period"] == last)
    if name == "ctf":  # issue 22: the averaged records and, named, every term that differs
        return tally([r["verdict"] for r in doc["ctf_gap"]]
                     + [t["verdict"] for t in doc.get("term_gaps") or [] if t["verdict"] == "differs"])
    raise AssertionError(f"no verdict count for kind {name}: add one here")


def _strings(obj):
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)


def small_counts(card: dict, k: int) -> list[str]:
    """Counts below k anywhere in the card: sizes and rows as numbers, and counts inside any of its texts."""
    hits = [f"rows {card['data']['rows']}"] if isinstance(card["data"]["rows"], int) and card["data"]["rows"] < k \
        else []
    hits += [f"{g['attribute']}={g['group']}: {g['size']}" for g in card["subgroups"]["groups"]
             if isinstance(g["size"], int) and g["size"] < k]
    for text in _strings(card):
        hits += small.scan_text(text, k)
    return hits


# --------------------------------------------------------------------------------------------------------------
# Every kind


@pytest.mark.parametrize("name", sorted(AUDIT_KINDS))
def test_card_of_every_kind(name, documents, group_result, tmp_path):
    doc = _doc(name, documents, group_result)
    project = tmp_path / "p.fairdesk"
    audit_id = _store(project, name, doc)
    card = model_card(project, audit_id, intended_use="Flag patients for review by a nurse.", suppress_k=K,
                      limitations=["Validated at one site only."])
    assert schema_errors(card, load_schema()) == []
    validate_card(card)
    assert card["audit"]["kind"] == name and card["audit"]["audit_id"] == audit_id
    assert card["audit"]["small_cell_k"] == K and card["audit"]["kind_title"] == AUDIT_KINDS[name].title
    assert card["audit"]["seed"] == doc["provenance"]["seed"]
    assert card["intended_use"] == {"statement": "Flag patients for review by a nurse.", "entered_by_user": True}
    assert card["limitations"][0] == "Validated at one site only."
    assert card["not_tested"], "every card says what was not tested"
    # the findings are the kind's own: same verdict counts, and the counts add up
    items = card["findings"]["items"]
    counts = card["findings"]["verdict_counts"]
    # counted on the releasable copy the card is written from (a slice of fewer than k rows is not described)
    assert counts == kind_counts(name, releasable(name, doc, ReportSettings(suppress_k=K)))
    assert counts["total"] == len(items) > 0
    assert {v: sum(i["verdict"] == v for i in items) for v in VERDICTS} == {v: counts[v] for v in VERDICTS}
    assert len({i["finding_id"] for i in items}) == len(items)
    for item in items:
        if item["verdict"] == "equivalent":
            assert item["verdict_words"] == f"equivalent within ±{item['margin']:g}"
        else:
            assert item["verdict_words"] == item["verdict"]
    # subgroups: sizes where the kind has them, a sentence saying why not where it has none
    sub = card["subgroups"]
    if name in ("mlm_bias", "age_independence"):
        assert not sub["sizes_given"] and "no subgroup sizes" in sub["note"]
        assert sub["note"] in card["limitations"]
    else:
        assert sub["sizes_given"] and sub["groups"]
        # sizes given, but a size the releasable copy withholds (small, or one that would give a small one back)
        # is null: the card is written from that copy
        released = releasable(name, doc, ReportSettings(suppress_k=K))
        assert sum(g["size"] is None for g in sub["groups"]) <= _withheld_sizes(name, released)
    # no count below k, anywhere
    assert not small_counts(card, K), small_counts(card, K)


@pytest.mark.parametrize("name", ["groups", "note_classifiers", "cit_images", "ctf", "mlm_bias"])
def test_small_cells_are_there_with_k_1_and_suppressed_with_k_11(name, documents, group_result, tmp_path):
    """The documents do hold small counts (so the test above proves something): shown with k = 1, "<11" with 11."""
    doc = _doc(name, documents, group_result)
    audit_id = _store(tmp_path / "p.fairdesk", name, doc)
    shown = model_card(tmp_path / "p.fairdesk", audit_id, intended_use="x", suppress_k=1)
    assert small_counts(shown, K), f"the {name} document has no small count"
    hidden = model_card(tmp_path / "p.fairdesk", audit_id, intended_use="x", suppress_k=K)
    assert not small_counts(hidden, K)
    assert f"<{K}" in json.dumps(hidden, ensure_ascii=False)


def test_group_card_sizes_and_findings(documents, group_result, tmp_path):
    """Named cells, written from the releasable copy: site D (7 rows) and site E (3 rows, listed as not tested) are
    withheld whole; site A (150 rows, but 3 of its 40 cases missed) keeps its size while its recall is a band;
    every finding keeps its verdict."""
    audit_id = _store(tmp_path / "p.fairdesk", "groups", _doc("groups", documents, group_result))
    card = model_card(tmp_path / "p.fairdesk", audit_id, intended_use="x")
    size = {(g["task"], g["group"]): g for g in card["subgroups"]["groups"] if g["attribute"] == "site"}
    assert size[("sepsis", "A")]["size"] == 150 and size[("sepsis", "D")]["size"] is None
    recall_a = [r for r in releasable("groups", _doc("groups", documents, group_result), ReportSettings(suppress_k=11))
                ["records"] if (r["task"], r["group"], r["metric"]) == ("sepsis", "A", "recall")]
    assert recall_a and all(r["rate_band"] and r["numerator"] is None for r in recall_a)
    assert size[("aki", "E")]["size"] is None and size[("aki", "E")]["tested"] is False
    assert any("Released with small-cell threshold k = 11" in t for t in card["limitations"])
    assert any("site = E in task aki: not tested" in t for t in card["not_tested"])
    assert not any("Calibration by group" in t for t in card["not_tested"])  # this audit assessed calibration
    assert any(f.get("measure") == "calibration" or "calibrat" in json.dumps(f) for f in card["findings"]["items"])
    assert any(g["attribute"] == "age" and g["group"].startswith("bin 1 of 3") for g in card["subgroups"]["groups"])
    # every finding of groups.findings() appears once, with its gap and q-value
    from fairdesk.core.audits.groups import GroupAuditResult, findings

    rows = findings(GroupAuditResult.from_dict(_doc("groups", documents, group_result)))
    by_id = {i["finding_id"]: i for i in card["findings"]["items"]}
    assert set(by_id) == set(rows["test_id"])
    banded = {r["test_id"] for r in releasable("groups", _doc("groups", documents, group_result),
                                                ReportSettings(suppress_k=11))["records"] if r.get("gap_band")}
    for r in rows.to_dict(orient="records"):
        if r["test_id"] in banded:  # a gap resting on withheld counts: its range in the sentence, no estimate
            assert by_id[r["test_id"]]["estimate"] is None and " to " in by_id[r["test_id"]]["sentence"]
        elif r["metric"] != "calibration":  # a calibration finding's estimate is the group's calibration intercept
            assert by_id[r["test_id"]]["estimate"] == pytest.approx(r["gap"], abs=5e-4)
        assert by_id[r["test_id"]]["verdict"] == r["verdict"]
    cal = [i for i in card["findings"]["items"] if i["measure"] == "Calibration"]
    assert cal and all("observed/expected" in i["sentence"] and "–" not in i["sentence"].split(":")[1][:30]
                       for i in cal)


def test_project_provenance_of_data_and_model(tmp_path):
    """A group audit of predictions written by a project's model: the card names that model with its hashes, and
    the data by the project's dataset record (name, sha256, rows)."""
    import pandas as pd

    from fairdesk.core.audits.groups import GroupAuditPlan, run_group_audit
    from fairdesk.core.data.schema import ColumnRoles

    table = small._group_table(1)
    project = Project(tmp_path / "p.fairdesk")
    ds = project.add_dataset("preds.csv", table, "a" * 64, source=str(tmp_path / "preds.csv"))
    project.add_model("logistic_regression", "logistic_regression",
                      {"model_hashes": {"sepsis": "b" * 64}, "version": "v2"}, predictions_id=ds)
    roles = ColumnRoles(label="label", score="score", task="task", attributes=("site",))
    result = run_group_audit(table, GroupAuditPlan(threshold=0.5, roles=roles, n_boot=100, min_group_size=5))
    audit_id = project.add_audit("gaps", "groups", result.to_json(), dataset_id=ds)
    card = model_card(project, audit_id, intended_use=None)
    [trained] = card["model"].pop("trained_by_fairdesk")  # the project's model, trained by FairDesk
    assert (trained["role"], trained["kind"], trained["model_sha256"]) == ("audited model", "logistic_regression",
                                                                          "b" * 64)
    assert card["model"] == {"name": "logistic_regression", "kind": "logistic_regression", "version": "v2",
                             "hashes": {"logistic_regression:sepsis": "b" * 64}, "recorded_in": "project"}
    assert card["data"]["name"] == "preds.csv" and card["data"]["sha256"] == "a" * 64
    assert card["data"]["rows"] == len(table) and "imported from preds.csv" in card["data"]["origin"]
    assert card["intended_use"]["entered_by_user"] is False and "Not stated" in card["intended_use"]["statement"]
    assert isinstance(pd.DataFrame(card["subgroups"]["groups"]), pd.DataFrame)


def test_unknown_audit_and_bad_k(tmp_path):
    from fairdesk.core.errors import ProjectError

    project = Project(tmp_path / "p.fairdesk")
    with pytest.raises(ProjectError, match="Audit 9 is not in project"):
        model_card(project, 9, intended_use="x")
    with pytest.raises(DataError, match="at least 1"):
        model_card(project, 9, intended_use="x", suppress_k=0)


# --------------------------------------------------------------------------------------------------------------
# Markdown


@pytest.mark.parametrize("name", sorted(AUDIT_KINDS))
def test_markdown_holds_every_finding(name, documents, group_result, tmp_path):
    audit_id = _store(tmp_path / "p.fairdesk", name, _doc(name, documents, group_result))
    card = model_card(tmp_path / "p.fairdesk", audit_id, intended_use="Use *only* for research | audits.")
    md = card_markdown(card)
    plain = md.replace("\\", "")  # Markdown escapes removed: the card's own words
    for item in card["findings"]["items"]:
        assert f"**{item['verdict_words']}** — {item['sentence']}" in plain
    c = card["findings"]["verdict_counts"]
    findings = "finding" if c["total"] == 1 else "findings"
    assert f"{c['total']} {findings}: {c['differs']} differ, {c['equivalent']} equivalent" in plain
    # only what Markdown would read as markup is escaped: not the full stop
    assert "Use *only* for research | audits." in plain and "Use \\*only\\* for research \\| audits." in md
    for heading in ("## Model", "## Intended use", "## Data", "## Subgroups audited", "## Findings",
                    "## Limitations", "## Not tested"):
        assert heading in md
    assert not small.scan_text(plain, K)
    # a table row per subgroup (a pipe in a name cannot break the table: it is escaped)
    assert plain.count("\n|") - 2 * bool(card["subgroups"]["groups"]) == len(card["subgroups"]["groups"])


# --------------------------------------------------------------------------------------------------------------
# The schema and the validator


def _good_card(documents, group_result, tmp_path) -> dict:
    audit_id = _store(tmp_path / "p.fairdesk", "cit_images", _doc("cit_images", documents, group_result))
    return model_card(tmp_path / "p.fairdesk", audit_id, intended_use="x")


def _breakages() -> list[tuple[str, object, str]]:
    """(what, change, words of the error): each change breaks the schema in one way."""
    def drop(path):
        def f(card):
            node = card
            for key in path[:-1]:
                node = node[key]
            del node[path[-1]]
        return f

    def put(path, value):
        def f(card):
            node = card
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = value
        return f

    return [
        ("a required field missing", drop(["findings"]), "/: 'findings' is a required property"),
        ("a nested required field missing", drop(["audit", "seed"]), "/audit: 'seed' is a required property"),
        ("a verdict outside the three", put(["findings", "items", 0, "verdict"], "fair"), "is not one of"),
        ("a count that is neither a number nor <k", put(["data", "rows"], "about 40"), "does not match"),
        ("a negative count", put(["data", "rows"], -3), "less than the minimum"),
        ("a boolean where an integer belongs", put(["audit", "audit_id"], True), "True is not of type 'integer'"),
        ("a float count", put(["data", "rows"], 12.5), "is not of type"),
        ("a field the card does not have", put(["model", "owner"], "me"), "('owner' was unexpected)"),
        ("a hash that is not a string", put(["model", "hashes"], {"a": 3}), "/model/hashes/a"),
        ("a malformed sha256", put(["data", "sha256"], "XYZ"), "does not match"),
        ("findings not a list", put(["findings", "items"], {}), "is not of type 'array'"),
        ("a limitation not a string", put(["limitations"], ["ok", 5]), "/limitations/1"),
        ("another card format", put(["card_format"], "v2"), "is not one of"),
    ]


@pytest.mark.parametrize("case", range(len(_breakages())))
def test_validator_rejects_bad_cards(case, documents, group_result, tmp_path):
    what, change, words = _breakages()[case]
    card = _good_card(documents, group_result, tmp_path)
    validate_card(card)
    change(card)
    errors = schema_errors(card, load_schema())
    assert errors and any(words in e for e in errors), (what, errors)
    with pytest.raises(DataError, match="does not follow its schema"):
        validate_card(card)


def test_validator_rejects_counts_below_k(documents, group_result, tmp_path):
    card = _good_card(documents, group_result, tmp_path)
    card["subgroups"]["groups"][0]["size"] = 7  # valid for the schema, but below the card's k
    assert schema_errors(card, load_schema()) == []
    with pytest.raises(DataError, match="7 is below k = 11"):
        validate_card(card)
    card["subgroups"]["groups"][0]["size"] = "<5"  # suppressed with another k
    with pytest.raises(DataError, match="is not \"<11\""):
        validate_card(card)


def test_schema_is_shipped_in_resources():
    from fairdesk.paths import resources_dir

    assert schema_path() == resources_dir() / "model_card.schema.json" and schema_path().is_file()
    schema = load_schema()
    assert schema["properties"]["findings"]["properties"]["items"]["items"]["properties"]["verdict"]["enum"] == \
        list(VERDICTS)
    assert set(schema["properties"]["audit"]["properties"]["kind"]["enum"]) == set(AUDIT_KINDS)
    spec = (resources_dir().parent / "packaging" / "fairdesk.spec").read_text()
    # the frozen build carries resources/ whole, where importlib.resources finds them (fairdesk/resources)
    assert '(str(ROOT / "resources"), "fairdesk/resources")' in spec


def test_schema_is_valid_json_schema_and_jsonschema_is_the_validator(documents, group_result, tmp_path):
    """The shipped schema is valid JSON Schema 2020-12, and the one validator (jsonschema) accepts the good card and
    rejects every broken one."""
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(load_schema())
    cards = [_good_card(documents, group_result, tmp_path)]
    for _, change, _ in _breakages():
        card = json.loads(json.dumps(cards[0]))
        change(card)
        cards.append(card)
    assert [not schema_errors(c, load_schema()) for c in cards] == [True] + [False] * (len(cards) - 1)


# --------------------------------------------------------------------------------------------------------------
# The command line and the job


@pytest.fixture
def stored(documents, group_result, tmp_path):
    project = tmp_path / "p.fairdesk"
    return project, _store(project, "groups", _doc("groups", documents, group_result))


def test_cli_contract_form(stored, tmp_path, capsys):
    """Exactly the issue's command: `report model-card --project P --audit ID --out card.json`."""
    project, audit_id = stored
    out = tmp_path / "card.json"
    assert main(["report", "model-card", "--project", str(project), "--audit", str(audit_id), "--out", str(out)]) == 0
    card = json.loads(out.read_text(encoding="utf-8"))
    validate_card(card)
    assert card["audit"]["audit_id"] == audit_id and card["intended_use"]["entered_by_user"] is False
    assert "model card written to" in capsys.readouterr().out
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_cli_writes_json_and_markdown(stored, tmp_path):
    project, audit_id = stored
    use = tmp_path / "use.txt"
    use.write_text("Sepsis alert for adult ICU patients; not for children.\n", encoding="utf-8")
    out, md = tmp_path / "c.json", tmp_path / "c.md"
    assert main(["report", "model-card", "--project", str(project), "--audit", str(audit_id), "--out", str(out),
                 "--markdown", str(md), "--intended-use-file", str(use), "--suppress-k", "5",
                 "--limitation", "One hospital only."]) == 0
    card = json.loads(out.read_text(encoding="utf-8"))
    assert card["intended_use"]["statement"] == "Sepsis alert for adult ICU patients; not for children."
    assert card["audit"]["small_cell_k"] == 5 and "One hospital only." in card["limitations"]
    sizes = {(g["task"], g["group"]): g["size"] for g in card["subgroups"]["groups"] if g["attribute"] == "site"}
    assert sizes[("sepsis", "D")] is None and sizes[("sepsis", "E")] is None  # withheld at k = 5 (2 cases each)
    text = md.read_text(encoding="utf-8")
    assert text.startswith("# Fairness and equity card") and "Sepsis alert for adult ICU patients" in text
    card.pop("written_by")
    again = model_card(project, audit_id, intended_use=use.read_text(encoding="utf-8"), suppress_k=5,
                       limitations=["One hospital only."])
    again.pop("written_by")
    assert card == again


def test_cli_pdf_form_unchanged(stored, tmp_path):
    """`report --project P --audit ID --pdf OUT.pdf` (scripts depend on it) still writes the PDF."""
    project, audit_id = stored
    pdf = tmp_path / "r.pdf"
    assert main(["report", "--project", str(project), "--audit", str(audit_id), "--pdf", str(pdf)]) == 0
    assert pdf.read_bytes().startswith(b"%PDF")


@pytest.mark.parametrize("argv, words", [
    (["report", "--project", "{p}", "--audit", "{a}"], "Give --pdf FILE"),
    (["report", "--project", "{p}", "--audit", "{a}", "--pdf", "{d}/r.pdf", "--out", "{d}/c.json"],
     "--out belongs to 'report model-card'"),
    (["report", "model-card", "--project", "{p}", "--audit", "{a}"], "Give --out FILE.json"),
    (["report", "model-card", "--project", "{p}", "--audit", "{a}", "--out", "{d}/c.json", "--pdf", "{d}/r.pdf"],
     "not --pdf"),
    (["report", "model-card", "--project", "{p}", "--audit", "{a}", "--out", "{p}"], "FairDesk never overwrites"),
    (["report", "model-card", "--project", "{p}", "--audit", "{a}", "--out", "{d}/same", "--markdown", "{d}/same"],
     "are the same file"),
    (["report", "model-card", "--project", "{p}", "--audit", "{a}", "--out", "{d}/c.json", "--markdown",
      "{d}/blocker/c.md"], "blocker"),
    (["report", "model-card", "--project", "{p}", "--audit", "{a}", "--out", "{d}"], "folder"),
    (["report", "model-card", "--project", "{p}", "--audit", "{a}", "--out", "{d}/c.json", "--intended-use", "x",
      "--intended-use-file", "{d}/use.txt"], "Give the intended use once"),
    (["report", "model-card", "--project", "{p}", "--audit", "{a}", "--out", "{d}/c.json", "--intended-use-file",
      "{d}/nope.txt"], "Cannot read --intended-use-file"),
    (["report", "model-card", "--project", "{p}", "--audit", "99", "--out", "{d}/c.json"], "Audit 99 is not in"),
])
def test_cli_refuses_bad_paths_and_options(argv, words, stored, tmp_path, capsys):
    project, audit_id = stored
    (tmp_path / "blocker").write_text("a file where a folder should be")
    (tmp_path / "c.json").write_text("an earlier card\n")
    fill = {"{p}": str(project), "{a}": str(audit_id), "{d}": str(tmp_path)}
    argv = [re.sub(r"\{[pad]\}", lambda m: fill[m.group(0)], a) for a in argv]
    before = project.read_bytes()
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("fairdesk-cli: error: ") and words in err, err
    assert (tmp_path / "c.json").read_text() == "an earlier card\n"  # nothing half-written over an earlier file
    assert not (tmp_path / "c.md").exists() and not (tmp_path / "r.pdf").exists()
    assert project.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_job_writes_both_files_or_neither(stored, tmp_path, monkeypatch):
    """export_model_card builds and validates both texts before writing: a failure in the Markdown leaves neither."""
    from fairdesk.core import model_card as mc
    from fairdesk.jobs.reports import export_model_card

    project, audit_id = stored
    seen = []
    path = export_model_card(project, audit_id, tmp_path / "a.json", intended_use="x", suppress_k=K,
                             out_markdown=tmp_path / "a.md", progress=lambda f, m: seen.append(f))
    assert path == tmp_path / "a.json" and (tmp_path / "a.md").read_text().startswith("# Fairness")
    assert seen[0] == 0.0 and seen[-1] == 1.0

    def broken(card):
        raise DataError("Markdown failed.")

    monkeypatch.setattr(mc, "card_markdown", broken)
    with pytest.raises(DataError, match="Markdown failed"):
        export_model_card(project, audit_id, tmp_path / "b.json", intended_use="x", suppress_k=K,
                          out_markdown=tmp_path / "b.md")
    assert not (tmp_path / "b.json").exists() and not (tmp_path / "b.md").exists()


def test_job_cancelled_writes_nothing(stored, tmp_path):
    from fairdesk.core.progress import CancelToken, Cancelled
    from fairdesk.jobs.reports import export_model_card

    project, audit_id = stored
    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        export_model_card(project, audit_id, tmp_path / "a.json", intended_use="x", suppress_k=K, cancel=token)
    assert not (tmp_path / "a.json").exists()


def test_cli_from_a_table_to_the_card(tmp_path, capsys):
    """`audit groups … --project P`, then exactly `report model-card --project P --audit ID --out card.json`: the
    card names the stored dataset (its name, sha256 and rows) and counts the audit's verdicts as the audit printed."""
    from fairdesk.core.export import write_table

    data = write_table(small._group_table(2), tmp_path / "preds.csv")
    project = tmp_path / "p.fairdesk"
    assert main(["audit", "groups", "--threshold", "0.5", str(data), "--label", "label", "--score", "score", "--task", "task",
                 "--attribute", "site", "--min-group-size", "5", "--n-boot", "100", "--json",
                 str(tmp_path / "a.json"), "--project", str(project), "--quiet"]) == 0
    printed = capsys.readouterr().out
    audit_id = int(re.search(r"stored as audit (\d+)", printed).group(1))
    assert main(["report", "model-card", "--project", str(project), "--audit", str(audit_id), "--out",
                 str(tmp_path / "card.json")]) == 0
    card = json.loads((tmp_path / "card.json").read_text(encoding="utf-8"))
    validate_card(card)
    stored = Project(project, create=False).datasets()[-1]
    assert card["data"]["name"] == stored.name == "preds.csv" and card["data"]["sha256"] == stored.sha256
    assert card["data"]["rows"] == stored.n_rows == 520
    c = card["findings"]["verdict_counts"]
    assert (f"{c['total']} comparisons: {c['differs']} differ, {c['equivalent']} equivalent within ±0.05, "
            f"{c['inconclusive']} inconclusive") in printed


def _withheld_sizes(name: str, released: dict) -> int:
    """How many count fields the releasable copy holds as null, anywhere in it."""
    from fairdesk.core.disclosure import COUNT_KEYS

    def walk(o):
        if isinstance(o, dict):
            return (sum(1 for key, v in o.items() if key in COUNT_KEYS and v is None) +
                    sum(walk(v) for v in o.values()))
        if isinstance(o, list):
            return sum(walk(v) for v in o)
        return 0
    return walk(released)
