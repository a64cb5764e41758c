"""The one output guard (issue 20, item 1): no command, job or core writer changes a byte it was not asked to write.

* the three reported losses, reproduced: a training command's output folder holding the user's files (generator
  save emptied it; a text classifier's run deleted its ``checkpoints/``), and a project named without ``.fairdesk``
  overwritten by a JSON, a PDF report or a model card;
* the property: for **every** command of the parser, Hypothesis draws relations between its outputs and its inputs
  (the same file through another spelling — relative, ``..``, symlink, hard link, ``~``, trailing slash, the project
  without its suffix —, an input's folder, a place inside a model folder or under a file, an existing folder of the
  user's, two outputs alike, or a fresh nested path) and checks that no pre-existing byte changes, no new file or
  folder is left behind, and every conflict is refused by the guard (exit 2, one line) before any input is read.
"""
from __future__ import annotations

import contextlib
import errno
import io
import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairdesk.cli import build_parser, main
from fairdesk.core import guard
from fairdesk.core.errors import DataError
from fairdesk.core.guard import MARKER, guard_outputs, owned_folder
from fairdesk.core.project import Project

BAD_TABLE = "more than one column named"  # what every table-reading command says about the fixture's table


def _run(argv) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main([str(a) for a in argv])
    return code, err.getvalue()


def _snapshot(root: Path) -> dict[str, bytes | None]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            p = Path(dirpath) / d
            out[str(p.relative_to(root))] = None if not p.is_symlink() else b"->" + os.fsencode(os.readlink(p))
        for f in filenames:
            p = Path(dirpath) / f
            out[str(p.relative_to(root))] = (b"->" + os.fsencode(os.readlink(p))) if p.is_symlink() else p.read_bytes()
    return out


# ----------------------------------------------------------------------------------------------------------------
# The reported cases

def test_generator_save_never_empties_a_users_folder(tmp_path):
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    from fairdesk.core.generation import images as gi
    from fairdesk.core.synthetic import morpho

    data = morpho.make_morpho(8, seed=0)
    res = gi.train_generator(data.images, data.a, gi.GeneratorConfig(image_size=32, vae_channels=(8, 8),
                                                                     unet_channels=(8, 8), norm_groups=4),
                             gi.TrainSchedule(vae_steps=1, unet_steps=1, batch_size=4, checkpoint_every=0))
    user = tmp_path / "my-work"
    user.mkdir()
    (user / "thesis.docx").write_bytes(b"years of work")
    before = _snapshot(tmp_path)
    with pytest.raises(DataError, match="already holds files FairDesk did not write"):
        res.generator.save(user)
    assert _snapshot(tmp_path) == before
    # its own folder is replaced as before (the marker travels with it), a new one made
    folder = res.generator.save(tmp_path / "gen")
    assert (folder / MARKER).is_file() and (folder / gi.META_FILE).is_file()
    res.generator.save(folder)
    assert gi.load_generator(folder).config.image_size == 32


def test_text_classifier_training_into_a_users_folder_is_refused(tmp_path):
    pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    words = ["fever", "cough", "pain", "rash", "gay", "straight"]
    pd.DataFrame({"text": [" ".join(rng.choice(words, 4)) for _ in range(40)],
                  "label": rng.integers(0, 2, 40)}).to_csv(tmp_path / "t.csv", index=False)
    user = tmp_path / "results"
    (user / "checkpoints").mkdir(parents=True)
    (user / "checkpoints" / "mine.txt").write_text("my own checkpoints")
    (user / "config.json").write_text('{"mine": true}')
    before = _snapshot(tmp_path)
    code, err = _run(["train", "text-classifier", "--data", tmp_path / "t.csv", "--text-col", "text", "--label-col",
                      "label", "--method", "baseline", "--epochs", "1", "--out", user, "--quiet"])
    assert code == 2 and "already holds files FairDesk did not write" in err, err
    assert _snapshot(tmp_path) == before


@pytest.fixture(scope="module")
def stored_project(tmp_path_factory):
    """A project ``p.fairdesk`` holding one group audit (tiny table, 100 bootstrap replicates)."""
    root = tmp_path_factory.mktemp("stored")
    rng = np.random.default_rng(0)
    n = 200
    pd.DataFrame({"y": rng.integers(0, 2, n), "p": rng.random(n), "sex": rng.choice(["F", "M"], n)}).to_csv(
        root / "d.csv", index=False)
    code, err = _run(["audit", "groups", root / "d.csv", "--label", "y", "--score", "p", "--attribute", "sex",
                      "--threshold", "0.5", "--n-boot", "100", "--no-calibration", "--json", root / "a.json", "--project",
                      root / "p.fairdesk", "--quiet"])
    assert code == 0, err
    return root


@pytest.mark.parametrize("argv", [
    ["audit", "groups", "{d}", "--label", "y", "--score", "p", "--attribute", "sex", "--threshold", "0.5", "--n-boot", "100",
     "--no-calibration", "--json", "{p}.fairdesk", "--project", "{p}", "--quiet"],
    ["report", "--project", "{p}", "--audit", "1", "--pdf", "{p}.fairdesk"],
    ["report", "model-card", "--project", "{p}", "--audit", "1", "--out", "{p}.fairdesk"],
    ["report", "model-card", "--project", "{p}.fairdesk", "--audit", "1", "--out", "{d}.json", "--markdown",
     "{p}/../p.fairdesk/"],
])
def test_a_project_named_without_its_suffix_is_never_overwritten(argv, stored_project):
    root = stored_project
    before = _snapshot(root)
    code, err = _run([a.replace("{d}", str(root / "d.csv")).replace("{p}", str(root / "p")) for a in argv])
    assert code == 2 and "FairDesk never overwrites its inputs" in err, err
    assert _snapshot(root) == before


# ----------------------------------------------------------------------------------------------------------------
# The guard's parts

def test_every_spelling_of_one_file_is_the_same_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    data = tmp_path / "d.csv"
    data.write_text("a\n1\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.csv").symlink_to("d.csv")
    (tmp_path / "hard.csv").hardlink_to(data)
    for spelling in ["d.csv", "./sub/../d.csv", "link.csv", "hard.csv", "~/d.csv", "d.csv/", str(data)]:
        with pytest.raises(DataError, match="never overwrites its inputs"):
            guard_outputs([("--json", spelling)], inputs=[("the data", "d.csv")])
    Project(tmp_path / "p.fairdesk")
    for spelling in ["p.fairdesk", "~/p.fairdesk", "sub/../p.fairdesk", "p.fairdesk/"]:
        with pytest.raises(DataError, match="the same file as the project"):
            guard_outputs([("--json", spelling)], project=("the project", "p"))  # Project adds the suffix


def test_case_insensitive_file_systems_compare_without_case(tmp_path, monkeypatch):
    monkeypatch.setattr(guard, "_case_insensitive", lambda path: True)
    with pytest.raises(DataError, match="are the same file"):
        guard_outputs([("--json", tmp_path / "Out.json"), ("--pdf", tmp_path / "out.JSON")])
    monkeypatch.setattr(guard, "_case_insensitive", lambda path: False)
    guard_outputs([("--json", tmp_path / "Out.json"), ("--pdf", tmp_path / "out.JSON")])


def test_folders_and_files_in_the_wrong_place(tmp_path):
    (tmp_path / "f").write_text("x")
    (tmp_path / "d").mkdir()
    with pytest.raises(DataError, match="is a folder; give a file name"):
        guard_outputs([("--json", tmp_path / "d")])
    with pytest.raises(DataError, match="is a file; give a folder"):
        guard_outputs(folders=[("--out", tmp_path / "f")])
    with pytest.raises(DataError, match="is a file, not a folder"):
        guard_outputs([("--json", tmp_path / "f" / "o.json")])
    with pytest.raises(DataError, match="inside the output folder --out"):
        guard_outputs([("--json", tmp_path / "new" / "o.json")], folders=[("--out", tmp_path / "new")])
    with pytest.raises(DataError, match="holds the data"):
        guard_outputs(folders=[("--out", tmp_path)], inputs=[("the data", tmp_path / "f")])
    guard_outputs(folders=[("--out", tmp_path / "d")])  # an empty folder is fine
    (tmp_path / "d" / "x.txt").write_text("user")
    with pytest.raises(DataError, match="such as 'x.txt'"):
        guard_outputs(folders=[("--out", tmp_path / "d")])
    (tmp_path / "d" / MARKER).write_text("{}")  # a marker records no files: x.txt is still not FairDesk's
    with pytest.raises(DataError, match="such as 'x.txt'"):
        guard_outputs(folders=[("--out", tmp_path / "d")])
    (tmp_path / "d" / "x.txt").unlink()
    with owned_folder(tmp_path / "d"):  # FairDesk's own folder: may be written into
        (tmp_path / "d" / "y.txt").write_text("fairdesk")
    guard_outputs(folders=[("--out", tmp_path / "d")])


def test_a_failed_write_leaves_no_new_folders(tmp_path, monkeypatch):
    from fairdesk.core import atomic

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", full)
    with pytest.raises(OSError):
        atomic.write_text(tmp_path / "a" / "b" / "o.json", "{}")
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------------------------------------------
# The property, over every command of the parser

# Input slots: T a table (the bad fixture table, so a command the guard lets through stops at once), M a model
# folder, M2 a second one, P the project, I the images folder. Output slots: (option, "file" | "folder").
SPECS = {
    ("audit", "groups"): (["audit", "groups", "{T}", "--label", "y", "--score", "p", "--attribute", "sex",
                           "--threshold", "0.5", "--n-boot", "100"], [("--json", "file"), ("--pdf", "file")], "--project"),
    ("audit", "slices"): (["audit", "slices", "{T}", "--label", "y", "--score", "p", "--attribute", "sex",
                           "--threshold", "0.5", "--n-boot", "100"], [("--json", "file"), ("--pdf", "file")], "--project"),
    ("monitor",): (["monitor", "{T}", "--label", "y", "--score", "p", "--attribute", "sex", "--threshold", "0.5",
                    "--period", "month"], [("--json", "file"), ("--pdf", "file"), ("--html", "file")], "--project"),
    ("validate",): (["validate", "{T}", "--label", "y", "--score", "p", "--attribute", "sex"], [], None),
    ("report",): (["report", "--project", "{P}", "--audit", "1"], [("--pdf", "file")], None),
    ("report", "compare"): (["report", "compare", "--project", "{P}", "--audit", "1", "--audit", "2"],
                            [("--pdf", "file")], None),
    ("report", "model-card"): (["report", "model-card", "--project", "{P}", "--audit", "1",
                                "--intended-use-file", "{T}"], [("--out", "file"), ("--markdown", "file")], None),
    ("train", "tabular"): (["train", "tabular", "{T}"], [("--out", "file")], None),
    ("train", "notes"): (["train", "notes", "--model", "{M}", "--notes", "{T}", "--tasks", "y"],
                         [("--out", "file"), ("--json", "file")], "--project"),
    ("train", "mlm"): (["train", "mlm", "--corpus", "{T}", "--steps", "1", "--init-model", "{M}"],
                       [("--out", "folder")], None),
    ("train", "generator"): (["train", "generator", "--data", "{T}", "--images", "{I}", "--attribute", "sex"],
                             [("--out", "folder"), ("--previews", "folder")], None),
    ("audit", "encoders"): (["audit", "encoders", "--baseline", "{M}", "--debiased", "{M2}", "--notes", "{T}",
                             "--tasks", "y", "--attribute", "sex"], [("--json", "file"), ("--pdf", "file")],
                            "--project"),
    ("audit", "mlm-bias"): (["audit", "mlm-bias", "--model", "{M}", "--compare", "{M2}", "--templates", "{T}"],
                            [("--json", "file"), ("--pdf", "file")], "--project"),
    ("audit", "cit"): (["audit", "cit", "--data", "{T}", "--images", "{I}", "--attribute", "sex", "--classifier",
                        "{M}", "--generator", "{M2}"], [("--json", "file"), ("--pdf", "file")], "--project"),
    ("audit", "cit-predictions"): (["audit", "cit-predictions", "--predictions", "{T}", "--attribute", "sex"],
                                   [("--json", "file"), ("--pdf", "file")], "--project"),
    ("bench", "cit-synthetic"): (["bench", "cit-synthetic", "--dataset", "linear", "--classifiers", "2"],
                                 [("--json", "file"), ("--png", "file")], None),
    ("bench", "validity"): (["bench", "validity", "--family", "cit", "--runs", "1", "--n", "200"],
                            [("--json", "file")], None),
    ("demo",): (["demo", "--n-boot", "100"], [("--out", "folder")], None),
    ("data", "age-demo"): (["data", "age-demo", "--participants", "10", "--features", "3"], [("--out", "file")],
                           None),
    ("train", "age-independent"): (["train", "age-independent", "--data", "{T}", "--label", "y", "--attribute",
                                    "age", "--group-id", "pid"],
                                   [("--json", "file"), ("--predictions", "file"), ("--pdf", "file")], "--project"),
    ("data", "madlibs"): (["data", "madlibs"], [("--out", "file")], None),
    ("data", "ctf-demo"): (["data", "ctf-demo", "--n", "20"], [("--out", "file")], None),
    ("counterfactuals",): (["counterfactuals", "--data", "{T}", "--text-col", "sex"], [("--out", "file")], None),
    ("train", "text-classifier"): (["train", "text-classifier", "--data", "{T}", "--text-col", "sex",
                                    "--label-col", "y", "--method", "baseline", "--epochs", "1"],
                                   [("--out", "folder")], "--project"),
    ("audit", "ctf"): (["audit", "ctf", "--model", "{M}", "--data", "{T}", "--text-col", "sex", "--n-boot", "100"],
                       [("--json", "file"), ("--pdf", "file")], "--project"),
    ("audit", "ctf-pairs"): (["audit", "ctf-pairs", "--data", "{T}", "--text-col", "sex"], [("--out", "file")],
                             "--project"),
    ("audit", "ctf-scores"): (["audit", "ctf-scores", "--scores", "{T}", "--n-boot", "100"],
                              [("--json", "file"), ("--pdf", "file")], "--project"),
}


def _leaf_commands(parser, prefix=()):
    import argparse

    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        forms = [a for a in parser._actions if not a.option_strings and a.nargs == "?" and a.choices]
        return [prefix] + [prefix + (c,) for a in forms for c in a.choices]
    return [c for name, sub in subs[0].choices.items() for c in _leaf_commands(sub, prefix + (name,))]


def test_every_command_has_a_spec():
    assert set(SPECS) == set(_leaf_commands(build_parser()))


def _fixture(root: Path) -> dict[str, Path]:
    """The inputs every command can be given: a table the loaders refuse (duplicate header), model folders holding a
    user's file, an empty FairDesk project, an images folder, and an existing folder of the user's."""
    (root / "in").mkdir()
    (root / "in" / "data.csv").write_bytes("\ufeffsex,y,p,sex\nF,1,0.5,M\n".encode("utf-8"))
    for m in ("model", "model2"):
        (root / m).mkdir()
        (root / m / "config.json").write_text('{"user": "weights"}')
    (root / "images").mkdir()
    (root / "images" / "x.png").write_bytes(b"\x89PNG not really")
    (root / "user").mkdir()
    (root / "user" / "notes.txt").write_text("the user's own notes")
    (root / "outs").mkdir()
    Project(root / "proj.fairdesk")
    return {"T": root / "in" / "data.csv", "M": root / "model", "M2": root / "model2", "P": root / "proj.fairdesk",
            "I": root / "images"}


SPELLINGS = ["plain", "relative", "dotdot", "symlink", "hardlink", "tilde", "slash", "nosuffix"]


def _spell(path: Path, how: str, root: Path, n: int) -> str | None:
    """``path`` spelled another way (None: the spelling does not apply to it)."""
    if how == "plain":
        return str(path)
    if how == "relative":
        return os.path.relpath(path, root)
    if how == "dotdot":
        return str(path.parent / ".." / path.parent.name / path.name)
    if how == "symlink":
        link = root / f"link{n}"
        link.symlink_to(path)
        return str(link)
    if how == "hardlink":
        if not path.is_file():
            return None
        link = root / f"hard{n}{path.suffix}"
        link.hardlink_to(path)
        return str(link)
    if how == "tilde":
        return "~/" + os.path.relpath(path, root)
    if how == "slash":
        return str(path) + "/"
    if how == "nosuffix":  # applies to the project only (see _argv)
        return None
    raise AssertionError(how)


@st.composite
def relations(draw, command):
    argv, outputs, project_opt = SPECS[command]
    inputs = sorted({a[1:-1] for a in argv if a.startswith("{")} | ({"P"} if project_opt else set()))
    kinds = ["fresh"] if outputs else []
    if outputs and inputs:
        kinds += ["same", "parent", "under_file"]
    if outputs and ({"M", "M2"} & set(inputs)):
        kinds.append("in_model")
    if outputs:
        kinds.append("user_folder")
    if len(outputs) > 1:
        kinds.append("two_alike")
    if not kinds:
        return None
    slot = draw(st.integers(0, max(len(outputs) - 1, 0)))
    kind = draw(st.sampled_from(kinds))
    target = draw(st.sampled_from(inputs)) if inputs else None
    spelling = draw(st.sampled_from(SPELLINGS))
    other = draw(st.integers(0, max(len(outputs) - 1, 0)))
    with_project = bool(project_opt) and draw(st.booleans())
    return {"slot": slot, "kind": kind, "target": target, "spelling": spelling, "other": other,
            "with_project": with_project or target == "P"}


def _argv(command, rel, root: Path, paths: dict[str, Path]) -> tuple[list[str], bool]:
    """The command line for relation ``rel``, and whether the guard must refuse it."""
    argv, outputs, project_opt = SPECS[command]
    nosuffix = rel["kind"] == "same" and rel["target"] == "P" and rel["spelling"] == "nosuffix"
    # the project named without '.fairdesk' (FairDesk adds it), the output named with it
    given = dict(paths, P=paths["P"].with_suffix("") if nosuffix else paths["P"])
    line = [given[a[1:-1]] if a.startswith("{") else a for a in argv]
    if project_opt and rel["with_project"]:
        line += [project_opt, given["P"]]
    conflict = rel["kind"] != "fresh"
    values = {}
    for i, (option, kind) in enumerate(outputs):
        values[i] = root / "outs" / (f"o{i}" if kind == "folder" else f"o{i}.out")
    i = rel["slot"]
    option, out_kind = outputs[i]
    kind = rel["kind"]
    if kind == "fresh":
        values[i] = root / "new" / "deeper" / ("o" if out_kind == "folder" else "o.json")
    elif kind == "same":
        spelled = str(paths["P"]) if nosuffix else (_spell(paths[rel["target"]], rel["spelling"], root, i)
                                                     or str(paths[rel["target"]]))
        values[i] = spelled
    elif kind == "parent":
        values[i] = paths[rel["target"]].parent
    elif kind == "under_file":
        target = paths[rel["target"]]
        values[i] = (target if target.is_file() else sorted(p for p in target.iterdir() if p.is_file())[0]) / "x"
    elif kind == "in_model":
        values[i] = paths["M" if "{M}" in argv else "M2"] / ("sub" if out_kind == "folder" else "config.json")
    elif kind == "user_folder":
        values[i] = root / "user"
    elif kind == "two_alike":
        j = rel["other"] if rel["other"] != i else (i + 1) % len(outputs)
        values[i] = _spell(Path(values[j]), rel["spelling"], root, 100 + i) or values[j]
    for k, (opt, _) in enumerate(outputs):
        line += [opt, values[k]]
    if command not in {("validate",), ("report",), ("report", "model-card"), ("report", "compare"), ("data", "madlibs"),
                       ("data", "ctf-demo"), ("data", "age-demo")}:  # the commands without --quiet
        line.append("--quiet")
    return [str(a) for a in line], conflict


@pytest.mark.parametrize("command", sorted(SPECS, key=str))
def test_no_command_changes_a_byte_it_was_not_asked_to_write(command):
    no_input = not any(a.startswith("{") for a in SPECS[command][0]) and not SPECS[command][2]

    # a fifth of the profile's examples per command: 8 in "ci", 100 in the longer "dev" run (HYPOTHESIS_PROFILE=dev)
    @settings(max_examples=max(1, settings().max_examples // 5), deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(relations(command))
    def check(rel):
        if rel is None or (no_input and rel["kind"] == "fresh"):
            return  # a command without inputs given fresh outputs would just run (its own tests cover that)
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp).resolve()
            paths = _fixture(root)
            cwd, home = os.getcwd(), os.environ.get("HOME")
            os.chdir(root)
            os.environ["HOME"] = str(root)
            try:
                argv, conflict = _argv(command, rel, root, paths)
                before = _snapshot(root)
                code, err = _run(argv)
                after = _snapshot(root)
            finally:
                os.chdir(cwd)
                if home is None:
                    os.environ.pop("HOME", None)
                else:
                    os.environ["HOME"] = home
        assert "Traceback" not in err, err
        assert code == 2, (argv, code, err)
        assert len(err.strip().splitlines()) == 1, err
        assert after == before, (argv, err, set(after) ^ set(before))  # no byte changed, nothing left behind
        if conflict:  # refused by the guard, before any input was read
            assert BAD_TABLE not in err, (argv, err)

    check()
