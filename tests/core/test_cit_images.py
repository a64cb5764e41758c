"""Image counterfactual-invariance audit on the Morpho-like benchmark with EXACT counterfactuals (pass/fail), and the
negative-control band logic with simulated generator artefacts."""
import json

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from fairdesk.core.audits.cit_images import audit_images, control_band
from fairdesk.core.errors import DataError
from fairdesk.core.progress import CancelToken, Cancelled
from fairdesk.core.synthetic import morpho


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    with threadpool_limits(limits=1):
        yield


@pytest.fixture(scope="module")
def bench():
    train = morpho.make_morpho(500, seed=0, shortcut=0.9)
    test = morpho.make_morpho(600, seed=1, shortcut=0.8)   # A and Y associated in the audit sample
    reads = morpho.train_pixel_classifier(train.images, train.y)
    ignores = morpho.train_pixel_classifier(train.images, train.y, mask=morpho.central_mask())
    control = morpho.train_pixel_classifier(train.images, train.y, mask=morpho.central_mask(), C=0.5)
    return train, test, {"reads": reads, "ignores": ignores}, control


def _preds(clfs, images):
    return {k: c(images) for k, c in clfs.items()}


def test_exact_counterfactuals_flag_the_reader_and_clear_the_ignorer(bench):
    _, test, clfs, _ = bench
    cf = test.counterfactual()
    res = audit_images(_preds(clfs, test.images), _preds(clfs, cf), test.a, test.exogenous(),
                       pred_flip=_preds(clfs, test.images[:, :, ::-1]), labels={k: test.y for k in clfs},
                       margin=0.02, seed=0, provenance={"data_sha256": "abc", "benchmark": "morpho"})
    rows = {r["output"]: r for r in res.table}
    assert rows["reads"]["p"] < 1e-6 and rows["reads"]["q"] < 1e-6
    assert rows["reads"]["verdict"] == "dependent"
    assert rows["reads"]["shift_0->1"] > 0.3 and rows["reads"]["shift_1->0"] < -0.3   # oriented, not cancelled
    assert rows["reads"]["flip_rate_0->1"] > 0.5
    assert rows["ignores"]["p"] > 0.05
    assert rows["ignores"]["verdict"] == "equivalent within margin"
    # DP flags the ignorer because A and Y are associated in this sample; the counterfactual test does not
    assert rows["ignores"]["dp_p"] < 1e-3
    assert rows["ignores"]["eo_p"] > 0.01
    assert 0 <= rows["ignores"]["flip_mean_abs_shift"] < 0.05
    d = json.loads(res.to_json())
    assert d["provenance"]["data_sha256"] == "abc" and d["provenance"]["benchmark"] == "morpho"
    assert set(d["scatter"]["reads"]) == {"0->1", "1->0", "flip"}
    assert res.verdicts() == {"reads": "dependent", "ignores": "equivalent within margin"}


def test_control_band_turns_generator_artefacts_into_inconclusive(bench):
    """Simulated learned generator: every pass adds its own noise, and the counterfactual pass also brightens the
    whole image a little (an artefact). An invariant classifier then shows a small systematic shift."""
    _, test, clfs, control = bench
    rng = np.random.default_rng(5)
    art = lambda im, bias: np.clip(im + 0.03 * rng.standard_normal(im.shape) + bias, 0, 1).astype(np.float32)
    x_null = art(test.images, 0.0)
    x_cf = art(test.counterfactual(), 0.03)
    kwargs = dict(pred_null=_preds(clfs, x_null), generator="learned", margin=0.005, seed=1, published=False)
    naive = audit_images(_preds(clfs, test.images), _preds(clfs, x_cf), test.a, test.exogenous(), **kwargs)
    assert naive.verdicts()["ignores"] == "dependent"          # the known trap, without a control
    assert any("provisional" in n for n in naive.notes)
    ctrl = {"pred_null": control(x_null), "pred_cf": control(x_cf), "name": "central-disc classifier"}
    res = audit_images(_preds(clfs, test.images), _preds(clfs, x_cf), test.a, test.exogenous(), control=ctrl,
                       **kwargs)
    band = res.control_band
    assert band == pytest.approx(control_band(ctrl["pred_null"], ctrl["pred_cf"], test.a))
    assert 0.005 < band < 0.2
    assert res.verdicts()["ignores"] == "inconclusive"
    assert res.verdicts()["reads"] == "dependent"               # far outside the band
    assert res.control_effect["name"] == "central-disc classifier"


def test_validation_and_cancel(bench):
    _, test, clfs, _ = bench
    p = _preds(clfs, test.images)
    with pytest.raises(DataError, match="null-intervention"):
        audit_images(p, p, test.a, test.exogenous(), generator="learned")
    with pytest.raises(DataError):
        audit_images(p, {"reads": p["reads"]}, test.a, test.exogenous())
    with pytest.raises(DataError):
        audit_images(p, p, test.a, test.exogenous()[:10])
    tok = CancelToken()
    tok.cancel()
    with pytest.raises(Cancelled):
        audit_images(p, p, test.a, test.exogenous(), cancel=tok)
