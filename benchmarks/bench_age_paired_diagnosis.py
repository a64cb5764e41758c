"""Diagnosis of the paired age learner (issue 27, round 6b, docs/methods.md §3): why pairing with the DNN keeps age.

Recreates commit 381f336's paired age-indep-simple learner *in this script only* (I = the DNN's body x → 64 → 32 → 8
with ReLU after each layer, C = batch norm + 8 → 2, built first from the DNN's fit seed, so the same initial weights
and minibatches as the DNN; A as in the product), trains it on one outer fold (of 3, seed-0 splits) of a fresh
cohort and logs every ``--log-every`` epochs: the accuracy on the held-out fold; the in-training adversary's loss
over its no-information prior (``La/prior``, on all training rows); a fresh adversary of the same shape trained to
convergence on the training rows' z (``fresh/prior``, in-sample); the product's held-out probes
(:func:`leakage_probes`) — R² of the age beyond the label (ridge alone and the better of ridge and boosting), of
age, and of the age beyond the label from the units active on ≥ 10% of rows only (``R2dense``); each unit's
correlation with the age beyond the label on the held-out rows; z's per-unit SD and active share (dead ReLU units);
the norm of the encoder's gradient from the classifier (``gc``) and from λ·La (``ga``, 0 when the bounded term is
capped).

Variants (``--variants``, comma-separated): ``paired`` (381f336), ``dnn`` (the DNN itself; = paired at λ = 0),
``kept`` (the product's learner: its own I and C, with the DNN's seed), ``random-init`` (paired minibatches only, I
and C initialised at random), ``bn-adv`` (A's input standardised by batch norm), ``lr-adv`` (A's learning rate ×10),
``bn-lr-adv`` (both), ``k20`` (20 adversary steps per minibatch), ``fresh-adv`` (A re-initialised every epoch),
``unbounded`` (000's −λ·La), ``calibrated`` (:func:`calibrated_terms`). Example (the numbers in docs/methods.md,
round 6b)::

    PYTHONPATH=. OMP_NUM_THREADS=1 python -m benchmarks.bench_age_paired_diagnosis --cohort independent \\
        --lams 0.3,1,3 --variants paired,lr-adv --log-every 2 --out paired.json
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np


def new_adversary(variant):
    """A as in the product (mlp 9 → 16 → 1); ``bn-adv``: its input standardised first (batch norm without
    affine), so it sees z's units on the scale of the label column."""
    import torch.nn as nn

    from fairdesk.core.models import age_independent as ai

    if variant in ("bn-adv", "bn-lr-adv"):
        return nn.Sequential(nn.BatchNorm1d(9, affine=False), ai.mlp([9, 16, 1]))
    return ai.mlp([9, 16, 1])


def calibrated_terms(method, nets, zs, age_std, settings, y=None):
    """``calibrated``: the adversary's error after the best in-batch affine recalibration of its output, per label
    class (least squares of age on A(z) within each class): at most the within-class variance (the prior), and equal
    to it only when A(z) is uncorrelated with age — a miscalibrated but informed adversary (e.g. one that the
    interpreter pushed to overshoot, whose plain squared error is back at the prior) still counts as informed."""
    import torch

    from fairdesk.core.models import age_independent as ai

    p = nets["A"](ai._adversary_input(zs[0], y, settings)).squeeze(1)
    total = torch.zeros((), dtype=p.dtype)
    for c in (0, 1):
        m = y == c
        if int(m.sum()) < 3:
            continue
        pc, ac = p[m] - p[m].mean(), age_std[m] - age_std[m].mean()
        beta = (pc * ac).sum() / ((pc ** 2).sum() + 1e-8)
        total = total + ((ac - beta * pc) ** 2).sum()
    return {"mse": total / len(y)}


def fit_logged(Xs, y, age_std, Xte, yte, age_te_std, groups_te, lam, seed, variant, epochs, log_every, probe_seed):
    """One fit of ``variant`` with its log (a list of snapshots); ``calibrated`` swaps the adversary's terms for
    the run only."""
    from fairdesk.core.models import age_independent as ai

    original = ai.adversary_terms
    if variant == "calibrated":
        ai.adversary_terms = calibrated_terms
    try:
        return _fit_logged(Xs, y, age_std, Xte, yte, age_te_std, groups_te, lam, seed, variant, epochs, log_every,
                           probe_seed)
    finally:
        ai.adversary_terms = original


def _fit_logged(Xs, y, age_std, Xte, yte, age_te_std, groups_te, lam, seed, variant, epochs, log_every, probe_seed):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    from fairdesk.core.audits.age_independence import best_r2, leakage_probes
    from fairdesk.core.models import age_independent as ai

    s = ai.LearnerSettings(lam=lam, epochs=epochs, k_adv=20 if variant == "k20" else 5,
                           adversary_term="unbounded" if variant == "unbounded" else "bounded")
    rng = np.random.default_rng(seed)
    torch.manual_seed(int(rng.integers(2 ** 31)))
    n = Xs.shape[1]
    if variant == "random-init":  # paired minibatches only: draw the DNN's init, then a different one for I and C
        nn.Sequential(nn.Linear(n, 64), nn.Linear(64, 32), nn.Linear(32, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))
    if variant == "dnn":
        net = nn.Sequential(nn.Linear(n, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 8), nn.ReLU(),
                            nn.BatchNorm1d(8), nn.Linear(8, 2))
        nets = {"I": net[:6], "C": net[6:]}
    else:
        nets = {"I": nn.Sequential(nn.Linear(n, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 8),
                                   nn.ReLU()),
                "C": nn.Sequential(nn.BatchNorm1d(8), nn.Linear(8, 2))}
    if variant == "kept":  # the learner kept by the product (own layers; seeded here with the DNN's seed)
        nets = ai.build_nets("simple", n, s)
    else:
        nets["A"] = new_adversary(variant)
    opts = ai.make_optimisers("simple", nets, s)
    if variant in ("lr-adv", "bn-lr-adv"):  # the adversary's learning rate x10
        opts["A"] = torch.optim.Adam(nets["A"].parameters(), lr=10 * s.lr)
    xt, yt, at = (torch.as_tensor(Xs, dtype=torch.float32), torch.as_tensor(y), torch.as_tensor(age_std,
                                                                                               dtype=torch.float32))
    xe = torch.as_tensor(Xte, dtype=torch.float32)
    prior = ai.adversary_prior("simple", y, age_std, s)
    ipar = list(nets["I"].parameters())
    log = []

    def snapshot(epoch):
        for v in nets.values():
            v.eval()
        with torch.no_grad():
            ztr, zte = nets["I"](xt), nets["I"](xe)
            la_cur = float(ai.adversary_loss("simple", nets, [ztr], at, s, yt)[0])
        # a fresh adversary (same architecture) trained to convergence on the current z, full batch
        torch.manual_seed(12345)
        A2 = ai.mlp([9, 16, 1]); o2 = torch.optim.Adam(A2.parameters(), lr=1e-2)
        inp = ai._adversary_input(ztr.detach(), yt, s)
        for _ in range(300):
            o2.zero_grad(); l2 = ((A2(inp).squeeze(1) - at) ** 2).mean(); l2.backward(); o2.step()
        A2.eval()
        with torch.no_grad():
            la_fresh = float(((A2(inp).squeeze(1) - at) ** 2).mean())
        # gradient on I from Lc and from λ·La (train mode, full training rows)
        for v in nets.values():
            v.train()
        z = nets["I"](xt)
        lc = F.cross_entropy(nets["C"](z), yt)
        la = ai.combine_adversary("simple", ai.adversary_terms("simple", nets, [z], at, s, yt), s,
                                  prior if s.adversary_term == "bounded" else None)
        g_c = torch.autograd.grad(lc, ipar, retain_graph=True)
        g_a = torch.autograd.grad(lam * la, ipar, allow_unused=True)
        gn = lambda g: float(torch.sqrt(sum((t ** 2).sum() for t in g if t is not None)))
        for v in nets.values():
            v.eval()
        Z, Ze = ztr.numpy().astype(float), zte.numpy().astype(float)
        lp = leakage_probes(Z, y, age_std, Ze, yte, age_te_std, groups_te, seed=probe_seed)
        from sklearn.metrics import r2_score
        active = (Z > 0).mean(0)
        dense = active >= 0.1
        lp_d = leakage_probes(Z[:, dense], y, age_std, Ze[:, dense], yte, age_te_std, groups_te, seed=probe_seed)
        corr = [float(np.corrcoef(Ze[:, k], age_te_beyond)[0, 1]) if Ze[:, k].std() > 0 else 0.0
                for k in range(Z.shape[1])]
        with torch.no_grad():
            acc = float(((nets["C"](zte).argmax(1)).numpy() == yte).mean())
        rec = {"epoch": epoch, "acc": acc, "La_adv": la_cur / prior, "La_fresh": la_fresh / prior,
               "r2_beyond_ridge": float(r2_score(age_te_beyond, lp["beyond_label"]["ridge"])),
               "r2_beyond_best": best_r2(lp["beyond_label"], age_te_beyond),
               "r2_age_best": best_r2(lp["age"], age_te_std),
               "r2_beyond_dense_units": best_r2(lp_d["beyond_label"], age_te_beyond),
               "sparse_units": int((~dense).sum()),
               "unit_corr_beyond": [round(c, 2) for c in corr],
               "dead_units": int(((Z > 0).mean(0) < 0.01).sum()),
               "active_share": [round(float(v), 2) for v in (Z > 0).mean(0)],
               "unit_sd": [round(float(v), 3) for v in Z.std(0)],
               "grad_c": gn(g_c), "grad_a": gn(g_a)}
        for v in nets.values():
            v.train()
        return rec

    age_te_beyond = age_te_std - np.array([age_std[y == c].mean() for c in yte])
    log.append(snapshot(0))
    for epoch in range(epochs):
        if variant == "fresh-adv":
            nets["A"] = new_adversary(variant); opts["A"] = torch.optim.Adam(nets["A"].parameters(), lr=s.lr)
        for idx in ai._batches(len(y), s.batch_size, rng):
            b = torch.as_tensor(idx)
            if variant == "dnn":
                opts["main"].zero_grad()
                F.cross_entropy(nets["C"](nets["I"](xt[b])), yt[b]).backward(); opts["main"].step()
            else:
                ai.train_step("simple", nets, opts, xt[b], yt[b], at[b], s, None, prior)
        if (epoch + 1) % log_every == 0:
            log.append(snapshot(epoch + 1))
    return log


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cohort", default="strong", help="strong, sessions, independent or independent-sessions")
    p.add_argument("--participants", type=int, default=200)
    p.add_argument("--folds", default="0", help="outer folds of 3 (seed 0 splits), comma-separated")
    p.add_argument("--lams", default="0,1,3")
    p.add_argument("--variants", default="paired")
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    sys.path.insert(0, ".")
    from benchmarks.bench_age_fresh_cohorts import COHORTS
    from fairdesk.core.audits.age_independence import _METHOD_INDEX, _seed, group_folds
    from fairdesk.core.synthetic.age_cohort import make_age_cohort

    kw = COHORTS[a.cohort]
    t = make_age_cohort(n_participants=a.participants, n_features=100, **kw)
    feats = [c for c in t.columns if c not in ("label", "age", "participant_id")]
    X, y = t[feats].to_numpy(float), t["label"].to_numpy(int)
    age, g = t["age"].to_numpy(float), t["participant_id"].to_numpy()
    out = []
    for fold, v in [(int(f), v) for f in a.folds.split(",") for v in a.variants.split(",")]:
        sp = group_folds(g, y, 3, 1, 0)[fold]
        tr, te = sp.train, sp.test
        mu, sd = X[tr].mean(0), X[tr].std(0); sd[sd == 0] = 1
        am, asd = age[tr].mean(), age[tr].std()
        seed = _seed(0, 0, fold, _METHOD_INDEX["dnn"])  # the DNN's fit seed (381f336's fit_seed)
        for lam in [float(x) for x in a.lams.split(",")]:
            log = fit_logged((X[tr] - mu) / sd, y[tr], (age[tr] - am) / asd, (X[te] - mu) / sd, y[te],
                             (age[te] - am) / asd, g[te], lam, seed, v, a.epochs, a.log_every,
                             _seed(0, 0, fold, 1000))
            for r in log:
                print(f"fold {fold} {v:12s} lam={lam:<4g} ep={r['epoch']:3d} acc={r['acc']:.3f} "
                      f"La/prior={r['La_adv']:.3f} "
                      f"fresh/prior={r['La_fresh']:.3f} R2beyond ridge={r['r2_beyond_ridge']:.3f} "
                      f"best={r['r2_beyond_best']:.3f} R2age={r['r2_age_best']:.3f} "
                      f"R2dense={r['r2_beyond_dense_units']:.3f} nsparse={r['sparse_units']} "
                      f"corr={r['unit_corr_beyond']} dead={r['dead_units']} "
                      f"gc={r['grad_c']:.3f} ga={r['grad_a']:.3f} sd={r['unit_sd']}", flush=True)
            out.append({"variant": v, "lam": lam, "fold": fold, "log": log})
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
