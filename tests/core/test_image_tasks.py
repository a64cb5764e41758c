"""Imaging job functions (fairdesk/jobs/image_tasks.py) on the Morpho-like benchmark: the records they store, the
example images round-tripping through the project, the CLI sharing the job's pipeline (same document), bad input.

Models are tiny and barely trained (quality is irrelevant here; test_generator.py judges quality): a generator of a
few steps and a one-epoch CNN, built once for the module. One CPU thread."""
import json

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

from fairdesk.cli import main  # noqa: E402
from fairdesk.core.audits import cit_images as ci  # noqa: E402
from fairdesk.core.data.images import binarise_attribute, read_image  # noqa: E402
from fairdesk.core.errors import DataError, ModelError  # noqa: E402
from fairdesk.core.generation.images import load_generator  # noqa: E402
from fairdesk.core.project import Project  # noqa: E402
from fairdesk.core.synthetic import morpho  # noqa: E402
from fairdesk.jobs import images as it  # noqa: E402

STEPS = 3


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        yield


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    """A project with the image dataset (one corrupt file), a trained CNN and a few-step generator."""
    root = tmp_path_factory.mktemp("imaging")
    bench = morpho.make_morpho(200, seed=0, shortcut=0.8)
    csv = morpho.write_folder(bench, root / "data")
    (root / "data" / "images" / "img_00003.png").write_bytes(b"not a png")
    proj = root / "p.fairdesk"
    did = it.import_image_dataset(proj, csv, root / "data", split_seed=3)
    clf_id = it.train_image_classifier(proj, did, ["disease"], root / "clf", epochs=1, image_size=32, seed=0,
                                      width=8)
    metrics = []
    gen_id = it.train_generator_job(proj, did, "attribute", root / "gen", vae_steps=2, unet_steps=2, batch_size=8,
                                    steps=STEPS, checkpoint_every=0, on_metrics=metrics.append)
    return {"root": root, "csv": csv, "proj": proj, "did": did, "clf_id": clf_id, "gen_id": gen_id,
            "metrics": metrics, "bench": bench}


@pytest.fixture(scope="module")
def audited(ws):
    aid = it.audit_cit(ws["proj"], ws["did"], ws["clf_id"], ws["gen_id"], "attribute", labels=["disease"],
                       split="test", steps=STEPS, n_examples=5, seed=0)
    return aid


def test_import_stores_images_record_with_split_and_unreadable(ws):
    p = Project(ws["proj"])
    info = p.dataset(ws["did"])
    assert info.kind == "images" and info.n_rows == 199
    assert [u["path"] for u in info.origin["unreadable"]] == ["images/img_00003.png"]
    assert "corrupt" in info.origin["unreadable"][0]["reason"]
    assert info.roles["path"] == "Path" and info.roles["patient_id"] == "patient_id"
    assert len(info.origin["images_sha256"]) == 64 and info.origin["split_seed"] == 3
    table = p.load_dataset(ws["did"])
    assert set(table["split"]) == {"train", "val", "test"}
    assert table.groupby("patient_id")["split"].nunique().max() == 1          # patient-disjoint
    again = it.import_image_dataset(ws["proj"], ws["csv"], ws["root"] / "data", split_seed=3)
    assert (p.load_dataset(again)["split"] == table["split"]).all()            # deterministic in the seed
    other = it.import_image_dataset(ws["proj"], ws["csv"], ws["root"] / "data", split_seed=4)
    assert not (p.load_dataset(other)["split"] == table["split"]).all()
    ds = it.image_dataset(ws["proj"], ws["did"])
    assert len(ds) == 199 and ds.unreadable == info.origin["unreadable"]
    assert all(f.is_file() for f in ds.files) and "split" in ds.table
    assert np.allclose(read_image(ds.files[0]), ws["bench"].images[0], atol=1 / 255)
    with pytest.raises(DataError, match="not an image dataset"):
        it.image_dataset(ws["proj"], Project(ws["proj"]).add_dataset("t", table, "x", kind="predictions"))
    with pytest.raises(DataError, match="not there any more"):
        it.image_dataset(ws["proj"], ws["did"], root=ws["root"] / "moved")


def test_classifier_records_import_and_validation(ws, tmp_path):
    p = Project(ws["proj"])
    m = next(m for m in p.models() if m.id == ws["clf_id"])
    assert m.kind == "image_classifier" and m.info["outputs"] == ["disease"] and m.dataset_id == ws["did"]
    assert (ws["root"] / "clf" / "model.safetensors").is_file() and len(m.info["sha256"]) == 64
    assert len(m.info["history"]["loss"]) == 1
    again = it.import_image_classifier(ws["proj"], ws["root"] / "clf")
    assert next(x for x in p.models() if x.id == again).info["sha256"] == m.info["sha256"]
    # TorchScript: validated by loading and running it
    from fairdesk.core.models.image_classifier import load_classifier

    module = torch.jit.script(load_classifier(ws["root"] / "clf").module)
    ts = tmp_path / "model.pt"
    module.save(str(ts))
    tid = it.import_image_classifier(ws["proj"], ts, image_size=32, outputs=["disease"])
    rec = next(x for x in p.models() if x.id == tid)
    assert rec.info["format"] == "torchscript" and rec.info["image_size"] == 32
    with pytest.raises(ModelError, match="outputs"):
        it.import_image_classifier(ws["proj"], ts, image_size=32, outputs=["a", "b"])
    junk = tmp_path / "junk.pt"
    junk.write_text("hello")
    with pytest.raises(ModelError, match="TorchScript"):
        it.import_image_classifier(ws["proj"], junk, image_size=32)


def test_generator_job_record_and_metrics(ws):
    m = next(m for m in Project(ws["proj"]).models() if m.id == ws["gen_id"])
    assert m.kind == "image_generator"
    assert m.info["attribute"] == {"column": "attribute", "values": ["0", "1"], "positive": None}
    assert m.info["step"] == 4 and m.info["checkpoints"] == [2, 4]
    assert [(x["phase"], x["phase_step"]) for x in ws["metrics"]] == [("autoencoder", 1), ("autoencoder", 2),
                                                                      ("diffusion", 1), ("diffusion", 2)]
    assert all(np.isfinite(x["loss"]) and x["lr"] >= 0 for x in ws["metrics"]) and ws["metrics"][0]["lr"] > 0
    gen = load_generator(m.info["path"])
    assert gen.meta["attribute"]["values"] == ["0", "1"] and gen.config.default_steps == STEPS


def test_audit_record_and_examples_round_trip(ws, audited):
    p = Project(ws["proj"])
    rec = next(a for a in p.audits() if a.id == audited)
    assert rec.kind == "cit_images" and rec.dataset_id == ws["did"]
    doc, ex = it.load_cit_audit(ws["proj"], audited)
    assert doc["kind"] == "cit_images" and doc["settings"]["generator"] == "learned"
    assert {"p", "cit_lr_p", "dp_p", "eo_p", "verdict"} <= set(doc["table"][0])
    assert doc["provenance"]["model_hashes"]["classifier"] == next(
        m for m in p.models() if m.id == ws["clf_id"]).info["sha256"]
    assert doc["unreadable"][0]["path"] == "images/img_00003.png"
    items = doc["examples"]["items"]
    assert len(items) == 5 + 4 and [i["selected"] for i in items].count("random") == 4
    top = [i["max_abs_change"] for i in items if i["selected"] == "largest change"]
    assert top == sorted(top, reverse=True)
    assert min(top) >= max(i["max_abs_change"] for i in items if i["selected"] == "random")
    for i in items:
        pr = i["predictions"]["disease"]
        assert i["max_abs_change"] == pytest.approx(abs(pr["cf"] - pr["null"]))
        assert i["target"] == 1 - i["observed"]
    assert set(ex) == {"original", "null", "cf", "diff"} and ex["cf"].shape == (9, 32, 32)
    assert ex["cf"].dtype == np.float32
    # the stored originals are the image files, within the uint16 quantisation
    files = np.stack([read_image(i["file"], 32) for i in items])
    assert np.abs(ex["original"] - files).max() <= 0.5 / 65535 + 1e-7
    np.testing.assert_allclose(ex["diff"], ex["cf"] - ex["null"])
    # predictions in the items are those of the stored images (the images are what the classifier saw)
    from fairdesk.core.models.image_classifier import load_classifier

    clf = load_classifier(ws["root"] / "clf")
    np.testing.assert_allclose(clf(ex["cf"])[:, 0], [i["predictions"]["disease"]["cf"] for i in items], atol=2e-3)
    other = Project(ws["proj"]).add_audit("g", "groups", "{}")
    with pytest.raises(DataError, match="not a counterfactual"):
        it.load_cit_audit(ws["proj"], other)


def test_array_encoding_is_exact_and_pickle_free():
    rng = np.random.default_rng(0)
    arrays = {"u": rng.integers(0, 65535, (3, 5, 7)).astype(np.uint16), "f": rng.standard_normal(4).astype(np.float16)}
    text = ci.encode_arrays(arrays)
    assert ci.encode_arrays(arrays) == text                                   # deterministic bytes
    back = ci.decode_arrays(text)
    assert all(np.array_equal(back[k], v) and back[k].dtype == v.dtype for k, v in arrays.items())
    img = rng.uniform(0, 1, (2, 8, 8))
    assert np.abs(ci.from_uint16(ci.to_uint16(img)) - img).max() <= 0.5 / 65535 + 1e-7
    with pytest.raises(DataError):
        ci.encode_arrays({"o": np.array([{"a": 1}], dtype=object)})
    with pytest.raises(DataError, match="damaged"):
        ci.decode_arrays("bm90IGEgemlw")


def test_cli_writes_the_jobs_document_and_pdf(ws, audited, tmp_path, capsys):
    out_json, out_pdf = tmp_path / "cit.json", tmp_path / "cit.pdf"
    gen_path = next(m for m in Project(ws["proj"]).models() if m.id == ws["gen_id"]).info["path"]
    code = main(["audit", "cit", "--data", str(ws["csv"]), "--images", str(ws["root"] / "data"),
                 "--classifier", str(ws["root"] / "clf"), "--generator", gen_path, "--attribute", "attribute",
                 "--labels", "disease", "--split-seed", "3", "--steps", str(STEPS), "--examples", "5",
                 "--json", str(out_json), "--pdf", str(out_pdf), "--quiet"])
    assert code == 0, capsys.readouterr()
    cli_doc = json.loads(out_json.read_text())
    assert cli_doc.pop("disclosure")["for_release"] is False  # the working document says it is not for release
    job_doc, _ = it.load_cit_audit(ws["proj"], audited)
    assert set(cli_doc) == set(job_doc)
    for r_cli, r_job in zip(cli_doc["table"], job_doc["table"]):   # same pipeline, same split, same numbers
        for k in ("p", "cit_lr_p", "dp_p", "eo_p", "shift_0->1", "shift_1->0"):
            assert r_cli[k] == pytest.approx(r_job[k], rel=1e-6, abs=1e-9), k
    assert cli_doc["examples"]["npz_base64"] == job_doc["examples"]["npz_base64"]
    assert out_pdf.read_bytes()[:5] == b"%PDF-"
    assert "verdict" in capsys.readouterr().out
    code = main(["audit", "cit", "--data", str(ws["csv"]), "--images", str(ws["root"] / "data"),
                 "--classifier", str(ws["root"] / "clf"), "--generator", gen_path, "--attribute", "sex",
                 "--json", str(tmp_path / "x.json"), "--quiet"])
    assert code == 2 and "sex" in capsys.readouterr().err


def test_bad_attributes_give_clear_errors(ws):
    with pytest.raises(DataError, match="'sex' is not in the image table"):
        it.audit_cit(ws["proj"], ws["did"], ws["clf_id"], ws["gen_id"], "sex", steps=STEPS)
    table = Project(ws["proj"]).load_dataset(ws["did"])
    one = binarise_attribute
    with pytest.raises(DataError, match="only 1 value"):
        one(pd.Series(["F"] * 5), "sex")
    with pytest.raises(DataError, match="3 values.*positive="):
        one(pd.Series(["a", "b", "c", "a"]), "site")
    a, names, known = one(pd.Series(["a", "b", "c", None]), "site", positive="b")
    assert a.tolist() == [0, 1, 0, 0] and names == ["a / c", "b"] and known.tolist() == [True, True, True, False]
    with pytest.raises(DataError, match="no comparison group"):
        one(pd.Series(["a", "b"]), "site", positive=["a", "b"])
    # a generator trained on another coding of the attribute is refused
    with pytest.raises(DataError, match="generator was trained"):
        it.audit_cit(ws["proj"], ws["did"], ws["clf_id"], ws["gen_id"], "disease", steps=STEPS)
    # training on a single-valued attribute
    with pytest.raises(DataError, match="only 1 value"):
        ds = it.image_dataset(ws["proj"], ws["did"])
        ds.table["const"] = 1
        it.fit_generator(ds, "const", ws["root"] / "never", splits=table["split"].to_numpy(), vae_steps=1,
                         unet_steps=1)
    assert not (ws["root"] / "never").exists()


def test_cancel_stores_nothing_and_empty_folder_is_explained(ws, tmp_path):
    from fairdesk.core.progress import CancelToken, Cancelled

    p = Project(ws["proj"])
    n_audits, n_models = len(p.audits()), len(p.models())
    tok = CancelToken()
    seen = []

    def progress(f, msg):
        seen.append(msg)
        if "denoising" in msg:
            tok.cancel()
    with pytest.raises(Cancelled):
        it.audit_cit(ws["proj"], ws["did"], ws["clf_id"], ws["gen_id"], "attribute", steps=STEPS,
                     progress=progress, cancel=tok)
    assert any("inversion" in m for m in seen)
    tok = CancelToken()
    tok.cancel()
    with pytest.raises(Cancelled):
        it.train_generator_job(ws["proj"], ws["did"], "attribute", tmp_path / "g2", vae_steps=2, unet_steps=2,
                               cancel=tok)
    assert len(p.audits()) == n_audits and len(p.models()) == n_models
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="None of the 200 images"):
        it.import_image_dataset(ws["proj"], ws["csv"], tmp_path / "empty")
