"""Compare two stored group audits of the same data: which verdicts changed, how each gap moved, and what differed
between the two runs (thresholds, settings, model, data).

The usual question: the same predictions audited at a fixed threshold of 0.2 and at the best-F1 threshold — which
conclusions hold either way? The unit compared is the *test* (each pair of groups, each Δ_eo and calibration test,
once), keyed by task, attribute, measure, kind and the two groups, so a pair shown in two rows of the records table
is one row here. A gap is oriented the same way in both audits (first group of the pair minus the second, the
groups in sorted order), so its change means what it says.

:func:`compare_audits` returns a JSON-ready dict (the CLI's and the GUI's source); :func:`comparison_report` words
it as a report tree for the one PDF renderer (:mod:`fairdesk.core.reports.pdf`). Counts never appear, so the
small-cell rule has nothing to hide here; the gaps and verdicts are the audits' own.
"""
from __future__ import annotations

import math

from fairdesk.core.errors import DataError

#: settings of the plan that change what a verdict means, in the words a reader knows them by
SETTINGS = (("threshold", "threshold setting"), ("metrics", "measures"), ("gap_rule", "multi-group rule"),
            ("margin", "equivalence margin"), ("alpha", "significance level"), ("correction", "correction"),
            ("family", "correction family"), ("n_boot", "bootstrap replicates"), ("seed", "seed"),
            ("min_group_size", "smallest tested group"), ("min_denominator", "fewest cases of a tested rate"),
            ("bins", "bins of a continuous attribute"), ("intersections", "intersections"),
            ("drop_groups", "groups left out"), ("calibration", "calibration tested"))


def _finite(v):
    return None if v is None or (isinstance(v, float) and not math.isfinite(v)) else v


def _tests(doc: dict) -> dict[tuple, dict]:
    out = {}
    for t in doc.get("tests") or []:
        group, other = t.get("group"), t.get("comparison")
        flip = other is not None and str(other) < str(group)
        pair = (other, group) if flip else (group, other)
        gap = _finite(t.get("gap"))
        out[(t["task"], t["attribute"], t["metric"], t["kind"], *pair)] = {
            "gap": (-gap if flip and t["kind"] == "pair" and gap is not None else gap),
            "verdict": t.get("verdict"), "q_value": _finite(t.get("q_value"))}
    return out


def _setting_differences(doc_a: dict, doc_b: dict) -> list[dict]:
    plan_a, plan_b = doc_a.get("plan") or {}, doc_b.get("plan") or {}
    prov_a, prov_b = doc_a.get("provenance") or {}, doc_b.get("provenance") or {}
    out = []
    if prov_a.get("data_sha256") != prov_b.get("data_sha256"):
        out.append({"what": "data", "a": prov_a.get("dataset") or prov_a.get("data_sha256", "")[:12],
                    "b": prov_b.get("dataset") or prov_b.get("data_sha256", "")[:12],
                    "note": "different tables: a changed verdict may come from the data, not the settings"})
    if (prov_a.get("model_hashes") or {}) != (prov_b.get("model_hashes") or {}):
        out.append({"what": "model", "a": ", ".join(sorted(prov_a.get("model_hashes") or {})) or "imported scores",
                    "b": ", ".join(sorted(prov_b.get("model_hashes") or {})) or "imported scores",
                    "note": "the scores come from different models (their hashes differ)"})
    ta, tb = doc_a.get("thresholds") or {}, doc_b.get("thresholds") or {}
    for task in sorted(set(ta) | set(tb)):
        if ta.get(task) != tb.get(task):
            out.append({"what": f"threshold used ({task})", "a": _num(ta.get(task)), "b": _num(tb.get(task)),
                        "note": ""})
    for key, words in SETTINGS:
        if plan_a.get(key) != plan_b.get(key):
            out.append({"what": words, "a": _num(plan_a.get(key)), "b": _num(plan_b.get(key)), "note": ""})
    roles_a, roles_b = plan_a.get("roles") or {}, plan_b.get("roles") or {}
    for key in sorted(set(roles_a) | set(roles_b)):
        if roles_a.get(key) != roles_b.get(key):
            out.append({"what": f"column role {key}", "a": _num(roles_a.get(key)), "b": _num(roles_b.get(key)),
                        "note": ""})
    return out


def _num(v) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        return ", ".join(_num(x) for x in v) or "none"
    if isinstance(v, dict):
        return "; ".join(f"{k}: {_num(x)}" for k, x in v.items()) or "none"
    return str(v)


def compare_audits(doc_a: dict, doc_b: dict, *, name_a: str = "A", name_b: str = "B") -> dict:
    """The comparison of two group-audit documents (A, then B). Rows: every test in either audit, with each
    audit's gap and verdict, the change of the gap (B − A) and whether the verdict changed; tests only one audit
    ran are kept with the other side empty."""
    for doc, name in ((doc_a, name_a), (doc_b, name_b)):
        if "tests" not in doc or "plan" not in doc or doc.get("kind", "groups") != "groups":
            raise DataError(f"'{name}' is not a group audit; compare reads two group audits (Group gaps).")
    tests_a, tests_b = _tests(doc_a), _tests(doc_b)
    rows = []
    for key in sorted(set(tests_a) | set(tests_b), key=lambda k: tuple("" if x is None else str(x) for x in k)):
        a, b = tests_a.get(key), tests_b.get(key)
        task, attribute, metric, kind, group, other = key
        gap_a, gap_b = (a or {}).get("gap"), (b or {}).get("gap")
        rows.append({"task": task, "attribute": attribute, "metric": metric, "kind": kind, "group": group,
                     "comparison": other, "gap_a": gap_a, "gap_b": gap_b,
                     "gap_change": gap_b - gap_a if gap_a is not None and gap_b is not None else None,
                     "verdict_a": (a or {}).get("verdict"), "verdict_b": (b or {}).get("verdict"),
                     "changed": a is not None and b is not None and a.get("verdict") != b.get("verdict"),
                     "only_in": None if a and b else (name_a if a else name_b)})
    both = [r for r in rows if r["only_in"] is None]
    changes = [abs(r["gap_change"]) for r in both if r["gap_change"] is not None]
    return {"a": {"name": name_a, "created": (doc_a.get("provenance") or {}).get("created_utc")},
            "b": {"name": name_b, "created": (doc_b.get("provenance") or {}).get("created_utc")},
            "same_data": (doc_a.get("provenance") or {}).get("data_sha256")
            == (doc_b.get("provenance") or {}).get("data_sha256"),
            "differences": _setting_differences(doc_a, doc_b), "rows": rows,
            "counts": {"compared": len(both), "changed": sum(r["changed"] for r in both),
                       "only_a": sum(r["only_in"] == name_a for r in rows),
                       "only_b": sum(r["only_in"] == name_b for r in rows),
                       "largest_gap_change": max(changes) if changes else None}}


def comparison_sentences(cmp: dict) -> list[str]:
    """The comparison in words (the report's and the GUI's first lines)."""
    c, a, b = cmp["counts"], cmp["a"]["name"], cmp["b"]["name"]
    out = [f"{c['compared']} tests ran in both audits; {c['changed']} changed verdict from '{a}' to '{b}'"
           + (f" (the largest change of a gap: {c['largest_gap_change']:.3f})." if c["largest_gap_change"]
              is not None else ".")]
    if c["only_a"] or c["only_b"]:
        out.append(f"{c['only_a']} tests ran only in '{a}' and {c['only_b']} only in '{b}' (groups tested in one "
                   "and not the other, or other settings).")
    if not cmp["same_data"]:
        out.append("The two audits ran on different tables; a changed verdict may come from the data.")
    diffs = [d for d in cmp["differences"] if d["what"] != "data"]
    if diffs:
        out.append("What differed: " + "; ".join(f"{d['what']} {d['a']} → {d['b']}" for d in diffs[:8])
                   + (" …" if len(diffs) > 8 else "") + ".")
    else:
        out.append("The two audits ran with the same settings.")
    return out


def _gap(v) -> str:
    return "—" if v is None else f"{v:+.3f}"


def comparison_report(cmp: dict, date: str, suppress_k: int = 11):
    """The comparison as a report tree (:class:`fairdesk.core.reports.document.Report`)."""
    from fairdesk.core.reports.document import Paragraph, Report, Section, Table

    a, b = cmp["a"]["name"], cmp["b"]["name"]
    summary = Section("summary", "What changed", [Paragraph(s) for s in comparison_sentences(cmp)], new_page=False)
    if cmp["differences"]:
        summary.blocks.append(Table(["What", a, b, "Note"], [[d["what"], d["a"], d["b"], d["note"]]
                                                            for d in cmp["differences"]],
                                    title="What differed between the two runs", widths=[3, 2, 2, 4]))
    changed = [r for r in cmp["rows"] if r["changed"]]
    header = ["Task", "Attribute", "Measure", "Groups", f"Gap {a}", f"Gap {b}", "Change", f"Verdict {a}",
              f"Verdict {b}"]

    def cells(r):
        groups = r["group"] if r["comparison"] is None else f"{r['group']} vs {r['comparison']}"
        return [str(r["task"]), str(r["attribute"]), f"{r['metric']} ({r['kind']})", str(groups), _gap(r["gap_a"]),
                _gap(r["gap_b"]), _gap(r["gap_change"]), r["verdict_a"] or "—", r["verdict_b"] or "—"]

    sections = [summary]
    sections.append(Section("changed", "Verdicts that changed",
                            [Table(header, [cells(r) for r in changed], small=True)] if changed
                            else [Paragraph("No verdict changed.")], landscape=True))
    sections.append(Section("all", "Every test in either audit",
                            [Table(header, [cells(r) for r in cmp["rows"]], small=True,
                                   note="Gap: first group minus second (groups in sorted order), the same way in "
                                        "both audits; change = B − A. '—': the test did not run in that audit.")],
                            landscape=True))
    return Report(title="Comparison of two group audits", subtitle=f"'{a}' and '{b}'", date=date,
                  suppress_k=suppress_k, sections=sections, footer="FairDesk audit comparison")
