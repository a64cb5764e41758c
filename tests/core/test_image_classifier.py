"""Image classifiers: train a small CNN on CPU (progress, cancel), save/import as safetensors, state dict
(weights_only) and TorchScript; untrusted pickles are refused."""
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

from fairdesk.core.errors import ModelError  # noqa: E402
from fairdesk.core.models import image_classifier as ic  # noqa: E402
from fairdesk.core.progress import CancelToken, Cancelled  # noqa: E402
from fairdesk.core.synthetic import morpho  # noqa: E402


@pytest.fixture(scope="module")
def trained():
    train = morpho.make_morpho(600, seed=0)
    test = morpho.make_morpho(200, seed=1)
    seen = []
    clf, hist = ic.train_cnn(train.images, train.y, ic.ClassifierConfig("small_cnn", 32, ("disease",), width=8),
                             epochs=4, batch_size=32, lr=5e-3, seed=0, val=(test.images, test.y),
                             progress=lambda f, m: seen.append((f, m)))
    return clf, hist, test, seen


def test_small_cnn_learns_the_disease(trained):
    clf, hist, test, seen = trained
    p = clf.predict_proba(test.images)
    assert p.shape == (200, 1) and np.all((p >= 0) & (p <= 1))
    assert np.mean((p[:, 0] > 0.5) == test.y) > 0.85
    assert hist.val_auc[-1] > 0.9 and hist.loss[-1] < hist.loss[0]
    assert seen[-1][0] == pytest.approx(1.0) and "loss" in seen[-1][1]
    assert all(b[0] >= a[0] for a, b in zip(seen, seen[1:]))


def test_cancel_stops_training():
    ds = morpho.make_morpho(64, seed=0)
    tok = CancelToken()
    calls = []

    def progress(f, m):
        calls.append(f)
        tok.cancel()

    with pytest.raises(Cancelled):
        ic.train_cnn(ds.images, ds.y, epochs=3, batch_size=16, progress=progress, cancel=tok)
    assert len(calls) == 1


def test_save_and_import_roundtrips(trained, tmp_path):
    clf, _, test, _ = trained
    ref = clf.predict_proba(test.images[:20])
    clf.save(tmp_path / "clf")
    again = ic.load_classifier(tmp_path / "clf")
    assert np.allclose(again.predict_proba(test.images[:20]), ref, atol=1e-6)
    # plain torch state dict, loaded with weights_only=True (a "module." prefix from DataParallel is accepted)
    torch.save({"module." + k: v for k, v in clf.module.state_dict().items()}, tmp_path / "w.pt")
    sd = ic.import_state_dict(tmp_path / "w.pt", clf.config)
    assert np.allclose(sd.predict_proba(test.images[:20]), ref, atol=1e-6)
    # TorchScript
    torch.jit.script(clf.module).save(str(tmp_path / "m.ts"))
    ts = ic.load_classifier(tmp_path / "m.ts", image_size=32)
    assert np.allclose(ts.predict_proba(test.images[:20]), ref, atol=1e-5)
    # images of another size are resized to the model's input
    assert ts.predict_proba(morpho.make_morpho(3, seed=0, size=64).images).shape == (3, 1)


class _Evil:
    def __reduce__(self):
        return (print, ("pwned",))


def test_untrusted_pickle_and_wrong_architecture_are_refused(trained, tmp_path):
    clf, _, _, _ = trained
    with open(tmp_path / "evil.pt", "wb") as fh:
        pickle.dump({"w": _Evil()}, fh)
    with pytest.raises(ModelError, match="weights_only"):
        ic.import_state_dict(tmp_path / "evil.pt", clf.config)
    torch.save(clf.module.state_dict(), tmp_path / "w.pt")
    with pytest.raises(ModelError, match="do not fit"):
        ic.import_state_dict(tmp_path / "w.pt", ic.ClassifierConfig("small_resnet", 32, ("disease",), width=8))
    with pytest.raises(ModelError, match="TorchScript"):
        ic.import_torchscript(tmp_path / "w.pt", 32)


def test_small_resnet_shapes():
    m = ic.build_architecture("small_resnet", 1, 3, width=8, blocks=2)
    out = m(torch.zeros(2, 1, 32, 32))
    assert out.shape == (2, 3)
    with pytest.raises(ModelError):
        ic.build_architecture("densenet121")
