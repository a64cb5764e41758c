"""CTF: per-term verdicts (a single biased term is never averaged away, and never lends its effect to the other
terms) and the context as the unit of resampling (template-complete sets, repeated rows). Scores are simulated
directly (:mod:`fairdesk.core.synthetic.ctf_sim`) and go through ``ctf_from_scored_pairs``, the ``audit ctf-scores``
path.

The first two tests failed on the code before issue 22: the planted term got "equivalent within margin" in every
audit (the verdict was on the gap averaged over 35 terms), and the template-complete null at the margin was called
"differs" in 13–23% and "equivalent" in 40–60% of audits (rows resampled as if independent)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairdesk.core.audits.ctf import contexts, ctf_from_scored_pairs
from fairdesk.core.errors import DataError
from fairdesk.core.synthetic.ctf_sim import CTFDesign, draw_design, run_audit, simulate_scored_pairs


def test_a_single_planted_term_is_found_and_named_not_averaged_away():
    """35 terms, one of them moves the score by 0.19 when swapped in, the others by ~0.002: the averaged gap is
    ~0.013 (under the margin 0.02) — before issue 22 every such audit said "equivalent within margin"."""
    design = CTFDesign(n_terms=35, n_contexts=25, planted=0.19, background=0.002)
    for seed in (1,):
        frame, _ = simulate_scored_pairs(design, seed)
        res = ctf_from_scored_pairs(frame, margin=0.02, n_boot=300, seed=seed)
        summary = res.ctf_gap[0]
        assert summary["value"] < 0.02                          # the averaged gap alone would look fine
        assert summary["verdict"] == "differs" and summary["terms_differ"] == ["idterm00"]
        planted = next(t for t in res.term_gaps if t["term"] == "idterm00")
        assert planted["verdict"] == "differs" and planted["value"] > 0.15
        assert planted["mean_change_towards"] > 0.15           # swapping it IN raises the score
        others = [t for t in res.term_gaps if t["term"] != "idterm00"]
        assert not any(t["verdict"] == "differs" for t in others)


def test_one_biased_term_among_few_does_not_make_the_others_differ():
    """8 terms, one moves the score by +0.2, the others' gap against a neutral word 0.01: with the gap of a term
    pooled over its swaps (the code before this change) every unbiased term read "differs" in every audit (its
    swaps with the biased term lift its gap by ≈ δ/7 ≈ 0.026 above the margin); now none does, and the planted
    term still does. The swap gap stays in the record, lifted as before (descriptive)."""
    design = CTFDesign(n_terms=8, n_contexts=30, planted=0.2, background=0.01, control=0.005)
    for seed in (0, 1):
        frame, _ = simulate_scored_pairs(design, seed)
        res = ctf_from_scored_pairs(frame, n_boot=300, seed=seed)
        said = {t["term"]: t for t in res.term_gaps}
        assert said["idterm00"]["verdict"] == "differs" and said["idterm00"]["value"] > 0.15
        others = [t for k, t in said.items() if k != "idterm00"]
        assert not any(t["verdict"] == "differs" for t in others)
        assert all(t["swap_gap"] > 0.03 and t["value"] < 0.02 for t in others)


@pytest.mark.parametrize("effects, common", [((0.15, -0.1, 0.2, 0.12), 0.0), ((0.2,), 0.1)])
def test_many_biased_terms_or_a_reaction_to_any_identity_term(effects, common):
    """Four of six terms biased (the median of the other terms is then itself moved, the control words are not),
    or every term raising the score by 0.1 against the control words and one by 0.2 more (the control gap is then
    above the margin for every term, the median of the other terms is not): the unbiased terms never differ, the
    biased ones do."""
    design = CTFDesign(n_terms=6, n_contexts=30, effects=effects, common=common, background=0.01, control=0.005)
    frame, _ = simulate_scored_pairs(design, 7)
    res = ctf_from_scored_pairs(frame, n_boot=300, seed=7)
    said = {t["term"]: t["verdict"] for t in res.term_gaps}
    assert [k for k, v in sorted(said.items()) if v == "differs"] == design.planted_terms()


def test_term_gaps_against_the_other_terms_and_the_control_words_by_hand():
    """Two texts of one sentence each (terms a, b, c; control words w1, w2), scores chosen by hand."""
    import pandas as pd

    f = {"a": 0.5, "b": 0.7, "c": 0.6, "w1": 0.55, "w2": 0.45}
    rows = []
    for i, sent in enumerate(("one {} here", "two {} there")):
        for cf in ("b", "c"):
            rows.append((i, sent.format("a"), sent.format(cf), "a", cf, "identity", f["a"], f[cf]))
        rows.append((i, sent.format("w1"), sent.format("w2"), "w1", "w2", "control", f["w1"], f["w2"]))
    frame = pd.DataFrame(rows, columns=["id", "text", "counterfactual", "term", "counterfactual_term", "kind",
                                        "score", "counterfactual_score"])
    res = ctf_from_scored_pairs(frame, n_boot=50)
    t = {r["term"]: r for r in res.term_gaps}
    # against the median of the other terms' fillings: a vs median(0.7, 0.6) = 0.65; b vs 0.55; c vs 0.6
    assert t["a"]["value"] == pytest.approx(0.15) and t["a"]["mean_change_towards"] == pytest.approx(-0.15)
    assert t["b"]["value"] == pytest.approx(0.15) and t["c"]["value"] == pytest.approx(0.0)
    # against the control words: mean(|f − 0.55|, |f − 0.45|)
    assert [t[k]["control_gap"] for k in "abc"] == pytest.approx([0.05, 0.2, 0.1])
    assert t["b"]["excess"] == pytest.approx(0.2 - 0.1)                       # the band |0.55 − 0.45|
    # the swaps a → b and a → c: a's mean |change| 0.15, b's 0.2, c's 0.1
    assert [t[k]["swap_gap"] for k in "abc"] == pytest.approx([0.15, 0.2, 0.1])


def test_template_complete_null_at_the_margin_holds_its_size():
    """Every context filled with every term, every term's true gap exactly at the margin: "differs" ≤ α/2 and
    "equivalent" ≤ α per term and for the summary (rows as the unit gave 13% and 40%)."""
    design = CTFDesign(n_terms=6, n_contexts=30)
    summary, terms = [], []
    for run in range(40):
        verdict, recs = run_audit(design, 100 + run, n_boot=200)
        summary.append(verdict)
        terms += [t["verdict"] for t in recs]
    assert summary.count("differs") <= 2 and summary.count("equivalent within margin") <= 2
    assert terms.count("differs") / len(terms) <= 0.025
    assert terms.count("equivalent within margin") / len(terms) <= 0.05


def test_contexts_group_sentences_without_their_terms_repeats_and_templates():
    from fairdesk.core.text.counterfactual import load_terms

    ts = [load_terms("dixon")]
    ids, source = contexts(["I am gay", "i am Muslim", "I am gay", "you are gay", "You are  a jewish person"], ts)
    assert source == "sentence" and ids[0] == ids[1] == ids[2] and len(set(ids.tolist())) == 3
    ids, source = contexts(["a", "b", "c"], ts, templates=["x", "y", "x"])
    assert source == "template" and ids.tolist() == [0, 1, 0]
    with pytest.raises(DataError, match="template column is empty"):
        contexts(["a", "b"], ts, templates=["x", None])


def test_repeated_rows_are_one_context_and_do_not_narrow_the_interval():
    """The same table with every row written three times: same gaps, intervals no narrower (one context each)."""
    design = CTFDesign(n_terms=5, n_contexts=20, layout="sparse")
    frame, _ = simulate_scored_pairs(design, 3)
    tripled = frame.loc[frame.index.repeat(3)].copy()
    tripled["id"] = tripled["id"].astype(str) + "_" + (tripled.groupby(level=0).cumcount()).astype(str)
    one = ctf_from_scored_pairs(frame, n_boot=400, seed=0).ctf_gap[0]
    three = ctf_from_scored_pairs(tripled, n_boot=400, seed=0).ctf_gap[0]
    assert three["value"] == pytest.approx(one["value"]) and three["n_contexts"] == one["n_contexts"] == 20
    width = lambda r: r["ci_high"] - r["ci_low"]  # noqa: E731
    assert width(three) > 0.8 * width(one)


def test_template_column_is_the_unit_and_is_checked():
    design = CTFDesign(n_terms=4, n_contexts=24, n_templates=6, rho=0.7)
    frame, col = simulate_scored_pairs(design, 4)
    res = ctf_from_scored_pairs(frame, n_boot=200, template_col=col)
    assert res.ctf_gap[0]["n_contexts"] == 6 and res.settings["resampling_unit"] == "template"
    with pytest.raises(DataError, match="no column 'tpl'"):
        ctf_from_scored_pairs(frame, n_boot=200, template_col="tpl")
    bad = frame.copy()
    bad.loc[bad.index[0], col] = "another"
    with pytest.raises(DataError, match="two different values in the template column"):
        ctf_from_scored_pairs(bad, n_boot=200, template_col=col)


def test_holm_and_bh_both_correct_one_family():
    frame, _ = simulate_scored_pairs(CTFDesign(n_terms=6, n_contexts=20, planted=0.1, background=0.005), 5)
    from fairdesk.core.stats.multiple import holm

    res = ctf_from_scored_pairs(frame, n_boot=300, correction="holm")
    p = [t["p_differs"] for t in res.term_gaps]
    assert np.allclose([t["q_differs"] for t in res.term_gaps], holm(p))
    with pytest.raises(DataError, match="Unknown correction"):
        ctf_from_scored_pairs(frame, n_boot=300, correction="bonferroni")


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_over_random_designs_a_planted_term_is_never_certified(seed):
    """Any layout, number of terms, contexts, duplicates, templates and planted effect (0.05–0.25): neither the
    summary nor the planted term is ever "equivalent"."""
    design = draw_design(np.random.default_rng(seed), planted=True)
    verdict, terms = run_audit(design, seed, n_boot=200)
    planted = next(t for t in terms if t["term"] == "idterm00")
    assert not verdict.startswith("equivalent") and not planted["verdict"].startswith("equivalent")


def test_over_random_designs_size_at_the_margin_and_power():
    """Random designs of the stated space (4–60 terms, complete or sparse, templates, duplicates), fixed seeds:
    under the null at the margin the summary says "differs" in at most 1 of 12 audits; with 1 to T − 1 biased
    terms (|δ| 0.05–0.25, the others at the margin) an unbiased term says "differs" in at most 1 of 12 audits,
    at least 80% of the planted terms are found and none is certified (``bench validity --family ctf``: the
    full version)."""
    from fairdesk.core.synthetic.ctf_sim import planted_audit

    rng = np.random.default_rng(44)
    null = [run_audit(draw_design(rng, planted=False), 1000 + i, n_boot=200)[0] for i in range(12)]
    assert null.count("differs") <= 1 and null.count("equivalent within margin") <= 1
    runs = [planted_audit(draw_design(rng, planted=True), 2000 + i, n_boot=200) for i in range(12)]
    assert sum(r["false_differs"] > 0 for r in runs) <= 1
    found = [f for r in runs for f in r["found"]]
    assert sum(found) >= 0.8 * len(found) and not any(r["certified"] for r in runs)


def test_validity_ctf_family_rows():
    from fairdesk.core.validity import run_validity

    res = run_validity("ctf", runs=2, seed=1)
    assert [r.kind for r in res.rows] == ["null", "null", "null", "null", "null", "planted", "planted"]
    assert all(r.family == "ctf" for r in res.rows)
    assert [r.runs for r in res.rows if r.level == "whole audit"] == [2] * 6   # the found row counts terms
    assert res.rows[-1].target == "≤ 0.00" and res.rows[-2].target == "≥ 0.80"
    assert any("ctf:" in n for n in res.notes)


def test_cli_ctf_scores_template_col_and_the_terms_named(tmp_path, capsys):
    """`audit ctf-scores --template-col COL` resamples templates; a missing column exits 2 naming the option; the
    CLI summary and the report's first page name the term that differs, in words."""
    from fairdesk.cli import main
    from fairdesk.core.kinds import ReportSettings
    from fairdesk.core.reports.ctf import report_tree

    frame, col = simulate_scored_pairs(CTFDesign(n_terms=5, n_contexts=40, n_templates=20, planted=0.2,
                                                 background=0.002), 7)
    scores = tmp_path / "scored.csv"
    frame.to_csv(scores, index=False)
    out = tmp_path / "a.json"
    assert main(["audit", "ctf-scores", "--scores", str(scores), "--template-col", "nope", "--json", str(out),
                 "--n-boot", "200", "--quiet"]) == 2
    assert "--template-col" in capsys.readouterr().err
    assert main(["audit", "ctf-scores", "--scores", str(scores), "--template-col", col, "--correction", "holm",
                 "--json", str(out), "--n-boot", "300", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "swapping in 'idterm00' raises the score by 0.2" in printed
    import json

    doc = json.loads(out.read_text())
    assert doc["settings"]["resampling_unit"] == "template" and doc["ctf_gap"][0]["n_contexts"] == 20
    assert doc["settings"]["correction"] == "holm" and doc["data"]["template_column"] == col
    summary = report_tree(doc, ReportSettings(suppress_k=11)).section("summary")
    text = " ".join(getattr(b, "text", "") for b in summary.blocks)
    assert "swapping in 'idterm00' raises the score by 0.2" in text and "differs" in text
