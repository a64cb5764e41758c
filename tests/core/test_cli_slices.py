"""``fairdesk-cli audit slices`` (issue 26): the contract of the issue, word for word, and bad input refused in one
sentence with exit 2 and nothing written."""
from __future__ import annotations

import json

import numpy as np
import pytest

from fairdesk.cli import main
from fairdesk.core.synthetic.slice_sim import simulate_slice_table


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("slices")
    df, _ = simulate_slice_table(3000, 3, order=2, gap=0.35, seed=1, slice_share=0.1, n_patients=2500)
    df["age"] = np.random.default_rng(0).uniform(18, 95, len(df)).round()
    df["t"] = "mortality"
    path = tmp / "preds.csv"
    df.to_csv(path, index=False)
    return path


def _argv(data, tmp, *extra):
    return ["audit", "slices", str(data), "--label", "y", "--score", "p", "--attribute", "a1", "--attribute", "a2",
            "--attribute", "a3", *extra, "--json", str(tmp / "out.json"), "--quiet"]


def test_the_contract_as_written(data, tmp_path, capsys):
    code = main(["audit", "slices", str(data), "--label", "y", "--score", "p", "--task", "t", "--attribute", "a1",
                 "--attribute", "a2", "--attribute", "a3", "--continuous-attribute", "age", "--bins", "3",
                 "--threshold", "best_f1", "--metric", "recall", "--max-order", "3", "--min-size", "50",
                 "--carry", "20", "--discovery-fraction", "0.5", "--patient-id", "pid", "--seed", "3",
                 "--json", str(tmp_path / "out.json"), "--pdf", str(tmp_path / "out.pdf"),
                 "--project", str(tmp_path / "p.fairdesk"), "--quiet"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "slices searched" in out and "stored as audit" in out
    doc = json.loads((tmp_path / "out.json").read_text())
    assert (tmp_path / "out.pdf").read_bytes()[:5] == b"%PDF-"
    assert isinstance(doc["searched"], int) and doc["searched"] > 0
    assert {"fraction", "seed", "discovery_rows", "confirmation_rows"} <= set(doc["split"])
    assert doc["split"]["fraction"] == 0.5 and doc["split"]["seed"] == 3 and doc["split"]["unit"] == "patient"
    assert 0 < len(doc["slices"]) <= 20
    for r in doc["slices"]:
        assert isinstance(r["definition"], dict) and all(isinstance(v, str) for v in r["definition"].values())
        assert r["metric"] == "recall" and r["verdict"] in ("differs", "equivalent", "inconclusive")
        for key in ("n", "value", "rest_value", "gap", "ci_low", "ci_high", "p_value", "q_value"):
            assert key in r
    assert any(r["verdict"] == "differs" and r["definition"] == {"a1": "v0", "a2": "v0"} for r in doc["slices"])


@pytest.mark.parametrize("extra, words", [
    ((), "--threshold"),
    (("--threshold", "0.5", "--discovery-fraction", "1.5"), "--discovery-fraction"),
    (("--threshold", "0.5", "--max-order", "9"), "--max-order"),
    (("--threshold", "0.5", "--carry", "0"), "--carry"),
    (("--threshold", "0.5", "--min-size", "-3"), "--min-size"),
    (("--threshold", "2"), "--threshold"),
    (("--threshold", "0.5", "--bins", "4"), "--continuous-attribute"),
    (("--threshold", "0.5", "--patient-id", "nope"), "'nope'"),
])
def test_bad_input_is_one_sentence_exit_2_and_writes_nothing(data, tmp_path, capsys, extra, words):
    code = main(_argv(data, tmp_path, *extra))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and words in err[0] and "Traceback" not in err[0], err
    assert not (tmp_path / "out.json").exists()


def test_output_guard_refuses_overwriting_the_data(data, tmp_path, capsys):
    code = main(["audit", "slices", str(data), "--label", "y", "--score", "p", "--attribute", "a1", "--threshold",
                 "0.5", "--json", str(data), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--json" in err[0]
