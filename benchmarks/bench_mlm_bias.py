"""Benchmark of the log-probability bias probe (issue 3, METHODS §4): sentences scored per second.

The shipped template list (445 template–attribute pairs × 8 gendered words = 3,560 scores, each needing a target
and a prior sentence: 7,120 sentences) on a randomly initialised BERT of a chosen shape, single CPU thread:

* **FairDesk** — ``log_probability_scores``: tokenizer offsets, identical sequences run once (one prior per template
  and mask count; all words of equal piece count in one pass), length-sorted padded batches, LM head only at the
  needed positions.
* **one sentence per call** — ``score_sentence`` for a sample of scores: two forward passes per score (target,
  prior), one sentence each, the full LM head; like the authors' release. Rate extrapolated from the sample.
* **raw batched forward** — the very token sequences FairDesk runs, pre-tokenized, through plain
  ``model(input_ids, attention_mask).logits`` in batches of the same size: the floor for FairDesk's own overheads.
* **raw batched forward, no caching** — all 7,120 sentences batched the same way, for the share of the speed-up
  that caching gives.

Aims: FairDesk ≥ 10× the one-sentence loop, and FairDesk time ≤ 1.5 × the raw batched forward of its sequences.

``--validity RUNS`` simulates score tables (:func:`fairdesk.core.synthetic.mlm_sim.simulate_probe_scores`: the shipped
categories' template counts, 5 attributes, 4 word pairs) and prints how often categories are flagged under template
noise with zero mean bias (per category and per audit, binomial 95% CIs) for the default test over templates and
for the release's per-sentence signed-rank test (issue 9, finding 3), and the power on planted leans;
``--skew RUNS`` (issue 22) measures the template test per category at 8, 9, 10, 12 and 15 templates under the
template laws of :data:`SKEW_CELLS` (the named laws of :data:`fairdesk.core.synthetic.mlm_sim.TEMPLATE_LAWS`, the
edge of the stated law space and ``space``, a law drawn from it per category; template SD 0.5 nats plus a template
mean's sentence noise): size (p < 0.05 under zero mean lean), power at a lean of 0.5 nats, and false "equivalent" at
the margin (mean lean +0.25 nats), for the default test (:func:`fairdesk.core.audits.mlm_bias.template_test`: t-test
backed by Hall's skewness-corrected t with the G1 skewness) beside the rule before it and the t-test alone;
``--skew-precise RUNS`` the same sizes and powers at 8, 9, 10, 12 and 15 templates with RUNS (e.g. 60,000) categories
per cell, computed for all runs at once (checked against ``template_test`` on the first 200 of every cell);
``--no-speed`` skips the speed part.
``--planted`` also trains the planted and null corpora of the tests and prints the probe's records;
``--debiasing`` trains baseline / one-step-GRL / five-step-GRL models and prints how well a probe recovers gender
from [CLS]. Both take minutes.

Run: ``python -m benchmarks.bench_mlm_bias [--size mini|small|base] [--validity 1000] [--no-speed] [--planted]
[--debiasing] [--json OUT]``.
"""
from __future__ import annotations

import argparse
import json
import os
import time

SHAPES = {"mini": (256, 4, 4), "small": (512, 4, 8), "base": (768, 12, 12)}
MALE = ["man", "he", "male", "m"]
FEMALE = ["woman", "she", "female", "f"]


def _setup(size: str, vocab_size: int, seed: int = 0):
    import torch
    from transformers import BertConfig, BertForMaskedLM

    from fairdesk.core.models.mlm import corpus_words, vocabulary_tokenizer
    from fairdesk.core.text.templates import load_bias_templates

    tpl = load_bias_templates()
    words = corpus_words([t for c in tpl.categories for t in c.templates]
                         + [a for c in tpl.categories for a in c.attributes]) + MALE + FEMALE
    filler = [f"w{i:05d}" for i in range(max(0, vocab_size - len(words) - 100))]  # a realistic vocabulary size
    tok = vocabulary_tokenizer(words + filler)
    h, n_layers, heads = SHAPES[size]
    torch.manual_seed(seed)
    model = BertForMaskedLM(BertConfig(vocab_size=len(tok), hidden_size=h, num_hidden_layers=n_layers,
                                       num_attention_heads=heads, intermediate_size=4 * h)).eval()
    return model, tok, tpl


def _raw_forward(model, seqs, pad_id: int, batch_size: int) -> float:
    import torch

    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    batches = []
    for b in range(0, len(order), batch_size):
        idx = order[b:b + batch_size]
        T = max(len(seqs[i]) for i in idx)
        ids = torch.full((len(idx), T), pad_id, dtype=torch.long)
        att = torch.zeros((len(idx), T), dtype=torch.long)
        for r, i in enumerate(idx):
            ids[r, :len(seqs[i])] = torch.tensor(seqs[i])
            att[r, :len(seqs[i])] = 1
        batches.append((ids, att))
    t0 = time.perf_counter()
    with torch.inference_mode():
        for ids, att in batches:
            model(input_ids=ids, attention_mask=att).logits
    return time.perf_counter() - t0


def speed(size: str = "mini", vocab_size: int = 8000, batch_size: int = 64, sample: int = 120, repeats: int = 2
          ) -> dict:
    import numpy as np
    import torch

    from fairdesk.core.audits import mlm_bias as mb

    torch.set_num_threads(1)
    model, tok, tpl = _setup(size, vocab_size)
    opts = mb.ProbeOptions(batch_size=batch_size)
    mb.log_probability_scores(model, tok, tpl.select(["DNR"]), opts)  # warm-up
    t_probe = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        df = mb.log_probability_scores(model, tok, tpl, opts)
        t_probe.append(time.perf_counter() - t0)
    t_probe = min(t_probe)
    n_scores = len(df)

    _, pool, requests = mb.prepare_sequences(model, tok, tpl, opts)
    t_raw = min(_raw_forward(model, pool.seqs, tok.pad_token_id, batch_size) for _ in range(repeats))

    # no caching: every target and prior sentence of every score, batched the same way
    all_seqs = []
    for q in requests:
        ids = list(pool.seqs[q.seq])
        all_seqs.append(ids)
    t_raw_all = _raw_forward(model, all_seqs, tok.pad_token_id, batch_size)

    rng = np.random.default_rng(0)
    rows = df.iloc[rng.choice(len(df), size=min(sample, len(df)), replace=False)]
    t0 = time.perf_counter()
    for r in rows.itertuples():
        mb.score_sentence(model, tok, r.template, r.attribute, r.word)
    t_loop = (time.perf_counter() - t0) / len(rows) * n_scores  # extrapolated to all scores

    return {"size": size, "vocab": len(tok), "batch_size": batch_size, "scores": n_scores,
            "sentences": 2 * n_scores, "forward_sequences": len(pool.seqs), "seconds_fairdesk": t_probe,
            "seconds_loop_est": t_loop, "loop_sample": len(rows), "seconds_raw_forward": t_raw,
            "seconds_raw_forward_all": t_raw_all,
            "speedup_vs_loop": t_loop / t_probe, "ratio_to_raw_forward": t_probe / t_raw,
            "speedup_of_caching": t_raw_all / t_raw}


def _ci(k: int, n: int) -> tuple[float, float]:
    from scipy.stats import binomtest

    c = binomtest(k, n).proportion_ci(0.95, method="exact")
    return float(c.low), float(c.high)


def validity(runs: int = 1000, seed0: int = 0) -> dict:
    """Null flag rates (per category, per audit) and planted-lean power of the template test and of the
    release's per-sentence test, on simulated score tables."""
    from fairdesk.core.audits.mlm_bias import category_statistics
    from fairdesk.core.synthetic.mlm_sim import simulate_probe_scores

    designs = {
        "template t-test (default)": {"test": "template"},
        "per-row signed-rank, release (no minimum)": {"test": "wilcoxon", "min_templates": 2},
    }
    scenarios = [("null, template SD 0.5, noise 0.2", dict(template_sd=0.5, noise_sd=0.2)),
                 ("null, template SD 0.2, noise 0.2", dict(template_sd=0.2, noise_sd=0.2)),
                 ("null, template SD 0.0, noise 0.2", dict(template_sd=0.0, noise_sd=0.2)),
                 ("HIV lean 0.5 nats, template SD 0.5", dict(template_sd=0.5, noise_sd=0.2, bias={"HIV": 0.5})),
                 ("HIV lean 1.0 nats, template SD 0.5", dict(template_sd=0.5, noise_sd=0.2, bias={"HIV": 1.0}))]
    out: dict = {}
    for sname, kw in scenarios:
        for dname, opts in designs.items():
            t0 = time.perf_counter()
            any_flag, per, verdicts = 0, {}, {}
            for i in range(runs):
                recs = category_statistics(simulate_probe_scores(seed=seed0 + i, **kw), ("male", "female"), **opts)
                flagged = [r["category"] for r in recs if r["flagged"] and r["category"] not in (kw.get("bias") or {})]
                any_flag += bool(flagged)
                for r in recs:
                    per.setdefault(r["category"], 0)
                    verdicts.setdefault(r["category"], {"differs": 0, "equivalent": 0, "inconclusive": 0})
                    verdicts[r["category"]][r["verdict"]] += 1
                    per[r["category"]] += bool(r["flagged"])
            out[f"{sname} | {dname}"] = {
                "runs": runs, "seconds": time.perf_counter() - t0,
                "audit_false_flag_rate": any_flag / runs, "audit_ci": _ci(any_flag, runs),
                "flag_rate": {c: k / runs for c, k in per.items()},
                "flag_ci": {c: _ci(k, runs) for c, k in per.items()},
                "verdicts": verdicts}
    return out


def _t_and_previous_p(d) -> tuple[float, float]:
    """The one-sample t-test's p (as scipy.stats.ttest_1samp) and an earlier template test's p (the larger of the
    t-test's and Hall's t's with the plug-in skewness g1), for the comparison
    columns; written out with the moments so that the study spends its time in the product's test."""
    import math

    from scipy.special import stdtr

    n = len(d)
    c = d - d.mean()
    m2, m3 = float((c ** 2).sum()) / n, float((c ** 3).sum()) / n
    T = d.mean() / math.sqrt(m2 * n / (n - 1) / n)
    a = m3 / m2 ** 1.5 / math.sqrt(n)
    G = T + a * T * T / 3 + a * a * T ** 3 / 27 + a / 6   # Hall's g(T), as in mlm_bias.template_test
    p_t = float(2 * stdtr(n - 1, -abs(T)))
    return p_t, max(p_t, float(2 * stdtr(n - 1, -abs(G))))


#: The cells of :func:`skew_study`: the named laws of ``mlm_sim.TEMPLATE_LAWS`` and the edge of the stated space.
SKEW_CELLS = ("normal", "skewed", "gamma 2.5", "lognormal 0.64", "heavy", "outlying", "space", "lognormal", "twomode",
              "fresh")


def _cell_leans(cell: str, n: int, rng):
    from fairdesk.core.synthetic.mlm_sim import law_leans, template_leans

    if cell == "gamma 2.5":        # the stated space's most skewed gamma law (skewness 2.5)
        return law_leans("gamma", {"skewness": 2.5, "sign": 1.0}, n, rng)
    if cell == "lognormal 0.64":   # its most skewed lognormal law (log-SD 0.64, skewness 2.5)
        return law_leans("lognormal", {"sigma": 0.64, "sign": 1.0}, n, rng)
    return template_leans(cell, n, rng)


def skew_study(runs: int = 4000, seed: int = 0, laws: tuple[str, ...] | None = None) -> list[dict]:
    """Per-category size, power at 0.5 nats and false equivalence at the margin, per template law and number of
    templates, of the default template test, of the rule before it (t-test ∨ Hall with the plug-in skewness) and
    of the one-sample t-test alone (issue 22). ``space`` draws a law of ``mlm_sim.LAW_SPACE`` per category."""
    import numpy as np
    from scipy.special import stdtr

    from fairdesk.core.audits.mlm_bias import template_test

    noise = 0.2 * (2 / 20) ** 0.5          # a template mean's sentence noise: 5 attributes × 4 pairs, two groups
    rows = []
    for law in laws or SKEW_CELLS:
        c_i = SKEW_CELLS.index(law)    # the seed follows the cell, whichever cells are run
        for n in (6, 8, 10, 12, 15):
            rng = np.random.default_rng([seed, n, c_i])
            k = dict.fromkeys(("size", "size_prev", "size_t", "power", "power_prev", "power_t", "equiv",
                               "equiv_t"), 0)
            for _ in range(runs):
                d = 0.5 * _cell_leans(law, n, rng) + rng.normal(0.0, noise, n)
                p_t, p_prev = _t_and_previous_p(d)
                k["size"] += template_test(d, 0.05, 0.25)["p_value"] < 0.05
                k["size_prev"] += p_prev < 0.05
                k["size_t"] += p_t < 0.05
                p_t, p_prev = _t_and_previous_p(d + 0.5)
                k["power"] += template_test(d + 0.5, 0.05, 0.25)["p_value"] < 0.05
                k["power_prev"] += p_prev < 0.05
                k["power_t"] += p_t < 0.05
                e = d + 0.25                                     # a true mean lean at the margin
                k["equiv"] += template_test(e, 0.05, 0.25)["p_equivalence"] < 0.05
                se = e.std(ddof=1) / n ** 0.5
                k["equiv_t"] += max(stdtr(n - 1, -(e.mean() + 0.25) / se),
                                    stdtr(n - 1, (e.mean() - 0.25) / se)) < 0.05
            rows.append({"law": law, "templates": n, "runs": runs, **{key: v / runs for key, v in k.items()},
                         "size_ci": _ci(k["size"], runs)})
            r = rows[-1]
            print(f"{law:<15}{n:>4}  size {r['size']:.3f} [{r['size_ci'][0]:.3f}, {r['size_ci'][1]:.3f}] "
                  f"(before {r['size_prev']:.3f}, t alone {r['size_t']:.3f})  power@0.5 {r['power']:.3f} "
                  f"(before {r['power_prev']:.3f}, t {r['power_t']:.3f})  equivalent@margin {r['equiv']:.3f} "
                  f"(t {r['equiv_t']:.3f})", flush=True)
    return rows


def skew_precise(runs: int = 60_000, seed: int = 1) -> list[dict]:
    """The same cells as :func:`skew_study` (size and power at 0.5 nats), ``runs`` categories each, for Monte-Carlo
    error near ±0.002: the p's of the t-test, the first round's rule and the default are computed for all runs at once
    from the moments (the formulas of ``mlm_bias.template_test``), checked equal to ``template_test`` itself on the
    first 200 runs of every cell."""
    import numpy as np
    from scipy.special import stdtr

    from fairdesk.core.audits.mlm_bias import template_test

    def p_all(d):  # rows = runs: (t-test, first round, default)
        n = d.shape[1]
        c = d - d.mean(1, keepdims=True)
        m2, m3 = (c ** 2).mean(1), (c ** 3).mean(1)
        T = d.mean(1) / np.sqrt(m2 / (n - 1))
        g1 = m3 / m2 ** 1.5
        out = [2 * stdtr(n - 1, -np.abs(T))]
        for g in (g1, g1 * np.sqrt(n * (n - 1)) / (n - 2)):
            a = g / np.sqrt(n)
            G = T + a * T * T / 3 + a * a * T ** 3 / 27 + a / 6
            out.append(np.maximum(out[0], 2 * stdtr(n - 1, -np.abs(G))))
        return out

    noise = 0.2 * (2 / 20) ** 0.5
    rows = []
    for c_i, law in enumerate(SKEW_CELLS):
        for n in (8, 9, 10, 12, 15):
            rng = np.random.default_rng([seed, n, c_i])
            d = 0.5 * np.stack([_cell_leans(law, n, rng) for _ in range(runs)]) + rng.normal(0.0, noise, (runs, n))
            p_t, p_prev, p_new = p_all(d)
            check = [template_test(x, 0.05, 0.25)["p_value"] for x in d[:200]]
            assert np.allclose(check, p_new[:200], rtol=1e-9, atol=1e-12), law
            q_t, q_prev, q_new = p_all(d + 0.5)
            r = {"law": law, "templates": n, "runs": runs, "size": float((p_new < 0.05).mean()),
                 "size_prev": float((p_prev < 0.05).mean()), "size_t": float((p_t < 0.05).mean()),
                 "power": float((q_new < 0.05).mean()), "power_prev": float((q_prev < 0.05).mean()),
                 "power_t": float((q_t < 0.05).mean())}
            rows.append(r)
            print(f"{law:<15}{n:>4}  size {r['size']:.3f} (before {r['size_prev']:.3f}, t alone {r['size_t']:.3f})  "
                  f"power@0.5 {r['power']:.3f} (before {r['power_prev']:.3f}, t {r['power_t']:.3f})", flush=True)
    return rows


def _print_validity(res: dict) -> None:
    for key, r in res.items():
        lo, hi = r["audit_ci"]
        print(f"\n{key}  ({r['runs']} runs, {r['seconds']:.0f} s)")
        print(f"  any non-planted category flagged: {r['audit_false_flag_rate']:.3f} [{lo:.3f}, {hi:.3f}]")
        print("  " + "  ".join(f"{c} {v:.3f} [{r['flag_ci'][c][0]:.3f}, {r['flag_ci'][c][1]:.3f}]"
                               for c, v in r["flag_rate"].items()))


def planted() -> dict:
    """Train the tests' planted and null corpora (hidden 64, 2 layers) at 1,000 steps (the tests: 700) and probe
    them."""
    import tempfile
    from pathlib import Path

    import torch

    from fairdesk.core.audits.mlm_bias import run_mlm_bias_audit
    from fairdesk.core.models.mlm import MLMTrainConfig, corpus_words, synthetic_notes, train_mlm, \
        vocabulary_tokenizer
    from fairdesk.core.text.templates import load_bias_templates

    torch.set_num_threads(1)
    tpl = load_bias_templates()
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        vocabulary_tokenizer(corpus_words([t for c in tpl.categories for t in c.templates]
                                          + [a for c in tpl.categories for a in c.attributes]) + MALE + FEMALE
                             ).save_pretrained(root / "vocab")
        cfg = MLMTrainConfig(size=None, hidden_size=64, num_layers=2, num_heads=4, intermediate_size=128,
                             dropout=0.0, learning_rate=1e-3, warmup_steps=100, max_steps=1000, batch_size=64,
                             focus_words=tuple(MALE + FEMALE), focus_probability=1.0, save_every=10**9, seed=0,
                             tokenizer_from=str(root / "vocab"))
        for name, plant in (("planted", {"HIV": 0.9}), ("null", None)):
            synthetic_notes(4000, plant, seed=0, n_fillers=(0, 0)).to_csv(root / f"{name}.csv", index=False)
            t0 = time.perf_counter()
            train_mlm(root / f"{name}.csv", root / name, cfg)
            seconds = time.perf_counter() - t0
            res = run_mlm_bias_audit(root / name)
            out[name] = {"train_seconds": seconds, "records": res.table()[[
                "category", "mean_male", "mean_female", "p_value", "q_value", "effect_size", "mean_difference",
                "flagged", "verdict_text"]].to_dict(orient="records")}
    return out


def debiasing() -> dict:
    """Baseline vs adversarially debiased (one joint discriminator step, and five) on the gendered corpus."""
    import tempfile
    from pathlib import Path

    import pandas as pd
    import torch

    from fairdesk.core.models import mlm

    torch.set_num_threads(1)
    out = {}
    train = mlm.synthetic_notes(2000, None, seed=0, n_fillers=(0, 0), gendered_sentences=2)
    held = mlm.synthetic_notes(1000, None, seed=1, n_fillers=(0, 0), gendered_sentences=2)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        train.to_csv(root / "c.csv", index=False)
        mlm.vocabulary_tokenizer(mlm.corpus_words(pd.concat([train, held])["text"])).save_pretrained(root / "v")
        for seed in (0, 1):
            for name, attr, steps in (("baseline", None, 1), ("grl_1_step", "gender", 1),
                                      ("grl_5_steps", "gender", 5)):
                cfg = mlm.MLMTrainConfig(tokenizer_from=str(root / "v"), size=None, hidden_size=64, num_layers=2,
                                         num_heads=4, intermediate_size=128, dropout=0.0, learning_rate=1e-3,
                                         warmup_steps=50, max_steps=600, batch_size=64, save_every=10**9, seed=seed,
                                         attribute_column=attr, adversary_steps=steps)
                folder = root / f"{name}_{seed}"
                res = mlm.train_mlm(root / "c.csv", folder, cfg)
                model, tok = mlm.load_masked_lm(folder)
                probe = mlm.attribute_probe(mlm.encode_cls(model, tok, held["text"].tolist()),
                                            held["gender"].to_numpy())
                out[f"{name} (seed {seed})"] = {
                    "probe_accuracy": probe["accuracy"], "probe_auroc": probe["auroc"],
                    "probe_log_loss": probe["log_loss"],
                    "discriminator_accuracy_in_training": res.history[-1]["adv_accuracy"]}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_mlm_bias", description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=sorted(SHAPES), default="mini")
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--sample", type=int, default=120, help="scores timed one sentence per call")
    ap.add_argument("--planted", action="store_true", help="also train and probe the planted/null corpora")
    ap.add_argument("--validity", type=int, default=0, metavar="RUNS",
                    help="also simulate null and planted score tables RUNS times per design (flag rates with CIs)")
    ap.add_argument("--skew", type=int, default=0, metavar="RUNS",
                    help="also measure the template test's size, power and false equivalence per template law")
    ap.add_argument("--skew-precise", type=int, default=0, metavar="RUNS",
                    help="also measure size and power per template law with RUNS categories per cell (vectorised)")
    ap.add_argument("--laws", help="comma-separated template laws for --skew (default: all)")
    ap.add_argument("--no-speed", action="store_true", help="skip the speed measurement")
    ap.add_argument("--debiasing", action="store_true", help="also compare baseline and debiased [CLS] probes")
    ap.add_argument("--json", help="also write the measurements to this file")
    args = ap.parse_args(argv)
    print(f"FairDesk masked-LM bias probe benchmark: BERT-{args.size} shape, random weights, vocabulary "
          f"~{args.vocab:,}, 1 thread ({os.cpu_count()} cores on this machine)", flush=True)
    res: dict = {}
    if args.validity:
        print(f"\nvalidity: {args.validity} simulated audits per design …", flush=True)
        res["validity"] = validity(args.validity)
        _print_validity(res["validity"])
    if args.skew:
        print(f"\ntemplate laws: {args.skew} simulated categories per cell …", flush=True)
        res["skew"] = skew_study(args.skew, laws=tuple(args.laws.split(",")) if args.laws else None)
    if args.skew_precise:
        print(f"\ntemplate laws, vectorised: {args.skew_precise} simulated categories per cell …", flush=True)
        res["skew_precise"] = skew_precise(args.skew_precise)
    if args.no_speed:
        if args.json:
            with open(args.json, "w", encoding="utf-8") as handle:
                json.dump(res, handle, indent=1)
        return 0
    res["speed"] = speed(args.size, args.vocab, args.batch_size, args.sample)
    s = res["speed"]
    print(f"\n{s['scores']:,} scores = {s['sentences']:,} target/prior sentences; FairDesk runs "
          f"{s['forward_sequences']:,} distinct sequences\n")
    print(f"{'method':<46}{'seconds':>10}{'scores/s':>12}")
    for label, sec in (("FairDesk log_probability_scores", s["seconds_fairdesk"]),
                       (f"one sentence per call (est. from {s['loop_sample']})", s["seconds_loop_est"]),
                       ("raw batched forward of FairDesk's sequences", s["seconds_raw_forward"]),
                       ("raw batched forward, all sentences (no cache)", s["seconds_raw_forward_all"])):
        print(f"{label:<46}{sec:>10.2f}{s['scores'] / sec:>12.0f}")
    print(f"\nspeed-up over the one-sentence loop: {s['speedup_vs_loop']:.1f}×   (aim ≥ 10×)")
    print(f"FairDesk time / raw batched forward:  {s['ratio_to_raw_forward']:.2f}    (aim ≤ 1.5)")
    print(f"share of the speed-up from caching:    {s['speedup_of_caching']:.1f}× fewer forward seconds")
    if args.planted:
        print("\ntraining the planted and null corpora …", flush=True)
        res["planted"] = planted()
        for name, part in res["planted"].items():
            print(f"\n{name} corpus (trained in {part['train_seconds']:.0f} s)")
            print(f"{'category':<8}{'male':>9}{'female':>9}{'p':>11}{'q':>11}{'r':>8}{'Δ nats':>9}  verdict")
            for r in part["records"]:
                q = "–" if r["q_value"] is None else f"{r['q_value']:.2e}"
                print(f"{r['category']:<8}{r['mean_male']:>9.3f}{r['mean_female']:>9.3f}{r['p_value']:>11.2e}"
                      f"{q:>11}{r['effect_size']:>8.2f}{r['mean_difference']:>9.3f}  {r['verdict_text']}")
    if args.debiasing:
        print("\ntraining baseline and debiased models …", flush=True)
        res["debiasing"] = debiasing()
        print(f"\n{'model':<26}{'probe acc':>10}{'AUROC':>8}{'log loss':>10}{'disc. acc':>11}")
        for name, r in res["debiasing"].items():
            d = r["discriminator_accuracy_in_training"]
            print(f"{name:<26}{r['probe_accuracy']:>10.3f}{r['probe_auroc']:>8.3f}{r['probe_log_loss']:>10.3f}"
                  f"{'' if d is None else f'{d:.2f}':>11}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(res, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
