"""CTF audit statistics (METHODS §5): hand-computed values, independent libraries, verdicts with the control band,
imported scores, batching, and the clinical demo task with the three remedies."""
from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from fairdesk.core.audits.ctf import (
    _bootstrap,
    build_pairs,
    ctf_audit,
    ctf_from_scored_pairs,
    ctf_statistics,
    wilson_interval,
)
from fairdesk.core.errors import DataError
from fairdesk.core.text.madlibs import madlibs


@pytest.fixture
def three_terms(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("gay\nstraight\nlesbian\n", encoding="utf-8")
    return p


def _lookup_model(text_list):
    out = []
    for t in text_list:
        out.append(0.9 if "gay" in t else 0.1 if "straight" in t else 0.5)
    return np.array(out)


def _hash_model(text_list):
    """Reacts to ANY edit: a pseudo-random score per distinct text."""
    return np.array([int(hashlib.sha256(t.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF for t in text_list])


def _constant_model(text_list):
    return np.full(len(text_list), 0.3)


def test_ctf_gap_equals_hand_computed_value(three_terms):
    texts = ["i am gay", "i am straight", "i am lesbian", "no identity here"]
    r = ctf_audit(texts, _lookup_model, labels=[1, 0, 0, 1], terms=three_terms, control_terms=None, n_boot=200)
    rec = {(x["terms"], x["subset"]): x for x in r.ctf_gap}
    # gay: |.9-.1|, |.9-.5| -> .6; straight: .8, .4 -> .6; lesbian: .4, .4 -> .4
    assert rec[("train", "all")]["value"] == pytest.approx((0.6 + 0.6 + 0.4) / 3)
    assert rec[("train", "all")]["n"] == 3
    assert rec[("train", "label_1")]["value"] == pytest.approx(0.6) and rec[("train", "label_1")]["n"] == 1
    assert rec[("train", "label_0")]["value"] == pytest.approx(0.5)
    pairs = {(p["term"], p["counterfactual_term"]): p for p in r.pairs}
    assert pairs[("gay", "straight")]["flip_rate"] == 1.0 and pairs[("gay", "straight")]["flip_down_rate"] == 1.0
    assert pairs[("gay", "lesbian")]["flip_rate"] == 0.0          # 0.9 -> 0.5: both at or above 0.5
    assert pairs[("straight", "gay")]["mean_change"] == pytest.approx(0.8)
    assert pairs[("gay", "straight")]["reverse_flip_rate"] == 1.0
    # group rates: gay (label 1, predicted 1) TPR 1; straight (label 0, pred 0) TNR 1; lesbian (label 0, pred 1) TNR 0
    g = {x["term"]: x for x in r.group_rates["terms"]}
    assert g["gay"]["tpr"] == 1.0 and g["straight"]["tnr"] == 1.0 and g["lesbian"]["tnr"] == 0.0
    gaps = r.group_rates["gaps"][0]
    assert gaps["tnr_gap"] == pytest.approx(1.0) and gaps["n_pairs_tnr"] == 1 and gaps["n_pairs_tpr"] == 0
    doc = json.loads(json.dumps(r.to_dict()))
    assert {"ctf_gap", "pairs", "group_rates", "control", "provenance"} <= set(doc)
    assert {"subset", "terms", "value", "ci_low", "ci_high", "n"} <= set(doc["ctf_gap"][0])
    assert {"seed", "data_sha256", "versions"} <= set(doc["provenance"])


def test_bootstrap_matches_scipy():
    from scipy.stats import bootstrap

    rng = np.random.default_rng(1)
    x = rng.exponential(0.1, 400)
    ours = np.percentile(_bootstrap(x, 6000, np.random.default_rng(2))[:, 0], [2.5, 97.5])
    ref = bootstrap((x,), np.mean, n_resamples=6000, method="percentile", random_state=3).confidence_interval
    assert ours[0] == pytest.approx(ref.low, abs=0.002) and ours[1] == pytest.approx(ref.high, abs=0.002)


def test_wilson_matches_scipy():
    from scipy.stats import binomtest

    for k, n in [(0, 10), (3, 10), (10, 10), (45, 1000)]:
        lo, hi = wilson_interval(k, n)
        ci = binomtest(k, n).proportion_ci(method="wilson")
        assert float(lo) == pytest.approx(ci.low, abs=1e-9) and float(hi) == pytest.approx(ci.high, abs=1e-9)


@pytest.fixture(scope="module")
def madlibs_sample():
    df = madlibs()
    return df[df.template.isin(["being_adj", "you_are_adj", "am_hate_adj"])].reset_index(drop=True)


def test_verdicts_identity_reactive_any_edit_and_invariant(madlibs_sample):
    texts, y = madlibs_sample.text.tolist(), madlibs_sample.label.to_numpy()

    hated = ("gay", "muslim", "black", "jewish", "lesbian", "mexican", "deaf", "elderly", "queer", "sikh")

    def identity_model(batch):  # reacts to ten identity terms, to nothing else
        return np.array([0.8 if set(t.lower().rstrip(".").split()) & set(hated) else 0.2 for t in batch])

    biased = ctf_audit(texts, identity_model, y, terms="dixon", n_boot=400)
    assert set(biased.verdicts.values()) == {"differs"}
    noisy = ctf_audit(texts, _hash_model, y, terms="dixon", n_boot=400)
    rec = noisy.ctf_gap[0]
    assert rec["value"] > 0.2 and abs(rec["excess"]) < 0.05                 # moves a lot, but as much for neutral
    assert set(noisy.verdicts.values()) == {"inconclusive"}                 # words: never called biased
    flat = ctf_audit(texts, _constant_model, y, terms="dixon", n_boot=400)
    assert set(flat.verdicts.values()) == {"equivalent within margin"}


def test_scoring_is_batched_and_deduplicated(madlibs_sample):
    calls = []

    def model(batch):
        calls.append(len(batch))
        return _constant_model(batch)

    texts = madlibs_sample.text.tolist()
    r = ctf_audit(texts, model, terms="dixon", batch_size=500, n_boot=50)
    n_unique = r.counts["n_unique_texts_scored"]
    assert sum(calls) == n_unique < r.counts["n_identity_pairs"] + len(texts)
    assert max(calls) == 500 and len(calls) == -(-n_unique // 500)


def test_held_out_split_max_tokens_and_exclusions():
    texts = ["he is tall", "she is pregnant", " ".join(["he"] + ["word"] * 12), "gay person"]
    r = ctf_audit(texts, _constant_model, terms="gender", held_out_terms="dixon_train", control_terms=None,
                  n_boot=50)
    assert r.counts["excluded_no_valid_counterfactual"] == {"train": 1, "held_out": 0}
    assert r.counts["n_within_max_tokens"] == 3
    rec = {(x["terms"], x["subset"]): x for x in r.ctf_gap}
    assert rec[("train", "all")]["n"] == 1 and rec[("held_out", "all")]["n"] == 1


def test_imported_scores_give_the_same_statistics(madlibs_sample):
    texts, y = madlibs_sample.text.tolist()[:600], madlibs_sample.label.to_numpy()[:600]
    direct = ctf_audit(texts, _hash_model, y, terms="dixon_train", held_out_terms="dixon_held_out", n_boot=300)
    pairs = build_pairs(texts, "dixon_train", "dixon_held_out")
    frame = pairs.frame()
    frame["score"] = _hash_model(frame["text"].tolist())
    frame["counterfactual_score"] = _hash_model(frame["counterfactual"].tolist())
    imported = ctf_from_scored_pairs(frame, labels_by_id=dict(enumerate(y)), n_boot=300)
    for a, b in zip(direct.ctf_gap, imported.ctf_gap):
        assert (a["terms"], a["subset"], a["n"]) == (b["terms"], b["subset"], b["n"])
        assert a["value"] == pytest.approx(b["value"]) and a.get("control") == pytest.approx(b.get("control"))
    assert len(direct.pairs) == len(imported.pairs)
    with pytest.raises(DataError, match="lacks column"):
        ctf_from_scored_pairs(frame.drop(columns=["score"]))


def test_bad_inputs(three_terms):
    with pytest.raises(DataError, match="No text mentions"):
        ctf_audit(["nothing here"], _constant_model, terms=three_terms)
    with pytest.raises(DataError, match="probabilities"):
        ctf_audit(["i am gay"], lambda b: np.full(len(b), 3.0), terms=three_terms)
    with pytest.raises(DataError, match="scores for"):
        ctf_audit(["i am gay"], lambda b: np.zeros(1), terms=three_terms)
    with pytest.raises(DataError, match="labels for"):
        ctf_audit(["i am gay"], _constant_model, labels=[0, 1], terms=three_terms)
    pairs = build_pairs(["i am gay"], three_terms)
    with pytest.raises(DataError, match="0 or 1"):
        ctf_statistics(pairs, np.zeros(len(pairs.texts)), labels=[5])


def test_demo_spurious_terms_follow_002s_split():
    """The demo plants its spurious "train" terms among 002's training terms (which the remedies see) and its
    "held-out" ones among the held-out terms: a planted term on the wrong side would mislabel what a remedy did."""
    from fairdesk.core.text.counterfactual import load_terms
    from fairdesk.core.text.madlibs import DEMO_SPURIOUS_HELD_OUT, DEMO_SPURIOUS_TRAIN

    assert set(DEMO_SPURIOUS_TRAIN) <= set(load_terms("dixon_train").groups)
    assert set(DEMO_SPURIOUS_HELD_OUT) <= set(load_terms("dixon_held_out").groups)


@pytest.mark.slow
def test_demo_task_remedies():
    """Baseline gap above the control band; blindness removes it on train terms; CLP λ=1 shrinks it."""
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    from sklearn.metrics import roc_auc_score

    from fairdesk.core.models.text_classifier import train_text_classifier
    from fairdesk.core.text.madlibs import clinical_notes_demo

    train, test = clinical_notes_demo(1500, seed=1), clinical_notes_demo(400, seed=2)
    out = {}
    for method in ("baseline", "blindness", "clp"):
        clf = train_text_classifier(train.text, train.label, method=method, terms="dixon_train", lam=1.0,
                                    epochs=4, seed=0)
        r = ctf_audit(test.text.tolist(), clf.predict_proba, test.label.to_numpy(), terms="dixon_train",
                      held_out_terms="dixon_held_out", n_boot=300)
        rec = {(x["terms"], x["subset"]): x for x in r.ctf_gap}
        out[method] = (rec, roc_auc_score(test.label, clf.predict_proba(test.text.tolist())))
    base, blind, clp = (out[m][0][("train", "all")] for m in ("baseline", "blindness", "clp"))
    assert base["verdict"] == "differs" and base["excess_ci_low"] > 0.04 and base["value"] > 2 * base["control"]
    assert blind["value"] < 1e-6 and blind["verdict"] == "equivalent within margin"
    assert clp["value"] < base["value"] / 3
    assert out["clp"][1] > out["baseline"][1] - 0.08
    # held-out terms: reported as they come (002: blindness does not generalise); only sanity-checked here
    assert out["blindness"][0][("held_out", "all")]["value"] > 0.02


def test_two_level_bootstrap_weights():
    """Control band per replicate = Σ M_e W_c1 W_c2 |Δ| / Σ M_e W_c1 W_c2, checked against a direct loop."""
    rng = np.random.default_rng(0)
    n, n_words, rows = 30, 5, 90
    gap = rng.random(n)
    e, w1, w2 = rng.integers(0, n, rows), rng.integers(0, n_words, rows), rng.integers(0, n_words, rows)
    d = rng.random(rows)
    out = _bootstrap(gap, 7, np.random.default_rng(5), e, w1, w2, d, n_words, chunk=7)
    r2 = np.random.default_rng(5)
    draws = r2.integers(0, n, size=(7, n))
    w = r2.multinomial(n_words, np.full(n_words, 1 / n_words), size=7)
    for b in range(7):
        m = np.bincount(draws[b], minlength=n)
        weight = m[e] * w[b, w1] * w[b, w2]
        band = (weight * d).sum() / weight.sum()
        assert out[b, 0] == pytest.approx((m * gap).sum() / n)
        assert out[b, 1] == pytest.approx(band) and out[b, 2] == pytest.approx(out[b, 0] - band)
