"""Issue 21: the power two conservative tests of the group audit give away — the AUROC gap near AUROC 1 and the
recall gap with fewer than 10 patients among the positives (the design-space map: size 0.000 in both regions).

For each design, null and planted data sets go through the product's ``run_group_audit``; the rows are the test's
size and power at α = 0.05 and its **size-calibrated power**: the share of planted p-values below the 5% quantile of
the null p-values of the same design (the power the same statistic would have with its critical value set so that
its size is exactly α; an oracle no audit can use, the upper bound of what a better reference law could recover).
Numbers in docs/methods.md ("The map's unclear regions resolved" and "The two conservative tests").

* ``auroc``, ``recall``: the product's tests (run the module from an older checkout for the numbers before).
* ``auroc-candidates``: the AUROC pair test near 1 against the alternatives measured for it (formula level, the
  audit's own statistic reproduced exactly; binormal, tied, unequal-shape and exponential score distributions).
* ``auroc-scale``: the AUROC pair test on the cube-root scale (now) against the logit scale (before), also with an
  overlap gate, over the fixed designs and over ``--designs`` designs drawn near AUROC 1 with random score shapes.
* ``cost``: the P1 workload with whole patients against ``--baseline DIR`` (alternating processes, CPU seconds).

``python -m benchmarks.bench_conservative_tests [--runs 300] [--part auroc|recall|auroc-candidates|auroc-scale|cost|all]``
"""
from __future__ import annotations

import argparse
import math

import numpy as np
import pandas as pd

ALPHA = 0.05


def _plan(roles, **kw):
    from fairdesk.core.audits.groups import GroupAuditPlan

    return GroupAuditPlan(roles, **{"threshold": 0.5, "n_boot": 100, "calibration": False, **kw})


def auroc_pair(rng, auc_a, auc_b, n1, n0):
    """Two groups of the binormal equal-variance model (the map's), n1 positives and n0 negatives each."""
    from scipy.special import expit, ndtri

    frames = []
    for name, auc in (("A", auc_a), ("B", auc_b)):
        d = math.sqrt(2) * ndtri(auc)
        y = np.r_[np.ones(n1, int), np.zeros(n0, int)]
        frames.append(pd.DataFrame({"y": y, "s": expit(-2 + d * y + rng.standard_normal(y.size)), "g": name}))
    return pd.concat(frames, ignore_index=True)


def recall_pair(rng, recall_a, recall_b, pos_patients=8, neg_patients=150, max_rows=30, patient_sd=1.5):
    """Two groups of whole patients with 1–``max_rows`` rows each (uniform): ``pos_patients`` positive patients and
    ``neg_patients`` negative ones per group; a positive row is flagged with probability expit(logit r + u), u a
    patient effect N(0, ``patient_sd``²) (recall about r); negatives flagged with probability 0.1."""
    from scipy.special import expit, logit

    frames, first = [], 0
    for name, r in (("A", recall_a), ("B", recall_b)):
        k = pos_patients + neg_patients
        m = rng.integers(1, max_rows + 1, k)
        pid = np.repeat(np.arange(first, first + k), m)
        first += k
        y = np.repeat((np.arange(k) < pos_patients).astype(int), m)
        u = np.repeat(rng.normal(0, patient_sd, k), m)
        flag = rng.random(pid.size) < np.where(y == 1, expit(logit(r) + u), 0.1)
        frames.append(pd.DataFrame({"y": y, "s": np.where(flag, 0.8, 0.2), "g": name, "pid": pid}))
    return pd.concat(frames, ignore_index=True)


def replicate_p_values(make, runs, rng, metric, roles_kw, seed=0, calibration=False, metrics=("recall",)):
    """p-values of ``metric``'s pair tests over ``runs`` data sets drawn by ``make(rng)``, audited as ``runs``
    tasks of one ``run_group_audit`` (each task its own bootstrap stream; 20–40× faster than one audit per data
    set, which the fixed-seed tests need). Patient ids are made distinct across data sets."""
    from fairdesk.core.audits.groups import run_group_audit
    from fairdesk.core.data.schema import ColumnRoles

    frames = []
    for r in range(runs):
        df = make(rng).assign(rep=f"r{r:04d}")
        if "pid" in df:
            df["pid"] = df["pid"].astype(np.int64) + 1_000_000 * r
        frames.append(df)
    roles = ColumnRoles(label="y", score="s", attributes=("g",), task="rep", **roles_kw)
    t = run_group_audit(pd.concat(frames, ignore_index=True),
                        _plan(roles, seed=seed, metrics=metrics, calibration=calibration)).tests
    return t.loc[(t["metric"] == metric) & (t["kind"] == "pair"), "p_value"].dropna().to_numpy()


def study(make, runs, seed, metric, roles_kw, calibration=False):
    """(size, power, size-calibrated power, tests) of ``metric``'s pair test over ``runs`` null and planted sets
    (:func:`replicate_p_values`: the data sets as tasks of one audit)."""
    p = {kind: replicate_p_values(lambda rng, kind=kind: make(rng, kind), runs,
                                  np.random.default_rng([seed, kind == "planted"]), metric, roles_kw, seed=seed,
                                  calibration=calibration, metrics=("parity", "recall"))
         for kind in ("null", "planted")}
    crit = np.quantile(p["null"], ALPHA) if p["null"].size else math.nan
    return {"size": round(float((p["null"] <= ALPHA).mean()), 3),
            "power": round(float((p["planted"] <= ALPHA).mean()), 3),
            "size-calibrated power": round(float((p["planted"] <= crit).mean()), 3),
            "null p 5% quantile": float(f"{crit:.3g}"), "tests": (p["null"].size, p["planted"].size)}


# ---- the AUROC pair test near 1: candidate statistics (formula level, one data set = two groups) -------------

def score_group(rng, auc, n1, n0, shape="binormal", sd_pos=1.0):
    """(labels, scores) of one group with AUROC ``auc``: ``binormal`` (negatives N(0, 1), positives N(μ, sd_pos²)),
    ``exp`` (Hanley & McNeil's model: exponential scores, positives' mean (A/(1 − A))× the negatives'), ``tied``
    (binormal rounded to 0.1: ties)."""
    from scipy.special import ndtri

    if shape == "exp":
        pos, neg = rng.exponential(auc / (1 - auc), n1), rng.exponential(1.0, n0)
    else:
        mu = ndtri(auc) * math.sqrt(1 + sd_pos ** 2)
        pos, neg = rng.normal(mu, sd_pos, n1), rng.normal(0, 1, n0)
        if shape == "tied":
            pos, neg = np.round(pos, 1), np.round(neg, 1)
    return np.r_[np.ones(n1, bool), np.zeros(n0, bool)], np.r_[pos, neg]


def _components(y, s):
    """AUROC and DeLong's two variance components with each one's Satterthwaite df from the placement values'
    kurtosis (2n/(κ − 1); n for normal placements)."""
    from fairdesk.core.stats import discrimination as D

    _, pos, neg = D.ranked(y, s)
    n1, n0 = pos.sum(), neg.sum()
    v10 = (np.cumsum(neg) - 0.5 * neg) / n0
    v01 = (n1 - np.cumsum(pos) + 0.5 * pos) / n1
    a = float(pos @ v10 / n1)
    comps = []
    for w, v, n in ((pos, v10, n1), (neg, v01, n0)):
        e2, e4 = float(w @ (v - a) ** 2), float(w @ (v - a) ** 4)
        kappa = n * e4 / e2 ** 2 if e2 > 0 else math.inf
        comps.append((e2 / (n - 1) / n, max(2 * n / (kappa - 1), 1.0) if kappa > 1 else math.inf))
    return a, comps, n1, n0


def candidate_p_values(ya, sa, yb, sb) -> dict | None:
    """Two-sided p of "equal AUROC" by each candidate (None when a group's AUROC is 0 or 1 or has no variance,
    as the audit leaves such a pair untested). ``current``: the audit's test (score-type on the logit scale at the
    pooled AUROC Ā on the cube-root scale of 1 − AUROC, :func:`fairdesk.core.stats.discrimination.auroc_pair_z`);
    ``logit score-type (before)``: the audit's test until then (the same variances on the logit scale)."""
    from scipy.special import logit, ndtr, stdtr

    from fairdesk.core.stats import discrimination as D

    (a, ca, n1a, n0a), (b, cb, n1b, n0b) = _components(ya, sa), _components(yb, sb)
    va, vb = ca[0][0] + ca[1][0], cb[0][0] + cb[1][0]
    if not (0 < a < 1 and 0 < b < 1 and va > 0 and vb > 0):
        return None
    wa, wb = n1a * n0a, n1b * n0b
    pooled = min((a * wa + b * wb) / (wa + wb), 1 - 0.5 / max(wa, wb))
    k = pooled * (1 - pooled)
    d, dl = a - b, logit(a) - logit(b)
    hm = D.hanley_mcneil_variance
    v0 = max(va, hm(pooled, n1a, n0a)) + max(vb, hm(pooled, n1b, n0b))

    def ws(cs):  # Welch–Satterthwaite df of a sum of components
        v = sum(c for c, _ in cs)
        return v * v / sum(c * c / f for c, f in cs if c > 0)

    df = ws(ca + cb)
    lcs = [(c / (a * (1 - a)) ** 2, f) for c, f in ca] + [(c / (b * (1 - b)) ** 2, f) for c, f in cb]
    lv, ldf = sum(c for c, _ in lcs), ws(lcs)
    # the DeLong components pooled over the two groups (the working null of one ROC curve for both)
    s10 = (ca[0][0] * n1a * (n1a - 1) + cb[0][0] * n1b * (n1b - 1)) / (n1a + n1b - 2)
    s01 = (ca[1][0] * n0a * (n0a - 1) + cb[1][0] * n0b * (n0b - 1)) / (n0a + n0b - 2)
    vp = s10 * (1 / n1a + 1 / n1b) + s01 * (1 / n0a + 1 / n0b)
    two = lambda z, f=math.inf: float(2 * (ndtr(-abs(z)) if math.isinf(f) else stdtr(f, -abs(z))))  # noqa: E731
    z_now = D.auroc_pair_z(a, b, va, vb, (n1a, n0a), (n1b, n0b))
    return {"current": two(z_now), "logit score-type (before)": two(dl * k / math.sqrt(v0)),
            "AUROC scale, DeLong": two(d / math.sqrt(va + vb)),
            "AUROC scale, DeLong, t(df)": two(d / math.sqrt(va + vb), df),
            "logit Wald, DeLong": two(dl / math.sqrt(lv)),
            "logit Wald, DeLong, t(df)": two(dl / math.sqrt(lv), ldf),
            "score-type at A-bar, DeLong (no floor)": two(dl * k / math.sqrt(va + vb)),
            "score-type at A-bar, DeLong, t(df)": two(dl * k / math.sqrt(va + vb), df),
            "score-type at A-bar, pooled components": two(dl * k / math.sqrt(vp))}


def bootstrap_t_p(rng, ya, sa, yb, sb, n_boot=400) -> float:
    """p of the studentised (bootstrap-t) test of the logit AUROC difference, rows resampled within each group's
    two classes (the audit's scheme with independent rows); logits of (A·n₁n₀ + ½)/(n₁n₀ + 1) so that a replicate
    with AUROC 1 stays finite; a replicate with no variance counts as extreme."""
    from scipy.special import logit

    from fairdesk.core.stats import discrimination as D

    def reps(y, s):
        _, pos, neg = D.ranked(y, s)
        n1, n0 = int(pos.sum()), int(neg.sum())
        P = np.vstack([pos, rng.multinomial(n1, pos / n1, n_boot)]).astype(float)
        N = np.vstack([neg, rng.multinomial(n0, neg / n0, n_boot)]).astype(float)
        v10 = (np.cumsum(N, 1) - 0.5 * N) / n0
        v01 = (n1 - np.cumsum(P, 1) + 0.5 * P) / n1
        a = (P * v10).sum(1) / n1
        var = ((P * (v10 - a[:, None]) ** 2).sum(1) / (n1 - 1) / n1
               + (N * (v01 - a[:, None]) ** 2).sum(1) / (n0 - 1) / n0)
        w = n1 * n0
        c = (a * w + 0.5) / (w + 1)
        return logit(c), var / (c * (1 - c)) ** 2

    (la, va), (lb, vb) = reps(ya, sa), reps(yb, sb)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (la - lb - (la[0] - lb[0])) / np.sqrt(va + vb)
    t = np.where(np.isnan(t), np.inf, t)
    t0 = (la[0] - lb[0]) / math.sqrt(va[0] + vb[0])
    return float((np.sum(np.abs(t[1:]) >= abs(t0)) + 1) / (n_boot + 1))


# name: (AUROC, planted AUROC of group B, positives (A, B), negatives (A, B), shape, SDs of the positives)
AUROC_DESIGNS = {
    "30/270, 0.995 vs 0.98": (0.995, 0.98, (30, 30), (270, 270), "binormal", (1, 1)),
    "100/900, 0.995 vs 0.985": (0.995, 0.985, (100, 100), (900, 900), "binormal", (1, 1)),
    "60+240 / 120+480, 0.998 vs 0.99": (0.998, 0.99, (60, 120), (240, 480), "binormal", (1, 1)),
    "12+48 / 26+104, 0.9 vs 0.8": (0.9, 0.8, (12, 26), (48, 104), "binormal", (1, 1)),
    "15+60 / 20+80, 0.99 vs 0.95": (0.99, 0.95, (15, 20), (60, 80), "binormal", (1, 1)),
    "30/270, 0.99 vs 0.97, tied scores": (0.99, 0.97, (30, 30), (270, 270), "tied", (1, 1)),
    "30/270, 0.99 vs 0.97, positives' SD 0.5 vs 2": (0.99, 0.97, (30, 30), (270, 270), "binormal", (0.5, 2)),
    "30/270, 0.995 vs 0.98, exponential": (0.995, 0.98, (30, 30), (270, 270), "exp", (1, 1)),
    "15+60 / 20+80, 0.99 vs 0.95, exponential": (0.99, 0.95, (15, 20), (60, 80), "exp", (1, 1)),
}


def auroc_candidates(runs, seed, boot_runs=0) -> dict:
    """Size, power and size-calibrated power of every candidate over ``runs`` null and planted data sets per
    design of :data:`AUROC_DESIGNS` (the bootstrap-t on the first ``boot_runs`` of them: it is 400× slower)."""
    out = {}
    for name, (auc, low, n1, n0, shape, sd) in AUROC_DESIGNS.items():
        p = {}
        for kind in ("null", "planted"):
            rng = np.random.default_rng([seed, kind == "planted"])
            rows = []
            for r in range(runs):
                ya, sa = score_group(rng, auc, n1[0], n0[0], shape, sd[0])
                yb, sb = score_group(rng, auc if kind == "null" else low, n1[1], n0[1], shape, sd[1])
                c = candidate_p_values(ya, sa, yb, sb)
                if c is None:
                    continue
                if r < boot_runs:
                    c["bootstrap-t (logit)"] = bootstrap_t_p(rng, ya, sa, yb, sb)
                rows.append(c)
            p[kind] = pd.DataFrame(rows)
        res = {}
        for cand in p["null"]:
            p0, p1 = p["null"][cand].dropna().to_numpy(), p["planted"][cand].dropna().to_numpy()
            crit = np.quantile(p0, ALPHA)
            res[cand] = (round(float((p0 <= ALPHA).mean()), 3), round(float((p1 <= ALPHA).mean()), 3),
                         round(float((p1 <= crit).mean()), 3))
        out[name] = res
        print(f"{name} (size, power, size-calibrated power; {len(p['null'])} null pairs):", flush=True)
        for cand, v in res.items():
            print(f"    {cand:45s} {v}", flush=True)
    return out


# ---- the AUROC pair test near 1: the scale of the test (issue 21) --------------------------------------------

SHAPES = ("binormal", "exp", "tied", "lehmann")
SCALE_TESTS = ("current", "logit score-type (before)")
GATES = (1, 3, 8)  # the logit test with each group needing this many rows overlapping the other class (rejected)


def overlap_count(y, s) -> int:
    """Rows of one group in a discordant or tied pair: positives at or below the highest negative and negatives at
    or above the lowest positive (0 when the classes separate, AUROC 1)."""
    y, s = np.asarray(y, bool), np.asarray(s, float)
    pos, neg = s[y], s[~y]
    return int((pos <= neg.max()).sum() + (neg >= pos.min()).sum())


def shaped_group(rng, auc, n1, n0, shape, sd_pos=1.0):
    """:func:`score_group` and one more shape, ``lehmann`` (negatives U(0, 1), positives with cdf F₀^k, AUROC
    k/(k + 1)); ``tied`` here rounds the binormal scores to 0.25."""
    if shape == "lehmann":
        k = auc / (1 - auc)
        return np.r_[np.ones(n1, bool), np.zeros(n0, bool)], np.r_[rng.random(n1) ** (1 / k), rng.random(n0)]
    if shape == "tied":
        y, s = score_group(rng, auc, n1, n0, "binormal", sd_pos)
        return y, np.round(s * 4) / 4
    return score_group(rng, auc, n1, n0, shape, sd_pos)


def _rates(rows: pd.DataFrame, col: str, gate: int = 1, alpha=ALPHA) -> dict:
    """Size among tested null pairs (and how many), power (share of all planted data sets that reject) and
    size-calibrated power of test ``col``, a pair tested only when each group has ``gate`` overlapping rows."""
    nul, pl = rows[~rows.planted], rows[rows.planted]
    t0, t1 = nul[col].notna() & (nul.overlap >= gate), pl[col].notna() & (pl.overlap >= gate)
    p0 = nul[col][t0].to_numpy()
    crit = np.quantile(p0, alpha) if p0.size else np.nan
    return {"size": round(float((p0 <= alpha).mean()), 3) if p0.size else None, "tested": int(t0.sum()),
            "power": round(float(((pl[col] <= alpha) & t1).mean()), 3),
            "size-calibrated power": round(float(((pl[col] <= crit) & t1).mean()), 3)}


def _pair_row(rng, planted, auc, low, n1, n0, shapes, sds) -> dict:
    ya, sa = shaped_group(rng, auc, n1[0], n0[0], shapes[0], sds[0])
    yb, sb = shaped_group(rng, low if planted else auc, n1[1], n0[1], shapes[1], sds[1])
    c = candidate_p_values(ya, sa, yb, sb) or {}
    return {"planted": planted, **{k: c.get(k, np.nan) for k in SCALE_TESTS},
            "overlap": min(overlap_count(ya, sa), overlap_count(yb, sb))}


def draw_auroc_design(rng) -> tuple:
    """One two-group design near AUROC 1: positives 10–150 per group (log-uniform), negatives 1–20× them, AUROC
    0.95–0.999 (log-uniform in 1 − AUROC), each group's shape drawn from :data:`SHAPES` (so the two groups may differ
    in shape at the same AUROC; binormal positives' SD 0.5–2); planted: group B lower by 0.7–1.5 on the logit."""
    n1 = tuple(int(math.exp(rng.uniform(math.log(10), math.log(150)))) for _ in range(2))
    n0 = tuple(int(n * math.exp(rng.uniform(0, math.log(20)))) for n in n1)
    auc = 1 - math.exp(rng.uniform(math.log(0.001), math.log(0.05)))
    low = 1 / (1 + math.exp(-(math.log(auc / (1 - auc)) - rng.uniform(0.7, 1.5))))
    shapes = tuple(SHAPES[int(rng.integers(len(SHAPES)))] for _ in range(2))
    sds = tuple(math.exp(rng.uniform(math.log(0.5), math.log(2))) for _ in range(2))
    return auc, low, n1, n0, shapes, sds


SCALE_DESIGNS = {**AUROC_DESIGNS,
                 "60/540, 0.995 vs 0.98, exponential": (0.995, 0.98, (60, 60), (540, 540), "exp", (1, 1)),
                 "30/270, 0.995 vs 0.98, Lehmann": (0.995, 0.98, (30, 30), (270, 270), "lehmann", (1, 1))}


def auroc_scale(runs, seed, designs) -> dict:
    """The AUROC pair test now (cube root of 1 − AUROC) and before (logit; also with each group needing 3 or 8
    rows that overlap the other class, the gate measured and rejected): (1) the fixed designs of
    :data:`SCALE_DESIGNS`, ``runs`` null and planted data sets each; (2) ``designs`` null and ``designs`` planted
    designs from :func:`draw_auroc_design` (one data set each), overall and by the pair of shapes and AUROC band."""
    out = {"fixed": {}, "class": {}}

    def report(label, rows):
        res = {t: _rates(rows, t) for t in SCALE_TESTS}
        res.update({f"logit, gate {g}": _rates(rows, SCALE_TESTS[1], g) for g in GATES[1:]})
        print(f"{label}: " + "; ".join(f"{k} {v['size']} ({v['tested']}) / {v['power']} / {v['size-calibrated power']}"
                                       for k, v in res.items()), flush=True)
        return res

    print("size (null pairs tested) / power / size-calibrated power", flush=True)
    for name, (auc, low, n1, n0, shape, sd) in SCALE_DESIGNS.items():
        rows = []
        for planted in (False, True):
            rng = np.random.default_rng([seed, planted, 7])
            rows += [_pair_row(rng, planted, auc, low, n1, n0, (shape, shape), sd) for _ in range(runs)]
        out["fixed"][name] = report(name, pd.DataFrame(rows))
    rows = []
    for planted in (False, True):
        rng = np.random.default_rng([seed, planted, 8])
        for _ in range(designs):
            auc, low, n1, n0, shapes, sds = draw_auroc_design(rng)
            r = _pair_row(rng, planted, auc, low, n1, n0, shapes, sds)
            r.update(shapes="/".join(sorted(shapes)), high=auc >= 0.99)
            rows.append(r)
    rows = pd.DataFrame(rows)
    out["class"]["all"] = report("class, all", rows)
    for (sh, high), r in rows.groupby(["shapes", "high"]):
        out["class"][f"{sh}, AUROC {'≥' if high else '<'} 0.99"] = report(
            f"class, {sh}, AUROC {'≥' if high else '<'} 0.99", r)
    return out


CLUSTERED_COST_SNIPPET = """
import time, sys
sys.path.insert(0, {root!r})
from benchmarks.bench_groups import _roles, generate
from fairdesk.core.audits.groups import GroupAuditPlan, run_group_audit
data = generate(5, 20_000, patients=4_000)
run_group_audit(generate(1, 2000, patients=400), GroupAuditPlan(roles=_roles(True), n_boot=100, threshold=0.5))
start = time.process_time()
run_group_audit(data, GroupAuditPlan(roles=_roles(True), threshold=0.5))
print(time.process_time() - start)
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_conservative_tests",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--part", choices=("auroc", "recall", "auroc-candidates", "auroc-scale", "cost", "all"),
                    default="all")
    ap.add_argument("--designs", type=int, default=4000, help="auroc-scale: designs drawn for the class study")
    ap.add_argument("--baseline", help="cost: a checkout of the code before (e.g. git worktree add DIR COMMIT)")
    ap.add_argument("--boot-runs", type=int, default=400, help="auroc-candidates: data sets with the bootstrap-t")
    args = ap.parse_args(argv)
    if args.part == "cost":  # the P1 workload with whole patients (5 tasks × 20,000 rows of 4,000 patients)
        from benchmarks.bench_design_space import cost

        print("P1 workload with whole patients, CPU s:", cost(args.baseline, snippet=CLUSTERED_COST_SNIPPET))
        return 0
    if args.part in ("auroc-scale", "all"):
        auroc_scale(args.runs, args.seed, args.designs)
    if args.part in ("auroc-candidates", "all"):
        auroc_candidates(args.runs, args.seed, args.boot_runs)
    if args.part in ("auroc", "all"):
        for n1, n0, hi, lo in ((30, 270, 0.995, 0.98), (100, 900, 0.995, 0.985)):
            res = study(lambda rng, kind, n1=n1, n0=n0, hi=hi, lo=lo:
                        auroc_pair(rng, hi, hi if kind == "null" else lo, n1, n0),
                        args.runs, args.seed, "auroc", {}, calibration=True)  # AUROC: the calibration audit
            print(f"AUROC gap, {n1} positives / {n0} negatives per group, AUROC {hi} vs {lo}:", res, flush=True)
    if args.part in ("recall", "all"):
        for pos in (5, 8):
            res = study(lambda rng, kind, pos=pos: recall_pair(rng, 0.7, 0.7 if kind == "null" else 0.25, pos),
                        args.runs, args.seed, "recall", {"patient_id": "pid"})
            print(f"recall gap, whole patients, {pos} positive patients (1–30 rows) per group, recall 0.7 vs 0.25:",
                  res, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
