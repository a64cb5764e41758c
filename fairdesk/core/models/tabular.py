"""Baseline classifiers for tabular data, trained per task on patient-disjoint splits.

``train_and_predict(df, spec, progress, cancel)`` trains one model per task (logistic regression, gradient
boosting, random forest or a small torch MLP) and returns long-format predictions — one row per (row, task) with
``task``, ``label``, ``score`` and ``split`` — that the audits consume, plus per-task metrics and a SHA-256 hash of
every fitted model's parameters (computed in memory; nothing is pickled or loaded from a file).

sklearn, scipy and torch are imported inside functions: importing this module stays cheap for the GUI.
"""
from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pandas as pd

from fairdesk.core.data.splits import patient_disjoint_split
from fairdesk.core.errors import ModelError
from fairdesk.core.jsonable import jsonable
from fairdesk.core.progress import CancelToken, ProgressFn, Reporter
from fairdesk.core.provenance import package_versions

MODEL_KINDS: tuple[str, ...] = ("logistic_regression", "gradient_boosting", "random_forest", "mlp")

MODEL_LABELS: dict[str, str] = {
    "logistic_regression": "Logistic regression",
    "gradient_boosting": "Gradient boosting (histogram)",
    "random_forest": "Random forest",
    "mlp": "Neural network (MLP)",
}

#: Default hyper-parameters per kind; ``TrainSpec.params`` overrides any of them (other names are refused).
DEFAULT_PARAMS: dict[str, dict[str, Any]] = {
    "logistic_regression": {"C": 1.0, "max_iter": 2000, "class_weight": None},
    "gradient_boosting": {"max_iter": 200, "learning_rate": 0.05, "max_leaf_nodes": 15, "max_depth": None,
                          "min_samples_leaf": 20, "l2_regularization": 1.0, "early_stopping": False,
                          "class_weight": None},
    "random_forest": {"n_estimators": 200, "max_depth": None, "min_samples_leaf": 5, "max_features": "sqrt",
                      "class_weight": None},
    "mlp": {"hidden": [64, 32], "dropout": 0.1, "lr": 1e-3, "weight_decay": 1e-4, "batch_size": 256,
            "max_epochs": 100, "patience": 10},
}

#: Column names the long-format output uses itself.
OUTPUT_COLUMNS = ("task", "label", "score", "split")
SPLITS = ("train", "val", "test")
MIN_ROWS = 20
MIN_TRAIN_ROWS = 10

# Trees / boosting rounds are fitted in chunks; between two chunks progress is reported and cancel is checked.
_FIRST_CHUNK = 5
_MAX_CHUNK = 50
_CHUNK_SECONDS = 0.25


# --------------------------------------------------------------------------------------------------------------
# Specification and result


@dataclass
class TrainSpec:
    """What to train: model kind, columns and split.

    ``tasks`` maps a task name to its 0/1 label column; a list of label columns or ``None`` (every ``y_*``
    column, task name without the ``y_`` prefix) is accepted too. ``id_columns`` and ``passthrough`` (e.g. the
    protected attributes) are copied to the predictions. ``device`` matters for the MLP only: "auto" uses a GPU
    when one is present.
    """

    kind: str = "logistic_regression"
    features: list[str] = field(default_factory=list)
    tasks: dict[str, str] | list[str] | None = None
    patient_id: str | None = None
    id_columns: list[str] = field(default_factory=list)
    passthrough: list[str] = field(default_factory=list)
    val_size: float = 0.15
    test_size: float = 0.25
    seed: int = 0
    params: dict[str, Any] = field(default_factory=dict)
    threads: int = 1
    device: str = "auto"

    def resolved_tasks(self, columns) -> dict[str, str]:
        """Task name -> label column."""
        if self.tasks is None:
            found = {str(c)[2:]: str(c) for c in columns if str(c).startswith("y_") and len(str(c)) > 2}
            return found
        if isinstance(self.tasks, dict):
            return {str(k): str(v) for k, v in self.tasks.items()}
        return {(c[2:] if c.startswith("y_") and len(c) > 2 else c): c for c in map(str, self.tasks)}

    def resolved_params(self) -> dict[str, Any]:
        if self.kind not in DEFAULT_PARAMS:
            raise ModelError(
                f"Unknown model kind '{self.kind}'. Choose one of: "
                + ", ".join(f"{k} ({MODEL_LABELS[k]})" for k in MODEL_KINDS) + ".")
        unknown = sorted(set(self.params) - set(DEFAULT_PARAMS[self.kind]))
        if unknown:
            raise ModelError(
                f"The setting(s) {', '.join(unknown)} do not apply to {MODEL_LABELS[self.kind]}. "
                f"Valid settings: {', '.join(DEFAULT_PARAMS[self.kind])}.")
        out = dict(DEFAULT_PARAMS[self.kind])
        out.update(self.params)
        return out


@dataclass
class TrainResult:
    """Predictions (long format), per-task metrics and provenance of one training run."""

    predictions: pd.DataFrame
    metrics: pd.DataFrame
    model_hashes: dict[str, str]
    params: dict[str, Any]
    seed: int
    kind: str
    device: str
    features: list[str] = field(default_factory=list)
    tasks: dict[str, str] = field(default_factory=dict)
    patient_id: str | None = None
    split_sizes: dict[str, int] = field(default_factory=dict)
    details: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)
    elapsed_seconds: float = 0.0

    def provenance(self) -> dict[str, Any]:
        """A JSON-serialisable record of how the predictions were made (no data)."""
        return {
            "kind": self.kind, "kind_label": MODEL_LABELS.get(self.kind, self.kind), "params": jsonable(self.params),
            "seed": self.seed, "device": self.device, "features": list(self.features), "tasks": dict(self.tasks),
            "patient_id": self.patient_id, "split_sizes": dict(self.split_sizes),
            "model_hashes": dict(self.model_hashes), "details": jsonable(self.details),
            "notes": list(self.notes), "versions": dict(self.versions),
            "elapsed_seconds": round(self.elapsed_seconds, 3),
            "metrics": jsonable(self.metrics.to_dict(orient="records")),
        }


# --------------------------------------------------------------------------------------------------------------
# Input checks


def _check_inputs(df: pd.DataFrame, spec: TrainSpec) -> dict[str, str]:
    if not isinstance(df, pd.DataFrame):
        raise ModelError("Training needs a table (pandas DataFrame).")
    spec.resolved_params()  # unknown kind / settings
    tasks = spec.resolved_tasks(df.columns)
    features = list(spec.features)
    if not features:
        raise ModelError("No feature columns were chosen. Pick the columns the model should learn from.")
    if not tasks:
        raise ModelError("No task was chosen. Pick at least one 0/1 label column (e.g. a column named y_mortality).")
    dup = sorted({c for c in features if features.count(c) > 1})
    if dup:
        raise ModelError(f"Feature column(s) chosen twice: {', '.join(dup)}. Choose each feature once.")
    cols = set(map(str, df.columns))
    missing: list[str] = []
    missing += [f"feature '{c}'" for c in features if c not in cols]
    missing += [f"label '{c}' (task {t})" for t, c in tasks.items() if c not in cols]
    if spec.patient_id is not None and spec.patient_id not in cols:
        missing.append(f"patient id '{spec.patient_id}'")
    missing += [f"id '{c}'" for c in spec.id_columns if c not in cols]
    missing += [f"attribute '{c}'" for c in spec.passthrough if c not in cols]
    if missing:
        raise ModelError("These columns are not in the table: " + "; ".join(missing)
                         + ". Check the spelling or choose other columns.")
    leaking = sorted(set(tasks.values()) & set(features))
    if leaking:
        raise ModelError(f"Label column(s) {', '.join(leaking)} are also chosen as features: the model would "
                         "see the answer. Remove them from the features.")
    reserved = sorted(set(OUTPUT_COLUMNS) & (set(spec.id_columns) | set(spec.passthrough)
                                             | ({spec.patient_id} if spec.patient_id else set())))
    if reserved:
        raise ModelError(f"Column name(s) {', '.join(reserved)} are used by the predictions table itself "
                         "(task, label, score, split). Rename those columns before training.")
    if len(df) < MIN_ROWS:
        raise ModelError(f"The table has only {len(df)} row(s); training needs at least {MIN_ROWS} (in practice "
                         "hundreds). Load a larger dataset.")

    non_numeric = [f"{c} ({df[c].dtype})" for c in features
                   if not (pd.api.types.is_numeric_dtype(df[c]) or pd.api.types.is_bool_dtype(df[c]))]
    if non_numeric:
        raise ModelError(
            "These feature columns are not numeric: " + ", ".join(non_numeric) + ". Convert them to numbers "
            "(e.g. one column per category with 0/1 values) or remove them from the features.")
    bad_nan, bad_inf = [], []
    for c in features:
        v = df[c].to_numpy(dtype=float, na_value=np.nan)
        k = int(np.isnan(v).sum())
        if k:
            bad_nan.append(f"{c} ({k} row{'s' if k > 1 else ''})")
        k = int(np.isinf(v).sum())
        if k:
            bad_inf.append(f"{c} ({k} row{'s' if k > 1 else ''})")
    if bad_nan:
        raise ModelError(
            "Some feature values are missing (NaN): " + ", ".join(bad_nan) + ". Impute them (e.g. the median "
            "of the training rows, plus a 0/1 'was missing' column), drop those rows, or remove the feature.")
    if bad_inf:
        raise ModelError("Some feature values are infinite: " + ", ".join(bad_inf) + ". Replace them with real "
                         "values or drop those rows.")

    for t, c in tasks.items():
        col = df[c]
        if not (pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col)):
            examples = ", ".join(repr(x) for x in pd.unique(col.dropna())[:4])
            raise ModelError(f"The label column '{c}' (task {t}) is not 0/1 but text (e.g. {examples}). Recode it "
                             "as 1 for the outcome and 0 for no outcome.")
        v = col.to_numpy(dtype=float, na_value=np.nan)
        present = v[~np.isnan(v)]
        if present.size == 0:
            raise ModelError(f"The label column '{c}' (task {t}) is empty. Choose a label column with values.")
        other = np.setdiff1d(np.unique(present), [0.0, 1.0])
        if other.size:
            shown = ", ".join(f"{x:g}" for x in other[:5])
            raise ModelError(f"The label column '{c}' (task {t}) must hold only 0 and 1, but also has {shown}. "
                             "Recode it as 1 for the outcome and 0 for no outcome (a threshold for a number).")

    if spec.threads is None or int(spec.threads) < 1:
        raise ModelError("The number of threads must be 1 or more.")
    if spec.device not in ("auto", "cpu", "cuda") and not str(spec.device).startswith("cuda:"):
        raise ModelError(f"Unknown device '{spec.device}'. Use auto, cpu or cuda.")
    return tasks


def _resolve_device(spec: TrainSpec) -> str:
    if spec.kind != "mlp":
        return "cpu"
    if spec.device == "cpu":
        return "cpu"
    import torch

    has_cuda = torch.cuda.is_available()
    if spec.device == "auto":
        return "cuda" if has_cuda else "cpu"
    if not has_cuda:
        raise ModelError("A GPU (cuda) was requested but none is available. Choose 'auto' or 'cpu'.")
    return str(spec.device)


# --------------------------------------------------------------------------------------------------------------
# Model hashing: parameters serialised in memory, never pickled


def _hash_update(h, obj: Any, depth: int = 0) -> None:
    if depth > 60:
        raise ModelError("The fitted model is nested too deeply to compute its fingerprint.")
    if obj is None or isinstance(obj, (bool, int, float, str, bytes, np.generic)):
        h.update(f"{type(obj).__name__}:{obj!r};".encode())
        return
    if isinstance(obj, np.ndarray):
        h.update(f"nd:{obj.dtype.str}:{obj.dtype.descr!r}:{obj.shape};".encode())
        if obj.dtype.hasobject:
            for x in obj.ravel():
                _hash_update(h, x, depth + 1)
        else:
            h.update(np.ascontiguousarray(obj).tobytes())
        return
    if isinstance(obj, dict):
        h.update(f"dict{len(obj)}{{".encode())
        for k in sorted(obj, key=str):
            _hash_update(h, str(k), depth + 1)
            _hash_update(h, obj[k], depth + 1)
        h.update(b"}")
        return
    if isinstance(obj, (list, tuple)):
        h.update(f"seq{len(obj)}[".encode())
        for x in obj:
            _hash_update(h, x, depth + 1)
        h.update(b"]")
        return
    mod = type(obj).__module__ or ""
    if mod.startswith("torch") and hasattr(obj, "detach"):
        _hash_update(h, obj.detach().cpu().numpy(), depth + 1)
        return
    h.update(f"obj:{type(obj).__qualname__};".encode())
    if not mod.startswith("sklearn"):
        return  # unknown helper objects (random generators, loss functions): their type only
    if type(obj).__name__ == "Pipeline":
        for name, step in obj.steps:
            _hash_update(h, name, depth + 1)
            _hash_update(h, step, depth + 1)
        return
    if hasattr(obj, "get_params") and hasattr(obj, "fit"):  # an estimator: settings + fitted state
        params = {k: v for k, v in obj.get_params(deep=False).items()
                  if v is None or isinstance(v, (bool, int, float, str, list, tuple, dict))}
        state = {k: v for k, v in vars(obj).items()
                 if (k.endswith("_") and not k.startswith("__"))
                 or k in ("_predictors", "_baseline_prediction", "_bin_mapper")}
        _hash_update(h, params, depth + 1)
        _hash_update(h, state, depth + 1)
        return
    try:  # Cython trees define __getstate__ (nodes and values arrays); plain helpers use their __dict__
        state = obj.__getstate__()
    except Exception:  # noqa: BLE001
        state = None
    if not isinstance(state, dict):
        state = getattr(obj, "__dict__", None)
    if isinstance(state, dict):
        _hash_update(h, {k: v for k, v in state.items() if not callable(v)}, depth + 1)


def model_hash(state: Any, kind: str, features: list[str]) -> str:
    """SHA-256 hex digest of a fitted model's parameters (plus its kind and feature names)."""
    h = hashlib.sha256()
    _hash_update(h, {"kind": kind, "features": list(features)})
    _hash_update(h, state)
    return h.hexdigest()


# --------------------------------------------------------------------------------------------------------------
# Model kinds. Each fit function returns (predict_proba(X) -> scores, state to hash, details dict).

FitOut = tuple[Callable[[np.ndarray], np.ndarray], Any, dict[str, Any]]


def _chunked(total: int, model, param: str, X: np.ndarray, y: np.ndarray):
    """Fit a warm-starting ensemble in chunks of trees / rounds, yielding the count done after each chunk.

    Warm start gives the same model as one call (the random state is advanced per tree), so the chunk sizes do
    not change the result; they are sized from the measured time per tree so that a chunk takes about
    ``_CHUNK_SECONDS`` and a cancel request is honoured quickly even on large tables.
    """
    done, step = 0, _FIRST_CHUNK
    while done < total:
        t0 = time.perf_counter()
        new = min(done + step, total)
        model.set_params(**{param: new})
        model.fit(X, y)
        per_unit = (time.perf_counter() - t0) / max(new - done, 1)
        done = new
        step = int(min(max(_CHUNK_SECONDS / max(per_unit, 1e-6), 1), _MAX_CHUNK))
        yield done


def _fit_logistic(Xtr, ytr, Xva, yva, params, seed, threads, device, rep: Reporter) -> FitOut:
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    rep(0.0, "fitting")
    model = Pipeline([("scale", StandardScaler()),
                      ("model", LogisticRegression(C=float(params["C"]), max_iter=int(params["max_iter"]),
                                                   class_weight=params["class_weight"], random_state=seed))])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model.fit(Xtr, ytr)
    details: dict[str, Any] = {"n_iter": int(np.max(model[-1].n_iter_))}
    if any(issubclass(w.category, ConvergenceWarning) for w in caught):
        details["warning"] = "the optimiser did not fully converge; consider raising max_iter or lowering C"
    rep(1.0, "fitted")
    return (lambda X: model.predict_proba(X)[:, 1]), model, details


def _fit_gradient_boosting(Xtr, ytr, Xva, yva, params, seed, threads, device, rep: Reporter) -> FitOut:
    from sklearn.ensemble import HistGradientBoostingClassifier

    p = dict(params)
    max_iter = int(p.pop("max_iter"))
    early = bool(p.pop("early_stopping"))
    model = HistGradientBoostingClassifier(random_state=seed, max_iter=max_iter, early_stopping=early, **p)
    if early:
        # one call, early stopping on our validation split (cancel is checked before and after)
        rep(0.0, f"boosting up to {max_iter} rounds with early stopping on the validation split")
        if len(yva) and len(np.unique(yva)) == 2:
            model.fit(Xtr, ytr, X_val=Xva, y_val=yva)
        else:
            model.set_params(early_stopping=False)
            model.fit(Xtr, ytr)
    else:
        model.set_params(warm_start=True)
        for done in _chunked(max_iter, model, "max_iter", Xtr, ytr):
            rep(done / max_iter, f"boosting round {done}/{max_iter}")
        model.set_params(warm_start=False)
    rep(1.0, "fitted")
    return (lambda X: model.predict_proba(X)[:, 1]), model, {"n_iter": int(model.n_iter_)}


def _fit_random_forest(Xtr, ytr, Xva, yva, params, seed, threads, device, rep: Reporter) -> FitOut:
    from sklearn.ensemble import RandomForestClassifier

    p = dict(params)
    n_trees = int(p.pop("n_estimators"))
    model = RandomForestClassifier(n_estimators=0, random_state=seed, n_jobs=threads, warm_start=True, **p)
    for done in _chunked(n_trees, model, "n_estimators", Xtr, ytr):
        rep(done / n_trees, f"tree {done}/{n_trees}")
    model.set_params(warm_start=False)
    return (lambda X: model.predict_proba(X)[:, 1]), model, {"n_trees": n_trees}


def _fit_mlp(Xtr, ytr, Xva, yva, params, seed, threads, device, rep: Reporter) -> FitOut:
    import torch
    from torch import nn

    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    mean = Xtr.mean(axis=0)
    std = Xtr.std(axis=0)
    std = np.where(std > 1e-12, std, 1.0)

    def prep(X: np.ndarray):
        return torch.as_tensor(((X - mean) / std).astype(np.float32), device=device)

    hidden = [int(h) for h in params["hidden"]]
    dropout = float(params["dropout"])
    layers: list[nn.Module] = []
    width = Xtr.shape[1]
    for h_ in hidden:
        layers += [nn.Linear(width, h_), nn.BatchNorm1d(h_), nn.ReLU(), nn.Dropout(dropout)]
        width = h_
    layers.append(nn.Linear(width, 1))
    net = nn.Sequential(*layers).to(device)
    opt = torch.optim.Adam(net.parameters(), lr=float(params["lr"]), weight_decay=float(params["weight_decay"]))
    loss_fn = nn.BCEWithLogitsLoss()  # binary cross-entropy on the logit (numerically stable)

    xt, yt = prep(Xtr), torch.as_tensor(ytr.astype(np.float32), device=device)
    use_val = len(yva) > 0
    xv = prep(Xva) if use_val else xt
    yv = torch.as_tensor(yva.astype(np.float32), device=device) if use_val else yt
    bs = max(2, int(params["batch_size"]))
    max_epochs, patience = int(params["max_epochs"]), int(params["patience"])
    n = len(ytr)

    def val_loss() -> float:
        net.eval()
        with torch.no_grad():
            out = float(loss_fn(net(xv).squeeze(1), yv))
        net.train()
        return out

    best = float("inf")
    best_state = {k: v.detach().clone() for k, v in net.state_dict().items()}
    best_epoch, since_best, epoch = 0, 0, 0
    for epoch in range(1, max_epochs + 1):
        net.train()
        order = torch.randperm(n, generator=gen).to(device)
        for start in range(0, n, bs):
            idx = order[start:start + bs]
            if len(idx) < 2:  # batch norm needs two rows
                continue
            rep.check()
            opt.zero_grad()
            loss = loss_fn(net(xt[idx]).squeeze(1), yt[idx])
            loss.backward()
            opt.step()
        vl = val_loss()
        if vl < best - 1e-6:
            best, best_epoch, since_best = vl, epoch, 0
            best_state = {k: v.detach().clone() for k, v in net.state_dict().items()}
        else:
            since_best += 1
        rep(epoch / max_epochs, f"epoch {epoch}/{max_epochs}, validation loss {vl:.4f}")
        if since_best >= patience:
            break
    net.load_state_dict(best_state)
    net.eval()

    def predict(X: np.ndarray) -> np.ndarray:
        outs = []
        with torch.no_grad():
            for start in range(0, len(X), 8192):
                outs.append(torch.sigmoid(net(prep(X[start:start + 8192])).squeeze(1)).cpu().numpy())
        return np.concatenate(outs).astype(np.float64) if outs else np.zeros(0)

    state = {"standardise_mean": mean, "standardise_std": std,
             "weights": {k: v.detach().cpu().numpy() for k, v in best_state.items()}}
    details = {"epochs_run": epoch, "best_epoch": best_epoch, "best_val_loss": best}
    return predict, state, details


_FITTERS = {
    "logistic_regression": _fit_logistic,
    "gradient_boosting": _fit_gradient_boosting,
    "random_forest": _fit_random_forest,
    "mlp": _fit_mlp,
}


# --------------------------------------------------------------------------------------------------------------
# Training


def _auc_metrics(y: np.ndarray, s: np.ndarray) -> tuple[float, float]:
    from sklearn.metrics import average_precision_score, roc_auc_score

    if len(y) == 0 or len(np.unique(y)) < 2:
        return float("nan"), float("nan")
    return float(roc_auc_score(y, s)), float(average_precision_score(y, s))


def train_and_predict(df: pd.DataFrame, spec: TrainSpec, progress: ProgressFn | None = None,
                      cancel: CancelToken | None = None) -> TrainResult:
    """Train one ``spec.kind`` model per task on a patient-disjoint split and predict every row.

    Returns a :class:`TrainResult` whose ``predictions`` hold one row per (row, task): the id columns, the patient
    id, the passthrough columns, ``task``, ``label`` (0/1), ``score`` (probability in [0, 1]) and ``split``.
    Rows whose label is missing for a task are left out of that task (and counted in ``notes``).
    Raises :class:`ModelError` for unusable inputs and :class:`Cancelled` if ``cancel`` is set (nothing partial is
    returned).
    """
    t0 = time.perf_counter()
    rep = Reporter(progress, cancel)
    rep(0.0, "Checking the table")
    tasks = _check_inputs(df, spec)
    params = spec.resolved_params()
    device = _resolve_device(spec)
    threads = int(spec.threads)
    features = list(spec.features)

    split = patient_disjoint_split(df, spec.patient_id, spec.val_size, spec.test_size, spec.seed).to_numpy()
    sizes = {s: int((split == s).sum()) for s in SPLITS}
    if sizes["train"] < MIN_TRAIN_ROWS or (spec.val_size > 0 and sizes["val"] == 0) or (
            spec.test_size > 0 and sizes["test"] == 0):
        who = "patients" if spec.patient_id else "rows"
        raise ModelError(
            f"Too few {who} to make training, validation and test splits (train {sizes['train']}, validation "
            f"{sizes['val']}, test {sizes['test']} rows; at least {MIN_TRAIN_ROWS} training rows needed). "
            "Load more data or lower the validation/test shares.")
    X = df[features].to_numpy(dtype=np.float64, na_value=np.nan)
    rep(0.02, f"Split {len(df):,} rows: {sizes['train']:,} train, {sizes['val']:,} validation, "
              f"{sizes['test']:,} test")

    # the part of every task's output that does not depend on the task
    keep: list[str] = []
    for c in list(spec.id_columns) + ([spec.patient_id] if spec.patient_id else []) + list(spec.passthrough):
        if c not in keep:
            keep.append(c)
    base = df[keep].reset_index(drop=True) if keep else pd.DataFrame({"row": np.arange(len(df))})

    frames: list[pd.DataFrame] = []
    metric_rows: list[dict[str, Any]] = []
    hashes: dict[str, str] = {}
    details: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    fit = _FITTERS[spec.kind]
    n_tasks = len(tasks)
    old_threads = None
    if spec.kind == "mlp":
        import torch

        old_threads = torch.get_num_threads()
        torch.set_num_threads(threads)
    try:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=threads):
            for i, (task, col) in enumerate(tasks.items()):
                trep = rep.sub(0.03 + 0.95 * i / n_tasks, 0.03 + 0.95 * (i + 1) / n_tasks)
                label_name = MODEL_LABELS[spec.kind].lower()
                trep(0.0, f"Task {i + 1}/{n_tasks} '{task}': training {label_name}")
                yall = df[col].to_numpy(dtype=np.float64, na_value=np.nan)
                has = ~np.isnan(yall)
                if not has.all():
                    notes.append(f"Task '{task}': {int((~has).sum())} row(s) without a label were left out.")
                y = np.where(has, yall, 0).astype(np.int64)
                tr, va, te = (has & (split == "train")), (has & (split == "val")), (has & (split == "test"))
                classes, counts = np.unique(y[tr], return_counts=True)
                if tr.sum() < MIN_TRAIN_ROWS:
                    raise ModelError(f"Task '{task}' has only {int(tr.sum())} labelled training row(s); at least "
                                     f"{MIN_TRAIN_ROWS} are needed. Load more data or choose another task.")
                if len(classes) < 2:
                    only = int(classes[0])
                    raise ModelError(
                        f"In the training split, every one of the {int(counts[0])} rows of task '{task}' (column "
                        f"'{col}') has label {only}: a model cannot learn from one class. Check the label column, "
                        "choose another task, or load more data so that both outcomes occur.")
                predict, state, info = fit(X[tr], y[tr], X[va], y[va], params, int(spec.seed), threads, device,
                                           trep.sub(0.0, 0.9))
                trep(0.9, f"Task {i + 1}/{n_tasks} '{task}': predicting")
                scores = np.clip(np.asarray(predict(X[has]), dtype=np.float64), 0.0, 1.0)
                trep.check()
                hashes[task] = model_hash(state, spec.kind, features)
                details[task] = info
                out = base[has].reset_index(drop=True).copy()
                out["task"] = task
                out["label"] = y[has]
                out["score"] = scores
                out["split"] = split[has]
                frames.append(out)
                full = np.full(len(df), np.nan)
                full[has] = scores
                row: dict[str, Any] = {"task": task, "label_column": col}
                for s, m in (("train", tr), ("val", va), ("test", te)):
                    row[f"n_{s}"] = int(m.sum())
                    row[f"prevalence_{s}"] = float(y[m].mean()) if m.any() else float("nan")
                row["prevalence"] = float(y[has].mean())
                for s, m in (("val", va), ("test", te)):
                    auroc, auprc = _auc_metrics(y[m], full[m])
                    row[f"{s}_auroc"], row[f"{s}_auprc"] = auroc, auprc
                metric_rows.append(row)
                trep(1.0, f"Task {i + 1}/{n_tasks} '{task}': done")
    finally:
        if old_threads is not None:
            import torch

            torch.set_num_threads(old_threads)

    rep(0.99, "Assembling the predictions")
    predictions = pd.concat(frames, ignore_index=True)
    predictions["label"] = predictions["label"].astype(np.int64)
    predictions["score"] = predictions["score"].astype(np.float64)
    metrics = pd.DataFrame(metric_rows)
    result = TrainResult(
        predictions=predictions, metrics=metrics, model_hashes=hashes, params=params, seed=int(spec.seed),
        kind=spec.kind, device=device, features=features, tasks=dict(tasks), patient_id=spec.patient_id,
        split_sizes=sizes, details=details, notes=notes, versions=package_versions(),
        elapsed_seconds=time.perf_counter() - t0)
    rep(1.0, f"Trained {n_tasks} {MODEL_LABELS[spec.kind].lower()} model(s)")
    return result
