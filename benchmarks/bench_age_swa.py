"""The last epochs of one fit against their weight average (issue 27, round 7, docs/methods.md §3).

On one outer fold (of 3, the protocol's seed-0 splits) of a fresh cohort, fits the DNN and the age learners exactly
as the protocol does (``fit_method`` with the protocol's fit seed for that fold and method) and, at the end of each
of the last epochs, evaluates the network as it stands (the *last iterate*, its own running batch-norm statistics;
the product's model is the one at epoch 40): accuracy on the held-out participants and the product's leakage probes'
held-out R² of age and of the age beyond the label (:func:`leakage_probes`, the fold's probe seed), and the
accuracy on the training rows. It also builds
round 7's candidate, not adopted (commit 36b1d74 of branch wt-age5 built it into the module): each predicting
network (the DNN; a learner's I and C) averaged over its weights at the end of each of the last quarter of epochs
(``torch.optim.swa_utils.AveragedModel``), batch norm recomputed on the training rows (``update_bn``, one full
batch) — and evaluates it and the last iterate with its batch norm recomputed the same way (which separates the two
parts of the candidate). The epochs are observed by wrapping the module's ``train_step`` for the run (it sees the
networks after each minibatch), so the training is the product's own, bit for bit.

    PYTHONPATH=. OMP_NUM_THREADS=1 python -m benchmarks.bench_age_swa --cohort independent --lams 0.3,1,3 \\
        [--methods dnn,simple,entropy] [--fold 0] [--log-from 31] [--weight-decay W] [--out swa.json]
"""
from __future__ import annotations

import argparse
import copy
import json

import numpy as np


def _predicting(method, nets):
    return ["net"] if method == "dnn" else [k for k in nets if k[0] in "IC"]


def _predictor(method, nets, split):
    """The module x → logits over a method's networks (for ``update_bn``)."""
    import torch.nn as nn

    from fairdesk.core.models import age_independent as ai

    if method == "dnn":
        return nets["net"]

    class Predictor(nn.Module):
        def __init__(self):
            super().__init__()
            self.parts = nn.ModuleDict({k: nets[k] for k in _predicting(method, nets)})

        def forward(self, x):
            return self.parts["C"](ai.encode(method, self.parts, x, split)[0])

    return Predictor()


def _evaluate(method, nets, split, Xtr, Xte, ytr, yte, age_tr, age_te, groups_te, probe_seed, recompute_bn=False):
    import torch
    from torch.optim.swa_utils import update_bn

    from fairdesk.core.audits.age_independence import best_r2, label_age, leakage_probes
    from fairdesk.core.models import age_independent as ai

    nets = copy.deepcopy(nets)
    xtr, xte = (torch.as_tensor(v, dtype=torch.float32) for v in (Xtr, Xte))
    if recompute_bn:
        update_bn([xtr], _predictor(method, nets, split))
    for v in nets.values():
        v.eval()
    with torch.no_grad():
        if method == "dnn":
            logits, fit_logits = nets["net"](xte), nets["net"](xtr)
            ztr, zte = nets["net"][:6](xtr), nets["net"][:6](xte)
        else:
            ztr, zte = (ai.encode(method, nets, v, split)[0] for v in (xtr, xte))
            logits, fit_logits = nets["C"](zte), nets["C"](ztr)
    lp = leakage_probes(ztr.numpy().astype(float), ytr, age_tr, zte.numpy().astype(float), yte, age_te, groups_te,
                        seed=probe_seed)
    beyond = np.asarray(age_te, float) - label_age(ytr, age_tr, yte)
    return {"accuracy": float((logits.argmax(1).numpy() == yte).mean()),
            "training_accuracy": float((fit_logits.argmax(1).numpy() == ytr).mean()),
            "age_r2": best_r2(lp["age"], age_te), "beyond_r2": best_r2(lp["beyond_label"], beyond)}


def run(cohort: str, methods, lams, fold: int = 0, participants: int = 200, log_from: int = 31,
        seed: int = 0, weight_decay: float = 0.0) -> list[dict]:
    from benchmarks.bench_age_fresh_cohorts import COHORTS
    from fairdesk.core.audits import age_independence as ap
    from fairdesk.core.models import age_independent as ai
    from fairdesk.core.synthetic.age_cohort import make_age_cohort

    df = make_age_cohort(n_participants=participants, n_features=100, **COHORTS[cohort])
    data = ap._prepare(df, "label", "age", "participant_id", None)
    X, y, age, groups = data["X"], data["y"], data["age"], data["groups"]
    sp = ap.group_folds(groups, y, 3, 1, seed)[fold]
    tr, te = sp.train, sp.test
    mean, sd = X[tr].mean(0), X[tr].std(0)
    sd[sd == 0] = 1.0
    Xtr, Xte = (X[tr] - mean) / sd, (X[te] - mean) / sd
    probe_seed = ap._seed(seed, 0, fold, 1000)
    n_batches = len(ai._batches(len(tr), ai.LearnerSettings().batch_size, np.random.default_rng(0)))
    out = []
    for method in methods:
        for lam in ([0.0] if method == "dnn" else lams):
            settings = ai.LearnerSettings(lam=lam, device="cpu", weight_decay=weight_decay)
            log, calls, averaged, final = [], [0], {}, {}
            original = ai.train_step

            def observed(m, nets, opts, x, yb, ab, s, split=None, prior=None):
                parts = original(m, nets, opts, x, yb, ab, s, split, prior)
                calls[0] += 1
                epoch = calls[0] // n_batches
                if calls[0] % n_batches:
                    return parts
                if epoch > s.epochs - max(1, s.epochs // 4):  # the candidate: the last quarter's weights averaged
                    from torch.optim.swa_utils import AveragedModel

                    for k in _predicting(m, nets):
                        averaged.setdefault(k, AveragedModel(nets[k])).update_parameters(nets[k])
                ev = (m, nets, split, Xtr, Xte, y[tr], y[te], age[tr], age[te], groups[te], probe_seed)
                if epoch >= log_from:
                    log.append({"epoch": epoch, **_evaluate(*ev)})
                if epoch == s.epochs:
                    log.append({"epoch": "last, batch norm recomputed", **_evaluate(*ev, recompute_bn=True)})
                    final.update(nets=nets, split=split)
                return parts

            ai.train_step = observed
            try:
                ai.fit_method(method, X[tr], y[tr], age[tr], settings,
                              seed=ap._seed(seed, 0, fold, ap._METHOD_INDEX[method]))
            finally:
                ai.train_step = original
            nets = dict(final["nets"]) | {k: avg.module for k, avg in averaged.items()}
            averaged = _evaluate(method, nets, final["split"], Xtr, Xte, y[tr], y[te], age[tr], age[te], groups[te],
                                 probe_seed, recompute_bn=True)
            iterates = [r for r in log if isinstance(r["epoch"], int)]
            summary = {k: {"min": min(r[k] for r in iterates), "max": max(r[k] for r in iterates),
                           "mean": float(np.mean([r[k] for r in iterates]))} for k in ("accuracy", "age_r2",
                                                                                        "beyond_r2",
                                                                                        "training_accuracy")}
            out.append({"cohort": cohort, "fold": fold, "method": method, "lambda": lam, "weight_decay": weight_decay,
                        "epochs": log,
                        "last_iterates": summary, "averaged": averaged})
            ranges = (f"{k} {v['min']:.3f} … {v['max']:.3f} (mean {v['mean']:.3f})" for k, v in summary.items())
            print(f"{cohort} fold {fold} {method:8s} λ={lam:<4g} last iterates (epochs {log_from}–"
                  f"{settings.epochs}): " + ", ".join(ranges)
                  + f"; epoch {settings.epochs} {', '.join(f'{k} {iterates[-1][k]:.3f}' for k in summary)}"
                  + f"; averaged {', '.join(f'{k} {v:.3f}' for k, v in averaged.items())}", flush=True)
    return out


def main(argv=None):
    import torch

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cohort", default="independent")
    p.add_argument("--methods", default="dnn,simple,entropy")
    p.add_argument("--lams", default="0.3,1")
    p.add_argument("--fold", type=int, default=0)
    p.add_argument("--participants", type=int, default=200)
    p.add_argument("--log-from", type=int, default=31)
    p.add_argument("--weight-decay", type=float, default=0.0, help="AdamW decay of the predicting networks")
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    res = run(a.cohort, a.methods.split(","), [float(v) for v in a.lams.split(",")], a.fold, a.participants,
              a.log_from, weight_decay=a.weight_decay)
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
