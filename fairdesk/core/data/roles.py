"""Role guessing: a sensible first mapping of a table's columns to roles (label, score, task, patient id, sample id,
split, protected attributes), from the column names and, where given, the contents.

Pure functions of column names and pandas frames (no Qt), so the GUI's forms and the CLI can offer the same guesses.
A guess is only a default: every front end shows it for the user to confirm.
"""
from __future__ import annotations

import re

import pandas as pd

LABEL_NAMES = ("label", "y", "y_true", "target", "outcome", "truth", "ground_truth", "true_label")
SCORE_NAMES = ("score", "y_score", "prob", "proba", "probability", "y_prob", "y_pred_proba", "pred", "prediction",
               "risk", "p")
TASK_NAMES = ("task", "task_name", "target_name", "outcome_name")
PATIENT_NAMES = ("patient_id", "subject_id", "patient", "pid", "mrn", "person_id")
SAMPLE_NAMES = ("sample_id", "stay_id", "icustay_id", "hadm_id", "encounter_id", "row_id", "image_id", "id")
SPLIT_NAMES = ("split", "fold", "partition", "set", "subset")
ATTRIBUTE_WORDS = ("sex", "gender", "race", "ethnicity", "ethnic", "language", "insurance", "payer", "religion",
                   "marital", "disability", "nationality", "region", "income", "education", "age_group",
                   "agegroup", "country")
CONTINUOUS_WORDS = ("age", "bmi", "income_value", "deprivation", "age_years")
#: names of a notes table's text column
TEXT_NAMES = ("text", "note", "notes", "note_text", "text_note", "notetext", "report", "body", "content",
              "document", "discharge_summary", "narrative")
#: numeric columns of a notes table offered as extra features by default (acuity scores; 001 appends such data)
NUMERIC_WORDS = ("sapsii", "saps", "saps_ii", "sapsii_score", "sofa", "oasis", "apache", "apsiii", "elixhauser",
                 "acuity", "acuity_score", "charlson")
#: identifier and time columns of a notes table (never a 0/1 task, even when they happen to hold only 0 and 1)
ID_WORDS = ("id", "row_id", "note_id", "hadm_id", "stay_id", "icustay_id", "subject_id", "sample_id", "chartdate",
            "charttime", "date", "time")


def normalise(name) -> str:
    """A column name in lower case with runs of other characters as one ``_`` ("Patient ID" → "patient_id")."""
    return re.sub(r"[^a-z0-9]+", "_", str(name).lower()).strip("_")


def first_named(columns, names: tuple[str, ...]) -> str | None:
    """The first column whose normalised name is one of ``names`` (in the order of ``names``), or None."""
    normed = {normalise(c): c for c in columns}
    for n in names:
        if n in normed:
            return normed[n]
    return None


def is_attribute_name(name) -> bool:
    """True when the name reads as a protected attribute (sex, ethnicity, …, age)."""
    n = normalise(name)
    return n in ATTRIBUTE_WORDS or n in ("age", "age_years") or bool(set(n.split("_")) & set(ATTRIBUTE_WORDS))


def is_id_name(name) -> bool:
    """True when the name reads as an identifier of a patient, stay, note, image or row."""
    n = normalise(name)
    return n in PATIENT_NAMES or n in SAMPLE_NAMES or n in ID_WORDS or n.endswith("_id")


def not_outcomes(columns) -> set[str]:
    """The columns that are identifiers or protected attributes by name: never offered as a label or an output."""
    return {c for c in columns if is_id_name(c) or is_attribute_name(c) or "age" in normalise(c).split("_")}


def is_numeric(s: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)


def is_binary(s: pd.Series) -> bool:
    """True when every non-missing value is 0 or 1 (and there is one). Decided on the distinct values, the first
    few first: converting every cell of a text column (an id, a language) with ``to_numeric`` cost 5–50 ms a
    column, each in one call holding the interpreter lock, and the forms ask this of every column of a table."""
    s = s.dropna()
    if pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s):  # no conversion: compared as they are
        return len(s) > 0 and bool(s.isin([0, 1]).all())
    values = pd.Series(pd.unique(s), dtype=object)
    for part in (values[:16], values):  # a text column is refused on its first distinct values
        v = pd.to_numeric(part, errors="coerce")
        if v.isna().any() or not bool(v.isin([0, 1]).all()):
            return False
    return len(values) > 0


def guess_roles(df: pd.DataFrame) -> dict:
    """A first mapping of a predictions or features table's columns to roles, by names and contents: ``label``,
    ``score``, ``task``, ``patient_id``, ``sample_id``, ``split`` (a column name or None), ``attributes`` and
    ``continuous_attributes`` (lists)."""
    cols = [str(c) for c in df.columns]
    guess: dict = {"label": first_named(cols, LABEL_NAMES), "score": first_named(cols, SCORE_NAMES),
                   "task": first_named(cols, TASK_NAMES), "patient_id": first_named(cols, PATIENT_NAMES),
                   "sample_id": first_named(cols, SAMPLE_NAMES), "split": first_named(cols, SPLIT_NAMES)}
    if guess["sample_id"] == guess["patient_id"]:
        guess["sample_id"] = None
    if guess["score"] is None:  # a numeric column named like a score or probability
        for c in cols:
            n = normalise(c)
            if ("score" in n or "prob" in n) and pd.api.types.is_numeric_dtype(df[c]):
                guess["score"] = c
                break
    used = {v for v in guess.values() if v}
    attrs, cont = [], []
    for c in cols:
        if c in used:
            continue
        n = normalise(c)
        words = set(n.split("_"))
        numeric = is_numeric(df[c])
        if n in CONTINUOUS_WORDS or (words & {"age"} and numeric and df[c].nunique() > 12):
            (cont if numeric else attrs).append(c)
        elif n in ATTRIBUTE_WORDS or words & set(ATTRIBUTE_WORDS):
            attrs.append(c)
    guess["attributes"], guess["continuous_attributes"] = attrs, cont
    return guess


def attribute_candidates(df: pd.DataFrame, exclude: set[str]) -> tuple[list[str], list[str]]:
    """Columns that could be categorical attributes (1–50 distinct values) and continuous ones (numeric, more than 12
    distinct values), leaving out ``exclude`` and feature/label columns (``f_*``, ``y_*``)."""
    cat, cont = [], []
    for c in map(str, df.columns):
        if c in exclude or c.startswith(("f_", "y_")):
            continue
        s = df[c]
        nunique = s.nunique(dropna=True)
        if is_numeric(s) and nunique > 12:
            cont.append(c)
        elif 1 <= nunique <= 50:
            cat.append(c)
    return cat, cont


def guess_feature_roles(columns) -> dict:
    """A first mapping of a features table's columns (by name only): ``features`` (``f_*``), ``labels`` (``y_*``),
    ``patient_id``, ``attributes`` to carry into the predictions, and ``label_candidates`` — the columns that may
    be offered as labels (no feature, identifier or protected attribute)."""
    cols = [str(c) for c in columns]
    feats = [c for c in cols if c.startswith("f_")]
    labels = [c for c in cols if c.startswith("y_")]
    patient = first_named(cols, PATIENT_NAMES)
    others = [c for c in cols if c not in feats and c not in labels and c != patient]
    attrs = [c for c in others if is_attribute_name(c)]
    blocked = not_outcomes(cols) | {patient}
    candidates = labels + [c for c in cols if c not in labels and c not in feats and c not in blocked]
    return {"features": feats, "labels": labels, "patient_id": patient, "attributes": attrs, "others": others,
            "label_candidates": candidates}


def guess_note_roles(sample: pd.DataFrame) -> dict:
    """First choices for a notes table from its header and first rows: ``text`` column, 0/1 ``tasks``,
    ``patient_id``, protected ``attributes``, ``continuous_attributes`` (age), ``numeric_columns`` (acuity scores)
    and ``numeric_candidates`` (every column that could be a numeric feature)."""
    cols = [str(c) for c in sample.columns]
    normed = {c: normalise(c) for c in cols}
    text = first_named(cols, TEXT_NAMES)
    if text is None and len(sample):
        lengths = {c: sample[c].dropna().astype(str).str.len().mean() for c in cols
                   if not is_numeric(sample[c]) and sample[c].notna().any()}
        best = max(lengths, key=lengths.get, default=None)
        text = best if best is not None and lengths[best] >= 20 else None
    patient = first_named(cols, PATIENT_NAMES)
    attributes, continuous, numeric, tasks = [], [], [], []
    for c in cols:
        if c in (text, patient):
            continue
        n = normed[c]
        words = set(n.split("_"))
        s = sample[c] if c in sample else pd.Series(dtype=object)
        if n in ATTRIBUTE_WORDS or words & set(ATTRIBUTE_WORDS):
            attributes.append(c)
        elif is_numeric(s) and (n in CONTINUOUS_WORDS or ("age" in words and s.nunique() > 12)):
            continuous.append(c)
        elif len(s.dropna()) and is_binary(s) and n not in ID_WORDS and not n.endswith("_id"):
            tasks.append(c)
        elif is_numeric(s) and (n in NUMERIC_WORDS or words & set(NUMERIC_WORDS)):
            numeric.append(c)
    numeric_candidates = [c for c in cols if c not in (text, patient) and c not in tasks and c not in attributes
                          and (not len(sample) or (is_numeric(sample[c]) and not is_binary(sample[c])))]
    return {"text": text, "patient_id": patient, "tasks": tasks, "attributes": attributes,
            "continuous_attributes": continuous, "numeric_columns": numeric, "numeric_candidates": numeric_candidates}
