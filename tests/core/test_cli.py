"""The command-line contract of issue 2: JSON records, exit codes, one-line messages."""
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from fairdesk.cli import main

REQUIRED = {"task", "attribute", "group", "metric", "n", "rate", "reason", "gap", "ci_low", "ci_high", "p_value",
            "q_value", "significant", "favours"}


@pytest.fixture
def predictions(tmp_path):
    rng = np.random.default_rng(0)
    frames = []
    for task in ("mort", "sepsis"):
        n = 1200
        sex = rng.choice(["F", "M"], n)
        y = rng.binomial(1, 0.3, n)
        # sepsis: recall lower for F (scores of F positives pulled down)
        s = np.clip(0.25 + 0.45 * y - (0.25 * y * (sex == "F") if task == "sepsis" else 0) + rng.normal(0, 0.15, n), 0, 1)
        frames.append(pd.DataFrame({"pid": np.arange(n), "task": task, "y": y, "p": s, "sex": sex,
                                    "lang": rng.choice(["English", "Other"], n, p=[0.8, 0.2]),
                                    "age": rng.uniform(18, 90, n)}))
    path = tmp_path / "preds.csv"
    pd.concat(frames).to_csv(path, index=False)
    return path


def test_audit_groups_json_contract(predictions, tmp_path, capsys):
    out = tmp_path / "out.json"
    code = main(["audit", "groups", "--threshold", "0.5", str(predictions), "--label", "y", "--score", "p", "--task", "task",
                 "--attribute", "sex", "--attribute", "lang", "--continuous-attribute", "age", "--bins", "2",
                 "--bins", "4", "--patient-id", "pid", "--n-boot", "200", "--seed", "7", "--json", str(out), "--quiet"])
    assert code == 0
    doc = json.loads(out.read_text())
    records = doc["records"]
    assert records and all(REQUIRED <= set(r) for r in records)
    gaps = [r for r in records if r["metric"] != "delta_eo"]
    assert {r["metric"] for r in gaps} == {"parity", "recall", "specificity"}
    deltas = [r for r in records if r["metric"] == "delta_eo"]
    assert len(deltas) == 2 * 2  # two tasks × two requested N
    assert {r["bins"] for r in deltas} == {2, 4}
    # Δ_eo's interval is its permutation null band [0, 95% quantile of the null], not an interval around Δ
    assert all(r["ci_low"] == 0 <= r["ci_high"] for r in deltas)
    sepsis_f = next(r for r in gaps if (r["task"], r["group"], r["metric"]) == ("sepsis", "F", "recall"))
    assert sepsis_f["gap"] < -0.1 and sepsis_f["significant"] and sepsis_f["favours"] == "M"
    assert doc["provenance"]["seed"] == 7 and len(doc["provenance"]["data_sha256"]) == 64
    assert "numpy" in doc["provenance"]["versions"]
    # same seed, same numbers
    out2 = tmp_path / "again.json"
    main(["audit", "groups", "--threshold", "0.5", str(predictions), "--label", "y", "--score", "p", "--task", "task", "--attribute", "sex",
          "--attribute", "lang", "--continuous-attribute", "age", "--bins", "2", "--bins", "4", "--patient-id", "pid",
          "--n-boot", "200", "--seed", "7", "--json", str(out2), "--quiet"])
    again = json.loads(out2.read_text())["records"]
    assert [(r["gap"], r["ci_low"], r["p_value"]) for r in again] == [(r["gap"], r["ci_low"], r["p_value"]) for r in records]


@pytest.mark.parametrize("args, message", [
    (["--label", "nope"], "'nope'"),
    (["--label", "y", "--threshold", "abc"], "Threshold"),
    (["--label", "y", "--gap-rule", "max", "--n-boot", "10"], "from 100"),
])
def test_bad_input_exit_code_and_one_line(predictions, tmp_path, capsys, args, message):
    base = ["audit", "groups", "--threshold", "0.5", str(predictions), "--score", "p", "--task", "task", "--attribute", "sex",
            "--json", str(tmp_path / "o.json"), "--quiet"]
    code = main(base + args)
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and message in err and err.startswith("fairdesk-cli: error:")
    assert not (tmp_path / "o.json").exists()


def test_scores_outside_unit_interval(tmp_path, capsys):
    path = tmp_path / "logits.csv"
    pd.DataFrame({"y": [0, 1] * 50, "p": np.linspace(-3, 3, 100), "sex": ["F", "M"] * 50}).to_csv(path, index=False)
    code = main(["audit", "groups", "--threshold", "0.5", str(path), "--label", "y", "--score", "p", "--attribute", "sex",
                 "--json", str(tmp_path / "o.json"), "--quiet"])
    assert code == 2 and "sigmoid" in capsys.readouterr().err


def test_entry_point_runs_as_a_process(predictions, tmp_path):
    out = tmp_path / "o.json"
    proc = subprocess.run([sys.executable, "-m", "fairdesk.cli", "validate", str(predictions), "--label", "y",
                           "--score", "p", "--task", "task", "--attribute", "sex"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "No problems found" in proc.stdout or "WARNING" in proc.stdout
    assert not out.exists()


def test_bench_cit_synthetic_bad_input(tmp_path, capsys):
    code = main(["bench", "cit-synthetic", "--dataset", "linear", "--classifiers", "-1", "--json",
                 str(tmp_path / "b.json"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("fairdesk-cli: error:") and len(err.splitlines()) == 1
    assert not (tmp_path / "b.json").exists()


def test_split_list_takes_repeated_comma_separated_values_and_a_single_string():
    from fairdesk.cli.args import split_list

    assert split_list(["a,b", " c ", ""]) == ["a", "b", "c"] and split_list(None) == []
    assert split_list("male,female") == ["male", "female"]  # not ['m', 'a', 'l', 'e', ...]


def test_cli_and_gui_start_each_other_as_programs(tmp_path, monkeypatch, capsys):
    """``demo --gui`` starts the desktop app and ``fairdesk --headless`` starts ``fairdesk-cli demo`` as programs
    (the two never import each other: tests/test_layers.py)."""
    from fairdesk import paths
    from fairdesk.gui import app
    from fairdesk.jobs import demo as tasks

    assert paths.program_command("fairdesk-cli") == [sys.executable, "-m", "fairdesk.cli"]
    assert paths.program_command("fairdesk") == [sys.executable, "-m", "fairdesk.gui.app"]
    calls = []
    monkeypatch.setattr(paths, "run_program", lambda name, args: calls.append((name, args)) or 7)
    monkeypatch.setattr(tasks, "run_demo", lambda out, **kw: {k: tmp_path / k for k in ("pdf", "cit_pdf", "json",
                                                                                         "project")})
    assert main(["demo", "--out", str(tmp_path), "--gui", "--quiet"]) == 7
    assert app.main(["--headless", "--out", str(tmp_path / "h")]) == 7
    assert calls == [("fairdesk", [str(tmp_path / "project")]),
                     ("fairdesk-cli", ["demo", "--out", str(tmp_path / "h")])]
    assert "demo report:" in capsys.readouterr().out


def test_run_program_runs_the_cli_and_returns_its_exit_code():
    from fairdesk.paths import run_program

    assert run_program("fairdesk-cli", ["--help"]) == 0
    assert run_program("fairdesk-cli", ["no-such-command"]) == 2


def test_audit_groups_prints_its_data_warnings_on_stderr_once(predictions, tmp_path, capsys):
    """Issue 24 item 6: the warnings the JSON and the PDF carry reach the terminal too, each once."""
    df = pd.read_csv(predictions)
    df.loc[df.index[:40], "sex"] = np.nan  # missing attribute values
    data = tmp_path / "with_missing.csv"
    df.to_csv(data, index=False)
    out = tmp_path / "out.json"
    code = main(["audit", "groups", str(data), "--label", "y", "--score", "p", "--task", "task", "--attribute", "sex",
                 "--threshold", "0.5", "--n-boot", "200", "--json", str(out), "--quiet"])
    assert code == 0
    err = capsys.readouterr().err
    stored = json.loads(out.read_text())["warnings"]
    assert stored
    lines = [line for line in err.splitlines() if line.startswith("fairdesk-cli: warning: ")]
    assert len(lines) == len(set(stored)) == len(set(lines))
    assert any("sex" in line for line in lines)
