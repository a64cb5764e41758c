"""The fairness and equity part of an applied model card, from one stored audit of any kind.

:func:`model_card` reads an audit from the project and returns a dict in the shape of
``resources/model_card.schema.json``: the model (name, kind, version, hashes), the intended use as the user entered
it, the data and its provenance, the subgroups audited with their sizes, every finding with its verdict
("differs" / "equivalent" within ±margin / "inconclusive") and one sentence, the limitations and what was not
tested, plus FairDesk's version, the audit's kind, id and date, its seed and the small-cell k. :func:`card_markdown`
writes the same card for people; :func:`validate_card` checks a card against the schema and the small-cell rule.

Small cells: the card is written from the document's releasable copy (:func:`fairdesk.core.kinds.releasable`), as
every report is: sizes it withholds are null, rates and gaps resting on withheld counts appear as bands in the
sentences (no estimate), and its disclosure rules are listed among the limitations. Any other count below
``suppress_k`` is written "<k"; the schema's count type allows only a whole number or "<k", and
:func:`validate_card` refuses a card whose numbers are below its own k.

Findings come from each kind's stored document: for ``groups`` (and the group audits inside ``note_classifiers``)
:func:`fairdesk.core.audits.groups.findings`, so the card counts what the GUI header, the board summary and the PDF
count; for the other kinds the verdict records the document holds (``records`` of ``mlm_bias``, ``table`` of
``cit_images``, the per-method ``comparison`` of ``age_independence``, ``ctf_gap`` of ``ctf``).
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

from fairdesk.core import numbers
from fairdesk.core.errors import DataError
from fairdesk.core.escape import markdown_text
from fairdesk.core.project import Project

CARD_FORMAT = "fairdesk.model_card/1"
SCHEMA_NAME = "model_card.schema.json"
VERDICTS = ("differs", "equivalent", "inconclusive")

INCONCLUSIVE_READING = ("'Inconclusive' means the audit could not tell: it is never evidence that the model is fair "
                        "for that group. 'Equivalent' means the difference was shown to lie within the stated margin.")


# ---- the schema and its validator -----------------------------------------------------------------------------

def schema_path() -> Path:
    """Where the shipped schema lives (``resources/``, found the same way in a checkout, a wheel and a frozen build)."""
    from fairdesk.paths import resources_dir

    return resources_dir() / SCHEMA_NAME


def load_schema() -> dict:
    try:
        return json.loads(schema_path().read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise DataError(f"The model-card schema {schema_path()} cannot be read ({err}); reinstall FairDesk.") from err


def schema_errors(instance, schema: dict | None = None) -> list[str]:
    """Every way ``instance`` breaks the card's schema ("where: what"); empty when it validates. jsonschema (draft
    2020-12), the one validator of every schema FairDesk ships (:func:`fairdesk.core.kinds.schema_problems`)."""
    from fairdesk.core.kinds import schema_problems

    return schema_problems(instance, schema or load_schema(), limit=50)


def _counts_below_k(card: dict) -> list[str]:
    """Whole-number counts below the card's k (subgroup sizes, rows) and "<j" marks of another k."""
    k = card["audit"]["small_cell_k"]
    found = []
    values = [("/data/rows", card["data"]["rows"])]
    values += [(f"/subgroups/groups/{i}/size", g["size"]) for i, g in enumerate(card["subgroups"]["groups"])]
    for where, v in values:
        if isinstance(v, int) and v < k:
            found.append(f"{where}: {v} is below k = {k} and must be written \"<{k}\"")
        if isinstance(v, str) and v != f"<{k}":
            found.append(f"{where}: {v!r} is not \"<{k}\"")
    return found


def validate_card(card: dict, schema: dict | None = None) -> None:
    """Refuse (:class:`DataError`) a card that breaks the schema or shows a count below its k."""
    errors = schema_errors(card, schema)
    if not errors:
        errors = _counts_below_k(card)
    if errors:
        more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
        raise DataError("The model card does not follow its schema: " + "; ".join(errors[:3]) + more + ".")


# ---- small helpers ----------------------------------------------------------------------------------------------

def _num(value) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _text(value) -> str | None:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return None
    return str(value)


def _count(value, k: int):
    """A count as the card writes it: an int of at least k, "<k" below k, None when unknown."""
    v = _num(value)
    if v is None:
        return None
    return f"<{k}" if v < k else int(v)


def _f(value, digits: int = 3) -> str:
    return numbers.fixed(value, digits)


def _signed(value, digits: int = 3) -> str:
    return numbers.signed(value, digits)


def _band(band, value) -> str:
    """A rate a released document withholds, as its band ("0.025 to 0.257"); else the value."""
    if isinstance(band, (list, tuple)) and len(band) == 2:
        return f"{_f(band[0])} to {_f(band[1])}"
    return _f(value)


def _interval(low, high) -> str:
    return f"{_f(low)} to {_f(high)}"


def verdict_of(value) -> str:
    """The stored verdict as one of the three ("dependent" of the image audit is "differs")."""
    v = str(value or "").strip().lower()
    if v in ("differs", "dependent"):
        return "differs"
    if v.startswith("equivalent"):
        return "equivalent"
    return "inconclusive"


def verdict_words(verdict: str, margin) -> str:
    m = _num(margin)
    if verdict == "equivalent":
        return f"equivalent within ±{numbers.short(m)}" if m is not None else "equivalent within the margin"
    return verdict


def _finding(fid, verdict, margin, measure, sentence, k, **extra) -> dict:
    from fairdesk.core.reports.document import suppress_text

    v = verdict_of(verdict)
    item = {"finding_id": str(fid), "verdict": v, "verdict_words": verdict_words(v, margin), "margin": _num(margin),
            "measure": measure, "sentence": suppress_text(sentence, k)}
    for key, value in extra.items():
        item[key] = _num(value) if key in ("estimate", "interval_low", "interval_high", "adjusted_p") else \
            _text(value)
    return item


def _subgroup(attribute, group, size, k, *, tested=True, why=None, task=None, variant=None, unit="rows") -> dict:
    from fairdesk.core.reports.document import suppress_text

    return {"variant": _text(variant), "task": _text(task), "attribute": str(attribute), "group": str(group),
            "size": _count(size, k), "size_unit": unit if size is not None else None, "tested": bool(tested),
            "why_not_tested": suppress_text(str(why), k) if _text(why) else None}


class _Parts:
    """What one kind contributes to the card."""

    def __init__(self) -> None:
        self.findings: list[dict] = []
        self.groups: list[dict] = []
        self.sizes_given = True
        self.size_note = ""
        self.limitations: list[str] = []
        self.not_tested: list[str] = []
        self.model: dict = {}
        self.data: dict = {}
        self.trained: list[dict] = []  # models FairDesk trained (see :func:`_trained`), the audited model first


def _trained(role: str, kind, parameters, model_sha256, data_name, data_sha256, trained_utc=None) -> dict:
    """One entry of ``model.trained_by_fairdesk``: a model FairDesk itself trained."""
    return {"role": role, "kind": str(kind or "unknown"), "parameters": dict(parameters or {}),
            "model_sha256": _text(model_sha256), "training_data": {"name": _text(data_name), "sha256": _text(data_sha256)},
            "trained_utc": _text(trained_utc)}


def _recorded_training(doc: dict) -> list[dict]:
    """The training records an audit kept in its provenance (``provenance["training"]``: role -> the record of
    :mod:`fairdesk.core.models.training_record`, kept only when it describes the audited files)."""
    out = []
    for role, rec in ((doc.get("provenance") or {}).get("training") or {}).items():
        if isinstance(rec, dict):
            data = rec.get("training_data") or {}
            out.append(_trained(str(role), rec.get("kind"), rec.get("parameters"), rec.get("model_sha256"),
                                data.get("name"), data.get("sha256"), rec.get("trained_utc")))
    return out


# ---- the kinds ----------------------------------------------------------------------------------------------------

def _calibration_row(result, finding: dict) -> dict:
    """The calibration table's row of a calibration finding (same task, attribute and group)."""
    cal = result.calibration
    if cal is None or cal.empty:
        return {}
    hit = cal[(cal["task"].astype(str) == str(finding.get("task"))) & (cal["attribute"] == finding.get("attribute"))
              & (cal["group"].astype(str) == str(finding.get("group")))]
    return hit.iloc[0].to_dict() if len(hit) else {}


def _group_findings(doc: dict, k: int, parts: _Parts, variant: str | None = None) -> None:
    """Findings, subgroups and untested comparisons of a group audit document (also inside note_classifiers)."""
    import pandas as pd

    from fairdesk.core.audits.groups import GroupAuditResult, findings
    from fairdesk.core.reports.groups import METRIC_TITLE, in_task

    result = GroupAuditResult.from_dict(doc)
    bands = {r.get("test_id"): r for r in doc.get("records") or [] if r.get("gap_band")}  # a released document's
    margin = result.plan.margin
    level = f"{numbers.short(100 * result.plan.ci_level)}%"
    prefix = f"{variant}: " if variant else ""
    for r in findings(result).to_dict(orient="records"):
        metric = str(r.get("metric"))
        title = METRIC_TITLE.get(metric, metric)
        verdict = verdict_of(r.get("verdict"))
        words = verdict_words(verdict, margin)
        task, attr, group = _text(r.get("task")), _text(r.get("attribute")), _text(r.get("group"))
        q = f", adjusted {numbers.p_equals(r.get('q_value'))}" if _num(r.get("q_value")) is not None else ""
        if metric == "calibration":
            cal = _calibration_row(result, r)
            oe_ci = _interval(cal.get("oe_ratio_ci_low"), cal.get("oe_ratio_ci_high"))
            sentence = (f"{prefix}Calibration for {attr} = {group}{in_task(task)}: observed/expected "
                        f"{_f(cal.get('oe_ratio'))} ({level} CI {oe_ci}), "
                        f"calibration intercept {_f(cal.get('calibration_intercept'))}, slope "
                        f"{_f(cal.get('calibration_slope'))} (a calibrated score has O/E 1, intercept 0 and slope 1"
                        f"{q}): {'miscalibrated' if verdict == 'differs' else words}.")
            subject, compared = f"{attr} = {group}", None
            parts.findings.append(_finding(f"{variant + '|' if variant else ''}{r.get('test_id')}", verdict, margin,
                                           "Calibration", sentence, k, variant=variant, task=task, subgroup=subject,
                                           compared_with=compared, estimate=cal.get("calibration_intercept"),
                                           interval_low=cal.get("calibration_intercept_ci_low"),
                                           interval_high=cal.get("calibration_intercept_ci_high"),
                                           adjusted_p=r.get("q_value")))
            continue
        if metric == "delta_eo":
            bins = _num(r.get("bins"))
            sentence = (f"{prefix}{title} across {int(bins) if bins else 'the'} bins of {attr}{in_task(task)} is "
                        f"{_f(r.get('gap'))} (interval {_interval(r.get('ci_low'), r.get('ci_high'))}{q}): {words}.")
            subject, compared = f"{attr} ({group})", None
        else:
            gap = _num(r.get("gap"))
            side = "lower" if gap is not None and gap < 0 else "higher"
            banded = bands.get(r.get("test_id"))
            if banded is not None:  # rates resting on withheld counts: their bands, the gap's range, no interval
                lo, hi = banded["gap_band"]
                size = f"{_f(max(-hi, 0.0))} to {_f(-lo)}" if side == "lower" else f"{_f(max(lo, 0.0))} to {_f(hi)}"
                sentence = (f"{prefix}{title} for {attr} = {group}{in_task(task)} is "
                            f"{_band(banded.get('rate_band'), r.get('rate'))} against "
                            f"{_band(banded.get('comparison_rate_band'), r.get('comparison_rate'))} for "
                            f"{_text(r.get('comparison'))}: {size} {side} (counts withheld{q}): {words}.")
                r = {**r, "gap": None, "ci_low": None, "ci_high": None}
            else:
                sentence = (f"{prefix}{title} for {attr} = {group}{in_task(task)} is {_f(r.get('rate'))} against "
                            f"{_f(r.get('comparison_rate'))} for {_text(r.get('comparison'))}: "
                            f"{_f(abs(gap) if gap is not None else None)} {side} (adjusted CI of the gap "
                            f"{_interval(r.get('ci_low'), r.get('ci_high'))}{q}): {words}.")
            if metric == "auprc":
                sentence += (" Part of an AUPRC gap can come from a difference in prevalence alone (a random score's "
                             "AUPRC equals the prevalence).")
            subject, compared = f"{attr} = {group}", _text(r.get("comparison"))
        parts.findings.append(_finding(f"{variant + '|' if variant else ''}{r.get('test_id')}", verdict, margin,
                                       title, sentence, k, variant=variant, task=task, subgroup=subject,
                                       compared_with=compared, estimate=r.get("gap"), interval_low=r.get("ci_low"),
                                       interval_high=r.get("ci_high"), adjusted_p=r.get("q_value")))
    seen = set()
    for r in result.groups.to_dict(orient="records"):
        seen.add((str(r["task"]), str(r["attribute"]), str(r["group"])))
        tested = r.get("tested")
        tested = True if tested is None or (isinstance(tested, float) and math.isnan(tested)) else bool(tested)
        parts.groups.append(_subgroup(r["attribute"], r["group"], r.get("n"), k, tested=tested,
                                      why=r.get("reason"), task=r["task"], variant=variant))
    for r in result.dropped.to_dict(orient="records"):
        if (str(r["task"]), str(r["attribute"]), str(r["group"])) not in seen:
            parts.groups.append(_subgroup(r["attribute"], r["group"], r.get("n"), k, tested=False,
                                          why=r.get("reason"), task=r["task"], variant=variant))
        parts.not_tested.append(f"{prefix}{r['attribute']} = {r['group']} in task {r['task']}: not tested "
                                f"({_text(r.get('reason')) or 'left out'}).")
    if not result.delta_bins.empty:
        bins = result.delta_bins.drop_duplicates(["task", "attribute", "bins_requested", "bin"])
        for r in bins.to_dict(orient="records"):
            label = (f"bin {int(r['bin']) + 1} of {int(r['bins_requested'])} "
                     f"({_f(r.get('lower'), 3)} to {_f(r.get('upper'), 3)})")
            parts.groups.append(_subgroup(r["attribute"], label, r.get("n"), k, task=r["task"], variant=variant))
    rec = result.records
    if not rec.empty and "test_id" in rec:
        untested = rec[rec["test_id"].isna() & rec["reason"].notna()]
        for r in untested.to_dict(orient="records"):
            if pd.isna(r.get("reason")):
                continue
            parts.not_tested.append(f"{prefix}{METRIC_TITLE.get(r['metric'], r['metric'])} for {r['attribute']} = "
                                    f"{r['group']} in task {r['task']}: shown but not tested ({r['reason']}).")
    disc = result.discrimination
    if not disc.empty:
        for r in disc[disc["test_id"].isna() & disc["reason"].notna()].to_dict(orient="records"):
            parts.not_tested.append(f"{prefix}{METRIC_TITLE.get(r['metric'], r['metric'].upper())} for "
                                    f"{r['attribute']} = {r['group']} in task {r['task']}: not compared "
                                    f"({r['reason']}).")
    plan = result.plan
    for metric in ("parity", "recall", "specificity"):  # repeated per encoder: the card keeps each line once
        if metric not in plan.metrics:
            parts.not_tested.append(f"{METRIC_TITLE[metric]} gaps were not part of this audit.")
    if not doc.get("calibration"):  # absent (stored by an earlier version), switched off, or scores not probabilities
        parts.not_tested.append("Calibration by group (is the risk score equally trustworthy for every group?) was "
                                "not part of this audit.")
    if not plan.intersections:
        parts.not_tested.append("Intersections of attributes (e.g. sex × ethnicity) were not audited.")
    parts.limitations += [f"{prefix}{w}" for w in result.warnings]


def _groups(doc: dict, k: int) -> _Parts:
    parts = _Parts()
    _group_findings(doc, k, parts)
    prov = doc.get("provenance") or {}
    parts.data = {"name": prov.get("dataset"), "sha256": prov.get("data_sha256"), "rows": prov.get("n_rows")}
    parts.model = {"hashes": prov.get("model_hashes") or {}}
    roles = (doc.get("plan") or {}).get("roles") or {}
    parts.size_note = ("Sizes are rows per group and task" + (" (patients are counted in the audit's groups table)"
                                                               if roles.get("patient_id") else "") +
                       "; bins of continuous attributes are listed with their rows.")
    return parts


def _note_classifiers(doc: dict, k: int) -> _Parts:
    parts = _Parts()
    for encoder, audit in (doc.get("audits") or {}).items():
        _group_findings(audit, k, parts, variant=encoder)
    prov = doc.get("provenance") or {}
    notes = [enc.get("n_notes") for enc in (doc.get("encoders") or {}).values() if enc.get("n_notes") is not None]
    parts.data = {"name": prov.get("dataset"), "sha256": prov.get("data_sha256"), "rows": max(notes, default=None)}
    hashes = {}
    for name, enc in (doc.get("encoders") or {}).items():
        if enc.get("fingerprint"):
            hashes[f"encoder {name}"] = enc["fingerprint"]
        for task, h in (enc.get("model_hashes") or {}).items():
            hashes[f"{name}/{task}"] = h
    for r in doc.get("results") or []:
        if r.get("model_hash"):
            hashes.setdefault(f"{r['encoder']}/{r['task']}", r["model_hash"])
    parts.model = {"name": "Note classifiers on " + " vs ".join(doc.get("encoders") or {}), "kind": "note_mlp",
                   "hashes": hashes}
    parts.trained = _recorded_training(doc)
    parts.size_note = "Sizes are test notes per group, task and encoder."
    for name, enc in (doc.get("encoders") or {}).items():
        parts.limitations += [f"{name}: {n}" for n in enc.get("notes") or []]
        if enc.get("truncated_notes"):
            parts.limitations.append(f"{name}: {enc['truncated_notes']} notes were longer than the window cap and "
                                     "were truncated.")
    return parts


def _mlm_bias(doc: dict, k: int) -> _Parts:
    parts = _Parts()
    models = [(doc.get("model_name") or "the model", doc)] + [(c.get("model_name") or c.get("model") or "compared",
                                                               c) for c in doc.get("compared") or []]
    method = doc.get("method") or {}
    groups = method.get("groups") or {}
    names = list(groups)
    for model, d in models:
        variant = model if len(models) > 1 else None
        for r in d.get("records") or []:
            margin = r.get("margin", method.get("margin"))
            between = f"{names[0]} and {names[1]}" if len(names) == 2 else "the groups"
            sentence = (f"{model}, {r.get('name') or r.get('category')}: the log-probability bias score differs "
                        f"between {between} by {_signed(r.get('mean_difference'))} nats (95% CI "
                        f"{_interval(r.get('ci_low'), r.get('ci_high'))}) over {r.get('n_templates')} templates: "
                        f"{r.get('verdict_text') or verdict_words(verdict_of(r.get('verdict')), margin)}.")
            parts.findings.append(_finding(f"{model}|{r.get('category')}", r.get("verdict"), margin,
                                           "log-probability bias score", sentence, k, variant=variant,
                                           subgroup=r.get("name") or r.get("category"), compared_with=between,
                                           estimate=r.get("mean_difference"), interval_low=r.get("ci_low"),
                                           interval_high=r.get("ci_high"), adjusted_p=r.get("q_value")))
    for g, words in groups.items():
        parts.groups.append(_subgroup(f"word group in slot {method.get('slot', '')}".strip(), g, None, k))
    parts.sizes_given = False
    parts.size_note = ("The groups are lists of words put into template sentences (" +
                       "; ".join(f"{g}: {', '.join(map(str, w))}" for g, w in groups.items()) +
                       "), not people: this audit has no subgroup sizes. Template counts per category are in the "
                       "findings.")
    tpl = method.get("templates") or {}
    parts.data = {"name": tpl.get("path") or tpl.get("source"), "sha256": tpl.get("sha256"),
                  "rows": method.get("n_scores"), "origin": "template list" +
                  (f" ({tpl['source']})" if tpl.get("source") else "")}
    parts.model = {"name": doc.get("model_name") or method.get("model"), "kind": "masked_lm",
                   "hashes": (doc.get("provenance") or {}).get("model_hashes") or {}}
    parts.trained = _recorded_training(doc)
    parts.limitations += [str(n) for n in method.get("notes") or []]
    parts.not_tested.append("Bias in text the model generates (only the probabilities of words in fixed templates "
                            "were measured); outcomes for patients were not measured.")
    return parts


def _cit_images(doc: dict, k: int) -> _Parts:
    parts = _Parts()
    s = doc.get("settings") or {}
    margin = s.get("margin")
    attr = doc.get("attribute") or {}
    column = attr.get("column") or (doc.get("provenance") or {}).get("attribute") or "the attribute"
    values = [str(v) for v in attr.get("values") or []]
    pair = f"{values[0]} ↔ {values[1]}" if len(values) == 2 else "its values"
    for r in doc.get("table") or []:
        shifts = [f"{key[6:].replace('->', '→')}: {_signed(r[key])}" for key in sorted(r)
                  if key.startswith("shift_") and not key.endswith("_ci")]
        sentence = (f"Output {r.get('output')}: changing only {column} ({pair}) with everything else held fixed "
                    f"shifts the prediction by {'; '.join(shifts) or '–'} (margin ±{numbers.short(_num(margin) or 0)}; "
                    f"invariance test {numbers.p_equals(r.get('p'))}): "
                    f"{verdict_words(verdict_of(r.get('verdict')), margin)}.")
        parts.findings.append(_finding(f"{r.get('output')}", r.get("verdict"), margin, "counterfactual prediction "
                                       "shift", sentence, k, subgroup=f"{column} ({pair})", adjusted_p=r.get("q")))
    ds = doc.get("dataset") or {}
    for g, n in (ds.get("n_per_group") or {}).items():
        parts.groups.append(_subgroup(column, g, n, k, unit="images"))
    parts.size_note = "Sizes are images audited per value of the attribute."
    if ds.get("n_missing_attribute"):
        c = _count(ds["n_missing_attribute"], k)
        parts.not_tested.append(f"Images without a value of {column} ({c} images) were not audited.")
    prov = doc.get("provenance") or {}
    clf = prov.get("classifier") or {}
    parts.data = {"name": prov.get("dataset") or prov.get("source"), "sha256": prov.get("data_sha256"),
                  "rows": ds.get("n_audited", s.get("n"))}
    parts.model = {"name": clf.get("name"), "kind": "image_classifier" if clf else None,
                   "hashes": prov.get("model_hashes") or {}}
    parts.trained = _recorded_training(doc)
    parts.limitations += [str(n) for n in doc.get("notes") or []]
    if s.get("generator") != "exact" and doc.get("control_band") is None:
        parts.limitations.append("No negative-control classifier was given, so generator artefacts cannot be told "
                                 "apart from attribute dependence: 'differs' verdicts are provisional.")
    parts.not_tested.append(f"Performance gaps between the {column} groups (accuracy, recall) are not part of this "
                            "audit; run a group audit for them.")
    return parts


def _age_independence(doc: dict, k: int) -> _Parts:
    from fairdesk.core.reports.age_independence import METRIC_NAMES

    parts = _Parts()
    s = doc.get("settings") or {}
    methods = doc.get("methods") or {}
    baseline = s.get("baseline", "dnn")
    base = methods.get(baseline) or {}
    for m, e in methods.items():
        for metric, c in (e.get("comparison") or {}).items():
            name = METRIC_NAMES.get(metric, metric)
            sentence = (f"{e.get('label') or m} against the {base.get('label') or baseline}, {name}: "
                        f"{_f((e.get(metric) or {}).get('mean'))} vs {_f((base.get(metric) or {}).get('mean'))} "
                        f"(mean difference over folds {_signed(c.get('mean_difference'))}"
                        + (f", 95% CI {_interval(c.get('ci_low'), c.get('ci_high'))}"
                           if c.get("ci_low") is not None else "") + "): "
                        f"{verdict_words(verdict_of(c.get('verdict')), c.get('margin'))}.")
            parts.findings.append(_finding(f"{m}|{metric}", c.get("verdict"), c.get("margin"), name, sentence, k,
                                           variant=e.get("label") or m, subgroup=s.get("attribute"),
                                           compared_with=base.get("label") or baseline,
                                           estimate=c.get("mean_difference"), interval_low=c.get("ci_low"),
                                           interval_high=c.get("ci_high"), adjusted_p=c.get("p_bh")))
    parts.sizes_given = False
    parts.size_note = (f"'{s.get('attribute', 'age')}' is a continuous attribute: the audit measures the error "
                       "spread across its bins inside each held-out fold and reports no fixed subgroups, so there "
                       "are no subgroup sizes.")
    prov = doc.get("provenance") or {}
    parts.data = {"name": prov.get("dataset"), "sha256": prov.get("data_sha256"), "rows": s.get("n_rows")}
    parts.model = {"name": "Age-independent learners and baselines", "kind": "age_independent",
                   "hashes": dict(prov.get("model_hashes") or {})}
    # trained by this audit itself: its settings are the parameters, its data the training data; one hash per
    # learner over its folds' models (the hashes keyed "method/repeat/fold")
    for m in methods:
        folds = {key: h for key, h in parts.model["hashes"].items() if str(key).split("/")[0] == m and h}
        whole = (hashlib.sha256("".join(f"{key}={folds[key]};" for key in sorted(folds)).encode()).hexdigest()
                 if folds else None)
        if whole:
            parts.model["hashes"][f"{m} (all folds)"] = whole
        settings = {key: v for key, v in s.items() if not str(key).startswith("n_")}  # counts stay out (small cells)
        parts.trained.append(_trained(f"learner {m}", "age_independent", {**settings, "method": m}, whole,
                                      prov.get("dataset"), prov.get("data_sha256"), prov.get("created_utc")))
    parts.limitations.append(f"{s.get('folds')}-fold cross-validation ({s.get('repeats')} repeat(s)): verdicts rest "
                             "on few paired fold values, so most comparisons are inconclusive unless the folds "
                             "agree.")
    parts.not_tested.append("Gaps between groups of other attributes (sex, ethnicity) are not part of this audit.")
    return parts


def _ctf(doc: dict, k: int) -> _Parts:
    parts = _Parts()
    s = doc.get("settings") or {}
    margin = s.get("margin")
    subsets = {"all": "all texts", "label_0": "texts with label 0", "label_1": "texts with label 1"}
    for r in doc.get("ctf_gap") or []:
        sentence = (f"Term set '{r.get('terms')}', {subsets.get(r.get('subset'), r.get('subset'))}: swapping one "
                    f"identity term for another changes the score by {_f(r.get('value'))} on average (95% CI "
                    f"{_interval(r.get('ci_low'), r.get('ci_high'))}) over {_count(r.get('n'), k)} texts; control band "
                    f"{_f(r.get('control'))}: {verdict_words(verdict_of(r.get('verdict')), margin)}" +
                    (f" ({r['reason']})" if r.get("reason") else "") + ".")
        parts.findings.append(_finding(f"{r.get('terms')}|{r.get('subset')}", r.get("verdict"), margin, "CTF gap",
                                       sentence, k, subgroup=subsets.get(r.get("subset"), r.get("subset")),
                                       compared_with="control band", estimate=r.get("value"),
                                       interval_low=r.get("ci_low"), interval_high=r.get("ci_high")))
    from fairdesk.core.reports.ctf import differing_terms, term_sentence

    for t in differing_terms(doc):  # each term that differs, named
        parts.findings.append(_finding(f"{t.get('terms')}|{t.get('subset')}|{t.get('term')}", "differs", margin,
                                       "CTF gap of one term", term_sentence(t, k), k,
                                       subgroup=f"identity term '{t.get('term')}'", compared_with="control band",
                                       estimate=t.get("value"), interval_low=t.get("ci_low"),
                                       interval_high=t.get("ci_high"), adjusted_p=t.get("q_differs")))
    for r in (doc.get("group_rates") or {}).get("terms") or []:
        parts.groups.append(_subgroup(f"identity term ({r.get('terms')})", r.get("term"), r.get("n"), k,
                                      unit="texts"))
    parts.size_note = "Sizes are texts that mention each identity term (the texts whose terms were swapped)."
    data = doc.get("data") or {}
    parts.data = {"name": data.get("name"), "sha256": data.get("sha256"), "rows": data.get("n_rows")}
    model = doc.get("model") or {}
    hashes = dict((doc.get("provenance") or {}).get("model_hashes") or {})
    hashes.update({f"file {name}": h for name, h in (model.get("sha256") or {}).items()})
    parts.model = {"name": model.get("name"), "kind": model.get("kind"),
                   "version": (f"{model['method']}" + (f", seed {model['seed']}" if model.get("seed") is not None
                                                       else "")) if model.get("method") else None,
                   "hashes": hashes}
    parts.trained = _recorded_training(doc)
    parts.limitations += [str(n) for n in doc.get("notes") or []]
    for terms, unknown in (doc.get("unknown_terms") or {}).items():
        if unknown and isinstance(unknown, list):
            parts.not_tested.append(f"Terms of '{terms}' not found in the texts: {', '.join(map(str, unknown))}.")
    if not (doc.get("control") or {}).get("informative", True):
        parts.limitations.append("The control band was not informative: identity cannot be told from any edit.")
    parts.not_tested.append("Outcomes for patients (only the change of the score when an identity term is swapped "
                            "was measured); identity expressed without the listed terms.")
    return parts


def _slices(doc: dict, k: int) -> _Parts:
    """Each carried slice of a slice audit with its verdict from the confirmation rows."""
    from fairdesk.core.reports.slices import METRIC_WORDS, searched_min, searched_sentence, slice_sentence

    parts = _Parts()
    plan = doc.get("plan") or {}
    margin = plan.get("margin") or 0.05
    metric = METRIC_WORDS.get(plan.get("metric"), str(plan.get("metric")))
    for r in doc.get("slices") or []:
        parts.findings.append(_finding(r.get("test_id") or f"slice {r.get('rank')}", r.get("verdict"), margin,
                                       f"{metric} of a slice against the rest (confirmation rows)",
                                       slice_sentence(r, k, margin), k, task=r.get("task"),
                                       subgroup=r.get("description"), compared_with="the rest",
                                       estimate=r.get("gap"), interval_low=r.get("ci_low"),
                                       interval_high=r.get("ci_high"), adjusted_p=r.get("q_value")))
        parts.groups.append(_subgroup("slice", r.get("description"), r.get("n"), k, task=r.get("task")))
    parts.size_note = "Sizes are the slices' rows on the confirmation part (the rows the search never saw)."
    parts.limitations.append(searched_sentence(doc, k))
    parts.limitations += [str(w) for w in doc.get("warnings") or []]
    parts.not_tested.append(f"Slices with fewer than {searched_min(plan)} rows or of more than "
                            f"{plan.get('max_order')} attribute values were not searched; only the "
                            f"{plan.get('carry')} worst-served slices found on the discovery rows were tested.")
    return parts


def _monitor(doc: dict, k: int) -> _Parts:
    """Each comparison of a fairness monitor in its latest period: alarmed ("differs"), its whole confidence
    sequence within ±margin ("equivalent"), else inconclusive."""
    from fairdesk.core.reports.monitor import METRIC_WORDS, gap_words, promise

    parts = _Parts()
    plan = doc.get("plan") or {}
    margin = plan.get("margin") or 0.05
    last = ((doc.get("periods") or [{}])[-1]).get("period")
    for r in doc.get("monitor") or []:
        if r.get("period") != last:
            continue
        verdict = "differs" if r.get("alarm") else "equivalent" if r.get("within_margin") else "inconclusive"
        metric = METRIC_WORDS.get(r.get("metric"), str(r.get("metric")))
        task = "" if r.get("task") in (None, "(all)") else f" in {r.get('task')}"
        words = gap_words(r.get("gap"), r.get("cs_low"), r.get("cs_high"), r.get("gap_band"))
        sentence = (f"In {last}, since {r.get('since')}, {metric} for {r.get('attribute')} {r.get('group')}{task} is "
                    f"{words} than for the rest.")
        fid = f"{r.get('task')}/{r.get('attribute')}={r.get('group')}/{r.get('metric')}"
        parts.findings.append(_finding(fid, verdict, margin, f"{metric} against the rest, monitored over periods",
                                       sentence, k, task=r.get("task"), subgroup=f"{r.get('attribute')}="
                                       f"{r.get('group')}", compared_with="the rest", estimate=r.get("gap"),
                                       interval_low=r.get("cs_low"), interval_high=r.get("cs_high")))
        parts.groups.append(_subgroup(r.get("attribute"), r.get("group"), r.get("n"), k, task=r.get("task"),
                                      unit=CASES_UNIT.get(r.get("metric"), "rows")))
    parts.size_note = "Sizes are the group's cases of each rate in the latest period."
    parts.limitations.append(promise(doc))
    parts.limitations += [str(w) for w in doc.get("warnings") or []]
    parts.not_tested.append("Gaps between two named groups (each group is watched against the rest); periods "
                            "before the first one stored.")
    return parts


CASES_UNIT = {"recall": "positive cases", "specificity": "negative cases", "parity": "rows"}

KIND_PARTS = {"groups": _groups, "note_classifiers": _note_classifiers, "mlm_bias": _mlm_bias,
              "cit_images": _cit_images, "age_independence": _age_independence, "ctf": _ctf, "slices": _slices,
              "monitor": _monitor}


# ---- the card -------------------------------------------------------------------------------------------------------

def _project_model(project: Project, dataset_id: int | None):
    """The project's model that wrote the audited predictions (linked by the dataset), if any."""
    if dataset_id is None:
        return None
    for m in project.models():
        if m.predictions_id == dataset_id:
            return m
    origin = project.dataset(dataset_id).origin or {}
    for m in project.models():
        if m.id == origin.get("model_id"):
            return m
    return None


def _sha(value) -> str | None:
    v = _text(value)
    return v.lower() if v and re.fullmatch(r"[0-9a-fA-F]{64}", v) else None


def model_card(project: Project | str | Path, audit_id: int, *, intended_use: str | None,
               limitations: list[str] | tuple[str, ...] = (), suppress_k: int = 11) -> dict:
    """The card of a stored audit (see the module docstring); validated against the shipped schema."""
    from fairdesk import __version__
    from fairdesk.core.kinds import (ReportSettings, audit_kind, newer_keys_note, newer_version, releasable,
                                     without_ignored_keys)
    from fairdesk.core.provenance import now_utc
    from fairdesk.core.reports.document import suppress_text

    k = ReportSettings(suppress_k=suppress_k).suppress_k  # one check of k for every front end
    project = project if isinstance(project, Project) else Project(project, create=False)
    info = next((a for a in project.audits() if a.id == audit_id), None)
    if info is None:
        project.audit_kind(audit_id)  # raises the project's own sentence
    kind = audit_kind(info.kind)
    # a card leaves the workstation: it is written from the document's releasable copy, as every report is
    # (a newer version's document: without the keys this version does not know, which the card names)
    read, ignored = without_ignored_keys(info.kind, project.audit_document(audit_id))
    doc = releasable(info.kind, read, ReportSettings(suppress_k=k))
    if info.kind not in KIND_PARTS:
        raise DataError(f"Model cards of '{info.kind}' audits are not supported by this version of FairDesk.")
    parts = KIND_PARTS[info.kind](doc, k)
    prov = doc.get("provenance") or {}

    dataset = project.dataset(info.dataset_id) if info.dataset_id is not None else None
    data = {"name": _text(dataset.name if dataset else parts.data.get("name")),
            "sha256": _sha(dataset.sha256 if dataset else parts.data.get("sha256")),
            "rows": _count(dataset.n_rows if dataset else parts.data.get("rows"), k),
            "origin": None}
    if dataset is not None:
        where = Path(dataset.source).name if dataset.source else None
        data["origin"] = (f"stored in project {project.name} as dataset {dataset.id} ({dataset.kind})" +
                          (f", imported from {where}" if where else "") + f" on {dataset.created}")
        if dataset.damaged:  # said, never silent: what the card could not read from the project
            data["origin"] += (f"; its stored record is damaged and was set aside ({dataset.damaged}), so what it "
                               "would add — the column roles and where the data came from — is missing here")
    elif parts.data.get("origin") or parts.data.get("name"):
        data["origin"] = _text(parts.data.get("origin")) or "as recorded in the audit"
    if data["sha256"] is None and parts.data.get("sha256") and dataset is None:
        data["origin"] = (data["origin"] or "") + f" (fingerprint {parts.data['sha256']})"

    stored = _project_model(project, info.dataset_id)
    hashes = {str(a): str(b) for a, b in (parts.model.get("hashes") or {}).items() if b}
    trained = list(parts.trained)
    if stored is not None:
        hashes.update({f"{stored.kind}:{t}": str(h) for t, h in (stored.info.get("model_hashes") or {}).items()})
        model = {"name": stored.name, "kind": stored.kind, "version": _text(stored.info.get("version")) or
                 f"model {stored.id} of project {project.name}, trained {stored.created}", "hashes": hashes,
                 "recorded_in": "project"}
        source = project.dataset(stored.dataset_id) if stored.dataset_id is not None else None
        own = stored.info.get("model_hashes") or {}
        trained.insert(0, _trained("audited model", stored.kind, stored.info.get("params") or
                                   stored.info.get("config") or {},
                                   next(iter(own.values())) if len(own) == 1 else stored.info.get("sha256"),
                                   source.name if source else None, source.sha256 if source else None,
                                   stored.created))
    else:
        first = trained[0] if trained else {}
        name = _text(parts.model.get("name"))
        kind_name = _text(parts.model.get("kind")) or _text(first.get("kind"))
        for entry in trained:
            if entry["model_sha256"]:
                hashes.setdefault(entry["role"], entry["model_sha256"])
        model = {"name": name, "kind": kind_name, "version": _text(parts.model.get("version")),
                 "hashes": hashes, "recorded_in": "audit" if (name or hashes or trained) else "not recorded"}
    model["trained_by_fairdesk"] = trained

    findings = parts.findings
    counts = {v: sum(1 for f in findings if f["verdict"] == v) for v in VERDICTS}
    counts["total"] = len(findings)
    use = (intended_use or "").strip()
    user_limits = [str(t).strip() for t in limitations if str(t).strip()]
    standard = [INCONCLUSIVE_READING,
                "The audit measures the model on the data given; it says nothing about data from other sites, "
                "periods or populations.",
                f"Counts below {k} are written \"<{k}\" (small-cell suppression)."] + \
        [str(r) for r in (doc.get("disclosure") or {}).get("rules") or []]
    if not parts.sizes_given:
        standard.append(parts.size_note)
    if ignored:  # a newer version's document: what this version did not read
        standard.append(newer_keys_note(ignored, "The stored audit", newer_version(doc)))
    card = {
        "card_format": CARD_FORMAT,
        "written_by": {"tool": "FairDesk", "tool_version": str(__version__), "written_utc": now_utc()},
        "audit": {"audit_id": int(audit_id), "kind": info.kind, "kind_title": kind.title, "name": info.name,
                  "run_utc": _text(prov.get("created_utc")), "stored_utc": info.created,
                  "seed": int(prov["seed"]) if _num(prov.get("seed")) is not None else None, "small_cell_k": k,
                  "fairdesk_version_of_run": _text((prov.get("versions") or {}).get("fairdesk"))},
        "model": model,
        "intended_use": {"statement": use or "Not stated: the intended use was not entered when this card was "
                         "written.", "entered_by_user": bool(use)},
        "data": data,
        "subgroups": {"sizes_given": parts.sizes_given, "note": parts.size_note, "groups": parts.groups},
        "findings": {"verdict_counts": counts, "reading": INCONCLUSIVE_READING, "items": findings},
        "limitations": [suppress_text(t, k) for t in user_limits + parts.limitations + standard],
        "not_tested": [suppress_text(t, k) for t in dict.fromkeys(parts.not_tested)],
    }
    validate_card(card)
    return card


# ---- Markdown ---------------------------------------------------------------------------------------------------

def card_markdown(card: dict) -> str:
    """The card as Markdown: the same content, for people (every finding with its verdict and sentence)."""
    a, m, d, s, f = card["audit"], card["model"], card["data"], card["subgroups"], card["findings"]
    k = a["small_cell_k"]
    c = f["verdict_counts"]
    lines = [f"# Fairness and equity card: {markdown_text(m['name'] or 'model not recorded')}", "",
             f"Written by FairDesk {markdown_text(card['written_by']['tool_version'])} on "
             f"{markdown_text(card['written_by']['written_utc'])} from audit {a['audit_id']} "
             f"({markdown_text(a['kind_title'])}, kind `{a['kind']}`) of {markdown_text(a['run_utc'] or a['stored_utc'])}; seed "
             f"{markdown_text(a['seed'])}; counts below {k} are written as \"\\<{k}\".", "",
             "## Model", "",
             f"- Name: {markdown_text(m['name'])}", f"- Kind: {markdown_text(m['kind'])}", f"- Version: {markdown_text(m['version'])}",
             f"- Recorded in: {markdown_text(m['recorded_in'])}"]
    lines += [f"- Hash {markdown_text(name)}: `{h}`" for name, h in m["hashes"].items()]
    for t in m.get("trained_by_fairdesk") or []:
        data = t["training_data"]
        params = ", ".join(f"{markdown_text(key)} = {markdown_text(json.dumps(value, default=str))}"
                           for key, value in t["parameters"].items()) or "none recorded"
        lines += [f"- Trained by FairDesk ({markdown_text(t['role'])}): kind {markdown_text(t['kind'])}"
                  + (f", on {markdown_text(t['trained_utc'])}" if t["trained_utc"] else "")
                  # a hash missing here is not "not recorded" when the model's hashes are listed just above
                  + (f"; model SHA-256 `{t['model_sha256']}`" if t["model_sha256"] else
                     "" if m["hashes"] else "; model SHA-256 not recorded") + "; training data "
                  + markdown_text(data["name"] or "unnamed") + " (fingerprint "
                  + (f"`{data['sha256']}`" if data["sha256"] else "not recorded") + f"); parameters: {params}"]
    use = card["intended_use"]
    lines += ["", "## Intended use", "", markdown_text(use["statement"], line_start=True) + ("" if use["entered_by_user"] else ""), "",
              "## Data", "", f"- Name: {markdown_text(d['name'])}", f"- SHA-256: {markdown_text(d['sha256'])}",
              f"- Rows: {markdown_text(d['rows'])}", f"- Origin: {markdown_text(d['origin'])}", "",
              "## Subgroups audited", "", markdown_text(s["note"], line_start=True), ""]
    if s["groups"]:
        lines += ["| Variant | Task | Attribute | Group | Size | Tested |", "|---|---|---|---|---|---|"]
        for g in s["groups"]:
            size = "–" if g["size"] is None else f"{markdown_text(g['size'])} {markdown_text(g.get('size_unit') or '')}".strip()
            tested = "yes" if g["tested"] else f"no ({markdown_text(g.get('why_not_tested') or 'left out')})"
            lines.append(f"| {markdown_text(g.get('variant') or '')} | {markdown_text(g.get('task') or '')} | {markdown_text(g['attribute'])} | "
                         f"{markdown_text(g['group'])} | {size} | {tested} |")
        lines.append("")
    lines += ["## Findings", "",
              f"{c['total']} finding{'' if c['total'] == 1 else 's'}: {c['differs']} differ, "
              f"{c['equivalent']} equivalent within the margin, "
              f"{c['inconclusive']} inconclusive. {markdown_text(f['reading'])}", ""]
    lines += [f"- **{markdown_text(item['verdict_words'])}** — {markdown_text(item['sentence'])}" for item in f["items"]]
    lines += ["", "## Limitations", ""] + [f"- {markdown_text(t, line_start=True)}" for t in card["limitations"]]
    lines += ["", "## Not tested", ""] + ([f"- {markdown_text(t, line_start=True)}" for t in card["not_tested"]]
                                          or ["- (nothing listed)"])
    return "\n".join(lines) + "\n"
