"""What the GUI's read of a stored group audit prepares, and the report it prints, stay the same while that read is
made cheaper (issue 24, round 13c: the view thread's CPU per read of the demo's audit). The digests of the expected
outputs in ``tests/data/read_view/expected.json`` were computed by the code before round 13c from stored documents
(``python -m tests.core.test_read_outputs`` writes them again, after a deliberate change of what the report or the
page says): the project's stored group audit and generated audits of every gap rule, with and without calibration,
intersections, continuous attributes and small groups (their documents are stored beside it, so the outputs depend
on nothing but the code). Compared: the findings frame (values, dtypes, index) and the comparison counts, the board
summary at k = 1, 5 and 50, the whole report tree (every paragraph, table and figure's data), and the page's views —
every gap plot's rows, every error-spread plot and bins table, every calibration curve, discrimination table and
calibration sentence."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fairdesk.core.audits.groups import (METRICS, GroupAuditPlan, GroupAuditResult, comparison_counts, findings,
                                         run_group_audit)
from fairdesk.core.data.schema import ColumnRoles

HERE = Path(__file__).resolve().parents[1] / "data"
STORE = HERE / "read_view"
SOURCES = {"stored": HERE / "documents" / "groups.json"}
KS = (1, 5, 50)


def _value(v):
    """A cell as exact JSON: floats by their repr (NaN, infinities as text), NumPy scalars as Python ones."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float):
        return {"f": repr(v)}
    if isinstance(v, (list, tuple)):
        return [_value(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _value(x) for k, x in v.items()}
    if isinstance(v, pd.DataFrame):
        return _frame(v)
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {"type": type(v).__name__, **{f.name: _value(getattr(v, f.name)) for f in dataclasses.fields(v)}}
    if v is None or isinstance(v, (str, int, bool)):
        return v
    return {"repr": f"{type(v).__name__}:{v!r}"}


def _frame(f: pd.DataFrame) -> dict:
    return {"columns": [str(c) for c in f.columns], "dtypes": [str(d) for d in f.dtypes],
            "index": _value(f.index.tolist()),
            "rows": [_value([f.iat[i, j] for j in range(f.shape[1])]) for i in range(len(f))]}


def digests(doc: dict) -> dict[str, str]:
    """The SHA-256 of each output of :func:`outputs` as exact JSON (stored instead of the outputs: megabytes)."""
    return {key: hashlib.sha256(json.dumps(value, separators=(",", ":")).encode()).hexdigest()
            for key, value in outputs(doc).items()}


def outputs(doc: dict) -> dict:
    """Everything compared, for one stored document."""
    from fairdesk.core.reports import calibration_figures as CF
    from fairdesk.core.reports import figures as F
    from fairdesk.core.reports.groups import (board_summary, build_group_report, calibration_findings_text,
                                              discrimination_table)

    result = GroupAuditResult.from_dict(doc)
    out: dict = {"counts": _value(comparison_counts(result)), "findings": _frame(findings(result))}
    for k in KS:
        out[f"summary k={k}"] = _value(board_summary(GroupAuditResult.from_dict(doc), k))
    out["report"] = _value(build_group_report(GroupAuditResult.from_dict(doc),
                                              dataset_name=result.provenance.get("dataset", ""), suppress_k=5))
    rec = result.records
    for attr in dict.fromkeys(rec["attribute"].astype(str)):
        for metric in METRICS:
            out[f"forest {attr} {metric}"] = _frame(F.forest_data(result, attr, metric))
            for task in dict.fromkeys(rec["task"].astype(str)):
                out[f"forest {attr} {metric} {task}"] = _frame(F.forest_data(result, attr, metric, task=task))
    for attr in dict.fromkeys(rec.loc[rec["metric"] == "delta_eo", "attribute"].astype(str)):
        out[f"delta {attr}"] = _frame(F.delta_eo_data(result, attr))
        out[f"bins {attr}"] = _frame(F.delta_bins_data(result, attr))
    out["calibration sentences"] = _value(calibration_findings_text(result))
    cal = result.calibration
    if not cal.empty:
        for task, attr in dict.fromkeys(zip(cal["task"].astype(str), cal["attribute"].astype(str))):
            for k in (1, 5):
                out[f"curves {task} {attr} {k}"] = _frame(CF.curve_data(result, task, attr, suppress_k=k))
                out[f"discrimination {task} {attr} {k}"] = _value(discrimination_table(result, attr, k, task=task))
    return out


# ---- the generated audits ------------------------------------------------------------------------------------------
def _table(seed: int, n_a: int, effect: float) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = 50 * n_a
    a = rng.choice([f"group {i}" for i in range(n_a)], n)
    b = rng.choice(["B0", "B1"], n)
    task = rng.choice(["t1", "t2"], n)
    y = rng.random(n) < 0.35
    s = 1 / (1 + np.exp(-(2.0 * (y - 0.35) + rng.normal(0, 1, n) - effect * (a == "group 0"))))
    return pd.DataFrame({"y": y.astype(int), "s": s, "a": a, "b": b, "task": task, "age": rng.uniform(20, 90, n)})


DESIGNS = {  # name: (seed, groups of a, effect, rule, calibration, intersection, continuous, tasks, min group size)
    "max": (3, 4, 2.5, "max", True, False, True, False, 20),
    "between": (5, 3, 2.0, "between", True, False, True, True, 10),
    "one-vs-rest": (8, 3, 2.5, "one-vs-rest", False, True, False, True, 20),
    "to-overall": (11, 4, 0.0, "to-overall", True, False, True, False, 30),
    "small groups": (13, 5, 3.0, "max", True, True, False, True, 40),
}


def generated_document(name: str) -> dict:
    seed, n_a, effect, rule, calibration, intersect, continuous, tasks, min_n = DESIGNS[name]
    roles = ColumnRoles(label="y", score="s", attributes=("a", "b"), task="task" if tasks else None,
                        continuous_attributes=("age",) if continuous else ())
    plan = GroupAuditPlan(roles=roles, threshold=0.5, n_boot=100, n_permutations=100, bins=(3,), min_group_size=min_n,
                          intersections=(("a", "b"),) if intersect else (), gap_rule=rule, calibration=calibration,
                          seed=seed)
    return json.loads(run_group_audit(_table(seed, n_a, effect), plan).to_json())


def _document(name: str) -> dict:
    path = SOURCES.get(name, STORE / f"{name.replace(' ', '_')}.json")
    return json.loads(path.read_text(encoding="utf-8"))


NAMES = ["stored", *DESIGNS]


@pytest.fixture(scope="module")
def expected() -> dict:
    return json.loads((STORE / "expected.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", NAMES)
def test_the_read_and_the_report_give_what_they_gave_before(name, expected):
    got, want = digests(_document(name)), expected[name]
    assert list(got) == list(want)
    for key in want:
        assert got[key] == want[key], f"{name}: {key} differs"


def test_the_generated_audits_cover_the_cases():
    """The stored documents hold what the comparison needs to be worth something: pairs shown in no record,
    AUROC / AUPRC and calibration tests, error spreads, significant gaps (so finding sentences), several tasks."""
    seen = set()
    for name in NAMES:
        result = GroupAuditResult.from_dict(_document(name))
        f = findings(result)
        sig = f["verdict"] == "differs"
        seen |= {m for m in ("auroc", "auprc", "calibration", "delta_eo") if (f["metric"] == m).any()}
        seen |= {"differs"} if sig.any() else set()
        seen |= {"unshown"} if (~f["test_id"].isin(set(result.records["test_id"].dropna()))
                                & f["metric"].isin(METRICS)).any() else set()
        seen |= {"tasks"} if result.records["task"].nunique() > 1 else set()
        seen |= {"no calibration"} if result.calibration.empty else set()
    assert seen == {"auroc", "auprc", "calibration", "delta_eo", "differs", "unshown", "tasks", "no calibration"}


def main() -> None:
    """Writes the digests of the expected outputs (run on the code before a change, or after a deliberate change of
    what the report or the page says); ``--documents`` also generates the stored documents anew."""
    STORE.mkdir(parents=True, exist_ok=True)
    for name in DESIGNS if "--documents" in sys.argv else ():
        doc = generated_document(name)
        (STORE / f"{name.replace(' ', '_')}.json").write_text(json.dumps(doc, separators=(",", ":")), encoding="utf-8")
    exp = {name: digests(_document(name)) for name in NAMES}
    (STORE / "expected.json").write_text(json.dumps(exp, indent=1), encoding="utf-8")
    print({p.name: p.stat().st_size for p in STORE.iterdir()}, file=sys.stderr)


if __name__ == "__main__":
    main()
