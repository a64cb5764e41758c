"""Group performance gaps (METHODS §1), error spread over a continuous attribute, Δ_eo^(N) (METHODS §2), and
calibration and discrimination by group (METHODS §8: table ``calibration``, whose tests join the correction family,
and table ``curves``; the numbers are in :mod:`fairdesk.core.stats.calibration`).

Entry point: :func:`run_group_audit` ``(table, plan, progress, cancel) -> GroupAuditResult``.

Every statistic is a function of confusion-cell counts, so the bootstrap draws those counts directly
(see :mod:`fairdesk.core.stats.bootstrap`). Cell layout per group: ``[TN, FP, FN, TP]`` = index ``2*y + yhat``.
"""
from __future__ import annotations

import copy
import json
import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from fairdesk.core import provenance as _prov
from fairdesk.core.data.loaders import table_sha256
from fairdesk.core.progress import yield_point
from fairdesk.core.data.schema import (INTERSECTION_SEP, ColumnRoles, as_group_labels, column_names, prepare,
                                       validate)
from fairdesk.core.errors import DataError
from fairdesk.core.executor import Executor, ExecutorSpec, open_executor, task_rng
from fairdesk.core.jsonable import jsonable
from fairdesk.core.progress import CancelToken, ProgressFn, Reporter
from fairdesk.core.stats import discrimination as D
from fairdesk.core.stats.bootstrap import cluster_cell_counts, stratified_cell_counts
from fairdesk.core.stats.multiple import adjust
from fairdesk.core.stats.thresholds import best_f1_threshold
from fairdesk.core.stats.verified_region import annotate as annotate_region

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
MISSING_GROUP = "(missing)"
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


TABLES = ("records", "groups", "summary", "dropped", "delta_bins", "tests", "calibration", "discrimination",
          "curves")


@dataclass
class GroupAuditResult:
    plan: GroupAuditPlan
    records: pd.DataFrame  # one row per (task, attribute, group, metric), the CLI JSON contract
    groups: pd.DataFrame  # per (task, attribute, group): n, prevalence, AUROC, AUPRC, confusion counts
    summary: pd.DataFrame  # 001 Table 4: significant tasks and share favouring, before/after BH
    dropped: pd.DataFrame  # groups not tested, with their size and reason
    delta_bins: pd.DataFrame  # bins behind each Δ_eo record
    thresholds: dict[str, float]
    provenance: dict
    warnings: list[str] = field(default_factory=list)
    tests: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=_COLUMNS["tests"]))
    # every test of the correction family (each pair once), with its family, q-values and verdict
    calibration: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=_COLUMNS["calibration"]))
    # per (task, attribute, tested group): calibration numbers with their CIs, the joint test and its verdict
    discrimination: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=_COLUMNS["discrimination"]))
    # per (task, attribute, tested group, measure auroc | auprc): value with its CI, the largest-gap pair, its test
    curves: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=_COLUMNS["curves"]))
    # per (task, attribute, tested group): ROC, PR, reliability and smoothed points, and the operating point

    def to_dict(self) -> dict:
        out = {"plan": {**self.plan.to_dict(), **plan_summary(self)}, "thresholds": self.thresholds, "provenance": self.provenance,
               "warnings": list(self.warnings)}
        for name in TABLES:
            out[name] = getattr(self, name).to_dict(orient="records")
        out["comparisons"] = comparison_counts(self)  # the counts every screen and report tells (read, never stored back)
        return jsonable(out)

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, d: dict) -> "GroupAuditResult":
        tables = {}
        for name in TABLES:  # (a GUI reader lets the Qt thread go first between tables)
            tables[name] = pd.DataFrame.from_records(d.get(name) or [], columns=_COLUMNS[name])
            yield_point()
        rec = tables["records"]
        if d.get("records") and "verdict" not in d["records"][0]:
            # stored by an earlier version: no equivalence test was run, so a gap not significant is inconclusive
            rec["verdict"] = rec["significant_bh"].map(
                lambda v: None if v is None or (isinstance(v, float) and math.isnan(v))
                else ("differs" if bool(v) else "inconclusive"))
            rec["test_id"] = [f"legacy-{i}" if v is not None else None for i, v in enumerate(rec["verdict"])]
        for name in ("records", "tests", "discrimination"):  # stored before intervals were adjusted
            t = tables[name]
            if d.get(name) and "ci_low_unadjusted" not in d[name][0] and "ci_low" in t:
                t["ci_low_unadjusted"], t["ci_high_unadjusted"] = t["ci_low"], t["ci_high"]
        tst = tables["tests"]
        if d.get("tests") and "family" not in d["tests"][0]:
            tst["family"] = tst["family_key"]
        warnings = list(d.get("warnings", []))
        if any("n_boot_valid" in (d.get(t) or [{}])[0] for t in ("calibration", "discrimination")) \
                and BOOTSTRAP_INTERVALS_WARNING not in warnings:
            # stored before 2026-11-25: the §8 intervals came from a bootstrap of each group's rows, which the
            # report must say instead of the closed form it describes now (the numbers are kept as stored)
            warnings.append(BOOTSTRAP_INTERVALS_WARNING)
        plan = GroupAuditPlan.from_dict(d["plan"])
        if plan.ignored:
            warnings.append(f"This audit was stored by a newer FairDesk: its plan holds settings this version does "
                            f"not know ({', '.join(plan.ignored)}), which are kept in the project and ignored here.")
        return cls(plan=plan, thresholds=d["thresholds"], provenance=d["provenance"], warnings=warnings, **tables)

    @classmethod
    def from_json(cls, text: str) -> "GroupAuditResult":
        return cls.from_dict(json.loads(text))


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


BOOTSTRAP_INTERVALS_WARNING = (
    "Stored by an earlier FairDesk: this audit's calibration and discrimination intervals come from a bootstrap of "
    "each group's rows (percentile intervals; AUPRC tests with bootstrap standard deviations), not from the "
    "closed form used now. Run the audit again for intervals made the current way.")


_COLUMNS = {
    "records": ["task", "attribute", "group", "metric", "n", "numerator", "denominator", "rate", "reason",
                "comparison", "comparison_rate", "gap", "ci_low", "ci_high", "p_value", "q_value", "significant",
                "significant_bh", "favours", "n_boot_valid", "threshold", "bins", "test", "verdict", "test_id",
                "p_equivalence", "q_equivalence", "outside_region", "family", "ci_low_unadjusted",
                "ci_high_unadjusted"],
    "groups": ["task", "attribute", "group", "n", "n_patients", "n_positive", "prevalence", "auroc", "auprc",
               "tn", "fp", "fn", "tp", "tested", "reason"],
    "summary": ["attribute", "group", "metric", "n_tasks", "n_significant", "share_favouring",
                "n_significant_bh", "share_favouring_bh", "n_differs", "n_equivalent", "n_inconclusive"],
    "dropped": ["task", "attribute", "group", "n", "reason"],
    "delta_bins": ["task", "attribute", "bins_requested", "bins_used", "bin", "lower", "upper", "n",
                   "n_positive", "fpr", "fnr"],
    "tests": ["test_id", "task", "attribute", "metric", "kind", "group", "comparison", "gap", "ci_low", "ci_high",
              "p_value", "p_equivalence", "design_effect", "n_boot_valid", "family_key", "q_value",
              "q_equivalence", "verdict", "outside_region", "family", "ci_low_unadjusted", "ci_high_unadjusted"],
    "calibration": ["task", "attribute", "group", "n", "n_positive"]
                   + [f"{m}{suffix}" for m in CALIBRATION_MEASURES for suffix in ("", "_ci_low", "_ci_high")]
                   + ["test", "lr_stat", "p_value", "p_equivalence", "design_effect", "q_value",
                      "q_equivalence", "verdict", "test_id", "reason", "family"],
    "discrimination": ["task", "attribute", "group", "metric", "n", "n_positive", "value", "value_ci_low",
                       "value_ci_high", "comparison", "comparison_value", "gap", "ci_low", "ci_high", "p_value",
                       "p_equivalence", "design_effect", "q_value", "q_equivalence", "verdict", "test_id", "test",
                       "reason", "family", "ci_low_unadjusted", "ci_high_unadjusted"],
    "curves": ["task", "attribute", "group", "curve", "x", "y", "threshold", "n", "ci_low", "ci_high"],
}


# --------------------------------------------------------------------------------------------------------------
# Rates and gaps on count arrays. ``counts`` has shape (..., 4) = [TN, FP, FN, TP].

def rate(counts: np.ndarray, metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rate, numerator, denominator); rate is NaN where the denominator is 0 (not estimable)."""
    tn, fp, fn, tp = (counts[..., i].astype(float) for i in range(4))
    if metric == "parity":
        num, den = tp + fp, tn + fp + fn + tp
    elif metric == "recall":
        num, den = tp, tp + fn
    elif metric == "specificity":
        num, den = tn, tn + fp
    else:
        raise ValueError(metric)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    return r, num, den


def max_gap(rates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Max-gap rule for rates of shape (B, G): gap_j = m_j − m_i*, i* = argmax_i |m_j − m_i| over estimable i ≠ j.

    Returns (gaps (B, G), i* (B, G)); NaN / -1 where group j or every other group is not estimable.
    """
    diff = rates[:, :, None] - rates[:, None, :]
    g = rates.shape[1]
    invalid = np.isnan(diff) | np.eye(g, dtype=bool)[None]
    absdiff = np.where(invalid, -np.inf, np.abs(np.where(invalid, 0.0, diff)))
    idx = absdiff.argmax(axis=2)
    gaps = np.take_along_axis(diff, idx[:, :, None], axis=2)[:, :, 0]
    none_valid = np.all(invalid, axis=2)
    gaps = np.where(none_valid, np.nan, gaps)
    return gaps, np.where(none_valid, -1, idx)


def delta_eo(counts: np.ndarray) -> np.ndarray:
    """Δ_eo^(N) for counts of shape (..., N, 4): Σ_a |FPR_a − mean| + Σ_a |FNR_a − mean| (unweighted means)."""
    tn, fp, fn, tp = (counts[..., i].astype(float) for i in range(4))
    with np.errstate(invalid="ignore", divide="ignore"):
        fpr = fp / (fp + tn)
        fnr = fn / (fn + tp)
    spread = (np.abs(fpr - fpr.mean(axis=-1, keepdims=True)).sum(axis=-1)
              + np.abs(fnr - fnr.mean(axis=-1, keepdims=True)).sum(axis=-1))
    return spread


def equal_frequency_bins(x: np.ndarray, y: np.ndarray, n_bins: int) -> np.ndarray:
    """Bin edges (length N_used + 1) of equal-frequency bins of ``x`` where every bin holds both classes.

    Quantile bins (ties kept together); a bin lacking a class is merged with its smaller neighbour until every bin
    has both classes. The number of bins actually used is ``len(edges) - 1``.
    """
    x = np.asarray(x, float)
    y = np.asarray(y, int)
    qs = np.unique(np.quantile(x, np.linspace(0, 1, n_bins + 1)))
    if qs.size < 2:
        return np.array([x.min(), x.max()])
    edges = list(qs)
    while len(edges) > 2:
        idx = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, len(edges) - 2)
        k = len(edges) - 1
        pos = np.bincount(idx, weights=y, minlength=k)
        tot = np.bincount(idx, minlength=k)
        lacking = np.flatnonzero((pos == 0) | (pos == tot))
        if lacking.size == 0:
            break
        b = int(lacking[0])
        if b == 0:
            merge_with = 1
        elif b == k - 1:
            merge_with = k - 2
        else:
            merge_with = b - 1 if tot[b - 1] <= tot[b + 1] else b + 1
        # merging bins b and merge_with removes the edge between them
        del edges[max(b, merge_with)]
    return np.asarray(edges)


def assign_bins(x: np.ndarray, edges: np.ndarray) -> np.ndarray:
    return np.clip(np.searchsorted(edges, x, side="right") - 1, 0, len(edges) - 2)


# --------------------------------------------------------------------------------------------------------------

@dataclass
class _TaskData:
    y: np.ndarray
    yhat: np.ndarray
    s: np.ndarray
    patients: np.ndarray | None


def group_labels(df: pd.DataFrame, col: str, intersections: dict[str, tuple[str, ...]]) -> pd.Series:
    """Each row's group of attribute ``col``: its value, or for an intersection the values of its columns joined by
    " & "; missing as :data:`MISSING_GROUP`."""
    if col in intersections:
        parts = [df[c].astype("string") for c in intersections[col]]
        joined = parts[0]
        for p in parts[1:]:
            joined = joined + " & " + p
        return joined.fillna(MISSING_GROUP)
    return df[col].astype("string").fillna(MISSING_GROUP)


BOUNDARY_PSEUDO = 0.5  # Jeffreys half-row per cell pair in the resampling shares (see stats.bootstrap)


def _resample_counts(cells, strata, patients, n_cells, plan_n_boot, rng, cluster: bool):
    """Cell counts of ``plan_n_boot`` replicates: whole patients when ``cluster``, else rows resampled within each
    stratum. The gap audit's strata are the groups: each group keeps its size and its labels are
    resampled with its predictions, so a group's prevalence varies as it does between samples. Strata of the label
    (before) fixed every replicate's number of positives and, where prevalence and predictions differ by group,
    took the prevalence's share out of the parity gap's variance (design effect 0.85–0.90 instead of 1 with
    independent rows, an interval too narrow); recall and specificity keep theirs either way (their denominators
    are the positives / negatives, whose variation adds nothing to first order)."""
    if cluster:
        return cluster_cell_counts(cells, patients, n_cells, plan_n_boot, rng, pseudo=BOUNDARY_PSEUDO)
    return stratified_cell_counts(cells, strata, n_cells, plan_n_boot, rng, pseudo=BOUNDARY_PSEUDO)


def task_column(df: pd.DataFrame, roles: ColumnRoles) -> str:
    """The task column of a prepared table (its values as text); without one, a column ``__task__`` holding
    "(all)" is added to ``df``. Returns its name."""
    if roles.task is None:
        df["__task__"] = "(all)"
        return "__task__"
    df[roles.task] = df[roles.task].astype(str)
    return roles.task


def run_group_audit(table: pd.DataFrame, plan: GroupAuditPlan, progress: ProgressFn | None = None,
                    cancel: CancelToken | None = None, data_sha256: str | None = None,
                    model_hashes: dict[str, str] | None = None,
                    executor: ExecutorSpec | Executor | None = None) -> GroupAuditResult:
    """Run the group audit. Raises :class:`DataError` for unusable input, ``Cancelled`` on cancel. ``executor``:
    where the (task, attribute) units run (:mod:`fairdesk.core.executor`; None: in this process)."""
    rep = Reporter(progress, cancel)
    roles = plan.roles
    if not roles.attributes and not roles.continuous_attributes and not plan.intersections:
        raise DataError("Choose at least one protected attribute to audit.")
    report = validate(table, roles, plan.min_group_size)
    report.raise_if_errors()
    if roles.continuous_attributes and max(plan.bins, default=0) > len(table):
        raise DataError(f"--bins {max(plan.bins)} is more than the table's {len(table):,} rows; choose at most "
                        f"{len(table):,} bins (2 to 10 is usual).")
    for combo in plan.intersections:
        missing = [c for c in combo if c not in table.columns]
        if missing:
            raise DataError(f"Intersection column(s) {missing} are not in the table.")
    extra_cols = [c for combo in plan.intersections for c in combo if c not in roles.all_columns()]
    df = prepare(table, roles)
    for c in dict.fromkeys(extra_cols):
        df[c] = as_group_labels(table[c])
    data_sha256 = data_sha256 or table_sha256(table)

    task_col = task_column(df, roles)
    all_tasks = sorted(df[task_col].unique())
    tasks = list(plan.tasks) if plan.tasks else all_tasks
    unknown = [t for t in tasks if t not in all_tasks]
    if unknown:
        raise DataError(f"Task(s) {unknown} are not in the table; it has {all_tasks}.")

    if roles.split:
        df[roles.split] = df[roles.split].astype(str)
        splits = set(df[roles.split].unique())
        if plan.eval_split not in splits:
            raise DataError(f"The split column '{roles.split}' has no '{plan.eval_split}' rows (it has "
                            f"{sorted(splits)}). The audit runs on held-out '{plan.eval_split}' rows.")
        eval_df = df[df[roles.split] == plan.eval_split]
        val_df = df[df[roles.split] == plan.val_split]
    else:
        eval_df, val_df = df, df.iloc[0:0]
    if plan.threshold == "best_f1" and val_df.empty:
        raise DataError(f"'best_f1' chooses the threshold on validation rows, but no rows have split = "
                        f"'{plan.val_split}'. Map a split column with validation rows, or give a fixed threshold.")

    intersections = {INTERSECTION_SEP.join(c): c for c in plan.intersections}
    attributes = list(roles.attributes) + list(intersections)
    warnings = [i.message for i in report.warnings]
    if getattr(plan, "_folded_to_overall", False):
        warnings.append(TO_OVERALL_NOTE)

    thresholds: dict[str, float] = {}
    boot_mode: dict[str, str] = {}
    # The work of each (task, attribute) is one task of the executor: the gap bootstrap and tests with
    # the calibration and discrimination of a categorical attribute, or the error spread over every requested bin
    # count of a continuous one. Each draws from its own stream keyed by (seed, task, attribute), so the result
    # does not depend on which executor ran it, on how many workers, or in which order they finished.
    units: list[dict] = []
    task_warnings: dict[str, list[str]] = {}
    for t_no, task in enumerate(tasks, start=1):
        where = f"Task {t_no} of {len(tasks)} ({task})"
        said = task_warnings.setdefault(task, [])
        sub = eval_df[eval_df[task_col] == task]
        if sub.empty:
            said.append(f"Task '{task}' has no '{plan.eval_split}' rows; it is left out.")
            continue
        if plan.threshold == "best_f1":
            vsub = val_df[val_df[task_col] == task]
            if vsub[roles.label].nunique() < 2:
                raise DataError(f"Task '{task}': the validation split needs both classes to choose a best-F1 "
                                "threshold. Use a fixed threshold for this audit.")
            tau = best_f1_threshold(vsub[roles.label].to_numpy(), vsub[roles.score].to_numpy())
        else:
            tau = float(plan.threshold)
        thresholds[task] = tau
        y = sub[roles.label].to_numpy(int)
        s = sub[roles.score].to_numpy(float)
        yhat = (s >= tau).astype(int)
        flat = flat_threshold_warning(task, yhat, s, tau)
        if flat:
            said.append(flat)
        cluster = bool(roles.patient_id) and sub[roles.patient_id].duplicated().any()
        boot_mode[task] = ("whole-patient (cluster) resampling" if cluster
                           else "row resampling within groups")
        patients = sub[roles.patient_id].astype(str).to_numpy() if roles.patient_id else None
        common = {"task": task, "where": where, "cluster": cluster, "tau": tau}
        for attr in attributes:
            units.append({**common, "attribute": attr, "continuous": False, "y": y, "s": s, "yhat": yhat,
                          "labels": group_labels(sub, attr, intersections).to_numpy(dtype=object),
                          "patients": patients})
        for attr in roles.continuous_attributes:
            x = sub[attr].to_numpy(float)
            ok = ~np.isnan(x)
            units.append({**common, "attribute": attr, "continuous": True, "x": x[ok], "y": y[ok], "yhat": yhat[ok],
                          "patients": None if patients is None else patients[ok]})

    def describe(unit: dict) -> str:
        if unit["continuous"]:
            return f"{unit['where']}: {unit['attribute']}: error spread over {plan.bins[0]} bins"
        return f"{unit['where']}: {unit['attribute']}: bootstrap of {plan.n_boot:,} replicates and tests"

    with open_executor(executor) as ex:
        done = ex.map(audit_unit, units, rep.sub(0.0, 0.95), describe, shared=plan,
                      weights=[max(1, len(plan.bins)) if u["continuous"] else 1 for u in units])
        executor_record = ex.provenance()
    parts = {k: [] for k in UNIT_PARTS}
    by_task: dict[str, list[dict]] = {}
    for unit, out in zip(units, done):
        by_task.setdefault(unit["task"], []).append(out)
    for task in tasks:
        warnings += task_warnings.get(task, [])
        for out in by_task.get(task, []):
            for k in UNIT_PARTS:
                parts[k] += out[k]
    warnings += parts.pop("warnings")
    records, tests, group_rows, dropped, bin_rows = (parts[k] for k in ("records", "tests", "groups", "dropped",
                                                                          "delta_bins"))
    cal_rows, disc_rows, curve_rows = parts["calibration"], parts["discrimination"], parts["curves"]

    rep(0.95, "Correcting for multiple testing")
    rec = pd.DataFrame.from_records(records, columns=_COLUMNS["records"])
    tst = correct(pd.DataFrame.from_records(tests, columns=_COLUMNS["tests"] + ["_dual"]), plan)
    groups_table = pd.DataFrame.from_records(group_rows, columns=_COLUMNS["groups"])
    if not tst.empty:  # a test outside the design-space region where its size and coverage were verified
        tst["outside_region"] = annotate_region(tst, groups_table,
                                                {t for t, m in boot_mode.items() if m.startswith("whole-patient")})
    if not rec.empty:
        rec = _with_verdicts(rec, tst, ("outside_region",))
        has = rec["test_id"].notna()
        rec["significant_bh"] = np.where(has, rec["verdict"] == "differs", None).astype(object)
        rec["verdict"] = rec["verdict"].astype(object).where(has, None)
    cal = _with_verdicts(pd.DataFrame.from_records(cal_rows, columns=_COLUMNS["calibration"]), tst)
    disc = _with_verdicts(pd.DataFrame.from_records(disc_rows, columns=_COLUMNS["discrimination"]), tst)
    summary = summarise(rec)
    prov = _prov.make(plan.seed, data_sha256, model_hashes, n_boot=plan.n_boot, bootstrap=boot_mode,
                      n_rows=int(len(table)), n_eval_rows=int(len(eval_df)), executor=executor_record)
    return GroupAuditResult(plan=plan, records=rec, tests=tst, calibration=cal, discrimination=disc,
                            curves=pd.DataFrame.from_records(curve_rows, columns=_COLUMNS["curves"]),
                            groups=groups_table,
                            summary=summary,
                            dropped=pd.DataFrame.from_records(dropped, columns=_COLUMNS["dropped"]),
                            delta_bins=pd.DataFrame.from_records(bin_rows, columns=_COLUMNS["delta_bins"]),
                            thresholds=thresholds, provenance=prov, warnings=warnings)


#: what one unit of :func:`audit_unit` returns: rows of each table, and warnings
UNIT_PARTS = ("records", "tests", "groups", "dropped", "delta_bins", "calibration", "discrimination", "curves",
              "warnings")


def audit_unit(unit: dict, plan: GroupAuditPlan, rep: Reporter) -> dict:
    """One task of the group audit: one (task, attribute) of :func:`run_group_audit` with its own random stream
    (:func:`~fairdesk.core.executor.task_rng` of the plan's seed, the task and the attribute). Returns the rows it
    adds to each table (:data:`UNIT_PARTS`)."""
    out: dict[str, list] = {k: [] for k in UNIT_PARTS}
    task, attr, tau, cluster = unit["task"], unit["attribute"], unit["tau"], unit["cluster"]
    rng = task_rng(plan.seed, "groups", task, attr)
    y, yhat, patients = unit["y"], unit["yhat"], unit["patients"]
    if unit["continuous"]:
        def block_done(i: int) -> None:
            nxt = plan.bins[i + 1] if i + 1 < len(plan.bins) else None
            rep((i + 1) / len(plan.bins), f"{unit['where']}: {attr}: error spread over {nxt} bins" if nxt
                else f"{unit['where']}: {attr}: error spread done")

        _audit_continuous(task, attr, unit["x"], y, yhat, patients, cluster, tau, plan, rng, out["records"],
                          out["delta_bins"], out["warnings"], out["tests"], on_block=block_done)
        return out
    labels, s = unit["labels"], unit["s"]
    ranks = _audit_attribute(task, attr, labels, y, s, yhat, patients, cluster, tau, plan, rng, out["records"],
                             out["groups"], out["dropped"], sub_patients=patients, tests=out["tests"])
    if plan.calibration:
        tested = [r["group"] for r in out["groups"] if r["tested"]]
        _audit_calibration(task, attr, labels, tested, ranks, s, patients, cluster, tau, plan, out["calibration"],
                           out["curves"], out["tests"], out["discrimination"])
    return out


def _with_verdicts(table: pd.DataFrame, tst: pd.DataFrame, extra: tuple[str, ...] = ()) -> pd.DataFrame:
    """``table``'s q_value, q_equivalence, verdict, family (and ``extra`` columns) from the corrected tests, by
    ``test_id``; where the table has an interval, the adjusted one (told from the row's side: a row whose group is
    the test's comparison shows it mirrored) with the row's own kept as ``ci_low_unadjusted`` /
    ``ci_high_unadjusted``."""
    if table.empty:
        return table
    by_id = tst.set_index("test_id") if not tst.empty else None
    has = table["test_id"].notna()
    for col in ("q_value", "q_equivalence", "verdict", "family") + extra:
        table[col] = None
        if by_id is not None and has.any() and col in by_id:
            table.loc[has, col] = table.loc[has, "test_id"].map(by_id[col]).to_numpy()
    table["q_value"] = table["q_value"].astype(float)
    table["q_equivalence"] = table["q_equivalence"].astype(float)
    if "ci_low_unadjusted" in table and by_id is not None and "ci_low_unadjusted" in by_id:
        table["ci_low_unadjusted"], table["ci_high_unadjusted"] = table["ci_low"], table["ci_high"]
        if has.any():
            ids = table.loc[has, "test_id"]
            lo = ids.map(by_id["ci_low"]).astype(float).to_numpy()
            hi = ids.map(by_id["ci_high"]).astype(float).to_numpy()
            mirrored = (table.loc[has, "group"].astype(str).to_numpy()
                        != ids.map(by_id["group"]).astype(str).to_numpy())
            lo, hi = np.where(mirrored, -hi, lo), np.where(mirrored, -lo, hi)
            table["ci_low"] = table["ci_low"].astype(object)
            table["ci_high"] = table["ci_high"].astype(object)
            table.loc[has, "ci_low"] = [None if math.isnan(v) else float(v) for v in lo]
            table.loc[has, "ci_high"] = [None if math.isnan(v) else float(v) for v in hi]
    return table


def _audit_attribute(task, attr, labels, y, s, yhat, patients, cluster, tau, plan, rng,
                     records, group_rows, dropped, sub_patients, tests) -> dict:
    """The gap audit of one attribute. Returns each group's sort (:func:`..stats.discrimination.ranked` with the
    row cells) and its AUROC/AUPRC (:func:`..stats.discrimination.summary`), which the calibration audit of the
    same groups reuses."""
    excluded = set(plan.drop_groups.get(attr, []))
    names, inverse = np.unique(labels, return_inverse=True)
    sizes = np.bincount(inverse, minlength=len(names))
    tested: list[int] = []
    ranks: dict = {}
    for k, name in enumerate(names):
        in_g = inverse == k
        cnt = np.bincount(2 * y[in_g] + yhat[in_g], minlength=4)
        values, pos, neg, cell = D.ranked(y[in_g], s[in_g], return_cell=True)
        disc = D.summary(pos, neg)
        ranks[name] = (values, pos, neg, cell, disc)
        reason = None
        if name == MISSING_GROUP:
            reason = "attribute value missing"
        elif name in excluded:
            reason = "excluded by the user"
        elif sizes[k] < plan.min_group_size:
            reason = f"fewer than {plan.min_group_size} rows"
        if reason:
            dropped.append({"task": task, "attribute": attr, "group": name, "n": int(sizes[k]), "reason": reason})
        else:
            tested.append(k)
        group_rows.append({"task": task, "attribute": attr, "group": name, "n": int(sizes[k]),
                           "n_patients": int(len(np.unique(sub_patients[in_g]))) if sub_patients is not None
                           else int(sizes[k]),
                           "n_positive": int(y[in_g].sum()), "prevalence": float(y[in_g].mean()),
                           "auroc": disc["auroc"], "auprc": disc["auprc"], "tn": int(cnt[0]), "fp": int(cnt[1]),
                           "fn": int(cnt[2]), "tp": int(cnt[3]), "tested": reason is None, "reason": reason})
    if len(tested) < 2:
        dropped.append({"task": task, "attribute": attr, "group": "(all groups)", "n": int(len(y)),
                        "reason": "fewer than two groups large enough to compare"})
        return ranks
    remap = np.full(len(names), -1)
    remap[tested] = np.arange(len(tested))
    gidx = remap[inverse]
    keep = gidx >= 0
    g = len(tested)
    tnames = names[tested]
    cells = 4 * gidx[keep] + 2 * y[keep] + yhat[keep]
    observed = np.bincount(cells, minlength=4 * g).reshape(1, g, 4)
    boot = _resample_counts(cells, gidx[keep], None if patients is None else patients[keep], 4 * g,
                            plan.n_boot, rng, cluster).reshape(plan.n_boot, g, 4)
    # whole patients: each group's rows per patient in the denominator of each measure (all rows, positives,
    # negatives) for the small-sample factor and the t reference's degrees of freedom
    per_patient = None
    if cluster and patients is not None:
        _, pcode = np.unique(patients[keep], return_inverse=True)
        gk, yk = gidx[keep], y[keep]
        hk = yhat[keep] == 1
        per_patient = {m: [np.bincount(pcode[(gk == j) & sel], minlength=pcode.max() + 1) for j in range(g)]
                       for m, sel in (("parity", np.ones(yk.size, bool)), ("recall", yk == 1),
                                      ("specificity", yk == 0))}
        # and each patient's rows in the numerator (flagged / flagged positives / unflagged negatives)
        per_patient_hits = {m: [np.bincount(pcode[(gk == j) & sel], minlength=pcode.max() + 1) for j in range(g)]
                            for m, sel in (("parity", hk), ("recall", (yk == 1) & hk),
                                           ("specificity", (yk == 0) & ~hk))}

    for metric in plan.metrics:
        r_shown, num, den = rate(observed, metric)
        r_boot, _, _ = rate(boot, metric)
        # A rate on a handful of cases (recall 18/18) is shown but not compared (plan.min_denominator).
        thin = (den[0] > 0) & (den[0] < plan.min_denominator)
        r_obs = np.where(thin[None], np.nan, r_shown)
        r_boot = np.where(thin[None], np.nan, r_boot)
        x, n = num[0], den[0]
        testable = np.flatnonzero(~np.isnan(r_obs[0]))
        base_test = {"task": task, "attribute": attr, "metric": metric}
        # ---- the tested units: every pair of testable groups (max, between) or each group vs the rest
        unit: dict[tuple[int, int], dict] = {}
        # with two testable groups "A vs rest" and "B vs rest" are the pair A vs B: one test, not two
        if plan.gap_rule == "one-vs-rest" and testable.size > 2:
            rest_obs = observed.sum(axis=1, keepdims=True) - observed
            rest_boot = boot.sum(axis=1, keepdims=True) - boot
            _, x_rest, n_rest = rate(rest_obs, metric)
            r_rest_boot = rate(rest_boot, metric)[0]
            for j in testable:
                if n_rest[0, j] < 1:
                    continue
                rows_pp = hits_pp = None
                if per_patient is not None:
                    rows_pp, hits_pp = ((pp[metric][j], sum(pp[metric][k] for k in testable if k != j))
                                        for pp in (per_patient, per_patient_hits))
                unit[(j, -1)] = rate_gap_test(x[j], n[j], x_rest[0, j], n_rest[0, j],
                                           r_boot[:, j] - r_rest_boot[:, j], plan, rows_pp, hits_pp)
                unit[(j, -1)].update(base_test, test_id=f"{task}|{attr}|{metric}|{tnames[j]}|rest",
                                     kind="one-vs-rest", group=str(tnames[j]), comparison=f"not {tnames[j]}")
        else:
            for a_pos, i in enumerate(testable):
                for j in testable[a_pos + 1:]:
                    rows_pp = None if per_patient is None else (per_patient[metric][i], per_patient[metric][j])
                    hits_pp = None if per_patient is None else (per_patient_hits[metric][i],
                                                                per_patient_hits[metric][j])
                    t = rate_gap_test(x[i], n[i], x[j], n[j], r_boot[:, i] - r_boot[:, j], plan, rows_pp, hits_pp)
                    t.update(base_test, test_id=f"{task}|{attr}|{metric}|{tnames[i]}|{tnames[j]}", kind="pair",
                             group=str(tnames[i]), comparison=str(tnames[j]))
                    unit[(i, j)] = t
        tests.extend(unit.values())

        # ---- the records shown: one per group (max, one-vs-rest) or the extreme pair (between)
        if plan.gap_rule == "between":
            if testable.size >= 2:
                hi = int(testable[np.argmax(r_obs[0, testable])])
                lo = int(testable[np.argmin(r_obs[0, testable])])
                if hi == lo:  # all equal: any pair is the extreme one
                    hi, lo = int(testable[0]), int(testable[1])
                shown = [(hi, lo)]
            else:
                shown = [(int(testable[0]) if testable.size else 0, None)]
        elif plan.gap_rule == "max":
            _, idx = max_gap(r_obs)
            shown = [(j, int(idx[0, j]) if idx[0, j] >= 0 else None) for j in range(g)]
        elif testable.size > 2:
            shown = [(j, -1 if (j, -1) in unit else None) for j in range(g)]
        else:  # one-vs-rest with two testable groups: each is compared with the other
            shown = [(j, int(testable[testable != j][0]) if j in testable and testable.size == 2 else None)
                     for j in range(g)]
        for j, k in shown:
            t = None
            if k is not None:
                t = unit.get((j, k)) or unit.get((k, j))
            mirrored = t is not None and k is not None and k >= 0 and (j, k) not in unit
            rate_j, thin_j, denom = r_shown[0, j], thin[j], den[0, j]
            reason = None
            if math.isnan(rate_j):
                reason = ("no positive cases in the group" if metric == "recall"
                          else "no negative cases in the group" if metric == "specificity" else "empty group")
            elif thin_j:
                unit_txt = {"recall": "positive cases", "specificity": "negative cases"}.get(metric, "rows")
                reason = f"only {int(denom)} {unit_txt} (fewer than {plan.min_denominator}): too few to test"
            elif t is None:
                reason = "no other group has a rate that can be tested"
            elif t.get("flat"):
                reason = flat_reason(task, tau, yhat, metric, rate_j)
            elif t["n_boot_valid"] < plan.n_boot:
                reason = f"estimable in {int(t['n_boot_valid'])} of {plan.n_boot} bootstrap replicates"
            comp_name, comp_rate = None, None
            if plan.gap_rule == "one-vs-rest":
                rest = observed[0].sum(axis=0) - observed[0, j]
                comp_name, comp_rate = f"not {tnames[j]}", float(rate(rest, metric)[0])
            elif k is not None and k >= 0:
                comp_name, comp_rate = str(tnames[k]), float(r_obs[0, k])
            gap = lo_j = hi_j = None
            if t is not None:
                gap, lo_j, hi_j = t["gap"], t["ci_low"], t["ci_high"]
                if mirrored:
                    gap, lo_j, hi_j = -gap, -hi_j, -lo_j
            favours = None
            if gap is not None and gap != 0:
                favours = str(tnames[j]) if gap > 0 else comp_name
            records.append({
                "task": task, "attribute": attr, "group": str(tnames[j]), "metric": metric,
                "n": int(observed[0, j].sum()), "numerator": float(x[j]), "denominator": float(denom),
                "rate": None if math.isnan(rate_j) else float(rate_j), "reason": reason,
                "comparison": comp_name,
                "comparison_rate": None if comp_rate is None or math.isnan(comp_rate) else comp_rate,
                "gap": gap, "ci_low": lo_j, "ci_high": hi_j,
                "p_value": None if t is None else t["p_value"], "q_value": None,
                "significant": None if t is None else bool(t["p_value"] <= plan.alpha),
                "significant_bh": None, "favours": favours,
                "n_boot_valid": 0 if t is None else int(t["n_boot_valid"]), "threshold": tau, "bins": None,
                "test": TEST_TEXT[plan.gap_rule] + ("; whole-patient sandwich design effect" if cluster else ""),
                "verdict": None, "test_id": None if t is None else t["test_id"],
                "p_equivalence": None if t is None else t["p_equivalence"], "q_equivalence": None})
    return ranks


def _finite(v):
    """A float for the tables, None for NaN / ±inf (JSON has neither)."""
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None


TOO_FEW_CASES = "inconclusive: too few cases to test"  # the reason's words (:func:`too_few_cases`)


def too_few_cases(n_positive: int, n_negative: int, minimum: int, case_patients=None) -> str | None:
    """The one rule by which a group's calibration and discrimination are "inconclusive: too few cases":
    fewer than ``minimum`` (``plan.min_denominator``) cases in its smaller class — rows, or with repeated patients
    (``case_patients``: the patients with a positive row and with a negative row) the patients among them, since
    a whole-patient interval rests on those (the design-space map: with fewer than 10 patients among the cases every
    such interval under-covered, 0.76–0.90, and the AUROC pair test rejected 13% of nulls). The reason in words,
    None when there are enough; such a group gets no interval and no test."""
    if case_patients is None:
        (few, which), unit = min((n_positive, "positive"), (n_negative, "negative")), ""
    else:
        (few, which), unit = min((case_patients[0], "positive"), (case_patients[1], "negative")), "patients among the "
    if few >= minimum:
        return None
    return f"{TOO_FEW_CASES} (only {int(few)} {unit}{which} cases, fewer than {minimum})"


def _case_rows(cell: np.ndarray, n_values: int, patients_g: np.ndarray):
    """Per patient of a group, its rows of the group's smaller class (none: left out), and the number of patients
    with a positive and with a negative row. ``cell`` from :func:`..stats.discrimination.ranked` (positive < T)."""
    positive = cell < n_values
    _, pid = np.unique(patients_g, return_inverse=True)
    pid = pid.ravel()
    k = int(pid.max()) + 1 if pid.size else 0
    npos = np.bincount(pid, weights=positive, minlength=k)
    nneg = np.bincount(pid, weights=~positive, minlength=k)
    smaller = npos if positive.sum() <= (~positive).sum() else nneg
    return smaller[smaller > 0], (int((npos > 0).sum()), int((nneg > 0).sum()))


def group_calibration(values, pos, neg, cell, disc, patients_g, plan, slope_rng) -> dict:
    """Calibration of one group (METHODS §8), the one path of the audit (:func:`_audit_calibration`) and of the
    studies that check it (``benchmarks/bench_calibration_regions.py``). ``values, pos, neg, cell, disc``: the
    group's sort (:func:`..stats.discrimination.ranked` with the row cells) and :func:`..stats.discrimination.
    summary`; ``patients_g`` each row's patient (None: independent rows); ``slope_rng`` the generator of the
    near-separation slope bootstrap.

    Intervals and design effects come from influence functions (:func:`..stats.calibration.influence`): the
    variance the row bootstrap would estimate, in closed form, summed over whole patients when patients repeat —
    the audit's own resampling unit; with whole patients the slope's variance is at least its whole-patient
    bootstrap variance near separation (AUROC ≥ :data:`..stats.calibration.NEAR_SEPARATION_AUROC`;
    :func:`..stats.calibration.slope_bootstrap_variance`).

    Returns ``{"row": the calibration table's row (without task and attribute), "test": None or (p, p_equivalence,
    statistic, test text, design effect), "point", "var", "var_cl", "rows_per_patient", "too_few"}``."""
    from fairdesk.core.stats import calibration as C

    cluster = patients_g is not None
    pt = C.point_from_ranked(values, pos, neg, disc)
    contrib = C.influence(values, pos, neg, pt)
    var = C.variances(contrib, pt)
    var_cl = C.variances(contrib, pt, row_cell=cell, clusters=patients_g) if cluster else var
    rows_pp = case_rows = case_patients = None
    if cluster:
        rows_pp = np.unique(patients_g, return_counts=True)[1]
        case_rows, case_patients = _case_rows(cell, values.size, patients_g)
    few = too_few_cases(pt["n_positive"], pt["n"] - pt["n_positive"], plan.min_denominator, case_patients)
    row = {"n": pt["n"], "n_positive": pt["n_positive"],
           "test": None, "lr_stat": None, "p_value": None, "p_equivalence": None, "design_effect": None,
           "q_value": None, "q_equivalence": None, "verdict": None, "test_id": None,
           "reason": few or pt["reason"]}
    if cluster and few is None and math.isfinite(var_cl.get("slope", math.nan)) \
            and pt["auroc"] >= C.NEAR_SEPARATION_AUROC:
        # near separation the linearised slope variance falls short; the whole-patient refits do not
        boot = C.slope_bootstrap_variance(pt, cell, patients_g, slope_rng)
        var_cl = {**var_cl, "slope": max(var_cl["slope"], boot) if math.isfinite(boot) else var_cl["slope"]}
    row.update(_calibration_intervals(pt, var_cl, plan.ci_level, case_rows, shown=few is None,
                                      clusters=(cell, patients_g) if cluster else None))
    d_int = d_slope = deff = 1.0  # design effects of whole patients (independent rows: 1), floored at 1
    if cluster and math.isfinite(pt["intercept_se"]) and "intercept" in var_cl:
        d_int = max(1.0, var_cl["intercept"] / pt["intercept_se"] ** 2)
    test = None
    if few is None and pt["info"] is not None:  # too few cases: no test (the reason says so)
        if cluster:
            # Rao–Scott first-order correction: mean eigenvalue of (model information × whole-patient covariance)
            cov = np.array([[var_cl["slope_intercept"], var_cl["slope_cov"]],
                            [var_cl["slope_cov"], var_cl["slope"]]])
            deff = max(1.0, float(np.trace(pt["info"] @ cov)) / 2.0)
            d_slope = max(1.0, var_cl["slope"] / pt["slope_se"] ** 2)
        p = _lr_p(2, pt["lr_stat"] / deff, case_rows)
        p_eq = C.equivalence_p(pt["intercept"], pt["intercept_se"] * math.sqrt(d_int), pt["slope"],
                               pt["slope_se"] * math.sqrt(d_slope), plan.calibration_intercept_margin,
                               plan.calibration_slope_range)
        test = (p, p_eq, pt["lr_stat"], "joint LR test of intercept 0 and slope 1 (2 df)", deff)
    elif few is None and math.isfinite(pt["p_value_intercept"]):
        # no slope (separation or a single score value): calibration-in-the-large is still testable; without a
        # slope the group cannot be shown calibrated, so there is no equivalence test
        p = _lr_p(1, pt["lr_stat_intercept"] / d_int, case_rows)
        test = (p, math.nan, pt["lr_stat_intercept"], "LR test of intercept 0 alone (1 df; no slope)", d_int)
    return {"row": row, "test": test, "point": pt, "var": var, "var_cl": var_cl, "rows_per_patient": rows_pp,
            "too_few": few}


def _audit_calibration(task, attr, labels, tested, ranks, s, patients, cluster, tau, plan, cal_rows, curve_rows,
                       tests, disc_rows):
    """Calibration by group (METHODS §8) for the tested groups of one attribute (:func:`group_calibration`, from
    the group's one sort ``ranks`` of the gap audit; the slope bootstrap from the plan's seed, the task and the
    attribute); its joint tests join ``tests``."""
    from fairdesk.core.stats import calibration as C

    C.check_probabilities(s)
    slope_rng = task_rng(plan.seed, "calibration slope", task, attr)
    discrimination: list[dict] = []
    for name in tested:
        values, pos, neg, cell, disc = ranks[name]
        patients_g = patients[labels == name] if cluster and patients is not None else None
        g = group_calibration(values, pos, neg, cell, disc, patients_g, plan, slope_rng)
        row = {"task": task, "attribute": attr, "group": str(name), **g["row"]}
        if g["test"] is not None:
            p, p_eq, stat, test_kind, deff = g["test"]
            test_id = f"{task}|{attr}|calibration|{name}"
            row.update(lr_stat=_finite(stat), p_value=p, p_equivalence=_finite(p_eq), design_effect=deff,
                       test_id=test_id, test=test_kind)
            tests.append({"test_id": test_id, "task": task, "attribute": attr, "metric": "calibration",
                          "kind": "calibration", "group": str(name), "comparison": None, "gap": None,
                          "ci_low": None, "ci_high": None, "p_value": p, "p_equivalence": _finite(p_eq),
                          "design_effect": deff, "n_boot_valid": None})
        cal_rows.append(row)
        pt = g["point"]
        discrimination.append({"group": str(name), "n": pt["n"], "n_positive": pt["n_positive"], "point": pt,
                               "var": g["var"], "var_cl": g["var_cl"], "rows_per_patient": g["rows_per_patient"],
                               "too_few": g["too_few"]})
        _curve_rows(task, attr, str(name), values, pos, neg, tau, plan, curve_rows)
    _audit_discrimination(task, attr, discrimination, cluster, plan, disc_rows, tests)


def _lr_p(k: int, stat: float, case_rows=None) -> float:
    """p of a calibration LR statistic with ``k`` df (already divided by its Rao–Scott design effect): χ²_k with
    independent rows; with whole patients (``case_rows``: each patient's rows of the smaller class) the Rao–Scott F
    form, ``stat/k ~ F(k, ν)`` with ν = :func:`..stats.gaps.cluster_df` of those patients — the design effect is
    estimated from them, as a t reference does for one coefficient (χ² rejected 9% of calibrated groups
    with ~18 patients among the positives)."""
    from scipy.special import chdtrc, fdtrc

    from fairdesk.core.stats import gaps as G

    if case_rows is None:
        return float(chdtrc(k, stat))
    return float(fdtrc(k, G.cluster_df(case_rows), stat / k))


def _calibration_intervals(pt: dict, var: dict, level: float, rows_per_patient=None, shown: bool = True,
                           clusters=None) -> dict:
    """``{measure: value, measure_ci_low, measure_ci_high}`` of one group from the influence variances ``var``:
    the calibration intercept and O/E by the robust score interval (:func:`..stats.calibration.score_interval`,
    whole patients when ``clusters`` = (each row's cell, each row's patient) is given; with independent rows its
    quantile is t with the df of the informative rows, :func:`..stats.calibration.informative_df`, when fewer than
    n − 1; the Wald interval covered 0.85–0.93 near separation, its SE taken at the estimate; exact
    Poisson upper bound of O/E when no case is observed), the slope on its own (logit) scale, Brier on the log scale, ECE debiased with a simultaneous interval (:func:`..stats.calibration.
    ece_debiased`). Small-sample corrections (Brier and slope intervals covered 0.90–0.92 at 100 rows with
    extreme scores): with independent rows the influence (HC0) variance is multiplied by n/(n − p) and the quantile
    is Student's t with n − p df (p = 1, or 2 for the slope model, whose variance is also at least the model-based
    one); with whole patients the variances already carry G/(G − 1) (the intercept and slope: the CR2 leverage
    correction, :func:`..stats.calibration.cr2_covariance`) and the quantile is t with :func:`..stats.gaps.cluster_df`
    df of ``rows_per_patient`` — each patient's rows of the group's smaller class, the patients these numbers rest on
    (df from all the group's patients, 31 and 86 where ~14 patients had a positive row, left the slope
    interval covering 0.83–0.90). ``shown`` False (too few cases): the values without intervals. A Brier score is a
    mean of squares, right-skewed when the scores are extreme: its log-scale interval stays positive and follows the
    skew, capped at 1; its variance is at least the one it would have if the scores were the risks
    (:func:`..stats.calibration.brier_model_variance`; with fewer than 10 cases the influence variance rests on the
    few observed)."""
    from fairdesk.core.stats import calibration as C
    from fairdesk.core.stats import gaps as G

    out = {}
    n = float(pt["n"])
    cluster_df = G.cluster_df(rows_per_patient) if rows_per_patient is not None else None
    values = {"calibration_intercept": ("intercept", pt["intercept"], 1),
              "calibration_slope": ("slope", pt["slope"], 2), "oe_ratio": ("log_oe", pt["oe_ratio"], 1),
              "brier": ("brier", pt["brier"], 1), "ece": ("ece", pt["ece"], 1)}
    for m, (key, value, k) in values.items():
        v = _finite(value)
        lo = hi = None
        vk = var.get(key, math.nan)
        if cluster_df is None and n > k + 1:
            vk = vk * n / (n - k)
            if m == "calibration_slope" and math.isfinite(pt["slope_se"]):
                vk = max(vk, pt["slope_se"] ** 2)
        df = cluster_df if cluster_df is not None else (max(n - k, 1.0) if n > k else math.inf)
        z = float(G.quantile(level, df))
        se = math.sqrt(vk) if vk >= 0 else math.nan
        if v is not None and m == "oe_ratio" and v == 0:
            # no case observed: O/E = 0 of E = Σ scores expected; the exact Poisson upper bound of O, over E
            lo, hi = 0.0, (-math.log((1 - level) / 2) / pt["expected"] if pt["expected"] > 0 else None)
        if v is not None and math.isfinite(se):
            if m in ("calibration_intercept", "oe_ratio"):
                # the robust score interval: the sandwich at each candidate value, not at the estimate; with
                # independent rows t with the df of the informative rows
                if cluster_df is None and math.isfinite(C.informative_df(pt)):
                    z = float(G.quantile(level, max(1.0, min(df, C.informative_df(pt)))))
                lo, hi = C.score_interval(pt, "intercept" if m == "calibration_intercept" else "oe_ratio", z,
                                          *(clusters or (None, None)))
            elif m == "ece":
                v, lo, hi = C.ece_debiased(pt, var["ece_bins"], level, cluster_df or math.inf)
            elif m == "brier":
                se = math.sqrt(max(vk, C.brier_model_variance(pt)))  # at least the model's
                lo, hi = ((v * math.exp(-z * se / v), min(1.0, v * math.exp(min(z * se / v, 50.0)))) if v > 0
                          else (0.0, z * se))
            else:
                lo, hi = v - z * se, v + z * se
        if not shown:
            lo = hi = None
        out[m], out[f"{m}_ci_low"], out[f"{m}_ci_high"] = v, _finite(lo), _finite(hi)
    return out


def _audit_discrimination(task, attr, groups: list[dict], cluster: bool, plan, disc_rows, tests):
    """AUROC and AUPRC of each tested group with an interval, and their pairwise gaps tested in the gaps' family
    (METHODS §8). ``groups``: per group its name, n, n_positive, ``point`` (:func:`..calibration.point_from_ranked`)
    and ``var`` / ``var_cl`` (:func:`..calibration.variances` of independent rows / of whole patients; the same
    when patients do not repeat).

    Test of a pair (the groups are disjoint rows: independent), two-sided; interval of the gap
    v_a − v_b ± q·√(se_a² + se_b²); TOST at ±``plan.margin`` on that scale. AUROC: se² = max(DeLong, Hanley–McNeil)
    variance (× its whole-patient design effect, floored at 1), tested by a score-type z on the cube-root scale of
    1 − AUROC at the pooled AUROC Ā (:func:`..stats.discrimination.auroc_pair_z`); AUPRC: z = (logit v_a −
    logit v_b) / √(lse_a² + lse_b²) with lse the influence SE of logit AP, while the intervals and the TOST use
    :func:`..stats.calibration.auprc_logit_se` (at least the binomial AP(1 − AP)/n₁) and the gap's interval is
    MOVER (:func:`..stats.gaps.mover`) from the two groups' intervals. Each group's interval is
    ``expit(logit v ± q·lse)``. q and the p-values are normal with independent rows, Student's t with
    :func:`..stats.gaps.cluster_df` degrees of freedom when patients repeat (whose variances carry G/(G − 1)).
    A group is compared only with at least ``plan.min_denominator`` positive and negative rows — patients among them
    when patients repeat — (fewer: "inconclusive: too few cases", :func:`too_few_cases`, with no interval and not
    tested). Every pair is one test; each group's row shows its largest-gap pair, as the max
    rule does for rates.
    """
    from scipy.special import expit, logit

    from fairdesk.core.stats import calibration as C
    from fairdesk.core.stats import gaps as G

    for metric in DISCRIMINATION_MEASURES:
        info = []
        for g in groups:
            value = _finite(g["point"][metric])
            lo = hi = None
            se, deff, lse, lse_test = math.nan, None, math.nan, math.nan
            if value is not None and metric == "auroc":
                var, deff = g["point"]["auroc_var"], 1.0
                if cluster and g["var"].get("auroc", 0) > 0:
                    deff = max(1.0, g["var_cl"]["auroc"] / g["var"]["auroc"])
                if value < 1:  # DeLong's variance collapses with few cases or near 1: Hanley–McNeil's as a floor
                    var = max(var, D.hanley_mcneil_variance(value, g["n_positive"], g["n"] - g["n_positive"]))
                se = math.sqrt(var * deff) if var > 0 else math.nan
            elif value is not None:
                v_cl = g["var_cl"].get("auprc", math.nan)
                lse = C.auprc_logit_se(value, v_cl, g["var"].get("auprc", math.nan), g["n_positive"])
                se = lse * value * (1 - value)  # NaN when AP is 0 or 1 (no logit)
                # the pair test keeps the influence variance: its size was right (0.045–0.065), and with the
                # binomial floor it rejected none of 200 null pairs at AUROC 0.99 and lost half its power near 1
                lse_test = math.sqrt(v_cl) / (value * (1 - value)) if 0 < value < 1 and v_cl > 0 else math.nan
            rows_pp = g.get("rows_per_patient")
            df = G.cluster_df(rows_pp) if rows_pp is not None else math.inf
            if value is not None and 0 < value < 1 and se > 0:
                lse = se / (value * (1 - value))
                lo, hi = (float(v) for v in expit(logit(value) + np.array([-1, 1]) * G.quantile(plan.ci_level, df)
                                                  * lse))
            n_neg = g["n"] - g["n_positive"]
            reason = None
            if value is None:
                reason = "both classes are needed" if metric == "auroc" else "no positive cases in the group"
            elif g["too_few"]:
                reason, lo, hi = g["too_few"], None, None
            elif not (se > 0 and lse > 0):
                reason = (f"{metric.upper()} of {value:g}: no variance to test with" if value in (0.0, 1.0)
                          else "no variance to test with")
            info.append({**g, "value": value, "ci": (lo, hi), "se": se, "deff": deff, "lse": lse, "df": df,
                         "lse_test": lse_test, "reason": reason})
        testable = [i for i, g in enumerate(info) if g["reason"] is None]
        unit: dict[tuple[int, int], dict] = {}
        for pos, i in enumerate(testable):
            for j in testable[pos + 1:]:
                a, b = info[i], info[j]
                d = a["value"] - b["value"]
                va, vb = a["se"] ** 2, b["se"] ** 2
                df = (G.cluster_df(a["rows_per_patient"], b["rows_per_patient"], va, vb)
                      if a.get("rows_per_patient") is not None and b.get("rows_per_patient") is not None
                      else math.inf)
                test_id = f"{task}|{attr}|{metric}|{a['group']}|{b['group']}"
                deff = None if metric != "auroc" else (va + vb) / (va / a["deff"] + vb / b["deff"])
                if metric == "auroc":
                    # score-type, cube-root scale of 1 − AUROC, floored variances (why:
                    # :func:`..stats.discrimination.auroc_pair_z`)
                    lz = D.auroc_pair_z(a["value"], b["value"], a["point"]["auroc_var"], b["point"]["auroc_var"],
                                        (a["n_positive"], a["n"] - a["n_positive"]),
                                        (b["n_positive"], b["n"] - b["n_positive"]), a["deff"], b["deff"])
                else:
                    # logit-scale z test on the influence variances: on the AP scale the z test was liberal in
                    # small groups (8.6% of null pairs of ~50 rows; 5.5% on the logit scale, docs/methods.md §8)
                    dl = math.log(a["value"] / (1 - a["value"])) - math.log(b["value"] / (1 - b["value"]))
                    lz = dl / math.sqrt(a["lse_test"] ** 2 + b["lse_test"] ** 2)
                p = float(2 * G.tail(-abs(lz), df))
                se = math.sqrt(va + vb)
                q = float(G.quantile(plan.ci_level, df))
                # AUPRC: the gap's interval from the groups' own (logit-scale) intervals, MOVER; the value-scale
                # d ± q·se covered 0.78–0.89 near AP = 1 and with whole patients
                ci = ((d - q * se, d + q * se) if metric == "auroc"
                      else G.mover(a["value"], a["ci"], b["value"], b["ci"]))
                dual = ({"kind": "normal", "centre": d, "se": se, "df": df} if metric == "auroc" else
                        {"kind": "mover", "centre": d, "se": se, "df": df, "a": a["value"], "lse_a": a["lse"],
                         "df_a": a["df"], "b": b["value"], "lse_b": b["lse"], "df_b": b["df"]})
                unit[(i, j)] = {"_dual": dual, "test_id": test_id, "task": task, "attribute": attr, "metric": metric,
                                "kind": "pair", "group": a["group"], "comparison": b["group"], "gap": d,
                                "ci_low": ci[0], "ci_high": ci[1], "p_value": p,
                                "p_equivalence": float(G.tost_p(d, se, plan.margin, df)), "design_effect": deff,
                                "n_boot_valid": None}
        tests.extend(unit.values())
        for i, g in enumerate(info):
            row = {"task": task, "attribute": attr, "group": g["group"], "metric": metric, "n": g["n"],
                   "n_positive": g["n_positive"], "value": g["value"], "value_ci_low": g["ci"][0],
                   "value_ci_high": g["ci"][1], "comparison": None, "comparison_value": None, "gap": None,
                   "ci_low": None, "ci_high": None, "p_value": None, "p_equivalence": None, "design_effect": None,
                   "q_value": None, "q_equivalence": None, "verdict": None,
                   "test_id": None, "test": DISCRIMINATION_TEST_TEXT[metric], "reason": g["reason"]}
            partners = [k for k in testable if k != i]
            if g["reason"] is None and not partners:
                row["reason"] = "no other group has a value that can be tested"
            if g["reason"] is None and partners:
                k = max(partners, key=lambda k: abs(g["value"] - info[k]["value"]))
                t = unit.get((i, k)) or unit[(k, i)]
                sign = 1.0 if (i, k) in unit else -1.0
                lo_, hi_ = (t["ci_low"], t["ci_high"]) if sign > 0 else (-t["ci_high"], -t["ci_low"])
                row.update(comparison=info[k]["group"], comparison_value=info[k]["value"], gap=sign * t["gap"],
                           ci_low=lo_, ci_high=hi_, p_value=t["p_value"], p_equivalence=t["p_equivalence"],
                           design_effect=t["design_effect"], test_id=t["test_id"])
            disc_rows.append(row)


CURVE_DIGITS = 5  # curve points are stored rounded (they are drawn, not computed with); operating points exact


def _points(values, digits: int | None = CURVE_DIGITS) -> list:
    """A JSON-ready list: floats rounded to ``digits`` decimals, None for NaN / ±inf."""
    if not isinstance(values, np.ndarray):  # a few values (reliability bins, one operating point): no numpy needed
        return [None if not math.isfinite(v) else (float(v) if digits is None else round(float(v), digits))
                for v in values]
    a = values.astype(float)
    finite = np.isfinite(a)
    if digits is not None:
        a = np.round(a, digits)
    out = a.tolist()
    if not finite.all():
        out = [v if ok else None for v, ok in zip(out, finite.tolist())]
    return out


def _curve_rows(task, attr, group, values, pos, neg, tau, plan, out):
    """One row per (task, attribute, group, curve); the points are lists (x, y and, where they apply, threshold,
    n and the interval), so that a 57-task audit's curves stay a few MB of JSON."""
    from fairdesk.core.stats import calibration as C

    base = {"task": task, "attribute": attr, "group": group, "threshold": None, "n": None, "ci_low": None,
            "ci_high": None}
    bins = C.reliability_bins(values, pos, neg, plan.ci_level)
    out.append({**base, "curve": "reliability", "x": _points(b["predicted"] for b in bins),
                "y": _points(b["observed"] for b in bins), "n": [int(b["n"]) for b in bins],
                "ci_low": _points(b["ci_low"] for b in bins), "ci_high": _points(b["ci_high"] for b in bins)})
    xs, fit = C.smoothed_curve(values, pos, neg)
    out.append({**base, "curve": "smoothed", "x": _points(xs), "y": _points(fit)})
    d = C.roc_pr(values, pos, neg, tau)
    if d is None:
        return
    for curve in ("roc", "pr"):
        x, v, thr = d[curve]
        out.append({**base, "curve": curve, "x": _points(x), "y": _points(v), "threshold": _points(thr)})
    op = d["operating"]
    out.append({**base, "curve": "operating_roc", "x": _points([op["fpr"]], None), "y": _points([op["tpr"]], None),
                "threshold": [tau]})
    out.append({**base, "curve": "operating_pr", "x": _points([op["recall"]], None),
                "y": _points([op["precision"]], None), "threshold": [tau]})


def rate_gap_test(x_a, n_a, x_b, n_b, boot_diff, plan, rows_per_patient=None, hits_per_patient=None) -> dict:
    """Score test, Agresti–Caffo interval (with whole patients: the score test's inversion) and TOST of one
    difference of rates (see :mod:`..stats.gaps`).

    ``rows_per_patient``: with whole patients, each side's rows per patient in the rate's denominator, and
    ``hits_per_patient`` each side's rows per patient in its numerator: the design effect is then the whole-patient
    sandwich of the two rates (:func:`..stats.gaps.cluster_rate_variance`, with G/(G − 1)) over their binomial
    variance, and the test, interval and TOST use a t reference with :func:`..stats.gaps.cluster_df` degrees of
    freedom (with many one-row patients and a few of 30 rows, the normal reference rejected 7–10% of null
    gaps). Not the whole-patient bootstrap's variance times G/(G − 1): the bootstrap redraws how many patients a rate
    rests on (E[1/G*] > 1/G), which already lifts its variance about as far above the plain sandwich as G/(G − 1)
    does, so the factor counted twice (recall gaps with 5–8 case patients had a size of 0.007–0.020)."""
    from fairdesk.core.stats import gaps as G

    n_valid = int((~np.isnan(boot_diff)).sum())
    deff = float(G.design_effect(boot_diff, x_a, n_a, x_b, n_b)) if n_valid > 1 else float("nan")
    if not deff > 0:  # no bootstrap spread at all (cannot happen with the smoothing unless both rates are empty)
        deff = 1.0
    df = np.inf
    if rows_per_patient is not None:
        m_a, m_b = (np.asarray(m, float) for m in rows_per_patient)
        if hits_per_patient is None:
            deff *= G.small_sample_factor(min((m_a > 0).sum(), (m_b > 0).sum()))
        else:
            h_a, h_b = (np.asarray(h, float) for h in hits_per_patient)
            var = G.cluster_rate_variance(h_a, m_a) + G.cluster_rate_variance(h_b, m_b)
            deff = max(1.0, float(var / G.binomial_variance(x_a, n_a, x_b, n_b)))
        pa, pb = (x_a + 0.5) / (n_a + 1), (x_b + 0.5) / (n_b + 1)
        df = G.cluster_df(m_a, m_b, pa * (1 - pa) * (m_a ** 2).sum() / max(n_a, 1) ** 2,
                          pb * (1 - pb) * (m_b ** 2).sum() / max(n_b, 1) ** 2)
    p = G.gap_p_value(x_a, n_a, x_b, n_b, deff, df)
    flat = no_variation(x_a, n_a, x_b, n_b)
    if rows_per_patient is None:  # independent rows: Agresti–Caffo (the score interval covered 0.91 at 12 vs 1,000
        centre, se = G.agresti_caffo(x_a, n_a, x_b, n_b, deff)  # cases at recall 0.99, docs/methods.md §1)
        lo, hi = G.interval(centre, se, plan.ci_level, df)
        p_eq = float("nan") if flat else float(G.tost_p(centre, se, plan.margin, df))
        dual = {"kind": "ac", "centre": float(centre), "se": float(se), "df": float(df), "x_a": float(x_a),
                "n_a": float(n_a), "x_b": float(x_b), "n_b": float(n_b), "deff": float(deff)}
    else:  # whole patients: the inversion of the score test (Agresti–Caffo missed 0 more often than the
        lo, hi = G.score_interval(x_a, n_a, x_b, n_b, deff, plan.ci_level, df)  # test rejected)
        p_eq = float("nan") if flat else float(G.score_tost_p(x_a, n_a, x_b, n_b, plan.margin, deff, df))
        dual = {"kind": "score", "x_a": float(x_a), "n_a": float(n_a), "x_b": float(x_b), "n_b": float(n_b),
                "deff": float(deff), "df": float(df)}
    return {"_dual": dual, "gap": float(x_a / n_a - x_b / n_b), "ci_low": float(lo), "ci_high": float(hi), "p_value": float(p),
            "p_equivalence": p_eq,
            "design_effect": deff, "df": float(df), "n_boot_valid": n_valid, "flat": flat}


# --------------------------------------------------------------------------------------------------------------
# Degenerate comparisons at the threshold: a rate that is 0 (or 1) in both groups by construction —
# the model flags nobody (everybody) there — says nothing about equivalence: the TOST p of such a pair is small only
# because the Agresti–Caffo pseudo-counts make a tiny standard error around 0. Such a pair gets no equivalence p
# (NaN: it leaves the equivalence family), so its verdict is "inconclusive", with the reason in its records.

FLAT_PREFIX = "The model flags "  # every task-level threshold warning starts so (the CLI prints them on stderr)


def no_variation(x_a, n_a, x_b, n_b) -> bool:
    """True when both rates are 0 or both are 1: the comparison carries no evidence of equivalence."""
    return bool((x_a == 0 and x_b == 0) or (x_a == n_a and x_b == n_b))


def flat_threshold_warning(task, yhat: np.ndarray, s: np.ndarray, tau: float) -> str | None:
    """The warning for a task in which the model flags nobody or everybody at the threshold, else None."""
    if yhat.size == 0 or 0 < int(yhat.sum()) < yhat.size:
        return None
    nobody = not yhat.any()
    where = "" if str(task) == "(all)" else f" in task '{task}'"
    extreme = f"highest score {float(s.max()):.3g}" if nobody else f"lowest score {float(s.min()):.3g}"
    return (f"{FLAT_PREFIX}{'nobody' if nobody else 'everybody'}{where} at threshold {tau:g} ({yhat.size:,} rows; "
            f"{extreme}): every comparison of rates at this threshold is inconclusive. Give the threshold the "
            "model is used at.")


def flat_reason(task, tau: float, yhat: np.ndarray, metric: str, value: float) -> str:
    """The reason of a comparison whose rate is 0 or 1 in both groups (see :func:`no_variation`)."""
    where = "" if str(task) == "(all)" else f" in {task}"
    if not yhat.any():
        return f"inconclusive: the model flags nobody{where} at threshold {tau:g}"
    if yhat.all():
        return f"inconclusive: the model flags everybody{where} at threshold {tau:g}"
    return (f"inconclusive: {metric} is {value:g} in both groups at threshold {tau:g} (nothing varies to compare, "
            "so no evidence of equivalence)")


def _audit_continuous(task, attr, x, y, yhat, patients, cluster, tau, plan, rng, records, bin_rows, warnings,
                      tests, on_block=None):
    for i_req, n_req in enumerate(plan.bins):
        if i_req and on_block is not None:
            on_block(i_req - 1)  # progress: the previous bin count's null is done
        base = {"task": task, "attribute": attr, "group": f"N={n_req}", "metric": "delta_eo", "n": int(len(y)),
                "numerator": None, "denominator": None, "rate": None, "comparison": None, "comparison_rate": None,
                "q_value": None, "significant_bh": None, "favours": None, "threshold": tau,
                "test": ("permutation p with a gamma tail (errors independent of the bins within each class); "
                         f"interval: {plan.ci_level:.0%} permutation null band"),
                "verdict": None, "test_id": None, "p_equivalence": None, "q_equivalence": None}
        if len(y) == 0 or len(np.unique(y)) < 2:
            records.append({**base, "reason": "both classes are needed to compute error rates", "gap": None,
                            "ci_low": None, "ci_high": None, "p_value": None, "significant": None,
                            "n_boot_valid": 0, "bins": None})
            continue
        edges = equal_frequency_bins(x, y, int(n_req))
        k = len(edges) - 1
        if k < n_req:
            warnings.append(f"Task '{task}', {attr}: {n_req} bins requested, {k} used so that every bin holds both "
                            "classes.")
        b = assign_bins(x, edges)
        cells = 4 * b + 2 * y + yhat
        observed = np.bincount(cells, minlength=4 * k).reshape(k, 4)
        value = float(delta_eo(observed))
        if k == 1:
            null = np.zeros(1)
            n_valid = plan.n_boot
        elif cluster:  # rows of one patient are not exchangeable: null from the whole-patient bootstrap instead
            boot = _resample_counts(cells, y, patients, 4 * k, plan.n_boot, rng, cluster).reshape(plan.n_boot, k, 4)
            null = centred_bootstrap_null_delta_eo(observed, boot)
            n_valid = int(null.size)
            base["test"] = ("centred whole-patient bootstrap p with a gamma tail; interval: "
                            f"{plan.ci_level:.0%} null band of the centred bootstrap")
        else:
            null = permutation_null_delta_eo(observed, plan.n_permutations, rng)
            n_valid = int(null.size)
        p = 1.0 if k == 1 else tail_p(null, value)
        # The interval shown is the null band: where Δ_eo falls in (ci_level) of data sets whose error rates do
        # not depend on the bins. Δ above the band <=> p < 1 − ci_level, so band and test cannot contradict (an
        # unsigned Δ has a percentile CI that excludes 0 even when nothing differs; METHODS §2).
        band = float(np.quantile(null, plan.ci_level)) if null.size else float("nan")
        test_id = f"{task}|{attr}|delta_eo|N={n_req}"
        records.append({**base, "reason": None, "gap": value, "ci_low": 0.0, "ci_high": band,
                        "p_value": p, "significant": bool(p <= plan.alpha), "n_boot_valid": n_valid, "bins": k,
                        "test_id": test_id})
        tests.append({"_dual": {"kind": "band", "null": null}, "test_id": test_id, "task": task, "attribute": attr,
                      "metric": "delta_eo", "kind": "delta_eo",
                      "group": f"N={n_req}", "comparison": None, "gap": value, "ci_low": 0.0, "ci_high": band,
                      "p_value": p, "p_equivalence": None, "design_effect": None, "n_boot_valid": n_valid})
        tn, fp, fn, tp = observed.T
        for i in range(k):
            bin_rows.append({"task": task, "attribute": attr, "bins_requested": int(n_req), "bins_used": k, "bin": i,
                             "lower": float(edges[i]), "upper": float(edges[i + 1]), "n": int(observed[i].sum()),
                             "n_positive": int(fn[i] + tp[i]), "fpr": float(fp[i] / (fp[i] + tn[i])),
                             "fnr": float(fn[i] / (fn[i] + tp[i]))})


def tail_p(null: np.ndarray, value: float, min_exceed: int = 10) -> float:
    """p = P(null ≥ value) from Monte-Carlo null draws, not floored at 1/(B+1).

    With at least ``min_exceed`` draws at or above the value: (b + 1)/(B + 1). Further out the Monte-Carlo share
    cannot resolve what a correction over many tests needs, so the tail of a gamma distribution fitted to the null
    draws by their mean and variance is used (Δ_eo is a non-negative sum of absolute deviations, right-skewed).
    """
    from scipy.stats import gamma

    null = np.asarray(null, float)
    null = null[~np.isnan(null)]
    if null.size == 0:
        return float("nan")
    b = int(np.sum(null >= value - 1e-12))
    if b >= min_exceed:
        return float((b + 1) / (null.size + 1))
    mean, var = float(null.mean()), float(null.var(ddof=1)) if null.size > 1 else 0.0
    if mean <= 0 or var <= 0:
        return float((b + 1) / (null.size + 1))
    return float(gamma.sf(value, mean * mean / var, scale=var / mean))


def permutation_null_delta_eo(observed: np.ndarray, n_perm: int, rng: np.random.Generator) -> np.ndarray:
    """Δ_eo of ``n_perm`` permutations: within each class, predicted positives spread over the bins at random.

    Under "errors do not depend on the attribute", the number of predicted positives in each bin among the rows of
    class y is multivariate hypergeometric (bin sizes within class y, predicted positives of class y).
    """
    k = observed.shape[0]
    neg_sizes = observed[:, 0] + observed[:, 1]
    pos_sizes = observed[:, 2] + observed[:, 3]
    fp_perm = rng.multivariate_hypergeometric(neg_sizes, int(observed[:, 1].sum()), size=n_perm)
    tp_perm = rng.multivariate_hypergeometric(pos_sizes, int(observed[:, 3].sum()), size=n_perm)
    perm = np.empty((n_perm, k, 4))
    perm[..., 0] = neg_sizes - fp_perm
    perm[..., 1] = fp_perm
    perm[..., 2] = pos_sizes - tp_perm
    perm[..., 3] = tp_perm
    return delta_eo(perm)


def permutation_p_delta_eo(observed: np.ndarray, value: float, n_perm: int, rng: np.random.Generator) -> float:
    """Plain Monte-Carlo permutation p for Δ_eo, (b + 1)/(B + 1) (the audit uses :func:`tail_p` on the same null)."""
    d = permutation_null_delta_eo(observed, n_perm, rng)
    return float((np.sum(d >= value - 1e-12) + 1) / (n_perm + 1))


def centred_bootstrap_null_delta_eo(observed: np.ndarray, boot: np.ndarray) -> np.ndarray:
    """Null draws for "error rates do not depend on the bins" from the centred bootstrap: Δ_eo of ``rate* − ratê``."""
    def rates(c):
        with np.errstate(invalid="ignore", divide="ignore"):
            return c[..., 1] / (c[..., 0] + c[..., 1]), c[..., 2] / (c[..., 2] + c[..., 3])

    fpr, fnr = rates(observed.astype(float))
    fpr_b, fnr_b = rates(boot.astype(float))
    cf, cn = fpr_b - fpr, fnr_b - fnr
    ok = ~(np.isnan(cf).any(axis=1) | np.isnan(cn).any(axis=1))
    cf, cn = cf[ok], cn[ok]
    return (np.abs(cf - cf.mean(axis=1, keepdims=True)).sum(axis=1)
            + np.abs(cn - cn.mean(axis=1, keepdims=True)).sum(axis=1))


def centred_bootstrap_p_delta_eo(observed: np.ndarray, boot: np.ndarray, value: float) -> float:
    """Plain Monte-Carlo p, (b + 1)/(B + 1), from :func:`centred_bootstrap_null_delta_eo`."""
    d = centred_bootstrap_null_delta_eo(observed, boot)
    if d.size == 0:
        return float("nan")
    return float((np.sum(d >= value - 1e-12) + 1) / (d.size + 1))


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


def _intervals(duals: list, levels: np.ndarray, equivalence: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The intervals of many tests at their own levels, from what each carries (``_dual``; a test without one gets
    NaN): of the difference, or (``equivalence``) the interval whose inclusion in ±margin at ``1 − 2a`` is the TOST
    at ``a``. Computed per kind in one vectorised call (the score interval's bisection per test cost seconds on the
    57-task benchmark)."""
    from fairdesk.core.stats import gaps as G

    n = len(duals)
    lo, hi = np.full(n, np.nan), np.full(n, np.nan)
    levels = np.asarray(levels, float)

    def kind_of(d):
        if not isinstance(d, dict):
            return None
        k = d["kind"]
        if k == "ac" and not equivalence:
            # a rate gap's difference: the inversion of the score test that decided it (Agresti–Caffo, whose centre
            # is pulled towards 0, still held 0 at the level where the score test rejected: every harm at the edge
            # of the adjusted level lost its verdict); its equivalence: the Agresti–Caffo interval of its TOST
            return "score"
        if k == "mover" and equivalence:
            return "normal"  # AUPRC's TOST is on the value scale
        return "normal" if k == "ac" else k

    kinds = [kind_of(d) for d in duals]
    for kind in set(kinds) - {None}:
        idx = np.array([i for i, k in enumerate(kinds) if k == kind])
        ok = idx[(levels[idx] > 0) & (levels[idx] < 1)]
        if not ok.size:
            continue
        ds = [duals[i] for i in ok]
        lv = levels[ok]
        col = lambda key: np.array([d.get(key, math.inf) for d in ds], float)  # noqa: E731
        if kind == "score":
            a, b = G.score_interval(col("x_a"), col("n_a"), col("x_b"), col("n_b"), col("deff"), lv, col("df"))
        elif kind == "normal":
            a, b = G.interval(col("centre"), col("se"), lv, col("df"))
        elif kind == "mover":
            from scipy.special import expit, logit

            qa, qb = G.quantile(lv, col("df_a")), G.quantile(lv, col("df_b"))
            va, vb, la, lb = col("a"), col("b"), col("lse_a"), col("lse_b")
            with np.errstate(invalid="ignore", divide="ignore"):
                ca = expit(logit(va) + np.array([[-1], [1]]) * qa * la)
                cb = expit(logit(vb) + np.array([[-1], [1]]) * qb * lb)
            a = np.array([G.mover(x, (c0, c1), y, (e0, e1)) for x, c0, c1, y, e0, e1
                          in zip(va, ca[0], ca[1], vb, cb[0], cb[1])]).reshape(-1, 2).T
            a, b = a[0], a[1]
        else:  # "band"
            if equivalence:
                continue
            a = np.zeros(ok.size)
            b = np.array([band(d["null"], v) for d, v in zip(ds, lv)])
        lo[ok], hi[ok] = a, b
    return lo, hi


def band(null: np.ndarray, level: float) -> float:
    """The ``level`` quantile of Δ_eo's null draws, from the draws while at least 10 lie beyond it, else from the
    gamma fitted to them (as :func:`tail_p` computes p), so that Δ_eo above the band ⇔ p < 1 − level."""
    from scipy.stats import gamma

    null = np.asarray(null, float)
    null = null[~np.isnan(null)]
    if not null.size:
        return math.nan
    if (1 - level) * null.size >= 10 or null.size < 2:
        return float(np.quantile(null, level))
    mean, var = float(null.mean()), float(null.var(ddof=1))
    if mean <= 0 or var <= 0:
        return float(np.quantile(null, level))
    return float(gamma.isf(1 - level, mean * mean / var, scale=var / mean))


def agreeing_intervals(t: pd.DataFrame, plan) -> pd.DataFrame:
    """Intervals that agree with the verdicts (false-coverage-rate intervals, Benjamini & Yekutieli 2005, at the
    level the test's family rejects at: ``level`` from :func:`correct`). The interval printed beside a verdict:

    - "differs": the difference's interval at ``1 − a`` (``a`` the family's rejection level for this test), which
      excludes 0;
    - "equivalent": the ``1 − 2a_eq`` interval of its adjusted TOST (inside ±margin), stretched to reach 0;
    - "inconclusive": the span of both, which holds 0 and is not inside ±margin.

    Where the test and its interval are not exact duals (the exact mid-p with few expected events, the score
    test's pseudo-row, AUPRC's MOVER interval against its logit test) they can still disagree at the edge; then the
    interval is widened when that keeps the verdict true (an "inconclusive" gap's interval stretched to 0 or to the
    margin), and otherwise the claim is not made: a "differs" whose interval holds 0, or an "equivalent" whose
    interval leaves ±margin, becomes "inconclusive". Δ_eo's interval is its null band [0, band]: "differs" ⇔ Δ_eo
    above it. The unadjusted intervals stay as ``ci_low_unadjusted`` / ``ci_high_unadjusted``."""
    t = t.copy()
    t["ci_low_unadjusted"], t["ci_high_unadjusted"] = t["ci_low"], t["ci_high"]
    margin = float(plan.margin)
    duals = t["_dual"].tolist()
    a = t["level"].to_numpy(float)
    a_eq = t["level_equivalence"].to_numpy(float)
    d_lo, d_hi = _intervals(duals, 1 - a)
    e_lo, e_hi = _intervals(duals, 1 - 2 * a_eq, equivalence=True)
    lows, highs, verdicts = t["ci_low"].tolist(), t["ci_high"].tolist(), t["verdict"].tolist()
    rows = zip(duals, verdicts, a, t["gap"].tolist(), t["q_equivalence"].tolist(), d_lo, d_hi, e_lo, e_hi)
    for i, (dual, verdict, level, gap, q_eq, dl, dh, el, eh) in enumerate(rows):
        if not isinstance(dual, dict) or verdict is None or not level > 0 or math.isnan(dh):
            continue
        if dual["kind"] == "band":
            if verdict == "differs" and not gap > dh:
                verdict = "inconclusive"
            if verdict != "differs" and gap > dh:
                dh = float(gap)
            lows[i], highs[i], verdicts[i] = 0.0, float(dh), verdict
            continue
        if verdict == "differs" and not (dl > 0 or dh < 0):
            verdict = "equivalent" if q_eq <= plan.alpha else "inconclusive"
        if verdict == "equivalent":
            lo, hi = min(el, 0.0), max(eh, 0.0)
            if not (-margin < lo and hi < margin):  # (NaN: not shown inside either)
                verdict = "inconclusive"
        if verdict == "differs":
            lo, hi = dl, dh
        elif verdict == "inconclusive":
            lo, hi = np.nanmin([dl, el, 0.0]), np.nanmax([dh, eh, 0.0])
            if -margin < lo and hi < margin:  # inside the margin yet not shown equivalent: stretched to it
                if abs(hi) >= abs(lo):
                    hi = margin
                else:
                    lo = -margin
        lows[i], highs[i], verdicts[i] = float(lo), float(hi), verdict
    t["ci_low"], t["ci_high"] = lows, highs
    t["verdict"] = pd.Series(verdicts, index=t.index, dtype=object)
    return t


def summarise(rec: pd.DataFrame) -> pd.DataFrame:
    """001 Table 4: per attribute × group × measure, the tasks tested, how many have a significant gap before and
    after the audit's correction (``n_significant_bh`` = ``n_differs``) with the share favouring the group, and how
    many are "equivalent" and "inconclusive". Counts are per group row (a pair shown in two rows counts for both
    groups here; :func:`findings` counts unique comparisons)."""
    rows = []
    gaps = rec[rec["metric"] != "delta_eo"] if not rec.empty else rec
    for (attr, group, metric), sub in gaps.groupby(["attribute", "group", "metric"], sort=False):
        tested = sub[sub["verdict"].notna()] if "verdict" in sub else sub[sub["gap"].notna()]
        row = {"attribute": attr, "group": group, "metric": metric, "n_tasks": int(len(tested))}
        for col, suffix in (("significant", ""), ("significant_bh", "_bh")):
            sig = tested[tested[col] == True]  # noqa: E712 (object column with None)
            row[f"n_significant{suffix}"] = int(len(sig))
            row[f"share_favouring{suffix}"] = (float((sig["favours"] == group).mean()) if len(sig) else None)
        for v in VERDICTS:
            row[f"n_{v}"] = int((tested["verdict"] == v).sum()) if "verdict" in tested else 0
        rows.append(row)
    return pd.DataFrame.from_records(rows, columns=_COLUMNS["summary"])


def findings(result: GroupAuditResult) -> pd.DataFrame:
    """The comparisons of the audit, each once: one row per test of the correction families (``result.tests``),
    shaped like ``records``. This is the one definition of a "comparison": :func:`comparison_counts`, every
    sentence, header and caption count these rows.

    A test shown in a record (max rule: a group's largest-gap pair, shown from both sides as "A vs B" and
    "B vs A") keeps that record, from the side of the group with the lower rate (gap ≤ 0); a pair test shown in no
    record (max rule: pairs that are no group's largest gap) gets a row of its own, from the lower group's side,
    with both groups' rates from their records. Order: rate gaps and error spreads, AUROC / AUPRC gaps (``metric``
    "auroc" / "auprc"), calibration tests (``metric`` "calibration", no ``gap``). An audit stored without its
    ``tests`` table counts the records with a test.

    Computed once per result and kept on it while the tables it reads (records, tests, discrimination,
    calibration) are the same objects and alpha is the same; each call returns a copy. The report and the screens
    ask for it a dozen times per audit shown (every count and sentence of the board summary), which made it most
    of the GUI's view-thread time. A result's tables are never changed in place once it is made (every result is
    built whole: :func:`run_group_audit`, :meth:`GroupAuditResult.from_dict`, ``dataclasses.replace``).
    """
    return kept_findings(result).copy()


def kept_findings(result: GroupAuditResult) -> pd.DataFrame:
    """:func:`findings` as kept on ``result``, not copied: shared, so read it and never change it (the board
    summary reads it for each kind of sentence)."""
    tables = tuple(getattr(result, name, None) for name in ("records", "tests", "discrimination", "calibration"))
    memo = getattr(result, "__dict__", {}).get("_findings_memo")
    if memo is not None and memo[1] == result.plan.alpha and all(a is b for a, b in zip(memo[0], tables)):
        return memo[2]
    out = _findings(result)
    if hasattr(result, "__dict__"):
        result.__dict__["_findings_memo"] = (tables, result.plan.alpha, out)
    return out


def _findings(result: GroupAuditResult) -> pd.DataFrame:
    rec = result.records
    if "test_id" not in rec:
        return rec.iloc[0:0]
    sel = _lower_side(rec, rec["test_id"].notna().to_numpy())
    disc = discrimination_findings(result)
    d = getattr(result, "discrimination", None)
    if d is None or d.empty:  # stored without its AUROC / AUPRC table: those tests cannot be shown, nor counted
        d = pd.DataFrame(columns=_COLUMNS["discrimination"])
    # the tests shown in no row, each kind's taken once (selections of the tests table in steps, and ``isin`` on
    # its Arrow-backed text, were a fifth of this function's time)
    tests, rate_pos, disc_pos = result.tests, [], []
    if not tests.empty:
        shown = set(sel["test_id"].tolist()) | set(disc["test_id"].tolist())
        kinds = {**dict.fromkeys(METRICS, rate_pos), **dict.fromkeys(DISCRIMINATION_MEASURES if not d.empty else (),
                                                                        disc_pos)}
        for i, (tid, metric, tested) in enumerate(zip(tests["test_id"].tolist(), tests["metric"].tolist(),
                                                      tests["p_value"].notna().to_numpy())):
            if tested and tid not in shown and metric in kinds:
                kinds[metric].append(i)
    extra_rate = _unshown_rows(result, tests.iloc[rate_pos], rec, "rate")
    extra_disc = _unshown_rows(result, tests.iloc[disc_pos], d, "value")
    parts = [p for p in (sel, extra_rate, disc, extra_disc, calibration_findings(result)) if not p.empty]
    out = (parts[0] if parts else sel) if len(parts) <= 1 else pd.concat(parts, ignore_index=True)
    tst = getattr(result, "tests", None)
    if tst is not None and "outside_region" in tst and not out.empty:  # every finding's region note, by test
        out = out.assign(outside_region=out["test_id"].map(tst.set_index("test_id")["outside_region"]))
    if tst is not None and "family" in tst and not out.empty:  # and the family it was corrected in
        out = out.assign(family=out["test_id"].map(tst.set_index("test_id")["family"]))
    return out


def _lower_side(frame: pd.DataFrame, where: np.ndarray) -> pd.DataFrame:
    """The rows of ``frame`` where ``where`` (booleans) is true, one per ``test_id``: the one with gap ≤ 0 when a
    test is shown from both sides (else the first), in the frame's order. The rows to keep are found on two columns
    and taken once (selecting, sorting and de-duplicating the whole wide frame took four copies of it)."""
    pos = np.flatnonzero(where)
    up = (frame["gap"].astype(float) > 0).to_numpy()[pos]
    ids = frame["test_id"].tolist()
    keep: dict = {}  # test_id -> position of its row kept
    for j in np.lexsort((np.arange(len(pos)), up)):  # gap ≤ 0 first, then in the rows' order
        keep.setdefault(ids[pos[j]], int(pos[j]))
    return frame.iloc[sorted(keep.values())]


def _columns(frame: pd.DataFrame, names) -> dict[str, list]:
    """The named columns of ``frame`` as lists of Python values (the values ``to_dict(orient="records")`` gives), read
    a column at a time: reading pandas' Arrow-backed string columns row by row cost tens of µs a cell, and the
    findings of the demo's audit were read that way a dozen times for every screen and report."""
    return {c: frame[c].tolist() for c in names}


def _is_none(values: list) -> np.ndarray:
    """Which of ``values`` are None (a missing value stored as null; NaN is not None, as in the rows it came from)."""
    return np.fromiter((v is None for v in values), dtype=bool, count=len(values))


def _record_frame(columns: dict, n: int) -> pd.DataFrame:
    """Rows shaped like ``records`` from whole columns (lists or arrays of ``n`` values; a column not given is
    empty). Every column is given to pandas as a list of Python values, so each gets the dtype the rows built one
    at a time got (bool, float, text, or object where a value is missing)."""
    cols = _COLUMNS["records"]
    return pd.DataFrame({c: np.asarray(columns[c], dtype=object).tolist() if c in columns else [None] * n
                         for c in cols}, columns=cols)


def _unshown_rows(result: GroupAuditResult, tests: pd.DataFrame, values: pd.DataFrame, col: str) -> pd.DataFrame:
    """Pair tests shown in no record as rows shaped like ``records``, from the side of the group with the lower
    value; each group's value (and n, numerator, denominator for rates) from ``values`` (its ``col``)."""
    if tests.empty:
        return pd.DataFrame(columns=_COLUMNS["records"])
    t = _columns(tests, ("task", "attribute", "metric", "group", "comparison", "p_value", "q_value", "verdict",
                         "test_id", "p_equivalence", "q_equivalence", "n_boot_valid"))
    gap, lo, hi = (tests[c].astype(float).to_numpy() for c in ("gap", "ci_low", "ci_high"))
    no_gap = _is_none(tests["gap"].tolist())
    flip = gap > 0  # told from the lower group's side
    group, comp = (np.array(list(map(str, t[c])), dtype=object) for c in ("group", "comparison"))
    group, comp = np.where(flip, comp, group), np.where(flip, group, comp)
    gap, lo, hi = np.where(flip, -gap, gap), np.where(flip, -hi, lo), np.where(flip, -lo, hi)
    # each group's row of ``values`` by (task, attribute, group, metric) as text, the last row of a key winning
    v = _columns(values, ("task", "attribute", "group", "metric"))
    look = dict(zip(zip(map(str, v["task"]), map(str, v["attribute"]), map(str, v["group"]), map(str, v["metric"])),
                    range(len(values))))
    key = list(zip(map(str, t["task"]), map(str, t["attribute"])))
    metric = list(map(str, t["metric"]))
    own = [look.get(k + (g, m)) for k, g, m in zip(key, group, metric)]
    other = [look.get(k + (c, m)) for k, c, m in zip(key, comp, metric)]
    table = _columns(values, [c for c in (col, "n", "numerator", "denominator", "threshold", "test") if c in values])

    def pick(c: str, rows: list) -> list:  # a group without a row (or a column not there): None
        vals = table.get(c)
        return [None if i is None or vals is None else vals[i] for i in rows]

    n = len(tests)
    out = {k: t[k] for k in ("task", "attribute", "metric", "p_value", "q_value", "verdict", "test_id",
                             "p_equivalence", "q_equivalence", "n_boot_valid")}
    out.update(group=group, comparison=comp, gap=gap, ci_low=lo, ci_high=hi,
               rate=pick(col, own), comparison_rate=pick(col, other),
               significant=(tests["p_value"].astype(float) <= result.plan.alpha).to_numpy(),
               significant_bh=(tests["verdict"] == "differs").fillna(False).to_numpy(dtype=bool),
               favours=np.where((gap == 0) | no_gap, None, comp))
    for c in ("n", "numerator", "denominator", "threshold", "test"):
        out[c] = pick(c, own)
    return _record_frame(out, n)


def discrimination_findings(result: GroupAuditResult) -> pd.DataFrame:
    """The AUROC / AUPRC pair tests as rows shaped like ``records`` (``rate`` = the group's value), each pair once,
    told from the group with the lower value."""
    disc = getattr(result, "discrimination", None)
    if disc is None or disc.empty:
        return pd.DataFrame(columns=_COLUMNS["records"])
    d = _lower_side(disc, disc["test_id"].notna().to_numpy())
    r = _columns(d, ("task", "attribute", "group", "metric", "n", "comparison", "gap", "ci_low", "ci_high",
                     "p_value", "q_value", "verdict", "test_id", "p_equivalence", "q_equivalence", "test", "reason",
                     "value", "comparison_value"))
    gap = d["gap"].astype(float).to_numpy()
    p = d["p_value"].astype(float).to_numpy()
    out = {k: r[k] for k in ("task", "attribute", "group", "metric", "n", "comparison", "gap", "ci_low", "ci_high",
                             "p_value", "q_value", "verdict", "test_id", "p_equivalence", "q_equivalence", "test",
                             "reason")}
    out.update(rate=r["value"], comparison_rate=r["comparison_value"],
               significant=np.where(_is_none(r["p_value"]), None, p <= result.plan.alpha),
               significant_bh=(d["verdict"] == "differs").fillna(False).to_numpy(dtype=bool),
               favours=np.where((gap == 0) | _is_none(r["gap"]), None,
                                np.where(gap > 0, np.array(r["group"], dtype=object),
                                         np.array(r["comparison"], dtype=object))))
    return _record_frame(out, len(d))


def calibration_findings(result: GroupAuditResult) -> pd.DataFrame:
    """The calibration tests as rows shaped like ``records`` (metric "calibration"; gap, rates and CI empty)."""
    cal = getattr(result, "calibration", None)
    if cal is None or cal.empty:
        return pd.DataFrame(columns=_COLUMNS["records"])
    cal = cal[cal["test_id"].notna()]
    r = _columns(cal, ("task", "attribute", "group", "n", "p_value", "q_value", "verdict", "test_id",
                       "p_equivalence", "q_equivalence", "reason"))
    p = cal["p_value"].astype(float).to_numpy()
    n = len(cal)
    out = {k: r[k] for k in r}
    out.update(metric=["calibration"] * n,
               significant=np.where(_is_none(r["p_value"]), None, p <= result.plan.alpha),
               significant_bh=(cal["verdict"] == "differs").fillna(False).to_numpy(dtype=bool),
               test=[x or CALIBRATION_TEST_TEXT for x in (cal["test"].tolist() if "test" in cal else [None] * n)])
    return _record_frame(out, n)


COMPARISON_FAMILIES = {
    # key: (metrics, one test, many tests) — the kinds of comparison of a group audit, in the order they are told
    "rate_gaps": (METRICS, "test of a rate gap between groups", "tests of rate gaps between groups"),
    "discrimination": (DISCRIMINATION_MEASURES, "test of an AUROC or AUPRC gap between groups",
                       "tests of AUROC or AUPRC gaps between groups"),
    "error_spread": (("delta_eo",), "test of the error spread over a continuous attribute",
                     "tests of the error spread over a continuous attribute"),
    "calibration": (("calibration",), "calibration test of one group", "calibration tests, one per group"),
}


def comparison_counts(result: GroupAuditResult) -> dict:
    """What a "comparison" is, counted once for every screen, sentence, table caption and JSON summary: one test of
    the correction families (:func:`findings`, each test once, a pair shown in two rows once, a pair shown in no
    row included). Returns ``differs``, ``equivalent``, ``inconclusive``, ``total`` (their sum), ``rows`` (the
    result rows, ``records``: never comparisons) and ``families``: per kind of comparison (keys of
    :data:`COMPARISON_FAMILIES`, only those with a test) its ``label`` (what the tests are), ``tests`` and the three
    verdict counts, which add up to the totals."""
    f = kept_findings(result)
    memo = getattr(result, "__dict__", {}).get("_counts_memo")
    if memo is not None and memo[0] is f:  # counted once per findings frame (the board summary asks a dozen times)
        return copy.deepcopy(memo[1])
    out = _counts(result, f)
    if hasattr(result, "__dict__"):
        result.__dict__["_counts_memo"] = (f, copy.deepcopy(out))
    return out


def _counts(result: GroupAuditResult, f: pd.DataFrame) -> dict:
    metric = np.array(list(map(str, f["metric"])), dtype=object) if not f.empty else np.array([], dtype=object)
    verdict = {v: (f["verdict"] == v).fillna(False).to_numpy(dtype=bool) if not f.empty
               else np.zeros(0, dtype=bool) for v in VERDICTS}
    out: dict = {v: int(verdict[v].sum()) for v in VERDICTS}
    out["total"] = sum(out[v] for v in VERDICTS)
    out["rows"] = int(len(result.records))
    fams = {}
    for key, (metrics, one, many) in COMPARISON_FAMILIES.items():
        family = np.isin(metric, list(metrics))
        c = {v: int((verdict[v] & family).sum()) for v in VERDICTS}
        c["tests"] = sum(c.values())
        if c["tests"]:
            fams[key] = {"label": one if c["tests"] == 1 else many, **c}
    out["families"] = fams
    return out


def tests_text(counts: dict) -> str:
    """The tests per kind in words, from :func:`comparison_counts`: "20 tests of rate gaps between groups and 2
    tests of the error spread over a continuous attribute"."""
    parts = [f"{c['tests']:,} {c['label']}" for c in counts["families"].values()]
    if not parts:
        return "no test"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def verdict_counts(result: GroupAuditResult, metric: str | None = None) -> dict[str, int]:
    """The comparisons of :func:`comparison_counts` by verdict: ``differs``, ``equivalent``, ``inconclusive``,
    ``total`` and ``tests`` (the same number: a comparison is a test). ``metric``: "gaps" for the rate and
    AUROC/AUPRC gaps, "discrimination" for the AUROC/AUPRC gaps only, "delta_eo" for the error spreads only,
    "calibration" for the calibration tests only, None for all."""
    c = comparison_counts(result)
    keys = {None: tuple(COMPARISON_FAMILIES), "gaps": ("rate_gaps", "discrimination"),
            "discrimination": ("discrimination",), "delta_eo": ("error_spread",),
            "calibration": ("calibration",)}[metric]
    out = {v: sum(c["families"].get(k, {}).get(v, 0) for k in keys) for v in VERDICTS}
    out["total"] = out["tests"] = sum(out.values())
    return out
