"""Issue 21, the map's "unclear" regions: designs targeted to a region (``bench validity --design-space --region``)
and each region's verdict on both targets (meets / fails / unclear(n)) with whether it lies inside VERIFIED."""
import json
from dataclasses import asdict

import numpy as np
import pandas as pd
import pytest

from fairdesk.core.errors import DataError
from fairdesk.core.stats.verified_region import case_patients, cases_of
from fairdesk.core.synthetic import design_space as DS


def _realised_regions(d: DS.Design, rng) -> set[str]:
    """The regions one data set of ``d`` fills, from its groups' observed cases and patients (no audit needed)."""
    df = DS.simulate(d, rng)
    stats = [(len(g), int(g["y"].sum()), g["pid"].nunique()) for _, g in df.groupby("group")]
    nulls = DS.null_measures(d)
    out = set()
    for m in DS.PAIR_MEASURES:
        if m in DS.NULL_GAPS and DS.NULL_GAPS[m] not in nulls:
            continue
        base = m.removesuffix(" gap")
        for i, a in enumerate(stats):
            for b in stats[i + 1:]:
                cases = min(cases_of(base, n, k) for n, k, _ in (a, b))
                pats = min(case_patients(base, n, k, p) for n, k, p in (a, b))
                out.add(f"{m} | {DS.region_of(m, cases, d.clustered, pats, d.auroc)}")
    return out


@pytest.mark.parametrize("region", ["parity gap | independent, ≥300 cases",
                                    "auprc gap | independent, 10–29 cases",
                                    "recall gap | clustered, 0–9 case patients",
                                    "auroc gap | independent, 30–99 cases; AUROC ≥ 0.99"])
def test_targeted_designs_reach_their_region(region):
    rng = np.random.default_rng(3)
    hits = 0
    for _ in range(25):
        d = DS.draw_targeted(rng, (region,))
        assert any(e.startswith(region) for e in DS.expected_regions(d))
        hits += any(r.startswith(region) for r in _realised_regions(d, rng))
    # the expected counts are the realised ones up to sampling noise at a band's edge
    assert hits >= 20, hits
    # the untargeted space reaches these regions far less often (why targeting is needed to resolve them)
    plain = sum(any(e.startswith(region) for e in DS.expected_regions(DS.draw_design(rng))) for _ in range(200))
    assert plain < 0.8 * 200


def test_regions_are_typed_as_the_map_prints_them():
    assert DS.parse_regions(["parity gap|independent, >=300 cases", "auprc gap | independent, 10-29 cases"]) == (
        "parity gap | independent, ≥300 cases", "auprc gap | independent, 10–29 cases")
    names = DS.region_names()
    assert "calibration_slope | clustered, ≥100 case patients; AUROC ≥ 0.99" in names
    for bad in ("parity", "parity gap | independent, 7 cases", "nonsense | independent"):
        with pytest.raises(DataError, match="--region"):
            DS.parse_regions([bad])


def test_region_verdict_says_meets_fails_or_unclear_with_its_evidence():
    def row(size_v, n_null, cov_v, n_int):
        return {"size_verdict": size_v, "n_null_tests": n_null, "coverage_verdict": cov_v, "n_intervals": n_int}

    assert DS.region_verdict(row("meets", 40, "meets", 40)) == "meets"
    assert DS.region_verdict(row("unclear", 12, "meets", 40)) == "unclear(12)"
    assert DS.region_verdict(row("unclear", 12, "misses", 40)) == "fails"
    assert DS.region_verdict(row("—", 0, "unclear", 25)) == "unclear(25)"
    assert DS.region_verdict(row("—", 0, "—", 0)) == "—"
    # a region table: 2 of 40 null tests rejected meets; 6 of 40 is unclear; 12 of 40 fails
    rows = pd.concat([pd.DataFrame({"measure": "parity gap", "kind": "test", "null": True,
                                    "rejected": [True] * k + [False] * (40 - k), "covered": True, "cases": c,
                                    "clustered": False, "patients": c, "auroc": 0.8})
                      for k, c in ((2, 50), (6, 150), (12, 500))], ignore_index=True)
    assert DS.region_table(rows)["verdict"].tolist() == ["meets", "unclear(40)", "fails"]


def test_cli_targets_a_region_and_prints_each_verdict(tmp_path, capsys):
    from fairdesk.cli import main

    out = tmp_path / "m.json"
    code = main(["bench", "validity", "--design-space", "--designs", "1", "--n-boot", "100", "--quiet",
                 "--region", "parity gap | independent, >=300 cases", "--json", str(out)])
    text = capsys.readouterr().out
    assert code == 0
    head = text.splitlines()[0]
    assert "verdict" in head and "VERIFIED" in head
    assert "designs drawn targeted to: parity gap | independent, ≥300 cases" in text
    assert "regions:" in text and " meet, " in text
    doc = json.loads(out.read_text())
    assert doc["config"]["regions"] == ["parity gap | independent, ≥300 cases"]
    assert any(r["measure"] == "parity gap" and r["region"] == "independent, ≥300 cases" for r in doc["regions"])
    assert all("verdict" in r for r in doc["regions"])
    code = main(["bench", "validity", "--design-space", "--designs", "1", "--region", "parity | somewhere",
                 "--json", str(tmp_path / "bad.json")])
    assert code == 2 and "--region" in capsys.readouterr().err and not (tmp_path / "bad.json").exists()
    code = main(["bench", "validity", "--region", "parity gap | independent, ≥300 cases", "--json",
                 str(tmp_path / "v.json")])
    assert code == 2 and "--design-space" in capsys.readouterr().err


@pytest.mark.parametrize("mode", DS.SPACE["modes"])
def test_every_drawn_design_keeps_its_null_exactly(mode):
    """A design's null gaps are equal in every group at the threshold the audit uses. Before: the parity mode solved
    the groups' shifts for the drawn flag rate, not for the threshold as clipped to [1e-4, 1 − 1e-4]; near AUROC 1 the
    clip binds and the first group's rate stood apart (160 of 3,000 parity designs), so the map counted real gaps
    as null tests and reported a parity size of 0.077 at ≥ 300 rows (0.065 without those designs)."""
    rng = np.random.default_rng(0)
    for _ in range(800):
        d = DS.draw_design(rng, {"modes": (mode,)})
        true = d.true_rates()
        for m in {"parity", "recall", "specificity"} & DS.null_measures(d):
            assert np.ptp(true[m]) < 1e-9, (m, d)


def test_resolve_gives_unclear_regions_their_designs_data_sets_and_targeted_designs():
    region = ("parity gap", "independent, ≥300 cases")
    space = {**DS.SPACE, "groups": (2, 3), "rows_per_group": (300, 600), "modes": ("parity",),
             "share_clustered": 0.0}
    design = asdict(DS.draw_design(np.random.default_rng(5), space))
    rows = pd.DataFrame({"design": 0, "mode": "parity", "measure": region[0], "kind": "test", "null": True,
                         "rejected": [True] * 6 + [False] * 34, "covered": True, "cases": 500, "clustered": False,
                         "patients": 500, "auroc": 0.8, "max_rows_per_patient": 1})
    first = DS.DesignSpaceResult(rows, [design], {"seed": 5, "n_boot": 100, "space": space, "truth_rows": 5000}, 1.0)
    assert first.regions()["verdict"].tolist() == ["unclear(40)"]
    second = DS.resolve_unclear(first, datasets=3)  # one look: a second data set of design 0 and 2 new designs
    assert second.config["resolution"][" | ".join(region)]["look"] == 1 and second.config["designs_total"] == 3
    assert second.config["resolve_audited"] == 3 and second.config["resolve_looks"] == 1
    new = second.rows[second.rows["look"] == 1]
    assert set(new["design"]) == {0, 1, 2} and (new["measure"] == region[0]).any() and (new["cases"] >= 300).any()
    assert DS.resolve_unclear(second.__class__(rows.assign(rejected=False), [design], first.config, 1.0), 5).config \
        == first.config  # nothing unclear: nothing drawn
    text = DS.format_regions(second)
    assert "second pass (--resolve 3): 1 unclear region(s), 1 look(s), 3 data sets audited" in text


def test_region_interval_counts_designs_not_correlated_tests():
    """40 designs of 8 groups (28 pairs each): in 3 designs one unlucky group makes 7 pairs reject, in the others
    none — 21 of 1,120 tests (0.019) but only 3 of 40 designs. The plain Clopper–Pearson interval counted 1,120
    independent trials ([0.012, 0.029]); the Korn–Graubard effective-sample-size interval reaches 0.053, and a region
    whose every design rejects at the same rate keeps the plain interval."""
    rej = np.zeros((40, 28), bool)
    rej[:3, :7] = True
    rows = pd.DataFrame({"design": np.repeat(np.arange(40), 28), "measure": "parity gap", "kind": "test",
                         "null": True, "rejected": rej.ravel(), "covered": True, "cases": 500, "clustered": False,
                         "patients": 500, "auroc": 0.8})
    reg = DS.region_table(rows).iloc[0]
    plain = DS.region_table(rows.drop(columns="design")).iloc[0]
    assert abs(reg["size"] - 21 / 1120) < 1e-12 and reg["size"] == plain["size"]
    assert reg["size_ci_high"] > 1.5 * plain["size_ci_high"] and reg["size_ci_low"] < plain["size_ci_low"]
    # one design, or the same share rejected in every design: no design effect beyond G/(G − 1)
    even = rows.assign(rejected=np.tile(np.arange(28) < 2, 40))
    e, p = DS.region_table(even).iloc[0], DS.region_table(even.drop(columns="design")).iloc[0]
    assert abs(e["size_ci_high"] - p["size_ci_high"]) < 0.01
