"""Image folders with a CSV: PNG 8/16-bit, JPEG, DICOM; unreadable files listed, not fatal; patient-disjoint."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fairdesk.core.data import images as imd
from fairdesk.core.errors import DataError
from fairdesk.core.synthetic import morpho


def _write_dicom(path, arr16, monochrome1=False, slope=1.0, intercept=0.0):
    import pydicom
    from pydicom.dataset import FileDataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, generate_uid

    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = "1.2.840.10008.5.1.4.1.1.1.1"
    meta.MediaStorageSOPInstanceUID = generate_uid()
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = FileDataset(str(path), {}, file_meta=meta, preamble=b"\0" * 128)
    ds.SOPClassUID = meta.MediaStorageSOPClassUID
    ds.SOPInstanceUID = meta.MediaStorageSOPInstanceUID
    ds.Modality = "DX"
    ds.Rows, ds.Columns = arr16.shape
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = "MONOCHROME1" if monochrome1 else "MONOCHROME2"
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 12, 11, 0
    if slope != 1.0 or intercept != 0.0:
        ds.RescaleSlope, ds.RescaleIntercept = slope, intercept
    ds.PixelData = arr16.astype(np.uint16).tobytes()
    ds.save_as(str(path), enforce_file_format=True)


@pytest.fixture
def folder(tmp_path):
    from PIL import Image

    ds = morpho.make_morpho(12, seed=0, images_per_patient=2)
    rows = []
    root = tmp_path / "imgs"
    for i, img in enumerate(ds.images):
        pid = f"patient{ds.units.patient[i]:05d}"
        sub = root / "CheXpert-v1.0" / "train" / pid / f"study{i}"
        sub.mkdir(parents=True)
        kind = ["png8", "png16", "jpg", "dcm"][i % 4]
        if kind == "png8":
            name = "view1_frontal.png"
            Image.fromarray(np.round(img * 255).astype(np.uint8)).save(sub / name)
        elif kind == "png16":
            name = "view1_frontal.png"
            Image.fromarray(np.round(img * 65535).astype(np.uint16)).save(sub / name)
        elif kind == "jpg":
            name = "view1_frontal.jpg"
            Image.fromarray(np.round(img * 255).astype(np.uint8)).convert("RGB").save(sub / name, quality=95)
        else:
            name = "view1_frontal.dcm"
            _write_dicom(sub / name, np.round(img * 4095))
        rows.append({"Path": f"CheXpert-v1.0/train/{pid}/study{i}/{name}", "Sex": "F" if ds.a[i] else "M",
                     "Cardiomegaly": [1.0, 0.0, -1.0, np.nan][i % 4], "Edema": float(ds.y[i]),
                     "Pneumonia": 0.0, "Age": 50 + i})
    # a corrupt PNG and a missing file
    bad = root / "CheXpert-v1.0" / "train" / "patient09999" / "study0"
    bad.mkdir(parents=True)
    (bad / "view1_frontal.png").write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    rows.append({"Path": "CheXpert-v1.0/train/patient09999/study0/view1_frontal.png", "Sex": "F",
                 "Cardiomegaly": 1.0, "Edema": 0.0, "Pneumonia": 0.0, "Age": 70})
    rows.append({"Path": "CheXpert-v1.0/train/patient09998/study0/missing.png", "Sex": "M",
                 "Cardiomegaly": 0.0, "Edema": 1.0, "Pneumonia": 0.0, "Age": 71})
    csv = tmp_path / "train.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    return csv, root, ds


def test_chexpert_folder_all_formats_and_bad_files_listed(folder):
    csv, root, ds = folder
    data = imd.open_image_folder(csv, root)
    assert data.style == "chexpert"
    assert data.roles.path == "Path" and "Cardiomegaly" in data.roles.labels and data.roles.attributes == ("Sex",)
    assert len(data) == 12
    reasons = {b["path"].split("/")[2]: b["reason"] for b in data.unreadable}
    assert set(reasons) == {"patient09999", "patient09998"}
    assert reasons["patient09998"] == "file not found"
    assert "not an image" in reasons["patient09999"] or "Error" in reasons["patient09999"]
    # patient parsed from the path; CheXpert's -1 (uncertain) and blanks become missing
    assert data.table["_patient"].nunique() == 6
    assert data.table["Cardiomegaly"].isna().sum() == 6
    imgs = data.load()
    assert imgs.shape == (12, 32, 32) and imgs.dtype == np.float32
    err = np.abs(imgs - ds.images).max(axis=(1, 2))
    assert err[0::4].max() < 0.003     # 8-bit PNG
    assert err[1::4].max() < 1e-4      # 16-bit PNG keeps its depth
    assert err[2::4].max() < 0.08      # JPEG (lossy)
    assert err[3::4].max() < 1e-3      # DICOM, 12 bits stored
    assert imd.read_image(data.files[0], size=16).shape == (16, 16)


def test_patient_disjoint_split(folder):
    csv, root, _ = folder
    data = imd.open_image_folder(csv, root)
    split = data.split(val_size=0.2, test_size=0.3, seed=1)
    owner = data.table.groupby("_patient").apply(lambda g: split[g.index].nunique(), include_groups=False)
    assert (owner == 1).all()
    assert set(split) == {"train", "val", "test"}


def test_dicom_monochrome1_and_rescale(tmp_path):
    arr = np.tile(np.arange(0, 4096, 256, dtype=np.uint16), (4, 1))
    _write_dicom(tmp_path / "m1.dcm", arr, monochrome1=True)
    img = imd.read_image(tmp_path / "m1.dcm")
    assert img[0, 0] == pytest.approx(1.0) and img[0, -1] == pytest.approx(1 - 3840 / 4095, abs=1e-4)
    _write_dicom(tmp_path / "r.dcm", arr, slope=2.0, intercept=-100.0)
    img = imd.read_image(tmp_path / "r.dcm")       # min-max after rescale
    assert img.min() == 0.0 and img.max() == pytest.approx(1.0)


def test_hand_mapped_csv_and_messages(tmp_path):
    ds = morpho.make_morpho(6, seed=0)
    csv = morpho.write_folder(ds, tmp_path)
    data = imd.open_image_folder(csv, tmp_path, imd.ImageRoles(path="Path", labels=("disease",),
                                                                 attributes=("attribute",), patient_id="patient_id"))
    assert len(data) == 6 and not data.unreadable
    assert list(data.table["_patient"]) == list(ds.patient_id)
    with pytest.raises(DataError, match="patient"):
        imd.open_image_folder(csv, tmp_path, imd.ImageRoles(path="Path"))
    with pytest.raises(DataError, match="not in the table"):
        imd.open_image_folder(csv, tmp_path, imd.ImageRoles(path="file", patient_id="patient_id"))
    with pytest.raises(DataError, match="does not exist"):
        imd.open_image_folder(csv, tmp_path / "nope")


def test_project_moved_with_its_image_folder_still_finds_the_images(tmp_path):
    """Issue 23 item 5, and its class: a project renamed or copied together with the image folder beside it (the
    demo is built in a staging folder and renamed) re-opens its images from their new place."""
    from fairdesk.core.synthetic import morpho
    from fairdesk.jobs import images as it

    study = tmp_path / "study.building"
    csv = morpho.write_folder(morpho.make_morpho(24, seed=1), study / "data")
    did = it.import_image_dataset(study / "p.fairdesk", csv, study / "data")
    moved = study.rename(tmp_path / "study")
    ds = it.image_dataset(moved / "p.fairdesk", did)
    assert Path(ds.root).resolve() == (moved / "data").resolve()
    assert all(Path(f).is_file() for f in ds.table["_file"])
    (moved / "data").rename(tmp_path / "elsewhere")  # neither place: one sentence, naming the dataset
    with pytest.raises(DataError, match="not there any more"):
        it.image_dataset(moved / "p.fairdesk", did)
