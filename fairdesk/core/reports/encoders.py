"""The report of the encoder comparison (kind ``"note_classifiers"``): note-level classifiers on frozen encoders,
baseline vs debiased (001 §4.1, Tables 5, A2, D4).

:func:`build_notes_report` turns the ``note_classifiers`` JSON document (from
:func:`fairdesk.core.models.note_classifier.note_classifiers_document`, as stored in the project) into the shared
:class:`~fairdesk.core.reports.document.Report` model; :func:`build_report` writes it with
:func:`~fairdesk.core.reports.pdf.write_pdf`. Everything comes from the document (no clock, no files), so the CLI
and the GUI write the same bytes for the same audit.

Small-cell suppression (``suppress_k``): every count of notes, windows, word pieces or patients below k — notes per
task and split, sizes of groups not tested, notes probed, counts in the notes recorded during training — prints as
"<k". Counts of tasks (how many gaps differ) and settings (folds, window length, bootstrap replicates) are shown.
"""
from __future__ import annotations

import os
from pathlib import Path

from fairdesk.core import numbers
from fairdesk.core.reports.board import Board, board_section
from fairdesk.core.reports.document import (with_disclosure, Block, Paragraph, Report, Section, Table, correction_words,
                                            join_words, report_date, suppress_text)
from fairdesk.core.reports.figures import fmt_count, fmt_rate, is_true, num

METRICS = ("parity", "recall", "specificity")
METRIC_TITLE = {"parity": "Parity gap", "recall": "Recall gap", "specificity": "Specificity gap"}
VERDICTS = ("differs", "equivalent", "inconclusive")


# --------------------------------------------------------------------------------------------------------------
# Group-gap verdicts (shared with the Note classifiers page)


def gap_verdict(rec: dict) -> str | None:
    """The verdict of one group-audit gap record: ``differs``, ``equivalent``, ``inconclusive``, or None when the
    gap was not tested. Records of a group audit with verdicts carry a ``verdict`` column; older records only
    ``significant_bh``: significant reads as differs, anything else tested as inconclusive — never equivalent,
    since no equivalence test was run."""
    if "verdict" in rec:
        v = rec.get("verdict")
        return str(v) if v in VERDICTS else None
    if num(rec.get("gap")) is None:
        return None
    return "differs" if is_true(rec.get("significant_bh")) else "inconclusive"


def _gap_records(doc: dict, name: str) -> list[dict]:
    audit = (doc.get("audits") or {}).get(name) or {}
    attr = (doc.get("method") or {}).get("attribute")
    return [r for r in audit.get("records") or []
            if r.get("metric") in METRICS and (attr is None or r.get("attribute") == attr)]


def has_gap_verdicts(doc: dict) -> bool:
    """Whether the stored group audits carry the ``verdict`` column (equivalence was tested)."""
    recs = [r for name in (doc.get("audits") or {}) for r in _gap_records(doc, name)]
    return bool(recs) and all("verdict" in r for r in recs)


def gap_verdict_counts(doc: dict, name: str, group: str | None = None, metric: str | None = None) -> dict | None:
    """Counts of the gap verdicts of encoder ``name`` (optionally one group and measure) over the tasks:
    ``differs``, ``equivalent``, ``inconclusive``, ``tested`` and ``share_favouring`` (of the differing gaps, the
    share favouring ``group``). None when the document holds no gap records for this encoder (the caller falls
    back to the summary's ``n_significant_bh``)."""
    recs = _gap_records(doc, name)
    if not recs:
        return None
    if group is not None:
        recs = [r for r in recs if str(r.get("group")) == str(group)]
    if metric is not None:
        recs = [r for r in recs if r.get("metric") == metric]
    out = {v: 0 for v in VERDICTS}
    fav = 0
    for r in recs:
        v = gap_verdict(r)
        if v is None:
            continue
        out[v] += 1
        if v == "differs" and group is not None and str(r.get("favours")) == str(group):
            fav += 1
    out["tested"] = sum(out[v] for v in VERDICTS)
    out["share_favouring"] = fav / out["differs"] if out["differs"] and group is not None else None
    return out


def gap_margin(doc: dict) -> float | None:
    """The equivalence margin the group audits used, when their plan records one."""
    for audit in (doc.get("audits") or {}).values():
        plan = audit.get("plan") or {}
        for key, value in plan.items():
            if "margin" in str(key) and num(value) is not None:
                return num(value)
    return None


def gap_cell(doc: dict, name: str, group: str, metric: str, summary_row: dict | None) -> str:
    """One cell of the 001 Table 5 layout: "2 of 40 differ (50% favour) · 30 equivalent · 8 inconclusive;
    unadjusted 3", or, for records without verdicts, the differing and the inconclusive count."""
    c = gap_verdict_counts(doc, name, group, metric)
    raw = int((summary_row or {}).get("n_significant") or 0)
    if c is None:
        if summary_row is None:
            return "–"
        k, n = int(summary_row.get("n_significant_bh") or 0), int(summary_row.get("n_tasks") or 0)
        c = {"differs": k, "equivalent": 0, "inconclusive": n - k, "tested": n,
             "share_favouring": num(summary_row.get("share_favouring_bh"))}
    if not c["tested"]:
        return "not tested in any task"
    cell = f"{c['differs']} of {c['tested']} differ"
    if c["differs"] and c["share_favouring"] is not None:
        cell += f" ({_pct(c['share_favouring'])} favour)"
    cell += f" · {c['equivalent']} equivalent · {c['inconclusive']} inconclusive"
    return cell + f"; unadjusted {raw}"


def _pct(value) -> str:
    f = num(value)
    return "–" if f is None else f"{100 * f:.0f}%"


def _mlp_text(params: dict | None) -> str:
    if not params:
        return "–"
    hidden = params.get("hidden_layer_sizes")
    hidden = "–".join(str(h) for h in hidden) if isinstance(hidden, (list, tuple)) else str(hidden)
    extra = "".join(f", {k} {numbers.short(v)}" if isinstance(v, (int, float)) else f", {k} {v}"
                    for k, v in params.items() if k not in ("hidden_layer_sizes",))
    return f"hidden {hidden}{extra}"


def _c_text(c) -> str:
    f = num(c)
    return "–" if f is None else f"{numbers.short(f)}"


def build_notes_report(doc: dict, *, suppress_k: int = 11) -> Report:
    """The report of a ``note_classifiers`` document; counts below ``suppress_k`` print as "<k"."""
    k = int(suppress_k)
    if k < 1:
        raise ValueError("suppress_k must be at least 1 (1 shows every count).")
    if doc.get("kind") != "note_classifiers":
        from fairdesk.core.errors import DataError

        raise DataError(f"This document is of kind '{doc.get('kind')}', not a note-classifier comparison.")
    prov = doc.get("provenance") or {}
    method = doc.get("method") or {}
    encoders = doc.get("encoders") or {}
    names = list(encoders)
    tasks = list(doc.get("tasks") or [])
    attribute = method.get("attribute")
    results = doc.get("results") or []
    date = report_date(prov)
    sections = [_summary(doc, names, tasks, attribute, results, k), _method(doc, method, names, k),
                _performance(names, tasks, results, k)]
    if doc.get("gaps") is not None and (doc.get("gaps") or attribute):
        sections.append(_gaps(doc, names, attribute, method, k))
    if doc.get("probe"):
        sections.append(_probe(doc, names, attribute, k))
    sections.append(_provenance(doc, names, prov, k))
    for i, s in enumerate(sections, start=1):
        s.title = f"{i}  {s.title}"
    sections.insert(0, board_section(board(doc, names, k), k))
    title = "FairDesk: note-level classifiers on frozen encoders"
    subtitle = (f"{' vs '.join(names)}" + (f" — gaps and probe for '{attribute}'" if attribute else "")
                + (f" — notes: {prov.get('dataset')}" if prov.get("dataset") else ""))
    return Report(title=title, subtitle=subtitle, date=date, suppress_k=k, sections=sections,
                  footer="FairDesk — frozen-encoder note classifiers",
                  metadata={"title": title, "subject": subtitle, "keywords": "fairness, clinical notes, BERT"})


def report_tree(doc: dict, settings) -> Report:
    """The report of a stored document with the user's settings (:class:`fairdesk.core.kinds.ReportSettings`)."""
    return with_disclosure(build_notes_report(doc, suppress_k=settings.suppress_k), doc)


# --------------------------------------------------------------------------------------------------------------


def board(doc: dict, names: list[str], k: int) -> Board:
    """What page 1 says of an encoder comparison: a grid of encoder and task × attribute from each encoder's group
    audit, the gaps that differ in words (the group audit's sentences, named by encoder), what could not be tested,
    what to check next."""
    from fairdesk.core.audits.groups import GroupAuditResult
    from fairdesk.core.reports import groups as G

    entries: list[tuple[str, str, str | None]] = []
    findings: list[str] = []
    untested: list[str] = []
    for name in names:
        audit = (doc.get("audits") or {}).get(name)
        if not audit:
            continue
        try:
            sub = G.board(GroupAuditResult.from_dict(audit), k)
        except (KeyError, TypeError, ValueError):  # an audit stored in an older form: its counts only
            continue
        entries += [(f"{name} · {task}" if task != "all rows" else name, attr, v) for task, attr, v in sub.entries]
        findings += [f"{name}: {text}" for text in sub.findings]
        untested += [f"{name}: {text}" for text in sub.untested[:1]]
    if not entries:  # group audits not kept: the per-encoder counts
        for g in doc.get("gaps") or []:
            v = "differs" if int(g.get("n_differs") or g.get("n_significant_bh") or 0) else (
                "equivalent" if int(g.get("n_equivalent") or 0) else "inconclusive")
            entries.append((str(g.get("encoder")), str(g.get("attribute")), v))
    tasks = list(doc.get("tasks") or [])
    steps = []
    if findings:
        steps.append("Compare the gaps of the encoders: a debiased encoder should narrow them; if it does not, "
                     "its debiasing did not reach the downstream classifier.")
    steps.append("Check the probe (page 2 on): an encoder whose features still reveal the attribute has hidden, "
                 "not removed, it.")
    return Board(question=(f"Do classifiers on the frozen features of {join_words(names)} predict "
                           f"{join_words(tasks) or 'the tasks'} equally well for every patient group?"),
                 entries=entries, row_title="Encoder", findings=findings,
                 no_findings="No group gap differs for any encoder. That is not proof that the classifiers are fair.",
                 untested=untested, next_steps=steps, plan="",
                 more_where="the group gaps section")


def _alpha(doc) -> float:
    """The level of the group audits' correction (0.05 when not recorded)."""
    for audit in (doc.get("audits") or {}).values():
        a = num(((audit or {}).get("plan") or {}).get("alpha"))
        if a is not None:
            return a
    return 0.05


def _summary(doc, names, tasks, attribute, results, k) -> Section:
    enc = doc.get("encoders") or {}
    n_notes = next((e.get("n_notes") for e in enc.values()), None)
    b: list[Block] = [Paragraph(
        f"{len(tasks)} task(s) ({join_words(tasks)}) were predicted from {fmt_count(n_notes, k)} clinical notes with "
        f"classifiers trained on the frozen features of {len(names)} encoder(s): {join_words(names)}. The encoders are not "
        "fine-tuned; only the small classifier on top of them is trained, so differences between encoders come from "
        "their representations." + (f" Group gaps are tested with the {correction_words('bh', _alpha(doc))}."
                                    if doc.get("gaps") else ""), "lead")]
    for name in names:
        rows = [r for r in results if r.get("encoder") == name]
        aurocs = [num(r.get("test_auroc")) for r in rows if num(r.get("test_auroc")) is not None]
        auprcs = [num(r.get("test_auprc")) for r in rows if num(r.get("test_auprc")) is not None]
        text = (f"{name}: mean test AUROC {fmt_rate(sum(aurocs) / len(aurocs)) if aurocs else '–'}, mean test AUPRC "
                f"{fmt_rate(sum(auprcs) / len(auprcs)) if auprcs else '–'} over {len(rows)} task(s)")
        gaps = [g for g in doc.get("gaps") or [] if g.get("encoder") == name]
        if gaps:
            c = gap_verdict_counts(doc, name)
            if c is None:
                n_sig = sum(int(g.get("n_significant_bh") or 0) for g in gaps)
                n_all = sum(int(g.get("n_tasks") or 0) for g in gaps)
                c = {"differs": n_sig, "equivalent": 0, "inconclusive": n_all - n_sig}
            margin = gap_margin(doc)
            text += (f"; group gaps (counted per group and measure, so with two groups each gap is counted for "
                     f"both): {c['differs']} differ{'s' if c['differs'] == 1 else ''} after that correction, "
                     f"{c['equivalent']} equivalent"
                     + (f" within ±{numbers.short(margin)}" if margin is not None else "")
                     + f", {c['inconclusive']} inconclusive")
        probe = (doc.get("probe") or {}).get(name)
        if probe:
            text += (f"; a probe recovers {attribute} from its features with accuracy {fmt_rate(probe.get('accuracy'))}"
                     f" (majority rate {fmt_rate(probe.get('majority'))}, AUROC {fmt_rate(probe.get('auroc'))})")
        b.append(Paragraph(text + ".", "bullet"))
    if doc.get("probe") and len(names) > 1:
        b.append(Paragraph(
            "Reading: a debiased encoder whose features still let a probe recover the attribute has hidden, not "
            "removed, the information; similar gap counts before and after debiasing mean the debiasing did not "
            "change downstream fairness (the probe and the gap verdicts per group are in sections below).", "note"))
    if doc.get("gaps"):
        b.append(Paragraph(
            "A gap is 'differs' when it is significant after correction, 'equivalent' when an equivalence test "
            "shows it lies within the audit's margin, and 'inconclusive' otherwise — typically too few cases. "
            "An inconclusive gap is not evidence that the classifier treats the groups alike."
            + ("" if has_gap_verdicts(doc) else " These group audits were stored before equivalence was tested, so "
               "every gap that is not significant is counted as inconclusive."), "note"))
    return Section("summary", "Summary", b)


def _method(doc, method, names, k) -> Section:
    win = method.get("windows") or {}
    split = method.get("split") or {}
    b: list[Block] = [
        Paragraph("Windows", "subheading"),
        Paragraph(f"Each note (PHI placeholders such as [**2126-9-19**] replaced by one token per type, as in "
                  f"pretraining) is tokenized with the encoder's own tokenizer and cut into sliding windows of "
                  f"{win.get('max_length')} tokens including [CLS] and [SEP], a new window every {win.get('stride')} "
                  f"word pieces, at most {win.get('max_windows')} windows per note (001 §3.3). Text beyond the last "
                  "window is truncated; the number of truncated notes is listed under provenance."),
        Paragraph("Features and classifier", "subheading"),
        Paragraph(f"Features: {method.get('features')}. Every window carries its note's label. Per task, an "
                  f"sklearn multi-layer perceptron (ReLU, Adam, at most {method.get('max_iter')} iterations) is "
                  "fitted for each configuration of the grid below. 001 searches depth, width ratio and dropout of a "
                  "batch-norm network; sklearn's MLP has neither dropout nor batch norm, so its L2 penalty (alpha) "
                  "takes dropout's place as the regulariser searched."),
        Paragraph("Note score", "subheading"),
        Paragraph(f"The window probabilities p_1 … p_n of a note are merged as {method.get('merge')}. "
                  "c → ∞ gives the "
                  "maximum, c → 0 the mean. "
                  f"{method.get('selection', '')[:1].upper()}{method.get('selection', '')[1:]}, over the c grid "
                  f"{', '.join(_c_text(c) for c in method.get('c_grid') or [])} (METHODS §1; ties go to the c closest "
                  f"to the default {_c_text(method.get('default_c'))}). Threshold: {method.get('threshold')}."),
        Paragraph("Splits and evaluation", "subheading"),
        Paragraph("Notes are split "
                  f"{'by patient (no patient in two splits)' if split.get('patient_disjoint') else 'by note'}"
                  f", seeded: {100 * (1 - (split.get('val_size') or 0) - (split.get('test_size') or 0)):.0f}% "
                  f"training, {100 * (split.get('val_size') or 0):.0f}% validation, "
                  f"{100 * (split.get('test_size') or 0):.0f}% test. AUROC and AUPRC are computed on the merged scores "
                  "of the test notes."),
    ]
    if method.get("attribute"):
        b += [Paragraph("Gaps and probe", "subheading"),
              Paragraph(f"Each encoder's predictions go through FairDesk's group audit (METHODS §1) for "
                        f"'{method.get('attribute')}': parity, recall and specificity gaps on the test notes at the "
                        f"best-F1 threshold, {method.get('n_boot')} bootstrap replicates (whole patients resampled "
                        "when a patient has several notes), two-sided bootstrap p-values, Benjamini–Hochberg at "
                        "q = 0.05 across tasks. The probe is a standardised logistic regression, stratified K-fold, "
                        "predicting the attribute from a note's [CLS] features (mean over its windows, numeric "
                        "columns left out), one note per patient so that a patient's notes never sit on both sides "
                        "of a fold.")]
    b += [Paragraph("Small cells", "subheading"),
          Paragraph(f"Small-cell suppression: every count of notes, windows, word pieces or patients below {k} "
                    f"(notes per task and split, sizes of groups not tested, notes probed) is shown as “<{k}” in "
                    "this report; rates and scores computed from them are still shown.")]
    grid = method.get("mlp_grid") or []
    b.append(Table(["#", "MLP configuration"], [[str(i + 1), _mlp_text(g)] for i, g in enumerate(grid)],
                   title="MLP grid searched", align=["R", "L"], widths=[1, 12]))
    return Section("method", "Method", b)


def _performance(names, tasks, results, k) -> Section:
    rows = []
    for r in results:
        rows.append([str(r.get("encoder")), str(r.get("task")), fmt_count(r.get("n_test"), k),
                     fmt_rate(r.get("prevalence_test")), fmt_rate(r.get("test_auroc")), fmt_rate(r.get("test_auprc")),
                     fmt_rate(r.get("val_auprc")), _c_text(r.get("c")), _mlp_text(r.get("mlp")),
                     fmt_rate(r.get("threshold")), fmt_rate(r.get("test_f1"))])
    b: list[Block] = [Table(["Encoder", "Task", "Test notes", "Prevalence", "AUROC", "AUPRC", "Val AUPRC", "c",
                             "MLP chosen", "Threshold", "F1"], rows, title="Test performance per encoder and task",
                            align=list("LLRRRRRRLRR"), small=len(rows) > 25,
                            note="AUROC, AUPRC and F1 on the test notes; c, MLP and threshold chosen on validation.")]
    if len(names) > 1:
        by = {(r.get("encoder"), r.get("task")): r for r in results}
        header = ["Task"] + [f"{n} {m}" for n in names for m in ("AUROC", "AUPRC")]
        crow = []
        for t in tasks:
            crow.append([t] + [fmt_rate((by.get((n, t)) or {}).get(f"test_{m}")) for n in names
                               for m in ("auroc", "auprc")])
        b.append(Table(header, crow, title="Encoders side by side (001 Table A2)",
                       align=["L"] + ["R"] * (len(header) - 1),
                       small=len(crow) > 25))
    return Section("performance", "Performance per task", b, landscape=False)


def _gaps(doc, names, attribute, method, k) -> Section:
    gaps = doc.get("gaps") or []
    groups = list(dict.fromkeys(str(g.get("group")) for g in gaps))
    rows = []
    for name in names:
        for group in groups:
            cells = []
            for metric in METRICS:
                g = next((x for x in gaps if x.get("encoder") == name and str(x.get("group")) == group
                          and x.get("metric") == metric), None)
                cells.append(gap_cell(doc, name, group, metric, g) if g is not None else "–")
            rows.append([name, group] + cells)
    b: list[Block] = [Paragraph(
        f"Verdicts of the gaps for each group of '{attribute}' over the tasks (001 Table 5 layout): the number of "
        "tasks whose gap differs (significant after Benjamini–Hochberg correction), with the share of those gaps "
        "that favour the group; the number shown equivalent within the audit's margin"
        + (f" (±{numbers.short(gap_margin(doc))})" if gap_margin(doc) is not None else "")
        + "; the number inconclusive (neither shown — not evidence of fairness); and the count significant before "
        f"correction. Gaps use the max-gap rule at the best-F1 threshold; {method.get('n_boot')} bootstrap "
        "replicates.")]
    if rows:
        b.append(Table(["Encoder", "Group"] + [METRIC_TITLE[m] for m in METRICS], rows,
                       title=f"Gap verdicts across {attribute} (001 Table 5)", align=list("LLLLL")))
    else:
        b.append(Paragraph("No group could be tested (groups too small on the test notes).", "note"))
    dropped = []
    for name, audit in (doc.get("audits") or {}).items():
        for d in audit.get("dropped") or []:
            dropped.append([name, str(d.get("task")), str(d.get("group")), fmt_count(d.get("n"), k),
                            suppress_text(str(d.get("reason")), k)])
    if dropped:
        b.append(Table(["Encoder", "Task", "Group", "n", "Reason"], dropped, title="Groups not tested",
                       align=list("LLLRL"), small=len(dropped) > 20, note=f"Sizes below {k} appear as “<{k}”."))
    return Section("gaps", "Group gaps of the downstream classifiers", b)


def _probe(doc, names, attribute, k) -> Section:
    probe = doc.get("probe") or {}
    measures = [("Accuracy", "accuracy"), ("Balanced accuracy", "balanced_accuracy"), ("AUROC", "auroc"),
                ("Log loss", "log_loss"), ("Majority-class rate", "majority")]
    rows = [[label] + [fmt_rate((probe.get(n) or {}).get(key)) for n in names] for label, key in measures]
    rows.append(["Notes probed"] + [fmt_count((probe.get(n) or {}).get("n"), k) for n in names])
    rows.append(["Folds"] + [str((probe.get(n) or {}).get("n_folds", "–")) for n in names])
    first = next(iter(probe.values()), {})
    b: list[Block] = [
        Paragraph(f"How well '{attribute}' ({join_words(first.get('classes') or [])}) can be recovered from each encoder's "
                  "note features by a cross-validated logistic regression (001 Table D4). Accuracy near the "
                  "majority-class rate and AUROC near 0.5 mean the features carry little of the attribute."),
        Table(["Measure"] + names, rows, title=f"Recovering {attribute} from the features",
              align=["L"] + ["R"] * len(names))]
    return Section("probe", "Attribute probe", b, new_page=False)


def _provenance(doc, names, prov, k) -> Section:
    enc = doc.get("encoders") or {}
    rows = [["Date", report_date(prov)], ["Notes", str(prov.get("dataset") or "not named")],
            ["Data SHA-256", str(prov.get("data_sha256") or "not recorded")], ["Seed", str(prov.get("seed"))],
            ["Bootstrap replicates", str((doc.get("method") or {}).get("n_boot") or "–")]]
    rows.append(["Small-cell suppression", f"counts below {k} shown as “<{k}”"])
    if prov.get("elapsed_seconds") is not None:
        rows.append(["Total time", f"{prov['elapsed_seconds']:.1f} s"])
    for name in names:
        e = enc[name]
        rows += [[f"{name}: folder", str(e.get("path"))], [f"{name}: fingerprint (SHA-256)", str(e.get("fingerprint"))],
                 [f"{name}: model", f"{e.get('model_type')}, {e.get('num_hidden_layers')} layers, hidden "
                                    f"{e.get('hidden_size')}, {e.get('layers_concatenated')} [CLS] layers concatenated "
                                    f"({e.get('feature_dim')} features)"],
                 [f"{name}: windows", f"{fmt_count(e.get('n_windows'), k)} windows for "
                                      f"{fmt_count(e.get('n_notes'), k)} notes "
                                      f"(mean {fmt_rate(e.get('mean_windows_per_note'), 2)}); "
                                      f"{fmt_count(e.get('notes_at_window_cap'), k)} notes at the cap of "
                                      f"{e.get('max_windows')} windows; "
                                      f"{fmt_count(e.get('truncated_notes'), k)} notes truncated "
                                      f"({fmt_count(e.get('truncated_tokens'), k)} word pieces left out)"],
                 [f"{name}: split (notes)", ", ".join(f"{part} {fmt_count(v, k)} notes" for part, v in
                                                      (e.get("split_sizes") or {}).items())],
                 [f"{name}: feature extraction", f"{fmt_rate(e.get('notes_per_second'), 1)} notes/s"]]
        for task, h in sorted((e.get("model_hashes") or {}).items()):
            rows.append([f"{name}: classifier SHA-256 ({task})", str(h)])
    b: list[Block] = [Paragraph("Everything needed to reproduce these results: the same notes (same fingerprint), "
                                "encoders, settings and seed give the same numbers and the same report."),
                      Table(["Item", "Value"], rows, title="Provenance", widths=[3, 7], small=len(rows) > 30)]
    notes = [n for e in enc.values() for n in (e.get("notes") or [])]
    b.append(Paragraph("Notes recorded during training", "subheading"))
    for n in dict.fromkeys(notes) or ["No notes were recorded."]:
        b.append(Paragraph(suppress_text(str(n), k), "bullet" if notes else "body"))
    versions = prov.get("versions") or {}
    if versions:
        b.append(Table(["Package", "Version"], [[k, str(v)] for k, v in versions.items()], title="Software versions",
                       small=True))
    return Section("provenance", "Provenance", b)


def build_report(doc: dict, path: str | os.PathLike, settings) -> Path:
    """The registry's one report signature (``settings``: :class:`fairdesk.core.kinds.ReportSettings`)."""
    from fairdesk.core.reports.pdf import write_pdf

    return write_pdf(report_tree(doc, settings), path)  # the tree with its disclosure rules
