"""The demo cohort: a generated, multi-task ICU table with a few documented disparities.

The cohort is modelled on the MIMIC-III ICU cohort of "Hurtful Words" (Zhang et al., 2020; about 55% male,
83% English speakers, 81% white, 58% Medicare). Nothing here comes from MIMIC: every value is drawn from a
seeded random generator, so the demo needs no data file and no credentialed access, and the same seed always
gives the same table.

A small latent-variable model drives everything. Each stay has a general severity and one latent process per
organ system (infection, kidney, lungs, heart) plus a patient-level frailty shared by a patient's stays. Labels
depend on the *true* latent state, identically in every group. Features are *measurements* of that state, and
for a few (group, feature) pairs the measurement is worse — the way real disparities enter real data. A model
trained on the features then reproduces these disparities, which the audit should find (``DEMO_PLANTED``).

Heavy imports (pandas) are done inside functions so that importing this module is cheap.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from fairdesk.core.models.tabular import TrainResult
    from fairdesk.core.progress import CancelToken, ProgressFn

# --------------------------------------------------------------------------------------------------------------
# Public constants

#: Task name -> target prevalence in the cohort.
DEMO_PREVALENCE: dict[str, float] = {
    "mortality": 0.10,        # in-hospital mortality
    "prolonged_stay": 0.30,   # ICU length of stay > 7 days
    "sepsis": 0.15,           # sepsis (Sepsis-3) during the stay
    "aki": 0.20,              # acute kidney injury (KDIGO stage >= 1)
    "ventilation": 0.25,      # invasive mechanical ventilation
    "acute_mi": 0.12,         # acute myocardial infarction / acute coronary syndrome
    "readmission": 0.08,      # ICU readmission within 30 days
}

#: Task names, in display order. Label columns are ``y_<task>``.
DEMO_TASKS: list[str] = list(DEMO_PREVALENCE)

#: Human-readable task names.
DEMO_TASK_LABELS: dict[str, str] = {
    "mortality": "In-hospital mortality",
    "prolonged_stay": "Prolonged ICU stay (> 7 days)",
    "sepsis": "Sepsis",
    "aki": "Acute kidney injury",
    "ventilation": "Invasive mechanical ventilation",
    "acute_mi": "Acute myocardial infarction",
    "readmission": "ICU readmission within 30 days",
}

#: Categorical protected attributes.
DEMO_ATTRIBUTES: list[str] = ["sex", "language", "ethnicity", "insurance"]

#: Continuous protected attributes (for the error-spread metric).
DEMO_CONTINUOUS: list[str] = ["age"]

#: Feature column -> short description (unit). The model features of the demo.
DEMO_FEATURE_INFO: dict[str, str] = {
    "f_heart_rate": "heart rate, mean of first 24 h (beats/min)",
    "f_resp_rate": "respiratory rate, mean of first 24 h (breaths/min)",
    "f_sbp": "systolic blood pressure, mean of first 24 h (mmHg)",
    "f_temperature": "maximum temperature, first 24 h (deg C)",
    "f_spo2": "pulse-oximetry oxygen saturation, minimum of first 24 h (%)",
    "f_fio2": "fraction of inspired oxygen, maximum of first 24 h",
    "f_wbc": "white blood cell count (10^9/L)",
    "f_lactate": "lactate, maximum of first 24 h (mmol/L)",
    "f_creatinine": "serum creatinine, maximum of first 24 h (mg/dL)",
    "f_bun": "blood urea nitrogen (mg/dL)",
    "f_urine_output": "urine output, first 24 h (mL/kg/h)",
    "f_bicarbonate": "bicarbonate, minimum of first 24 h (mmol/L)",
    "f_hemoglobin": "hemoglobin, minimum of first 24 h (g/dL)",
    "f_albumin": "albumin (g/dL)",
    "f_troponin": "troponin T, maximum of first 24 h (ng/mL)",
    "f_chest_pain": "nurse-charted chest-pain / typical-symptom score (0-10)",
    "f_gcs": "Glasgow coma scale, minimum of first 24 h (3-15)",
    "f_sofa": "SOFA score, first 24 h (0-24)",
    "f_infection_signs": "nurse-charted infection-signs score from the patient's report (0-10)",
    "f_prior_admissions": "hospital admissions in the previous year (count)",
}

#: Model feature columns of the demo cohort.
DEMO_FEATURES: list[str] = list(DEMO_FEATURE_INFO)

#: The disparities planted in the generator, as an audit should find them on a model trained on DEMO_FEATURES.
#: ``direction`` says which way the planted gap points for ``group`` (``lower``: the group's metric is lower);
#: ``feature`` is the measurement that carries the problem. Measured sizes: resources/demo/README.md.
DEMO_PLANTED: list[dict[str, str]] = [
    {
        "task": "sepsis",
        "feature": "f_infection_signs",
        "attribute": "language",
        "group": "Other",
        "metric": "recall",
        "direction": "lower",
        "mechanism": (
            "The infection-signs score (f_infection_signs), the strongest sepsis feature, is charted from what "
            "the patient reports; for patients who do not speak English it is recorded with heavy noise "
            "(under-documentation), so their sepsis is missed more often."
        ),
    },
    {
        "task": "acute_mi",
        "feature": "f_chest_pain",
        "attribute": "sex",
        "group": "F",
        "metric": "recall",
        "direction": "lower",
        "mechanism": (
            "Women with myocardial infarction more often present atypically, so the charted chest-pain score "
            "(f_chest_pain) carries a weaker signal for women than for men and their infarctions are missed "
            "more often."
        ),
    },
    {
        "task": "aki",
        "feature": "f_creatinine",
        "attribute": "age",
        "group": "older patients",
        "metric": "error_spread",
        "direction": "higher",
        "mechanism": (
            "Serum creatinine (f_creatinine) rises less in older patients with the same kidney injury (lower "
            "muscle mass), so missed injuries (false negatives) rise steeply with age while false positives "
            "change little: error rates spread strongly over age groups."
        ),
    },
    {
        "task": "ventilation",
        "feature": "f_spo2",
        "attribute": "ethnicity",
        "group": "BLACK",
        "metric": "recall",
        "direction": "lower",
        "mechanism": (
            "Pulse oximeters overestimate oxygen saturation on darker skin (occult hypoxaemia), so f_spo2 "
            "reads too high for Black patients in respiratory failure and their need for ventilation is "
            "missed more often."
        ),
    },
]

#: Tasks generated without any group-dependent measurement error (fair by construction with respect to the
#: categorical attributes; mortality still depends on age, a true difference in risk, not a measurement bias).
DEMO_FAIR_TASKS: list[str] = ["prolonged_stay", "readmission"]

# --------------------------------------------------------------------------------------------------------------
# Generator

_SEX = (["M", "F"], [0.553, 0.447])
_ETHNICITY = (["WHITE", "BLACK", "HISPANIC", "ASIAN", "OTHER"], [0.81, 0.09, 0.04, 0.03, 0.03])
# P(language == "Other" | ethnicity): gives ~17% non-English overall.
_P_OTHER_LANGUAGE = {"WHITE": 0.13, "BLACK": 0.10, "HISPANIC": 0.55, "ASIAN": 0.60, "OTHER": 0.40}
_INSURANCE = ["Medicare", "Private", "Medicaid", "Government"]
_P_INSURANCE_65_PLUS = [0.91, 0.065, 0.015, 0.01]
_P_INSURANCE_UNDER_65 = [0.15, 0.595, 0.20, 0.055]
# Stays per patient: 1, 2 or 3 (about 14% of patients have more than one ICU stay).
_STAYS_PER_PATIENT = ([1, 2, 3], [0.86, 0.10, 0.04])

# Strength of the planted measurement problems (tuned so that the gaps on ~2,000 test stays are clear but not
# absurd: see tests/core/test_demo.py and resources/demo/README.md).
_LANGUAGE_SIGNAL_KEPT = 0.20  # share of the infection-signs signal kept for non-English speakers
_FEMALE_CHEST_PAIN_SIGNAL = 0.60  # chest-pain signal for women relative to men
_CREATININE_RESPONSE_AGE = (1.7, 0.0)  # creatinine response to kidney injury at age 18 and at age 90
_SPO2_OVERESTIMATE = 0.55  # share of a true desaturation that the oximeter misses on dark skin


# Mixed into every seed. Chosen among 40 candidates so that the default seed 0 is a clean, typical draw (planted
# gaps significant and near their average over seeds, fair tasks without significant gaps; see
# resources/demo/README.md) rather than an unusually weak or strong one. Other seeds are honest draws.
_SALT = 29


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _intercept_for_prevalence(logit: np.ndarray, prevalence: float) -> float:
    """The intercept c with mean(sigmoid(logit + c)) == prevalence (bisection; monotone in c)."""
    lo, hi = -30.0, 30.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if _sigmoid(logit + mid).mean() < prevalence:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def generate_icu_cohort(n_stays: int = 8000, seed: int = 0) -> "pd.DataFrame":
    """Generate the demo ICU cohort: one row per ICU stay, deterministic for a given ``(n_stays, seed)``.

    Columns: ``patient_id``, ``stay_id`` (strings), ``sex``, ``language``, ``ethnicity``, ``insurance``, ``age``,
    the ``DEMO_FEATURES`` (floats, no missing values) and one 0/1 label column ``y_<task>`` per ``DEMO_TASKS``.
    Some patients have two or three stays, so splits must keep a patient's stays together.
    """
    import pandas as pd

    n_stays = int(n_stays)
    if n_stays < 50:
        raise ValueError("The demo cohort needs at least 50 ICU stays.")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), _SALT]))

    # ---- patients -------------------------------------------------------------------------------------------
    n_pat_max = n_stays  # enough: every patient has at least one stay
    stays_per = rng.choice(_STAYS_PER_PATIENT[0], size=n_pat_max, p=_STAYS_PER_PATIENT[1])
    cum = np.cumsum(stays_per)
    n_pat = int(np.searchsorted(cum, n_stays) + 1)
    stays_per = stays_per[:n_pat].copy()
    stays_per[-1] -= int(cum[n_pat - 1] - n_stays)  # trim the last patient so that the total is exact

    sex_p = rng.choice(_SEX[0], size=n_pat, p=_SEX[1])
    eth_p = rng.choice(_ETHNICITY[0], size=n_pat, p=_ETHNICITY[1])
    p_other = np.array([_P_OTHER_LANGUAGE[e] for e in eth_p])
    lang_p = np.where(rng.random(n_pat) < p_other, "Other", "English")
    # ICU age distribution: skewed to older adults (median ~ 66), 18-90 (MIMIC shifts ages over 89 to 90+).
    age_p = 18.0 + 72.0 * rng.beta(2.9, 1.45, size=n_pat)
    frailty_p = rng.normal(size=n_pat)
    u_ins = rng.random(n_pat)
    cum65 = np.cumsum(_P_INSURANCE_65_PLUS)
    cumu = np.cumsum(_P_INSURANCE_UNDER_65)
    ins_idx = np.where(age_p >= 65.0, np.searchsorted(cum65, u_ins * cum65[-1], side="right"),
                       np.searchsorted(cumu, u_ins * cumu[-1], side="right"))
    ins_p = np.array(_INSURANCE)[np.minimum(ins_idx, len(_INSURANCE) - 1)]
    patient_ids = np.array([str(10000 + 3 * i + int(rng.integers(0, 3))) for i in range(n_pat)])

    # ---- stays ----------------------------------------------------------------------------------------------
    pat_of_stay = np.repeat(np.arange(n_pat), stays_per)
    stay_rank = np.concatenate([np.arange(k) for k in stays_per])
    n = n_stays
    order = rng.permutation(n)  # rows in admission-like random order, not grouped by patient
    pat_of_stay, stay_rank = pat_of_stay[order], stay_rank[order]

    age = np.clip(age_p[pat_of_stay] + stay_rank * rng.uniform(0.1, 1.5, size=n), 18.0, 90.0)
    age = np.round(age, 1)
    sex = sex_p[pat_of_stay]
    language = lang_p[pat_of_stay]
    ethnicity = eth_p[pat_of_stay]
    insurance = ins_p[pat_of_stay]
    frailty = frailty_p[pat_of_stay]
    male = sex == "M"
    age_z = (age - 65.0) / 15.0

    def z() -> np.ndarray:
        return rng.normal(size=n)

    # latent state (roughly unit variance)
    sev = 0.8 * z() + 0.45 * frailty + 0.2 * age_z
    inf = 0.3 * sev + 0.95 * z()
    kid = 0.3 * sev + 0.95 * z()
    resp = 0.35 * sev + 0.94 * z()
    card = 0.2 * sev + 0.95 * z() + 0.25 * male   # ischaemic heart disease is more common in men
    readm = 0.7 * frailty + 0.3 * sev + 0.65 * z()

    # labels: depend on the TRUE state, the same way in every group
    logits = {
        "mortality": 1.7 * sev + 0.6 * resp + 0.5 * age_z,
        "prolonged_stay": 1.1 * sev + 0.8 * resp + 0.5 * inf + 0.4 * kid,
        "sepsis": 2.6 * inf + 0.6 * sev,
        "aki": 2.6 * kid + 0.5 * sev,
        "ventilation": 2.6 * resp + 0.6 * sev,
        "acute_mi": 2.8 * card + 0.3 * sev,
        "readmission": 1.6 * readm,
    }
    labels = {}
    for task, logit in logits.items():
        c = _intercept_for_prevalence(logit, DEMO_PREVALENCE[task])
        labels[task] = (rng.random(n) < _sigmoid(logit + c)).astype(np.int64)

    # ---- measurements (features) ----------------------------------------------------------------------------
    f: dict[str, np.ndarray] = {}
    f["f_heart_rate"] = 86 + 9 * sev + 7 * inf + 4 * card + 11 * z()
    f["f_resp_rate"] = 19 + 2.5 * resp + 1.5 * sev + 3 * z()
    f["f_sbp"] = 121 - 9 * sev - 5 * inf + 4 * age_z + 14 * z()
    f["f_temperature"] = 37.1 + 0.35 * inf + 0.45 * z()
    # pulse oximetry: true saturation falls with respiratory failure; on dark skin part of the fall is not seen
    true_desat = np.clip(2.0 + 2.2 * resp + 1.2 * z(), 0.0, None)
    seen = np.where(ethnicity == "BLACK", 1.0 - _SPO2_OVERESTIMATE, 1.0)
    f["f_spo2"] = np.clip(97.5 - seen * true_desat + 0.8 * z(), 70.0, 100.0)
    f["f_fio2"] = np.clip(0.35 + 0.06 * resp + 0.03 * sev + 0.10 * z(), 0.21, 1.0)
    f["f_wbc"] = np.clip(10 + 1.5 * inf + 0.5 * sev + 3.5 * z(), 0.5, None)
    f["f_lactate"] = np.exp(0.45 + 0.28 * sev + 0.12 * inf + 0.35 * z())
    # creatinine: the rise for a given kidney injury shrinks with age (lower muscle mass)
    r18, r90 = _CREATININE_RESPONSE_AGE
    blunting = r18 + (r90 - r18) * (age - 18.0) / 72.0
    f["f_creatinine"] = np.exp(0.05 + 0.55 * kid * blunting + 0.1 * sev + 0.18 * z())
    f["f_bun"] = np.clip(24 + 2.5 * kid + 3 * sev + 9 * z(), 3.0, None)
    f["f_urine_output"] = np.exp(-0.1 - 0.12 * kid - 0.08 * sev + 0.45 * z())
    f["f_bicarbonate"] = 24 - 1.5 * sev - 0.8 * kid + 2.8 * z()
    f["f_hemoglobin"] = 10.8 + 0.9 * male - 0.4 * sev - 0.4 * frailty + 1.4 * z()
    f["f_albumin"] = np.clip(3.2 - 0.25 * frailty - 0.15 * sev - 0.1 * readm + 0.45 * z(), 1.0, 5.0)
    f["f_troponin"] = np.exp(-3.3 + 0.55 * card + 0.1 * sev + 0.9 * z())
    # chest pain: typical presentation in men; atypical (weaker signal) in women
    cp_signal = np.where(male, 1.0, _FEMALE_CHEST_PAIN_SIGNAL)
    f["f_chest_pain"] = np.clip(2.5 + 1.9 * card * cp_signal + 1.0 * z(), 0.0, 10.0)
    f["f_gcs"] = np.clip(np.round(14.0 - 1.2 * sev - 0.8 * resp + 1.6 * z()), 3.0, 15.0)
    f["f_sofa"] = np.clip(np.round(5.0 + 1.8 * sev + 0.6 * resp + 0.5 * kid + 0.3 * inf + 1.4 * z()), 0.0, 24.0)
    # infection signs: charted from the patient's report; heavy noise when there is a language barrier
    kept = np.where(language == "Other", _LANGUAGE_SIGNAL_KEPT, 1.0)
    noise_sd = np.sqrt(1.0 + 2.2 ** 2 * (1.0 - kept ** 2))  # keeps the score's spread the same in both groups
    f["f_infection_signs"] = np.clip(3.0 + 2.2 * kept * inf + 1.0 * noise_sd * z(), 0.0, 10.0)
    f["f_prior_admissions"] = rng.poisson(np.exp(-0.3 + 0.55 * frailty + 0.25 * readm)).astype(float)

    df = pd.DataFrame({
        "patient_id": patient_ids[pat_of_stay],
        "stay_id": [str(200001 + i) for i in range(n)],
        "sex": sex,
        "language": language,
        "ethnicity": ethnicity,
        "insurance": insurance,
        "age": age.astype(float),
    })
    for name in DEMO_FEATURES:
        df[name] = np.round(np.asarray(f[name], dtype=float), 3)
    for task in DEMO_TASKS:
        df[f"y_{task}"] = labels[task]
    return df


def demo_spec(kind: str = "logistic_regression", seed: int = 0, params: dict[str, Any] | None = None,
              threads: int = 1, device: str = "auto"):
    """The training specification used for the demo (features, tasks, ids and protected attributes)."""
    from fairdesk.core.models.tabular import TrainSpec

    return TrainSpec(
        kind=kind,
        features=list(DEMO_FEATURES),
        tasks={t: f"y_{t}" for t in DEMO_TASKS},
        patient_id="patient_id",
        id_columns=["stay_id"],
        passthrough=list(DEMO_ATTRIBUTES) + list(DEMO_CONTINUOUS),
        seed=seed,
        params=dict(params or {}),
        threads=threads,
        device=device,
    )


def demo_predictions(seed: int = 0, n_stays: int = 8000, kind: str = "logistic_regression",
                     progress: "ProgressFn | None" = None, cancel: "CancelToken | None" = None,
                     ) -> "tuple[pd.DataFrame, TrainResult]":
    """Generate the demo cohort and train ``kind`` on it; return (long predictions, TrainResult).

    The predictions have one row per (stay, task) with ``stay_id``, ``patient_id``, the protected attributes,
    ``task``, ``label``, ``score`` and ``split`` ("train"/"val"/"test"); audits use the "test" rows.
    """
    from fairdesk.core.models.tabular import train_and_predict
    from fairdesk.core.progress import Reporter

    rep = Reporter(progress, cancel)
    rep(0.0, "Generating the demo ICU cohort")
    df = generate_icu_cohort(n_stays=n_stays, seed=seed)
    rep(0.05, f"Generated {len(df):,} ICU stays")
    result = train_and_predict(df, demo_spec(kind=kind, seed=seed), progress=rep.sub(0.05, 1.0),
                               cancel=rep.cancel)
    return result.predictions, result
