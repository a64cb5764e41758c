"""The report of a counterfactual-invariance audit of an image classifier (kind ``"cit_images"``,
METHODS §6).

:func:`build_cit_report` turns the stored JSON document (``kind == "cit_images"``, written by
:func:`fairdesk.core.audits.cit_images.run_cit_pipeline` for both the CLI and the project job) into a
:class:`~fairdesk.core.reports.document.Report`; :func:`cit_report_to_pdf` renders it. Sections:

1. summary — verdict per output in words, what "differs", "equivalent within ±margin" and "inconclusive" mean,
   the negative-control band (the stored document says "dependent" and "equivalent within margin"; the report uses
   the words of every other audit family);
2. tests per output in the layout of 004 Tables 12–13: the default conditional-invariance test (statistic, p, BH
   q), the published CIT-LR (t, p, q), and the demographic-parity and equal-opportunity Welch tests (p);
3. the oriented prediction shift per direction a → a′ with its confidence interval, flip rate, TOST p and verdict,
   the flip baseline and the negative control;
4. scatter plots of each output's prediction on the reference image (original, or the null-intervention
   reconstruction for a learned generator) against the counterfactual, one panel per direction, plus the
   horizontal-flip column (the null baseline);
5. example diff panels: original | null reconstruction | counterfactual | signed difference (counterfactual − null
   reconstruction, diverging colormap RdBu_r centred at 0);
6. counterfactual quality (composition, effectiveness, Fréchet distance in a locally fitted feature space — named as
   such, not Inception FID);
7. unreadable files, notes, settings and provenance.

Rendering goes through the shared renderer (:func:`fairdesk.core.reports.pdf.render_bytes`, figure kinds
"cit_scatter" and "cit_examples" registered here): deterministic (reportlab invariant mode, PNGs without time stamps;
the date printed is the audit's) and atomic. reportlab and matplotlib are imported inside functions.

Small-cell suppression (``suppress_k``): every count of images or units below k — images audited, per group, per
output and direction, readable, left out, unreadable, the audit's ``n`` setting, counts in the notes — prints as
"<k". Unit numbers of the examples are identifiers, not counts; folds, outputs and thresholds are settings.
"""
from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pandas as pd

from fairdesk.core import atomic, numbers
from fairdesk.core.errors import DataError
from fairdesk.core.reports.figures import (fmt_ci, fmt_count, fmt_p, fmt_rate, fmt_signed, new_figure, num,
                                          save_figure)
from fairdesk.core.reports.board import Board, board_section
from fairdesk.core.reports.document import (with_disclosure, FigureSpec, Paragraph, Report, Section, Table, correction_words, plural,
                                            suppress_text, suppression_note)

MAX_EXAMPLES_IN_REPORT = 6
MAX_UNREADABLE_ROWS = 60
TEST_NAMES = {"wgcm": "weighted GCM", "gcm": "GCM", "cit_lr_crossfit": "CIT-LR (cross-fitted)",
              "cit_lr_split": "CIT-LR (split)"}
VERDICT_TEXT = {
    "dependent": "its prediction changes when only the attribute is changed (not counterfactually invariant)",
    "equivalent within margin": "shown to be invariant within the margin",
    "inconclusive": "neither dependence nor invariance within the margin is shown",
}


def verdict_label(verdict, margin: float) -> str:
    """The verdict as every FairDesk report words it: differs / equivalent within ±margin / inconclusive (the
    stored document says "dependent" and "equivalent within margin")."""
    v = str(verdict or "")
    if v == "dependent":
        return "differs"
    if v == "equivalent within margin":
        return f"equivalent within ±{numbers.short(margin)}"
    return v


def _note_words(text: str) -> str:
    """A note of the audit with its verdict words as the report prints them."""
    return text.replace("'dependent' verdict", "'differs' verdict")


def _p_is(value) -> str:
    """'p = 0.123' or 'p < 0.001' for running text."""
    return numbers.p_equals(value)


def _two(value) -> str:
    v = num(value)
    return "–" if v is None else f"{v:.2f}"


def _dir_label(key: str, values: list[str]) -> str:
    """'0->1' → 'F → M' using the attribute's group names."""
    try:
        s, t = (int(x) for x in key.split("->"))
        return f"{values[s]} → {values[t]}"
    except (ValueError, IndexError):
        return key.replace("->", " → ")


# ==============================================================================================================
# The report model


def build_cit_report(doc: dict, *, suppress_k: int = 11) -> Report:
    """The report of a ``cit_images`` document (see the module docstring); counts below ``suppress_k`` print as
    "<k"."""
    k = int(suppress_k)
    if k < 1:
        raise ValueError("suppress_k must be at least 1 (1 shows every count).")
    if not isinstance(doc, dict) or "table" not in doc or "effects" not in doc:
        raise DataError("This is not a counterfactual-invariance audit document (no 'table' / 'effects').")
    settings = doc.get("settings", {})
    prov = doc.get("provenance", {})
    attr = doc.get("attribute") or {"column": prov.get("attribute", "attribute"),
                                     "values": prov.get("attribute_values", ["0", "1"])}
    values = [str(v) for v in attr.get("values") or ["0", "1"]]
    column = attr.get("column", "attribute")
    outputs = [r["output"] for r in doc["table"]]
    learned = settings.get("generator") == "learned"
    clf_name = ((prov.get("classifier") or {}).get("name") if isinstance(prov.get("classifier"), dict)
                else prov.get("classifier")) or "the classifier"
    date = str(prov.get("created_utc", ""))[:10]
    sections = [board_section(board(doc, column, values, clf_name, k), k),
                _summary(doc, column, values, outputs, learned, clf_name, k),
                _tests_section(doc, values, k),
                _shift_section(doc, column, values, learned, k),
                _scatter_section(doc, values, learned),
                _examples_section(doc, values),
                _quality_section(doc),
                _data_section(doc, k),
                _provenance_section(doc, k)]
    register_figures()
    return Report(title="FairDesk counterfactual-invariance audit (images)",
                  subtitle=f"{clf_name} · attribute '{column}' ({' vs '.join(values)}) · "
                           f"{prov.get('dataset', '')}".rstrip(" ·"),
                  date=date, suppress_k=k, sections=[s for s in sections if s is not None],
                  footer="FairDesk · counterfactual invariance",
                  metadata={"title": "FairDesk counterfactual-invariance audit", "subject": f"attribute {column}",
                            "keywords": "fairness, counterfactual invariance, CIT-LR, medical imaging"})


def board(doc: dict, column: str, values: list[str], clf_name: str, k: int) -> Board:
    """What page 1 says of an image audit: a grid of outputs × the attribute, each output that changes with the
    attribute in words (direction, mean shift with its interval, how sure), what could not be tested, what next."""
    s = doc.get("settings", {})
    margin = num(s.get("margin")) or 0.02
    rows = doc.get("table") or []
    entries = [(str(r.get("output")), str(column), verdict_label(r.get("verdict"), margin)) for r in rows]
    findings = []
    for r in rows:
        if r.get("verdict") != "dependent":
            continue
        shifts = []
        for key in sorted(r):
            if key.startswith("shift_") and not key.endswith("_ci"):
                ci = r.get(f"{key}_ci") or [None, None]
                shifts.append(f"{_dir_label(key[6:], values)} {fmt_signed(r[key])} (95% CI "
                              f"{fmt_ci(*(list(ci) + [None, None])[:2])})")
        findings.append(f"Output {r.get('output')} changes when only '{column}' is changed: mean prediction shift "
                        f"{'; '.join(shifts) or 'not recorded'}, beyond the margin ±{numbers.short(margin)} "
                        f"(invariance test {_p_is(r.get('p'))}).")
    untested = []
    n_missing = (doc.get("dataset") or {}).get("n_missing_attribute")
    if num(n_missing):
        untested.append(f"{_count(n_missing, k)} images without a recorded '{column}' were left out.")
    elif n_missing is None and "n_missing_attribute" in (doc.get("dataset") or {}):  # withheld: from 1 to k − 1
        untested.append(f"Fewer than {k} images without a recorded '{column}' were left out.")
    if doc.get("unreadable"):
        untested.append(f"{_count(len(doc['unreadable']), k)} images could not be read (listed under Data and "
                        "notes).")
    if s.get("generator") == "learned" and doc.get("control_band") is None:
        untested.append("No negative-control classifier was given: generator artefacts cannot be told from "
                        "dependence, so a 'differs' is provisional.")
    n_inc = sum(1 for r in rows if r.get("verdict") == "inconclusive")
    if n_inc:
        untested.append(f"{n_inc} of {plural(len(rows), 'output')} {'is' if n_inc == 1 else 'are'} inconclusive: "
                        "not evidence of invariance.")
    steps = []
    if findings:
        steps.append("Look at the example counterfactuals: does the classifier read the attribute itself, or "
                     "something that travels with it in the images?")
    steps.append("Check the counterfactuals' quality (page 2 on): a poor generator can hide or fake a shift.")
    return Board(question=(f"Does {clf_name}'s prediction change when only '{column}' of an image is changed "
                           f"({values[0]} ↔ {values[1]}), everything else held fixed?"),
                 entries=entries, row_title="Output", findings=findings,
                 no_findings=("No output was shown to change with the attribute. That is not proof of invariance "
                              "unless its verdict says equivalent."),
                 untested=untested, next_steps=steps, plan=str(s.get("description") or ""),
                 more_where="the tests per output")


def _summary(doc, column, values, outputs, learned, clf_name, k) -> Section:
    s = doc.get("settings", {})
    margin = s.get("margin", 0.02)
    ds = doc.get("dataset", {})
    band = doc.get("control_band")
    blocks = [Paragraph(
        f"Question: does {clf_name}'s prediction change when only the attribute '{column}' of an image is changed "
        f"({values[0]} ↔ {values[1]}), everything else about the patient held fixed? "
        f"{_count(ds.get('n_audited', s.get('n')), k)} images "
        f"{'in all' if ds.get('split') == 'all' else 'of the ' + repr(ds.get('split', 'test')) + ' split'} were audited "
        f"({', '.join(f'{g}: {_count(v, k)} images' for g, v in (ds.get('n_per_group') or {}).items())}).", "lead")]
    rows = {r["output"]: r for r in doc["table"]}
    for name in outputs:
        r = rows[name]
        v = r.get("verdict", "inconclusive")
        shifts = [f"{_dir_label(key[6:], values)}: {fmt_signed(r[key])}" for key in sorted(r)
                  if key.startswith("shift_") and not key.endswith("_ci")]
        blocks.append(Paragraph(f"{name}: {verdict_label(v, margin)} — {VERDICT_TEXT.get(v, v)}. "
                                f"Mean prediction shift "
                                f"{'; '.join(shifts)} (margin ±{numbers.short(s.get('margin', 0.02))}); invariance test "
                                f"{_p_is(r.get('p'))}, demographic parity {_p_is(r.get('dp_p'))}.", "finding"))
    blocks.append(Paragraph("How to read the verdicts", "subheading"))
    blocks += [
        Paragraph("differs: the oriented shift (prediction on the counterfactual minus on the reference) differs "
                  "from 0, or its mean absolute size exceeds the margin, with confidence — and, with a learned "
                  "generator, it lies outside the negative-control band.", "bullet"),
        Paragraph(f"equivalent within ±{numbers.short(margin)}: a TOST equivalence test shows |mean shift| < {numbers.short(margin)} AND the "
                  "upper "
                  "bound of the mean |shift| is below the margin, so shifts in opposite directions cannot hide "
                  "each other.", "bullet"),
        Paragraph("inconclusive: neither is shown. In particular a shift no larger than the negative-control band — "
                  "the shift a classifier known to ignore the attribute shows through the same generator — is "
                  "reported as inconclusive, never as a difference: a small generator also changes pixels outside "
                  "the attribute's region, and such artefacts must not be mistaken for bias.", "bullet")]
    if learned:
        if band is not None:
            ce = doc.get("control_effect") or {}
            blocks.append(Paragraph(f"Negative-control band: ±{numbers.fixed(band, 3)} (the upper {numbers.short(100 * (1 - s.get('alpha', 0.05)))}% "
                                    f"bound of the mean |shift| of '{ce.get('name', 'the control')}').", "body"))
        else:
            blocks.append(Paragraph("No negative-control classifier was given, so generator artefacts cannot be told "
                                    "apart from attribute dependence: 'differs' verdicts are provisional.", "note"))
        blocks.append(Paragraph("Counterfactuals come from a learned generator; shifts are measured against the "
                                "null-intervention reconstruction (a′ = a), not the raw image.", "note"))
    else:
        blocks.append(Paragraph("Counterfactuals are exact (rendered from the known mechanism); shifts are measured "
                                "against the original images.", "note"))
    return Section("summary", "Summary", blocks)


def _tests_section(doc, values, k) -> Section:
    s = doc.get("settings", {})
    test = TEST_NAMES.get(s.get("method", "wgcm"), s.get("method", "wgcm"))
    header = ["Output", "n", f"{test} stat.", "p", "q", "CIT-LR t", "CIT-LR p", "CIT-LR q", "DP p", "EO p"]
    rows = []
    for r in doc["table"]:
        rows.append([r["output"], _count(r.get("n"), k), fmt_signed(r.get("t"), 2), fmt_p(r.get("p")),
                     fmt_p(r.get("q")), fmt_signed(r.get("cit_lr_t"), 2), fmt_p(r.get("cit_lr_p")),
                     fmt_p(r.get("cit_lr_q")), fmt_p(r.get("dp_p")), fmt_p(r.get("eo_p"))])
    blocks = [Table(header, rows, title="Invariance and association tests per output",
                    align=["L"] + ["R"] * 9,
                    note=(f"{test}: FairDesk's default test of Ŷ ⊥ A | Z ({_scheme_words(doc)}, "
                          f"{_regressor_words(s.get('regressor', ''))}, {s.get('n_folds', 5)} folds). Stat.: the "
                          "weighted statistic (one-sided, N(0,1) under invariance); p: the smaller of its p and "
                          "the plain two-sided GCM's on the same residuals, referred to the two statistics' joint "
                          "normal law (between min p and 2·min p). "
                          "CIT-LR: the published paired t-test of "
                          f"Ŷ·ĝ(A,Z) against Ŷ·ĥ(Z) on a held-out split. q: p after the "
                          f"{correction_words('bh', num(s.get('alpha')) or 0.05)}, across outputs. DP: "
                          "Welch t-test of the prediction between the groups; EO: the same among true positives "
                          "(– when no label was given). DP and EO measure association, not the effect of the "
                          "attribute: they can flag a classifier that uses only legitimate features."))]
    blocks.append(Paragraph(f"Z, the representation the tests condition on: {s.get('z', 'the exogenous features')}.",
                            "note"))
    fit_rows = []
    for r in doc["table"]:
        chosen = r.get("regressors_chosen") or {}
        for nuisance, d in (r.get("nuisance_fit") or {}).items():
            fit_rows.append([r["output"], nuisance, ", ".join(chosen.get(nuisance, [])) or "–",
                             _fmt2(d.get("skill")), _fmt2(d.get("calibration_slope")),
                             fmt_signed(d.get("calibration_in_the_large"), 3),
                             "ok" if d.get("ok") else "check", d.get("note", "")])
    if fit_rows:
        blocks.append(Table(["Output", "Nuisance", "Regressor", "Skill", "Cal. slope", "Mean obs − pred", "Fit",
                             "Note"], fit_rows, title="Quality of the test's nuisance regressions (out of fold)",
                            align=["L", "L", "L", "R", "R", "R", "L", "L"],
                            widths=[0.9, 0.85, 1.1, 0.55, 0.65, 0.9, 0.6, 2.35],
                            note=("The test's level rests on these fits: its bias is the product of the errors of "
                                  "E[Ŷ|Z] and P(A=1|Z). Measured on rows each model was not fitted on. Skill: 1 − "
                                  "Brier / Brier of the overall rate (0 when Z carries nothing, as for P(A|Z) when A "
                                  "is independent of Z). Calibration slope: 1 is calibrated, below 1 over-fitted, "
                                  "above 1 under-fitted; 'check' when its 95% interval lies outside 0.8–1.25 or the "
                                  "mean prediction is off by more than 0.05. Regressor: what the cross-validated "
                                  "choice between logistic regression and gradient boosting picked per fold.")))
    return Section("tests", "Tests per output", blocks, new_page=False)


def _scheme_words(doc) -> str:
    schemes = {r.get("scheme") for r in doc.get("table", []) if r.get("scheme")}
    if schemes == {"sequential-weight"}:
        return ("E[Ŷ|Z] and P(A|Z) cross-fitted on the other folds, the weight ĝ(1,Z) − ĝ(0,Z) fitted on the "
                "earlier folds only")
    if schemes == {"sequential"}:
        return "all nuisances fitted on the earlier folds only"
    return "cross-fitted"


def _regressor_words(kind: str) -> str:
    if kind == "auto":
        return ("each nuisance regression logistic unless gradient boosting's cross-fitted held-out log-loss is "
                "lower by a significant margin (paired test, p < 0.01)")
    return f"{kind} regressors" if kind else "regressors"


def _shift_section(doc, column, values, learned, k) -> Section:
    s = doc.get("settings", {})
    header = ["Output", "Direction", "n", "Mean shift", "95% CI", "Mean |shift|", "Flip rate", "TOST p", "Verdict"]
    rows = []
    for name, eff in doc["effects"].items():
        for d in eff.get("directions", []):
            key = f"{d['source']}->{d['target']}"
            rows.append([name, _dir_label(key, values), _count(d.get("n"), k), fmt_signed(d.get("mean_shift")),
                         fmt_ci(d.get("ci_low"), d.get("ci_high")), fmt_rate(d.get("mean_abs_shift")),
                         fmt_rate(d.get("flip_rate")), fmt_p(d.get("p_tost")),
                         verdict_label(d.get("verdict", ""), s.get("margin", 0.02))])
    ref = "the null-intervention reconstruction" if learned else "the original image"
    blocks = [Table(header, rows, title=f"Oriented prediction shift per direction of '{column}'",
                    align=["L", "L", "R", "R", "L", "R", "R", "R", "L"],
                    widths=[1.2, 1.05, 0.5, 0.75, 1.7, 0.75, 0.65, 0.8, 1.5],
                    note=(f"Shift = prediction on the counterfactual minus prediction on {ref}, per unit, oriented "
                          "a → a′ (pairs of opposite directions are never pooled, so they cannot cancel). Flip rate: "
                          "share of units whose thresholded prediction (0.5) changes. TOST: equivalence test of "
                          f"|mean shift| < {numbers.short(s.get('margin', 0.02))}."))]
    base_rows = []
    for r in doc["table"]:
        if "flip_mean_abs_shift" in r or "reconstruction_mean_abs_shift" in r:
            base_rows.append([r["output"], fmt_rate(r.get("flip_mean_abs_shift")), fmt_rate(r.get("flip_upper")),
                              fmt_rate(r.get("reconstruction_mean_abs_shift"))])
    if base_rows:
        blocks.append(Table(["Output", "Flip: mean |shift|", "Flip: upper bound", "Reconstruction: mean |shift|"],
                            base_rows, title="Baselines", align=["L", "R", "R", "R"],
                            note="Flip: prediction on the horizontally flipped original minus on the original — how "
                                 "much an attribute-irrelevant change moves the output. Reconstruction: prediction on "
                                 "the null-intervention reconstruction minus on the original (generator artefacts)."))
    band = doc.get("control_band")
    ce = doc.get("control_effect")
    if band is not None and ce:
        crow = [[ce.get("name", "control"), _dir_label(f"{d['source']}->{d['target']}", values),
                 fmt_signed(d.get("mean_shift")), fmt_rate(d.get("mean_abs_shift")), fmt_rate(d.get("abs_upper"))]
                for d in ce.get("directions", [])]
        blocks.append(Table(["Negative control", "Direction", "Mean shift", "Mean |shift|", "Upper bound"], crow,
                            title=f"Negative-control band ±{numbers.short(band, 3)}", align=["L", "L", "R", "R", "R"],
                            note="The band is the largest upper bound of the control's mean |shift|. A shift inside "
                                 "it is inconclusive: the generator alone can move an invariant classifier that "
                                 "much." + (f" The invariance test on the control: {_p_is(ce.get('test_p'))}."
                                            if ce.get("test_p") is not None else "")))
    return Section("shifts", "Prediction shifts, baselines and the negative control", blocks, new_page=False)


def _scatter_data(doc, values) -> list[tuple[str, pd.DataFrame]]:
    out = []
    for name, panels in (doc.get("scatter") or {}).items():
        rows = []
        for key, pts in (panels or {}).items():
            if not isinstance(pts, dict):  # (a panel of another shape: a newer version's, not read)
                continue
            if key == "flip":
                for sub, p in pts.items():
                    if not isinstance(p, dict):
                        continue
                    rows += [{"panel": f"flip ({values[int(sub[0])]})" if sub[0].isdigit() else "flip", "x": x,
                              "y": y} for x, y in zip(p["x"], p["y"])]
            else:
                rows += [{"panel": _dir_label(key, values), "x": x, "y": y}
                         for x, y in zip(pts.get("x") or [], pts.get("y") or [])]
        out.append((name, pd.DataFrame(rows, columns=["panel", "x", "y"])))
    return out


def _scatter_section(doc, values, learned) -> Section | None:
    data = _scatter_data(doc, values)
    if not data:
        return None
    ref = "null-intervention reconstruction" if learned else "original"
    blocks = []
    for name, df in data:
        df.attrs["xlabel"] = f"prediction on {ref}"
        blocks.append(FigureSpec("cit_scatter", f"{name}: prediction on {ref} (x) vs counterfactual (y)", df,
                                 caption=("One panel per direction a → a′; the flip columns show the original (x) "
                                          "against its horizontal flip (y), the null baseline. Points on the "
                                          "diagonal: the prediction did not change. Grey lines: the 0.5 threshold."),
                                 xlabel=f"prediction on {ref}"))
    return Section("scatter", "Scatter plots: original vs counterfactual", blocks)


def _examples_section(doc, values) -> Section | None:
    from fairdesk.core.audits.cit_images import decode_examples

    ex = doc.get("examples") or {}
    items = ex.get("items") or []
    if not items:
        return None
    arrays = decode_examples(doc)
    chosen = [i for i, it in enumerate(items) if it.get("selected") != "random"][:MAX_EXAMPLES_IN_REPORT - 2]
    chosen += [i for i, it in enumerate(items) if it.get("selected") == "random"][:2]
    rows = []
    for i in chosen:
        it = items[i]
        preds = "; ".join(f"{o}: {_two(p.get('null'))} → {_two(p.get('cf'))}" for o, p in it["predictions"].items()
                          if isinstance(p, dict))  # (an entry of another shape: a newer version's, not read)
        rows.append({"label": f"#{it['index']} {it['observed_label']} → {it['target_label']} "
                              f"({it.get('selected', '')}) {preds}",
                     "original": arrays["original"][i], "null": arrays["null"][i], "cf": arrays["cf"][i]})
    df = pd.DataFrame(rows)
    title = "Examples: largest prediction changes and random units"
    blocks = [Paragraph(title, "subheading"), FigureSpec("cit_examples", title, df,
                         caption=("Columns: original | null-intervention reconstruction | counterfactual | signed "
                                  "difference counterfactual − reconstruction (red: brighter in the counterfactual, "
                                  "blue: darker; colour scale symmetric about 0, its limit printed on each panel). "
                                  "Row labels give the unit, the direction and each output's prediction on the "
                                  "reconstruction → counterfactual."))]
    item_rows = [[str(items[i]["index"]), Path(items[i].get("file", "")).name,
                  f"{items[i]['observed_label']} → {items[i]['target_label']}",
                  fmt_rate(items[i].get("max_abs_change")), fmt_rate(items[i].get("l1_null_vs_original")),
                  fmt_rate(items[i].get("l1_cf_vs_null"))] for i in range(len(items))]
    blocks.append(Table(["Unit", "File", "Direction", "Max |change|", "L1 recon.", "L1 cf vs recon."], item_rows,
                        title="All stored examples", align=["R", "L", "L", "R", "R", "R"], small=True,
                        note="Max |change|: the largest |prediction change| over the outputs. L1 in pixel units "
                             "(pixels in [0, 1])."))
    return Section("examples", "Example counterfactuals", blocks)


def _quality_section(doc) -> Section:
    q = doc.get("quality") or (doc.get("settings") or {}).get("quality") or {}
    rows = []
    add = lambda label, key, note: rows.append([label, fmt_rate(q.get(key), 4), note]) if key in q else None  # noqa
    add("Composition (L1 after 1 cycle)", "composition_l1_1", "mean |x − reconstruction(a′ = a)|, pixels in [0, 1]")
    add("Composition (L1 after 10 cycles)", "composition_l1_10", "the reconstruction applied ten times")
    add("Reversibility (L1)", "reversibility_l1", "a → a′ → a")
    add("Effectiveness", "effectiveness", "attribute classifier's accuracy on the counterfactuals w.r.t. a′")
    add("Attribute classifier on real images", "attribute_accuracy_real", "its accuracy on the audited originals")
    add("Fréchet distance (local features), counterfactuals", "frechet_cf", "real vs counterfactual images")
    add("Fréchet distance (local features), reconstructions", "frechet_null", "real vs null reconstructions")
    add("Mean |counterfactual − reconstruction|", "mean_abs_change_cf_vs_null", "pixels changed by the intervention")
    blocks = [Table(["Measure", "Value", "Meaning"], rows, title="Counterfactual quality (004 App. I)",
                    align=["L", "R", "L"], widths=[2.4, 0.8, 3.2])] if rows else \
        [Paragraph("No quality measures: they are computed from the images by the generator pipeline (exact "
                   "counterfactuals need none).", "body")]
    notes = []
    if "effectiveness_classifier" in q:
        notes.append(f"Attribute classifier for effectiveness: {q['effectiveness_classifier']}.")
    if "frechet_feature_extractor" in q:
        notes.append(f"The Fréchet distance is FID-style, NOT Inception FID: features from a {q['frechet_feature_extractor']}"
                     .replace("from a PCA", "from the PCA"))
    blocks += [Paragraph(n, "note") for n in notes]
    return Section("quality", "Counterfactual quality", blocks, new_page=False)


def _data_section(doc, k) -> Section:
    ds = doc.get("dataset") or {}
    bad = doc.get("unreadable") or []
    blocks = [Paragraph(f"Readable images: {_count(ds.get('n_readable'), k)}; audited: "
                        f"{_count(ds.get('n_audited'), k)} ('{ds.get('split', '')}' split); left out for a missing "
                        f"attribute value: {_count(ds.get('n_missing_attribute', 0), k)}; unreadable files: "
                        f"{_count(len(bad), k)}.", "body")]
    if ds.get("labels"):
        blocks.append(Paragraph("True labels for EO: " + ", ".join(f"{k} ← {v}" for k, v in ds["labels"].items()),
                                "body"))
    if bad:
        rows = [[str(b.get("row", "")), str(b.get("path", "")), str(b.get("reason", ""))]
                for b in bad[:MAX_UNREADABLE_ROWS]]
        blocks.append(Table(["Row", "File", "Reason"], rows, title="Unreadable files (left out)",
                            widths=[0.6, 3.0, 3.4], small=True,
                            note="" if len(bad) <= MAX_UNREADABLE_ROWS else
                            f"The first {MAX_UNREADABLE_ROWS} of {_count(len(bad), k)}; all are listed in the JSON "
                            "document."))
    for n in doc.get("notes") or []:
        blocks.append(Paragraph(suppress_text(_note_words(str(n)), k), "bullet"))
    blocks.append(Paragraph(suppression_note(k) + " Unit numbers (#) identify images; they are not counts.", "note"))
    return Section("data", "Data and notes", blocks, new_page=False)


def _fmt_setting(v) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if v is None:
        return "–"
    if isinstance(v, float):
        return numbers.short(v)
    if isinstance(v, (list, tuple)):
        return ", ".join(_fmt_setting(x) for x in v)
    return str(v)


#: settings of the audit that are counts of the audited images (suppressed like every count)
COUNT_SETTINGS = ("n",)


def _provenance_section(doc, k) -> Section:
    s = dict(doc.get("settings") or {})
    s.pop("quality", None)
    s.pop("unreadable", None)
    prov = doc.get("provenance") or {}
    rows = [[key, _count(v, k) if key in COUNT_SETTINGS else _fmt_setting(v)] for key, v in s.items()]
    rows.append(["small-cell suppression", f"counts below {k} shown as “<{k}”" if k > 1 else "off (k = 1)"])
    prow = [["seed", str(prov.get("seed"))], ["data SHA-256", str(prov.get("data_sha256"))]]
    for key in ("images_sha256", "csv_sha256", "dataset", "split", "split_seed", "created_utc"):
        if prov.get(key) is not None:
            prow.append([key, str(prov[key])])
    for key, v in (prov.get("model_hashes") or {}).items():
        prow.append([f"{key} SHA-256", str(v)])
    for key in ("classifier", "generator", "control"):
        v = prov.get(key)
        if isinstance(v, dict) and v.get("path"):
            prow.append([f"{key} file", str(v["path"])])
    for key, v in (prov.get("versions") or {}).items():
        prow.append([key, str(v)])
    return Section("provenance", "Settings and provenance", [
        Table(["Setting", "Value"], rows, title="Settings", widths=[1.6, 5.0], small=True),
        Table(["Item", "Value"], prow, title="Provenance", widths=[1.6, 5.0], small=True)])


# ==============================================================================================================
# Figures (matplotlib, Agg)

FIG_W = 6.9


def _new_figure(w: float, h: float):
    return new_figure((w, h))


def _png(fig, dpi: int = 150) -> bytes:
    buf = io.BytesIO()
    save_figure(fig, buf, dpi)
    return buf.getvalue()


def scatter_size(df: pd.DataFrame) -> tuple[float, float]:
    return FIG_W, 2.35


def render_scatter_png(df: pd.DataFrame, buf, title: str) -> None:
    """One row of panels (directions, then the flip columns), prediction on reference (x) vs counterfactual (y);
    the x label of the direction panels is ``df.attrs["xlabel"]``."""
    xlabel = df.attrs.get("xlabel", "")
    panels = list(dict.fromkeys(df["panel"]))
    n = max(len(panels), 1)
    w, h = scatter_size(df)
    fig = _new_figure(w, h)
    fig.suptitle(title, fontsize=8.5, x=0.01, ha="left", y=0.985)
    left, right, gap, bottom, top = 0.55, 0.1, 0.28, 0.5, 0.42
    pw = (w - left - right - gap * (n - 1)) / n
    ph = h - bottom - top
    side = min(pw, ph)
    for j, p in enumerate(panels):
        ax = fig.add_axes(((left + j * (pw + gap)) / w, bottom / h, side / w, side / h))
        sub = df[df["panel"] == p]
        flip = p.startswith("flip")
        ax.plot([0, 1], [0, 1], color="#888888", lw=0.7, zorder=1)
        ax.axhline(0.5, color="#cccccc", lw=0.6, zorder=0)
        ax.axvline(0.5, color="#cccccc", lw=0.6, zorder=0)
        ax.scatter(sub["x"], sub["y"], s=5, alpha=0.55, lw=0, color="#7a7a7a" if flip else "#2F4858", zorder=2,
                   rasterized=True)
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(p, fontsize=7.5)
        ax.tick_params(labelsize=6)
        ax.set_xticks([0, 0.5, 1])
        ax.set_yticks([0, 0.5, 1])
        if j == 0:
            ax.set_ylabel("counterfactual / flipped", fontsize=6.8)
        ax.set_xlabel("original" if flip else (xlabel.replace("prediction on ", "") or "reference"), fontsize=6.8)
        for side_name in ("top", "right"):
            ax.spines[side_name].set_visible(False)
    buf.write(_png(fig))


EX_CELL, EX_ROW, EX_HEAD = 1.05, 1.42, 0.3


def examples_size(df: pd.DataFrame) -> tuple[float, float]:
    return FIG_W, EX_HEAD + EX_ROW * max(len(df), 1)


def render_examples_png(df: pd.DataFrame, buf, title: str) -> None:  # noqa: ARG001 (a subheading carries it)
    """Rows of original | reconstruction | counterfactual | signed difference (RdBu_r, centred at 0)."""
    w, h = examples_size(df)
    fig = _new_figure(w, h)
    cols = ["original", "null reconstruction", "counterfactual", "cf − reconstruction"]
    x0 = 0.25
    gap = (w - 2 * x0 - 4 * EX_CELL) / 3
    for j, c in enumerate(cols):
        fig.text((x0 + j * (EX_CELL + gap) + EX_CELL / 2) / w, (h - 0.2) / h, c, fontsize=7, ha="center",
                 va="bottom", fontweight="bold")
    for i, row in enumerate(df.itertuples(index=False)):
        y = h - EX_HEAD - (i + 1) * EX_ROW + 0.05
        fig.text(x0 / w, (y + EX_CELL + 0.04) / h, row.label, fontsize=6.2, ha="left", va="bottom")
        diff = np.asarray(row.cf, float) - np.asarray(row.null, float)
        lim = max(float(np.abs(diff).max()), 1e-3)
        for j, (img, kw) in enumerate([(row.original, {"cmap": "gray", "vmin": 0, "vmax": 1}),
                                       (row.null, {"cmap": "gray", "vmin": 0, "vmax": 1}),
                                       (row.cf, {"cmap": "gray", "vmin": 0, "vmax": 1}),
                                       (diff, {"cmap": "RdBu_r", "vmin": -lim, "vmax": lim})]):
            ax = fig.add_axes(((x0 + j * (EX_CELL + gap)) / w, y / h, EX_CELL / w, EX_CELL / h))
            ax.imshow(np.asarray(img, float), interpolation="nearest", **kw)
            ax.set_xticks([])
            ax.set_yticks([])
            if j == 3:
                ax.text(1.04, 0.5, f"±{numbers.short(lim, 2)}", transform=ax.transAxes, fontsize=6, va="center", rotation=90)
    buf.write(_png(fig, dpi=110))


# ==============================================================================================================
# PDF


def register_figures() -> None:
    """Teach the shared PDF renderer this module's figure kinds."""
    from fairdesk.core.reports.pdf import register_figure_kind

    register_figure_kind("cit_scatter", render_scatter_png, scatter_size)
    register_figure_kind("cit_examples", render_examples_png, examples_size)


def render_cit_bytes(report: Report) -> bytes:
    """PDF bytes of an imaging report (the shared renderer of :mod:`fairdesk.core.reports.pdf`)."""
    from fairdesk.core.reports.pdf import render_bytes

    register_figures()
    return render_bytes(report)


def cit_report_to_pdf(doc: dict, path: str | os.PathLike, *, suppress_k: int = 11) -> Path:
    """Build the report of a ``cit_images`` document and write its PDF atomically (same doc → same bytes)."""
    return atomic.write_bytes(Path(path), render_cit_bytes(build_cit_report(doc, suppress_k=suppress_k)))


def report_tree(doc: dict, settings) -> Report:
    """The report of a stored document with the user's settings (:class:`fairdesk.core.kinds.ReportSettings`)."""
    return with_disclosure(build_cit_report(doc, suppress_k=settings.suppress_k), doc)


def _count(value, k: int) -> str:
    """A count of images or units ("–" when not recorded); below k it prints as "<k"."""
    return "–" if value is None or value == "" else fmt_count(value, k)


def _fmt2(v) -> str:
    return "–" if v is None else f"{float(v):.2f}"


def build_report(doc: dict, path: str | os.PathLike, settings) -> Path:
    """The registry's one report signature (``settings``: :class:`fairdesk.core.kinds.ReportSettings`)."""
    return atomic.write_bytes(Path(path), render_cit_bytes(report_tree(doc, settings)))  # the tree with its rules
