"""The fairness monitor: the normal-mixture boundary against hand-computed and published forms and a simulation;
per-period rates, whole-patient variances and the confidence sequence by hand; merging periods (new periods, late
labels, refusals); chunked and one-call runs agree (Hypothesis over random chunkings, through the job); small
fixed-seed null and planted streams (the full-size ones: ``fairdesk-cli bench validity --family monitor``)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from fairdesk.core.audits.monitor import (MonitorPlan, cluster_sums, merge_stream, prepare_stream,
                                          rate_and_variance, run_monitor)
from fairdesk.core.errors import DataError
from fairdesk.core.stats.sequential import (confidence_sequence, normal_mixture_radius, start_weights,
                                            tuned_rho)
from fairdesk.core.synthetic.monitor_sim import simulate_stream, stream_plan

# --------------------------------------------------------------------------------------------------------------
# The boundary


def test_normal_mixture_radius_by_hand():
    # sqrt((V + ρ) log((V + ρ)/(ρ α²))): V = 1, ρ = 1, α = 0.05 -> sqrt(2 log 800)
    assert normal_mixture_radius(1.0, 1.0, 0.05) == pytest.approx(3.656395, abs=1e-6)
    # V = 100, ρ = 10, α = 0.1 -> sqrt(110 log 1100)
    assert normal_mixture_radius(100.0, 10.0, 0.1) == pytest.approx(27.75494, abs=1e-5)
    # ρ = V*/(2 log(1/α) + log(1 + 2 log(1/α))): V* = 100, α = 0.05 -> 100/7.936153
    assert tuned_rho(100.0, 0.05) == pytest.approx(12.60056, abs=1e-5)


def test_boundary_is_waudby_smith_asymptotic_cs():
    """Waudby-Smith et al. (2024), Theorem 2.2: the mean's half-width σ·sqrt(2(tρ²+1)/(t²ρ²)·log(sqrt(tρ²+1)/α)),
    written independently here, is the boundary at V = tσ², ρ_H = σ²/ρ², divided by t."""
    for t, sigma, rho, alpha in ((10, 0.5, 0.3, 0.05), (1000, 2.0, 0.05, 0.01), (37, 0.2, 1.5, 0.2)):
        ws = sigma * math.sqrt(2 * (t * rho**2 + 1) / (t**2 * rho**2) * math.log(math.sqrt(t * rho**2 + 1) / alpha))
        ours = normal_mixture_radius(t * sigma**2, sigma**2 / rho**2, alpha) / t
        assert ours == pytest.approx(ws, rel=1e-12)


def test_boundary_crossing_rate_of_random_walks_is_at_most_alpha():
    """Robbins' mixture: Gaussian random walks cross ±u(V) at some step in at most α of paths (Brownian paths in
    exactly α; discrete steps cross less), and far more than a fixed-sample 95% interval looked at every step."""
    rng = np.random.default_rng(7)
    steps, paths, alpha = 400, 4000, 0.05
    s = np.cumsum(rng.standard_normal((paths, steps)), axis=1)
    v = np.arange(1, steps + 1, dtype=float)
    u = normal_mixture_radius(v, tuned_rho(50.0, alpha), alpha)
    crossed = (np.abs(s) >= u).any(axis=1).mean()
    assert 0.01 < crossed <= alpha + 0.01
    naive = (np.abs(s) >= 1.96 * np.sqrt(v)).any(axis=1).mean()
    assert naive > 0.4  # (0.47 with this seed: an interval read 400 times)


def test_start_weights_sum_to_one_and_cs_centre():
    assert sum(start_weights(j) for j in range(1, 100_000)) == pytest.approx(1.0, abs=1e-4)
    est, lo, hi = confidence_sequence(2.0, 4.0, 10.0, 1.0, 0.05)
    r = float(normal_mixture_radius(4.0, 1.0, 0.05)) / 10.0
    assert (est, lo, hi) == pytest.approx((0.2, 0.2 - r, 0.2 + r))


# --------------------------------------------------------------------------------------------------------------
# Per-period rates and the sequence by hand


def _tiny() -> pd.DataFrame:
    """Two months; group A: recall 2/4 then 1/2; group B: 3/4 then 4/4 (all positives; a few negatives)."""
    rows = []
    for month, a_hits, a_n, b_hits, b_n in (("2026-01", 2, 4, 3, 4), ("2026-02", 1, 2, 4, 4)):
        for g, hits, n in (("A", a_hits, a_n), ("B", b_hits, b_n)):
            rows += [{"y": 1, "p": 0.9 if i < hits else 0.1, "g": g, "m": month} for i in range(n)]
            rows += [{"y": 0, "p": 0.1, "g": g, "m": month}]
    return pd.DataFrame(rows)


def test_rates_variance_and_sequence_by_hand():
    plan = MonitorPlan(label="y", score="p", attributes=("g",), threshold=0.5, period="m", metrics=("recall",))
    res = run_monitor(_tiny(), plan)
    assert res.comparisons == 2  # A vs rest and B vs rest, recall
    rec = res.records.set_index(["group", "period"])
    a1, a2 = rec.loc[("A", "2026-01")], rec.loc[("A", "2026-02")]
    assert (a1["n"], a1["rest_n"], a1["rate"], a1["rest_rate"]) == (4, 4, 0.5, 0.75)
    assert a1["period_gap"] == pytest.approx(-0.25)
    # rows are clusters: r(1 − r)/(n − 1) per side
    assert a1["period_se"] == pytest.approx(math.sqrt(0.25 / 3 + 0.1875 / 3))
    # period 2: the rest's recall is 4/4, every cluster agrees -> (Y+½)/(M+1) = 0.9 binomial variance
    assert a2["period_se"] == pytest.approx(math.sqrt(0.25 / 1 + 0.9 * 0.1 / 4))
    # the sequence at period 2 over the whole stream (no alarm): weights MgMr/(Mg+Mr) = 2 and 4/3
    w1, w2 = 2.0, 4.0 / 3.0
    d1, d2 = -0.25, -0.5
    v1, v2 = 0.25 / 3 + 0.1875 / 3, 0.25 + 0.09 / 4
    s, v, w = w1 * d1 + w2 * d2, w1**2 * v1 + w2**2 * v2, w1 + w2
    r = float(normal_mixture_radius(v, tuned_rho(4 * w1 / 4.0, 0.05 / 2), 0.05 / 2 * start_weights(1))) / w
    assert not a2["alarm"] and a2["since"] == "2026-01"
    assert (a2["gap"], a2["cs_low"], a2["cs_high"]) == pytest.approx((s / w, s / w - r, s / w + r))
    assert res.alarms == []


def test_whole_patients_a_duplicated_row_adds_no_information():
    """Each row given twice for the same patient in the same period: with --patient-id the variance is that of the
    original rows (the cluster sums scale together); read as independent rows it would be half."""
    df = simulate_stream(3, months=2, per_month=200).drop(columns="pid")
    df["pid"] = [f"q{i}" for i in range(len(df))]
    twice = pd.concat([df, df], ignore_index=True)
    plan = MonitorPlan(label="y", score="p", attributes=("eth",), threshold=0.3, period="month", patient_id="pid")
    rows = MonitorPlan(label="y", score="p", attributes=("eth",), threshold=0.3, period="month")
    one = run_monitor(df, plan).records
    clustered = run_monitor(twice, plan).records
    naive = run_monitor(twice, rows).records
    assert np.allclose(one["period_se"], clustered["period_se"])
    assert np.allclose(one["period_gap"], clustered["period_gap"])
    assert (naive["period_se"] < 0.75 * one["period_se"]).all()


def test_cluster_sums_match_a_loop():
    rng = np.random.default_rng(1)
    n = 300
    p, g = rng.integers(0, 3, n), rng.integers(-1, 2, n)
    c = rng.integers(0, 40, n).astype(object)
    den, hit = rng.random(n) < 0.7, rng.random(n) < 0.5
    sums = cluster_sums(p, g, c, den, hit, 3, 2)
    for pi in range(3):
        for gi in range(2):
            keep = (p == pi) & (g == gi) & den
            per = pd.DataFrame({"c": c[keep], "m": 1.0, "y": hit[keep].astype(float)}).groupby("c").sum()
            expect = [per.m.sum(), per.y.sum(), (per.y**2).sum(), (per.y * per.m).sum(), (per.m**2).sum(), len(per)]
            assert sums[pi, gi] == pytest.approx(expect)
    r, v = rate_and_variance(sums[0, 0])
    assert r == pytest.approx(sums[0, 0, 1] / sums[0, 0, 0])


# --------------------------------------------------------------------------------------------------------------
# The stream: merging, late labels, refusals


PLAN = MonitorPlan(label="y", score="p", attributes=("eth",), threshold=0.3, period="month", patient_id="pid")


def test_late_labels_update_their_period_only():
    full = simulate_stream(5, months=5, per_month=200, gap=0.2, onset=3)
    late = full.copy()
    last = late["month"] == "2025-05"
    hide = last & (np.arange(len(late)) % 3 == 0)
    late["y"] = late["y"].astype(float).where(~hide)
    stream, what = merge_stream(None, prepare_stream(late, PLAN), PLAN)
    before = run_monitor(stream, PLAN)
    assert any("without a label yet" in w for w in before.warnings)
    stream2, what2 = merge_stream(stream, prepare_stream(full[last], PLAN), PLAN)
    assert what2 == {"added": [], "updated": ["2025-05"], "unchanged": []}
    after = run_monitor(stream2, PLAN).to_dict()
    once = run_monitor(full, PLAN).to_dict()
    assert after["monitor"] == once["monitor"] and after["alarms"] == once["alarms"]
    b = before.to_dict()["monitor"]
    for x, y in zip(b, after["monitor"]):
        if x["period"] < "2025-05":
            assert x == y  # earlier periods untouched


def test_a_stored_period_with_other_rows_is_refused():
    df = simulate_stream(6, months=3, per_month=100)
    stream, _ = merge_stream(None, prepare_stream(df, PLAN), PLAN)
    changed = df[df["month"] == "2025-02"].copy()
    changed.loc[changed.index[0], "p"] = 0.99
    with pytest.raises(DataError, match=r"^Period 2025-02 is already stored with other rows"):
        merge_stream(stream, prepare_stream(changed, PLAN), PLAN)
    # the same rows in another order are the same period
    same = df[df["month"] == "2025-02"].sample(frac=1.0, random_state=1)
    assert merge_stream(stream, prepare_stream(same, PLAN), PLAN)[1]["unchanged"] == ["2025-02"]
    # a period before the last stored one: refused
    earlier = df[df["month"] == "2025-01"].assign(month="2024-12")
    with pytest.raises(DataError, match="comes before the last stored period"):
        merge_stream(stream, prepare_stream(earlier, PLAN), PLAN)


@pytest.mark.parametrize("change, message", [
    (lambda d: d.assign(p=d["p"] + 1.0), "score column 'p' must hold numbers from 0 to 1"),
    (lambda d: d.assign(y=2), "label column 'y' must hold 0/1 or be empty"),
    (lambda d: d.assign(month=None), "period column 'month' is empty"),
    (lambda d: d.assign(month=[str(i % 12 + 1) for i in range(len(d))]), "must sort as text"),
    (lambda d: d.drop(columns="eth"), "no column 'eth'"),
])
def test_bad_input_one_sentence(change, message):
    df = simulate_stream(1, months=2, per_month=60)
    with pytest.raises(DataError, match=message) as err:
        prepare_stream(change(df), PLAN)
    assert "\n" not in str(err.value)


def test_plan_refuses_bad_options():
    with pytest.raises(DataError, match="--metric 'error' is not known"):
        MonitorPlan(label="y", score="p", attributes=("eth",), threshold=0.3, period="month", metrics=("error",))
    with pytest.raises(DataError, match="--alpha"):
        MonitorPlan(label="y", score="p", attributes=("eth",), threshold=0.3, period="month", alpha=0.9)
    with pytest.raises(DataError, match="at least one --attribute"):
        MonitorPlan(label="y", score="p", attributes=(), threshold=0.3, period="month")


# --------------------------------------------------------------------------------------------------------------
# Chunked and one-call runs agree (through the job and the project, as the CLI and the GUI run it)


STREAM = simulate_stream(11, months=6, per_month=300, gap=0.4, onset=2)
MONTHS = sorted(STREAM["month"].unique())


@settings(max_examples=6, deadline=None, phases=[Phase.explicit, Phase.generate],  # (no slow shrinking)
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.sets(st.integers(1, len(MONTHS) - 1), max_size=3), seed=st.integers(0, 1000),
       resend=st.booleans())
def test_chunked_runs_equal_one_call(tmp_path_factory, cuts, seed, resend):
    from fairdesk.core.project import Project
    from fairdesk.jobs.monitor import watch_model

    tmp = tmp_path_factory.mktemp("chunks")
    plan = stream_plan()
    edges = [0, *sorted(cuts), len(MONTHS)]

    def add(project, frame, name):
        p = Project(project)
        return watch_model(project, p.add_dataset(name, frame, "x" * 64), plan)

    chunked = tmp / "chunked.fairdesk"
    for i, (a, b) in enumerate(zip(edges, edges[1:])):
        part = STREAM[STREAM["month"].isin(MONTHS[a:b])].sample(frac=1.0, random_state=seed + i)
        if resend and i:  # the previous chunk again (unchanged rows) with the new one
            part = pd.concat([part, STREAM[STREAM["month"].isin(MONTHS[edges[i - 1]:a])]])
        last = add(chunked, part, f"chunk {i}")
    one = tmp / "one.fairdesk"
    whole = add(one, STREAM, "all")
    x = Project(chunked, create=False).audit_document(last)
    y = Project(one, create=False).audit_document(whole)
    for key in ("monitor", "alarms", "context", "periods", "changes", "comparisons"):
        assert x[key] == y[key], key
    assert y["alarms"], "the planted gap should be alarmed, or agreement proves little"


# --------------------------------------------------------------------------------------------------------------
# Small fixed-seed streams (full size: bench validity --family monitor)


def test_null_streams_rarely_alarm_and_a_planted_gap_is_found():
    null_alarms = sum(bool(run_monitor(simulate_stream(100 + s, months=10, per_month=800), stream_plan()).alarms)
                      for s in range(6))
    assert null_alarms <= 1
    for s in range(3):
        res = run_monitor(simulate_stream(200 + s, months=10, per_month=1500, gap=0.3, onset=4), stream_plan())
        hit = [a for a in res.alarms if a["group"] == "A" and a["metric"] == "recall"]
        assert hit and hit[0]["first_period"] >= "2025-04" and hit[0]["gap"] < 0
        assert hit[0]["cs_high"] < 0


def test_bench_validity_family_monitor_is_wired():
    """``bench validity --family monitor`` (one stream per design here; 100 in the bench): the monitor's rows, the
    naive and the fixed-horizon comparators, null and planted, with the monitor's targets."""
    from fairdesk.core.validity import FAMILIES, run_validity

    assert "monitor" in FAMILIES
    res = run_validity("monitor", runs=1, seed=3)
    rows = res.rows
    assert [r.kind for r in rows] == ["null"] * 3 + ["planted"] * 3 and {r.family for r in rows} == {"monitor"}
    assert rows[0].target == "≤ 0.05" and rows[3].target == "≥ 0.50"
    assert rows[0].rejections == 0  # the monitor on a null stream
    assert rows[1].rejections == 1  # the naive monthly test on the same stream
    assert any("median delay" in n for n in res.notes)


def test_an_alarm_over_withheld_counts_is_told_as_its_band_not_its_midpoint():
    """A released alarm carries the band its small counts allow: page 1, the GUI and the model card say the band
    (and the sequence rounded outward when there is one), never the band's midpoint as if it were the estimate."""
    from fairdesk.core.reports.monitor import alarm_sentence, gap_words

    a = {"metric": "recall", "attribute": "ethnicity", "group": "B", "task": "sepsis", "since": "2026-03",
         "first_period": "2026-05", "period": "2026-06", "alarm_now": True, "gap": -0.15, "gap_band": [-0.2, -0.1],
         "cs_low": -0.3, "cs_high": -0.1}
    text = alarm_sentence(a)
    assert "lower by 0.10 to 0.20 (a band: small counts withheld; sequence −0.30 to −0.10)" in text.replace("-", "−")
    assert "0.15" not in text
    assert gap_words(0.05, None, None, [0.0, 0.1]).startswith("higher by 0.00 to 0.10")
    assert gap_words(0.0, None, None, [-0.1, 0.1]).startswith("between 0.10 lower and 0.10 higher")
    assert gap_words(-0.15, -0.22, -0.08) == "lower by 0.15 (0.08 to 0.22)"
    assert gap_words(None, None, None, [None, 0.1]) == "not estimable"
