"""The model card of a model FairDesk itself trained (issue 24, item 6): trained through ``fairdesk-cli train ...``,
audited with ``fairdesk-cli audit ...`` and carded with ``fairdesk-cli report model-card``, the card records the
model's kind, its parameters, its hash and the training data's fingerprint, never "model not recorded".

Each trainer writes the one training record (:mod:`fairdesk.core.models.training_record`) into its folder; the audit
keeps it only when the record's hash is the hash of the files it audits, which the last test checks. Tiny models,
one thread."""
from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from fairdesk.cli import main
from fairdesk.core.models.training_record import RECORD_FILE, training_record

torch = pytest.importorskip("torch")
torch.set_num_threads(1)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with threadpool_limits(limits=1):
        yield


def _run(argv, capsys) -> str:
    code = main(argv)
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def _card(project, tmp_path, capsys, kind) -> tuple[dict, str]:
    from fairdesk.core.project import Project

    [audit] = [a for a in Project(project, create=False).audits() if a.kind == kind]
    out, md = tmp_path / f"{kind}.card.json", tmp_path / f"{kind}.card.md"
    _run(["report", "model-card", "--project", str(project), "--audit", str(audit.id), "--out", str(out),
          "--markdown", str(md)], capsys)
    return json.loads(out.read_text()), md.read_text()


def _assert_trained(card: dict, markdown: str, role: str, kind: str, data_sha: str, params: dict) -> dict:
    model = card["model"]
    assert model["recorded_in"] != "not recorded"
    assert "model not recorded" not in markdown
    entry = next(t for t in model["trained_by_fairdesk"] if t["role"] == role)
    assert entry["kind"] == kind
    assert entry["training_data"]["sha256"] == data_sha
    assert len(entry["model_sha256"]) == 64 and entry["model_sha256"] in model["hashes"].values()
    for key, value in params.items():
        assert entry["parameters"][key] == value, key
    plain = markdown.replace("\\", "")  # Markdown escapes removed
    assert f"Trained by FairDesk ({role}): kind {kind}" in plain
    assert entry["model_sha256"] in plain and data_sha in plain
    return entry


def test_text_classifier_trained_by_the_cli_is_on_its_card(tmp_path, capsys):
    from fairdesk.core.text.madlibs import clinical_notes_demo

    data = tmp_path / "notes.csv"
    clinical_notes_demo(80, seed=0).to_csv(data, index=False)
    model, project = tmp_path / "model", tmp_path / "p.fairdesk"
    _run(["train", "text-classifier", "--data", str(data), "--text-col", "text", "--label-col", "label",
          "--method", "clp", "--lambda", "0.5", "--epochs", "1", "--seed", "7", "--out", str(model), "--quiet"],
         capsys)
    assert (model / RECORD_FILE).is_file()
    _run(["audit", "ctf", "--model", str(model), "--data", str(data), "--text-col", "text", "--label-col", "label",
          "--n-boot", "100", "--synthetic", "0", "--threads", "1", "--quiet", "--project", str(project),
          "--json", str(tmp_path / "ctf.json")], capsys)
    card, md = _card(project, tmp_path, capsys, "ctf")
    data_sha = hashlib.sha256(data.read_bytes()).hexdigest()
    _assert_trained(card, md, "classifier", "text_classifier", data_sha,
                    {"method": "clp", "lambda": 0.5, "epochs": 1, "seed": 7})


def test_language_model_trained_by_the_cli_is_on_its_card(tmp_path, capsys):
    from tiny_text import labelled_notes

    corpus = tmp_path / "notes.csv"
    labelled_notes(160).to_csv(corpus, index=False)
    model, project = tmp_path / "mlm", tmp_path / "p.fairdesk"
    _run(["train", "mlm", "--corpus", str(corpus), "--out", str(model), "--hidden", "16", "--layers", "1",
          "--heads", "2", "--intermediate", "32", "--vocab-size", "200", "--max-length", "32", "--steps", "2",
          "--batch-size", "4", "--warmup", "0", "--seed", "5", "--threads", "1", "--quiet"], capsys)
    _run(["audit", "mlm-bias", "--model", str(model), "--categories", "DNR,HIV", "--threads", "1", "--quiet",
          "--project", str(project), "--json", str(tmp_path / "mlm.json")], capsys)
    card, md = _card(project, tmp_path, capsys, "mlm_bias")
    info = json.loads((model / "training_info.json").read_text())
    _assert_trained(card, md, "masked_lm", "masked_lm", info["corpus_sha256"],
                    {"max_steps": 2, "hidden_size": 16, "seed": 5})
    # the same language model as the encoder of note classifiers: its record is on that audit's card too
    _run(["audit", "encoders", "--baseline", str(model), "--notes", str(corpus), "--tasks", "sepsis", "--attribute",
          "gender", "--n-boot", "100", "--min-group-size", "10", "--hidden", "16", "--alpha", "1e-3",
          "--max-iter", "60", "--threads", "1", "--quiet", "--project", str(project),
          "--json", str(tmp_path / "enc.json")], capsys)
    card, md = _card(project, tmp_path, capsys, "note_classifiers")
    _assert_trained(card, md, "encoder baseline", "masked_lm", info["corpus_sha256"], {"max_steps": 2})


def test_generator_and_classifier_trained_here_are_on_the_image_card(tmp_path, capsys):
    from fairdesk.core.synthetic import morpho
    from fairdesk.jobs import images as it

    bench = morpho.make_morpho(80, seed=0, shortcut=0.8)
    csv = morpho.write_folder(bench, tmp_path / "data")
    build = tmp_path / "build.fairdesk"
    did = it.import_image_dataset(build, csv, tmp_path / "data")
    it.train_image_classifier(build, did, ["disease"], tmp_path / "clf", epochs=1, image_size=32, seed=0, width=8)
    _run(["train", "generator", "--data", str(csv), "--images", str(tmp_path / "data"), "--attribute", "attribute",
          "--out", str(tmp_path / "gen"), "--vae-steps", "2", "--unet-steps", "2", "--batch-size", "8",
          "--steps", "2", "--checkpoint-every", "0", "--quiet"], capsys)
    project = tmp_path / "p.fairdesk"
    _run(["audit", "cit", "--data", str(csv), "--images", str(tmp_path / "data"), "--classifier",
          str(tmp_path / "clf"), "--generator", str(tmp_path / "gen"), "--attribute", "attribute", "--labels",
          "disease", "--steps", "2", "--examples", "2", "--quiet", "--project", str(project),
          "--json", str(tmp_path / "cit.json")], capsys)
    card, md = _card(project, tmp_path, capsys, "cit_images")
    gen_rec = json.loads((tmp_path / "gen" / RECORD_FILE).read_text())
    clf_rec = json.loads((tmp_path / "clf" / RECORD_FILE).read_text())
    _assert_trained(card, md, "generator", "image_generator", gen_rec["training_data"]["sha256"],
                    {"vae_steps": 2, "unet_steps": 2, "attribute": "attribute"})
    _assert_trained(card, md, "classifier", "image_classifier", clf_rec["training_data"]["sha256"],
                    {"epochs": 1, "width": 8})
    assert card["model"]["hashes"]["generator"] == gen_rec["model_sha256"]


def test_age_learners_trained_by_the_audit_are_on_its_card(tmp_path, capsys):
    from fairdesk.core.synthetic.age_cohort import make_age_cohort

    csv = tmp_path / "cohort.csv"
    make_age_cohort(n_participants=20, n_features=6, seed=3).to_csv(csv, index=False)
    project = tmp_path / "p.fairdesk"
    _run(["train", "age-independent", "--data", str(csv), "--label", "label", "--attribute", "age",
          "--group-id", "participant_id", "--methods", "dnn,simple", "--folds", "2", "--seed", "4", "--epochs", "2",
          "--no-reference", "--threads", "1", "--quiet", "--project", str(project),
          "--json", str(tmp_path / "age.json")], capsys)
    card, md = _card(project, tmp_path, capsys, "age_independence")
    from fairdesk.core.project import Project

    p = Project(project, create=False)
    doc = p.audit_document(p.audits()[0].id)
    for method in ("dnn", "simple"):
        _assert_trained(card, md, f"learner {method}", "age_independent", doc["provenance"]["data_sha256"],
                        {"method": method, "folds": 2, "seed": 4})


def test_a_record_describes_only_the_files_it_was_written_for(tmp_path, capsys):
    """Change the trained model's weights after training: the audit no longer takes the record for it."""
    from fairdesk.core.text.madlibs import clinical_notes_demo
    from fairdesk.jobs.ctf import model_files_sha256

    data = tmp_path / "notes.csv"
    clinical_notes_demo(60, seed=1).to_csv(data, index=False)
    model = tmp_path / "model"
    _run(["train", "text-classifier", "--data", str(data), "--text-col", "text", "--label-col", "label",
          "--method", "baseline", "--epochs", "1", "--out", str(model), "--quiet"], capsys)
    fingerprint = model_files_sha256(model)["fingerprint"]
    assert training_record(model, fingerprint)["model_sha256"] == fingerprint
    config = json.loads((model / "config.json").read_text())
    config["dropout"] = float(np.nextafter(config["dropout"], 1))
    (model / "config.json").write_text(json.dumps(config))
    assert training_record(model, model_files_sha256(model)["fingerprint"]) is None
    project = tmp_path / "p.fairdesk"
    _run(["audit", "ctf", "--model", str(model), "--data", str(data), "--text-col", "text", "--label-col", "label",
          "--n-boot", "100", "--synthetic", "0", "--threads", "1", "--quiet", "--project", str(project),
          "--json", str(tmp_path / "ctf.json")], capsys)
    assert "training" not in json.loads((tmp_path / "ctf.json").read_text())["provenance"]
    card, _ = _card(project, tmp_path, capsys, "ctf")
    assert card["model"]["trained_by_fairdesk"] == []
