"""``fairdesk-cli audit groups``: the calibration switches and the JSON contract of issue 14 (``calibration`` records
and ``curves``)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from fairdesk.cli import main

CALIBRATION_FIELDS = {"task", "attribute", "group", "n", "p_value", "q_value", "verdict"} | {
    f"{m}{s}" for m in ("calibration_intercept", "calibration_slope", "oe_ratio", "brier", "ece")
    for s in ("", "_ci_low", "_ci_high")}


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(1)
    n = 600
    g = rng.choice(["A", "B"], n)
    l = rng.normal(-0.5, 1.0, n)
    y = (rng.random(n) < 1 / (1 + np.exp(-np.where(g == "B", l + 1.0, l)))).astype(int)
    path = tmp_path / "d.csv"
    pd.DataFrame({"y": y, "p": 1 / (1 + np.exp(-l)), "g": g}).to_csv(path, index=False)
    return path


def _run(data, out, *extra) -> dict:
    code = main(["audit", "groups", "--threshold", "0.5", str(data), "--label", "y", "--score", "p", "--attribute", "g", "--metric", "recall",
                 "--n-boot", "100", "--json", str(out), "--quiet", *extra])
    assert code == 0
    return json.loads(out.read_text())


def test_calibration_records_and_curves_follow_the_contract(data, tmp_path):
    doc = _run(data, tmp_path / "on.json")
    cal = doc["calibration"]
    assert len(cal) == 2 and all(CALIBRATION_FIELDS <= set(r) for r in cal)
    assert {r["verdict"] for r in cal} <= {"differs", "equivalent", "inconclusive"}
    b = next(r for r in cal if r["group"] == "B")
    assert b["verdict"] == "differs" and b["oe_ratio"] > 1  # planted under-prediction
    curves = doc["curves"]
    for group in ("A", "B"):
        kinds = {c["curve"]: c for c in curves if c["group"] == group}
        assert {"roc", "pr"} <= set(kinds)
        for k in ("roc", "pr"):
            assert {"task", "attribute", "group", "x", "y"} <= set(kinds[k])
            assert 2 <= len(kinds[k]["x"]) == len(kinds[k]["y"]) <= 200
    tests = pd.DataFrame(doc["tests"])
    assert tests.loc[tests["metric"] == "calibration", "family"].eq("calibration").all()  # secondary, its own


def test_no_calibration_and_shared_family_flags(data, tmp_path):
    off = _run(data, tmp_path / "off.json", "--no-calibration")
    assert off["calibration"] == [] and off["curves"] == [] and off["plan"]["calibration"] is False
    shared = _run(data, tmp_path / "shared.json", "--calibration-family", "shared")
    assert shared["plan"]["calibration_own_family"] is False
    tests = pd.DataFrame(shared["tests"])
    assert tests["family_key"].nunique() == 1  # gaps and calibration corrected together
    with pytest.raises(SystemExit):
        main(["audit", "groups", "--threshold", "0.5", str(data), "--label", "y", "--score", "p", "--attribute", "g",
              "--calibration-family", "nope", "--json", str(tmp_path / "x.json")])
