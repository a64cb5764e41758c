"""Column roles of a predictions table and their validation."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from fairdesk.core.errors import DataError

INTERSECTION_SEP = " × "
#: an attribute with more distinct values than this is refused at once (an id column chosen by mistake would
#: otherwise be searched group by group for minutes)
MAX_GROUPS = 200


def column_names(value, what: str = "columns") -> tuple[str, ...]:
    """A list of column names as a tuple: a single string is one name, never a sequence of its letters (the
    Python API's ``attributes="sex"`` is ``("sex",)``); None is none. Anything but strings is refused by name."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    try:
        names = tuple(value)
    except TypeError:
        raise DataError(f"{what} must be a column name or a list of column names, not {value!r}.") from None
    bad = [v for v in names if not isinstance(v, str)]
    if bad:
        raise DataError(f"{what} must be column names (text), not {bad[0]!r}.")
    return names


@dataclass(frozen=True)
class ColumnRoles:
    """Which column plays which role. Long format: one row per (sample, task) when ``task`` is set."""

    label: str
    score: str
    task: str | None = None
    attributes: tuple[str, ...] = ()
    continuous_attributes: tuple[str, ...] = ()
    patient_id: str | None = None
    sample_id: str | None = None
    split: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "attributes", column_names(self.attributes, "attributes"))
        object.__setattr__(self, "continuous_attributes",
                           column_names(self.continuous_attributes, "continuous_attributes"))
        named = [("--label", self.label), ("--score", self.score), ("--task", self.task),
                 ("--patient-id", self.patient_id), ("--sample-id", self.sample_id), ("--split", self.split),
                 *[("--attribute", c) for c in self.attributes],
                 *[("--continuous-attribute", c) for c in self.continuous_attributes]]
        for option, col in named:
            required = option in ("--label", "--score")
            if (col is not None or required) and (not isinstance(col, str) or not col.strip()):
                raise DataError(f"{option} must name a column of the table, not {col!r}.")

    def all_columns(self) -> list[str]:
        cols = [self.label, self.score, self.task, self.patient_id, self.sample_id, self.split,
                *self.attributes, *self.continuous_attributes]
        return list(dict.fromkeys(c for c in cols if c))

    def to_dict(self) -> dict:
        return {"label": self.label, "score": self.score, "task": self.task,
                "attributes": list(self.attributes), "continuous_attributes": list(self.continuous_attributes),
                "patient_id": self.patient_id, "sample_id": self.sample_id, "split": self.split}

    @classmethod
    def from_dict(cls, d: dict) -> "ColumnRoles":
        """The roles stored in ``d``; keys this version does not know (a newer FairDesk's roles) are ignored — the
        stored document keeps them, and :meth:`unknown_keys` names them for the reader's note."""
        d = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        d["attributes"] = tuple(d.get("attributes") or ())
        d["continuous_attributes"] = tuple(d.get("continuous_attributes") or ())
        return cls(**d)

    @classmethod
    def unknown_keys(cls, d: dict) -> list[str]:
        return sorted(str(k) for k in d if k not in cls.__dataclass_fields__)


@dataclass
class Issue:
    level: str  # "error" blocks the audit, "warning" is shown and recorded
    message: str
    column: str | None = None


@dataclass
class ValidationReport:
    issues: list[Issue] = field(default_factory=list)

    @property
    def errors(self) -> list[Issue]:
        return [i for i in self.issues if i.level == "error"]

    @property
    def warnings(self) -> list[Issue]:
        return [i for i in self.issues if i.level == "warning"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def add(self, level: str, message: str, column: str | None = None) -> None:
        self.issues.append(Issue(level, message, column))

    def raise_if_errors(self) -> None:
        if self.errors:
            raise DataError("The table cannot be audited yet:\n- " + "\n- ".join(i.message for i in self.errors))

    def text(self) -> str:
        if not self.issues:
            return "No problems found."
        return "\n".join(f"{i.level.upper()}: {i.message}" for i in self.issues)


def _rows(n: int) -> str:
    return f"{n} row" if n == 1 else f"{n} rows"


def _where(mask: pd.Series, df: pd.DataFrame, limit: int = 5) -> str:
    """Human row numbers (1 = first data row, as a spreadsheet shows it below the header)."""
    idx = np.flatnonzero(mask.to_numpy())[:limit] + 1
    more = " …" if mask.sum() > limit else ""
    return "data rows " + ", ".join(map(str, idx)) + more


def coerce_binary_label(values: pd.Series) -> pd.Series:
    """Map 0/1, True/False and '0'/'1' to integers; anything else stays and fails validation."""
    if values.dtype == bool:
        return values.astype(int)
    mapped = values.map(lambda v: {"0": 0, "1": 1, "0.0": 0, "1.0": 1, "true": 1, "false": 0}.get(str(v).strip().lower(), v)
                        if isinstance(v, str) else v)
    return mapped


def as_group_labels(values: pd.Series) -> pd.Series:
    """Attribute values as group names (strings); empty or blank values are missing, like NaN."""
    labels = values.astype("string")
    return labels.mask(labels.str.strip() == "")


def validate(df: pd.DataFrame, roles: ColumnRoles, min_group_size: int = 30) -> ValidationReport:
    """Check a predictions table against its column roles; every problem is named in plain words."""
    from fairdesk.core.data.loaders import table_notes

    rep = ValidationReport()
    for note in table_notes(df):
        rep.add("warning", note)
    missing = [c for c in roles.all_columns() if c not in df.columns]
    if missing:
        rep.add("error", f"Column(s) {', '.join(repr(c) for c in missing)} are not in the table "
                f"(it has: {', '.join(map(repr, list(df.columns)[:15]))}{' …' if df.shape[1] > 15 else ''}). "
                "Map each role to an existing column.")
        return rep
    if len(df) == 0:
        rep.add("error", "The table has no rows.")
        return rep
    named: dict[str, list[str]] = {}
    for role, col in [("label", roles.label), ("score", roles.score), ("task", roles.task), ("split", roles.split),
                      *[("attribute", c) for c in roles.attributes],
                      *[("continuous attribute", c) for c in roles.continuous_attributes]]:
        if col:
            named.setdefault(col, []).append(role)
    for col, used in named.items():
        if len(used) > 1:  # one column read as two things (a label and a score, say) would be audited as neither
            rep.add("error", f"Column '{col}' is given {len(used)} roles ({', '.join(used)}); map each role to its "
                    "own column.", col)
    if rep.errors:
        return rep

    label = coerce_binary_label(df[roles.label])
    n_nan = int(label.isna().sum())
    if n_nan:
        rep.add("error", f"Label column '{roles.label}' is empty in {_rows(n_nan)} ({_where(label.isna(), df)}). "
                "Fill in the true outcome or remove those rows.", roles.label)
    bad = ~label.isna() & ~label.isin([0, 1])
    if bad.any():
        values = ", ".join(repr(v.item() if hasattr(v, "item") else v) for v in pd.unique(df.loc[bad, roles.label])[:5])
        rep.add("error", f"Label column '{roles.label}' must hold 0/1 (or true/false); found {values} in "
                f"{_rows(int(bad.sum()))}. Recode the outcome as 1 = condition present, 0 = absent.", roles.label)

    score = pd.to_numeric(df[roles.score], errors="coerce")
    non_numeric = score.isna() & df[roles.score].notna()
    if non_numeric.any():
        rep.add("error", f"Score column '{roles.score}' has text that is not a number in "
                f"{_rows(int(non_numeric.sum()))} ({_where(non_numeric, df)}).", roles.score)
    if df[roles.score].isna().any():
        m = df[roles.score].isna()
        rep.add("error", f"Score column '{roles.score}' is empty in {_rows(int(m.sum()))} ({_where(m, df)}). "
                "Re-run the model on those rows or remove them.", roles.score)
    out = (score < 0) | (score > 1)
    if out.any():
        rep.add("error", f"Score column '{roles.score}' must be a probability in [0, 1]; "
                f"{_rows(int(out.sum()))} lie outside (min {score.min():.3g}, max {score.max():.3g}). "
                "If these are logits, convert them with the sigmoid function first.", roles.score)

    if roles.task and df[roles.task].isna().any():
        m = df[roles.task].isna()
        rep.add("error", f"Task column '{roles.task}' is empty in {_rows(int(m.sum()))} ({_where(m, df)}).", roles.task)

    if roles.split and df[roles.split].isna().any():
        m = df[roles.split].isna()
        rep.add("error", f"Split column '{roles.split}' is empty in {_rows(int(m.sum()))}.", roles.split)

    key = [c for c in (roles.sample_id, roles.task) if c]
    if roles.sample_id:
        dup = df.duplicated(subset=key, keep=False)
        if dup.any():
            rep.add("error", f"Sample id '{roles.sample_id}' repeats within a task in {_rows(int(dup.sum()))} "
                    f"({_where(dup, df)}): each sample may have one prediction per task. Remove the duplicates.",
                    roles.sample_id)
    if roles.patient_id:
        if df[roles.patient_id].isna().any():
            m = df[roles.patient_id].isna()
            rep.add("error", f"Patient id '{roles.patient_id}' is empty in {_rows(int(m.sum()))} ({_where(m, df)}).",
                    roles.patient_id)
        per_task = df.groupby(roles.task)[roles.patient_id] if roles.task else None
        repeats = (per_task.apply(lambda s: s.duplicated().any()).any() if per_task is not None
                   else df[roles.patient_id].duplicated().any())
        if repeats:
            rep.add("warning", f"Some patients ('{roles.patient_id}') have several rows in a task; confidence "
                    "intervals resample whole patients so that their rows are not counted as independent.",
                    roles.patient_id)
    full_dup = df.duplicated(keep="first")
    if full_dup.any():
        rep.add("warning", f"{_rows(int(full_dup.sum()))} are exact copies of another row ({_where(full_dup, df)}). "
                "Check the export; duplicates give those samples double weight.")

    for col in roles.attributes:
        distinct = as_group_labels(df[col]).nunique(dropna=True)
        if distinct > MAX_GROUPS:
            rep.add("error", f"Attribute '{col}' has {distinct:,} distinct values, more than the {MAX_GROUPS} groups "
                    "an attribute may have: it looks like an id or a measurement, not a protected attribute. Choose "
                    "another column, or map a continuous one as --continuous-attribute.", col)
            continue
        m = as_group_labels(df[col]).isna()
        if m.any():
            rep.add("warning", f"Attribute '{col}' is missing (empty) in {_rows(int(m.sum()))}; those rows form the "
                    "group '(missing)', which is listed but not tested.", col)
        if as_group_labels(df[col]).nunique(dropna=True) < 2:
            rep.add("error", f"Attribute '{col}' has fewer than two groups, so there is nothing to compare. "
                    "Choose another column.", col)
    for col in roles.continuous_attributes:
        values = pd.to_numeric(df[col], errors="coerce")
        if (values.isna() & df[col].notna()).any():
            rep.add("error", f"Continuous attribute '{col}' has values that are not numbers. Map it as a "
                    "categorical attribute instead, or clean the column.", col)
        elif values.isna().any():
            rep.add("warning", f"Continuous attribute '{col}' is missing in {_rows(int(values.isna().sum()))}; "
                    "those rows are left out of its error-spread score.", col)

    if rep.errors:
        return rep
    # Group-level checks, per task: empty, small and single-class groups.
    tasks = df.groupby(roles.task) if roles.task else [("(all)", df)]
    # every group the attribute knows (declared categories included), to name groups with no rows in a task
    known = {col: (list(map(str, df[col].cat.categories)) if isinstance(df[col].dtype, pd.CategoricalDtype)
                   else sorted(as_group_labels(df[col]).dropna().unique())) for col in roles.attributes}
    for task, sub in tasks:
        y = coerce_binary_label(sub[roles.label]).astype(int)
        if y.nunique() < 2:
            rep.add("warning", f"Task '{task}' has only {'positive' if y.iloc[0] == 1 else 'negative'} labels; "
                    "recall or specificity cannot be estimated for it.", roles.label)
        for col in roles.attributes:
            labels = as_group_labels(sub[col]).fillna("(missing)")
            present = set(labels.unique())
            empty = [g for g in known[col] if g not in present]
            if empty:
                rep.add("warning", f"Task '{task}', {col} = {', '.join(map(repr, empty))}: no rows (empty group); "
                        "it cannot be compared for this task.", col)
            grouped = y.groupby(labels)
            for group, yy in grouped:
                if group == "(missing)":
                    continue
                if len(yy) < min_group_size:
                    rep.add("warning", f"Task '{task}', {col} = '{group}': only {len(yy)} rows (< {min_group_size}); "
                            "the group is shown with its size but not tested.", col)
                elif yy.nunique() < 2:
                    kind = "positive" if yy.iloc[0] == 1 else "negative"
                    missing_rate = "specificity" if kind == "positive" else "recall"
                    rep.add("warning", f"Task '{task}', {col} = '{group}': all {len(yy)} rows are {kind}, so its "
                            f"{missing_rate} is not estimable and is reported as such (never as 0).", col)
    return rep


def prepare(df: pd.DataFrame, roles: ColumnRoles) -> pd.DataFrame:
    """A clean copy with canonical dtypes: label int, score float, attributes string."""
    out = df[roles.all_columns()].copy()
    out[roles.label] = coerce_binary_label(out[roles.label]).astype(int)
    out[roles.score] = pd.to_numeric(out[roles.score]).astype(float)
    for col in roles.attributes:
        out[col] = as_group_labels(out[col])
    for col in roles.continuous_attributes:
        out[col] = pd.to_numeric(out[col], errors="coerce").astype(float)
    return out
