"""Every ``fairdesk-cli`` command, given a bad input of each kind, ends in one plain sentence and exit code 2 —
never a traceback (issue 10).

The commands are listed from the parser itself (``fairdesk-cli --help`` recursively): a new command fails
:func:`test_every_command_is_covered` until it gets its cases here. Runs in-process (``fairdesk.cli.main``) except
the file-size-limit case, which needs a subprocess with ``RLIMIT_FSIZE``.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fairdesk.cli import build_parser, main

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(64)


def _leaf_commands(parser: argparse.ArgumentParser, prefix=()) -> list[tuple[str, ...]]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        # an optional positional with choices names further forms of a leaf command ('report model-card')
        forms = [a for a in parser._actions if not a.option_strings and a.nargs == "?" and a.choices]
        return [prefix] + [prefix + (choice,) for a in forms for choice in a.choices]
    out = []
    for name, sub in subs[0].choices.items():
        out += _leaf_commands(sub, prefix + (name,))
    return out


# command -> (argv builder f(data, out, model) -> list[str], which input the "table" cases feed, outputs kind)
# data: the path of the command's main input; out: its output path; model: a model folder.
COMMANDS = {
    ("audit", "groups"): lambda d, o, m: ["audit", "groups", "--threshold", "0.5", d, "--label", "y", "--score", "p", "--attribute", "sex",
                                          "--n-boot", "100", "--json", o, "--quiet"],
    ("audit", "slices"): lambda d, o, m: ["audit", "slices", "--threshold", "0.5", d, "--label", "y", "--score", "p",
                                          "--attribute", "sex", "--n-boot", "100", "--json", o, "--quiet"],
    ("monitor",): lambda d, o, m: ["monitor", d, "--label", "y", "--score", "p", "--attribute", "sex", "--threshold",
                                   "0.5", "--period", "month", "--json", o, "--quiet"],
    ("validate",): lambda d, o, m: ["validate", d, "--label", "y", "--score", "p", "--attribute", "sex"],
    ("report",): lambda d, o, m: ["report", "--project", d, "--audit", "1", "--pdf", o],
    ("report", "model-card"): lambda d, o, m: ["report", "model-card", "--project", d, "--audit", "1", "--out", o],
    ("report", "compare"): lambda d, o, m: ["report", "compare", "--project", d, "--audit", "1", "--audit", "2",
                                            "--pdf", o],
    ("train", "tabular"): lambda d, o, m: ["train", "tabular", d, "--out", o, "--quiet"],
    ("train", "notes"): lambda d, o, m: ["train", "notes", "--model", m, "--notes", d, "--tasks", "y", "--out", o,
                                         "--quiet"],
    ("train", "mlm"): lambda d, o, m: ["train", "mlm", "--corpus", d, "--out", o, "--steps", "1", "--quiet"],
    ("train", "generator"): lambda d, o, m: ["train", "generator", "--data", d, "--images", str(Path(d).parent),
                                             "--attribute", "sex", "--out", o, "--quiet"],
    ("audit", "encoders"): lambda d, o, m: ["audit", "encoders", "--baseline", m, "--notes", d, "--tasks", "y",
                                            "--attribute", "sex", "--json", o, "--quiet"],
    ("audit", "mlm-bias"): lambda d, o, m: ["audit", "mlm-bias", "--model", d, "--json", o, "--quiet"],
    ("audit", "cit"): lambda d, o, m: ["audit", "cit", "--data", d, "--images", str(Path(d).parent), "--attribute",
                                       "sex", "--classifier", m, "--generator", m, "--json", o, "--quiet"],
    ("audit", "cit-predictions"): lambda d, o, m: ["audit", "cit-predictions", "--predictions", d, "--attribute",
                                                   "sex", "--json", o, "--quiet"],
    ("bench", "cit-synthetic"): lambda d, o, m: ["bench", "cit-synthetic", "--dataset", "linear", "--classifiers",
                                                 "2", "--json", o, "--quiet"],
    ("bench", "validity"): lambda d, o, m: ["bench", "validity", "--family", "cit", "--runs", "1", "--n", "200",
                                            "--json", o, "--quiet"],
    ("demo",): lambda d, o, m: ["demo", "--out", o, "--n-boot", "100", "--quiet"],
    ("data", "age-demo"): lambda d, o, m: ["data", "age-demo", "--out", o, "--participants", "10", "--features", "3"],
    ("train", "age-independent"): lambda d, o, m: ["train", "age-independent", "--data", d, "--label", "y",
                                                   "--attribute", "age", "--group-id", "pid", "--json", o,
                                                   "--quiet"],
    # counterfactual token fairness (issue 12, cli/ctf.py)
    ("data", "madlibs"): lambda d, o, m: ["data", "madlibs", "--out", o],
    ("data", "ctf-demo"): lambda d, o, m: ["data", "ctf-demo", "--out", o, "--n", "20"],
    ("counterfactuals",): lambda d, o, m: ["counterfactuals", "--data", d, "--text-col", "sex", "--out", o, "--quiet"],
    ("train", "text-classifier"): lambda d, o, m: ["train", "text-classifier", "--data", d, "--text-col", "sex",
                                                   "--label-col", "y", "--method", "baseline", "--epochs", "1",
                                                   "--out", o, "--quiet"],
    ("audit", "ctf"): lambda d, o, m: ["audit", "ctf", "--model", m, "--data", d, "--text-col", "sex", "--n-boot",
                                       "100", "--json", o, "--quiet"],
    ("audit", "ctf-pairs"): lambda d, o, m: ["audit", "ctf-pairs", "--data", d, "--text-col", "sex", "--out", o,
                                             "--quiet"],
    ("audit", "ctf-scores"): lambda d, o, m: ["audit", "ctf-scores", "--scores", d, "--n-boot", "100", "--json", o,
                                              "--quiet"],
}
#: the commands whose main input is a model folder, a project, or nothing (no table cases)
MODEL_INPUT = {("audit", "mlm-bias")}
PROJECT_INPUT = {("report",), ("report", "model-card"), ("report", "compare")}
NO_INPUT = {("bench", "cit-synthetic"), ("bench", "validity"), ("demo",), ("data", "age-demo"), ("data", "madlibs"),
            ("data", "ctf-demo")}
FOLDER_OUTPUT = {("train", "mlm"), ("train", "generator"), ("demo",), ("train", "text-classifier")}


def test_every_command_is_covered():
    assert set(_leaf_commands(build_parser())) == set(COMMANDS)


def _run(argv, capsys) -> tuple[int, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.err


def _one_sentence(code: int, err: str, *words: str) -> None:
    assert "Traceback" not in err, err
    assert code == 2, (code, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("fairdesk-cli: error: "), err
    for w in words:
        assert w in err, (w, err)


@pytest.fixture
def bad(tmp_path):
    """A folder of bad inputs: missing, empty, PNG renamed .csv, BOM + duplicate header; a model folder stand-in."""
    (tmp_path / "empty.csv").write_bytes(b"")
    (tmp_path / "image.csv").write_bytes(PNG)
    (tmp_path / "dup.csv").write_bytes("\ufeffsex,y,p,sex\nF,1,0.5,M\n".encode("utf-8"))
    (tmp_path / "blocker").write_text("a file where a folder should be")
    (tmp_path / "model").mkdir()
    return tmp_path


TABLE_CASES = {
    "missing": ("nope.csv", "does not exist"),
    "empty": ("empty.csv", "is empty"),
    "binary": ("image.csv", "this is a PNG image, not a CSV table"),
    "duplicate": ("dup.csv", "more than one column named 'sex' (columns 1, 4)"),
}


@pytest.mark.parametrize("case", sorted(TABLE_CASES))
@pytest.mark.parametrize("command", sorted(set(COMMANDS) - MODEL_INPUT - PROJECT_INPUT - NO_INPUT))
def test_bad_table(command, case, bad, capsys):
    name, words = TABLE_CASES[case]
    out = bad / ("out-folder" if command in FOLDER_OUTPUT else "out.json")
    code, err = _run(COMMANDS[command](str(bad / name), str(out), str(bad / "model")), capsys)
    _one_sentence(code, err, words)
    assert not out.exists()


@pytest.mark.parametrize("command", sorted(PROJECT_INPUT))
@pytest.mark.parametrize("case", ["missing", "empty", "binary"])
def test_bad_project_for_report(case, command, bad, capsys):
    path = {"missing": bad / "nope.fairdesk", "empty": bad / "empty.csv", "binary": bad / "image.csv"}[case]
    code, err = _run(COMMANDS[command](str(path), str(bad / "r.pdf"), ""), capsys)
    _one_sentence(code, err)
    assert not (bad / "r.pdf").exists()


@pytest.mark.parametrize("case", ["missing", "empty-folder", "binary", "pickle-weights"])
def test_bad_model_folder_for_mlm_bias(case, bad, capsys):
    model = bad / "mlm"
    if case == "empty-folder":
        model.mkdir()
    elif case == "binary":
        model.write_bytes(PNG)
    elif case == "pickle-weights":
        import pickle

        model.mkdir()
        (model / "config.json").write_text('{"model_type": "bert", "architectures": ["BertForMaskedLM"]}')
        (model / "model.safetensors").write_bytes(pickle.dumps({"weight": [1.0, 2.0]}))
        (model / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhe\nshe\n")
    code, err = _run(COMMANDS[("audit", "mlm-bias")](str(model), str(bad / "o.json"), ""), capsys)
    _one_sentence(code, err, *(["weights", "cannot be loaded"] if case == "pickle-weights" else []))
    assert not (bad / "o.json").exists()


def _inputs_of(command, bad) -> tuple[str, str]:
    """(main input path, model path) for the output cases: files that exist, content irrelevant (outputs are
    checked before anything is read)."""
    table = bad / "dup.csv"
    if command in PROJECT_INPUT:
        return str(bad / "p.fairdesk"), ""
    if command in MODEL_INPUT:
        return str(bad / "model"), ""
    return str(table), str(bad / "model")


@pytest.mark.parametrize("command", sorted(COMMANDS, key=str))
def test_unwritable_output(command, bad, capsys):
    if command == ("validate",):
        pytest.skip("validate writes nothing")
    data, model = _inputs_of(command, bad)
    out = bad / "blocker" / ("folder" if command in FOLDER_OUTPUT else "out.json")
    code, err = _run(COMMANDS[command](data, str(out), model), capsys)
    _one_sentence(code, err, "blocker")


@pytest.mark.parametrize("command", sorted(set(COMMANDS) - NO_INPUT - {("validate",)}, key=str))
def test_output_equal_to_input(command, bad, capsys):
    data, model = _inputs_of(command, bad)
    if command in PROJECT_INPUT:
        Path(data).write_bytes(b"not touched")
    before = Path(data).read_bytes() if Path(data).is_file() else None
    target = data
    if command in MODEL_INPUT:  # an output inside the model folder
        target = str(Path(data) / "config.json")
    # through a relative path and a symlink: the resolved paths are compared
    link = bad / "link-to-input"
    link.symlink_to(target)
    code, err = _run(COMMANDS[command](data, os.path.relpath(link), model), capsys)
    _one_sentence(code, err, "FairDesk never")
    if before is not None:
        assert Path(data).read_bytes() == before


@pytest.mark.parametrize("argv", [
    ["audit", "groups", "--threshold", "0.5", "{d}", "--label", "y", "--score", "p", "--attribute", "sex", "--json", "{o}", "--pdf", "{o}"],
    ["audit", "cit-predictions", "--predictions", "{d}", "--attribute", "sex", "--json", "{o}", "--pdf", "{o}"],
    ["bench", "cit-synthetic", "--json", "{o}", "--png", "{o}"],
    ["train", "age-independent", "--data", "{d}", "--label", "y", "--attribute", "age", "--group-id", "pid",
     "--json", "{o}", "--predictions", "{o}"],
    ["train", "notes", "--model", "{m}", "--notes", "{d}", "--tasks", "y", "--out", "{o}", "--json", "{o}"],
    ["audit", "ctf", "--model", "{m}", "--data", "{d}", "--text-col", "sex", "--json", "{o}", "--pdf", "{o}"],
    ["audit", "ctf-scores", "--scores", "{d}", "--json", "{o}", "--pdf", "{o}"],
    ["report", "model-card", "--project", "{d}", "--audit", "1", "--out", "{o}", "--markdown", "{o}"],
])
def test_two_outputs_with_one_name(argv, bad, capsys):
    fill = {"{d}": str(bad / "dup.csv"), "{o}": str(bad / "same.out"), "{m}": str(bad / "model")}
    code, err = _run([fill.get(a, a) for a in argv], capsys)
    _one_sentence(code, err, "are the same file")
    assert not (bad / "same.out").exists()


def test_file_size_limit_is_one_sentence(tmp_path):
    """A write that hits the file-size limit (``ulimit -f``; a full disk behaves alike) says so; the earlier file
    of that name is intact."""
    import resource

    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    n = 3000
    df = pd.DataFrame({"y_a": rng.integers(0, 2, n), "f_1": rng.normal(size=n), "f_2": rng.normal(size=n),
                       "sex": rng.choice(["F", "M"], n)})
    data = tmp_path / "features.csv"
    df.to_csv(data, index=False)
    out = tmp_path / "preds.csv"
    out.write_text("earlier predictions\n")
    limit = 64 * 1024  # the predictions (~200 kB) do not fit; the input need not be written

    def cap():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in [str(Path(__file__).parents[2]),
                                                                      os.environ.get("PYTHONPATH", "")] if p))
    proc = subprocess.run([sys.executable, "-m", "fairdesk.cli", "train", "tabular", str(data), "--keep", "sex",
                           "--out", str(out), "--quiet"], capture_output=True, text=True, env=env, preexec_fn=cap,
                          timeout=120)
    _one_sentence(proc.returncode, proc.stderr, "file size limit", "preds.csv")
    assert out.read_text() == "earlier predictions\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


@pytest.mark.parametrize("content", [PNG, b"[1, 2]", b'{"config": {"bogus": 1}}'])
def test_damaged_generator_folder_for_audit_cit(content, tmp_path, capsys):
    """A readable image table, then a generator folder whose metadata is an image, a list or foreign settings."""
    import numpy as np
    from PIL import Image

    for i in range(4):
        Image.fromarray(np.full((8, 8), 40 * i, np.uint8)).save(tmp_path / f"i{i}.png")
    (tmp_path / "t.csv").write_text("Path,sex,patient_id\n" + "".join(f"i{i}.png,{'FM'[i % 2]},{i}\n"
                                                                       for i in range(4)))
    gen = tmp_path / "gen"
    gen.mkdir()
    (gen / "fairdesk_generator.json").write_bytes(content)
    code, err = _run(["audit", "cit", "--data", str(tmp_path / "t.csv"), "--images", str(tmp_path), "--attribute",
                      "sex", "--classifier", str(tmp_path / "clf"), "--generator", str(gen), "--json",
                      str(tmp_path / "o.json"), "--quiet"], capsys)
    if content.startswith(b'{"config"'):
        # settings with a key this version does not know: read with one note (a newer version may write it), then
        # refused in one sentence because the folder holds no generator parts
        note, *rest = [line for line in err.splitlines() if line.strip()]
        assert note.startswith("fairdesk-cli: note: Written by a newer FairDesk?") and "bogus" in note, err
        _one_sentence(code, "\n".join(rest), "is not a generator FairDesk wrote")
    else:
        _one_sentence(code, err, "gen/fairdesk_generator.json is damaged or not a FairDesk generator file")
    assert "codec" not in err and not (tmp_path / "o.json").exists()


@pytest.mark.parametrize("case", ["missing", "empty-folder", "binary", "foreign-config", "other-format"])
def test_bad_model_folder_for_audit_ctf(case, tmp_path, capsys):
    """A readable text table, then a model folder that is missing, empty, a file, a Hugging Face folder with broken
    weights, or a config of another format."""
    (tmp_path / "t.csv").write_text("text,label\ni am gay,1\ni am straight,0\n", encoding="utf-8")
    model = tmp_path / "clf"
    if case == "empty-folder":
        model.mkdir()
    elif case == "binary":
        model.write_bytes(PNG)
    elif case in ("foreign-config", "other-format"):
        model.mkdir()
        (model / "config.json").write_text('{"model_type": "bert"}' if case == "foreign-config" else '{"format": "x"}')
        (model / "model.safetensors").write_bytes(b"\x00" * 16)
    code, err = _run(["audit", "ctf", "--model", str(model), "--data", str(tmp_path / "t.csv"), "--text-col", "text",
                      "--json", str(tmp_path / "o.json"), "--quiet"], capsys)
    words = {"foreign-config": ["cannot be loaded as a sequence classifier"],
             "other-format": ["not a FairDesk text CNN"]}.get(case, [])
    _one_sentence(code, err, *words)
    assert not (tmp_path / "o.json").exists()


@pytest.mark.parametrize("argv, words", [
    (["counterfactuals", "--data", "{t}", "--text-col", "nope", "--out", "{o}"], ["no column 'nope'", "text, label"]),
    (["counterfactuals", "--data", "{t}", "--text-col", "text", "--terms", "{missing}", "--out", "{o}"],
     ["Cannot read the term list"]),
    (["train", "text-classifier", "--data", "{t}", "--text-col", "text", "--label-col", "text", "--method", "clp",
      "--out", "{o}"], ["must hold 0 or 1"]),
    (["train", "text-classifier", "--data", "{t}", "--text-col", "text", "--label-col", "label", "--method",
      "baseline", "--validation", "0.95", "--out", "{o}"], ["--validation 0.95", "share of training rows held out"]),
    (["train", "text-classifier", "--data", "{t}", "--text-col", "text", "--label-col", "label", "--method",
      "baseline", "--validation", "0.5", "--out", "{o}"], ["cannot be held out", "smaller share"]),
    (["audit", "ctf-scores", "--scores", "{t}", "--json", "{o}"], ["lacks column(s) id, counterfactual", "score"]),
])
def test_ctf_bad_columns_and_terms(argv, words, tmp_path, capsys):
    (tmp_path / "t.csv").write_text("text,label\ni am gay,1\ni am straight,0\n", encoding="utf-8")
    fill = {"{t}": str(tmp_path / "t.csv"), "{o}": str(tmp_path / "out"), "{missing}": str(tmp_path / "no.txt")}
    code, err = _run([fill.get(a, a) for a in argv] + ["--quiet"], capsys)
    _one_sentence(code, err, *words)
    assert not (tmp_path / "out").exists()
