"""The controlled image benchmark: exact counterfactuals touch only the attribute's rim, patients share A."""
import numpy as np
import pytest

from fairdesk.core.errors import DataError
from fairdesk.core.synthetic import morpho


def test_counterfactual_changes_only_the_rim_and_is_exactly_reversible():
    ds = morpho.make_morpho(60, seed=3)
    cf = ds.counterfactual()
    diff = np.abs(cf - ds.images)
    assert diff.max() > 0.5                         # the attribute's feature really changes
    assert diff[:, morpho.central_mask(32)].max() == 0.0   # ... and never inside the lesion disc
    back = morpho.render(ds.units, ds.a)            # do(A = observed) reproduces the original bit for bit
    assert np.array_equal(back, ds.images)
    twice = morpho.render(ds.units, 1 - (1 - ds.a))
    assert np.array_equal(twice, ds.images)
    # a thick rim (A = 1) has more bright pixels than the same unit with a thin rim
    bright = lambda im: (im > 0.7).sum(axis=(1, 2))
    thick = np.where(ds.a[:, None, None] == 1, ds.images, cf)
    thin = np.where(ds.a[:, None, None] == 1, cf, ds.images)
    assert np.all(bright(thick) > bright(thin))


def test_patients_share_attribute_and_seed_is_deterministic():
    ds = morpho.make_morpho(200, seed=1, images_per_patient=3)
    pid = ds.patient_id
    for p in np.unique(pid)[:20]:
        assert len(set(ds.a[pid == p].tolist())) == 1
    assert len(np.unique(pid)) == 67
    again = morpho.make_morpho(200, seed=1, images_per_patient=3)
    assert np.array_equal(ds.images, again.images)
    other = morpho.make_morpho(200, seed=2, images_per_patient=3)
    assert not np.array_equal(ds.images, other.images)


def test_shortcut_controls_the_sample_association_and_sizes_scale():
    ind = morpho.make_morpho(2000, seed=0, shortcut=0.5)
    sc = morpho.make_morpho(2000, seed=0, shortcut=0.9)
    assert abs(np.mean(ind.a == ind.y) - 0.5) < 0.05
    assert abs(np.mean(sc.a == sc.y) - 0.9) < 0.03
    big = morpho.make_morpho(4, seed=0, size=64)
    assert big.images.shape == (4, 64, 64) and big.images.dtype == np.float32
    assert np.abs(big.counterfactual() - big.images)[:, morpho.central_mask(64)].max() == 0.0
    with pytest.raises(DataError):
        morpho.make_morpho(0)


def test_reference_classifiers_read_or_ignore_the_attribute():
    train = morpho.make_morpho(500, seed=0, shortcut=0.9)
    test = morpho.make_morpho(200, seed=1)
    reads = morpho.train_pixel_classifier(train.images, train.y)
    ignores = morpho.train_pixel_classifier(train.images, train.y, mask=morpho.central_mask())
    cf = test.counterfactual()
    assert np.abs(ignores(cf) - ignores(test.images)).max() == 0.0
    assert np.mean((ignores(test.images) > 0.5) == test.y) > 0.8
    shift = reads(cf) - reads(test.images)
    assert shift[test.a == 0].mean() > 0.2 and shift[test.a == 1].mean() < -0.2


def test_write_folder_png_8_and_16_bit(tmp_path):
    from PIL import Image
    import pandas as pd

    ds = morpho.make_morpho(5, seed=0)
    csv = morpho.write_folder(ds, tmp_path / "d16", bit_depth=16)
    df = pd.read_csv(csv)
    assert list(df.columns) == ["Path", "disease", "attribute", "patient_id"]
    arr = np.asarray(Image.open(tmp_path / "d16" / df.Path[0]))
    assert arr.dtype == np.uint16
    assert np.abs(arr / 65535.0 - ds.images[0]).max() < 1e-4
