"""One path (issue 11): every audit kind of the registry, run through ``fairdesk-cli`` and through the job the GUI
calls, stores the same document (same name, kind and JSON text) and prints the same PDF bytes.

For each row of :data:`fairdesk.core.kinds.AUDIT_KINDS`: the CLI runs in-process with ``--project P1 --json J
--pdf A.pdf``; the job (the row's ``job``) runs on a second project P2 with the arguments the CLI's options stand
for, then :func:`fairdesk.jobs.reports.export_report` writes B.pdf. Tiny data and models, one thread.
"""
from __future__ import annotations

import importlib
import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from fairdesk.cli import main
from fairdesk.core import provenance
from fairdesk.core.kinds import AUDIT_KINDS, resolve
from fairdesk.core.project import Project
from fairdesk.jobs.reports import export_report

FIXED_UTC = "2026-01-02T03:04:05+00:00"


@pytest.fixture(autouse=True)
def _fixed_clocks(monkeypatch):
    """The documents record when they were made (``created_utc``) and the encoder comparison how long it took
    (``train_seconds``, ``notes_per_second``, ``elapsed_seconds``, printed in its report): both clocks are fixed, so
    the two runs can be compared byte for byte."""
    monkeypatch.setattr(provenance, "now_utc", lambda: FIXED_UTC)
    for name in ("fairdesk.core.models.note_classifier", "fairdesk.core.audits.encoders"):
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError:
            continue
        if hasattr(module, "time"):
            monkeypatch.setattr(module, "time", SimpleNamespace(perf_counter=lambda: 0.0))


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    from threadpoolctl import threadpool_limits

    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass
    with threadpool_limits(limits=1):
        yield


# --------------------------------------------------------------------------------------------------------------
# One case per audit kind (and per CLI route into it): the CLI's argv, and the same audit through the job.
# Each builder returns (argv without --project/--json/--pdf, job(project_path) -> audit_id).


def _groups(tmp):
    from fairdesk.core.audits.groups import GroupAuditPlan
    from fairdesk.core.data.schema import ColumnRoles
    from fairdesk.core.data.tables import import_table
    from fairdesk.jobs.groups import audit_groups

    rng = np.random.default_rng(0)
    n = 400
    y = rng.binomial(1, 0.3, n)
    sex = rng.choice(["F", "M", "X"], n, p=[0.48, 0.48, 0.04])  # X: a small group, listed not tested
    p = np.clip(0.3 + 0.4 * y - 0.15 * y * (sex == "F") + rng.normal(0, 0.15, n), 0, 1)
    csv = tmp / "preds.csv"
    pd.DataFrame({"pid": np.arange(n) // 2, "y": y, "p": p, "sex": sex}).to_csv(csv, index=False)
    argv = ["audit", "groups", "--threshold", "0.5", str(csv), "--label", "y", "--score", "p", "--attribute", "sex", "--patient-id", "pid",
            "--n-boot", "100", "--seed", "3", "--quiet"]
    roles = ColumnRoles(label="y", score="p", attributes=("sex",), patient_id="pid")
    plan = GroupAuditPlan(roles=roles, threshold="0.5", n_boot=100, seed=3)  # the CLI's defaults otherwise

    def job(project):
        return audit_groups(project, import_table(project, csv, roles=roles), plan)

    return argv, job


def _slices(tmp):
    from fairdesk.core.audits.slices import SliceAuditPlan
    from fairdesk.core.data.schema import ColumnRoles
    from fairdesk.core.synthetic.slice_sim import simulate_slice_table
    from fairdesk.core.data.tables import import_table
    from fairdesk.jobs.slices import audit_slices

    df, _ = simulate_slice_table(1200, 3, order=2, gap=0.35, seed=2, slice_share=0.15, n_patients=1000)
    csv = tmp / "preds.csv"
    df.to_csv(csv, index=False)
    argv = ["audit", "slices", str(csv), "--label", "y", "--score", "p", "--attribute", "a1", "--attribute", "a2",
            "--attribute", "a3", "--patient-id", "pid", "--threshold", "0.5", "--carry", "5", "--seed", "3",
            "--quiet"]
    roles = ColumnRoles(label="y", score="p", attributes=("a1", "a2", "a3"), patient_id="pid")
    plan = SliceAuditPlan(roles=roles, threshold="0.5", carry=5, seed=3)  # the CLI's defaults otherwise

    def job(project):
        return audit_slices(project, import_table(project, csv, roles=roles), plan)

    return argv, job


def _mlm_bias(tmp):
    from tiny_text import build_probe_mlm

    from fairdesk.core.audits.mlm_bias import ProbeOptions
    from fairdesk.jobs.text import audit_mlm_bias

    model = tmp / "mlm"
    build_probe_mlm(model, 0)
    argv = ["audit", "mlm-bias", "--model", str(model), "--categories", "DNR,HIV", "--threads", "1", "--quiet"]

    def job(project):
        return audit_mlm_bias(project, [str(model)], None, ProbeOptions(categories=("DNR", "HIV")), threads=1)

    return argv, job


def _note_classifiers(tmp):
    from tiny_text import labelled_notes, save_tiny_mlm

    from fairdesk.core.models import mlm
    from fairdesk.core.models.note_classifier import NoteClassifierSpec
    from fairdesk.jobs.notes import compare_encoders_job

    notes = labelled_notes(160)
    csv = tmp / "notes.csv"
    notes.to_csv(csv, index=False)
    tok = mlm.vocabulary_tokenizer(mlm.corpus_words(notes["text"]))
    encoder = save_tiny_mlm(tmp / "baseline", tok, 0, layers=2, max_positions=64)
    argv = ["audit", "encoders", "--baseline", encoder, "--notes", str(csv), "--tasks", "sepsis", "--attribute",
            "gender", "--n-boot", "100", "--min-group-size", "10", "--hidden", "16", "--alpha", "1e-3",
            "--max-iter", "60", "--threads", "1", "--quiet"]
    spec = NoteClassifierSpec(tasks=["sepsis"], patient_id="patient_id", attributes=["gender"], max_windows=10,
                              mlp_grid=({"hidden_layer_sizes": (16,), "alpha": 1e-3},), max_iter=60)

    def job(project):
        return compare_encoders_job(project, str(csv), {"baseline": encoder}, ["sepsis"], "gender", spec,
                                    n_boot=100, min_group_size=10)

    return argv, job


def _image_workspace(tmp):
    """A tiny Morpho-like image folder, a one-epoch CNN and a generator of 2 + 2 steps (quality is irrelevant)."""
    from fairdesk.core.synthetic import morpho
    from fairdesk.jobs import images as it

    bench = morpho.make_morpho(80, seed=0, shortcut=0.8)
    csv = morpho.write_folder(bench, tmp / "data")
    build = tmp / "build.fairdesk"
    did = it.import_image_dataset(build, csv, tmp / "data")
    it.train_image_classifier(build, did, ["disease"], tmp / "clf", epochs=1, image_size=32, seed=0, width=8)
    it.train_generator_job(build, did, "attribute", tmp / "gen", vae_steps=2, unet_steps=2, batch_size=8, steps=2,
                           checkpoint_every=0)
    return csv


def _cit_images(tmp):
    from fairdesk.core.data.images import ImageRoles
    from fairdesk.jobs.images import audit_cit, import_image_dataset

    csv = _image_workspace(tmp)
    argv = ["audit", "cit", "--data", str(csv), "--images", str(tmp / "data"), "--classifier", str(tmp / "clf"),
            "--generator", str(tmp / "gen"), "--attribute", "attribute", "--labels", "disease", "--steps", "2",
            "--examples", "2", "--quiet"]
    # the roles the CLI guesses from this table's column names (Path, patient_id), with its --attribute/--labels
    roles = ImageRoles(path="Path", labels=("disease",), attributes=("attribute",), patient_id="patient_id")

    def job(project):
        did = import_image_dataset(project, csv, tmp / "data", roles, name=csv.name)
        return audit_cit(project, did, str(tmp / "clf"), str(tmp / "gen"), "attribute", labels=("disease",), steps=2,
                         n_examples=2)

    return argv, job


def _cit_predictions(tmp):
    from fairdesk.core.synthetic import morpho
    from fairdesk.jobs.images import audit_cit_predictions

    test = morpho.make_morpho(120, seed=1, shortcut=0.8)
    reads = morpho.train_pixel_classifier(test.images, test.y)
    df = pd.DataFrame({"sex": np.where(test.a == 1, "M", "F"), "patient_id": test.patient_id})
    df["reads"], df["reads__cf"] = reads(test.images), reads(test.counterfactual())
    df["reads__label"] = test.y
    for i, column in enumerate(test.exogenous().T):
        df[f"z_{i}"] = column
    csv = tmp / "cf.csv"
    df.to_csv(csv, index=False)
    argv = ["audit", "cit-predictions", "--predictions", str(csv), "--attribute", "sex", "--quiet"]
    return argv, lambda project: audit_cit_predictions(project, csv, "sex")


def _ctf(tmp):
    from fairdesk.core.text.madlibs import clinical_notes_demo
    from fairdesk.jobs.ctf import audit_ctf, train_text_classifier_job

    data = tmp / "notes.csv"
    clinical_notes_demo(80, seed=0).to_csv(data, index=False)
    model = tmp / "model"
    train_text_classifier_job(tmp / "models.fairdesk", data, "text", "label", model, epochs=1, seed=0)
    argv = ["audit", "ctf", "--model", str(model), "--data", str(data), "--text-col", "text", "--label-col", "label",
            "--n-boot", "100", "--threads", "1", "--quiet"]

    def job(project):  # the CLI's defaults otherwise
        return audit_ctf(project, str(model), str(data), "text", label_col="label", n_boot=100, threads=1)

    return argv, job


def _age_independence(tmp):
    from fairdesk.core.models.age_independent import LearnerSettings
    from fairdesk.core.synthetic.age_cohort import make_age_cohort
    from fairdesk.jobs.age import train_age_independent

    csv = tmp / "cohort.csv"
    make_age_cohort(n_participants=20, n_features=6, seed=3).to_csv(csv, index=False)
    argv = ["train", "age-independent", "--data", str(csv), "--label", "label", "--attribute", "age",
            "--group-id", "participant_id", "--methods", "dnn,svm,simple", "--folds", "2", "--seed", "4",
            "--epochs", "2", "--no-reference", "--threads", "1", "--quiet"]

    def job(project):  # the CLI's defaults otherwise
        return train_age_independent(project, str(csv), "label", "age", "participant_id",
                                     methods=("dnn", "svm", "simple"), folds=2, seed=4,
                                     learner=LearnerSettings(epochs=2), reference=False)

    return argv, job


def _monitor(tmp):
    from fairdesk.core.synthetic.monitor_sim import simulate_stream, stream_plan
    from fairdesk.core.data.tables import import_table
    from fairdesk.jobs.monitor import watch_model

    csv = tmp / "stream.csv"
    simulate_stream(4, months=4, per_month=300).to_csv(csv, index=False)
    argv = ["monitor", str(csv), "--label", "y", "--score", "p", "--attribute", "eth", "--threshold", "0.3",
            "--period", "month", "--patient-id", "pid", "--quiet"]

    def job(project):
        return watch_model(project, import_table(project, csv), stream_plan())

    return argv, job


JOBS = {"cit_images (predictions table)": "fairdesk.jobs.images:audit_cit_predictions"}
CASES = {
    "groups": _groups,
    "slices": _slices,
    "mlm_bias": _mlm_bias,
    "note_classifiers": _note_classifiers,
    "cit_images": _cit_images,
    "cit_images (predictions table)": _cit_predictions,
    "ctf": _ctf,
    "age_independence": _age_independence,
    "monitor": _monitor,
}


def test_every_audit_kind_has_a_case():
    """A new row in the registry needs its case here: its CLI command and its job must store the same document."""
    covered = {name.split(" ")[0] for name in CASES}
    missing = sorted(set(AUDIT_KINDS) - covered)
    assert not missing, f"add a case to tests/test_one_path.py for: {missing}"


@pytest.mark.parametrize("case", list(CASES))
def test_cli_and_job_store_the_same_document_and_print_the_same_pdf(case, tmp_path, capsys, monkeypatch):
    kind = case.split(" ")[0]
    if kind not in AUDIT_KINDS:
        pytest.skip(f"'{kind}' is not in this version's registry")
    if kind not in ("groups", "slices", "monitor"):
        pytest.importorskip("torch")
    argv, job = CASES[case](tmp_path)
    p1, p2 = tmp_path / "cli.fairdesk", tmp_path / "job.fairdesk"
    j, a, b = tmp_path / "cli.json", tmp_path / "cli.pdf", tmp_path / "job.pdf"
    # the CLI must call the registry's job (the predictions-table route: its own job, storing the same kind)
    ref = JOBS.get(case, AUDIT_KINDS[kind].job)
    module, _, attr = ref.partition(":")
    calls = []
    real = resolve(ref)
    with monkeypatch.context() as patch:
        patch.setattr(importlib.import_module(module), attr, lambda *a, **k: calls.append(1) or real(*a, **k))
        code = main(argv + ["--project", str(p1), "--json", str(j), "--pdf", str(a)])
    assert code == 0, capsys.readouterr().err
    assert "stored as audit" in capsys.readouterr().out
    assert calls == [1], f"fairdesk-cli did not call {ref}"
    audit_id = job(p2)
    cli, direct = Project(p1, create=False), Project(p2, create=False)
    [cli_audit] = [x for x in cli.audits() if x.kind == kind]
    job_audit = next(x for x in direct.audits() if x.id == audit_id)
    assert (cli_audit.name, cli_audit.kind) == (job_audit.name, job_audit.kind)
    assert cli.audit_json(cli_audit.id) == direct.audit_json(audit_id)  # the same document, character for character
    written = json.loads(j.read_text())
    assert written.pop("disclosure")["for_release"] is False  # the working document says it is not for release
    assert written == json.loads(direct.audit_json(audit_id))  # --json is the stored document
    assert "(CLI)" not in cli_audit.name
    export_report(p2, audit_id, b)
    assert a.read_bytes()[:5] == b"%PDF-" and a.read_bytes() == b.read_bytes()
