"""The group audit's plan: what to audit and how its tests are corrected (METHODS §1 "Testing plan").

:class:`GroupAuditPlan` (the settings, mirroring ``fairdesk-cli audit groups``) with the checks of its inputs
(:func:`check_plan_inputs`), the words the documents use for its rules, tests and families, the plan's own account
in a stored document (:func:`plan_summary`) and the correction that carries it out (:func:`correct`)."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from fairdesk.core.audits.group_tests import agreeing_intervals
from fairdesk.core.data.schema import ColumnRoles, column_names
from fairdesk.core.errors import DataError
from fairdesk.core.stats.multiple import adjust

METRICS = ("parity", "recall", "specificity")
GAP_RULES = ("max", "one-vs-rest", "between", "to-overall")  # to-overall: accepted, run as one-vs-rest
RULES = ("max", "one-vs-rest", "between")  # the rules FairDesk runs (and the GUI offers)
RULE_TEXT = {
    "max": "pairwise tests with the max-gap display: every pair of tested groups is one test (the difference of "
           "their rates); each group's row shows its pair with the largest gap (gap = own rate − that group's "
           "rate; positive favours the group), and a pair shown in two rows is one test with one verdict",
    "one-vs-rest": "one-vs-rest: each group's rate minus the rate of all other tested groups together",
    "between": "pairwise tests with the between-groups display: every pair of tested groups is one test; the "
               "table shows the pair with the highest and lowest rate",
}
TEST_TEXT = {
    "max": "pairwise score test (unfloored normal p; exact mid-p below 10 expected events); Agresti–Caffo interval "
           "(repeated patients: the score test's inversion)",
    "between": "pairwise score test (unfloored normal p; exact mid-p below 10 expected events); Agresti–Caffo "
               "interval (repeated patients: the score test's inversion)",
    "one-vs-rest": "group vs rest score test (unfloored normal p; exact mid-p below 10 expected events); "
                   "Agresti–Caffo interval (repeated patients: the score test's inversion)",
}
FAMILIES = ("audit", "task", "attribute-group-measure")
FAMILY_TEXT = {
    "audit": "one family for the whole audit: every test of every task, attribute, group (pair) and measure, "
             "Δ_eo included",
    "task": "one family per task: every test of that task (all attributes, groups and measures, Δ_eo included)",
    "attribute-group-measure": "one family per attribute, group (pair) and measure across the tasks, as in the "
                               "source paper (001 Table C3); many families, so more false alarms per audit",
}
CORRECTIONS = {"bh": "Benjamini–Hochberg (false discovery rate)", "holm": "Holm (family-wise error rate)"}
PROCEDURES = ("hierarchical", "flat")
PRIMARY_CHOICES = METRICS + ("auroc", "auprc")  # the measures a plan may make primary (rate gaps by default)
VERDICTS = ("differs", "equivalent", "inconclusive")
TO_OVERALL_NOTE = ("The to-overall rule was run as one-vs-rest: a group's gap to all groups together is "
                   "(1 − w) times its gap to the rest (w = its share of the rows), so both always reach the same "
                   "decision; FairDesk reports the one-vs-rest gap, whose size does not shrink with the group's "
                   "share.")
METRIC_TEXT = {
    "parity": "positive prediction rate (TP+FP)/N",
    "recall": "recall, true positive rate TP/(TP+FN)",
    "specificity": "specificity, true negative rate TN/(TN+FP)",
    "delta_eo": "error spread Δ_eo^(N) = Σ|FPR−mean FPR| + Σ|FNR−mean FNR| over N ordered bins",
}
CALIBRATION_MEASURES = ("calibration_intercept", "calibration_slope", "oe_ratio", "brier", "ece")
CALIBRATION_TEST_TEXT = ("joint likelihood-ratio test of calibration intercept 0 and slope 1 (χ², 2 df); "
                         "equivalence: intersection–union TOST on intercept and slope")
CURVES = ("roc", "pr", "reliability", "smoothed", "operating_roc", "operating_pr")
DISCRIMINATION_MEASURES = ("auroc", "auprc")
DISCRIMINATION_TEST_TEXT = {
    "auroc": "pairwise score-type z test of the AUROC difference on the cube-root scale of 1 − AUROC at the pooled "
             "AUROC, variances at least Hanley–McNeil's (× whole-patient design effect, then t reference); interval "
             "of the difference",
    "auprc": "pairwise z test of the logit-AUPRC difference, influence-function variances; interval of the "
             "difference from the groups' logit-scale intervals (variances at least binomial; MOVER)",
}


THRESHOLD_REQUIRED = (
    "Choose the threshold at which the model flags a patient: the score it is used at (a number in (0, 1), e.g. "
    "0.3) or 'best_f1' (chosen per task on the validation split); FairDesk does not assume one.")


@dataclass
class GroupAuditPlan:
    """What to audit and how. Mirrors the CLI flags of ``fairdesk-cli audit groups``."""

    roles: ColumnRoles
    metrics: tuple[str, ...] = METRICS
    gap_rule: str = "max"
    threshold: float | str | None = None  # required: a number, or "best_f1" (chosen per task on the validation
    # split); no default (a silent 0.5 flagged nobody on a cohort whose highest score was 0.43)
    bins: tuple[int, ...] = (2, 5)
    intersections: tuple[tuple[str, ...], ...] = ()
    tasks: tuple[str, ...] | None = None
    n_boot: int = 1000
    seed: int = 0
    alpha: float = 0.05
    ci_level: float = 0.95
    min_group_size: int = 30
    min_denominator: int = 10  # a rate resting on fewer cases (e.g. recall of 7 positives) is shown, not tested
    drop_groups: dict[str, list[str]] = field(default_factory=dict)
    eval_split: str = "test"
    val_split: str = "val"
    n_permutations: int = 1000
    family: str = "audit"  # correction family: "audit" | "task" | "attribute-group-measure" (001's)
    correction: str = "bh"  # "bh" (Benjamini–Hochberg) | "holm"
    margin: float = 0.05  # equivalence margin of the two one-sided tests (TOST), on the rate scale
    calibration: bool = True  # calibration by group (tests join the correction family) and ROC/PR/reliability curves
    calibration_intercept_margin: float = 0.2  # equivalence: |calibration intercept| below this (logit scale) ...
    calibration_slope_range: tuple[float, float] = (0.8, 1.25)  # ... and the calibration slope inside this range
    calibration_own_family: bool = True  # calibration tests corrected apart from the gaps (see correct(), §8)
    procedure: str | None = None  # "hierarchical": primary measures on a tree, each secondary kind its own
    # family (see correct()); "flat": the families of ``family`` with ``correction``. None: hierarchical, unless a
    # flat family, a correction or a shared calibration family other than the defaults was asked for (then flat)
    primary: tuple[str, ...] = METRICS  # the primary measures of the hierarchical plan

    def __post_init__(self) -> None:
        check_plan_inputs(self)
        if self.procedure is None:
            flat = (self.family, self.correction, bool(self.calibration_own_family)) != ("audit", "bh", True)
            self.procedure = "flat" if flat else "hierarchical"
        if self.procedure not in PROCEDURES:
            raise DataError(f"Unknown testing plan '{self.procedure}'; choose from {', '.join(PROCEDURES)}.")
        bad = [m for m in self.primary if m not in PRIMARY_CHOICES]
        if bad or not self.primary:
            raise DataError(f"Unknown primary measure(s) {bad}; choose one or more of {', '.join(PRIMARY_CHOICES)}."
                            if bad else f"Choose at least one primary measure from {', '.join(PRIMARY_CHOICES)}.")
        bad = [m for m in self.metrics if m not in METRICS]
        if bad:
            raise DataError(f"Unknown gap metric(s) {bad}; choose from {', '.join(METRICS)}.")
        if self.gap_rule not in GAP_RULES:
            raise DataError(f"Unknown multi-group rule '{self.gap_rule}'; choose from {', '.join(GAP_RULES)}.")
        if self.gap_rule == "to-overall":  # same decisions as one-vs-rest (see TO_OVERALL_NOTE)
            self.gap_rule = "one-vs-rest"
            self._folded_to_overall = True
        if self.family not in FAMILIES:
            raise DataError(f"Unknown correction family '{self.family}'; choose from {', '.join(FAMILIES)}.")
        if self.correction not in CORRECTIONS:
            raise DataError(f"Unknown correction '{self.correction}'; choose from {', '.join(CORRECTIONS)}.")
        if not 0.0 < float(self.margin) < 1.0:
            raise DataError(f"The equivalence margin {self.margin} must be in (0, 1) (a difference of rates).")
        self.margin = float(self.margin)
        self.calibration = bool(self.calibration)
        self.calibration_intercept_margin = float(self.calibration_intercept_margin)
        if not self.calibration_intercept_margin > 0:
            raise DataError("The calibration-intercept equivalence margin must be positive (logit scale, e.g. 0.2).")
        lo, hi = (float(v) for v in self.calibration_slope_range)
        if not 0 < lo < 1 < hi:
            raise DataError(f"The calibration-slope equivalence range ({lo:g}, {hi:g}) must contain 1 and lie above "
                            "0, e.g. 0.8 to 1.25.")
        self.calibration_slope_range = (lo, hi)
        if self.threshold is None:
            raise DataError(THRESHOLD_REQUIRED)
        if isinstance(self.threshold, str):
            if self.threshold != "best_f1":
                try:
                    self.threshold = float(self.threshold)
                except ValueError:
                    raise DataError("Threshold must be a number in (0, 1) or 'best_f1'.") from None
        if not isinstance(self.threshold, str) and not 0.0 < float(self.threshold) < 1.0:
            raise DataError(f"Threshold {self.threshold} is outside (0, 1); scores are probabilities.")
        if self.n_boot < 100:
            raise DataError("Use at least 100 bootstrap replicates (1,000 is the default).")
        if any(int(n) < 1 for n in self.bins):
            raise DataError("The number of bins for a continuous attribute must be at least 1.")
        self.intersections = tuple(tuple(c) for c in self.intersections)
        for combo in self.intersections:
            if len(combo) < 2:
                raise DataError("An intersection needs at least two attribute columns, e.g. sex,ethnicity.")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["roles"] = self.roles.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "GroupAuditPlan":
        """The plan stored in ``d``. Settings this version does not know (what a newer FairDesk would store) are
        ignored, never a TypeError: the stored document keeps them and :attr:`ignored` names them, so that the
        report can say so."""
        # the document's account of the plan (:func:`plan_summary`) is stored beside the parameters, not one of them
        ignored = sorted(str(k) for k in d if k not in cls.__dataclass_fields__ and k not in PLAN_SUMMARY_KEYS)
        ignored += [f"roles.{k}" for k in ColumnRoles.unknown_keys(d["roles"])]
        d = {k: v for k, v in d.items() if k in cls.__dataclass_fields__ and k not in PLAN_SUMMARY_KEYS}
        d["roles"] = ColumnRoles.from_dict(d["roles"])
        d.setdefault("procedure", "flat")  # stored before plans had structure: corrected in flat families
        d["primary"] = tuple(d.get("primary") or METRICS)
        for key in ("metrics", "bins"):
            d[key] = tuple(d[key])
        d["intersections"] = tuple(tuple(c) for c in d.get("intersections", ()))
        if d.get("tasks") is not None:
            d["tasks"] = tuple(d["tasks"])
        stored_bins = d["bins"]  # earlier versions allowed one bin (a spread of 0): kept as stored, not refused
        d["bins"] = tuple(b for b in stored_bins if b >= 2)
        plan = cls(**d)
        plan.bins = stored_bins
        plan.ignored = ignored
        return plan


#: the stated limits of a group audit's numeric parameters: (field, CLI option, low, high, whole number?, what it is)
PLAN_LIMITS = (
    ("alpha", "--alpha", 0.0, 1.0, False, "the significance level, a probability such as 0.05"),
    ("margin", "--margin", 0.0, 1.0, False, "the equivalence margin, a difference of rates such as 0.05"),
    ("ci_level", "ci_level", 0.0, 1.0, False, "the confidence level, such as 0.95"),
    ("n_boot", "--n-boot", 100, 100_000, True, "the number of bootstrap replicates; 1,000 is the default"),
    ("n_permutations", "n_permutations", 100, 100_000, True, "the number of permutations"),
    ("seed", "--seed", 0, 2**32 - 1, True, "the random seed"),
    ("min_group_size", "--min-group-size", 1, 10**9, True, "the smallest group that is tested"),
    ("min_denominator", "--min-denominator", 1, 10**9, True, "the fewest cases a tested rate rests on"),
)
MAX_BINS = 1000


def check_plan_inputs(plan: "GroupAuditPlan") -> None:
    """Every numeric parameter of a group audit within its stated limit (:data:`PLAN_LIMITS`), refused in one
    sentence naming the CLI option: the one check the CLI, the GUI and the Python API pass through. Lists of names
    (metrics, tasks, each intersection) given as one string are one name, never its letters. The limits are
    open at both ends for the probabilities (0 and 1 excluded) and closed for the counts. ``bins``: whole numbers
    from 2 to :data:`MAX_BINS` (at most the table's rows, checked by :func:`run_group_audit`)."""
    from fairdesk.core.limits import check_number

    for name, option, low, high, whole, what in PLAN_LIMITS:
        setattr(plan, name, check_number(getattr(plan, name), option, low, high, whole=whole, what=what,
                                         open_ends=not whole))
    bins = (plan.bins,) if isinstance(plan.bins, (int, float, str)) else plan.bins
    bins = [check_number(n, "--bins", 2, MAX_BINS, whole=True,
                         what="the number of bins of a continuous attribute's error spread") for n in bins]
    plan.bins = tuple(bins)
    plan.metrics = column_names(plan.metrics, "metrics")
    if isinstance(plan.primary, str):  # "recall,specificity" as the CLI takes it
        plan.primary = tuple(x.strip() for x in plan.primary.split(",") if x.strip())
    plan.primary = column_names(plan.primary, "primary")
    if plan.tasks is not None:
        plan.tasks = column_names(plan.tasks, "tasks") or None
    combos = plan.intersections or ()
    if isinstance(combos, str):  # "sex,race": one intersection
        combos = (combos,)
    elif combos and all(isinstance(c, str) for c in combos) and not any("," in c for c in combos):
        combos = (tuple(combos),)  # ("sex", "race"): one intersection of these columns
    plan.intersections = tuple(tuple(x.strip() for x in c.split(",")) if isinstance(c, str)
                               else column_names(c, "intersections") for c in combos)


PLAN_SUMMARY_KEYS = ("description", "families")


def plan_summary(result: "GroupAuditResult") -> dict:
    """The document's account of the testing plan (the top-level ``plan`` object gains these keys next to the
    parameters): ``procedure``, ``primary``, ``alpha``, ``description`` (one plain sentence naming the plan) and
    ``families`` (per family: ``name``, ``role`` "primary" | "secondary", ``tests`` (with a p-value) and
    ``error_rate``, what is controlled in it)."""
    plan = result.plan
    procedure = procedure_of(plan)
    tst = result.tests
    counts: dict[str, int] = {}
    if not tst.empty and "family" in tst:
        fam = tst["family"].where(tst["family"].notna(), tst.get("family_key"))
        tested = tst["p_value"].notna()
        for name, n in fam[tested].value_counts(sort=False).items():
            counts[str(name)] = int(n)
    alpha = float(plan.alpha)
    correction = CORRECTIONS[plan.correction]
    families = []
    if procedure == "hierarchical":
        secondary = [f for f in counts if f != "primary"]
        k = max(1, len(secondary))
        if "primary" in counts or not counts:
            families.append({"name": "primary", "role": "primary", "tests": counts.get("primary", 0),
                             "error_rate": PRIMARY_ERROR_RATE})
        for f in secondary:
            families.append({"name": f, "role": "secondary", "tests": counts[f],
                             "error_rate": f"{correction} at α/{k} = {alpha / k:.3g}"
                                           + (f" ({k} secondary families, so that together they make a false "
                                              f"discovery in an audit with nothing to find at most {alpha:g} of the "
                                              "time)" if k > 1 else "")})
        words = [MEASURE_WORDS[m] for m in plan.primary]
        sec_words = [f for f in secondary]
        description = (f"Primary: {_and(words)} gaps, tested task by task, attribute by attribute and measure by "
                       f"measure with a hierarchical false-discovery-rate procedure at {alpha:.0%}"
                       + (f"; {_and(sec_words)} are secondary, each in a family of its own." if sec_words else "."))
    else:
        own = getattr(plan, "calibration_own_family", False)
        for f, n in counts.items():
            role = "secondary" if own and f.endswith("calibration tests") else "primary"
            families.append({"name": f, "role": role, "tests": n, "error_rate": correction})
        scope = {"audit": "over the whole audit", "task": "task by task",
                 "attribute-group-measure": "per attribute, group and measure across the tasks"}[plan.family]
        description = (f"Flat plan: every test corrected {scope} with {correction} at {alpha:.0%}"
                       + ("; the calibration tests in a family of their own." if own and any(
                           f.endswith("calibration tests") for f in counts) else "."))
    return {"procedure": procedure, "primary": list(plan.primary), "alpha": alpha, "description": description,
            "families": families}


def _and(words: list[str]) -> str:
    words = list(words)
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1] if words else ""


SECONDARY_FAMILIES = {"parity": "parity gaps", "recall": "recall gaps", "specificity": "specificity gaps",
                      "auroc": "AUROC gaps", "auprc": "AUPRC gaps", "delta_eo": "error spread",
                      "calibration": "calibration"}
MEASURE_WORDS = {"parity": "parity", "recall": "recall", "specificity": "specificity", "auroc": "AUROC",
                 "auprc": "AUPRC", "delta_eo": "error spread", "calibration": "calibration"}
#: the parent of a primary test in the hierarchical plan: one task × attribute × measure, whose pairs (or groups vs
#: the rest) are its children. Chosen over task × attribute (every measure's pairs under one parent) by the power
#: study (docs/methods.md §1 "Testing plan").
TREE_PARENT = ("task", "attribute", "metric")
PRIMARY_ERROR_RATE = ("false discovery rate over the task × attribute × measure units found to have a gap (Benjamini–"
                      "Hochberg on each unit's omnibus p: with two groups their gap's own p, with more each group "
                      "against the rest, Bonferroni over the groups), and within each unit found the false discovery "
                      "rate of its gaps (Benjamini–Hochberg at the same level: Yekutieli's hierarchical FDR; over "
                      "the whole primary family not bounded by the level in theory, measured in docs/methods.md §1); "
                      "equivalence claims: false discovery rate (Benjamini–Hochberg)")


def procedure_of(plan) -> str:
    """The plan's procedure; plans without one (the slice audit's, documents stored before plans had structure)
    are flat."""
    return getattr(plan, "procedure", None) or "flat"


def _families(t: pd.DataFrame, plan) -> tuple[pd.Series, set]:
    """Each test's family name and the names of the secondary families."""
    metric = t["metric"].astype(str)
    if procedure_of(plan) == "hierarchical":
        primary = set(plan.primary)
        fam = metric.map(lambda m: "primary" if m in primary else SECONDARY_FAMILIES.get(m, f"{m} tests"))
        return fam, set(fam) - {"primary"}
    if plan.family == "audit":
        key = pd.Series("audit", index=t.index)
    elif plan.family == "task":
        key = t["task"].astype(str)
    else:
        key = (t["attribute"].astype(str) + " | " + t["group"].astype(str)
               + t["comparison"].map(lambda c: f" vs {c}" if isinstance(c, str) and not c.startswith("not ") else "")
               + " | " + metric)
    secondary = set()
    if getattr(plan, "calibration_own_family", False):
        key = key.where(metric != "calibration", key + " | calibration tests")
        secondary = set(key[metric == "calibration"])
    return key, secondary


def correct(tests: pd.DataFrame, plan: GroupAuditPlan) -> pd.DataFrame:
    """Adjust every test of the audit within its family, give it a verdict and, where the test carries what it
    needs (column ``_dual``), the interval that agrees with that verdict (:func:`agreeing_intervals`).

    Hierarchical plan (``plan.procedure``, the default): the *primary* family holds the gaps of the measures in
    ``plan.primary`` (the rate gaps at the threshold by default), tested on a tree (:func:`..stats.multiple.
    two_level_fdr`): each task × attribute × measure (:data:`TREE_PARENT`) is one parent asking "is there any gap
    among these groups?" — with two groups its pair's p, with more the omnibus of :func:`_parent_omnibus` (each
    group against the rest, Bonferroni over the groups), else Simes over its tests; BH over the parents at α, then
    BH at α over the gaps of each parent selected (Yekutieli 2008). Every other kind of test (AUROC gaps, AUPRC
    gaps, error spread, calibration, a rate measure not made primary) is *secondary*, a family of its own corrected
    by ``plan.correction`` at α/k (k secondary families with a test, reported as q·k), so that together they make a
    false discovery in an audit with nothing to find no more often than α. Equivalence claims are corrected by BH
    over the primary family's TOST p-values and by ``plan.correction`` in each secondary family (at α/k).

    Flat plan: families by ``plan.family`` — "audit" (all tests together), "task" (per task), "attribute-group-
    measure" (per attribute, group or pair and measure across tasks, 001's choice) — adjusted by
    ``plan.correction``, the TOST p-values separately in the same families; with ``plan.calibration_own_family``
    the calibration tests form a family of their own next to each.

    Verdict: "differs" when q ≤ α; otherwise "equivalent" when the adjusted TOST p ≤ α; otherwise "inconclusive".
    (A gap can be both significantly non-zero and inside the margin with very large groups; it is then "differs".)
    Δ_eo has no equivalence margin, so it is "differs" or "inconclusive". Columns added: ``family`` (and
    ``family_key``, the same), ``q_value``, ``q_equivalence``, ``verdict`` and, with ``_dual``, the adjusted
    ``ci_low`` / ``ci_high`` with the unadjusted ones kept as ``ci_low_unadjusted`` / ``ci_high_unadjusted``.
    """
    from fairdesk.core.stats.multiple import rejection_level, two_level_fdr

    t = tests.copy()
    if t.empty:
        return t.assign(family=pd.Series(dtype=object))
    fam, secondary = _families(t, plan)
    t["family"] = fam.astype(object)
    t["family_key"] = t["family"]
    hierarchical = procedure_of(plan) == "hierarchical"
    k_sec = max(1, len([f for f in secondary if t.loc[fam == f, "p_value"].notna().any()])) if hierarchical else 1
    for col in ("q_value", "q_equivalence", "level", "level_equivalence"):
        t[col] = np.nan
    alpha = float(plan.alpha)
    for name, idx in t.groupby("family", sort=False).groups.items():
        p = t.loc[idx, "p_value"].to_numpy(float)
        p_eq = t.loc[idx, "p_equivalence"].to_numpy(float)
        if hierarchical and name == "primary":
            parent = list(zip(*(t.loc[idx, c].astype(str) for c in TREE_PARENT)))
            tree = two_level_fdr(p, parent, alpha, node_p=_parent_omnibus(t.loc[idx], parent), within="full")
            q, level = tree["q"], tree["level"]
            q_eq, level_eq = adjust(p_eq, "bh"), rejection_level(p_eq, alpha, "bh")
        else:
            k = k_sec if hierarchical else 1
            q = np.minimum(1.0, adjust(p, plan.correction) * k)
            level = rejection_level(p, alpha / k, plan.correction)
            q_eq = np.minimum(1.0, adjust(p_eq, plan.correction) * k)
            level_eq = rejection_level(p_eq, alpha / k, plan.correction)
        t.loc[idx, "q_value"], t.loc[idx, "level"] = q, level
        t.loc[idx, "q_equivalence"], t.loc[idx, "level_equivalence"] = q_eq, level_eq
    differs = t["q_value"] <= alpha
    equivalent = ~differs & (t["q_equivalence"] <= alpha)
    t["verdict"] = np.where(differs, "differs", np.where(equivalent, "equivalent", "inconclusive"))
    t.loc[t["p_value"].isna(), "verdict"] = None
    t["verdict"] = t["verdict"].astype(object)
    if "_dual" in t:
        t = agreeing_intervals(t, plan)
    return t.drop(columns=["level", "level_equivalence", "_dual"], errors="ignore")


def _parent_omnibus(t: pd.DataFrame, parent: list) -> dict:
    """Each tree parent's omnibus p (:func:`..stats.multiple.one_vs_rest_bonferroni`) where its tests are the pairs
    of three or more groups that carry their counts (``_dual``): each group against the rest. With independent rows
    the design effect is the mean of the parent's pairs' (each a bootstrap's noisy estimate of 1: the largest of ten
    was ~1.3 and cost the omnibus a third of its power); with whole patients each group takes the design effect (at
    least 1) and degrees of freedom of its pair with the largest other group, which holds most of its rest (the
    fewest of the parent's degrees of freedom, those of a pair of two small groups, made the test of a large group
    needlessly heavy-tailed). Other parents (two groups, or groups already tested against the rest) are left to
    Simes over their tests."""
    from fairdesk.core.stats.multiple import one_vs_rest_bonferroni

    if "_dual" not in t or "kind" not in t:
        return {}
    by: dict = {}
    for key, kind, g, c, d, p in zip(parent, t["kind"], t["group"], t["comparison"], t["_dual"], t["p_value"]):
        by.setdefault(key, []).append((kind, g, c, d, p))
    out = {}
    for key, rows in by.items():
        if any(kind != "pair" or not isinstance(d, dict) or "x_a" not in d for kind, _, _, d, _ in rows):
            continue
        rows = [r for r in rows if not math.isnan(r[4])]
        counts = {}
        for _, g, c, d, _ in rows:
            counts[g], counts[c] = (d["x_a"], d["n_a"]), (d["x_b"], d["n_b"])
        if len(counts) < 3:
            continue
        if all(math.isinf(d["df"]) for *_, d, _ in rows):
            deffs = [d["deff"] for *_, d, _ in rows if d["deff"] > 0] or [1.0]
            out[key] = one_vs_rest_bonferroni(counts, float(np.mean(deffs)))
            continue
        deff, df, partner = {}, {}, {}
        for _, g, c, d, _ in rows:
            for me, other in ((g, c), (c, g)):
                if counts[other][1] > partner.get(me, -1.0):
                    partner[me] = counts[other][1]
                    deff[me], df[me] = max(1.0, d["deff"]), d["df"]
        out[key] = one_vs_rest_bonferroni(counts, deff, df)
    return out

